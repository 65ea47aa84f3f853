//! [`BoundedSessions`]: the MCP sessions of `/mcp`, bounded in number and
//! in idle time. It wraps `rmcp`'s in-memory session manager: a session
//! idle for the configured time ends (the manager's keep-alive), and
//! creating one more than the cap first closes the oldest, so a flood of
//! `initialize` requests costs a bounded amount of memory.
//!
//! It also remembers the revision each session negotiated, so that
//! [`super::compat::mcp`] sends SSE priming events (an event with an id
//! and empty data, SEP-1699) only to sessions on `2025-11-25` or later:
//! clients of older revisions (Gemini CLI on `2025-06-18`) read every
//! event's data as JSON and drop a server whose event has none.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
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
        }
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
        while self.count().await >= self.max {
            let oldest = self
                .order
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            let Some(oldest) = oldest else { break };
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
