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
//! - Protocol: every revision `rmcp` implements: `2025-11-25` and older
//!   through the `initialize` handshake, and `2026-07-28` through
//!   `server/discover` and per-request `_meta`. On every revision: `ping`
//!   is answered (2026-07-28 dropped it, but clients still send it), the
//!   tool list changes reach the client (`notifications/tools/list_changed`
//!   to an initialized session; on 2026-07-28 on the client's
//!   `subscriptions/listen` stream), and the audit `caller` is
//!   `mcp:<client name>` from the request's client info (`_meta`) or, on
//!   the handshake revisions, from `initialize`. [`Session`] wraps
//!   [`Server`] for what `rmcp`'s dispatch does not do by itself (ping on
//!   2026-07-28, `method not found: X` messages).
//! - A stdio client that only discovers or pings and closes stdin ends the
//!   session cleanly (exit 0).

pub mod catalog;
pub mod compat;
pub mod reply;
pub mod sessions;
pub mod stdio;

use std::sync::Arc;

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientNotification, ClientRequest,
    CustomRequest, CustomResult, ErrorCode, Implementation, InitializeResult, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult,
    SubscriptionFilter,
};
use rmcp::service::{
    NotificationContext, RequestContext, ServerInitializeError, SubscriptionContext,
};
use rmcp::{ErrorData, RoleServer, ServerHandler, Service, ServiceExt};
use serde_json::{json, Value};

use super::call::Progress;
use super::live::Live;
use crate::engine::Caller;
use crate::run::SecretSource;
use catalog::{GLEE_TOOL, GLEE_TOOLS_LIST, GLEE_TOOL_CREATE};

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

/// The audit `caller` of an MCP request: `mcp:` and the client's name
/// (from the request's `_meta` on 2026-07-28, from `initialize` before),
/// made safe for a log line; `mcp:unknown` when the client gave none.
pub fn caller_id(client: Option<&str>) -> String {
    match client.filter(|n| !n.is_empty()) {
        Some(name) => format!("mcp:{}", crate::audit::client_label(name)),
        None => "mcp:unknown".into(),
    }
}

/// Audits a tool call the stdio screen answered busy (it never reached
/// the engine): one line with its parameters, written off the runtime.
fn audit_refused(live: Arc<Live>) -> stdio::OnRefused {
    Arc::new(move |r: stdio::Refused| {
        let live = live.clone();
        tokio::task::spawn_blocking(move || {
            let engine = live.engine();
            let caller = Caller {
                id: caller_id(r.client.as_deref()),
                ..Caller::default()
            };
            let name = live.offer().project_name(&r.name);
            let outcome = super::call::busy(&name, live.calls().limits());
            if let Err(e) = engine.log_not_started(&name, &r.params, &caller, &outcome) {
                eprintln!(
                    "glovebox: a call refused as busy could not be audited: {}",
                    crate::run::error_chain(&e)
                );
            }
        });
    })
}

/// One MCP session's handler over the shared, live project.
#[derive(Debug, Clone)]
pub struct Server {
    live: Arc<Live>,
    /// The reasons this session was told why a wrapped MCP server offers
    /// no tools (each once: see [`Server::tell_failures`]).
    told: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

const INSTRUCTIONS: &str = "Each tool runs jailed by glovebox under the permissions its manifest declares (files, network, secrets, limits). A failed call answers isError with a JSON error {kind, message, details}: fix the parameters for input_invalid; approval_required needs a person to run the command it names.";

impl Server {
    /// A handler serving `live`.
    pub fn new(live: Arc<Live>) -> Self {
        Server {
            live,
            told: Arc::default(),
        }
    }

    /// Sends the client, with its tool list, why each wrapped MCP server
    /// that offers no tools offers none (a start that failed, a missing
    /// approval), as an `error` log message (`notifications/message`);
    /// each reason once per session. The reason is glovebox's, with what
    /// it quotes of the server made printable
    /// ([`crate::mcpwrap::relayed`]).
    async fn tell_failures(&self, ctx: &RequestContext<RoleServer>) {
        let failures = crate::mcpwrap::failures(self.live.engine().project());
        for (_, why) in failures {
            let first = self
                .told
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(why.message.clone());
            if first {
                log_error(&ctx.peer, crate::mcpwrap::relayed(&why.message)).await;
            }
        }
    }

    fn caller(ctx: &RequestContext<RoleServer>) -> Caller {
        Caller {
            id: caller_id(ctx.client_info().map(|i| i.name).as_deref()),
            // No --yes over MCP: approvals are a person's, out of band.
            approved: false,
            secrets: SecretSource::Environment,
            cancel: None,
            trace: ctx
                .meta
                .get("traceparent")
                .and_then(Value::as_str)
                .and_then(crate::caller::traceparent),
            ..Caller::default()
        }
    }

    /// Runs tool `name`; `by_name`: called as itself (not through
    /// `glee_tool`), so its own `outputSchema` binds the answer.
    async fn run_tool(
        &self,
        name: String,
        params: Value,
        ctx: RequestContext<RoleServer>,
        by_name: bool,
    ) -> Result<CallToolResult, ErrorData> {
        let declares_output_schema = by_name
            && self
                .live
                .engine()
                .project()
                .tools
                .iter()
                .find(|t| t.name == name)
                .is_some_and(|t| crate::export::mcp_tool(&t.manifest).output_schema.is_some());
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
        Ok(reply::checked_outcome(&outcome, declares_output_schema))
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
                Ok(reply::meta_answer(&answer, answer.clone()))
            }
            Err(e) => Ok(reply::create_failure(&e)),
        }
    }
}

impl ServerHandler for Server {
    // `logging`: see [`log_error`].
    #[allow(deprecated)]
    fn get_info(&self) -> InitializeResult {
        let mut info = InitializeResult::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        // The newest revision with an initialize handshake; a client asking
        // for another supported revision gets that one.
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.server_info = Implementation::new("glovebox", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(match self.live.engine().project().unread_notice() {
            Some(notice) => format!("{INSTRUCTIONS} Note: {notice}."),
            None => INSTRUCTIONS.into(),
        });
        info
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.live.add_peer(ctx.peer);
    }

    /// Accepted (glovebox's log messages are errors only: why a wrapped
    /// server offers no tools, which the client should see whatever
    /// level it asked for).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(not_found("prompts/list"))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(not_found("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(not_found("resources/templates/list"))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // `rmcp` reads a known method whose params do not fit its type as
        // a custom request: say so, not "method not found".
        if let Some(method) = typed_method(&request.method) {
            return Err(ErrorData::invalid_params(
                format!("invalid params: the params do not match those of MCP `{method}`; check the field names and types"),
                None,
            ));
        }
        Err(not_found(&request.method))
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().tools_list_changed == Some(true) {
            self.live.add_listener(context.sink().clone());
        }
        tokio::select! {
            _ = context.cancelled() => {}
            _ = self.live.subscriptions_ended() => {}
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A project tainted since it was loaded lists nothing.
        crate::planted::hidden(self.live.root())
            .map_err(|e| ErrorData::internal_error(crate::run::error_chain(&e), None))?;
        let engine = self.live.engine();
        let cursor = request.and_then(|r| r.cursor);
        let (tools, next) = catalog::page(
            catalog::offered(engine.project(), self.live.offer()),
            cursor.as_deref(),
        )
        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        self.tell_failures(&ctx).await;
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
        let offer = self.live.offer().clone();
        let called = request.name.as_ref();
        let meta = offer.offers_meta(called).then_some(called);
        let result = match meta {
            Some(GLEE_TOOLS_LIST) => {
                let list = json!({"tools": catalog::summaries_offered(self.live.engine().project(), &offer)});
                Ok(reply::meta_answer(&list, list.clone()))
            }
            Some(GLEE_TOOL) => match (args.get("name"), args.get("params")) {
                (
                    Some(Value::String(name)),
                    params @ (None | Some(Value::Object(_) | Value::Null)),
                ) => {
                    let params = params.cloned().unwrap_or(Value::Null);
                    self.run_tool(offer.project_name(name), params, ctx, false)
                        .await
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
            Some(GLEE_TOOL_CREATE) => self.create_tool(args).await,
            _ => {
                let name = offer.project_name(called);
                let engine = self.live.engine();
                let project = engine.project();
                // A tool of an MCP server that offers none (its list awaits
                // an approval, its start failed, it is still starting) is
                // answered by the engine, which says why.
                let known = project.tools.iter().any(|t| t.name == name)
                    || project.rejected.contains(&name)
                    || crate::mcpwrap::unlisted(project, &name).is_some();
                if !known {
                    crate::serve::metrics::get().unknown_tool();
                    return Err(reply::unknown_tool(called));
                }
                self.run_tool(name, Value::Object(args), ctx, true).await
            }
        }?;
        Ok(CallToolResponse::from(result))
    }
}

/// Sends `text` to the client as an `error` log message
/// (`notifications/message`, logger `glovebox`). MCP 2026-07-28 deprecates
/// logging (SEP-2577), but it is what clients of the handshake revisions
/// show from a server; it is sent only to a client that completed
/// `initialize` (a 2026-07-28 client never sends one).
#[allow(deprecated)]
async fn log_error(peer: &rmcp::Peer<RoleServer>, text: String) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    if peer.peer_info().is_none() {
        return;
    }
    let note = LoggingMessageNotificationParam::new(LoggingLevel::Error, json!(text))
        .with_logger("glovebox");
    let _ = peer.notify_logging_message(note).await;
}

/// [`Server`] as `rmcp` serves it, with what its dispatch leaves out:
/// `ping` answered on every revision (2026-07-28 removed it from the
/// protocol, `rmcp` answers -32601 there, but clients and proxies still
/// send it), and -32601 errors saying `method not found: X`.
#[derive(Debug, Clone)]
pub struct Session(pub Server);

impl Service<RoleServer> for Session {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        if matches!(request, ClientRequest::PingRequest(_)) {
            return Ok(ServerResult::empty(()));
        }
        <Server as Service<RoleServer>>::handle_request(&self.0, request, context)
            .await
            .map_err(method_not_found)
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        <Server as Service<RoleServer>>::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.0)
    }
}

/// The client requests `rmcp` reads into a type of its own: one of these
/// arriving as a custom request had params that did not fit.
fn typed_method(method: &str) -> Option<&'static str> {
    use rmcp::model::{
        CallToolRequestMethod as CallTool, CompleteRequestMethod as Complete, ConstString,
        GetPromptRequestMethod as GetPrompt, InitializeResultMethod as Initialize,
        ListPromptsRequestMethod as ListPrompts,
        ListResourceTemplatesRequestMethod as ListTemplates,
        ListResourcesRequestMethod as ListResources, ListToolsRequestMethod as ListTools,
        ReadResourceRequestMethod as ReadResource, SetLevelRequestMethod as SetLevel,
        SubscribeRequestMethod as Subscribe, SubscriptionsListenRequestMethod as Listen,
        UnsubscribeRequestMethod as Unsubscribe,
    };
    [
        CallTool::VALUE,
        ListTools::VALUE,
        Initialize::VALUE,
        Complete::VALUE,
        GetPrompt::VALUE,
        ListPrompts::VALUE,
        ListResources::VALUE,
        ListTemplates::VALUE,
        ReadResource::VALUE,
        SetLevel::VALUE,
        Subscribe::VALUE,
        Unsubscribe::VALUE,
        Listen::VALUE,
    ]
    .into_iter()
    .find(|m| *m == method)
}

/// -32601 `method not found: METHOD`.
fn not_found(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
        None,
    )
}

/// A -32601 error whose message is the bare method name (`rmcp`'s) as
/// `method not found: NAME`.
fn method_not_found(mut e: ErrorData) -> ErrorData {
    if e.code == ErrorCode::METHOD_NOT_FOUND && !e.message.starts_with("method not found") {
        e = not_found(&e.message);
    }
    e
}

/// How long `glovebox mcp` waits, once its client left, for the calls it
/// killed to end and be logged.
pub const CALLS_END_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves `live` over stdin/stdout until the client closes stdin. stdout
/// carries MCP messages only; diagnostics go to stderr. A client that
/// closes stdin before starting a session (it only discovered the server
/// or pinged it) ends it cleanly.
///
/// Every line passes [`stdio::pump`] first, so malformed, oversized,
/// batched and duplicate-id messages get an answer and nothing reaches
/// `rmcp` that could lose one.
pub async fn serve_stdio(live: Arc<Live>) -> Result<(), McpError> {
    let (server_end, client_end) = tokio::io::duplex(256 * 1024);
    let (from_server, to_server) = tokio::io::split(client_end);
    // The client closing stdin is the client gone: its calls still
    // waiting for a slot are not started, those running are killed.
    let input_closed = tokio_util::sync::CancellationToken::new();
    let calls = live.calls().clone();
    let gone = {
        let input_closed = input_closed.clone();
        let calls = calls.clone();
        tokio::spawn(async move {
            input_closed.cancelled().await;
            calls.client_gone();
        })
    };
    let pump = tokio::spawn(stdio::pump(
        tokio::io::stdin(),
        tokio::io::stdout(),
        to_server,
        from_server,
        calls.limits(),
        input_closed,
        Some(audit_refused(live.clone())),
    ));
    let running = match Session(Server::new(live))
        .serve(tokio::io::split(server_end))
        .await
    {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_)) => {
            // Whatever was answered before the client left still goes out.
            let _ = pump.await;
            return Ok(());
        }
        Err(e) => {
            return Err(McpError::Initialize {
                source: Box::new(e),
            })
        }
    };
    running
        .waiting()
        .await
        .map_err(|source| McpError::Join { source })?;
    let _ = pump.await;
    // The calls killed when the client left write their result lines
    // (`cancelled`) before the server exits.
    if gone.is_finished() {
        let _ = tokio::time::timeout(CALLS_END_WITHIN, calls.wait()).await;
    } else {
        gone.abort();
    }
    Ok(())
}
