//! The HTTP API of `glovebox serve`, compatible with the tool registry
//! endpoints agent frameworks already use (HDN's `/api/v1/tools`):
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/v1/tools` | every valid tool, as [`ApiTool`] |
//! | `GET /api/v1/tools/{name}` | one tool; 404 `tool_not_found` |
//! | `POST /api/v1/tools/{name}/invoke` | the [`Outcome`] (body = params) |
//! | `POST /api/v1/tools` | create an agent tool under the ceiling; 201 |
//! | `DELETE /api/v1/tools/{name}` | delete an agent-created tool |
//! | `POST /api/v1/tools/discover` | rescan `.glee/tools/` |
//! | `GET /api/v1/tools/usage` | recent calls, from the audit log |
//! | `GET /healthz` | liveness |
//! | `GET /openapi.json` | [`openapi::document`] |
//!
//! Every call goes through [`crate::engine::Engine::call`] on a thread of
//! its own ([`crate::serve::call::Calls::run`]), as MCP's do: validation,
//! approval, secrets, the jail and the audit log are decided there. An
//! HTTP caller never approves anything (like MCP). `X-Agent-ID` and
//! `X-Project-ID` land in the call's audit entry, made safe by
//! [`audit::client_label`].
//!
//! Status of an invoke: 200 whenever the tool ran, whatever it answered
//! (`ok` says; `exit_code`, `timeout`, `resource_limit`,
//! `python_exception`, `http_error` are the tool's result, as MCP's
//! `isError`); else by kind: 400 `input_invalid`, 403 `approval_required`
//! and `permission_exceeds_ceiling`, 404 `tool_not_found`, 500
//! `manifest_invalid`, `secret_missing` and `internal`, 503
//! `sandbox_unavailable`, `audit_unavailable` and a call the server killed on shutdown
//! (`internal` with `details.cancelled`). The body is the Outcome in every
//! case.

pub mod openapi;
pub mod tools;
pub mod usage;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::audit;
use crate::create::{self, CreateError};
use crate::engine::Caller;
use crate::run::{ErrorKind, Outcome, SecretSource};
use crate::serve::limits;
use crate::serve::live::Live;
use crate::serve::problem::{json_response, Problem};

pub use tools::{api_tool, hdn_permissions, safety_level, ApiTool, GloveboxInfo};
pub use usage::{usage_query, usage_records, UsageQuery, DEFAULT_USAGE_LIMIT, MAX_USAGE_LIMIT};

/// The header naming the calling agent.
pub const AGENT_HEADER: &str = "x-agent-id";
/// The header naming the calling agent's project.
pub const PROJECT_HEADER: &str = "x-project-id";
/// The `caller` of calls made over this API, in the audit log.
pub const CALLER: &str = "http";
/// Usage requests reading the audit log at once.
pub const USAGE_READERS: usize = 4;

/// The HTTP status of an invoke's Outcome.
pub fn invoke_status(outcome: &Outcome) -> StatusCode {
    if outcome
        .error
        .as_ref()
        .is_some_and(|e| e.details["cancelled"] == true)
    {
        // Killed by the server: shutting down, or the request timed out.
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    match outcome.kind() {
        None
        | Some(
            ErrorKind::ExitCode
            | ErrorKind::Timeout
            | ErrorKind::ResourceLimit
            | ErrorKind::PythonException
            | ErrorKind::HttpError
            | ErrorKind::OutputInvalid,
        ) => StatusCode::OK,
        Some(ErrorKind::InputInvalid) => StatusCode::BAD_REQUEST,
        Some(ErrorKind::ApprovalRequired | ErrorKind::PermissionExceedsCeiling) => {
            StatusCode::FORBIDDEN
        }
        Some(ErrorKind::ToolNotFound) => StatusCode::NOT_FOUND,
        Some(ErrorKind::Unauthorized) => StatusCode::UNAUTHORIZED,
        Some(
            ErrorKind::SandboxUnavailable | ErrorKind::AuditUnavailable | ErrorKind::Cancelled,
        ) => StatusCode::SERVICE_UNAVAILABLE,
        Some(ErrorKind::ManifestInvalid | ErrorKind::SecretMissing | ErrorKind::Internal) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// A create or delete failure as a [`Problem`].
pub fn create_problem(e: &CreateError) -> Problem {
    // The kind and details are the error's own (as on MCP); the status
    // tells HTTP clients apart the cases that share a kind.
    let status = match e {
        CreateError::ExceedsCeiling { .. }
        | CreateError::NotCreated { .. }
        | CreateError::Replicated { .. } => StatusCode::FORBIDDEN,
        CreateError::NotFound { .. } => StatusCode::NOT_FOUND,
        CreateError::InvalidName { .. } | CreateError::InvalidDefinition { .. } => {
            StatusCode::BAD_REQUEST
        }
        CreateError::Lint { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        CreateError::Exists { .. } | CreateError::ServersName { .. } => StatusCode::CONFLICT,
        CreateError::Config
        | CreateError::Io { .. }
        | CreateError::State(_)
        | CreateError::Audit(_)
        | CreateError::Approval(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Problem::new(status, e.kind(), crate::run::error_chain(e)).details(e.details())
}

/// The API's routes over `live` (the guard and limits are added by
/// [`crate::serve::http::router`]). `/healthz` and `/openapi.json` come
/// separately from [`open_routes`], outside the concurrency limit.
pub fn routes(live: Arc<Live>, usage_scan_bytes: u64) -> Router {
    // At most this many usage reads at once, each of at most
    // `usage_scan_bytes`: the memory usage takes is bounded.
    let readers = Arc::new(tokio::sync::Semaphore::new(USAGE_READERS));
    Router::new()
        .route("/api/v1/tools", get(list).post(create_tool))
        // `usage` and `discover` are also tool names for the methods those
        // routes do not take.
        .route(
            "/api/v1/tools/usage",
            get(move |s, uri| usage(s, uri, usage_scan_bytes, readers))
                .delete(|s, h| delete_named(s, "usage".into(), h)),
        )
        .route(
            "/api/v1/tools/discover",
            post(discover)
                .get(|s| show_named(s, "discover".into()))
                .delete(|s, h| delete_named(s, "discover".into(), h)),
        )
        .route("/api/v1/tools/{name}", get(show).delete(delete_tool))
        .route("/api/v1/tools/{name}/invoke", post(invoke))
        .with_state(live)
}

/// `/healthz` and `/openapi.json`.
pub fn open_routes(live: Arc<Live>) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/openapi.json", get(openapi_json))
        .with_state(live)
}

/// The answer to a path no route serves.
pub async fn no_route(uri: Uri) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        ErrorKind::InputInvalid,
        format!(
            "no such endpoint: {}; GET /openapi.json lists them",
            uri.path()
        ),
    )
    .into_response()
}

/// The answer to a method a route does not take.
pub async fn wrong_method(uri: Uri) -> Response {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::InputInvalid,
        format!(
            "this method is not allowed on {}; GET /openapi.json lists the endpoints",
            uri.path()
        ),
    )
    .into_response()
}

/// A header's value as the client sent it (the engine makes it safe for
/// the log with [`audit::client_label`]).
fn header_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn caller(headers: &HeaderMap) -> Caller {
    Caller {
        id: CALLER.into(),
        // No approval over HTTP: approvals are a person's, out of band.
        approved: false,
        secrets: SecretSource::Environment,
        cancel: None,
        agent_id: header_value(headers, AGENT_HEADER),
        project_id: header_value(headers, PROJECT_HEADER),
        trace: header_value(headers, "traceparent").and_then(|t| crate::caller::traceparent(&t)),
        ..Caller::default()
    }
}

/// The request body, as JSON; an empty body is `null`.
async fn json_body(body: Body) -> Result<Value, Problem> {
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| {
            if limits::is_too_large(&e) {
                // The real limit is in the message of limit_body's answer;
                // here only that it was hit is known.
                Problem::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    ErrorKind::ResourceLimit,
                    "the request body is larger than the server accepts (glovebox serve --max-body-bytes)",
                )
                .details(json!({"limit": "max_body_bytes"}))
            } else {
                Problem::bad_request(format!("cannot read the request body: {e}"))
            }
        })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("the request body is not valid JSON: {e}")))
}

async fn list(State(live): State<Arc<Live>>) -> Response {
    // A project tainted since it was loaded lists nothing.
    if let Err(e) = crate::planted::hidden(live.root()) {
        return Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.kind(),
            crate::run::error_chain(&e),
        )
        .into_response();
    }
    let engine = live.engine();
    let tools = tokio::task::spawn_blocking(move || {
        let project = engine.project();
        let created = create::created_tools(&project.root);
        project
            .tools
            .iter()
            .map(|t| api_tool(t, &created, engine.is_approved(&t.name)))
            .collect::<Vec<_>>()
    })
    .await;
    match tools {
        Ok(t) => json_response(StatusCode::OK, &t),
        Err(e) => internal(e),
    }
}

fn internal(e: impl std::fmt::Display) -> Response {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::Internal,
        e.to_string(),
    )
    .into_response()
}

fn not_found(name: &str) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        ErrorKind::ToolNotFound,
        format!("no tool `{name}`; GET /api/v1/tools lists them"),
    )
}

/// The `{name}` of a route. A segment that is not UTF-8 once decoded names
/// no tool: 404 `tool_not_found` (JSON, as every refusal), like any other
/// name outside the grammar.
fn path_name(path: Result<Path<String>, PathRejection>) -> Result<String, Problem> {
    match path {
        Ok(Path(name)) => Ok(name),
        Err(e) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            ErrorKind::ToolNotFound,
            format!(
                "the tool name in the path is not a tool name ({}; names match {})",
                e.body_text(),
                crate::manifest::name::GRAMMAR
            ),
        )),
    }
}

async fn show(state: State<Arc<Live>>, path: Result<Path<String>, PathRejection>) -> Response {
    let name = match path_name(path) {
        Ok(n) => n,
        Err(p) => return p.into_response(),
    };
    show_named(state, name).await
}

async fn show_named(State(live): State<Arc<Live>>, name: String) -> Response {
    let engine = live.engine();
    let found = tokio::task::spawn_blocking(move || {
        let project = engine.project();
        let tool = project.tools.iter().find(|t| t.name == name);
        match tool {
            Some(t) => Ok(api_tool(
                t,
                &create::created_tools(&project.root),
                engine.is_approved(&t.name),
            )),
            None => Err(not_found(&name)),
        }
    })
    .await;
    match found {
        Ok(Ok(t)) => json_response(StatusCode::OK, &t),
        Ok(Err(p)) => p.into_response(),
        Err(e) => internal(e),
    }
}

async fn invoke(
    State(live): State<Arc<Live>>,
    path: Result<Path<String>, PathRejection>,
    deadline: Option<axum::Extension<limits::Deadline>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = match path_name(path) {
        Ok(n) => n,
        Err(p) => return p.into_response(),
    };
    let params = match json_body(body).await {
        Ok(p @ (Value::Object(_) | Value::Null)) => p,
        Ok(_) => {
            return Problem::bad_request(
                "the request body must be a JSON object: the tool's parameters",
            )
            .into_response()
        }
        Err(p) => return p.into_response(),
    };
    let mut caller = caller(&headers);
    caller.deadline = deadline.map(|axum::Extension(limits::Deadline(d))| d);
    let outcome = live
        .calls()
        .run(
            live.engine(),
            name,
            params,
            caller,
            CancellationToken::new(),
            None,
        )
        .await;
    match outcome {
        Ok(o) if crate::serve::call::is_busy(&o) || crate::serve::call::is_transient(&o) => {
            let mut r = json_response(StatusCode::SERVICE_UNAVAILABLE, &o);
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
            r
        }
        Ok(mut o) => {
            // The engine's advice is the CLI's; over HTTP the list is a route.
            if let Some(e) = o
                .error
                .as_mut()
                .filter(|e| e.kind == ErrorKind::ToolNotFound)
            {
                e.message = e
                    .message
                    .replace(CLI_LIST_ADVICE, "GET /api/v1/tools lists the tools");
            }
            json_response(invoke_status(&o), &o)
        }
        Err(e) => internal(crate::run::error_chain(&e)),
    }
}

/// The CLI's advice in a `tool_not_found` message.
const CLI_LIST_ADVICE: &str = "run `glovebox list` to see the tools";

/// The name and definition of a create request: `{name, definition}` (as
/// MCP's `glee_tool_create`), the fields of `tool.yml` themselves, or an
/// HDN Tool JSON (`exec.type`, `{param}` args, permission strings),
/// converted as `glovebox import hdn` does.
fn create_request(body: Value) -> Result<(String, Value), Problem> {
    if is_hdn_tool(&body) {
        return crate::import::hdn::convert(0, &body)
            .map(|c| (c.name, c.manifest))
            .map_err(|refused| Problem::bad_request(refused.to_string()));
    }
    let Value::Object(mut o) = body else {
        return Err(Problem::bad_request(
            "the request body must be a JSON object: {\"name\": ..., \"definition\": {fields of tool.yml}}",
        ));
    };
    let name = match o.get("name") {
        Some(Value::String(n)) => n.clone(),
        _ => return Err(Problem::bad_request("`name` (a string) is required")),
    };
    let definition = match o.remove("definition") {
        Some(d @ Value::Object(_)) => d,
        Some(_) => {
            return Err(Problem::bad_request(
                "`definition` must be an object with the fields of tool.yml",
            ))
        }
        None => Value::Object(o),
    };
    Ok((name, definition))
}

/// Whether `body` is HDN's Tool JSON: its `exec` names a `type` (a
/// `tool.yml`'s `exec` holds `command`, `python` or `http` instead).
fn is_hdn_tool(body: &Value) -> bool {
    body.get("exec").and_then(|e| e.get("type")).is_some()
}

fn creator(headers: &HeaderMap) -> String {
    match header_value(headers, AGENT_HEADER) {
        Some(agent) => format!("{CALLER}:{}", audit::client_label(&agent)),
        None => CALLER.to_string(),
    }
}

async fn create_tool(State(live): State<Arc<Live>>, headers: HeaderMap, body: Body) -> Response {
    let (name, definition) = match json_body(body).await.and_then(create_request) {
        Ok(r) => r,
        Err(p) => return p.into_response(),
    };
    let engine = live.engine();
    let who = creator(&headers);
    let created = tokio::task::spawn_blocking(move || {
        create::create(engine.project(), &name, definition, &who)
    })
    .await;
    match created {
        Ok(Ok(c)) => {
            if let Err(e) = live.reload().await {
                eprintln!(
                    "glovebox: created {} but cannot reload the project: {e}",
                    c.name
                );
            }
            json_response(
                StatusCode::CREATED,
                &json!({
                    "ok": true,
                    "tool": c.name,
                    "file": c.file,
                    "approval_required": true,
                    "approve_with": format!("glovebox approve {}", c.name),
                }),
            )
        }
        Ok(Err(e)) => create_problem(&e).into_response(),
        Err(e) => internal(e),
    }
}

async fn delete_tool(
    state: State<Arc<Live>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let name = match path_name(path) {
        Ok(n) => n,
        Err(p) => return p.into_response(),
    };
    delete_named(state, name, headers).await
}

async fn delete_named(State(live): State<Arc<Live>>, name: String, headers: HeaderMap) -> Response {
    let engine = live.engine();
    let who = creator(&headers);
    let tool = name.clone();
    let deleted =
        tokio::task::spawn_blocking(move || create::delete(engine.project(), &tool, &who)).await;
    match deleted {
        Ok(Ok(())) => {
            if let Err(e) = live.reload().await {
                eprintln!("glovebox: deleted {name} but cannot reload the project: {e}");
            }
            json_response(
                StatusCode::OK,
                &json!({"ok": true, "tool": name, "deleted": true}),
            )
        }
        Ok(Err(e)) => create_problem(&e).into_response(),
        Err(e) => internal(e),
    }
}

async fn discover(State(live): State<Arc<Live>>) -> Response {
    match live.reload().await {
        Ok(changed) => {
            let engine = live.engine();
            let project = engine.project();
            json_response(
                StatusCode::OK,
                &json!({
                    "ok": true,
                    "changed": changed,
                    "tools": project.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                    "rejected": project.rejected,
                }),
            )
        }
        Err(e) => Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::ManifestInvalid,
            format!(
                "cannot rescan the project (the tools served are unchanged): {}",
                crate::run::error_chain(&e)
            ),
        )
        .into_response(),
    }
}

async fn usage(
    State(live): State<Arc<Live>>,
    uri: Uri,
    scan_bytes: u64,
    readers: Arc<tokio::sync::Semaphore>,
) -> Response {
    let q = match usage_query(uri.query()) {
        Ok(q) => q,
        Err(p) => return p.into_response(),
    };
    let Ok(_reader) = readers.acquire_owned().await else {
        return internal("the usage readers are closed");
    };
    let root = live.root().to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        audit::Log::for_project(&root).and_then(|log| log.recent_entries(scan_bytes))
    })
    .await;
    match read {
        Ok(Ok(entries)) => json_response(StatusCode::OK, &usage_records(entries, &q)),
        Ok(Err(e)) => internal(crate::run::error_chain(&e)),
        Err(e) => internal(e),
    }
}

async fn health(State(live): State<Arc<Live>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "tools": live.engine().project().tools.len(),
            "calls_in_flight": live.calls().in_flight(),
        }),
    )
}

async fn openapi_json() -> Response {
    json_response(StatusCode::OK, &openapi::document())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_queries() {
        assert_eq!(usage_query(None).unwrap().limit, DEFAULT_USAGE_LIMIT);
        let q = usage_query(Some("limit=3&tool=a&agent_id=x%20y")).unwrap();
        assert_eq!(q.limit, 3);
        assert_eq!(q.tool.as_deref(), Some("a"));
        assert_eq!(q.agent_id.as_deref(), Some("x%20y"));
        for bad in ["limit=0", "limit=-1", "limit=abc", "limit=100000"] {
            assert!(usage_query(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn create_requests_take_both_shapes() {
        let (n, d) =
            create_request(json!({"name": "t", "definition": {"description": "x"}})).unwrap();
        assert_eq!((n.as_str(), d), ("t", json!({"description": "x"})));
        let (n, d) = create_request(json!({"name": "t", "description": "x"})).unwrap();
        assert_eq!(
            (n.as_str(), d),
            ("t", json!({"name": "t", "description": "x"}))
        );
        assert!(create_request(json!([])).is_err());
        assert!(create_request(json!({"definition": {}})).is_err());
    }

    #[test]
    fn usage_reads_the_log_newest_first() {
        let e = |ts: &str, ev: &str, f: &[(&str, &str)]| audit::Entry {
            ts: ts.into(),
            event: ev.into(),
            fields: f
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let entries = vec![
            e(
                "1",
                "TOOL_EXECUTED",
                &[("name", "a"), ("params", "{}"), ("duration_ms", "5")],
            ),
            e("2", "TOOL_CREATED", &[("name", "b")]),
            e("2", "TOOL_DENIED", &[("name", "b"), ("reason", "ceiling")]),
            e("3", "TOOL_EXECUTED", &[("name", "b"), ("agent_id", "x")]),
        ];
        let all = usage_records(entries.clone(), &usage_query(None).unwrap());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0]["tool"], "b");
        assert_eq!(all[1]["duration_ms"], 5);
        assert!(all[1].get("params").is_none());
        let only = usage_records(entries, &usage_query(Some("agent_id=x")).unwrap());
        assert_eq!(only.len(), 1);
    }

    #[test]
    fn usage_escapes_control_characters_of_a_foreign_line() {
        let entry = audit::Entry {
            ts: "1\u{1b}[2J".into(),
            event: "TOOL_EXECUTED".into(),
            fields: vec![
                ("name".into(), "a\u{9b}31m".into()),
                ("caller".into(), "x\u{1b}]0;t\u{7}".into()),
            ],
        };
        let recs = usage_records(vec![entry], &usage_query(None).unwrap());
        let text = serde_json::to_string(&recs).unwrap();
        let decoded: Vec<String> = recs[0]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        for s in decoded.iter().chain([&text]) {
            assert!(!s.chars().any(char::is_control), "{s:?}");
        }
        assert_eq!(recs[0]["caller"], "x\\x1b]0;t\\x07");
    }
}
