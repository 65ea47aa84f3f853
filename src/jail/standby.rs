//! Standby jails: a served call's jail made ready before the call
//! arrives, revalidated when it does.
//!
//! Most of a jailed call's cost depends only on its policy: holding the
//! grants, the Landlock ruleset, the cgroups, the clone into new
//! namespaces, the mount tree, capabilities, Landlock and seccomp in the
//! child. In a server started with `--standby` ([`enable`]), once a call
//! of a *shape* (every part of its [`Spec`] the jail is made of; not
//! argv, the environment, stdin's bytes, the output's handling, the wall
//! time or the gate) has run, a thread makes one more jail of that shape
//! and leaves its child waiting
//! at its gate, the last step before `execve` ([`super::spawn`]'s step
//! 12): every restriction in force, nothing of any call in it.
//!
//! The next call of that shape takes it, but only after **revalidation**:
//! it holds its grants afresh (`spawn::hold_grants`) and plans
//! afresh, exactly as a fresh call would, and uses the standby only when
//! every grant and protected path is the same object as when the standby
//! was made (and every one missing then is still missing) and the plan
//! makes the same jail (the tree is planned from what is compared). Anything else
//! (a path swapped for a link, a grant created or removed, a changed
//! policy) discards the standby and the call gets a fresh jail: nothing
//! that changed before the call is missed, and nothing that appears
//! during it takes effect, as with a fresh jail. Then the call's gate
//! (its intent on disk) is passed, the call's program, argv and
//! environment are given to the child (`child::Prepared::standby`)
//! and the gate opened: the child execs them. The thread that made the
//! jail (its children's parent-death signal is tied to it) supervises
//! the call and hands back its result.
//!
//! A standby is used once: a fresh process per call stays the rule; the
//! next is made when the call ends, if it was the only call in a jail
//! (with several at once the cores are the calls', and a standby made
//! beside them would only slow them). At most [`MAX`] shapes are kept, a
//! standby unused for [`IDLE`] is discarded at the next call, and
//! [`shutdown`] discards
//! every one and waits until their children and cgroups are gone. A
//! shape whose jail cannot be a standby here is not tried again before
//! [`BACKOFF`]; one that failed to be made now (a grant changed
//! meanwhile) is tried again at the next call. The call itself always has
//! the fresh path, which decides fallbacks and refusals as it always did. Only calls
//! without network, learn mode, degraded mode or a channel for stdin, in
//! a jail with a mount tree, get standbys.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::child::{StandbySlot, Step};
use super::fs::FsAccess;
use super::hold::{Id, Links};
use super::home::Home;
use super::network::NetPlan;
use super::plan::{self, Plan};
use super::probe::{self, Kernel};
use super::spawn::{self, Grants};
use super::spec::{HomeFile, JailResult, Spec, Stdin, GATE_OPEN};
use super::tree::MetadataGuard;
use super::{launch, prepare, supervise, sys, JailError};

/// How long an unused standby is kept.
pub const IDLE: Duration = Duration::from_secs(60);
/// Shapes kept ready at once.
pub const MAX: usize = 8;
/// After a standby of a shape could not be made, how long before another
/// is tried.
pub const BACKOFF: Duration = Duration::from_secs(30);

/// The standbys of this process, by shape.
static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    enabled: false,
    entries: Vec::new(),
});

/// The threads making or running a standby, counted for [`shutdown`].
static THREADS: Threads = Threads {
    count: Mutex::new(0),
    ended: Condvar::new(),
};

struct Registry {
    enabled: bool,
    entries: Vec<Entry>,
}

struct Entry {
    shape: Shape,
    state: State,
    since: Instant,
}

enum State {
    /// A thread is making it.
    Making,
    /// Its child waits at the gate (or is still on its way there).
    Ready(Box<Standby>),
    /// It cannot be made for this shape here (not tried again before
    /// [`BACKOFF`]).
    Failed,
}

/// Makes standbys from now on (a server started with `--standby`).
pub fn enable() {
    registry().enabled = true;
}

/// Stops making standbys, discards every one and waits (up to `wait`)
/// until their threads have ended: their children gone, their cgroups
/// removed. Returns whether they all ended in time.
pub fn shutdown(wait: Duration) -> bool {
    let entries = {
        let mut r = registry();
        r.enabled = false;
        std::mem::take(&mut r.entries)
    };
    // Dropping a standby closes its gate: its child exits there.
    drop(entries);
    THREADS.wait_idle(wait)
}

/// Calls in a jail now (standby or fresh), counted by [`busy`].
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One call in a jail, counted while this lives.
pub(super) struct Busy;

/// Counts a call that could have a standby ([`eligible`]) until the
/// returned guard drops (long-lived jails, a warm worker's or an MCP
/// server's, are not counted). A standby is made only when its call was
/// the only one: with several calls at once the machine's cores are taken
/// by the calls themselves, and a standby made beside them only takes its
/// time from theirs (its revalidation adds to each).
pub(super) fn busy(spec: &Spec) -> Option<Busy> {
    if !eligible(spec) {
        return None;
    }
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    Some(Busy)
}

/// Whether a call of `spec` could run in a standby: no network, learn or
/// degraded mode, stdin `/dev/null` or bytes.
fn eligible(spec: &Spec) -> bool {
    matches!(spec.stdin, Stdin::Null | Stdin::Bytes(_))
        && !spec.network
        && spec.gateway.is_none()
        && !spec.direct_network
        && !spec.degraded
        && spec.observe.is_none()
}

impl Drop for Busy {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What standbys did since this process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Calls a standby ran.
    pub used: u64,
    /// Standbys discarded at revalidation: something they were made of
    /// had changed (a grant swapped, created or removed; another plan).
    pub changed: u64,
    /// Standbys whose child ended before a handed-over call's program
    /// (the call then ran fresh).
    pub not_run: u64,
}

static USED: AtomicU64 = AtomicU64::new(0);
static CHANGED: AtomicU64 = AtomicU64::new(0);
static NOT_RUN: AtomicU64 = AtomicU64::new(0);

/// The totals so far.
pub fn totals() -> Totals {
    Totals {
        used: USED.load(Ordering::Relaxed),
        changed: CHANGED.load(Ordering::Relaxed),
        not_run: NOT_RUN.load(Ordering::Relaxed),
    }
}

/// How many standbys wait at their gate now.
pub fn ready() -> usize {
    registry()
        .entries
        .iter()
        .filter(|e| match &e.state {
            State::Ready(s) => s.handoff.slot.at_gate.load(Ordering::Acquire),
            _ => false,
        })
        .count()
}

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every part of a [`Spec`] its jail is made of.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    cwd: PathBuf,
    home_files: Vec<HomeFile>,
    fs: FsAccess,
    protect: Vec<PathBuf>,
    netns: bool,
    links: Links,
    memory_bytes: u64,
    pids: u64,
    file_size_bytes: u64,
    open_files: u64,
    /// stdin is a pipe (bytes given), else `/dev/null`.
    stdin_pipe: bool,
    keep_out: Vec<PathBuf>,
}

impl Shape {
    /// The shape of `spec`, or `None` for a call that gets no standby.
    fn of(spec: &Spec, keep_out: &[PathBuf]) -> Option<Shape> {
        if !eligible(spec) {
            return None;
        }
        let stdin_pipe = matches!(spec.stdin, Stdin::Bytes(_));
        Some(Shape {
            cwd: spec.cwd.clone(),
            home_files: spec.home_files.clone(),
            fs: spec.fs.clone(),
            protect: spec.protect.clone(),
            netns: spec.netns,
            links: spec.links.clone(),
            memory_bytes: spec.limits.memory_bytes,
            pids: spec.limits.pids,
            file_size_bytes: spec.limits.file_size_bytes,
            open_files: spec.limits.open_files,
            stdin_pipe,
            keep_out: keep_out.to_vec(),
        })
    }
}

/// A call's spec with nothing of the call's own: no environment (its
/// secrets), no stdin bytes, no gate or cancel.
fn template(spec: &Spec) -> Spec {
    Spec {
        env: Vec::new(),
        stdin: match spec.stdin {
            Stdin::Bytes(_) => Stdin::Bytes(Vec::new()),
            _ => Stdin::Null,
        },
        gate: None,
        cancel: None,
        ..spec.clone()
    }
}

/// What revalidation compares: every held grant and protected path (by
/// class, where it is, the object it is, a link's target). The tree is
/// planned from these alone, with the working directory, which is part of
/// the shape ([`super::tree::Tree::from_held`]).
#[derive(Debug, PartialEq)]
struct Resolved {
    held: Vec<(u8, PathBuf, PathBuf, Id, Option<PathBuf>)>,
    protect: Vec<(PathBuf, Id)>,
}

impl Resolved {
    fn of(g: &Grants) -> Resolved {
        let classes = [&g.held.read_only, &g.held.read, &g.held.exec, &g.held.write];
        let held = (0u8..)
            .zip(classes)
            .flat_map(|(class, list)| {
                list.iter().map(move |h| {
                    (
                        class,
                        h.path.clone(),
                        h.real.clone(),
                        h.id,
                        h.target.clone(),
                    )
                })
            })
            .collect();
        Resolved {
            held,
            protect: g.protect.iter().map(|h| (h.path.clone(), h.id)).collect(),
        }
    }
}

/// A jail waiting at its gate.
struct Standby {
    resolved: Resolved,
    plan: Plan,
    handoff: Arc<Handoff>,
    /// The gate's write end; closing it unused discards the standby.
    gate: OwnedFd,
    result: mpsc::Receiver<Ending>,
}

/// What the taking thread gives the standby's.
struct Handoff {
    /// Shared with the child: whether it waits at its gate; the call's
    /// program, argv and environment, read by it once the gate opens.
    slot: Arc<StandbySlot>,
    call: Mutex<Option<CallInfo>>,
    /// Set by the standby's thread once the child has exec'd: from then
    /// on the call has run, whatever becomes of that thread.
    execd: AtomicBool,
}

/// The handed-over call, for its supervision.
struct CallInfo {
    spec: Spec,
    started: Instant,
    program: PathBuf,
    stdin: Vec<u8>,
}

/// How a standby ended.
enum Ending {
    /// The call ran (or failed at or after its `execve`).
    Ran(Result<JailResult, JailError>),
    /// The child ended before the call's program: nothing of the call
    /// ran.
    NotRun,
}

/// What [`take`] did with a call.
pub(super) enum Taken {
    /// A standby ran it: its result.
    Ran(Result<JailResult, JailError>),
    /// The call runs fresh; then [`Next::make`].
    No(Next),
}

/// A standby to make after a fresh call (none where the call gets none).
pub(super) struct Next(Option<Box<(Shape, Spec)>>);

impl Next {
    /// Starts making a standby of this shape, unless one exists or is being
    /// made, standbys are not enabled, or [`MAX`] are kept and none can
    /// make room.
    pub(super) fn make(self) {
        let Some((shape, template)) = self.0.map(|b| *b) else {
            return;
        };
        // Made by a call as it ends (its own count still held): only when
        // it was alone.
        if IN_FLIGHT.load(Ordering::SeqCst) > 1 {
            return;
        }
        {
            let mut r = registry();
            if !r.enabled {
                return;
            }
            expire(&mut r);
            if r.entries.iter().any(|e| e.shape == shape) {
                return;
            }
            if r.entries.len() >= MAX {
                // Room from the standby unused longest.
                let oldest = r
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| !matches!(e.state, State::Making))
                    .min_by_key(|(_, e)| e.since)
                    .map(|(i, _)| i);
                match oldest {
                    Some(i) => drop(r.entries.remove(i)),
                    None => return,
                }
            }
            r.entries.push(Entry {
                shape: shape.clone(),
                state: State::Making,
                since: Instant::now(),
            });
        }
        let started = THREADS.enter();
        let spawned = std::thread::Builder::new()
            .name("glovebox-standby".into())
            .spawn({
                let shape = shape.clone();
                move || make(shape, template, started)
            });
        if spawned.is_err() {
            forget(&shape);
        }
    }
}

/// Drops standbys unused for [`IDLE`] and failures older than
/// [`BACKOFF`].
fn expire(r: &mut Registry) {
    r.entries.retain(|e| match e.state {
        State::Making => true,
        State::Ready(_) => e.since.elapsed() < IDLE,
        State::Failed => e.since.elapsed() < BACKOFF,
    });
}

/// Sets the state of `shape`'s entry, if it is still being made (a
/// shutdown or an eviction may have removed it); returns whether it was.
fn set_state(shape: &Shape, state: State) -> bool {
    let mut r = registry();
    if !r.enabled {
        return false;
    }
    match r
        .entries
        .iter_mut()
        .find(|e| e.shape == *shape && matches!(e.state, State::Making))
    {
        Some(e) => {
            e.state = state;
            e.since = Instant::now();
            true
        }
        None => false,
    }
}

/// Runs `spec` in a standby of its shape when one is ready and
/// revalidates (see the module docs); otherwise the call runs fresh.
pub(super) fn take(spec: &Spec, keep_out: &[PathBuf], started: Instant) -> Taken {
    let Some(shape) = Shape::of(spec, keep_out) else {
        return Taken::No(Next(None));
    };
    let next = || Next(Some(Box::new((shape.clone(), template(spec)))));
    let standby = {
        let mut r = registry();
        if !r.enabled {
            return Taken::No(Next(None));
        }
        expire(&mut r);
        let ready = r
            .entries
            .iter()
            .position(|e| e.shape == shape && matches!(e.state, State::Ready(_)));
        match ready.map(|i| r.entries.remove(i).state) {
            Some(State::Ready(s)) => *s,
            _ => return Taken::No(next()),
        }
    };
    let Some(kernel) = probe::known() else {
        return Taken::No(next());
    };
    match hand_off(standby, spec, keep_out, kernel, started) {
        Handed::Ran(result) => {
            USED.fetch_add(1, Ordering::Relaxed);
            // The next standby is made once this call has ended, not
            // beside it (on a small machine it would take the call's CPU).
            next().make();
            Taken::Ran(result)
        }
        Handed::Changed => {
            CHANGED.fetch_add(1, Ordering::Relaxed);
            Taken::No(next())
        }
        Handed::NotRun => {
            NOT_RUN.fetch_add(1, Ordering::Relaxed);
            Taken::No(next())
        }
    }
}

/// What [`hand_off`] did.
enum Handed {
    /// The call ran in the standby (or was refused before it could).
    Ran(Result<JailResult, JailError>),
    /// The standby did not revalidate: discarded.
    Changed,
    /// Its child ended before the call's program: discarded.
    NotRun,
}

/// Revalidates `s` for `spec` and runs the call in it; a standby that
/// is not used is discarded (its gate closed) and the call runs fresh.
fn hand_off(
    s: Standby,
    spec: &Spec,
    keep_out: &[PathBuf],
    kernel: &Kernel,
    started: Instant,
) -> Handed {
    if let Err(e) = plan::check_spec(spec) {
        return Handed::Ran(Err(e));
    }
    // Revalidation: held and planned afresh, as a fresh call would be (a
    // failure here is the fresh call's to report).
    let Ok(grants) = spawn::hold_grants_planning(spec, keep_out, plan::mount_tree(kernel), false)
    else {
        return Handed::Changed;
    };
    if Resolved::of(&grants) != s.resolved {
        return Handed::Changed;
    }
    match spawn::plan_call(spec, kernel, false, &grants) {
        Ok(plan) if plan.same_jail(&s.plan) => {}
        _ => return Handed::Changed,
    }
    drop(grants);
    let (program, exec) = match prepare::command(spec, &Home::Jail, &s.plan) {
        Ok(c) => c,
        Err(e) => return Handed::Ran(Err(e)),
    };
    // The call's gate: nothing of it runs before its intent is on disk.
    if let Some(gate) = &spec.gate {
        if let Err(message) = gate.pass() {
            return Handed::Ran(Err(JailError::Gate { message }));
        }
    }
    let stdin = match &spec.stdin {
        Stdin::Bytes(bytes) => bytes.clone(),
        _ => Vec::new(),
    };
    *s.handoff.call.lock().unwrap_or_else(|e| e.into_inner()) = Some(CallInfo {
        spec: spec.clone(),
        started,
        program,
        stdin,
    });
    if s.handoff.slot.exec.set(exec).is_err() {
        return Handed::NotRun;
    }
    // A child already gone (its pipe has no reader) ran nothing.
    if sys::write_all(s.gate.as_raw_fd(), &[GATE_OPEN]).is_err() {
        return Handed::NotRun;
    }
    drop(s.gate);
    match s.result.recv() {
        Ok(Ending::Ran(result)) => Handed::Ran(result),
        // The standby's thread ended without a word after the call's
        // program started (it cannot, short of a panic): the call ran
        // and must not run again.
        Err(_) if s.handoff.execd.load(Ordering::SeqCst) => Handed::Ran(Err(JailError::Wait {
            source: std::io::Error::other("the standby jail's supervisor ended during the call"),
        })),
        Ok(Ending::NotRun) | Err(_) => Handed::NotRun,
    }
}

/// The standby thread: makes a jail of `shape` from `template` and waits
/// (suspended in its vfork-style clone) until the child execs a handed-over
/// call or ends; then supervises that call and hands its result back.
/// `live` counts the thread for [`shutdown`] until the call is handed
/// over (a call's own end is the server's to wait for, as a fresh one's).
fn make(shape: Shape, template: Spec, live: Live) {
    let (mut call, plan, resolved) = match prepare_jail(&shape, &template) {
        Ok(made) => made,
        Err(Unmade::Never) => {
            set_state(&shape, State::Failed);
            return;
        }
        // Its grants changed meanwhile, say: the next call tries again.
        Err(Unmade::Now) => {
            forget(&shape);
            return;
        }
    };
    let Ok((gate_r, gate_w)) = prepare::pipe() else {
        forget(&shape);
        return;
    };
    let slot = Arc::new(StandbySlot::default());
    call.prepared.gate = Some(gate_r);
    call.prepared.standby = Some(slot.clone());
    let handoff = Arc::new(Handoff {
        slot,
        call: Mutex::new(None),
        execd: AtomicBool::new(false),
    });
    let (tx, result) = mpsc::sync_channel(1);
    let standby = Standby {
        resolved,
        plan: plan.clone(),
        handoff: handoff.clone(),
        gate: gate_w,
        result,
    };
    if !set_state(&shape, State::Ready(Box::new(standby))) {
        // Shut down or evicted meanwhile: dropping `call` removes its
        // cgroups.
        return;
    }
    let ending = match launch::clone_and_wait(&mut call.prepared, plan.flags) {
        Ok(pidfd) => {
            handoff.execd.store(true, Ordering::SeqCst);
            drop(live);
            let info = handoff
                .call
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            match info {
                Some(info) => {
                    call.program = info.program;
                    if let Some((w, _)) = call.stdin_feed.take() {
                        call.stdin_feed = Some((w, info.stdin));
                    }
                    Ending::Ran(
                        supervise::supervise(&info.spec, plan, call, pidfd, None, info.started)
                            .map_err(spawn::Attempt::into_error),
                    )
                }
                // Exec'd without a call: cannot be (the gate opens only
                // after the call is given); ended all the same.
                None => {
                    let _ = sys::pidfd_kill(pidfd.as_raw_fd());
                    let _ = sys::pidfd_wait(pidfd.as_raw_fd());
                    Ending::NotRun
                }
            }
        }
        // The program given could not be executed: the call's own error.
        Err((Step::Exec, errno)) => Ending::Ran(Err(JailError::child_failed(
            Step::Exec,
            errno,
            &handoff
                .call
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .map_or(call.program.clone(), |i| i.program),
        ))),
        Err(_) => {
            withdraw(&handoff);
            Ending::NotRun
        }
    };
    // The taker may be gone (the standby discarded): nothing to tell.
    let _ = tx.send(ending);
}

/// Why a standby was not made.
enum Unmade {
    /// This shape's jail cannot be a standby here (no mount tree, a plan
    /// with the network or a notification listener).
    Never,
    /// Not now: holding, planning or preparing failed (a grant that
    /// became a link, a limit reached); the call will say why.
    Now,
}

/// Holds, plans and prepares a jail of `shape` (its child not yet
/// cloned).
fn prepare_jail(shape: &Shape, template: &Spec) -> Result<(prepare::Call, Plan, Resolved), Unmade> {
    let kernel = probe::kernel();
    if !plan::mount_tree(kernel) {
        return Err(Unmade::Never);
    }
    plan::check_spec(template).map_err(|_| Unmade::Never)?;
    let grants = spawn::hold_grants(template, &shape.keep_out, true).map_err(|_| Unmade::Now)?;
    let resolved = Resolved::of(&grants);
    let plan = spawn::plan_call(template, kernel, false, &grants).map_err(|_| Unmade::Now)?;
    if plan.guard != MetadataGuard::Tree
        || !matches!(plan.net, NetPlan::Off)
        || plan.reaper
        || plan.count_forks
    {
        return Err(Unmade::Never);
    }
    let call = prepare::prepare(template, kernel, &plan, grants).map_err(|_| Unmade::Now)?;
    Ok((call, plan, resolved))
}

/// Removes the ready entry of `handoff`'s standby, whose child ended
/// before any call was handed over (a grant replaced while its tree was
/// built, say): no call should find it.
fn withdraw(handoff: &Arc<Handoff>) {
    registry().entries.retain(|e| match &e.state {
        State::Ready(s) => !Arc::ptr_eq(&s.handoff, handoff),
        _ => true,
    });
}

/// Removes `shape`'s entry while it is being made (the next call of that
/// shape starts another).
fn forget(shape: &Shape) {
    registry()
        .entries
        .retain(|e| !(e.shape == *shape && matches!(e.state, State::Making)));
}

/// A count of live threads and a way to wait until there are none.
struct Threads {
    count: Mutex<usize>,
    ended: Condvar,
}

/// One live thread; dropping it ends its count.
struct Live;

impl Threads {
    fn enter(&'static self) -> Live {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Live
    }

    fn wait_idle(&self, wait: Duration) -> bool {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (count, _) = self
            .ended
            .wait_timeout_while(count, wait, |c| *c > 0)
            .unwrap_or_else(|e| e.into_inner());
        *count == 0
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let mut count = THREADS.count.lock().unwrap_or_else(|e| e.into_inner());
        *count = count.saturating_sub(1);
        THREADS.ended.notify_all();
    }
}

#[cfg(test)]
#[path = "standby_tests.rs"]
mod tests;
