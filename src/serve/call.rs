//! One tool call run for a server: on a dedicated thread, cancellable, with
//! progress notifications while it runs.
//!
//! The jail's `PR_SET_PDEATHSIG` fires when the *thread* that started the
//! child exits, so every call gets a fresh `std::thread` that lives exactly
//! as long as the call (a pooled blocking thread of tokio could be reaped
//! mid-call and take the child with it). The async side waits for the
//! result, turns the request's cancellation into [`Cancel::cancel`] (the
//! jail kills the whole tree) and, when the client sent a progress token,
//! sends `notifications/progress` every second once the call has run for
//! a second.
//!
//! [`Calls`] keeps count of the calls in flight so that a server shutting
//! down can wait for them ([`Calls::wait`]) and, past its grace period,
//! kill every one of them ([`Calls::kill_all`]). A call whose caller stops
//! waiting (an HTTP request timed out or its client went away: the future
//! of [`Calls::run`] is dropped) is killed too, never left running.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::engine::{Caller, Engine};
use crate::jail::Cancel;
use crate::run::Outcome;

/// When the first progress notification goes out, and how often after.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Why a call produced no [`Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No thread could be started for the call.
    #[error("cannot start a thread for the call")]
    SpawnThread {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The call's thread ended without a result (it panicked).
    #[error("the call ended without a result")]
    Lost,
}

/// Where progress notifications go.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The client.
    pub peer: Peer<RoleServer>,
    /// The token the client sent with its request.
    pub token: ProgressToken,
}

/// The calls of one server: counted while they run, and killed together
/// on shutdown.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    running: TaskTracker,
    kill: CancellationToken,
}

/// Kills the call's process tree when dropped before the call returned.
struct KillOnDrop {
    cancel: Cancel,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.cancel.cancel();
        }
    }
}

impl Calls {
    /// No call running yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls are running (their threads have not ended).
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    /// Kills every running call's process tree, and every call started
    /// from now on; each still returns its [`Outcome`].
    pub fn kill_all(&self) {
        self.kill.cancel();
    }

    /// Cancelled once [`Calls::kill_all`] was called.
    pub fn killed(&self) -> &CancellationToken {
        &self.kill
    }

    /// Waits until no call is running.
    pub async fn wait(&self) {
        self.running.close();
        self.running.wait().await;
        self.running.reopen();
    }

    /// Runs `name` with `params` for `caller`; `stop` cancelled, or
    /// [`Calls::kill_all`], or this future dropped, kills the call's process
    /// tree (the first two still return its Outcome).
    pub async fn run(
        &self,
        engine: Arc<Engine>,
        name: String,
        params: Value,
        mut caller: Caller,
        stop: CancellationToken,
        progress: Option<Progress>,
    ) -> Result<Outcome, CallError> {
        let cancel = Cancel::new();
        caller.cancel = Some(cancel.clone());
        if self.kill.is_cancelled() {
            cancel.cancel();
        }
        let mut guard = KillOnDrop {
            cancel: cancel.clone(),
            armed: true,
        };
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let tool = name.clone();
        let running = self.running.token();
        // The thread's name comes from the request: only a valid tool name
        // is used (a NUL byte would make naming the thread fail).
        let thread_name = if crate::manifest::name::is_valid(&tool) {
            format!("call-{tool}")
        } else {
            "call".to_string()
        };
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                let _running = running;
                // A bug in one call must not take the server down: its
                // panic becomes an `internal` Outcome for that call alone.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    engine.call(&name, params, &caller)
                }))
                .unwrap_or_else(|_| {
                    Outcome::failure(
                        &crate::manifest::name::shown(&name),
                        crate::run::ErrorKind::Internal,
                        "the call failed on an internal error of glovebox (its intent stays unfinished in the audit log); please report it",
                        serde_json::json!({"panic": true}),
                    )
                });
                let _ = tx.send(outcome);
            })
            .map_err(|source| CallError::SpawnThread { source })?;
        let started = Instant::now();
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut stopped = false;
        loop {
            tokio::select! {
                r = &mut rx => {
                    guard.armed = false;
                    let mut outcome = r.map_err(|_| CallError::Lost)?;
                    if self.kill.is_cancelled() {
                        if let Some(e) = outcome.error.as_mut().filter(|e| e.details["cancelled"] == true) {
                            e.message = "the server is shutting down: the call ran past the grace period (glovebox serve --grace) and all its processes were killed".into();
                            if let Some(d) = e.details.as_object_mut() {
                                d.insert("shutdown".into(), true.into());
                            }
                        }
                    }
                    return Ok(outcome);
                }
                _ = stop.cancelled(), if !stopped => {
                    stopped = true;
                    cancel.cancel();
                }
                _ = self.kill.cancelled(), if !stopped => {
                    stopped = true;
                    cancel.cancel();
                }
                _ = ticker.tick(), if progress.is_some() && !stopped => {
                    if let Some(p) = &progress {
                        let secs = started.elapsed().as_secs();
                        let mut param = ProgressNotificationParam::new(p.token.clone(), secs as f64);
                        param.message = Some(format!("{tool} running for {secs} s"));
                        // A client that went away cannot be told; the call goes on.
                        let _ = p.peer.notify_progress(param).await;
                    }
                }
            }
        }
    }
}
