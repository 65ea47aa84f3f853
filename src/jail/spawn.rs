//! Starting, supervising and ending one jailed process.
//!
//! [`run`] builds the call's [`Plan`] ([`super::plan`]: what is enforced
//! by which mechanism, or the refusal), prepares everything it needs in
//! the supervisor (argv/env as C strings, the Landlock ruleset fd, the
//! seccomp programs, the call's cgroups, the pipes), then clones the
//! child into new namespaces. The clone is vfork-style (`CLONE_VM |
//! CLONE_VFORK`: no page table copied, the supervisor's thread suspended
//! until exec) except for the namespace-free jail's reaper, which never
//! execs. Between clone and exec the child only makes system calls on
//! that prepared data, allocating and writing nothing of the
//! supervisor's, in this order (`super::child::main`, one named step
//! each):
//!
//! 1. close every descriptor of the supervisor's but the call's own (a
//!    child killed before `execve`, or exiting on finding its supervisor
//!    gone, releases what it holds only after its namespaces are torn
//!    down: a dead server's listening socket would accept connections
//!    meanwhile); then the parent-death signal (`SIGKILL`), and check the
//!    supervisor still lives;
//! 2. default signal dispositions, empty signal mask;
//! 3. `setsid` (no controlling terminal); without a PID namespace, the
//!    process then becomes the call's subreaper and forks the tool, which
//!    goes on with the steps below (see `fork_under_reaper`);
//! 4. user namespace id maps (unprivileged supervisor only);
//! 5. join the call's cgroups (before it can fork);
//!    then, for a call behind the egress proxy (its own network
//!    namespace): bring loopback up, open the proxy's listening socket on
//!    127.0.0.1:3128 and hand it to the supervisor over a socketpair
//!    (`SCM_RIGHTS`) — `child_network`, decided in [`super::network`];
//! 6. build the jail's root ([`super::tree`]): a tmpfs, `pivot_root`, the
//!    prepared bind mounts (read-only unless writable, protected paths
//!    read-only again), the private home (a tmpfs holding the spec's home
//!    files), a fresh `/proc` for its PID namespace, a minimal `/dev`; the
//!    host's root detached;
//! 7. stdin/stdout/stderr onto 0/1/2, every other fd close-on-exec;
//! 8. `chdir`;
//! 9. drop every capability, bounding set included (root supervisor);
//! 10. `no_new_privs`, then Landlock (adding the new `/proc` and the
//!     private home's tmpfs);
//! 11. seccomp, last, because it forbids some of the steps above; without a
//!     mount namespace then the metadata filter, whose notification
//!     listener goes to the supervisor over a socketpair (`SCM_RIGHTS`) and
//!     is answered there by [`super::metadata`] until the call ends;
//!     then the resource limits (after the last descriptor the child
//!     opens itself: the supervisor's table, inherited until exec, may
//!     hold more than the call's open-file limit);
//! 12. the caller's go-ahead: one byte read from its gate's pipe
//!     (`Spec::gate`, the engine's "the call's intent is on disk"), so that
//!     every step above overlaps that wait and nothing of the call runs
//!     before it;
//! 13. `execve`.
//!
//! A failure at any step is written (step, errno) to a close-on-exec pipe
//! and the child exits; the supervisor reads that pipe until end of file to
//! learn whether exec happened.
//!
//! The child is the first process of a new PID namespace: when it ends, the
//! kernel kills every process left in that namespace, so a call always ends
//! whole (daemons, double forks and `setsid` included), and `PDEATHSIG`
//! takes the whole tree down if the supervisor dies. In a multi-threaded
//! supervisor, call [`run`] from a thread that outlives the call: the
//! parent-death signal fires when the creating *thread* exits.

use std::path::PathBuf;
use std::time::Instant;

use super::fs::{self as jfs, FsAccess, SplitHeld};
use super::hold::{self, Held, Links};
use super::plan::{self, Cgroups, Host, Plan};
use super::probe::{self, Kernel, Mode};
use super::spec::{JailResult, Spec};
use super::standby::{self, Taken};
use super::tree::{HeldAccess, Tree, TreeError};
use super::{churn, launch, prepare, profile, supervise, JailError};

pub use super::child::Step;

/// The `PATH` inside every jail.
pub const JAIL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Runs `spec` in a jail and waits for it.
///
/// Until this process has probed the kernel ([`probe::kernel`]), a call is
/// planned with [`probe::assumed`] facts (namespaces creatable): its own
/// clone is the test, so no namespace is created and destroyed first just
/// to find out. When that clone fails to make them, the probe runs and the
/// call is planned again with what it found. Nothing is taken on trust:
/// a call that ran had every namespace of its plan.
pub fn run(spec: &Spec) -> Result<JailResult, JailError> {
    run_keeping_out(spec, &[])
}

/// [`run`], refusing the call when a grant is, or holds, one of
/// `keep_out` (glovebox's state directory): decided by identity once the
/// grants are resolved (`super::hold`), so no name or link leads to it
/// unseen.
pub fn run_keeping_out(spec: &Spec, keep_out: &[PathBuf]) -> Result<JailResult, JailError> {
    let started = Instant::now();
    let _busy = standby::busy(spec);
    // Served: a standby jail of the call's shape, revalidated, runs it;
    // else a fresh one does, and a standby is made for the next.
    let next = match standby::take(spec, keep_out, started) {
        Taken::Ran(result) => return result,
        Taken::No(next) => next,
    };
    let result = fresh(spec, keep_out, started);
    next.make();
    result
}

/// [`run`] in a jail made for this call, never a standby, and leaving none
/// (the server's readiness probe: it tests what a fresh call gets).
pub fn run_fresh(spec: &Spec) -> Result<JailResult, JailError> {
    fresh(spec, &[], Instant::now())
}

/// A call in a jail made for it.
fn fresh(spec: &Spec, keep_out: &[PathBuf], started: Instant) -> Result<JailResult, JailError> {
    if let Some(kernel) = probe::known() {
        return probed(spec, keep_out, kernel, started);
    }
    match attempt(spec, keep_out, probe::assumed(), true, started) {
        Err(Attempt::Probe) => probed(spec, keep_out, probe::kernel(), started),
        other => other.map_err(Attempt::into_error),
    }
}

/// An attempt with probed facts; when the jail's namespaces fail at its
/// launch all the same, one more with the facts of a machine that has
/// none (the plan decides again: nothing is patched after it).
fn probed(
    spec: &Spec,
    keep_out: &[PathBuf],
    kernel: &Kernel,
    started: Instant,
) -> Result<JailResult, JailError> {
    match attempt(spec, keep_out, kernel, false, started) {
        Err(Attempt::WithoutNamespaces(why)) => {
            let without = kernel.without_namespaces(why, probe::subreaper_available());
            attempt(spec, keep_out, &without, false, started).map_err(Attempt::into_error)
        }
        other => other.map_err(Attempt::into_error),
    }
}

/// Why one attempt at a call did not produce a result.
pub(super) enum Attempt {
    /// The call failed.
    Error(JailError),
    /// Planned with assumed facts, the namespaces could not be made:
    /// probe, then plan again.
    Probe,
    /// Planned with probed facts, the namespaces could not be made all
    /// the same (why): plan again as where there are none.
    WithoutNamespaces(String),
}

impl Attempt {
    pub(super) fn into_error(self) -> JailError {
        match self {
            Attempt::Error(e) => e,
            Attempt::Probe => JailError::Unavailable {
                feature: "the jail's namespaces (they failed after the kernel probe found them)"
                    .into(),
            },
            Attempt::WithoutNamespaces(why) => JailError::Unavailable {
                feature: format!("the jail's namespaces ({why})"),
            },
        }
    }
}

impl<E: Into<JailError>> From<E> for Attempt {
    fn from(e: E) -> Attempt {
        Attempt::Error(e.into())
    }
}

/// The paths kept read-only inside write grants: the control surface
/// (`Spec::protect`), and, with a mount tree, [`super::spec::ALWAYS_PROTECTED`]
/// where a write grant covers it (a tool that could remove a server's
/// listener record would have the egress proxy let it reach that server).
/// Without a tree the registry is split out of the grant only for a
/// networked call (behind the connect broker): splitting a grant of `/tmp`
/// around it takes from the tool every new entry in `/tmp` itself, which
/// only a call that could reach glovebox's servers must pay.
fn protected_paths(spec: &Spec, write_grants: &[PathBuf], tree: bool) -> Vec<PathBuf> {
    let mut protect = spec.protect.clone();
    // Without a tree a call reaches glovebox's servers only behind the
    // connect broker (with the network on); the write split then keeps
    // the registry out of its write grants.
    if !tree && !spec.network {
        return protect;
    }
    protect.extend(
        super::spec::ALWAYS_PROTECTED
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.is_dir() && write_grants.iter().any(|w| d.starts_with(w))),
    );
    protect
}

/// Refuses the call when a held grant is one of `keep_out` or holds
/// it (glovebox's state directory): compared by identity, so no name, link
/// or rename leads a grant to it unseen.
fn refuse_kept_out(keep_out: &[PathBuf], held: &HeldAccess) -> Result<(), JailError> {
    for kept in keep_out {
        let ancestors = hold::ancestors(kept);
        if let Some((h, _)) = held.all().find(|(h, _)| h.covers(&ancestors)) {
            return Err(JailError::KeptOut {
                path: h.path.clone(),
                kept: kept.clone(),
            });
        }
    }
    Ok(())
}

/// The caller's grants, each resolved once to a descriptor
/// ([`super::hold`]): the tree, the Landlock rules, the state directory's
/// check and the metadata supervisor all use those, never the names
/// again. (The private HOME is added later, once the plan says where it
/// lives.)
pub(super) struct Grants {
    pub(super) held: HeldAccess,
    /// The write grants where they really are (the metadata supervisor's).
    pub(super) write: Vec<PathBuf>,
    /// The protected paths inside them, held.
    pub(super) protect: Vec<Held>,
    /// Without a mount tree: the write grants split around `protect`.
    pub(super) split: Option<SplitHeld>,
    /// The jail's root, from the held grants.
    pub(super) tree: Tree,
}

/// Holds the baseline and the caller's grants, refuses one that is or
/// holds `keep_out`, and (`tree`: whether the jail has its own root)
/// holds the protected paths inside the write grants, splitting the write
/// grants around them where no tree can bind them read-only again.
pub(super) fn hold_grants(
    spec: &Spec,
    keep_out: &[PathBuf],
    tree: bool,
) -> Result<Grants, JailError> {
    hold_grants_planning(spec, keep_out, tree, true)
}

/// [`hold_grants`]; without `plan_tree` the tree is left empty (a
/// standby's revalidation, [`super::standby`]: the tree is a function of
/// what is held, the protected paths and the working directory, which it
/// compares instead).
pub(super) fn hold_grants_planning(
    spec: &Spec,
    keep_out: &[PathBuf],
    tree: bool,
    plan_tree: bool,
) -> Result<Grants, JailError> {
    let baseline = hold_baseline(spec)?;
    let caller = hold_caller(spec, tree)?;
    assemble(spec, keep_out, tree, plan_tree, baseline, caller)
}

/// The system baseline of `spec` ([`profile::baseline`]), held, links
/// followed once.
fn hold_baseline(spec: &Spec) -> Result<HeldAccess, JailError> {
    Ok(HeldAccess::hold(
        &profile::baseline(spec.network)?,
        &Links::Follow,
    )?)
}

/// The caller's grants and the protected paths inside its write grants,
/// each held once: a call whose set-up is made again (the host replaced a
/// baseline file, [`super::churn`]) uses these same descriptors, never
/// the names again.
pub(super) struct CallerHeld {
    held: HeldAccess,
    protect: Vec<Held>,
}

impl CallerHeld {
    fn try_clone(&self) -> Result<CallerHeld, JailError> {
        let prepare = |source| JailError::Prepare {
            what: "holding the call's grants for its set-up",
            source,
        };
        Ok(CallerHeld {
            held: self.held.try_clone().map_err(prepare)?,
            protect: self
                .protect
                .iter()
                .map(Held::try_clone)
                .collect::<std::io::Result<_>>()
                .map_err(prepare)?,
        })
    }
}

/// Holds the caller's grants of `spec` and (`tree`: whether the jail has
/// its own root) the protected paths inside its write grants.
fn hold_caller(spec: &Spec, tree: bool) -> Result<CallerHeld, JailError> {
    let mut held = HeldAccess::hold(
        &FsAccess {
            exec: Vec::new(),
            ..spec.fs.clone()
        },
        &spec.links,
    )?;
    held.extend(HeldAccess::hold(
        &FsAccess {
            exec: spec.fs.exec.clone(),
            ..FsAccess::default()
        },
        &Links::Follow,
    )?);
    let write = real_writes(&held);
    let mut protect = Vec::new();
    for p in protected_paths(spec, &write, tree) {
        protect.extend(hold::hold(&p, &Links::Follow).map_err(TreeError::from)?);
    }
    Ok(CallerHeld { held, protect })
}

/// The write grants of `held` where they really are.
fn real_writes(held: &HeldAccess) -> Vec<PathBuf> {
    held.write
        .iter()
        .filter(|h| h.id.kind != hold::Kind::Link)
        .map(|h| h.real.clone())
        .collect()
}

/// The call's grants from the held `baseline` and `caller`: one that is
/// or holds `keep_out` refused; without a tree the write grants split
/// around the protected paths; with `plan_tree` the tree planned.
fn assemble(
    spec: &Spec,
    keep_out: &[PathBuf],
    tree: bool,
    plan_tree: bool,
    baseline: HeldAccess,
    caller: CallerHeld,
) -> Result<Grants, JailError> {
    let mut held = baseline;
    held.extend(caller.held);
    refuse_kept_out(keep_out, &held)?;
    let write = real_writes(&held);
    let protect = caller.protect;
    // Without a mount tree nothing can bind the control surface read-only
    // again inside a write grant: the Landlock rules are split around it
    // instead (see `fs::split_write`).
    let split = if !tree && !protect.is_empty() {
        Some(jfs::split_held(&held.write, &protect).map_err(TreeError::from)?)
    } else {
        None
    };
    let tree = if plan_tree {
        Tree::from_held(&held, &protect, std::slice::from_ref(&spec.cwd))
    } else {
        Tree::default()
    };
    Ok(Grants {
        held,
        write,
        protect,
        split,
        tree,
    })
}

/// What is enforced by which mechanism, or the refusal ([`plan::plan`]);
/// planned with assumed facts, a refusal or a missing network namespace
/// asks for the probe first.
pub(super) fn plan_call(
    spec: &Spec,
    kernel: &Kernel,
    assumed: bool,
    grants: &Grants,
) -> Result<Plan, Attempt> {
    let subreaper = probe::subreaper_available();
    // A call behind the proxy finds out by its own launch whether a network
    // namespace can be made (a probe clone here would cost every one-shot
    // call a namespace); an empty one (`netns`) is probed.
    let empty_netns = plan::wants_net_ns(spec) && !spec.network;
    let net_ns = kernel.mode == Mode::Namespaces && (!empty_netns || probe::net_ns());
    if assumed && empty_netns && !net_ns {
        // No network namespace where namespaces were only assumed: maybe
        // none can be made at all; the probe says which.
        return Err(Attempt::Probe);
    }
    let cgroups = Cgroups::found();
    // Only root without a pids cgroup needs the supervisor's count, and so
    // a notification listener for it: asked there alone (once).
    let notify =
        kernel.seccomp && kernel.euid == 0 && cgroups.pids.is_none() && probe::seccomp_listener();
    let host = Host {
        kernel,
        net_ns,
        subreaper,
        notify,
    };
    let split_applied = grants
        .split
        .as_ref()
        .is_some_and(|s| !s.read_only.is_empty());
    match plan::plan(spec, &host, &cgroups, split_applied) {
        Ok(p) => Ok(p),
        // Planned with assumed facts: the jail the kernel really gives
        // (the namespace-free one, say) may hold what these could not.
        Err(e) if assumed && e.is_unavailable() => Err(Attempt::Probe),
        Err(e) => Err(e.into()),
    }
}

/// Plans `spec` with `kernel` and carries the plan out: prepare
/// ([`super::prepare`]), launch ([`super::launch`]: the child's steps, see
/// the module docs), supervise ([`super::supervise`]).
///
/// A baseline file the host replaced while the jail was built (the
/// child's bind found another object there) is held again and the set-up
/// made again with it, the caller's grants as first held
/// ([`super::churn`]).
fn attempt(
    spec: &Spec,
    keep_out: &[PathBuf],
    kernel: &Kernel,
    assumed: bool,
    started: Instant,
) -> Result<JailResult, Attempt> {
    plan::check_spec(spec)?;
    let tree = plan::mount_tree(kernel);
    let caller = hold_caller(spec, tree)?;
    let mut baseline = hold_baseline(spec)?;
    let mut tries = 0;
    loop {
        tries += 1;
        let seen = churn::Seen::of(&baseline);
        let grants = assemble(spec, keep_out, tree, true, baseline, caller.try_clone()?)?;
        let plan = plan_call(spec, kernel, assumed, &grants)?;
        let mut call = prepare::prepare(spec, kernel, &plan, grants)?;
        match launch::start(spec, &plan, &mut call, assumed) {
            Ok((pidfd, early)) => {
                return supervise::supervise(spec, plan, call, pidfd, early, started)
            }
            Err(Attempt::Error(JailError::Changed)) => {
                // Held again while the set-up still holds the baseline it
                // was given: a replaced file's inode number cannot be
                // reused meanwhile (a new file with the old number would
                // look unchanged, and the call be refused as if a grant
                // had changed).
                baseline = hold_baseline(spec)?;
                let decided = churn::decide(&seen, &churn::Seen::of(&baseline), tries);
                drop(call);
                match decided {
                    churn::Churn::Grant => return Err(JailError::Changed.into()),
                    churn::Churn::Again(wait) => std::thread::sleep(wait),
                    churn::Churn::GiveUp(paths) => {
                        return Err(JailError::HostChurn { paths, tries }.into())
                    }
                }
            }
            Err(other) => return Err(other),
        }
    }
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
