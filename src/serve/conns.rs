//! [`Conns`]: the connections of `glovebox serve`, shared so that no one
//! client can hold every slot (issue 32, item 1).
//!
//! - At most `max` connections are open; one peer (an IP address: on
//!   loopback every local client is one peer) at most `per_peer` of them.
//! - A connection is *busy* while one of its requests is being served
//!   (from its body read to the end of its answer, an event stream
//!   included), *idle* otherwise (between requests, or still sending its
//!   headers or body). A new connection past a cap closes the one idle
//!   longest (the peer's own when the peer is at its cap), so idle
//!   connections, however many and however renewed, never keep another
//!   client out. Only when every connection is busy does a new one wait
//!   (past the whole cap) or get 503 at once (past its peer's cap).
//! - Long-lived event streams (`subscriptions/listen` of MCP 2026-07-28
//!   and the standalone `GET /mcp` stream) are busy for as long as they
//!   stay open, so they have their own bound: at most `max_streams`
//!   (a quarter of the connections by default), `streams_per_peer` per
//!   peer; one more is answered 503 with `Retry-After`, and the room left
//!   is for calls.
//!
//! An evicted connection is dropped, not drained: it had no request in
//! flight, and a request that reaches the server on it after it was
//! chosen is refused before it runs anything ([`Conns::begin`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use tokio_util::sync::CancellationToken;

use super::problem::Problem;
use crate::run::ErrorKind;

/// The connection and stream caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max: usize,
    /// Connections of one peer at once.
    pub per_peer: usize,
    /// Event streams open at once.
    pub max_streams: usize,
    /// Event streams of one peer at once.
    pub streams_per_peer: usize,
}

impl ConnLimits {
    /// The caps for `max` connections, each of the others given or
    /// derived from it: half of them per peer, a quarter of them for
    /// streams, a quarter of those per peer (each at least 1, none above
    /// the one it divides).
    pub fn fit(
        max: usize,
        per_peer: Option<usize>,
        max_streams: Option<usize>,
        streams_per_peer: Option<usize>,
    ) -> ConnLimits {
        let max = max.max(1);
        let per_peer = per_peer.unwrap_or(max / 2).clamp(1, max);
        let max_streams = max_streams.unwrap_or(max / 4).clamp(1, max);
        let streams_per_peer = streams_per_peer
            .unwrap_or(max_streams / 4)
            .clamp(1, max_streams);
        ConnLimits {
            max,
            per_peer,
            max_streams,
            streams_per_peer,
        }
    }
}

#[derive(Debug)]
struct Conn {
    peer: IpAddr,
    busy: usize,
    streams: usize,
    idle_since: Instant,
    evict: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    open: HashMap<u64, Conn>,
    /// Evicted connections whose handle (and so descriptor) is not yet
    /// dropped: they still count against the cap, or a burst of new
    /// connections would each evict one and outrun their closing (the
    /// descriptor limit the cap was sized to).
    closing: usize,
}

/// The open connections.
#[derive(Debug)]
pub struct Conns {
    limits: ConnLimits,
    state: Mutex<State>,
}

/// What [`Conns::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admission {
    /// Serve it (an idle one may have been evicted to make room).
    Open(Arc<ConnHandle>),
    /// Every slot is busy: wait for one to close.
    Wait,
    /// Its peer holds all its slots, every one busy: refuse it.
    PeerFull,
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefusal {
    /// `max_streams` are open.
    Server(usize),
    /// The peer has `streams_per_peer` open.
    Peer(usize),
}

/// One open connection; it leaves [`Conns`] when dropped.
#[derive(Debug)]
pub struct ConnHandle {
    conns: Arc<Conns>,
    id: u64,
    evicted: CancellationToken,
}

impl ConnHandle {
    /// Resolves when the connection was chosen to be closed.
    pub async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// [`Conns::begin`] for this connection.
    pub fn begin(&self) -> Option<Busy> {
        self.conns.begin(self)
    }

    /// [`Conns::stream`] for this connection.
    pub fn stream(&self) -> Result<Stream, StreamRefusal> {
        self.conns.stream(self)
    }
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        let mut state = self.conns.lock();
        if state.open.remove(&self.id).is_none() {
            // Evicted earlier: its descriptor is closed now.
            state.closing = state.closing.saturating_sub(1);
        }
    }
}

/// A request being served: the connection is busy until this is dropped.
#[derive(Debug)]
pub struct Busy {
    conns: Arc<Conns>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(c) = self.conns.lock().open.get_mut(&self.id) {
            c.busy = c.busy.saturating_sub(1);
            c.idle_since = Instant::now();
        }
    }
}

/// An open event stream, counted until this is dropped.
#[derive(Debug)]
pub struct Stream {
    conns: Arc<Conns>,
    id: u64,
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(c) = self.conns.lock().open.get_mut(&self.id) {
            c.streams = c.streams.saturating_sub(1);
        }
    }
}

impl Conns {
    /// No connection yet, these caps.
    pub fn new(limits: ConnLimits) -> Arc<Conns> {
        Arc::new(Conns {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    /// The caps.
    pub fn limits(&self) -> ConnLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Whether every open connection is busy (none could be closed to
    /// make room).
    pub fn full_of_busy(&self) -> bool {
        self.lock().open.values().all(|c| c.busy > 0)
    }

    /// Admits a connection from `peer` (see the module documentation).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        let mut state = self.lock();
        let of_peer = state.open.values().filter(|c| c.peer == peer).count();
        if of_peer >= self.limits.per_peer {
            if !evict_oldest_idle(&mut state, Some(peer)) {
                // A peer allowed every slot waits like anyone at the cap.
                return if self.limits.per_peer >= self.limits.max {
                    Admission::Wait
                } else {
                    Admission::PeerFull
                };
            }
        } else if state.open.len() + state.closing >= self.limits.max
            && state.closing == 0
            && !evict_oldest_idle(&mut state, None)
        {
            return Admission::Wait;
        }
        // Room is made once an evicted connection is really closed.
        if state.open.len() + state.closing >= self.limits.max {
            return Admission::Wait;
        }
        let id = state.next;
        state.next += 1;
        let evicted = CancellationToken::new();
        state.open.insert(
            id,
            Conn {
                peer,
                busy: 0,
                streams: 0,
                idle_since: Instant::now(),
                evict: evicted.clone(),
            },
        );
        Admission::Open(Arc::new(ConnHandle {
            conns: self.clone(),
            id,
            evicted,
        }))
    }

    /// Marks `conn` busy with one more request; `None` when it was
    /// evicted (the request must not run: the connection is being
    /// dropped).
    pub fn begin(self: &Arc<Self>, conn: &ConnHandle) -> Option<Busy> {
        let mut state = self.lock();
        let c = state.open.get_mut(&conn.id)?;
        if c.evict.is_cancelled() {
            return None;
        }
        c.busy += 1;
        Some(Busy {
            conns: self.clone(),
            id: conn.id,
        })
    }

    /// Counts one more event stream on `conn`, or says which bound it
    /// would pass.
    pub fn stream(self: &Arc<Self>, conn: &ConnHandle) -> Result<Stream, StreamRefusal> {
        let mut state = self.lock();
        let total: usize = state.open.values().map(|c| c.streams).sum();
        if total >= self.limits.max_streams {
            return Err(StreamRefusal::Server(self.limits.max_streams));
        }
        let Some(peer) = state.open.get(&conn.id).map(|c| c.peer) else {
            return Err(StreamRefusal::Server(self.limits.max_streams));
        };
        let of_peer: usize = state
            .open
            .values()
            .filter(|c| c.peer == peer)
            .map(|c| c.streams)
            .sum();
        if of_peer >= self.limits.streams_per_peer {
            return Err(StreamRefusal::Peer(self.limits.streams_per_peer));
        }
        if let Some(c) = state.open.get_mut(&conn.id) {
            c.streams += 1;
        }
        Ok(Stream {
            conns: self.clone(),
            id: conn.id,
        })
    }
}

/// Whether a request opens a long-lived event stream: the standalone
/// `GET /mcp` stream, or a `subscriptions/listen` request.
pub fn is_stream(method: &Method, path: &str, body: &[u8]) -> bool {
    if path != "/mcp" {
        return false;
    }
    if method == Method::GET {
        return true;
    }
    method == Method::POST
        && body.windows(LISTEN.len()).any(|w| w == LISTEN.as_bytes())
        && serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|v| v.get("method").and_then(|m| m.as_str()) == Some(LISTEN))
}

const LISTEN: &str = "subscriptions/listen";

/// A response body that keeps a guard (its request's [`Busy`] and
/// [`Stream`], a session's call in flight) until it is dropped: an answer
/// being streamed keeps what it holds.
struct Held<G> {
    inner: Body,
    _guard: G,
}

/// `response`, keeping `guard` until its body is sent or dropped.
pub fn hold<G: Send + Unpin + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            inner: body,
            _guard: guard,
        }),
    )
}

impl<G: Unpin> HttpBody for Held<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Marks the request's connection busy until its answer is sent, and
/// counts an event stream against its bounds (503 past them).
pub async fn track(request: Request, next: Next) -> Response {
    let Some(conn) = request.extensions().get::<Arc<ConnHandle>>().cloned() else {
        return next.run(request).await;
    };
    let Some(busy) = conn.begin() else {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ResourceLimit,
            "this connection was closed to make room for another (it sat idle while every connection slot was taken): send the request on a new connection",
        )
        .header(header::RETRY_AFTER, "1")
        .header(header::CONNECTION, "close")
        .into_response();
    };
    let (parts, body) = request.into_parts();
    let mut stream = None;
    let body = if parts.uri.path() == "/mcp"
        && (parts.method == Method::GET || parts.method == Method::POST)
    {
        // The body limit read the body whole already.
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        if is_stream(&parts.method, parts.uri.path(), &bytes) {
            match conn.stream() {
                Ok(s) => stream = Some(s),
                Err(refusal) => return stream_refused(refusal).into_response(),
            }
        }
        Body::from(bytes)
    } else {
        body
    };
    let response = next.run(Request::from_parts(parts, body)).await;
    hold(response, (busy, stream))
}

/// The 503 answer to a stream past its bound.
fn stream_refused(refusal: StreamRefusal) -> Problem {
    let (message, limit, max) = match refusal {
        StreamRefusal::Server(max) => (
            format!("{max} event streams (subscriptions/listen, GET /mcp) are open, the most this server keeps (glovebox serve --max-streams): retry later, or close a stream you no longer read"),
            "max_streams",
            max,
        ),
        StreamRefusal::Peer(max) => (
            format!("this client already has {max} event streams (subscriptions/listen, GET /mcp) open, the most one client may (glovebox serve --max-streams-per-peer): close one you no longer read, or retry later"),
            "max_streams_per_peer",
            max,
        ),
    };
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::ResourceLimit,
        message,
    )
    .details(serde_json::json!({"limit": limit, limit: max}))
    .header(header::RETRY_AFTER, "5")
}

/// The answer written to a connection refused before it is read (its
/// peer holds all its slots, each busy): a 503 that closes it.
pub fn peer_full_answer(per_peer: usize) -> Vec<u8> {
    let body = Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::ResourceLimit,
        format!("this client already has {per_peer} connections open, each busy, the most one client may (glovebox serve --max-connections-per-peer): reuse one of them, or retry later"),
    )
    .details(serde_json::json!({"limit": "max_connections_per_peer", "max_connections_per_peer": per_peer}))
    .body()
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Removes the connection idle longest (of `peer`, when given) and tells
/// it to close; whether there was one.
fn evict_oldest_idle(state: &mut State, peer: Option<IpAddr>) -> bool {
    let oldest = state
        .open
        .iter()
        .filter(|(_, c)| c.busy == 0 && peer.is_none_or(|p| c.peer == p))
        .min_by_key(|(_, c)| c.idle_since)
        .map(|(id, _)| *id);
    let Some(id) = oldest else { return false };
    if let Some(c) = state.open.remove(&id) {
        c.evict.cancel();
        state.closing += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn open(a: Admission) -> Arc<ConnHandle> {
        match a {
            Admission::Open(h) => h,
            other => panic!("not admitted: {other:?}"),
        }
    }

    #[test]
    fn derived_caps() {
        let l = ConnLimits::fit(512, None, None, None);
        assert_eq!(
            (l.max, l.per_peer, l.max_streams, l.streams_per_peer),
            (512, 256, 128, 32)
        );
        let l = ConnLimits::fit(1, None, None, None);
        assert_eq!(
            (l.max, l.per_peer, l.max_streams, l.streams_per_peer),
            (1, 1, 1, 1)
        );
        let l = ConnLimits::fit(8, Some(100), Some(3), Some(9));
        assert_eq!(
            (l.max, l.per_peer, l.max_streams, l.streams_per_peer),
            (8, 8, 3, 3)
        );
    }

    #[test]
    fn the_oldest_idle_connection_makes_room_and_busy_ones_stay() {
        let conns = Conns::new(ConnLimits::fit(3, Some(3), None, None));
        let a = open(conns.admit(ip("127.0.0.1")));
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = open(conns.admit(ip("127.0.0.1")));
        let c = open(conns.admit(ip("127.0.0.1")));
        let _busy = conns.begin(&a).unwrap();
        // Full: b (idle longest; a is busy) is evicted, and the new one
        // waits until b is really closed.
        assert!(matches!(conns.admit(ip("127.0.0.2")), Admission::Wait));
        assert!(b.evicted.is_cancelled());
        // No second eviction while b closes.
        assert!(matches!(conns.admit(ip("127.0.0.2")), Admission::Wait));
        assert!(!c.evicted.is_cancelled());
        assert!(!a.evicted.is_cancelled() && !c.evicted.is_cancelled());
        // An evicted connection runs no new request.
        assert!(conns.begin(&b).is_none());
        drop(b);
        let d = open(conns.admit(ip("127.0.0.2")));
        let _c = conns.begin(&c).unwrap();
        let _d = conns.begin(&d).unwrap();
        // Every one busy: wait.
        assert!(matches!(conns.admit(ip("127.0.0.3")), Admission::Wait));
        drop(_c);
        assert!(matches!(conns.admit(ip("127.0.0.3")), Admission::Wait));
        assert!(c.evicted.is_cancelled());
        drop(c);
        let _e = open(conns.admit(ip("127.0.0.3")));
    }

    #[test]
    fn a_peer_at_its_cap_evicts_its_own_or_is_refused() {
        let conns = Conns::new(ConnLimits::fit(10, Some(2), None, None));
        let other = open(conns.admit(ip("10.0.0.9")));
        let a = open(conns.admit(ip("10.0.0.1")));
        let b = open(conns.admit(ip("10.0.0.1")));
        let _c = open(conns.admit(ip("10.0.0.1")));
        assert!(a.evicted.is_cancelled(), "its own oldest idle went");
        assert!(!other.evicted.is_cancelled(), "another peer's stays");
        let _b = conns.begin(&b).unwrap();
        let _cb = conns.begin(&_c).unwrap();
        assert!(matches!(conns.admit(ip("10.0.0.1")), Admission::PeerFull));
        assert!(matches!(conns.admit(ip("10.0.0.2")), Admission::Open(_)));
    }

    #[test]
    fn streams_are_bounded_overall_and_per_peer() {
        let conns = Conns::new(ConnLimits::fit(100, None, Some(3), Some(2)));
        let a = open(conns.admit(ip("127.0.0.1")));
        let b = open(conns.admit(ip("127.0.0.2")));
        let s1 = conns.stream(&a).unwrap();
        let _s2 = conns.stream(&a).unwrap();
        assert_eq!(conns.stream(&a).unwrap_err(), StreamRefusal::Peer(2));
        let _s3 = conns.stream(&b).unwrap();
        assert_eq!(conns.stream(&b).unwrap_err(), StreamRefusal::Server(3));
        drop(s1);
        assert!(conns.stream(&b).is_ok());
    }
}
