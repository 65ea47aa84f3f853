//! [`Live`]: the project a server serves, reloaded from disk when its tools
//! change, and the clients to tell when the tool list did change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use super::call::Calls;
use super::mcp::catalog::{self, Offer};
use crate::engine::{Engine, EngineError};
use crate::manifest::project::Project;

/// Errors loading the project.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The project could not be opened or read.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The reload task failed.
    #[error("the reload of the project did not finish")]
    Reload {
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// The served project: an [`Engine`] swapped whole on reload (a call in
/// flight keeps the engine it started with), and the connected clients.
pub struct Live {
    root: PathBuf,
    tools_json: Option<PathBuf>,
    engine: RwLock<Arc<Engine>>,
    fingerprint: Mutex<String>,
    peers: Mutex<Vec<Peer<RoleServer>>>,
    listeners: Mutex<Vec<SubscriptionSink>>,
    ending: tokio_util::sync::CancellationToken,
    reloading: tokio::sync::Mutex<()>,
    calls: Calls,
    offer: Offer,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("root", &self.root).finish()
    }
}

/// What the clients are offered, and why a wrapped MCP server offers
/// nothing (a new failure is a change the clients are told about: they
/// list again, and the list's answer carries the reason).
fn fingerprint(project: &Project, offer: &Offer) -> String {
    let failures: Vec<String> = crate::mcpwrap::failures(project)
        .into_iter()
        .map(|(_, why)| why.message)
        .collect();
    serde_json::to_string(&(catalog::offered(project, offer), failures)).unwrap_or_default()
}

impl Live {
    /// Opens the project at `root` (or the nearest one above the working
    /// directory).
    pub fn open(root: Option<&Path>) -> Result<Arc<Live>, LiveError> {
        Live::open_with(root, None)
    }

    /// Opens the project with an explicit agentcli `tools.json`
    /// (`--tools-json`); reloads read the same file.
    pub fn open_with(
        root: Option<&Path>,
        tools_json: Option<&Path>,
    ) -> Result<Arc<Live>, LiveError> {
        Live::open_offering(root, tools_json, Offer::Project)
    }

    /// Opens the project offering its clients what `offer` says (one
    /// wrapped server's tools, for `glovebox wrap`).
    pub fn open_offering(
        root: Option<&Path>,
        tools_json: Option<&Path>,
        offer: Offer,
    ) -> Result<Arc<Live>, LiveError> {
        let engine = Engine::open_with(root, tools_json)?;
        Ok(Arc::new(Live {
            root: engine.project().root.clone(),
            tools_json: tools_json.and(engine.project().tools_json.clone()),
            fingerprint: Mutex::new(fingerprint(engine.project(), &offer)),
            engine: RwLock::new(Arc::new(engine)),
            peers: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            ending: tokio_util::sync::CancellationToken::new(),
            reloading: tokio::sync::Mutex::new(()),
            calls: Calls::new(),
            offer,
        }))
    }

    /// What the clients are offered.
    pub fn offer(&self) -> &Offer {
        &self.offer
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The agentcli `tools.json` being served, explicit or found in the root.
    pub fn tools_json(&self) -> Option<PathBuf> {
        self.engine().project().tools_json.clone()
    }

    /// The tool calls running for this project's clients (MCP and HTTP).
    pub fn calls(&self) -> &Calls {
        &self.calls
    }

    /// The current engine.
    pub fn engine(&self) -> Arc<Engine> {
        self.engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Remembers a client to notify when the tool list changes.
    /// Clients that went away are forgotten here, so the list stays as
    /// long as the sessions still open.
    pub fn add_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// Remembers a `subscriptions/listen` stream (MCP 2026-07-28) that asked
    /// for tool list changes.
    pub fn add_listener(&self, sink: SubscriptionSink) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sink);
    }

    /// Ends every `subscriptions/listen` stream gracefully (the server is
    /// stopping): each gets its final result instead of a dropped
    /// connection.
    pub fn end_subscriptions(&self) {
        self.ending.cancel();
    }

    /// Resolves once [`Live::end_subscriptions`] was called.
    pub async fn subscriptions_ended(&self) {
        self.ending.cancelled().await;
    }

    /// Reloads the project from disk; when its tool list changed, sends
    /// `notifications/tools/list_changed` to every client still connected
    /// (initialized sessions, and open `subscriptions/listen` streams).
    /// Returns whether the list changed. On an error the old project stays.
    pub async fn reload(&self) -> Result<bool, LiveError> {
        let _one_at_a_time = self.reloading.lock().await;
        let root = self.root.clone();
        let tools_json = self.tools_json.clone();
        let engine = tokio::task::spawn_blocking(move || {
            Engine::open_with(Some(&root), tools_json.as_deref())
        })
        .await
        .map_err(|source| LiveError::Reload { source })??;
        let print = fingerprint(engine.project(), &self.offer);
        let changed = {
            let mut old = self.fingerprint.lock().unwrap_or_else(|p| p.into_inner());
            let changed = *old != print;
            *old = print;
            changed
        };
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        if changed {
            self.notify_list_changed().await;
        }
        Ok(changed)
    }

    async fn notify_list_changed(&self) {
        let peers = std::mem::take(&mut *self.peers.lock().unwrap_or_else(|p| p.into_inner()));
        let mut alive = Vec::with_capacity(peers.len());
        for peer in peers {
            if peer.is_transport_closed() {
                continue;
            }
            if peer.notify_tool_list_changed().await.is_ok() {
                alive.push(peer);
            }
        }
        self.peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(alive);
        let sinks = std::mem::take(&mut *self.listeners.lock().unwrap_or_else(|p| p.into_inner()));
        let mut open = Vec::with_capacity(sinks.len());
        for sink in sinks {
            // A closed or cancelled stream answers an error: forget it.
            if sink.notify_tool_list_changed().await.is_ok() {
                open.push(sink);
            }
        }
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(open);
    }
}
