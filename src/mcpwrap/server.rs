//! One wrapped MCP server's life: started in its jail on first use,
//! listed, restarted after a crash (with back-off), stopped when idle and
//! at shutdown.
//!
//! The jail is the one every tool call gets ([`crate::run::start`], the
//! spec built from the manifest's policy as the engine builds a command
//! tool's): mount tree, Landlock, seccomp, namespaces, cgroup limits on
//! the whole process tree, the egress gateway for `network: true`, the
//! declared secrets only (placeholders for secrets bound to hosts). Only
//! the wall limit differs: the server lives until it is stopped; each
//! call has its own deadline ([`crate::manifest::model::McpExec::timeout_ms`]).
//! Its stdin and stdout are one end of a socket pair
//! ([`crate::jail::Stdin::Duplex`]); glovebox holds the other.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::client::{ClientError, Connection};
use crate::jail::{self, Cancel, Channel, Output, Spec, Stdin};
use crate::kind::ErrorKind;
use crate::manifest::config::Config;
use crate::manifest::discover::{resolve, resolved_under};
use crate::manifest::model::{Exec, McpExec};
use crate::manifest::project::{Project, Tool};
use crate::policy::Policy;
use crate::run::{self, secrets, Redactor, SecretSource};

/// How long a server has to answer `initialize` and list its tools.
pub const START_LIMIT: Duration = Duration::from_secs(60);

/// The server's own wall limit (it is stopped when idle long before).
const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// First wait before a start after a failure or a crash; doubled each
/// time, up to [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Duration = Duration::from_millis(250);

/// Longest wait between two starts of a failing server.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A call waits this long at most for a server's back-off to pass; past
/// it the call fails at once, saying when the next start is.
const WAIT_MAX: Duration = Duration::from_secs(5);

/// Pages of `tools/list` read at most.
const MAX_PAGES: usize = 100;

/// Why a server is not available.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Unavailable {
    /// The Outcome's kind.
    pub kind: ErrorKind,
    /// What happened and what to do.
    pub message: String,
}

fn unavailable(kind: ErrorKind, message: impl Into<String>) -> Unavailable {
    Unavailable {
        kind,
        message: message.into(),
    }
}

/// What a start on a thread of its own holds ([`Launch`], owned).
struct Owned {
    project: Project,
    tool: Tool,
    config: Config,
    secrets: SecretSource,
}

/// What starting a server needs.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The project the server belongs to.
    pub project: &'a Project,
    /// The server's tool (its own entry, or one of its tools: the exec
    /// and permissions are the same).
    pub tool: &'a Tool,
    /// The project config.
    pub config: &'a Config,
    /// Where its declared secrets are read from.
    pub secrets: &'a SecretSource,
}

impl Launch<'_> {
    fn exec(&self) -> Option<&McpExec> {
        match &self.tool.manifest.exec {
            Exec::Mcp(m) => Some(m),
            _ => None,
        }
    }

    /// What identifies the server's configuration: a running server of
    /// another digest is stopped and started again.
    fn digest(&self) -> String {
        let m = &self.tool.manifest;
        let v = json!([self.project.root, m.exec, m.permissions]);
        hex::encode(Sha256::digest(v.to_string().as_bytes()))
    }
}

/// The tools a server lists, and the sha256 of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The tools as the server describes them (`name`, `description`,
    /// `inputSchema`, …).
    pub tools: Vec<Value>,
    /// sha256 of `tools` as served.
    pub hash: String,
}

impl Listed {
    fn new(tools: Vec<Value>) -> Listed {
        let hash = hex::encode(Sha256::digest(
            serde_json::to_vec(&tools).unwrap_or_default(),
        ));
        Listed { tools, hash }
    }
}

/// A started server.
pub struct Running {
    conn: Connection,
    cancel: Cancel,
    digest: String,
    listed: Mutex<Arc<Listed>>,
    /// Set by the jail's thread when the server ended: the kind and why.
    ended: Arc<Mutex<Option<(ErrorKind, String)>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    busy: AtomicUsize,
    /// The log of its egress proxy (a server with the network).
    egress: Option<crate::egress::Log>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").finish_non_exhaustive()
    }
}

impl Running {
    /// The connection.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The log of its egress proxy, when it has the network.
    pub fn egress(&self) -> Option<&crate::egress::Log> {
        self.egress.as_ref()
    }

    fn alive(&self) -> bool {
        self.conn.closed().is_none()
            && self
                .ended
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
    }

    /// Why it ended, when it did.
    pub fn ended(&self) -> Option<(ErrorKind, String)> {
        if let Some(e) = self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Some(e);
        }
        self.conn.closed().map(|why| (ErrorKind::Internal, why))
    }

    /// Why the jail says the server ended, once it did.
    pub fn jail_ended(&self) -> Option<(ErrorKind, String)> {
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The server's tool list: read again when the server said it changed
    /// (under the list's lock: no call is checked against the list the
    /// change replaced while it is read; a failed read is tried again on
    /// the next call).
    pub fn listed(&self) -> Result<Arc<Listed>, ClientError> {
        let mut listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        if self.conn.take_list_changed() {
            match list_all(&self.conn) {
                Ok(fresh) => *listed = Arc::new(fresh),
                Err(e) => {
                    self.conn.list_changed_again();
                    return Err(e);
                }
            }
        }
        Ok(listed.clone())
    }

    /// Counts a call in flight while the guard lives (an idle stop waits).
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    fn stop(&self) {
        self.conn.shutdown();
        self.cancel.cancel();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// A call in flight ([`Running::busy`]).
pub struct Busy(Arc<Running>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct State {
    running: Option<Arc<Running>>,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<Unavailable>,
    last_use: Option<Instant>,
    idle: Duration,
    /// A start on a thread of its own is under way ([`Server::ensure_background`]).
    pending: bool,
    /// A start has succeeded in this process.
    started_once: bool,
}

/// Where a server is, for a front-end that does not wait for it.
#[derive(Debug, Clone)]
pub enum Status {
    /// Running, its tools listed.
    Running(Arc<Running>),
    /// Starting (installing, or answering `initialize`) on a thread of
    /// its own.
    Starting,
    /// Its first start failed, and why.
    Failed(Unavailable),
}

/// One server of one project, in this process.
pub struct Server {
    name: String,
    state: Mutex<State>,
    starting: Mutex<()>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.name).finish()
    }
}

type Registry = Mutex<HashMap<(PathBuf, String), Arc<Server>>>;

static SERVERS: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    SERVERS.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("glovebox-mcp-idle".into())
            .spawn(reap_idle);
        Mutex::new(HashMap::new())
    })
}

/// Bumped whenever a server's tool list may have changed (a
/// `list_changed` notification, a restart, a start that failed).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Servers are first started on a thread of their own ([`background`]).
static BACKGROUND: AtomicBool = AtomicBool::new(false);

/// From now on, a project's load does not wait for a server that has not
/// started yet in this process: it starts on a thread of its own, and
/// its tools are added when it is ready ([`generation`] changes: a
/// front-end reloads and tells its clients). For `glovebox wrap`, whose
/// client's `initialize` must not wait for an install.
pub fn background() {
    BACKGROUND.store(true, Ordering::SeqCst);
}

/// Whether servers start in the [`background`].
pub fn in_background() -> bool {
    BACKGROUND.load(Ordering::SeqCst)
}

/// A number that changes whenever a server's tool list may have changed:
/// a server front-end compares it to reload its catalog.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// The server `name` of the project at `root`.
pub fn get(root: &std::path::Path, name: &str) -> Arc<Server> {
    let mut all = registry().lock().unwrap_or_else(PoisonError::into_inner);
    all.entry((root.to_path_buf(), name.to_string()))
        .or_insert_with(|| {
            Arc::new(Server {
                name: name.to_string(),
                state: Mutex::new(State::default()),
                starting: Mutex::new(()),
            })
        })
        .clone()
}

/// Stops every server of this process and waits until each jail is gone.
pub fn shutdown() {
    let Some(registry) = SERVERS.get() else {
        return;
    };
    let all: Vec<Arc<Server>> = match registry.lock() {
        Ok(all) => all.values().cloned().collect(),
        Err(p) => p.into_inner().values().cloned().collect(),
    };
    for s in all {
        s.stop();
    }
}

fn reap_idle() {
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let all: Vec<Arc<Server>> = match registry().lock() {
            Ok(all) => all.values().cloned().collect(),
            Err(_) => return,
        };
        for s in all {
            s.stop_if_idle();
        }
    }
}

fn backoff(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(10);
    (BACKOFF_FIRST * factor).min(BACKOFF_MAX)
}

impl Server {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The running server, started (or restarted) if need be.
    pub fn ensure(&self, launch: &Launch<'_>) -> Result<Arc<Running>, Unavailable> {
        let _one = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        let digest = launch.digest();
        let wait = {
            let mut st = self.lock();
            st.last_use = Some(Instant::now());
            st.idle = Duration::from_millis(launch.exec().map_or(0, |e| e.idle_ms));
            if let Some(r) = &st.running {
                if r.alive() && r.digest == digest {
                    return Ok(r.clone());
                }
            }
            if let Some(old) = st.running.take() {
                drop(st);
                // A server that died on its own counts as a crash: its
                // next start waits the back-off (one that dies right
                // after each start is not restarted in a loop).
                let died = (!old.alive()).then(|| old.ended()).flatten();
                old.stop();
                GENERATION.fetch_add(1, Ordering::SeqCst);
                if let Some((kind, message)) = died {
                    self.failed(unavailable(kind, message));
                }
                st = self.lock();
            }
            match st.retry_at {
                Some(at) if at > Instant::now() => {
                    let wait = at - Instant::now();
                    if wait > WAIT_MAX {
                        let why = st
                            .last_error
                            .as_ref()
                            .map(|e| e.message.clone())
                            .unwrap_or_default();
                        return Err(unavailable(
                            st.last_error
                                .as_ref()
                                .map_or(ErrorKind::Internal, |e| e.kind),
                            format!(
                                "{why} (the next start of MCP server `{}` is in {} s)",
                                self.name,
                                wait.as_secs()
                            ),
                        ));
                    }
                    wait
                }
                _ => Duration::ZERO,
            }
        };
        std::thread::sleep(wait);
        match start(launch, digest) {
            Ok(r) => {
                let r = Arc::new(r);
                let mut st = self.lock();
                st.running = Some(r.clone());
                st.started_once = true;
                Ok(r)
            }
            Err(e) => {
                self.failed(e.clone());
                Err(e)
            }
        }
    }

    /// The server of `launch` when it is running; else, the first time,
    /// its start on a thread of its own (`Starting`), or why that first
    /// start failed (not tried again here: a call tries, through
    /// [`Server::ensure`]). A server that ran before in this process (and
    /// crashed or went idle) is started at once, as [`Server::ensure`]
    /// does.
    pub fn ensure_background(self: &Arc<Self>, launch: &Launch<'_>) -> Status {
        {
            let mut st = self.lock();
            if st.pending {
                return Status::Starting;
            }
            if let Some(r) = &st.running {
                if r.alive() && r.digest == launch.digest() {
                    return Status::Running(r.clone());
                }
            }
            if !st.started_once {
                if let Some(e) = &st.last_error {
                    return Status::Failed(e.clone());
                }
                st.pending = true;
                drop(st);
                let owned = Owned {
                    project: launch.project.clone(),
                    tool: launch.tool.clone(),
                    config: launch.config.clone(),
                    secrets: launch.secrets.clone(),
                };
                let me = self.clone();
                let spawned = std::thread::Builder::new()
                    .name("glovebox-mcp-start".into())
                    .spawn(move || {
                        let launch = Launch {
                            project: &owned.project,
                            tool: &owned.tool,
                            config: &owned.config,
                            secrets: &owned.secrets,
                        };
                        let _ = me.ensure(&launch);
                        me.lock().pending = false;
                        GENERATION.fetch_add(1, Ordering::SeqCst);
                    });
                return match spawned {
                    Ok(_) => Status::Starting,
                    Err(e) => {
                        let why = unavailable(
                            ErrorKind::Internal,
                            format!("MCP server `{}`: starting its thread: {e}", self.name),
                        );
                        let mut st = self.lock();
                        st.pending = false;
                        st.last_error = Some(why.clone());
                        Status::Failed(why)
                    }
                };
            }
        }
        match self.ensure(launch) {
            Ok(r) => Status::Running(r),
            Err(e) => Status::Failed(e),
        }
    }

    /// Waits up to `limit` for a start under way to end: `Running`,
    /// `Failed`, or still `Starting` when the time is up.
    pub fn settle(&self, limit: Duration) -> Status {
        let deadline = Instant::now() + limit;
        loop {
            {
                let st = self.lock();
                if !st.pending {
                    if let Some(r) = st.running.as_ref().filter(|r| r.alive()) {
                        return Status::Running(r.clone());
                    }
                    if let Some(e) = &st.last_error {
                        return Status::Failed(e.clone());
                    }
                }
            }
            if Instant::now() >= deadline {
                return Status::Starting;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether a start is under way on a thread of its own.
    pub fn starting(&self) -> bool {
        self.lock().pending
    }

    /// Records a failure (a start that failed, a crash): the next start
    /// waits its back-off.
    fn failed(&self, e: Unavailable) {
        let mut st = self.lock();
        st.failures = st.failures.saturating_add(1);
        st.retry_at = Some(Instant::now() + backoff(st.failures));
        st.last_error = Some(e);
    }

    /// The server ended under a call: stopped, and started again (after
    /// its back-off) by the next call.
    pub fn crashed(&self, running: &Arc<Running>, why: Unavailable) {
        let mut st = self.lock();
        let current = st.running.as_ref().is_some_and(|r| Arc::ptr_eq(r, running));
        if current {
            st.running = None;
        }
        drop(st);
        if current {
            running.stop();
            GENERATION.fetch_add(1, Ordering::SeqCst);
            self.failed(why);
        }
    }

    /// Records why the server is not started (it needs an approval).
    pub fn refuse(&self, why: Unavailable) {
        self.lock().last_error = Some(why);
    }

    /// Why the last start failed (or the server last ended), if it did.
    pub fn last_error(&self) -> Option<Unavailable> {
        self.lock().last_error.clone()
    }

    /// A call succeeded: the back-off starts over.
    pub fn succeeded(&self) {
        let mut st = self.lock();
        st.failures = 0;
        st.retry_at = None;
        st.last_use = Some(Instant::now());
    }

    fn stop(&self) {
        let old = self.lock().running.take();
        if let Some(r) = old {
            r.stop();
        }
    }

    fn stop_if_idle(&self) {
        let mut st = self.lock();
        let idle = match (&st.running, st.last_use) {
            (Some(r), Some(at)) => r.busy.load(Ordering::SeqCst) == 0 && at.elapsed() >= st.idle,
            (Some(r), None) => r.busy.load(Ordering::SeqCst) == 0,
            _ => false,
        };
        if idle {
            let r = st.running.take();
            drop(st);
            if let Some(r) = r {
                r.stop();
            }
        }
    }
}

/// `${NAME}` in `template` replaced by the declared secret's jail value.
fn expand(template: &str, values: &IndexMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`{template}` has an unclosed `${{`"));
        };
        let name = &after[..end];
        match values.get(name) {
            Some(v) => out.push_str(v),
            None => {
                return Err(format!(
                    "`${{{name}}}` names no declared secret that is set; declare it in permissions.secrets"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Starts the server of `launch` in its jail and lists its tools.
fn start(launch: &Launch<'_>, digest: String) -> Result<Running, Unavailable> {
    let name = &launch.tool.name;
    let Some(exec) = launch.exec() else {
        return Err(unavailable(
            ErrorKind::ManifestInvalid,
            format!("`{name}` is not an MCP server"),
        ));
    };
    if let Some(url) = &exec.url {
        return start_remote(launch, exec, url, digest);
    }
    let root = &launch.project.root;
    let m = &launch.tool.manifest;
    let fail = |kind, message: String| unavailable(kind, message);
    let policy = Policy::for_tool(root, m, launch.config)
        .map(|p| p.with_surface(launch.project))
        .map_err(|e| fail(e.kind(), run::error_chain(&e)))?;
    let values = secrets::resolve(&m.permissions, launch.secrets).map_err(|missing| {
        fail(
            ErrorKind::SecretMissing,
            format!(
                "MCP server `{name}`: required secrets not set in the environment: {}",
                missing.join(", ")
            ),
        )
    })?;
    // The same kinds as a tool call's (a bad `hosts` pattern, or a
    // placeholder that cannot be made).
    let placeholders = secrets::placeholders(&m.permissions, &values)
        .map_err(|e| fail(e.kind(), run::error_chain(&e)))?;
    let jail_values = secrets::jail_values(&values, &placeholders);
    let redact = Redactor::new(&values);

    let words = super::wrap::Words::of(root);
    let program = if exec.entrypoint.contains('/') {
        let p = resolve(root, &exec.entrypoint);
        if std::fs::symlink_metadata(&p).is_err() {
            return Err(fail(
                ErrorKind::ManifestInvalid,
                format!(
                    "MCP server `{name}` did not start: its command {} does not exist",
                    p.display()
                ),
            ));
        }
        policy.require_readable("entrypoint", &p).map_err(|e| {
            fail(
                e.kind(),
                match words {
                    super::wrap::Words::Flags => format!(
                        "MCP server `{name}` did not start: its command {} is outside its grants: pass --read {}",
                        p.display(),
                        p.display()
                    ),
                    super::wrap::Words::Manifest => run::error_chain(&e),
                },
            )
        })?;
        p
    } else {
        PathBuf::from(&exec.entrypoint)
    };
    let cwd = resolved_under(root, &resolve(root, &exec.cwd));
    if !cwd.is_dir() {
        return Err(fail(
            ErrorKind::ManifestInvalid,
            format!(
                "MCP server `{name}`: its cwd {} is not a directory",
                cwd.display()
            ),
        ));
    }
    let mut argv: Vec<std::ffi::OsString> = vec![program.clone().into()];
    for (i, template) in exec.args.iter().enumerate() {
        let a = expand(template, &jail_values).map_err(|why| {
            fail(
                ErrorKind::ManifestInvalid,
                format!("MCP server `{name}`: exec.mcp.args[{i}]: {why}"),
            )
        })?;
        argv.push(a.into());
    }
    let mut spec = Spec::new(argv);
    spec.cwd = cwd;
    spec.fs = policy.fs_access();
    spec.links = jail::hold::Links::Checked {
        root: Some(root.to_path_buf()),
    };
    spec.protect = policy.protected.clone();
    spec.limits = policy.limits.clone();
    spec.limits.wall = LIFETIME;
    spec.degraded = policy.degraded;
    spec.output = Output::Capture;
    spec.env = jail_values
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    for (k, template) in &exec.env {
        let v = expand(template, &jail_values).map_err(|why| {
            fail(
                ErrorKind::ManifestInvalid,
                format!("MCP server `{name}`: exec.mcp.env.{k}: {why}"),
            )
        })?;
        spec.env.push((k.into(), v.into()));
    }
    run::safepath::apply(&mut spec, false);
    // The network of the server's jail, as a networked call's.
    let gateway = run::egress::network(&policy, &placeholders, &mut spec)
        .map_err(|e| fail(e.kind(), run::error_chain(&e)))?;
    // `npx -y PACKAGE`, `uvx PACKAGE`, `pipx run PACKAGE`: installed once
    // into the server's cache directory, then run from there, read and
    // execute only (see [`super::npx`], [`super::pypi`]).
    let expanded: Vec<String> = spec.argv[1..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(launcher) = super::install::Launcher::parse(&exec.entrypoint, &expanded) {
        let dir = launcher.directory(root, name)?;
        let ctx = super::install::Context {
            server: name,
            spec: &spec,
            allow: policy.allowlist.as_ref(),
            words,
            log: gateway.as_ref().map(|g| g.log()),
        };
        let installed = launcher.install(&ctx, &dir)?;
        spec.argv = std::iter::once(installed.program.into_os_string())
            .chain(launcher.args().iter().map(Into::into))
            .collect();
        spec.fs.exec.push(installed.code);
    }
    let program_shown = spec.argv[0].to_string_lossy().into_owned();

    let egress = gateway.as_ref().map(|g| g.log().clone());
    let (ours, theirs) = UnixStream::pair().map_err(|e| {
        fail(
            ErrorKind::Internal,
            format!("creating the server's channel: {e}"),
        )
    })?;
    spec.stdin = Stdin::Duplex(Channel::new(theirs.into()));
    // The jail plans with assumed facts and tries again after a probe
    // when its namespaces cannot be made; the channel goes to the first
    // try only. Probed first (once per process), there is one try.
    let _ = jail::probe::kernel();
    let cancel = Cancel::new();
    spec.cancel = Some(cancel.clone());
    let ended: Arc<Mutex<Option<(ErrorKind, String)>>> = Arc::new(Mutex::new(None));
    let wake = ours
        .try_clone()
        .map_err(|e| fail(ErrorKind::Internal, format!("cloning the channel: {e}")))?;
    let thread = {
        let ended = ended.clone();
        let server = name.clone();
        std::thread::Builder::new()
            .name("glovebox-mcp-jail".into())
            .spawn(move || {
                // Through the one door every jailed run takes.
                let result = run::start(&spec);
                let why = match result {
                    Err(e) => {
                        let mut why = run::error_chain(&e);
                        // The person who typed `glovebox wrap … -- COMMAND`
                        // is told where the command leads (not a tool's
                        // caller, for a manifest's server).
                        if let (
                            super::wrap::Words::Flags,
                            run::StartError::Jail(
                                jail::JailError::NotFound { .. }
                                | jail::JailError::ExecDenied { .. },
                            ),
                        ) = (words, &e)
                        {
                            why.push_str(&jail::not_found_hint(
                                &program_shown,
                                words.grant_directory(),
                            ));
                        }
                        (e.kind(), why)
                    }
                    Ok(r) => {
                        let tail = super::relayed(&String::from_utf8_lossy(&r.stderr));
                        let limit = if r.limits_hit.is_empty() {
                            String::new()
                        } else {
                            format!(" (limits hit: {:?})", r.limits_hit)
                        };
                        (
                            if r.limits_hit.is_empty() {
                                ErrorKind::Internal
                            } else {
                                ErrorKind::ResourceLimit
                            },
                            redact.text(&format!(
                                "MCP server `{server}` ended with status {}{limit}{}",
                                r.status.code(),
                                if tail.is_empty() {
                                    String::new()
                                } else {
                                    format!("; its stderr ends: {tail}")
                                }
                            )),
                        )
                    }
                };
                *ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
                let _ = wake.shutdown(std::net::Shutdown::Both);
                drop(gateway);
            })
            .map_err(|e| fail(ErrorKind::Internal, format!("starting its thread: {e}")))?
    };
    let on_change: Box<dyn Fn() + Send + Sync> = Box::new(|| {
        GENERATION.fetch_add(1, Ordering::SeqCst);
    });
    let ready = Connection::stdio(ours, on_change, START_LIMIT)
        .and_then(|conn| list_all(&conn).map(|listed| (conn, listed)));
    match ready {
        Ok((conn, listed)) => {
            GENERATION.fetch_add(1, Ordering::SeqCst);
            Ok(Running {
                conn,
                cancel,
                digest,
                listed: Mutex::new(Arc::new(listed)),
                ended,
                thread: Mutex::new(Some(thread)),
                busy: AtomicUsize::new(0),
                egress,
            })
        }
        Err(e) => {
            // The jail's own reason (refused, not found) says more than
            // the closed channel.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline
                && ended
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_none()
                && matches!(e, ClientError::Closed { .. })
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let why = ended.lock().unwrap_or_else(PoisonError::into_inner).clone();
            cancel.cancel();
            let _ = thread.join();
            Err(match why {
                Some((kind, why)) => {
                    fail(kind, format!("MCP server `{name}` did not start: {why}"))
                }
                None => fail(
                    ErrorKind::Internal,
                    format!("MCP server `{name}` did not start: {e}"),
                ),
            })
        }
    }
}

/// Connects to the remote server of `launch` (nothing to jail: glovebox
/// sends every request itself, under the manifest's network allowlist and
/// the SSRF guard) and lists its tools.
fn start_remote(
    launch: &Launch<'_>,
    exec: &McpExec,
    url: &str,
    digest: String,
) -> Result<Running, Unavailable> {
    let name = &launch.tool.name;
    let m = &launch.tool.manifest;
    let root = &launch.project.root;
    let fail = |kind, message: String| unavailable(kind, format!("MCP server `{name}`: {message}"));
    if !m.permissions.network.enabled() {
        return Err(fail(
            ErrorKind::ManifestInvalid,
            "a remote server needs the network; add its host to permissions.network.allow".into(),
        ));
    }
    let values = secrets::resolve(&m.permissions, launch.secrets).map_err(|missing| {
        fail(
            ErrorKind::SecretMissing,
            format!(
                "required secrets not set in the environment: {}",
                missing.join(", ")
            ),
        )
    })?;
    let mut headers = Vec::new();
    for (k, template) in &exec.headers {
        let v = expand(template, &values).map_err(|why| {
            fail(
                ErrorKind::ManifestInvalid,
                format!("exec.mcp.headers.{k}: {why}"),
            )
        })?;
        headers.push((k.clone(), v, template.contains("${")));
    }
    let extra_ca = launch
        .config
        .security
        .http
        .extra_ca_file
        .as_deref()
        .map(|f| resolve(root, f));
    let tls = crate::httpclient::tls::client_config(extra_ca.as_deref())
        .map_err(|e| fail(ErrorKind::ManifestInvalid, run::error_chain(&e)))?;
    let allow = m.permissions.network.allowlist().map_err(|e| {
        fail(
            ErrorKind::ManifestInvalid,
            format!("permissions.network: {e}"),
        )
    })?;
    let opts = crate::httpclient::Options {
        allow_private: launch.config.security.http.allow_private,
        allow,
        tls,
        timeout: START_LIMIT,
        max_body: super::client::MAX_LINE as u64,
        follow_cross_origin: false,
        secret_query_keys: Vec::new(),
        secret_values: values.values().cloned().collect(),
    };
    let guarded = super::remote::Guarded::new(url, &headers, opts)
        .map_err(|why| fail(ErrorKind::ManifestInvalid, why))?;
    let on_change: Box<dyn Fn() + Send + Sync> = Box::new(|| {
        GENERATION.fetch_add(1, Ordering::SeqCst);
    });
    let ready = Connection::remote(guarded, url, on_change, START_LIMIT)
        .and_then(|conn| list_all(&conn).map(|listed| (conn, listed)));
    let (conn, listed) = ready.map_err(|e| {
        let kind = match &e {
            ClientError::Http { kind, .. } => *kind,
            ClientError::Timeout { .. } => ErrorKind::Timeout,
            _ => ErrorKind::HttpError,
        };
        fail(
            kind,
            format!(
                "did not start: {}",
                Redactor::new(&values).text(&e.to_string())
            ),
        )
    })?;
    GENERATION.fetch_add(1, Ordering::SeqCst);
    Ok(Running {
        conn,
        cancel: Cancel::new(),
        digest,
        listed: Mutex::new(Arc::new(listed)),
        ended: Arc::new(Mutex::new(None)),
        thread: Mutex::new(None),
        busy: AtomicUsize::new(0),
        egress: None,
    })
}

/// The server's whole tool list, read now (never from a cache).
fn list_all(conn: &Connection) -> Result<Listed, ClientError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let (page, next) = conn.list_tools(cursor.take(), START_LIMIT)?;
        tools.extend(page);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(Listed::new(tools))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), BACKOFF_FIRST);
        assert_eq!(backoff(2), BACKOFF_FIRST * 2);
        assert_eq!(backoff(3), BACKOFF_FIRST * 4);
        assert_eq!(backoff(40), BACKOFF_MAX);
    }

    #[test]
    fn env_templates_name_declared_secrets_only() {
        let mut v = IndexMap::new();
        v.insert("TOKEN".to_string(), "t0k".to_string());
        assert_eq!(expand("Bearer ${TOKEN}!", &v).unwrap(), "Bearer t0k!");
        assert_eq!(expand("plain", &v).unwrap(), "plain");
        assert!(expand("${HOME}", &v).is_err());
        assert!(expand("${TOKEN", &v).is_err());
    }
}
