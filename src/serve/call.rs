//! One tool call run for a server: on a worker thread of its own for as
//! long as it runs, cancellable, with progress notifications while it runs.
//!
//! The jail's `PR_SET_PDEATHSIG` fires when the *thread* that started the
//! child exits, so a call runs on a thread that outlives it: a worker of
//! [`super::workers`], reused from call to call (not created per call), and
//! ending only while idle (a pooled blocking thread of tokio could be
//! reaped mid-call and take the child with it). The worker is named
//! `call-TOOL` while it runs the call (`call` between calls). The async
//! side waits for the
//! result, turns the request's cancellation into [`Cancel::cancel`] (the
//! jail kills the whole tree) and, when the client sent a progress token,
//! sends `notifications/progress` every second once the call has run for
//! a second — or, for a wrapped MCP server's tool, relays the server's own
//! progress reports for the call with the client's token.
//!
//! [`Calls`] admits calls under one bound, the same for every interface
//! (stdio MCP, MCP over HTTP, the HTTP API) and every MCP revision:
//! [`CallLimits::max_concurrent`] run at once, up to
//! [`CallLimits::max_queued`] more wait for a slot, and one more is
//! answered at once with a `resource_limit` Outcome whose details say
//! `busy: true` (HTTP: 503 with `Retry-After`).
//!
//! [`Calls`] keeps count of the calls in flight so that a server shutting
//! down can wait for them ([`Calls::wait`]) and, past its grace period,
//! kill every one of them ([`Calls::kill_all`]). A call whose caller stops
//! waiting (an HTTP request timed out or its client went away: the future
//! of [`Calls::run`] is dropped) is killed too, never left running.
//! When the one client of `glovebox mcp` closes stdin
//! ([`Calls::client_gone`]), the calls still waiting for a slot are never
//! started, and those running are killed and end `cancelled` (their
//! result lines are written before the server exits).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::engine::{Caller, Cancelled, Engine};
use crate::jail::Cancel;
use crate::mcpwrap::client::Relay;
use crate::run::{ErrorKind, Outcome};

/// A call that never started: cancelled or shut down while it waited.
fn not_started(name: &str, message: &str) -> Outcome {
    Outcome::failure(
        &crate::manifest::name::shown(name),
        ErrorKind::Internal,
        message,
        json!({"cancelled": true}),
    )
}

/// A call whose client went away while it waited for a slot: never run.
fn never_started(name: &str) -> Outcome {
    Outcome::failure(
        &crate::manifest::name::shown(name),
        ErrorKind::Cancelled,
        "the client went away before the call started: it was not run",
        json!({"cancelled": true, "started": false}),
    )
}

/// `outcome` (a call refused before it started) once its audit line is
/// written ([`Engine::log_not_started`]); a line that cannot be written
/// changes nothing (nothing ran) but is said on stderr.
async fn logged(
    engine: &Arc<Engine>,
    name: &str,
    params: &Value,
    caller: &Caller,
    outcome: Outcome,
) -> Outcome {
    let (engine, name, params, caller, refused) = (
        engine.clone(),
        name.to_string(),
        params.clone(),
        caller.clone(),
        outcome.clone(),
    );
    let written = tokio::task::spawn_blocking(move || {
        engine.log_not_started(&name, &params, &caller, &refused)
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!(
            "glovebox: a call refused before it started could not be audited: {}",
            crate::run::error_chain(&e)
        ),
        Err(e) => eprintln!("glovebox: a call refused before it started could not be audited: {e}"),
    }
    outcome
}

/// When the first progress notification goes out, and how often after.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A wrapped MCP server's progress reports waiting for the client.
const RELAYED: usize = 64;

/// Why a call produced no [`Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No worker was idle and none could be started for the call.
    #[error("cannot start a thread for the call; retry later")]
    SpawnThread {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The call's job ended without a result (it panicked).
    #[error("the call ended without a result")]
    Lost,
}

impl CallError {
    /// The Outcome's error kind: the server failed, not the call.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

/// Where progress notifications go.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The client.
    pub peer: Peer<RoleServer>,
    /// The token the client sent with its request.
    pub token: ProgressToken,
}

/// Default number of calls run at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;
/// Default number of calls waiting for a slot.
pub const DEFAULT_MAX_QUEUED: usize = 64;

/// How many calls run at once, and how many may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Calls running at once.
    pub max_concurrent: usize,
    /// Calls waiting for a slot; one more is refused at once.
    pub max_queued: usize,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_queued: DEFAULT_MAX_QUEUED,
        }
    }
}

#[derive(Debug)]
struct Admission {
    limits: CallLimits,
    slots: Arc<Semaphore>,
    queue: Arc<Semaphore>,
}

impl Admission {
    fn new(limits: CallLimits) -> Self {
        Admission {
            limits,
            slots: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
            queue: Arc::new(Semaphore::new(limits.max_queued)),
        }
    }
}

/// The calls of one server: admitted under [`CallLimits`], counted while
/// they run, and killed together on shutdown.
#[derive(Debug, Clone)]
pub struct Calls {
    running: TaskTracker,
    kill: CancellationToken,
    gone: CancellationToken,
    admission: Arc<RwLock<Arc<Admission>>>,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            running: TaskTracker::new(),
            kill: CancellationToken::new(),
            gone: CancellationToken::new(),
            admission: Arc::new(RwLock::new(Arc::new(Admission::new(CallLimits::default())))),
        }
    }
}

/// The Outcome of a call refused because every slot and every place in
/// the queue is taken.
pub fn busy(name: &str, limits: CallLimits) -> Outcome {
    Outcome::failure(
        &crate::manifest::name::shown(name),
        ErrorKind::ResourceLimit,
        format!(
            "the server is busy: {} calls are running and {} waiting (--max-concurrent, --max-queued); retry later",
            limits.max_concurrent, limits.max_queued
        ),
        json!({"busy": true, "limit": "max_concurrent", "max_concurrent": limits.max_concurrent, "max_queued": limits.max_queued}),
    )
}

/// Whether `outcome` is a [`busy`] refusal.
pub fn is_busy(outcome: &Outcome) -> bool {
    outcome
        .error
        .as_ref()
        .is_some_and(|e| e.details["busy"] == true)
}

/// Whether the call failed for a moment, nothing of it run (the host
/// replaced a file its jail is given, as a package install does): the
/// same call may work when tried again.
pub fn is_transient(outcome: &Outcome) -> bool {
    outcome
        .error
        .as_ref()
        .is_some_and(|e| e.details["transient"] == true)
}

/// Kills the call's process tree when dropped before the call returned,
/// saying why: the request's deadline passed, or its client went away.
struct KillOnDrop {
    cancel: Cancel,
    armed: bool,
    why: Arc<std::sync::OnceLock<Cancelled>>,
    deadline: Option<(Instant, Duration)>,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let why = match self.deadline {
                // The request timeout drops the call at its deadline.
                Some((at, limit)) if Instant::now() + Duration::from_millis(100) >= at => {
                    Cancelled::RequestTimeout(limit)
                }
                _ => Cancelled::ClientGone,
            };
            let _ = self.why.set(why);
            self.cancel.cancel();
        }
    }
}

impl Calls {
    /// No call running yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the bound on calls (for calls admitted from now on).
    pub fn set_limits(&self, limits: CallLimits) {
        *self.admission.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(Admission::new(limits));
    }

    /// The bound on calls.
    pub fn limits(&self) -> CallLimits {
        self.admission
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .limits
    }

    /// How many calls are running (their jobs have not ended).
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    /// Kills every running call's process tree, and every call started
    /// from now on; each still returns its [`Outcome`].
    pub fn kill_all(&self) {
        self.kill.cancel();
    }

    /// The client is gone (stdio: it closed stdin): calls waiting for a
    /// slot are not started, running ones are killed and end `cancelled`.
    pub fn client_gone(&self) {
        self.gone.cancel();
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
        let admission = self
            .admission
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let slot = match admission.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let Ok(_place) = admission.queue.clone().try_acquire_owned() else {
                    super::metrics::get().call_ended(
                        None,
                        &busy(&name, admission.limits),
                        Duration::ZERO,
                    );
                    return Ok(logged(
                        &engine,
                        &name,
                        &params,
                        &caller,
                        busy(&name, admission.limits),
                    )
                    .await);
                };
                let queued = super::metrics::get().queued.clone();
                queued.inc();
                let refused = tokio::select! {
                    slot = admission.slots.clone().acquire_owned() => match slot {
                        Ok(slot) => Ok(slot),
                        Err(_) => Err(busy(&name, admission.limits)),
                    },
                    _ = stop.cancelled() => Err(not_started(&name, "the call was cancelled while it waited for a slot")),
                    _ = self.gone.cancelled() => Err(never_started(&name)),
                    _ = self.kill.cancelled() => Err(not_started(&name, "the server is shutting down: the call was not started")),
                };
                queued.dec();
                match refused {
                    Ok(slot) => slot,
                    Err(outcome) => {
                        return Ok(logged(&engine, &name, &params, &caller, outcome).await)
                    }
                }
            }
        };
        if self.gone.is_cancelled() {
            return Ok(logged(&engine, &name, &params, &caller, never_started(&name)).await);
        }
        let cancel = Cancel::new();
        caller.cancel = Some(cancel.clone());
        // A wrapped MCP server reports its own progress: relayed with the
        // client's token, in place of glovebox's running time (progress
        // must only grow, and the two scales differ).
        let wrapped = progress.is_some() && engine.relays_progress(&name);
        let mut relayed = wrapped.then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(RELAYED);
            caller.progress = Some(Relay::new(move |r| {
                // A client slower than the server's reports misses some.
                let _ = tx.try_send(r);
            }));
            rx
        });
        if self.kill.is_cancelled() {
            cancel.cancel();
        }
        let mut guard = KillOnDrop {
            cancel: cancel.clone(),
            armed: true,
            why: caller.cancelled.clone(),
            deadline: caller.deadline,
        };
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let tool = name.clone();
        let running = self.running.token();
        // The worker's name while it runs the call comes from the request:
        // only a valid tool name is used.
        let thread_name = if crate::manifest::name::is_valid(&tool) {
            format!("call-{tool}")
        } else {
            "call".to_string()
        };
        let job: super::workers::Job = Box::new(move || {
            let _running = running;
            // The slot is the job's: freed when the call has ended, even if
            // its caller stopped waiting.
            let slot = slot;
            super::workers::name_this_thread(&thread_name);
            let metrics = super::metrics::get();
            metrics.in_flight.inc();
            let began = Instant::now();
            // A bug in one call must not take the server down: its panic
            // becomes an `internal` Outcome for that call alone.
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
            metrics.in_flight.dec();
            let known = engine.project().tool(&name).is_ok();
            metrics.call_ended(known.then_some(name.as_str()), &outcome, began.elapsed());
            // Freed before the answer goes out: a client that sends its
            // next call on this answer finds the slot free (else, with no
            // queue, it could be told "busy" by this ended call).
            drop(slot);
            let _ = tx.send(outcome);
        });
        super::workers::Workers::global()
            .run(job)
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
                    let _ = guard.why.set(Cancelled::ByClient);
                    cancel.cancel();
                }
                _ = self.gone.cancelled(), if !stopped => {
                    stopped = true;
                    let _ = guard.why.set(Cancelled::ClientGone);
                    cancel.cancel();
                }
                _ = self.kill.cancelled(), if !stopped => {
                    stopped = true;
                    cancel.cancel();
                }
                r = async { relayed.as_mut()?.recv().await }, if relayed.is_some() => {
                    match (r, &progress) {
                        (Some(r), Some(p)) if !stopped => {
                            let mut param = ProgressNotificationParam::new(p.token.clone(), r.progress);
                            param.total = r.total;
                            param.message = r.message;
                            let _ = p.peer.notify_progress(param).await;
                        }
                        (Some(_), _) => {}
                        (None, _) => relayed = None,
                    }
                }
                _ = ticker.tick(), if progress.is_some() && !wrapped && !stopped => {
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
