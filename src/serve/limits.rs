//! [`Limits`]: what one client can make the HTTP server spend, enforced by
//! two middlewares.
//!
//! - [`limit_body`]: a request body over `max_body_bytes` is refused with
//!   413 (`resource_limit`): at once when its `Content-Length` says so, or
//!   as soon as a chunked body passes the limit while it is read.
//! - [`limit_calls`]: at most `max_concurrent` requests are served at once
//!   (the API and `/mcp`; `/healthz` and `/openapi.json` are exempt); one
//!   more is answered 503 (`resource_limit`, `Retry-After: 1`) at once,
//!   never queued. Each request gets `request_timeout`; past it the answer
//!   is 504 (`timeout`) and a tool call it started is killed (its jail
//!   with it, see [`super::call::Calls::run`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::problem::Problem;
use crate::run::ErrorKind;

/// Default largest request body: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default number of requests served at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;
/// Default time one request may take: 5 minutes (longer than any tool's
/// default 30 s wall-clock limit).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The server's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests served at once; one more gets 503.
    pub max_concurrent: usize,
    /// Time one request may take; past it, 504.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// The state of [`limit_calls`]: the limits and the free slots.
#[derive(Debug, Clone)]
pub struct Slots {
    limits: Limits,
    free: Arc<Semaphore>,
}

impl Slots {
    /// `limits.max_concurrent` free slots.
    pub fn new(limits: &Limits) -> Self {
        Slots {
            limits: limits.clone(),
            free: Arc::new(Semaphore::new(limits.max_concurrent)),
        }
    }
}

/// The 413 answer.
pub fn too_large(max: usize) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::ResourceLimit,
        format!("the request body is larger than {max} bytes (glovebox serve --max-body-bytes)"),
    )
    .details(serde_json::json!({"limit": "max_body_bytes", "max_body_bytes": max}))
}

/// Refuses a body over the limit.
pub async fn limit_body(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let max = limits.max_body_bytes;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large(max).into_response();
    }
    let (parts, body) = request.into_parts();
    let body = Body::new(http_body_util::Limited::new(body, max));
    next.run(Request::from_parts(parts, body)).await
}

/// Serves at most `max_concurrent` requests at once, each for at most
/// `request_timeout`.
pub async fn limit_calls(State(slots): State<Slots>, request: Request, next: Next) -> Response {
    let Ok(_slot) = slots.free.clone().try_acquire_owned() else {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ResourceLimit,
            format!(
                "the server is busy: {} requests are being served (glovebox serve --max-concurrent); retry later",
                slots.limits.max_concurrent
            ),
        )
        .details(serde_json::json!({"limit": "max_concurrent", "max_concurrent": slots.limits.max_concurrent}))
        .header(header::RETRY_AFTER, "1")
        .into_response();
    };
    let timeout = slots.limits.request_timeout;
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Problem::new(
            StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Timeout,
            format!(
                "the request took longer than {} s (glovebox serve --request-timeout); a tool call it started was killed",
                timeout.as_secs_f64()
            ),
        )
        .details(serde_json::json!({"limit": "request_timeout", "request_timeout_s": timeout.as_secs_f64()}))
        .into_response(),
    }
}

/// Whether `e` (a body read error) is the body limit being hit.
pub fn is_too_large(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = err.source();
    }
    false
}
