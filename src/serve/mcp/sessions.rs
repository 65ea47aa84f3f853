//! [`BoundedSessions`]: the MCP sessions of `/mcp`, bounded in number and
//! in idle time. It wraps `rmcp`'s in-memory session manager: a session
//! idle for the configured time ends (the manager's keep-alive), and
//! creating one more than the cap first closes the oldest, so a flood of
//! `initialize` requests costs a bounded amount of memory.
//!
//! A session with a request in flight (a call running, its answer not yet
//! sent) is never the one closed: the oldest session with none is, and
//! when every session has one, a new session is refused (503 with
//! `Retry-After`, [`super::compat::mcp`]) instead of a running call
//! losing its result (issue 32, item 3).
//!
//! It also remembers the revision each session negotiated, so that
//! [`super::compat::mcp`] sends SSE priming events (an event with an id
//! and empty data, SEP-1699) only to sessions on `2025-11-25` or later:
//! clients of older revisions (Gemini CLI on `2025-06-18`) read every
//! event's data as JSON and drop a server whose event has none.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage, ServerResult};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

/// The session manager of `/mcp`.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    /// Session ids, oldest first.
    order: Mutex<VecDeque<SessionId>>,
    /// The revision each session negotiated in `initialize`.
    revisions: Mutex<HashMap<SessionId, String>>,
    /// Requests in flight, per session.
    in_flight: Mutex<HashMap<SessionId, usize>>,
}

/// A request in flight on a session; the session may be closed to make
/// room only once every such guard is dropped.
#[derive(Debug)]
pub struct InFlight {
    sessions: Arc<BoundedSessions>,
    id: SessionId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self
            .sessions
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
}

/// The first revision whose SSE streams start with a priming event.
pub const PRIMING_SINCE: &str = "2025-11-25";

/// Whether a session on `revision` gets SSE priming events (revisions are
/// dates: they compare as strings).
pub fn primes(revision: &str) -> bool {
    revision >= PRIMING_SINCE
}

impl BoundedSessions {
    /// At most `max` sessions; one idle for `idle` is closed.
    pub fn new(max: usize, idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        BoundedSessions {
            inner,
            max: max.max(1),
            order: Mutex::new(VecDeque::new()),
            revisions: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request in flight on session `id` until the guard drops.
    pub fn begin(self: &Arc<Self>, id: &str) -> InFlight {
        let id: SessionId = Arc::from(id);
        *self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.clone())
            .or_default() += 1;
        InFlight {
            sessions: self.clone(),
            id,
        }
    }

    fn busy(&self, id: &SessionId) -> bool {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .is_some_and(|n| *n > 0)
    }

    /// Whether a new session can be made: fewer than the cap are open,
    /// or one of them has no request in flight (it is closed for it).
    pub async fn has_room(&self) -> bool {
        if self.count().await < self.max {
            return true;
        }
        let order = self.order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        order.iter().any(|id| !self.busy(id))
    }

    /// The oldest session without a request in flight, taken out of the
    /// order.
    fn take_oldest_idle(&self) -> Option<SessionId> {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let at = order.iter().position(|id| !self.busy(id))?;
        order.remove(at)
    }

    /// The revision session `id` negotiated, once it is initialized.
    pub fn revision(&self, id: &str) -> Option<String> {
        self.revisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// How many sessions are open.
    pub async fn count(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    fn forget(&self, id: &SessionId) {
        self.order
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|s| s != id);
        self.revisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Only a session without a request in flight is closed; when all
        // have one (a race past [`Self::has_room`]), the cap is passed
        // for a moment rather than a call's result lost.
        while self.count().await >= self.max {
            let Some(oldest) = self.take_oldest_idle() else {
                break;
            };
            self.forget(&oldest);
            let _ = self.inner.close_session(&oldest).await;
        }
        // Sessions that ended idle leave their revision behind: drop those
        // now and then, so the map stays as bounded as the sessions.
        if self
            .revisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
            > 2 * self.max
        {
            let open = self.inner.sessions.read().await;
            self.revisions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|id, _| open.contains_key(id));
        }
        let (id, transport) = self.inner.create_session().await?;
        self.order
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(id.clone());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let answer = self.inner.initialize_session(id, message).await?;
        if let ServerJsonRpcMessage::Response(r) = &answer {
            if let ServerResult::InitializeResult(init) = &r.result {
                self.revisions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone(), init.protocol_version.as_str().to_string());
            }
        }
        Ok(answer)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.forget(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}
