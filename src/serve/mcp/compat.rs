//! What MCP clients expect of the Streamable HTTP transport beyond what
//! `rmcp`'s does, as two middlewares:
//!
//! - [`cors`] (every route): a CORS preflight (`OPTIONS` with
//!   `Access-Control-Request-Method`) from an origin configured with
//!   `--allow-origin` ([`crate::serve::browsers`]) is answered 204 with
//!   the methods and headers MCP uses, without a token (browsers send
//!   none on a preflight); answers to those origins carry
//!   `Access-Control-Allow-Origin` (that origin, never `*`) and expose
//!   `Mcp-Session-Id`. Any other origin gets nothing from here and is
//!   refused 403 by the guard of [`crate::serve::http`].
//! - [`mcp`] (`/mcp` only): `ping` without a session (MCP 2026-07-28, which
//!   has no sessions, dropped `ping`; `rmcp` answers -32601, but clients
//!   and proxies still send it) answers `{}`; `DELETE` of a session
//!   answers 204 when it ended it and 404 when no such session exists
//!   (`rmcp` answers 202 to both). An event stream answering a session
//!   on a revision before `2025-11-25` loses its SSE priming events
//!   ([`strip_priming`]): those revisions know no event without data, and
//!   their clients (Gemini CLI's SDK) parse an empty `data:` as JSON and
//!   give up on the server.
//!   A new session (`initialize` without one) when every session has a
//!   request in flight is refused 503 with `Retry-After` (see
//!   [`super::sessions`]).
//! - [`json_refusals`] (`/mcp` only): a refusal `rmcp` writes as plain text
//!   (a missing or unknown session, a wrong `Accept`, a method `/mcp` does
//!   not serve) is sent as the server's JSON error body instead, with the
//!   same status and headers, so every refusal of the server is JSON.
//!
//! Protocol decisions are pure functions ([`is_sessionless_ping`],
//! [`preflight_headers`], [`refusal_message`]) tested without a server.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::SessionManager;
use serde_json::{json, Value};

use super::sessions::BoundedSessions;
use crate::run::ErrorKind;
use crate::serve::browsers::Origins;
use crate::serve::limits;
use crate::serve::problem::Problem;

/// The session header of the Streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// Methods a browser client may use.
const ALLOW_METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// Request headers a browser client may send.
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID, X-Agent-ID, X-Project-ID";
/// Response headers a browser client may read.
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After";

/// The headers of the answer to a preflight from `origin`.
pub fn preflight_headers(origin: HeaderValue) -> Vec<(header::HeaderName, HeaderValue)> {
    vec![
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, origin),
        (
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        ),
        (
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOW_HEADERS),
        ),
        (
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        ),
        (header::VARY, HeaderValue::from_static("Origin")),
    ]
}

/// CORS for the configured origins only (see the module documentation).
pub async fn cors(State(origins): State<Origins>, request: Request, next: Next) -> Response {
    let Some(origin) = origins.allowed_origin(request.headers()).cloned() else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        let mut response = StatusCode::NO_CONTENT.into_response();
        response.headers_mut().extend(preflight_headers(origin));
        return response;
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// The id of a JSON-RPC `ping` request in `body`, when that is what it is.
pub fn is_sessionless_ping(body: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let o = v.as_object()?;
    (o.get("jsonrpc") == Some(&json!("2.0")) && o.get("method") == Some(&json!("ping")))
        .then(|| o.get("id").cloned())
        .flatten()
        .filter(|id| id.is_string() || id.is_number())
}

/// Whether one SSE event (its lines, without the blank line ending it) is
/// a priming event: it has `data:` lines and all of them are empty.
pub fn is_priming(event: &[u8]) -> bool {
    let mut data_lines = event
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter_map(|l| l.strip_prefix(b"data:"))
        .peekable();
    data_lines.peek().is_some() && data_lines.all(|d| d.iter().all(|b| *b == b' '))
}

/// `chunk` of an event stream without its priming events (a chunk holds
/// whole events, as `rmcp` writes one per chunk).
pub fn strip_priming(chunk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunk.len());
    let mut rest = chunk;
    while !rest.is_empty() {
        let (event, next) = match rest.windows(2).position(|w| w == b"\n\n") {
            Some(i) => (&rest[..i + 2], &rest[i + 2..]),
            None => (rest, &rest[rest.len()..]),
        };
        if !is_priming(event) {
            out.extend_from_slice(event);
        }
        rest = next;
    }
    out
}

/// `response` without SSE priming events when it is an event stream of a
/// session on a revision that has none (see the module documentation).
fn fit_to_revision(
    sessions: &BoundedSessions,
    session: Option<&str>,
    response: Response,
) -> Response {
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    // A new session's id is on the answer to its `initialize`.
    let session = session.map(str::to_string).or_else(|| {
        response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    let keeps_priming = session
        .and_then(|id| sessions.revision(&id))
        .is_none_or(|revision| super::sessions::primes(&revision));
    if !is_sse || keeps_priming {
        return response;
    }
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().filter_map(|chunk| {
        futures::future::ready(match chunk {
            Ok(bytes) => {
                let kept = strip_priming(&bytes);
                (!kept.is_empty()).then(|| Ok(axum::body::Bytes::from(kept)))
            }
            Err(e) => Some(Err(e)),
        })
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// `ping` without a session, `DELETE` answers and priming events by
/// revision (see the module documentation).
pub async fn mcp(
    State(sessions): State<Arc<BoundedSessions>>,
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let response = sessions_and_pings(&sessions, request, next).await;
    fit_to_revision(&sessions, session.as_deref(), response)
}

/// `ping` without a session and `DELETE` answers.
async fn sessions_and_pings(
    sessions: &Arc<BoundedSessions>,
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|s| Arc::<str>::from(s.to_string()));
    match (request.method().clone(), session) {
        (Method::DELETE, Some(id)) => {
            if !sessions.has_session(&id).await.unwrap_or(false) {
                return Problem::new(
                    StatusCode::NOT_FOUND,
                    ErrorKind::InputInvalid,
                    "no such MCP session (it ended, or the server restarted): start a new one",
                )
                .into_response();
            }
            let response = next.run(request).await;
            if response.status().is_success() {
                StatusCode::NO_CONTENT.into_response()
            } else {
                response
            }
        }
        (Method::POST, None) => {
            let (parts, body) = request.into_parts();
            let bytes = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(b) => b,
                Err(e) => {
                    return match std::error::Error::source(&e) {
                        Some(s) if limits::is_too_large(s) => {
                            // The body limit below us already answered the
                            // declared size; this is a chunked body past it.
                            Problem::new(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                ErrorKind::ResourceLimit,
                                "the request body is too large (glovebox serve --max-body-bytes)",
                            )
                            .into_response()
                        }
                        _ => Problem::new(
                            StatusCode::BAD_REQUEST,
                            ErrorKind::InputInvalid,
                            format!("cannot read the request body: {e}"),
                        )
                        .into_response(),
                    };
                }
            };
            if is_initialize(&bytes) && !sessions.has_room().await {
                return Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorKind::ResourceLimit,
                    "every MCP session is busy with a call, and the server keeps no more (glovebox serve --max-sessions): retry shortly, or reuse a session",
                )
                .details(json!({"limit": "max_sessions"}))
                .header(header::RETRY_AFTER, "1")
                .into_response();
            }
            if let Some(id) = is_sessionless_ping(&bytes) {
                let body = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
                return (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    body,
                )
                    .into_response();
            }
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        (Method::POST, Some(id)) => {
            // A request (not a notification or a response) is in flight
            // until its answer is sent: its session is not closed to make
            // room for another meanwhile.
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let in_flight = is_request(&bytes).then(|| sessions.begin(&id));
            let response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            match in_flight {
                Some(guard) => crate::serve::conns::hold(response, guard),
                None => response,
            }
        }
        (_, _) => next.run(request).await,
    }
}

/// Whether `body` is a JSON-RPC request (a method and an id).
fn is_request(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| {
        v.get("method").is_some_and(Value::is_string) && v.get("id").is_some_and(|i| !i.is_null())
    })
}

/// Whether `body` is an `initialize` request (one that makes a session).
fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// The message for a refusal `rmcp` wrote as `text` with `status`: what
/// is wrong and what to do.
pub fn refusal_message(status: StatusCode, text: &str) -> String {
    let text = text.trim();
    match status {
        StatusCode::BAD_REQUEST if text.contains("Session ID is required") => {
            "this MCP request needs the Mcp-Session-Id header of a session: send initialize first and use the id it answers with".into()
        }
        StatusCode::NOT_FOUND if text.contains("Session not found") => {
            "no such MCP session (it ended, or the server restarted): start a new one".into()
        }
        StatusCode::NOT_ACCEPTABLE => {
            "the client must accept both application/json and text/event-stream (send them in Accept)".into()
        }
        StatusCode::METHOD_NOT_ALLOWED => {
            "this method is not served on /mcp: use POST, GET or DELETE".into()
        }
        _ if text.is_empty() => format!(
            "the MCP request was refused ({}); check it against the MCP Streamable HTTP transport",
            status.as_u16()
        ),
        _ => {
            let shown: String = text.chars().take(200).collect();
            format!(
                "the MCP request was refused: {}; check it against the MCP Streamable HTTP transport",
                shown.to_lowercase()
            )
        }
    }
}

/// Refusals of `/mcp` that are not JSON become the server's JSON error
/// body (see the module documentation). Answers that are JSON, event
/// streams and successes pass unchanged.
pub async fn json_refusals(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    // rmcp's refusals are one short line; read at most 4 KiB of it.
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let kind =
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            ErrorKind::ResourceLimit
        } else if status.is_server_error() {
            ErrorKind::Internal
        } else {
            ErrorKind::InputInvalid
        };
    let mut answer = Problem::new(
        status,
        kind,
        refusal_message(status, &String::from_utf8_lossy(&text)),
    )
    .into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmcp_refusals_get_messages_that_say_what_to_do() {
        let m = refusal_message(
            StatusCode::BAD_REQUEST,
            "Bad Request: Session ID is required",
        );
        assert!(m.contains("initialize"), "{m}");
        let m = refusal_message(StatusCode::NOT_FOUND, "Not Found: Session not found");
        assert!(m.contains("start a new one"), "{m}");
        let m = refusal_message(StatusCode::NOT_ACCEPTABLE, "Not Acceptable: x");
        assert!(m.contains("text/event-stream"), "{m}");
        let m = refusal_message(StatusCode::CONFLICT, "Conflict: Something\n");
        assert_eq!(
            m,
            "the MCP request was refused: conflict: something; check it against the MCP Streamable HTTP transport"
        );
        assert!(refusal_message(StatusCode::CONFLICT, "").contains("409"));
    }

    #[test]
    fn priming_events_are_stripped_and_messages_kept() {
        assert!(is_priming(b"data: \nid: 0\nretry: 3000\n\n"));
        assert!(is_priming(b"id: 0\r\ndata:\r\n"));
        assert!(!is_priming(b"data: {\"jsonrpc\":\"2.0\"}\nid: 1\n\n"));
        // A keep-alive comment has no data: it is not an event to drop.
        assert!(!is_priming(b":\n\n"));
        let chunk = b"data: \nid: 0\nretry: 3000\n\ndata: {\"id\":1}\nid: 1\n\n";
        assert_eq!(
            strip_priming(chunk),
            b"data: {\"id\":1}\nid: 1\n\n".to_vec()
        );
        assert!(strip_priming(b"data: \nid: 0\n\n").is_empty());
    }

    #[test]
    fn pings_are_recognised() {
        assert_eq!(
            is_sessionless_ping(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#),
            Some(json!(7))
        );
        assert_eq!(
            is_sessionless_ping(br#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}"#),
            Some(json!("a"))
        );
        for not in [
            &br#"{"jsonrpc":"2.0","method":"ping"}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            b"not json",
        ] {
            assert_eq!(is_sessionless_ping(not), None);
        }
    }

    #[test]
    fn preflight_names_the_origin_not_a_wildcard() {
        let h = preflight_headers(HeaderValue::from_static("http://localhost:6274"));
        assert!(
            h.iter()
                .any(|(k, v)| k == header::ACCESS_CONTROL_ALLOW_ORIGIN
                    && v == "http://localhost:6274")
        );
        assert!(!h.iter().any(|(_, v)| v == "*"));
    }
}
