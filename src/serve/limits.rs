//! [`Limits`]: what one client can make the HTTP server spend. Every
//! limit has a default, a flag of `glovebox serve` and a line in README.
//!
//! - Connections ([`super::http::serve`]): at most `max_connections` open
//!   at once; past it new ones wait in the kernel's backlog (and a line on
//!   stderr says so) until one closes. The open-file limit is shared out
//!   once ([`plan_fds`]): the server's own reserve, each call slot's jail,
//!   the connections, and each call slot's share for its connections
//!   (egress, [`crate::egress::budget`]); the connection cap is lowered
//!   where it would not fit (said on stderr), so neither idle connections
//!   nor one call's egress can take the descriptors a call or the next
//!   accept needs. A connection must send a request's
//!   headers within `header_timeout`, which is also the longest a kept-alive
//!   connection may sit idle; past it, it is closed.
//! - [`limit_body`]: a body must arrive within `body_timeout` (else 408,
//!   `input_invalid`) and be at most `max_body_bytes` (else 413,
//!   `resource_limit`: at once when its `Content-Length` says so, or as
//!   soon as a chunked body passes the limit). The body is read whole
//!   here, so a slow client holds no call slot.
//! - Calls: `calls` ([`super::call::CallLimits`]) bounds the tool calls of
//!   the API and of `/mcp` together, as it does over stdio: a call past
//!   the slots waits in a queue, past the queue it is refused at once
//!   (503 `resource_limit`, `Retry-After: 1`).
//! - [`limit_time`]: each request of the API and `/mcp` gets
//!   `request_timeout`; past it the answer is 504 (`timeout`) and a tool
//!   call it started is killed (its jail with it, see
//!   [`super::call::Calls::run`]).
//! - MCP sessions ([`super::mcp::sessions`]): at most `max_sessions`, the
//!   oldest without a request in flight closed to make room (none: a new
//!   session is refused 503); one idle for `session_idle_timeout` is
//!   closed.
//! - `GET /api/v1/tools/usage` reads at most `usage_scan_bytes` from the
//!   end of the audit log.
//! - Each call's network connections: the descriptors of its share of
//!   the open-file limit ([`plan_fds`]), and for transparent egress's
//!   buffers `egress_memory_per_call` of `egress_memory`
//!   ([`crate::egress::budget`]); past them its new connection is
//!   refused (logged), never another call's.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::call::CallLimits;
use super::problem::Problem;
use crate::run::ErrorKind;

/// Default largest request body: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default number of calls run at once.
pub const DEFAULT_MAX_CONCURRENT: usize = super::call::DEFAULT_MAX_CONCURRENT;
/// Default number of calls waiting for a slot.
pub const DEFAULT_MAX_QUEUED: usize = super::call::DEFAULT_MAX_QUEUED;
/// Default time one request may take: 5 minutes (longer than any tool's
/// default 30 s wall-clock limit).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Default number of connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default time to send a request's headers (and longest idle keep-alive).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time to send a request's body.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of MCP sessions kept.
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// Default idle time after which an MCP session is closed.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default bytes of the audit log `usage` reads (from its end).
pub const DEFAULT_USAGE_SCAN_BYTES: u64 = 4 * 1024 * 1024;

/// The server's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Tool calls at once and waiting (shared by the API and `/mcp`).
    pub calls: CallLimits,
    /// Time one request may take; past it, 504.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections of one peer (IP address) at once; `None`: half of
    /// `max_connections` ([`super::conns::ConnLimits::fit`]).
    pub max_connections_per_peer: Option<usize>,
    /// Idle connections of one peer at once; `None`: a quarter of the
    /// per-peer cap.
    pub max_idle_per_peer: Option<usize>,
    /// Event streams (`subscriptions/listen`, `GET /mcp`) open at once;
    /// `None`: a quarter of `max_connections`.
    pub max_streams: Option<usize>,
    /// Event streams of one peer at once; `None`: a quarter of
    /// `max_streams`.
    pub max_streams_per_peer: Option<usize>,
    /// Time to send a request's headers; also the longest idle keep-alive.
    pub header_timeout: Duration,
    /// Time to send a request's body.
    pub body_timeout: Duration,
    /// MCP sessions kept; the oldest is closed to make room.
    pub max_sessions: usize,
    /// An MCP session idle this long is closed.
    pub session_idle_timeout: Duration,
    /// Bytes of the audit log read for `usage`, from its end.
    pub usage_scan_bytes: u64,
    /// Bytes every call's transparent connections may hold together
    /// (their buffers, [`crate::egress::budget`]).
    pub egress_memory: u64,
    /// Bytes one call's transparent connections may hold.
    pub egress_memory_per_call: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            calls: CallLimits::default(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: None,
            max_idle_per_peer: None,
            max_streams: None,
            max_streams_per_peer: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            usage_scan_bytes: DEFAULT_USAGE_SCAN_BYTES,
            egress_memory: crate::egress::budget::DEFAULT_BYTES_TOTAL,
            egress_memory_per_call: crate::egress::budget::DEFAULT_BYTES_PER_CALL,
        }
    }
}

impl Limits {
    /// The connection and stream caps once the connection cap is `cap`
    /// (`max_connections`, or fewer to fit the open-file limit).
    pub fn connection_limits(&self, cap: usize) -> super::conns::ConnLimits {
        super::conns::ConnLimits::fit(
            cap,
            self.max_connections_per_peer,
            self.max_idle_per_peer,
            self.max_streams,
            self.max_streams_per_peer,
        )
    }
}

/// Descriptors the server keeps for itself besides its connections and
/// calls: its listener, the runtime, the audit log, the watcher, idle
/// warm workers and standby jails.
pub const FD_RESERVE_BASE: u64 = 128;
/// Descriptors one call's jail holds at its peak, its connections aside:
/// its grants while it is set up (each held once, closed once decided),
/// pipes, pidfd, cgroup files, the proxy's listener and the TUN device
/// (40 measured for a call with the baseline alone, 48 with the network;
/// more per grant). Kept for every call slot, and once more for the
/// readiness probe's jail.
pub const FD_PER_JAIL: u64 = 64;
/// Descriptors each call slot keeps for its connections at least before
/// the connection cap is lowered for them: 16 proxied connections.
pub const FD_EGRESS_MIN: u64 = 16 * crate::egress::budget::PROXIED_FDS as u64;

/// How the server's open-file limit is shared ([`plan_fds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdPlan {
    /// Connections open at once (the cap).
    pub connections: usize,
    /// Descriptors one call's connections may hold.
    pub egress_per_call: usize,
    /// Descriptors every call's connections may hold together.
    pub egress_total: usize,
}

/// Shares `open_files` (the soft `RLIMIT_NOFILE`) out: the server's own
/// reserve and the readiness probe's jail first, then each of the
/// `slots` calls' jails, then the connections (`asked`, plus the
/// evicted ones still closing, [`super::conns::CLOSING_SLACK`]), and
/// what is left to the calls' connections, the same share per call slot
/// (at most [`crate::egress::budget::MAX_FDS_PER_CALL`]). The connection
/// cap is lowered to leave each slot [`FD_EGRESS_MIN`], but never below a
/// quarter of the limit, nor below 1.
pub fn plan_fds(asked: usize, open_files: u64, slots: usize) -> FdPlan {
    let slots = slots.max(1) as u64;
    let slack = super::conns::CLOSING_SLACK as u64;
    let shared = open_files
        .saturating_sub(FD_RESERVE_BASE + FD_PER_JAIL)
        .saturating_sub(slots * FD_PER_JAIL);
    let fits = shared
        .saturating_sub(slots * FD_EGRESS_MIN + slack)
        .max(open_files / 4);
    let connections = asked
        .min(usize::try_from(fits).unwrap_or(usize::MAX))
        .max(1);
    let left = shared.saturating_sub(connections as u64 + slack);
    let per_call = usize::try_from(left / slots)
        .unwrap_or(usize::MAX)
        .min(crate::egress::budget::MAX_FDS_PER_CALL);
    FdPlan {
        connections,
        egress_per_call: per_call,
        egress_total: per_call.saturating_mul(slots as usize),
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

/// Reads the body whole, within `body_timeout` and `max_body_bytes`.
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
    let read = axum::body::to_bytes(body, max);
    let bytes = match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_too_large(&e) => return too_large(max).into_response(),
        Ok(Err(e)) => {
            return Problem::bad_request(format!(
                "cannot read the request body: {}",
                crate::run::error_chain(&e)
            ))
            .into_response()
        }
        Err(_) => {
            return Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorKind::InputInvalid,
                format!(
                    "the request body did not arrive within {} s (glovebox serve --body-timeout); send it at once",
                    limits.body_timeout.as_secs_f64()
                ),
            )
            .details(serde_json::json!({"limit": "body_timeout", "body_timeout_s": limits.body_timeout.as_secs_f64()}))
            .header(header::CONNECTION, "close")
            .into_response()
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// When a request runs out of time (a request extension set by
/// [`limit_time`]), with the limit.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub (std::time::Instant, Duration));

/// Gives each request at most `request_timeout`.
pub async fn limit_time(
    State(limits): State<Limits>,
    mut request: Request,
    next: Next,
) -> Response {
    let timeout = limits.request_timeout;
    request
        .extensions_mut()
        .insert(Deadline((std::time::Instant::now() + timeout, timeout)));
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

#[cfg(test)]
mod tests {
    use super::{plan_fds, FdPlan};

    #[test]
    fn the_open_file_limit_is_shared_between_connections_and_calls() {
        // Plenty of descriptors: the cap asked for, each call the most.
        assert_eq!(
            plan_fds(512, 1_048_576, 16),
            FdPlan {
                connections: 512,
                egress_per_call: 1536,
                egress_total: 1536 * 16
            }
        );
        // 20,000: 128 + 64 for the server and its probe, 16 × 64 for the
        // jails, 512 + 32 for the connections, the rest in 16 shares.
        assert_eq!(plan_fds(512, 20_000, 16).egress_per_call, 1140);
        // 2,048 with 16 slots: the jails and the connections (a quarter
        // of the limit) first; the calls' connections get what is left.
        let p = plan_fds(512, 2048, 16);
        assert_eq!((p.connections, p.egress_per_call), (512, 18));
        // 4,096 with 4 slots: the cap asked, a share of 776 each.
        let p = plan_fds(512, 4096, 4);
        assert_eq!((p.connections, p.egress_per_call), (512, 776));
        // Too few for the connections asked and 16 egress connections a
        // slot: the cap is lowered, to no less than a quarter.
        let p = plan_fds(512, 1500, 8);
        assert_eq!((p.connections, p.egress_per_call), (375, 48));
        assert_eq!(plan_fds(512, 128, 16).connections, 32);
        assert_eq!(plan_fds(512, 0, 16).connections, 1);
        assert_eq!(plan_fds(512, 0, 16).egress_per_call, 0);
    }
}
