//! The child between `clone` and `execve`: one named step per
//! restriction, in the order [`super::spawn`]'s documentation gives and
//! why. [`main`] is the table of contents; every step is a function of its
//! own that returns the errno it failed with, reported as its
//! [`Step`]. Only async-signal-safe system calls on data prepared before
//! the clone (`super::sys`): nothing here allocates or takes a lock.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::fs as jfs;
use super::seccomp::{self, Filter};
use super::spec::GATE_OPEN;
use super::sys::{self, SysResult};
use super::tree::MountOps;
use super::tree::Op;

pub(super) const PROC: &CStr = c"/proc";
pub(super) const ROOT: &CStr = c"/";
pub(super) const PROC_FS: &CStr = c"proc";
pub(super) const TMPFS: &CStr = c"tmpfs";
pub(super) const TMPFS_MODE: &CStr = c"mode=0755";
pub(super) const STAGE: &CStr = c"/tmp";
pub(super) const OLD_ROOT: &CStr = c"/.glovebox-old-root";
pub(super) const OLD_ROOT_NAME: &CStr = c".glovebox-old-root";
pub(super) const HOME: &CStr = c"/.glovebox-home";
pub(super) const SHM: &CStr = c"/dev/shm";
pub(super) const DEV_NULL: &CStr = c"/dev/null";
/// The process's own descriptors, seen through the host's `/proc` under
/// the old root while the tree is built.
pub(super) const OLD_ROOT_FDS: &CStr = c"/.glovebox-old-root/proc/self/fd/";

/// The steps of the child, as reported on failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// Parent-death signal or the supervisor already gone.
    Parent = 1,
    /// `setsid`.
    Session,
    /// User namespace id maps.
    IdMap,
    /// Joining the cgroups.
    Cgroup,
    /// Private mounts and `/proc`.
    Mount,
    /// stdio and fd hygiene.
    Fds,
    /// Working directory.
    Cwd,
    /// Resource limits.
    Rlimit,
    /// Capabilities.
    Caps,
    /// `no_new_privs`.
    NoNewPrivs,
    /// Landlock.
    Landlock,
    /// Seccomp.
    Seccomp,
    /// `execve`.
    Exec,
    /// The call's reaper (namespace-free mode): the subreaper that ends
    /// every descendant.
    Reaper,
    /// Creating the process in its namespaces (`clone`).
    Namespaces,
    /// Loopback and the proxy listener in the call's network namespace.
    Net,
    /// The caller's gate (`Spec::gate`) said no: nothing of the call ran.
    Gate,
    /// Closing the supervisor's descriptors the call does not use.
    Descriptors,
}

impl Step {
    pub(super) fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        [
            Parent,
            Session,
            IdMap,
            Cgroup,
            Mount,
            Fds,
            Cwd,
            Rlimit,
            Caps,
            NoNewPrivs,
            Landlock,
            Seccomp,
            Exec,
            Reaper,
            Namespaces,
            Net,
            Gate,
            Descriptors,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    /// What the step does, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Step::Parent => "watching the supervisor",
            Step::Session => "starting a new session",
            Step::IdMap => "mapping user ids",
            Step::Cgroup => "joining the call's cgroups",
            Step::Mount => "building the jail's filesystem (mount tree and /proc)",
            Step::Fds => "setting up stdin/stdout/stderr",
            Step::Cwd => "changing to the working directory",
            Step::Rlimit => "setting resource limits",
            Step::Caps => "dropping capabilities",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Landlock => "applying landlock",
            Step::Seccomp => "installing the seccomp filter",
            Step::Exec => "executing the program",
            Step::Reaper => "starting the call's reaper (a subreaper that ends every descendant)",
            Step::Namespaces => "creating the jail's namespaces",
            Step::Net => "setting up the network namespace (loopback, egress proxy listener)",
            Step::Gate => "waiting for the call's go-ahead (its intent on disk)",
            Step::Descriptors => "closing the supervisor's descriptors the call does not use",
        }
    }

    /// The likely cause of `errno` at this step and what to do about it.
    pub fn advice(self, errno: i32) -> String {
        let ns_free = "glovebox uses its namespace-free jail (landlock + seccomp + a subreaper) when its start-up probe finds namespaces unavailable";
        match (self, errno) {
            (Step::Namespaces, libc::ENOSPC | libc::EUSERS) => format!(
                "user.max_user_namespaces is 0 or the limit is reached in this container; raise it (sysctl user.max_user_namespaces=15000), run as root, or let {ns_free}"
            ),
            (Step::Namespaces | Step::IdMap | Step::Mount, libc::EPERM | libc::EACCES) => format!(
                "a security module, seccomp profile or container forbids it (AppArmor's unprivileged user namespace restriction, Docker's default profile, a masked /proc); run as root, allow user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns=0), or let {ns_free}"
            ),
            (Step::Namespaces | Step::Reaper, libc::EAGAIN) => {
                "the process limit is reached; end some processes or raise ulimit -u".into()
            }
            (_, libc::ENOMEM) => "the machine is out of memory; retry later".into(),
            (Step::Cgroup, _) => "the call's cgroup cannot be joined (a hierarchy not delegated to this user); run as root or delegate a cgroup to this user (systemd Delegate=yes)".into(),
            (Step::Landlock, _) => "the kernel refused the landlock ruleset; use a kernel with landlock enabled (lsm=landlock)".into(),
            (Step::Seccomp, _) => "the kernel refused the seccomp filter; use a kernel with seccomp filters".into(),
            (Step::Rlimit, _) => "a resource limit above the hard limit was asked for; lower it in the manifest or the config".into(),
            (Step::Cwd, _) => "the working directory is missing or not granted; grant it (fs.read) or change it".into(),
            (Step::Net, _) => "the call's network namespace could not be set up (loopback or the egress proxy's listener); see `glovebox doctor`, or configure direct network (sandbox.direct_network) explicitly".into(),
            (Step::Reaper, _) => "/proc/thread-self/children or PR_SET_CHILD_SUBREAPER is unavailable; use a kernel with CONFIG_PROC_CHILDREN, or one where namespaces can be created".into(),
            _ => "see `glovebox doctor` for what this machine enforces".into(),
        }
    }
}

/// Everything the child needs, prepared before clone.
pub(super) struct Prepared {
    /// The program, argv and environment.
    pub(super) exec: Exec,
    /// A standby jail's ([`super::standby`]): where the child says it
    /// waits at its gate, and the call's program, argv and environment,
    /// set by the thread that hands the call over before it opens the
    /// gate; the child execs these instead of `exec`.
    pub(super) standby: Option<Arc<StandbySlot>>,
    pub(super) cwd: CString,
    pub(super) stdin: OwnedFd,
    pub(super) stdout: OwnedFd,
    pub(super) stderr: OwnedFd,
    pub(super) report: RawFd,
    pub(super) report_read_end: RawFd,
    pub(super) landlock: Option<OwnedFd>,
    /// The read end of the caller's gate (`Gate::signal`): the child
    /// waits for its go-ahead byte right before `execve`.
    pub(super) gate: Option<OwnedFd>,
    /// The Landlock access of the private home, a tmpfs made in the
    /// child's tree (its rule is added there, once it exists).
    pub(super) home_rule: Option<u64>,
    /// The tree mounts the call's private `/dev/shm`, which gets the
    /// home's rule too (not when a grant lies there: `Tree::private_shm`).
    pub(super) private_shm: bool,
    pub(super) seccomp: Option<&'static Filter>,
    /// The jail's root, built in its mount namespace.
    pub(super) tree: Option<MountOps>,
    pub(super) cgroup_procs: Vec<RawFd>,
    pub(super) id_maps: Option<IdMaps>,
    pub(super) private_proc: bool,
    /// Hide the kernel files container runtimes mask in the jail's own
    /// `/proc` (a root jail; any other user cannot read them).
    pub(super) mask_proc: bool,
    pub(super) rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    pub(super) drop_caps: Option<u32>,
    /// No PID namespace: the first process is a subreaper that forks the
    /// tool and, when it ends (or on `SIGTERM`), kills every descendant.
    pub(super) reaper: bool,
    pub(super) net: Option<NetHandoff>,
    /// The socketpair the seccomp notification listener travels over
    /// (namespace-free jail: the metadata family goes to the supervisor).
    pub(super) notify: Option<NetHandoff>,
    /// The descriptors above, sorted ([`Prepared::descriptors`], filled
    /// right before the clone): the child closes every other one first.
    pub(super) keep: Vec<RawFd>,
}

impl Prepared {
    /// Every descriptor the child uses, sorted: the only ones of the
    /// supervisor's table it keeps ([`Step::Descriptors`]).
    pub(super) fn descriptors(&self) -> Vec<RawFd> {
        let owned = [&self.stdin, &self.stdout, &self.stderr]
            .into_iter()
            .chain(self.landlock.as_ref())
            .chain(self.gate.as_ref())
            .chain(
                [&self.net, &self.notify]
                    .into_iter()
                    .flatten()
                    .flat_map(|h| [&h.child_end, &h.parent_end]),
            )
            .map(AsRawFd::as_raw_fd);
        let mut fds: Vec<RawFd> = owned
            .chain([self.report])
            .chain(self.cgroup_procs.iter().copied())
            .filter(|&fd| fd >= 0)
            .collect();
        fds.sort_unstable();
        fds.dedup();
        fds
    }
}

/// What a standby's child shares with the supervisor (it shares its
/// memory until `execve`): atomics and a cell set once, nothing locked.
#[derive(Debug, Default)]
pub(super) struct StandbySlot {
    /// Set by the child right before it waits at its gate.
    pub(super) at_gate: AtomicBool,
    /// The handed-over call's, set before the gate opens.
    pub(super) exec: OnceLock<Exec>,
}

/// What the child's `execve` takes.
#[derive(Debug)]
pub(super) struct Exec {
    pub(super) program: CString,
    pub(super) argv: sys::CArray,
    pub(super) envp: sys::CArray,
}

/// The child's end of the socketpair the proxy listener travels over.
pub(super) struct NetHandoff {
    pub(super) child_end: OwnedFd,
    pub(super) parent_end: OwnedFd,
    /// Where the child answers DNS on loopback for transparent egress
    /// (empty for the notification listener's hand-off).
    pub(super) dns: super::network::LoopbackDns,
}

pub(super) struct IdMaps {
    pub(super) setgroups: CString,
    pub(super) uid_map: CString,
    pub(super) gid_map: CString,
    pub(super) uid_line: Vec<u8>,
    pub(super) gid_line: Vec<u8>,
}

/// The child's whole life: each step in order, the first failure
/// reported to the supervisor, then the program.
pub(super) fn main(p: &mut Prepared) -> ! {
    let report = p.report;
    sys::close(p.report_read_end);
    let step = |step: Step, r: SysResult<()>| {
        if let Err(e) = r {
            fail(report, step, e);
        }
    };
    // First of all (a child that finds its supervisor gone exits at the
    // next step): an exit releases descriptors only after the namespaces
    // are torn down.
    step(Step::Descriptors, sys::close_all_but(&p.keep));
    step(Step::Parent, watch_the_supervisor(report));
    reset_signals();
    step(Step::Session, new_session());
    if p.reaper {
        // Without a PID namespace: only the forked tool goes on below.
        step(Step::Reaper, become_reaper(report));
    }
    step(Step::IdMap, map_ids(p));
    step(Step::Cgroup, join_cgroups(p));
    step(Step::Net, enter_network(p));
    step(Step::Mount, build_root(p));
    step(Step::Fds, wire_stdio(p));
    step(Step::Cwd, enter_cwd(p));
    step(Step::Caps, drop_capabilities(p));
    step(Step::NoNewPrivs, no_new_privs());
    step(Step::Landlock, restrict_landlock(p));
    step(Step::Seccomp, install_seccomp(p));
    // After the last descriptor the child opens itself (Landlock's own
    // /proc and home rules, the notification listener): the supervisor's
    // table, inherited until exec, may already hold more than the call's
    // open-file limit. seccomp allows setrlimit.
    step(Step::Rlimit, set_rlimits(p));
    step(Step::Gate, await_go_ahead(p));
    fail(report, Step::Exec, exec(p))
}

/// Default signal dispositions and an empty signal mask (the
/// supervisor's are not the tool's).
fn reset_signals() {
    sys::reset_signals();
}

/// A new session: no controlling terminal (no `TIOCSTI` injection into
/// the caller's).
fn new_session() -> SysResult<()> {
    sys::setsid()
}

/// Without a PID namespace: this process becomes the call's subreaper and
/// forks the tool, which goes on with the steps below
/// ([`sys::fork_under_reaper`]); the reaper ends every descendant.
fn become_reaper(report: RawFd) -> SysResult<()> {
    sys::fork_under_reaper(report)
}

/// The working directory (inside the jail's view).
fn enter_cwd(p: &Prepared) -> SysResult<()> {
    sys::chdir(&p.cwd)
}

/// `no_new_privs`: no set-id or file capability gains privilege on exec
/// (Landlock and seccomp need it too).
fn no_new_privs() -> SysResult<()> {
    sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1)
}

/// The program: returns only the errno `execve` failed with. A standby
/// jail's is the handed-over call's, set before its gate opened.
fn exec(p: &Prepared) -> i32 {
    let e = match &p.standby {
        None => &p.exec,
        Some(slot) => match slot.exec.get() {
            Some(e) => e,
            None => return libc::EINVAL,
        },
    };
    sys::execve(&e.program, e.argv.ptrs(), e.envp.ptrs())
}

/// Dies with the supervisor (`PDEATHSIG`); if it is already gone, stops
/// here.
fn watch_the_supervisor(report: RawFd) -> SysResult<()> {
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)?;
    if sys::pipe_reader_gone(report) {
        sys::exit_now(127);
    }
    Ok(())
}

/// Maps the supervisor's ids into the new user namespace (an unprivileged
/// supervisor only).
fn map_ids(p: &Prepared) -> SysResult<()> {
    let Some(m) = &p.id_maps else { return Ok(()) };
    sys::write_file(&m.setgroups, b"deny")?;
    sys::write_file(&m.uid_map, &m.uid_line)?;
    sys::write_file(&m.gid_map, &m.gid_line)
}

/// Joins the call's cgroups, before anything can fork.
fn join_cgroups(p: &Prepared) -> SysResult<()> {
    for &fd in &p.cgroup_procs {
        sys::write_all(fd, b"0")?;
    }
    Ok(())
}

/// In the call's own network namespace (behind the egress proxy):
/// loopback up, then the proxy's listening socket handed to the
/// supervisor.
fn enter_network(p: &Prepared) -> SysResult<()> {
    match &p.net {
        Some(h) => child_network(h),
        None => Ok(()),
    }
}

/// The jail's own root ([`enter_tree`]), or, without a tree, a private
/// `/proc` for its PID namespace.
fn build_root(p: &Prepared) -> SysResult<()> {
    if let Some(ops) = &p.tree {
        return enter_tree(ops, p.mask_proc);
    }
    if p.private_proc {
        sys::mount(None, ROOT, None, libc::MS_REC | libc::MS_PRIVATE, None)?;
        return mount_proc(PROC, p.mask_proc);
    }
    Ok(())
}

/// stdin, stdout and stderr onto 0, 1 and 2; every other descriptor
/// close-on-exec.
fn wire_stdio(p: &Prepared) -> SysResult<()> {
    sys::dup2(p.stdin.as_raw_fd(), 0)?;
    sys::dup2(p.stdout.as_raw_fd(), 1)?;
    sys::dup2(p.stderr.as_raw_fd(), 2)?;
    sys::cloexec_from(3)
}

/// The call's resource limits; a hard limit below the one asked for
/// binds instead (stricter, never looser than asked).
fn set_rlimits(p: &Prepared) -> SysResult<()> {
    for &(res, value) in &p.rlimits {
        sys::setrlimit(res, value).or_else(|e| {
            match sys::hard_rlimit(res).map(|hard| below_hard(value, hard, e)) {
                Ok(Some(hard)) => sys::setrlimit(res, hard),
                _ => Err(e),
            }
        })?;
    }
    Ok(())
}

/// Every capability, bounding set included (a root supervisor).
fn drop_capabilities(p: &Prepared) -> SysResult<()> {
    match p.drop_caps {
        Some(last) => sys::drop_all_caps(last),
        None => Ok(()),
    }
}

/// Landlock: the rules prepared in the supervisor, plus those only the
/// child can add (the jail's own `/proc`, or the tool's own entry and the
/// system-wide files of the host's; the private home and `/dev/shm`).
fn restrict_landlock(p: &Prepared) -> SysResult<()> {
    let Some(fd) = &p.landlock else { return Ok(()) };
    let fd = fd.as_raw_fd();
    if p.private_proc {
        sys::landlock_allow_path(fd, PROC, jfs::proc_access_bits())?;
    } else {
        sys::landlock_allow_path(fd, c"/proc/self", jfs::proc_access_bits())?;
        for f in jfs::HOST_PROC_FILES {
            match sys::landlock_allow_path(fd, f, jfs::proc_file_bits()) {
                Err(libc::ENOENT) => {}
                other => other?,
            }
        }
    }
    if let Some(bits) = p.home_rule {
        sys::landlock_allow_path(fd, HOME, bits)?;
        if p.private_shm {
            sys::landlock_allow_path(fd, SHM, bits)?;
        }
    }
    sys::landlock_restrict_self(fd)
}

/// Seccomp, last (it forbids some of the steps above); without a mount
/// namespace then the metadata filter, whose notification listener goes
/// to the supervisor over a socketpair.
fn install_seccomp(p: &Prepared) -> SysResult<()> {
    let Some(progs) = p.seccomp else {
        return Ok(());
    };
    seccomp::install(progs)?;
    if let (Some(_), Some(h)) = (progs.notify, &p.notify) {
        if let Some(fd) = seccomp::install_notify(progs)? {
            let sent = sys::send_fd(h.child_end.as_raw_fd(), fd);
            sys::close(fd);
            sent?;
        }
    }
    Ok(())
}

/// The caller's go-ahead (the call's intent on disk), the last thing
/// before the program: every step above overlapped its wait. A refusal
/// means nothing of the call ran.
fn await_go_ahead(p: &Prepared) -> SysResult<()> {
    let Some(gate) = &p.gate else { return Ok(()) };
    if let Some(slot) = &p.standby {
        slot.at_gate.store(true, Ordering::Release);
    }
    match sys::read_byte(gate.as_raw_fd()) {
        Ok(Some(GATE_OPEN)) => Ok(()),
        _ => Err(0),
    }
}

/// In the call's new network namespace: loopback up, then the proxy's
/// listening socket handed to the supervisor, then the TUN device when
/// one can be made, with a UDP socket on port 53 of each loopback DNS
/// address. Child-side: no allocation.
fn child_network(h: &NetHandoff) -> Result<(), i32> {
    sys::close(h.parent_end.as_raw_fd());
    sys::loopback_up()?;
    let (addr, port) = super::spec::PROXY_ADDR;
    let listener = sys::listen_tcp4(addr, port)?;
    let sent = sys::send_fd(h.child_end.as_raw_fd(), listener);
    sys::close(listener);
    // Where a TUN device can be made, a second descriptor follows: the
    // call's transparent egress. Where it cannot (no /dev/net/tun), the
    // call keeps the proxy alone, as without this step.
    if sent.is_ok() {
        if let Ok(tun) = sys::tun_up(&super::spec::TUN) {
            if sys::send_fd(h.child_end.as_raw_fd(), tun).is_ok() {
                // Then the loopback DNS sockets (those it can bind).
                for addr in h.dns.addrs() {
                    if let Ok(dns) = sys::bind_udp4(*addr, 53) {
                        let _ = sys::send_fd(h.child_end.as_raw_fd(), dns);
                        sys::close(dns);
                    }
                }
            }
            sys::close(tun);
        }
    }
    sys::close(h.child_end.as_raw_fd());
    sent
}

/// Reports `(step, errno)` to the supervisor and exits.
pub(super) fn fail(report: RawFd, step: Step, errno: i32) -> ! {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
    msg[4..].copy_from_slice(&errno.to_ne_bytes());
    let _ = sys::write_all(report, &msg);
    sys::exit_now(127)
}

/// Mounts a fresh `/proc` (for the child's PID namespace) at `at` (which
/// must be `/proc` in the child's root); with `mask` (a jail whose user is
/// root: the files are root-only or show root-only values, which no other
/// user's jail can read anyway) also hides what container runtimes hide
/// ([`super::tree::PROC_MASKED`], `PROC_HIDDEN_DIRS`, `PROC_READ_ONLY`).
/// Names the running kernel lacks are skipped.
fn mount_proc(at: &CStr, mask: bool) -> sys::SysResult<()> {
    let skip_missing = |r: sys::SysResult<()>| match r {
        Err(libc::ENOENT) => Ok(()),
        other => other,
    };
    sys::mount(
        Some(PROC_FS),
        at,
        Some(PROC_FS),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    if !mask {
        return Ok(());
    }
    for f in super::tree::PROC_MASKED {
        skip_missing(sys::mount(Some(DEV_NULL), f, None, libc::MS_BIND, None))?;
    }
    for d in super::tree::PROC_HIDDEN_DIRS {
        skip_missing(sys::mount(
            Some(TMPFS),
            d,
            Some(TMPFS),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some(c"size=4k"),
        ))?;
    }
    for d in super::tree::PROC_READ_ONLY {
        skip_missing(
            sys::mount(Some(d), d, None, libc::MS_BIND | libc::MS_REC, None)
                .and_then(|()| sys::make_read_only(d)),
        )?;
    }
    Ok(())
}

/// Builds the jail's root from `ops` and enters it (see [`super::tree`]
/// for the sequence). Child side: single system calls on prepared strings.
fn enter_tree(ops: &MountOps, mask_proc: bool) -> sys::SysResult<()> {
    sys::mount(None, ROOT, None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    sys::mount(
        Some(TMPFS),
        STAGE,
        Some(TMPFS),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(TMPFS_MODE),
    )?;
    sys::chdir(STAGE)?;
    sys::mkdir(OLD_ROOT_NAME)?;
    sys::pivot_root(c".", OLD_ROOT_NAME)?;
    sys::chdir(ROOT)?;
    // The staging tmpfs: mountpoints the tree makes itself are on it.
    let stage = sys::open_path(libc::AT_FDCWD, ROOT, libc::O_DIRECTORY)?;
    let stage_dev = sys::fstat(stage.as_raw_fd())?.st_dev;
    drop(stage);
    // A grant's source removed since it was held is left out, as a grant
    // that did not exist when held is (`HeldAccess::hold`): nothing of it
    // to show. Its read-only step then has no mount of its own to act on
    // (it would make the staging tmpfs read-only), so it is skipped too.
    let mut gone: Option<&CStr> = None;
    for op in &ops.ops {
        match op {
            Op::Mkdir(p) => sys::mkdir(p)?,
            Op::Touch(p) => sys::touch(p)?,
            Op::Symlink { target, at } => sys::symlink(target, at)?,
            Op::Bind {
                src,
                dst,
                dev,
                ino,
                check_dst,
                may_vanish,
            } => {
                let bound = sys::bind_checked(
                    src,
                    dst,
                    *dev,
                    *ino,
                    true,
                    check_dst.then_some(stage_dev),
                    Some(OLD_ROOT_FDS),
                )?;
                if !bound && !may_vanish {
                    return Err(libc::ENOENT);
                }
                gone = (!bound).then_some(dst.as_c_str());
            }
            Op::ReadOnly(p) if gone == Some(p.as_c_str()) => {}
            Op::ReadOnly(p) => sys::make_read_only(p)?,
            Op::Tmpfs { at, options } => sys::mount(
                Some(TMPFS),
                at,
                Some(TMPFS),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(options),
            )?,
            Op::File { path, contents } => sys::create_file(path, contents)?,
            Op::BindLink {
                src,
                dst,
                dev,
                ino,
                check_dst,
            } => {
                // A protected link: one removed since fails the call.
                if !sys::bind_checked(
                    src,
                    dst,
                    *dev,
                    *ino,
                    false,
                    check_dst.then_some(stage_dev),
                    None,
                )? {
                    return Err(libc::ENOENT);
                }
            }
        }
    }
    sys::mkdir(PROC)?;
    mount_proc(PROC, mask_proc)?;
    for dir in &ops.sealed {
        sys::seal_dir(dir, stage_dev)?;
    }
    sys::detach(OLD_ROOT)?;
    sys::rmdir(OLD_ROOT)?;
    sys::mount(
        None,
        ROOT,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )
}

/// The limit to set instead of `asked` when setting it failed with
/// `errno`: the current `hard` limit when that is lower (raising a hard
/// limit needs a privilege the jail may not have), else none (the
/// failure stands).
pub(super) fn below_hard(asked: u64, hard: u64, errno: i32) -> Option<u64> {
    (errno == libc::EPERM && hard < asked).then_some(hard)
}
