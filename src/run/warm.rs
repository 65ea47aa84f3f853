//! Warm python workers: under `serve` and `mcp`, a python call forks an
//! interpreter that is already up, inside the tool's jail, instead of
//! starting one.
//!
//! A **worker** is the tool's jail exactly as a cold call gets it (same
//! [`Spec`]: policy, mount tree, Landlock, seccomp, limits; started by
//! [`crate::run::start`] like every jailed run) running the
//! shim in zygote mode (see `shim.py`): the interpreter starts, the module
//! is imported once, then the zygote waits on its control channel (a unix
//! socket as its stdin, [`Stdin::Channel`]). It runs as pid 1 of the jail's
//! PID namespace, not dumpable, and never runs tool code after the import.
//! The worker's environment has no secrets.
//!
//! A **call** ([`Pool::run`]): glovebox makes the call's cgroups (memory
//! and process limits of its own, as a cold call), its pipes (request,
//! result, stderr; the request written into its pipe at once), asks the
//! call's gate (its intent on disk, `jail::Gate`) and sends the
//! descriptors; the zygote forks. The child starts a new session, joins
//! the call's cgroups, reads the parameters and the call's environment
//! (its secrets) from the request pipe itself — the zygote never holds
//! them — then calls the function exactly as the cold shim does, in a
//! fresh, empty `HOME`/`TMPDIR` the zygote made before the call. What is
//! the same for every call (the environment, the message-queue filter) is
//! set up once in the zygote, before the fork. When the child ends, or
//! when glovebox asks on the deadline or a cancellation, the zygote kills
//! every other process of its namespace (`kill(-1)` from pid 1 reaches
//! exactly that namespace), reaps them, removes its System V objects,
//! empties `HOME` and `/dev/shm`, makes the next call's `HOME` and only
//! then reports the child's wait status. One call at a time
//! per worker: concurrent calls of one tool get workers of their own, so
//! two calls never share a namespace; nothing of a call outlives it.
//!
//! The result is a [`JailResult`] read by the same code as a cold call's,
//! so the Outcome, errors, redaction and audit lines are the same. What
//! differs is documented: module-level code runs once per worker (without
//! the call's secrets or parameters), and a module that fails to import
//! makes that tool's calls run cold. So does a module whose import leaves
//! the zygote something every fork would share with the next call: a
//! thread or a process, a shared mapping that is or may become writable
//! (`MAP_SHARED` anonymous memory, a memfd, a writable file) or any open
//! descriptor (a pipe, a memfd, even a file's offset carries data): one
//! call could leave its parameters there for the next. The zygote checks
//! its own `/proc/self/maps` and `/proc/self/fd` after the import and
//! answers `M`; glovebox says so once on stderr.
//!
//! **Invalidation**: a worker is keyed by the tool's approval fingerprint
//! (manifest, module files, venv, grants) and the jail spec; a worker whose
//! fingerprint files or loaded module files changed on disk is discarded
//! before the next call. Workers exit after [`IDLE`] without a call, are
//! restarted when they die, and at most [`MAX_WORKERS`] live per server
//! (the least recently used idle one is evicted; with every worker busy a
//! call runs cold). Kill semantics: a timeout, cancellation or memory kill
//! ends the call's processes and keeps the worker; a worker that does not
//! answer within [`KILL_GRACE`] is killed whole (its PID namespace), and a
//! call running in it ends with it.
//!
//! Not warm (always cold): the CLI `run`, `exec.python.warm: false`, a
//! networked tool (its egress proxy and audit log are per call), degraded
//! mode, and any machine without a PID namespace and private `/proc`.

use std::collections::HashMap;
use std::io::{IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use sha2::{Digest, Sha256};

use crate::jail::cgroup::{self, CallGroup};
use crate::jail::probe::{self, Mode};
use crate::jail::{
    limits_hit, pump_call, Cancel, Channel, Enforcement, JailError, JailResult, LimitHit, Output,
    Sink, Spec, Status, Stdin, Supervised,
};
use crate::run::StartError;

/// How long a worker waits for a call before it exits.
pub const IDLE: Duration = Duration::from_secs(300);

/// Workers alive at once in one server.
pub const MAX_WORKERS: usize = 16;

/// How long a zygote has to report a killed call before the whole worker
/// is killed.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// The worker's own wall limit (it exits after [`IDLE`] long before).
const LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// After a worker could not start (the module failed to import, the jail
/// refused), calls with that key run cold this long before a retry.
const COLD_RETRY: Duration = Duration::from_secs(30);

/// How often the call loop looks at a cancel token.
const TICK: Duration = Duration::from_millis(50);

/// Why a worker could not start or serve (every case runs the call cold).
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// Setting up the worker or the call failed.
    #[error("warm worker: {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The zygote cannot serve warm here (the module failed to import, or
    /// it is not pid 1 of a namespace).
    #[error(
        "warm worker refused: the module cannot be imported once for every call; calls run cold"
    )]
    Refused,
    /// The module's import left the zygote holding memory or a descriptor
    /// every fork would share (a writable shared mapping, an open file):
    /// one call could leave data there for the next.
    #[error("warm worker refused: module {module} keeps a shared mapping or an open descriptor after its import, through which one call could pass data to the next; its calls run cold (close it, or create it inside the function)")]
    SharedState { module: String },
    /// The worker's jail could not start.
    #[error("warm worker: {0}")]
    Start(#[from] StartError),
    /// The call's gate refused it (its intent is not on disk): nothing
    /// of it ran.
    #[error("warm worker: the call was refused: {0}")]
    Gate(String),
    /// The worker ended before it was ready.
    #[error("warm worker ended before it was ready")]
    Died,
    /// The call's cgroups could not be made.
    #[error("warm worker: {0}")]
    Cgroup(#[from] cgroup::CgroupError),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> WarmError {
    move |source| WarmError::Io { what, source }
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// Turns warm workers on for this process (`serve`, `mcp`).
pub fn enable() {
    POOL.get_or_init(|| Pool::new(MAX_WORKERS));
}

/// Ends every idle worker and waits until its jail is gone (its private
/// `HOME` removed); for a server that is about to exit.
pub fn shutdown() {
    let Some(pool) = POOL.get() else { return };
    let idle = match pool.state.lock() {
        Ok(mut st) => {
            st.live = st.live.saturating_sub(st.idle.len());
            std::mem::take(&mut st.idle)
        }
        Err(_) => return,
    };
    let threads: Vec<JoinHandle<()>> = idle
        .into_iter()
        .filter_map(|mut w| w.thread.take())
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// The process's pool, when [`enable`]d.
pub fn pool() -> Option<&'static Pool> {
    POOL.get()
}

/// Whether a call with `spec` may run warm on this machine: not
/// networked, not degraded, output captured, the request on stdin, and a
/// PID namespace with its own `/proc` (the zygote must be pid 1).
pub fn eligible(spec: &Spec) -> bool {
    let k = probe::kernel();
    !spec.network
        && !spec.degraded
        && spec.output == Output::Capture
        && matches!(spec.stdin, Stdin::Bytes(_))
        && k.mode == Mode::Namespaces
        && k.pid_ns
        && k.mount_proc
}

/// What a call needs from a worker: which one (the key) and how to start
/// one.
#[derive(Debug, Clone)]
pub struct Plan {
    key: [u8; 32],
    init: String,
    watch: Vec<PathBuf>,
    /// The module the zygote imports (for messages).
    module: String,
    seen: Option<Seen>,
}

/// Where a worker records the project modules its zygote loaded
/// ([`crate::imports_seen`]): the project root, the tool, and its venv
/// (not recorded: protected whole).
#[derive(Debug, Clone)]
pub struct Seen {
    /// The project root.
    pub root: PathBuf,
    /// The tool's name.
    pub tool: String,
    /// The tool's venv, if any.
    pub venv: Option<PathBuf>,
}

impl Plan {
    /// The plan for a call with `spec` of a tool whose approval
    /// fingerprint is `fingerprint` and whose footprint files are `watch`;
    /// `init` is the zygote's import request
    /// ([`crate::run::python::init_request`]). `None` when the call is not
    /// [`eligible`].
    pub fn new(
        spec: &Spec,
        fingerprint: &str,
        init: &serde_json::Value,
        watch: Vec<PathBuf>,
    ) -> Option<Plan> {
        if !eligible(spec) {
            return None;
        }
        let module = init["module"].as_str().unwrap_or("?").to_string();
        let init = init.to_string();
        let mut h = Sha256::new();
        for part in [
            format!("{:?}", spec.argv),
            format!("{:?}", spec.cwd),
            format!("{:?}", spec.fs),
            format!("{:?}", spec.protect),
            format!("{:?}", spec.limits),
            format!("{}", spec.netns),
            init.clone(),
            fingerprint.to_string(),
        ] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        Some(Plan {
            key: h.finalize().into(),
            init,
            watch,
            module,
            seen: None,
        })
    }

    /// This plan, recording what its workers load under `seen`.
    pub fn recording(mut self, seen: Seen) -> Plan {
        self.seen = Some(seen);
        self
    }
}

/// The warm workers of one server.
#[derive(Debug)]
pub struct Pool {
    state: Mutex<State>,
    cap: usize,
}

#[derive(Debug, Default)]
struct State {
    idle: Vec<Worker>,
    /// Workers alive (idle or busy).
    live: usize,
    /// Keys whose worker could not start, and when.
    cold: HashMap<[u8; 32], Instant>,
    /// Keys whose module was found holding shared state (said once).
    told: std::collections::HashSet<[u8; 32]>,
}

impl State {
    /// Drops idle workers that died, went stale or idled out.
    fn sweep(&mut self) {
        let before = self.idle.len();
        self.idle
            .retain(|w| w.alive() && w.fresh() && w.last.elapsed() < IDLE);
        self.live = self.live.saturating_sub(before - self.idle.len());
        self.cold.retain(|_, t| t.elapsed() < COLD_RETRY);
    }
}

impl Pool {
    /// A pool of at most `cap` workers.
    pub fn new(cap: usize) -> Pool {
        Pool {
            state: Mutex::new(State::default()),
            cap: cap.max(1),
        }
    }

    /// Workers alive now (idle or busy).
    pub fn live(&self) -> usize {
        self.state.lock().map(|s| s.live).unwrap_or(0)
    }

    /// Runs the call `spec` (the cold call's spec: its request on stdin,
    /// its secrets in `env`) in a worker of `plan`. `None` when it did not
    /// run: the caller runs it cold.
    pub fn run(&self, plan: &Plan, spec: &Spec) -> Option<Result<JailResult, StartError>> {
        let Stdin::Bytes(request) = &spec.stdin else {
            return None;
        };
        let env: serde_json::Map<String, serde_json::Value> = spec
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned().into(),
                )
            })
            .collect();
        let mut body =
            format!("{{\"env\":{},\"request\":", serde_json::Value::Object(env)).into_bytes();
        body.extend_from_slice(request);
        body.push(b'}');
        let mut worker = match self.checkout(plan, spec) {
            Ok(Some(w)) => w,
            Ok(None) => return None,
            Err(message) => return Some(Err(StartError::Jail(JailError::Gate { message }))),
        };
        match worker.call(spec, body) {
            // The worker died under the call (killed, crashed), not on a
            // limit or a cancellation of the call: glovebox failed, not the
            // tool.
            Ok((_, Ran::Crashed)) => {
                self.checkin(worker, false);
                Some(Err(StartError::Jail(JailError::Wait {
                    source: std::io::Error::other(
                        "the warm worker running the call crashed (it was killed or died), and the call with it; retry the call",
                    ),
                })))
            }
            Ok((result, ran)) => {
                self.checkin(worker, ran == Ran::Healthy);
                Some(Ok(result))
            }
            // Nothing was sent: the worker is as it was.
            Err(WarmError::Gate(message)) => {
                self.checkin(worker, true);
                Some(Err(StartError::Jail(JailError::Gate { message })))
            }
            Err(_) => {
                self.checkin(worker, false);
                None
            }
        }
    }

    /// An idle worker of `plan`, or a new one. `Ok(None)`: none (the call
    /// runs cold); `Err(why)`: the call's gate refused it.
    ///
    /// A new worker runs the module's code at its import: the call's gate
    /// (see `jail::Gate`) is asked before it starts. A reused one is asked
    /// it by [`Worker::call`], right before the call is handed over.
    fn checkout(&self, plan: &Plan, spec: &Spec) -> Result<Option<Worker>, String> {
        {
            let Ok(mut st) = self.state.lock() else {
                return Ok(None);
            };
            st.sweep();
            if st.cold.contains_key(&plan.key) {
                return Ok(None);
            }
            if let Some(i) = st.idle.iter().position(|w| w.key == plan.key) {
                return Ok(Some(st.idle.swap_remove(i)));
            }
            if st.live >= self.cap {
                let Some(oldest) = st
                    .idle
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, w)| w.last)
                    .map(|(i, _)| i)
                else {
                    return Ok(None);
                };
                drop(st.idle.swap_remove(oldest));
                st.live = st.live.saturating_sub(1);
            }
            st.live += 1;
        }
        if let Some(gate) = &spec.gate {
            if let Err(why) = gate.pass() {
                if let Ok(mut st) = self.state.lock() {
                    st.live = st.live.saturating_sub(1);
                }
                return Err(why);
            }
        }
        match Worker::start(plan, spec) {
            Ok(w) => Ok(Some(w)),
            Err(e) => {
                if let Ok(mut st) = self.state.lock() {
                    st.live = st.live.saturating_sub(1);
                    st.cold.insert(plan.key, Instant::now());
                    if matches!(e, WarmError::SharedState { .. }) && st.told.insert(plan.key) {
                        eprintln!("glovebox: {e}");
                    }
                }
                Ok(None)
            }
        }
    }

    fn checkin(&self, mut worker: Worker, healthy: bool) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if healthy && worker.alive() && worker.fresh() {
            worker.last = Instant::now();
            st.idle.push(worker);
        } else {
            st.live = st.live.saturating_sub(1);
            drop(worker);
        }
    }
}

/// What identifies a file's content without reading it.
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(p).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// One running zygote.
#[derive(Debug)]
struct Worker {
    key: [u8; 32],
    ctl: UnixStream,
    cancel: Cancel,
    /// The files whose change voids the worker, as they were at start.
    files: Vec<(PathBuf, Option<Stamp>)>,
    last: Instant,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // End of file on its channel makes the zygote end its namespace;
        // the cancel token kills it through the jail in any case.
        let _ = self.ctl.shutdown(std::net::Shutdown::Both);
        self.cancel.cancel();
    }
}

impl Worker {
    /// Starts the worker of `plan` in the jail `spec` describes (without
    /// its secrets) and waits until the module is imported.
    fn start(plan: &Plan, spec: &Spec) -> Result<Worker, WarmError> {
        let watched: Vec<(PathBuf, Option<Stamp>)> =
            plan.watch.iter().map(|p| (p.clone(), stamp(p))).collect();
        let (mut ours, theirs) = UnixStream::pair().map_err(io("creating its channel"))?;
        let cancel = Cancel::new();
        let mut w = spec.clone();
        w.env.clear();
        w.stdin = Stdin::Channel(Channel::new(OwnedFd::from(theirs)));
        w.cancel = Some(cancel.clone());
        w.limits.wall = LIFETIME;
        // The zygote's code, which the cold shim leaves out.
        for arg in &mut w.argv {
            if let Some(warm) = super::python::warm_source(arg) {
                *arg = warm.into();
            }
        }
        w.argv.push("warm".into());
        w.argv.push(plan.init.clone().into());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("glovebox-warm".into())
            .spawn(move || {
                // Through the one door every jailed run takes.
                let _ = tx.send(crate::run::start(&w));
            })
            .map_err(io("starting its thread"))?;
        let ready = ours
            .set_read_timeout(Some(spec.limits.wall.max(Duration::from_secs(5))))
            .and_then(|()| read_ready(&mut ours));
        let loaded = match ready {
            Ok(Ready::Loaded(files)) => files,
            Ok(Ready::Refused) => {
                cancel.cancel();
                return Err(WarmError::Refused);
            }
            Ok(Ready::SharedState) => {
                cancel.cancel();
                return Err(WarmError::SharedState {
                    module: plan.module.clone(),
                });
            }
            Err(_) => {
                cancel.cancel();
                return match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(Err(e)) => Err(WarmError::Start(e)),
                    _ => Err(WarmError::Died),
                };
            }
        };
        ours.set_read_timeout(None)
            .map_err(io("configuring its channel"))?;
        if let Some(seen) = &plan.seen {
            let paths: Vec<PathBuf> = loaded.iter().map(PathBuf::from).collect();
            // Best effort: a record that cannot be written leaves the tool
            // covered by what its files say (crate::pyimports).
            let _ =
                crate::imports_seen::record(&seen.root, &seen.tool, &paths, seen.venv.as_deref());
        }
        let mut files = watched;
        for f in loaded {
            let p = PathBuf::from(f);
            if !files.iter().any(|(q, _)| *q == p) {
                let s = stamp(&p);
                files.push((p, s));
            }
        }
        Ok(Worker {
            key: plan.key,
            ctl: ours,
            cancel,
            files,
            last: Instant::now(),
            thread: Some(thread),
        })
    }

    /// An idle zygote never writes: anything readable is its end.
    fn alive(&self) -> bool {
        let mut fds = [PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => true,
            Ok(_) => false,
            Err(_) => false,
        }
    }

    /// Every watched file is as it was when the worker started.
    fn fresh(&self) -> bool {
        self.files.iter().all(|(p, s)| stamp(p) == *s)
    }

    /// Runs one call. `Err`: nothing ran (the caller runs it cold). The
    /// flag says whether the worker may serve again.
    fn call(&mut self, spec: &Spec, mut body: Vec<u8>) -> Result<(JailResult, Ran), WarmError> {
        let avail = cgroup::available();
        let want_mem = avail.memory.is_some().then_some(spec.limits.memory_bytes);
        let want_pids = avail.pids.is_some().then_some(spec.limits.pids);
        let group = if want_mem.is_some() || want_pids.is_some() {
            Some(CallGroup::create(want_mem, want_pids)?)
        } else {
            None
        };
        let (req_r, req_w) = pipe()?;
        let (res_r, res_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        // Everything that can fail is done before the call is sent: once
        // it is, the call has run (never twice, cold after warm).
        let cap = spec.limits.output_bytes;
        let sink = |fd| {
            Sink::new(fd, cap, Output::Capture, 1).map_err(|source| WarmError::Io {
                what: "configuring a pipe",
                source,
            })
        };
        let mut out = sink(res_r)?;
        let mut err = sink(err_r)?;
        let mut req_w = std::fs::File::from(req_w);
        nonblocking(&req_w)?;
        // The request goes into its pipe now, as much as the pipe holds
        // (all of it but for a large one): the child finds it there
        // without waiting for this thread, which the kernel may not run
        // again before the zygote has forked. Only the call's process
        // reads it.
        let written = match req_w.write(&body) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(source) => {
                return Err(WarmError::Io {
                    what: "writing the request",
                    source,
                })
            }
        };
        body.drain(..written);
        let rest = (!body.is_empty()).then(|| (OwnedFd::from(req_w), body));
        let mut fds: Vec<RawFd> = vec![req_r.as_raw_fd(), res_w.as_raw_fd(), err_w.as_raw_fd()];
        if let Some(g) = &group {
            fds.extend(g.procs.iter().map(AsRawFd::as_raw_fd));
        }
        // The call's gate (see `jail::Gate`), right before the call is
        // handed over: the preparation above overlapped its wait.
        if let Some(gate) = &spec.gate {
            gate.pass().map_err(WarmError::Gate)?;
        }
        let started = Instant::now();
        sendmsg::<UnixAddr>(
            self.ctl.as_raw_fd(),
            &[IoSlice::new(b"C")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| WarmError::Io {
            what: "sending the call",
            source: e.into(),
        })?;
        drop((req_r, res_w, err_w));
        // The jail's own supervisor loop, with the worker's channel where
        // a child's pidfd would be. From here on the call has run: no
        // error sends it cold.
        let mut on = OnChannel {
            worker: self,
            report: Vec::new(),
            status: None,
            dead: false,
        };
        let pumped = pump_call(
            &mut on,
            rest,
            &mut out,
            &mut err,
            started + spec.limits.wall,
            spec.cancel.as_ref(),
        );
        let (timed_out, cancelled) = match pumped {
            Ok(p) => (p.timed_out, p.cancelled),
            Err(_) => {
                // Cannot watch the call: end it with its worker.
                on.end();
                (false, false)
            }
        };
        let (status, dead) = (on.status, on.dead);
        let limits_hit = limits_hit(timed_out, group.as_ref(), &out, &err);
        let memory_hit = limits_hit.contains(&LimitHit::Memory);
        drop(group);
        let ran = match (dead, timed_out || cancelled || memory_hit) {
            (false, _) => Ran::Healthy,
            (true, true) => Ran::Ended,
            (true, false) => Ran::Crashed,
        };
        let status = match status {
            Some(s) if libc::WIFEXITED(s) => Status::Exited(libc::WEXITSTATUS(s)),
            Some(s) if libc::WIFSIGNALED(s) => Status::Signaled(libc::WTERMSIG(s)),
            _ => Status::Signaled(libc::SIGKILL),
        };
        Ok((
            JailResult {
                status,
                stdout_bytes: out.total,
                stderr_bytes: err.total,
                stdout: std::mem::take(&mut out.kept),
                stderr: std::mem::take(&mut err.kept),
                limits_hit,
                duration: started.elapsed(),
                enforcement: Enforcement::default(),
                warnings: Vec::new(),
                cancelled,
            },
            ran,
        ))
    }
}

/// A call a worker runs, as the jail's supervisor loop sees it: it ends
/// when the worker reports its wait status (`S` and four bytes) on the
/// channel, and is stopped with `K`. A worker that goes away, says
/// anything else, cannot be told or does not answer within
/// [`KILL_GRACE`] is ended whole (its namespace, and the call with it).
struct OnChannel<'a> {
    worker: &'a mut Worker,
    report: Vec<u8>,
    status: Option<i32>,
    dead: bool,
}

impl OnChannel<'_> {
    /// Ends the worker: end of file on its channel makes the zygote end
    /// its namespace; the cancel token kills it through the jail.
    fn end(&mut self) {
        self.dead = true;
        let _ = self.worker.ctl.shutdown(std::net::Shutdown::Both);
        self.worker.cancel.cancel();
    }
}

impl Supervised for OnChannel<'_> {
    const STOP_AFTER_END: bool = false;

    fn fd(&self) -> BorrowedFd<'_> {
        self.worker.ctl.as_fd()
    }

    fn readable(&mut self) -> bool {
        let mut buf = [0u8; 16];
        let mut gone = false;
        match self.worker.ctl.read(&mut buf) {
            Ok(0) | Err(_) => gone = true,
            Ok(n) => self.report.extend_from_slice(&buf[..n]),
        }
        if self.report.len() >= 5 {
            if self.report[0] == b'S' {
                let r = &self.report;
                self.status = Some(i32::from_be_bytes([r[1], r[2], r[3], r[4]]));
            } else {
                gone = true;
            }
        }
        if gone && self.status.is_none() {
            self.end();
        }
        self.dead || self.status.is_some()
    }

    fn stop(&mut self) -> bool {
        if self.worker.ctl.write_all(b"K").is_err() {
            self.end();
            return false;
        }
        true
    }

    fn give_up(&mut self, stopped: Instant) -> bool {
        if stopped.elapsed() > KILL_GRACE {
            self.end();
            return true;
        }
        false
    }

    fn tick(&self) -> Duration {
        TICK
    }
}

/// How a worker came out of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// It reported the call's status: reused.
    Healthy,
    /// It was ended for the call's limit or cancellation: discarded.
    Ended,
    /// It died under the call on its own (killed from outside, crashed):
    /// discarded, and the call is glovebox's failure.
    Crashed,
}

/// Reads the zygote's first message: `Some(files)` when ready, `None`
/// when it refused.
/// A zygote's first message.
#[derive(Debug, PartialEq, Eq)]
enum Ready {
    /// `R`: ready, with the module files it loaded.
    Loaded(Vec<String>),
    /// `F` (or anything unreadable): cannot serve warm.
    Refused,
    /// `M`: the import left a shared mapping or an open descriptor.
    SharedState,
}

fn read_ready(ctl: &mut impl Read) -> std::io::Result<Ready> {
    let mut tag = [0u8; 1];
    ctl.read_exact(&mut tag)?;
    match tag[0] {
        b'R' => {}
        b'M' => return Ok(Ready::SharedState),
        _ => return Ok(Ready::Refused),
    }
    let mut len = [0u8; 4];
    ctl.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 16 << 20 {
        return Ok(Ready::Refused);
    }
    let mut data = vec![0u8; len];
    ctl.read_exact(&mut data)?;
    Ok(serde_json::from_slice(&data)
        .map(Ready::Loaded)
        .unwrap_or(Ready::Refused))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), WarmError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| WarmError::Io {
        what: "creating a pipe",
        source: e.into(),
    })
}

fn nonblocking(fd: &impl AsFd) -> Result<(), WarmError> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let failed = |e: nix::errno::Errno| WarmError::Io {
        what: "configuring a pipe",
        source: e.into(),
    };
    let flags = fcntl(fd, FcntlArg::F_GETFL).map_err(failed)?;
    fcntl(
        fd,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .map_err(failed)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> Spec {
        let mut s = Spec::new(["python3", "-c", "pass"]);
        s.stdin = Stdin::Bytes(b"{}".to_vec());
        s
    }

    fn key(spec: &Spec, fingerprint: &str) -> Option<[u8; 32]> {
        Plan::new(spec, fingerprint, &json!({"module": "m"}), Vec::new()).map(|p| p.key)
    }

    #[test]
    fn a_zygote_holding_shared_state_is_told_apart_from_a_ready_one() {
        let ready = |b: &[u8]| read_ready(&mut std::io::Cursor::new(b.to_vec())).unwrap();
        assert_eq!(ready(b"M"), Ready::SharedState);
        assert_eq!(ready(b"F"), Ready::Refused);
        let files = br#"["/p/m.py"]"#;
        let mut r = b"R".to_vec();
        r.extend_from_slice(&(files.len() as u32).to_be_bytes());
        r.extend_from_slice(files);
        assert_eq!(ready(&r), Ready::Loaded(vec!["/p/m.py".into()]));
        let e = WarmError::SharedState { module: "m".into() };
        assert!(e.to_string().contains("module m keeps a shared mapping"));
    }

    #[test]
    fn a_worker_is_keyed_by_fingerprint_and_jail_not_by_secrets() {
        let base = spec();
        if !eligible(&base) {
            // No PID namespace here: nothing is ever warm.
            assert_eq!(key(&base, "f"), None);
            return;
        }
        let k = key(&base, "f").unwrap();
        assert_eq!(key(&base, "f"), Some(k), "stable");
        assert_ne!(key(&base, "g"), Some(k), "another fingerprint");
        let mut limits = base.clone();
        limits.limits.memory_bytes /= 2;
        assert_ne!(key(&limits, "f"), Some(k), "other limits");
        let mut fs = base.clone();
        fs.fs.write.push("/tmp/x".into());
        assert_ne!(key(&fs, "f"), Some(k), "other grants");
        let mut secrets = base.clone();
        secrets.env.push(("TOKEN".into(), "v".into()));
        assert_eq!(key(&secrets, "f"), Some(k), "secrets travel per call");
    }

    #[test]
    fn networked_degraded_and_streamed_calls_are_never_warm() {
        let mut s = spec();
        s.network = true;
        assert!(!eligible(&s));
        let mut s = spec();
        s.degraded = true;
        assert!(!eligible(&s));
        let mut s = spec();
        s.output = Output::Stream;
        assert!(!eligible(&s));
        let mut s = spec();
        s.stdin = Stdin::Null;
        assert!(!eligible(&s));
    }

    #[test]
    fn a_channel_goes_to_one_process_only() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = Channel::new(OwnedFd::from(a));
        let copy = c.clone();
        assert!(copy.take().is_some());
        assert!(c.take().is_none());
    }
}
