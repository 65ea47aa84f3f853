//! The MCP server: [`Server`] implements `rmcp`'s `ServerHandler` by hand
//! (the tools are the project's, known only at run time), and
//! [`serve_stdio`] runs it over stdin/stdout.
//!
//! - `tools/list`: [`catalog::tools`], 50 per page.
//! - `tools/call`: a project tool by its own name, or `glee_tool {name,
//!   params}`, both through [`Engine::call`](crate::engine::Engine::call)
//!   on a thread of their own ([`Calls::run`](super::call::Calls::run)); `glee_tools_list`;
//!   `glee_tool_create {name, definition}` through [`crate::create`].
//!   Calls run concurrently; `notifications/cancelled` kills the call's
//!   process tree; a progress token gets `notifications/progress`.
//! - An MCP caller never approves anything: a tool that needs approval
//!   answers `approval_required` with the command a person runs
//!   (`glovebox approve NAME`).
//! - Protocol: `2025-11-25` through the `initialize` handshake with today's
//!   clients, and every newer revision `rmcp` implements.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use super::call::Progress;
use super::catalog::{self, GLEE_TOOL, GLEE_TOOLS_LIST, GLEE_TOOL_CREATE};
use super::live::Live;
use super::reply;
use crate::engine::Caller;
use crate::run::SecretSource;

/// Errors running the stdio server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The client never completed the `initialize` handshake.
    #[error("the MCP session did not start")]
    Initialize {
        /// Why.
        #[source]
        source: Box<rmcp::service::ServerInitializeError>,
    },
    /// The server task failed.
    #[error("the MCP server stopped unexpectedly")]
    Join {
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// One MCP session's handler over the shared, live project.
#[derive(Debug, Clone)]
pub struct Server {
    live: Arc<Live>,
}

const INSTRUCTIONS: &str = "Each tool runs jailed by glovebox under the permissions its manifest declares (files, network, secrets, limits). A failed call answers isError with a JSON error {kind, message, details}: fix the parameters for input_invalid; approval_required needs a person to run the command it names.";

impl Server {
    /// A handler serving `live`.
    pub fn new(live: Arc<Live>) -> Self {
        Server { live }
    }

    fn caller(ctx: &RequestContext<RoleServer>) -> Caller {
        // The client names itself: both strings go through the audit
        // log's one sanitiser before anything logs them.
        let client = ctx
            .peer
            .peer_info()
            .map(|i| {
                let name = crate::audit::client_label(&i.client_info.name);
                match i.client_info.version.as_str() {
                    "" => name,
                    v => format!("{name}/{}", crate::audit::client_label(v)),
                }
            })
            .unwrap_or_else(|| "unknown".into());
        Caller {
            id: format!("mcp:{client}"),
            // No --yes over MCP: approvals are a person's, out of band.
            approved: false,
            secrets: SecretSource::Environment,
            cancel: None,
            ..Caller::default()
        }
    }

    async fn run_tool(
        &self,
        name: String,
        params: Value,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let progress = ctx.meta.get_progress_token().map(|token| Progress {
            peer: ctx.peer.clone(),
            token,
        });
        let caller = Self::caller(&ctx);
        let outcome = self
            .live
            .calls()
            .run(
                self.live.engine(),
                name,
                params,
                caller,
                ctx.ct.clone(),
                progress,
            )
            .await
            .map_err(|e| ErrorData::internal_error(crate::run::error_chain(&e), None))?;
        Ok(reply::outcome(&outcome))
    }

    async fn create_tool(&self, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        let Some(Value::String(name)) = args.get("name").cloned() else {
            return Ok(reply::bad_arguments(
                GLEE_TOOL_CREATE,
                "`name` (a string) is required",
            ));
        };
        let Some(definition @ Value::Object(_)) = args.get("definition").cloned() else {
            return Ok(reply::bad_arguments(
                GLEE_TOOL_CREATE,
                "`definition` (an object with the fields of tool.yml) is required",
            ));
        };
        let engine = self.live.engine();
        let tool = name.clone();
        let created = tokio::task::spawn_blocking(move || {
            crate::create::create(engine.project(), &tool, definition, "mcp")
        })
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        match created {
            Ok(c) => {
                if let Err(e) = self.live.reload().await {
                    eprintln!("glovebox: created {name} but cannot reload the project: {e}");
                }
                let answer = json!({
                    "ok": true,
                    "tool": c.name,
                    "file": c.file,
                    "approval_required": true,
                    "approve_with": format!("glovebox approve {}", c.name),
                });
                Ok(reply::builtin(&answer, answer.clone()))
            }
            Err(e) => Ok(reply::create_failure(&e)),
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        let mut info = InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        // The newest revision with an initialize handshake; a client asking
        // for another supported revision gets that one.
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.server_info = Implementation::new("glovebox", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.live.add_peer(ctx.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let engine = self.live.engine();
        let cursor = request.and_then(|r| r.cursor);
        let (tools, next) = catalog::page(catalog::tools(engine.project()), cursor.as_deref())
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            GLEE_TOOLS_LIST => {
                let list = catalog::summaries(self.live.engine().project());
                Ok(reply::builtin(&list, json!({"tools": list})))
            }
            GLEE_TOOL => match (args.get("name"), args.get("params")) {
                (
                    Some(Value::String(name)),
                    params @ (None | Some(Value::Object(_) | Value::Null)),
                ) => {
                    let params = params.cloned().unwrap_or(Value::Null);
                    self.run_tool(name.clone(), params, ctx).await
                }
                (Some(Value::String(_)), Some(_)) => Ok(reply::bad_arguments(
                    GLEE_TOOL,
                    "`params` must be an object",
                )),
                _ => Ok(reply::bad_arguments(
                    GLEE_TOOL,
                    "`name` (a string) is required",
                )),
            },
            GLEE_TOOL_CREATE => self.create_tool(args).await,
            name => {
                let engine = self.live.engine();
                let project = engine.project();
                let known = project.tools.iter().any(|t| t.name == name)
                    || project.rejected.iter().any(|r| r == name);
                if !known {
                    return Err(reply::unknown_tool(name));
                }
                self.run_tool(name.to_string(), Value::Object(args), ctx)
                    .await
            }
        }?;
        Ok(CallToolResponse::from(result))
    }
}

/// Serves `live` over stdin/stdout until the client closes stdin. stdout
/// carries MCP messages only; diagnostics go to stderr.
pub async fn serve_stdio(live: Arc<Live>) -> Result<(), McpError> {
    let running = Server::new(live)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Initialize {
            source: Box::new(e),
        })?;
    running
        .waiting()
        .await
        .map_err(|source| McpError::Join { source })?;
    Ok(())
}
