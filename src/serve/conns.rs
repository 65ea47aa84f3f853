//! [`Conns`]: the connections of `glovebox serve`, shared so that no one
//! client can hold every slot (issue 32, item 1) nor slow everyone
//! else's way in (issue 43, item 4).
//!
//! - At most `max` connections are open; one peer (an IP address: on
//!   loopback every local client is one peer) at most `per_peer` of them,
//!   and at most `idle_per_peer` of those idle.
//! - A connection is *busy* while one of its requests is being served
//!   (from its body read to the end of its answer, an event stream
//!   included), *idle* otherwise (between requests, or still sending its
//!   headers or body). Idle connections are what is shed, and one peer's
//!   first:
//!   - a peer past its idle cap loses its own oldest idle one (when it
//!     opens another, or when one of its requests ends); when even that
//!     one is fresh (idle less than [`PRESSURE_IDLE`]: the peer opens
//!     connections faster than it uses them, or its request is still on
//!     its way), the peer holds at least [`SHED_FROM`] of them and more
//!     connections wait in the kernel's backlog, its new connection is
//!     closed at once instead: it costs one accept and
//!     one close, so the backlog is drained as fast as the peer fills it
//!     and everyone else's connections still find room there; with the
//!     backlog empty the new connection gets in, and a fresh one is
//!     evicted only at the peer's hard cap;
//!   - a new connection past the whole cap closes the oldest idle one of
//!     the peer holding the most idle connections (so a client that
//!     holds many costs itself, not the others), past its peer's cap the
//!     peer's own oldest idle one;
//!   - under pressure (three quarters of the cap open) the idle timeout
//!     shortens to [`PRESSURE_IDLE`]: connections idle longer are closed
//!     as new ones arrive.
//!
//!   Only when every connection is busy does a new one wait (past the
//!   whole cap) or get 503 at once (past its peer's cap).
//! - Admission never sleeps: a connection that made room is counted as
//!   *closing* until its descriptor is really closed (an instant later),
//!   and up to [`CLOSING_SLACK`] of those may overlap the new ones (the
//!   descriptor budget keeps that many for them,
//!   [`super::limits::plan_fds`]); past the slack, or with every
//!   connection busy, the accept loop waits for [`Conns::changed`], which
//!   fires the moment one closes or becomes idle.
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
//!
//! Who a peer is: its IP address, taken at accept time
//! ([`super::http`]'s accept loop calls [`Conns::admit`] right after
//! `accept`).

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::problem::Problem;
use crate::run::ErrorKind;

/// Evicted connections whose descriptors may still be open while new
/// ones are admitted in their place (kept in the descriptor budget
/// beside the cap).
pub const CLOSING_SLACK: usize = 32;

/// Fresh idle connections a peer must hold before its new ones are shed
/// at once (a client opening a few connections in a row is not a flood,
/// whatever its idle cap).
pub const SHED_FROM: usize = 16;

/// The idle timeout under pressure: once three quarters of the cap are
/// open, a connection idle this long is closed as new ones arrive.
pub const PRESSURE_IDLE: Duration = Duration::from_secs(1);

/// The connection and stream caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max: usize,
    /// Connections of one peer at once.
    pub per_peer: usize,
    /// Idle connections of one peer at once.
    pub idle_per_peer: usize,
    /// Event streams open at once.
    pub max_streams: usize,
    /// Event streams of one peer at once.
    pub streams_per_peer: usize,
}

impl ConnLimits {
    /// The caps for `max` connections, each of the others given or
    /// derived from it: half of them per peer, a quarter of those idle
    /// per peer, a quarter of the connections for streams, a quarter of
    /// those per peer (each at least 1, none above the one it divides).
    pub fn fit(
        max: usize,
        per_peer: Option<usize>,
        idle_per_peer: Option<usize>,
        max_streams: Option<usize>,
        streams_per_peer: Option<usize>,
    ) -> ConnLimits {
        let max = max.max(1);
        let per_peer = per_peer.unwrap_or(max / 2).clamp(1, max);
        let idle_per_peer = idle_per_peer.unwrap_or(per_peer / 4).clamp(1, per_peer);
        let max_streams = max_streams.unwrap_or(max / 4).clamp(1, max);
        let streams_per_peer = streams_per_peer
            .unwrap_or(max_streams / 4)
            .clamp(1, max_streams);
        ConnLimits {
            max,
            per_peer,
            idle_per_peer,
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

/// One peer's connections: how many, and the idle ones by when they
/// became idle (so that every decision of an admission is a lookup, not
/// a walk over every connection: the accept loop sheds a flood as fast
/// as the kernel hands it over).
#[derive(Debug, Default)]
struct Peer {
    open: usize,
    idle: BTreeSet<(Instant, u64)>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    open: HashMap<u64, Conn>,
    peers: HashMap<IpAddr, Peer>,
    /// Evicted connections whose handle (and so descriptor) is not yet
    /// dropped: at most [`CLOSING_SLACK`] of them beside the cap, or a
    /// burst of new connections would each evict one and outrun their
    /// closing (the descriptor limit the cap was sized to).
    closing: usize,
}

impl State {
    /// Adds connection `id` (idle).
    fn insert(&mut self, id: u64, conn: Conn) {
        let p = self.peers.entry(conn.peer).or_default();
        p.open += 1;
        p.idle.insert((conn.idle_since, id));
        self.open.insert(id, conn);
    }

    /// Removes connection `id`, if it is open.
    fn remove(&mut self, id: u64) -> Option<Conn> {
        let c = self.open.remove(&id)?;
        if let Some(p) = self.peers.get_mut(&c.peer) {
            p.open = p.open.saturating_sub(1);
            p.idle.remove(&(c.idle_since, id));
            if p.open == 0 {
                self.peers.remove(&c.peer);
            }
        }
        Some(c)
    }

    /// One more request on connection `id` (busy from now on).
    fn begin(&mut self, id: u64) {
        let Some(c) = self.open.get_mut(&id) else {
            return;
        };
        if c.busy == 0 {
            if let Some(p) = self.peers.get_mut(&c.peer) {
                p.idle.remove(&(c.idle_since, id));
            }
        }
        c.busy += 1;
    }

    /// One request fewer on connection `id`: idle from `now` when it was
    /// the last. Its peer, when it became idle.
    fn end(&mut self, id: u64, now: Instant) -> Option<IpAddr> {
        let c = self.open.get_mut(&id)?;
        c.busy = c.busy.saturating_sub(1);
        if c.busy > 0 {
            return None;
        }
        c.idle_since = now;
        let peer = c.peer;
        self.peers.entry(peer).or_default().idle.insert((now, id));
        Some(peer)
    }

    fn of_peer(&self, peer: IpAddr) -> usize {
        self.peers.get(&peer).map_or(0, |p| p.open)
    }

    fn idle_of(&self, peer: IpAddr) -> usize {
        self.peers.get(&peer).map_or(0, |p| p.idle.len())
    }

    /// Whether no open connection is idle.
    fn none_idle(&self) -> bool {
        self.peers.values().all(|p| p.idle.is_empty())
    }

    /// Removes connection `id` from the open ones and tells it to close.
    fn evict(&mut self, id: u64) {
        if let Some(c) = self.remove(id) {
            c.evict.cancel();
            self.closing += 1;
        }
    }

    /// The connection of `peer` idle longest, and since when.
    fn oldest_idle(&self, peer: IpAddr) -> Option<(u64, Instant)> {
        let (since, id) = self.peers.get(&peer)?.idle.first()?;
        Some((*id, *since))
    }

    /// Evicts the connection of `peer` idle longest; whether there was
    /// one.
    fn evict_oldest_idle(&mut self, peer: IpAddr) -> bool {
        match self.oldest_idle(peer) {
            Some((id, _)) => {
                self.evict(id);
                true
            }
            None => false,
        }
    }

    /// Evicts the oldest idle connection of the peer holding the most
    /// idle ones; whether there was one.
    fn evict_from_heaviest(&mut self) -> bool {
        let heaviest = self
            .peers
            .iter()
            .filter(|(_, p)| !p.idle.is_empty())
            .max_by_key(|(peer, p)| (p.idle.len(), std::cmp::Reverse(**peer)))
            .map(|(peer, _)| *peer);
        match heaviest {
            Some(peer) => self.evict_oldest_idle(peer),
            None => false,
        }
    }

    /// Under pressure, evicts every connection idle longer than
    /// [`PRESSURE_IDLE`] (as many as the closing slack has room for).
    fn shed_under_pressure(&mut self, limits: &ConnLimits, now: Instant) {
        if self.open.len() + self.closing < limits.max - limits.max / 4 {
            return;
        }
        let mut stale: Vec<(Instant, u64)> = self
            .peers
            .values()
            .flat_map(|p| {
                p.idle
                    .iter()
                    .take_while(|(since, _)| now.duration_since(*since) > PRESSURE_IDLE)
                    .copied()
            })
            .collect();
        stale.sort_unstable();
        let room = CLOSING_SLACK.saturating_sub(self.closing);
        for (_, id) in stale.into_iter().take(room) {
            self.evict(id);
        }
    }
}

/// The open connections.
#[derive(Debug)]
pub struct Conns {
    limits: ConnLimits,
    state: Mutex<State>,
    /// Fired when a connection closes or becomes idle (room may be made).
    changed: Notify,
}

/// What [`Conns::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admission {
    /// Serve it (an idle one may have been evicted to make room).
    Open(Arc<ConnHandle>),
    /// Every slot is busy, or too many evicted ones are still closing:
    /// wait for [`Conns::changed`] and ask again.
    Wait,
    /// Its peer holds all its slots, every one busy: refuse it.
    PeerFull,
    /// Its peer is at its idle cap, every idle connection of its is
    /// fresh (idle less than [`PRESSURE_IDLE`]) and more connections wait
    /// behind it: close it at once.
    Shed,
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
        {
            let mut state = self.conns.lock();
            if state.remove(self.id).is_none() {
                // Evicted earlier: its descriptor is closed now.
                state.closing = state.closing.saturating_sub(1);
            }
        }
        self.conns.changed.notify_one();
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
        {
            let mut state = self.conns.lock();
            // Idle again: past its peer's idle cap, the peer's oldest
            // idle one goes (unless it is fresh: its request may be on its
            // way).
            let now = Instant::now();
            if let Some(peer) = state.end(self.id, now) {
                if state.idle_of(peer) > self.conns.limits.idle_per_peer {
                    if let Some((id, since)) = state.oldest_idle(peer) {
                        if now.duration_since(since) >= PRESSURE_IDLE {
                            state.evict(id);
                        }
                    }
                }
            }
        }
        self.conns.changed.notify_one();
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
            changed: Notify::new(),
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
        self.lock().none_idle()
    }

    /// Resolves once a connection has closed or become idle since the
    /// last time it resolved (or at once, when one did meanwhile): when
    /// [`Conns::admit`] said [`Admission::Wait`], the moment to ask again.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Admits a connection from `peer` while more connections wait behind
    /// it ([`Conns::admit_behind`]).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        self.admit_behind(peer, || true)
    }

    /// Admits a connection from `peer` (see the module documentation);
    /// `behind` says whether more connections wait in the kernel's
    /// backlog (asked only when the peer is at its idle cap with fresh
    /// idle connections: then, and only then, the new one is shed).
    pub fn admit_behind(
        self: &Arc<Self>,
        peer: IpAddr,
        behind: impl FnOnce() -> bool,
    ) -> Admission {
        let limits = self.limits;
        let now = Instant::now();
        let mut state = self.lock();
        state.shed_under_pressure(&limits, now);
        // Evicted connections not yet closed hold descriptors: past the
        // slack, none is evicted until they are.
        let room = state.closing < CLOSING_SLACK;
        let of_peer = state.of_peer(peer);
        let at_peer_cap = of_peer >= limits.per_peer;
        if at_peer_cap || state.idle_of(peer) >= limits.idle_per_peer {
            // The new connection is idle until its first request: the
            // peer's own oldest idle one makes room for it — unless even
            // that one is fresh (the peer opens connections faster than it
            // uses them) while more connections wait in the backlog: then
            // the new one is shed at once (it costs the server one accept
            // and one close, so the backlog drains and the others' way in
            // stays open).
            let fresh = |since: Instant| now.duration_since(since) < PRESSURE_IDLE;
            let flooding = state.idle_of(peer) >= SHED_FROM;
            match state.oldest_idle(peer) {
                Some((_, since)) if fresh(since) && flooding && behind() => return Admission::Shed,
                // A fresh one may be a request on its way (a connection is
                // idle until its request is read): only the peer's hard cap
                // takes it.
                Some((_, since)) if fresh(since) && !at_peer_cap => {}
                Some((id, _)) if room => state.evict(id),
                Some(_) => return Admission::Wait,
                // A peer allowed every slot waits like anyone at the cap.
                None if limits.per_peer >= limits.max => return Admission::Wait,
                None => return Admission::PeerFull,
            }
        }
        if state.open.len() >= limits.max && !(room && state.evict_from_heaviest()) {
            return Admission::Wait;
        }
        let id = state.next;
        state.next += 1;
        let evicted = CancellationToken::new();
        state.insert(
            id,
            Conn {
                peer,
                busy: 0,
                streams: 0,
                idle_since: now,
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
        let c = state.open.get(&conn.id)?;
        if c.evict.is_cancelled() {
            return None;
        }
        state.begin(conn.id);
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

#[cfg(test)]
#[path = "conns_tests.rs"]
mod tests;
