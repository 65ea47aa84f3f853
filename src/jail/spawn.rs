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
//! supervisor's, in this order ([`super::child`]`::main`, one named step
//! each):
//!
//! 1. parent-death signal (`SIGKILL`), then check the supervisor still lives;
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

use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::broker::{Admission, Broker};
use super::cgroup::CallGroup;
use super::forks::ForkLimit;
use super::fs::{self as jfs, FsAccess};
use super::hold::{self, Links};
use super::metadata::{Grants, Watch};
use super::network::{self as net, NetPlan};
use super::plan::{self, Cgroups, Host, Plan};
use super::probe::{self, Kernel, Mode};
use super::pump::{self, Sink};
use super::seccomp;
use super::spec::{Enforcement, JailResult, LimitHit, Spec, Status, Stdin};
use super::child::{IdMaps, NetHandoff, Prepared};
pub use super::child::Step;
use super::sys::{self, Forked};
use super::tree::{HeldAccess, MetadataGuard, Tree};
use super::{profile, JailError};

/// The `PATH` inside every jail.
pub const JAIL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn cstring(s: &OsStr, what: &str) -> Result<CString, JailError> {
    CString::new(s.as_bytes()).map_err(|_| JailError::InvalidSpec {
        message: format!("{what} contains a NUL byte"),
    })
}

/// Finds `program` in the jail's PATH (the supervisor's own PATH never
/// matters: a jail sees only its own).
fn resolve_program(program: &OsStr, path_var: &OsStr) -> Result<PathBuf, JailError> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    for dir in std::env::split_paths(path_var) {
        let candidate = dir.join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(JailError::NotFound {
        program: program.to_string_lossy().into_owned(),
    })
}

fn open_null() -> Result<OwnedFd, JailError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|source| JailError::Prepare {
            what: "opening /dev/null",
            source,
        })
}

fn pipe() -> Result<(OwnedFd, OwnedFd), JailError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| JailError::Prepare {
        what: "creating a pipe",
        source: e.into(),
    })
}

/// An fd numbered 3 or above, so that moving it onto 0/1/2 in the child
/// never clobbers another of them.
fn high(fd: OwnedFd) -> Result<OwnedFd, JailError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    fd.try_clone().map_err(|source| JailError::Prepare {
        what: "duplicating a descriptor",
        source,
    })
}

/// The supervisor's stdin, when it is safe to hand over (a pipe or a
/// regular file: never a terminal, whose ioctls could inject keystrokes, nor
/// a socket, which would be a network channel).
fn inherit_stdin() -> Result<Option<OwnedFd>, JailError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let Ok(stat) = nix::sys::stat::fstat(stdin.as_fd()) else {
        return Ok(None);
    };
    let kind = stat.st_mode & libc::S_IFMT;
    if (kind == libc::S_IFIFO || kind == libc::S_IFREG) && !sys::is_tty(0) {
        // try_clone_to_owned uses F_DUPFD_CLOEXEC from 3 upwards.
        let fd = stdin
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| JailError::Prepare {
                what: "duplicating stdin",
                source,
            })?;
        return Ok(Some(fd));
    }
    Ok(None)
}

/// Builds the jail's environment: the minimal base, then the caller's
/// explicit variables.
fn environment(spec: &Spec, home: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), JAIL_PATH.into()),
        ("HOME".into(), home.as_os_str().to_owned()),
        ("TMPDIR".into(), home.as_os_str().to_owned()),
        (
            "LANG".into(),
            std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
        ),
        (
            "TZ".into(),
            std::env::var_os("TZ").unwrap_or_else(|| "UTC".into()),
        ),
    ];
    for (k, v) in &spec.env {
        if k == "HOME" || k == "TMPDIR" {
            continue;
        }
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// The call's environment with its private home at `home`: the minimal
/// base, the caller's variables, the proxy's (a call behind the egress
/// proxy), then the variables naming the spec's home files.
fn call_env(spec: &Spec, home: &Path, proxied: bool) -> Vec<(OsString, OsString)> {
    let mut env = environment(spec, home);
    if proxied {
        net::proxy_environment(&mut env);
    }
    for f in &spec.home_files {
        for v in &f.variables {
            env.retain(|(k, _)| k != v.as_str());
            env.push((v.into(), home.join(&f.name).into_os_string()));
        }
    }
    env
}

/// The environment as `KEY=value` C strings and the NULL-terminated
/// pointer array `execve` takes (pointing into them).
fn env_cstrings(
    env: &[(OsString, OsString)],
) -> Result<(Vec<CString>, Vec<*const libc::c_char>), JailError> {
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                return Err(JailError::InvalidSpec {
                    message: format!("invalid environment variable name {k:?}"),
                });
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| JailError::InvalidSpec {
                message: format!("environment variable {k:?} contains a NUL byte"),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    Ok((envp, ptrs))
}

fn check_home_file_name(name: &str) -> Result<(), JailError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(JailError::InvalidSpec {
            message: format!("home file name {name:?} is not a plain file name"),
        });
    }
    Ok(())
}

/// Writes the spec's files into a host home directory (mode 0644).
fn write_home_files(spec: &Spec, home: &Path) -> Result<(), JailError> {
    use std::os::unix::fs::OpenOptionsExt;
    for f in &spec.home_files {
        check_home_file_name(&f.name)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(home.join(&f.name))
            .and_then(|mut file| {
                std::io::Write::write_all(&mut file, &f.contents)?;
                file.set_permissions(std::fs::Permissions::from_mode(0o644))
            })
            .map_err(|source| JailError::Prepare {
                what: "writing a file into the private home directory",
                source,
            })?;
    }
    Ok(())
}

/// The prefix of a host home directory's name; the supervisor's pid
/// follows, so that [`sweep_host_homes`] knows whose it is.
const HOST_HOME_PREFIX: &str = "glovebox-home-";

/// A private home directory on the host, for a jail without a mount tree
/// (the namespace-free jail): `$TMPDIR/glovebox-home-<pid>-<random>`,
/// mode 0700, removed when dropped. The first one of a process first
/// removes those that supervisors killed before their cleanup left.
fn host_home() -> Result<tempfile::TempDir, JailError> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_host_homes(&std::env::temp_dir()));
    tempfile::Builder::new()
        .prefix(&format!("{HOST_HOME_PREFIX}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|source| JailError::Prepare {
            what: "creating the private home directory",
            source,
        })
}

/// Removes the host home directories in `dir` that belong to this user and
/// to a supervisor that is gone (killed with SIGKILL: its calls ended with
/// it, `PDEATHSIG`). Links are never followed.
pub(crate) fn sweep_host_homes(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let euid = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(HOST_HOME_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != euid || pid == std::process::id() {
            continue;
        }
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where a call's private `HOME` (and `TMPDIR`) is.
enum Home {
    /// A tmpfs the child mounts in its own tree at [`super::tree::HOME`]:
    /// nothing on the host to make, remove or leak.
    Jail,
    /// A directory on the host (no mount tree), removed after the call.
    Host(tempfile::TempDir),
}

impl Home {
    fn path(&self) -> &Path {
        match self {
            Home::Jail => Path::new(super::tree::HOME),
            Home::Host(dir) => dir.path(),
        }
    }
}

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
enum Attempt {
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
    fn into_error(self) -> JailError {
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

/// Plans `spec` with `kernel` and carries the plan out (see the module
/// docs for the child's steps).
fn attempt(
    spec: &Spec,
    keep_out: &[PathBuf],
    kernel: &Kernel,
    assumed: bool,
    started: Instant,
) -> Result<JailResult, Attempt> {
    if spec.argv.is_empty() {
        return Err(JailError::InvalidSpec {
            message: "no command given".into(),
        }
        .into());
    }
    // --- filesystem: baseline profile + the caller's paths, each resolved
    // once to a descriptor (`super::hold`): the tree, the Landlock rules,
    // the state directory's check and the metadata supervisor all use
    // those, never the names again. (The private HOME is added below,
    // once the plan says where it lives.)
    let mut held = HeldAccess::hold(&profile::baseline(spec.network)?, &Links::Follow)?;
    held.extend(HeldAccess::hold(
        &FsAccess {
            exec: Vec::new(),
            ..spec.fs.clone()
        },
        &spec.links,
    )?);
    held.extend(HeldAccess::hold(
        &FsAccess {
            exec: spec.fs.exec.clone(),
            ..FsAccess::default()
        },
        &Links::Follow,
    )?);
    refuse_kept_out(keep_out, &held)?;
    // The write grants where they really are (the metadata supervisor's).
    let mut write_grants: Vec<PathBuf> = held
        .write
        .iter()
        .filter(|h| h.id.kind != hold::Kind::Link)
        .map(|h| h.real.clone())
        .collect();
    // Without a mount tree nothing can bind the control surface read-only
    // again inside a write grant: the Landlock rules are split around it
    // instead (see `fs::split_write`).
    let no_tree = !(kernel.mode == Mode::Namespaces && kernel.pid_ns && kernel.mount_proc);
    let mut protect_held = Vec::new();
    for p in protected_paths(spec, &write_grants, !no_tree) {
        protect_held.extend(hold::hold(&p, &Links::Follow).map_err(super::tree::TreeError::from)?);
    }
    let split = if no_tree && !protect_held.is_empty() {
        Some(jfs::split_held(&held.write, &protect_held).map_err(super::tree::TreeError::from)?)
    } else {
        None
    };
    let split_applied = split.as_ref().is_some_and(|s| !s.read_only.is_empty());
    let cwd_dir = [spec.cwd.clone()];
    let fs_tree = Tree::from_held(&held, &protect_held, &cwd_dir);

    // --- what is enforced by which mechanism, or the refusal.
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
    let host = Host {
        kernel,
        net_ns,
        subreaper,
    };
    let plan = match plan::plan(spec, &host, &Cgroups::found(), split_applied) {
        Ok(p) => p,
        // Planned with assumed facts: the jail the kernel really gives
        // (the namespace-free one, say) may hold what these could not.
        Err(e) if assumed && e.is_unavailable() => return Err(Attempt::Probe),
        Err(e) => return Err(e.into()),
    };
    // --- the private HOME: a tmpfs in the jail's own tree, else a host
    // directory granted like a write path.
    let mut home_held = Vec::new();
    let home = match plan.guard {
        MetadataGuard::Tree => Home::Jail,
        MetadataGuard::Seccomp => {
            let dir = host_home()?;
            write_home_files(spec, dir.path())?;
            home_held = hold::hold(dir.path(), &Links::Checked { root: None })
                .map_err(super::tree::TreeError::from)?;
            write_grants.push(dir.path().to_path_buf());
            Home::Host(dir)
        }
    };
    let landlock = match plan.landlock_abi {
        Some(abi) => {
            let rules = match &split {
                Some(split) => jfs::Rules {
                    read_only: held.read_only.iter().chain(&split.read_only).collect(),
                    read_exec: held.read.iter().chain(&held.exec).collect(),
                    write: split.write.iter().chain(&home_held).collect(),
                },
                None => jfs::Rules {
                    read_only: held.read_only.iter().collect(),
                    read_exec: held.read.iter().chain(&held.exec).collect(),
                    write: held.write.iter().chain(&home_held).collect(),
                },
            };
            // Behind the connect broker the tool holds no TCP right of its
            // own: the supervisor connects for it.
            let own_tcp = spec.network && !matches!(plan.net, NetPlan::Brokered(_));
            Option::<OwnedFd>::from(jfs::ruleset_held(abi, &rules, own_tcp)?)
        }
        None => None,
    };
    let tree_plan = match plan.guard {
        MetadataGuard::Tree => {
            let mut tp = fs_tree.plan()?;
            for f in &spec.home_files {
                check_home_file_name(&f.name)?;
            }
            let files: Vec<(&str, &[u8])> = spec
                .home_files
                .iter()
                .map(|f| (f.name.as_str(), f.contents.as_slice()))
                .collect();
            tp.ops
                .extend(super::tree::home_ops(spec.limits.memory_bytes, &files)?);
            tp.ops
                .extend(super::tree::shm_ops(spec.limits.memory_bytes)?);
            Some(tp)
        }
        MetadataGuard::Seccomp => None,
    };
    // Every decision about the held paths is made (the tree's nodes and
    // identities, the Landlock rules, which hold the inodes themselves):
    // their descriptors go now, not at the call's end, so that calls in
    // flight do not pile them up (each child inherits the supervisor's
    // table until its exec). The child still compares each bind source
    // with the identity decided here; an inode freed and its number
    // reused meanwhile could only be found at the same path.
    drop((held, protect_held, split, home_held));
    // The Landlock rule of the home and of /dev/shm, added in the child
    // once their tmpfs exist.
    let home_rule = match (&home, plan.landlock_abi) {
        (Home::Jail, Some(abi)) => Some(jfs::write_access_bits(abi)),
        _ => None,
    };
    let seccomp = match plan.seccomp {
        Some(sockets) => Some(seccomp::filter_with(
            sockets,
            plan.guard == MetadataGuard::Seccomp,
            plan.count_forks,
        )?),
        None => None,
    };
    // Learn mode: the same filter, with the observer's calls handed to
    // the supervisor too; no learning run without it (it would miss what
    // it cannot see).
    let seccomp = match (&spec.observe, plan.seccomp) {
        (None, _) => seccomp,
        (Some(_), Some(sockets)) if kernel.seccomp => seccomp
            .map(|f| {
                let forks = plan.count_forks && plan.guard == MetadataGuard::Seccomp;
                seccomp::observing(f, sockets, forks)
            })
            .transpose()?,
        (Some(_), _) => return Err(super::observe::unavailable().into()),
    };
    let group = if plan.memory_cgroup || plan.pids_cgroup {
        Some(CallGroup::create(
            plan.memory_cgroup.then_some(spec.limits.memory_bytes),
            plan.pids_cgroup.then_some(spec.limits.pids),
        )?)
    } else {
        None
    };
    let drop_caps = plan.drop_caps.then(sys::last_cap);

    // --- program, argv, env.
    let proxied = matches!(plan.net, NetPlan::Proxied(_) | NetPlan::Brokered(_));
    let env = call_env(spec, home.path(), proxied);
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| JAIL_PATH.into());
    let program = resolve_program(&spec.argv[0], &path_var)?;
    let argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| cstring(a, "an argument"))
        .collect::<Result<_, _>>()?;
    let (envp, envp_ptrs) = env_cstrings(&env)?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());

    // --- stdio.
    let (stdin_child, stdin_feed) = match &spec.stdin {
        Stdin::Null => (open_null()?, None),
        Stdin::Bytes(data) => {
            let (r, w) = pipe()?;
            (high(r)?, Some((w, data.clone())))
        }
        Stdin::InheritIfSafe => match inherit_stdin()? {
            Some(fd) => (fd, None),
            None => (open_null()?, None),
        },
        Stdin::Channel(channel) | Stdin::Duplex(channel) => (
            high(channel.take().ok_or_else(|| JailError::InvalidSpec {
                message: "the control channel was already given to another process".into(),
            })?)?,
            None,
        ),
    };
    let (out_r, mut out_w) = pipe()?;
    if matches!(spec.stdin, Stdin::Duplex(_)) {
        // The channel is the child's stdout too; the pipe gets no writer.
        out_w = stdin_child
            .try_clone()
            .map_err(|source| JailError::Prepare {
                what: "duplicating a descriptor",
                source,
            })?;
    }
    let (err_r, err_w) = pipe()?;

    let id_maps = if plan.id_maps {
        let (uid, gid) = (kernel.euid, kernel.egid);
        Some(IdMaps {
            setgroups: c"/proc/self/setgroups".into(),
            uid_map: c"/proc/self/uid_map".into(),
            gid_map: c"/proc/self/gid_map".into(),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
        })
    } else {
        None
    };

    let mut prepared = Prepared {
        program: cstring(program.as_os_str(), "the program path")?,
        _argv: argv,
        argv_ptrs,
        _envp: envp,
        envp_ptrs,
        cwd: cstring(spec.cwd.as_os_str(), "the working directory")?,
        stdin: high(stdin_child)?,
        stdout: high(out_w)?,
        stderr: high(err_w)?,
        report: -1,
        report_read_end: -1,
        gate: None,
        landlock,
        home_rule,
        seccomp,
        tree: tree_plan,
        cgroup_procs: group
            .as_ref()
            .map(|g| g.procs.iter().map(AsRawFd::as_raw_fd).collect())
            .unwrap_or_default(),
        id_maps,
        private_proc: plan.private_proc,
        mask_proc: kernel.euid == 0,
        rlimits: plan.rlimits.clone(),
        drop_caps,
        reaper: plan.reaper,
        notify: if kernel.seccomp {
            let (parent_end, child_end) =
                sys::socketpair().map_err(|source| JailError::Prepare {
                    what: "creating the metadata supervisor's hand-off socket",
                    source,
                })?;
            Some(NetHandoff {
                child_end,
                parent_end,
                dns: Default::default(),
            })
        } else {
            None
        },
        net: match plan.net {
            NetPlan::Proxied(_) => {
                let (parent_end, child_end) =
                    sys::socketpair().map_err(|source| JailError::Prepare {
                        what: "creating the egress hand-off socket",
                        source,
                    })?;
                // The host's resolver configuration, as the jail sees it
                // (the tree binds the host's `/etc`); unreadable is none.
                let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
                Some(NetHandoff {
                    child_end,
                    parent_end,
                    dns: super::network::LoopbackDns::from_resolv_conf(&resolv),
                })
            }
            _ => None,
        },
    };
    // Everything above prepared the call; nothing of its own has run. The
    // caller's gate (the engine's: its intent line durable) is waited for
    // last: by the child right before `execve` when the gate signals
    // through a pipe (the child's own set-up overlaps the wait), else here.
    if let Some(gate) = &spec.gate {
        match gate.signal() {
            Some(fd) => prepared.gate = Some(fd),
            None => gate.pass().map_err(|message| JailError::Gate { message })?,
        }
    }
    // Namespaces may still fail in the child (a container that masks /proc
    // refuses a fresh one, a limit on network namespaces): planned with
    // assumed facts, probe and plan again; with probed facts, plan again
    // with the facts of a machine without namespaces (`run_keeping_out`):
    // the namespace-free jail (the connect broker for a networked call)
    // where it keeps every invariant of the call, a degraded run where the
    // caller opted in, else a refusal that names what failed.
    // Learn mode: the child's own `execve` is observed, so the thread that
    // answers starts before it (it receives the listener itself).
    let mut early = match (&spec.observe, &prepared.notify) {
        (Some(observer), Some(h)) => {
            let handoff = h
                .parent_end
                .try_clone()
                .map_err(|source| JailError::Prepare {
                    what: "duplicating the seccomp notification hand-off",
                    source,
                })?;
            Some(Watch::start_early(handoff, observer.clone())?)
        }
        (Some(_), None) => return Err(super::observe::unavailable().into()),
        _ => None,
    };
    let flags = plan.flags;
    let pidfd = match launch(&mut prepared, flags) {
        Ok(pidfd) => pidfd,
        Err((Step::Gate, _)) => return Err(refused_by_gate(spec).into()),
        Err((step, errno)) if flags != 0 && step_is_namespace(step, errno) => {
            if assumed {
                return Err(Attempt::Probe);
            }
            return Err(Attempt::WithoutNamespaces(format!(
                "{}: {}: {}",
                step.describe(),
                sys::errno_name(errno),
                std::io::Error::from_raw_os_error(errno)
            )));
        }
        // Learn mode's listener refused (gVisor, a container's profile):
        // it cannot observe, so it does not run.
        Err((Step::Seccomp, errno)) if spec.observe.is_some() => {
            return Err(super::observe::refused(errno).into())
        }
        Err((step, errno)) => return Err(JailError::child_failed(step, errno, &program).into()),
    };
    let flags_used = plan.flags;
    let Plan {
        enforcement,
        warnings,
        net: net_plan,
        count_forks,
        ..
    } = plan;
    // The child has exec'd: its copies of these are its own now.
    let Prepared {
        stdin,
        stdout,
        stderr,
        landlock,
        net,
        notify,
        seccomp: used_seccomp,
        ..
    } = prepared;
    drop((stdin, stdout, stderr, landlock));
    // Behind the connect broker: the call's proxy on a loopback port of
    // the host, serving only the connections the broker makes.
    let kill = |e: JailError| -> Attempt {
        let _ = sys::pidfd_kill(pidfd.as_raw_fd());
        let _ = sys::pidfd_wait(pidfd.as_raw_fd());
        e.into()
    };
    let (brokered_egress, broker) = match &net_plan {
        NetPlan::Brokered(gateway) => {
            let (attached, broker) = start_broker(gateway).map_err(|source| {
                kill(JailError::Prepare {
                    what: "starting the egress proxy",
                    source,
                })
            })?;
            (Some(attached), Some(broker))
        }
        _ => (None, None),
    };
    let brokered = broker.is_some();
    // Root without a pids cgroup: the supervisor counts the call's tasks
    // below its reaper (the first child here).
    let forks = if count_forks {
        match sys::pidfd_pid(pidfd.as_raw_fd()) {
            Some(reaper) => Some(ForkLimit {
                reaper,
                limit: spec.limits.pids,
            }),
            None => {
                return Err(kill(JailError::Prepare {
                    what: "finding the call's reaper for its process limit",
                    source: std::io::Error::other("no pid in the pidfd's fdinfo"),
                }))
            }
        }
    } else {
        None
    };
    if count_forks && used_seccomp.and_then(|p| p.notify).is_none() {
        return Err(kill(JailError::Prepare {
            what: "counting the call's processes",
            source: std::io::Error::other("no seccomp notification listener"),
        }));
    }
    // Without a mount namespace the metadata family is answered by the
    // supervisor (see `super::metadata`) until the call ends, and behind
    // the broker `connect` too.
    let watch = match (used_seccomp.and_then(|p| p.notify), notify) {
        (Some(_), Some(h)) if early.is_some() => {
            drop(h.child_end);
            early.take().map(|e| {
                e.provide(super::metadata::Context {
                    grants: Grants::new(&write_grants, &spec.protect),
                    broker,
                    forks,
                })
            })
        }
        (Some(_), Some(h)) => {
            drop(h.child_end);
            let grants = Grants::new(&write_grants, &spec.protect);
            let started = sys::recv_fd(h.parent_end.as_raw_fd())
                .map_err(|source| JailError::Prepare {
                    what: "receiving the seccomp notification listener",
                    source,
                })
                .and_then(|fd| Watch::start(fd, grants, broker, forks).map_err(JailError::from));
            match started {
                Ok(w) => Some(w),
                Err(e) => return Err(kill(e)),
            }
        }
        _ => None,
    };
    if spec.observe.is_some() && watch.is_none() {
        return Err(kill(super::observe::unavailable()));
    }
    if brokered && watch.is_none() {
        // Never reached (the broker is planned only with seccomp's
        // notification listener), but a brokered call without its broker
        // must not run.
        return Err(kill(JailError::Prepare {
            what: "starting the connect broker",
            source: std::io::Error::other("no seccomp notification listener"),
        }));
    }
    // The proxy runs until the call's tree is gone; dropping `egress`
    // closes its listener and connections, which frees the namespace.
    let mut transparent = None;
    let egress = match (&net_plan, net) {
        (NetPlan::Brokered(_), _) => brokered_egress,
        (NetPlan::Proxied(gateway), Some(h)) => {
            drop(h.child_end);
            let attached = sys::recv_fd(h.parent_end.as_raw_fd())
                .map(std::net::TcpListener::from)
                .and_then(|l| gateway.attach(l, None));
            match attached {
                Ok(a) => {
                    // The TUN device, when the child could make one (sent
                    // before it exec'd, so already here or never).
                    transparent = sys::recv_fd(h.parent_end.as_raw_fd())
                        .and_then(|tun| {
                            // Then its loopback DNS sockets, until the
                            // child's end is closed.
                            let dns =
                                std::iter::from_fn(|| sys::recv_fd(h.parent_end.as_raw_fd()).ok())
                                    .take(super::network::MAX_LOOPBACK_DNS)
                                    .collect();
                            gateway.attach_tun(tun, dns)
                        })
                        .ok();
                    Some(a)
                }
                Err(source) => {
                    return Err(kill(JailError::Prepare {
                        what: "starting the egress proxy",
                        source,
                    }))
                }
            }
        }
        _ => None,
    };

    let deadline = started + spec.limits.wall;
    let mut out = Sink::new(out_r, spec.limits.output_bytes, spec.output, 1).map_err(|source| {
        JailError::Prepare {
            what: "reading the child's output",
            source,
        }
    })?;
    let mut err = Sink::new(err_r, spec.limits.output_bytes, spec.output, 2).map_err(|source| {
        JailError::Prepare {
            what: "reading the child's output",
            source,
        }
    })?;
    // A subreaper ends the tree on SIGTERM; a PID namespace ends with its
    // first process.
    let stop = if flags_used & libc::CLONE_NEWPID as libc::c_ulong == 0 {
        libc::SIGTERM
    } else {
        libc::SIGKILL
    };
    let pumped = pump::run(
        &pidfd,
        stop,
        stdin_feed,
        &mut out,
        &mut err,
        deadline,
        spec.cancel.as_ref(),
    );
    if pumped.is_err() {
        let _ = sys::pidfd_kill(pidfd.as_raw_fd());
    }
    let exit = sys::pidfd_wait(pidfd.as_raw_fd()).map_err(|source| JailError::Wait { source })?;
    let transparent_egress = transparent.is_some();
    drop(transparent);
    drop(egress);
    drop(watch);
    let pumped = pumped.map_err(|source| JailError::Wait { source })?;

    let mut limits_hit = Vec::new();
    if pumped.timed_out {
        limits_hit.push(LimitHit::Timeout);
    }
    if let Some(g) = &group {
        if g.memory_exceeded() {
            limits_hit.push(LimitHit::Memory);
        }
        if g.pids_exceeded() {
            limits_hit.push(LimitHit::Pids);
        }
    }
    if out.truncated() || err.truncated() {
        limits_hit.push(LimitHit::Output);
    }
    drop(group);
    drop(home);
    Ok(JailResult {
        status: match exit {
            sys::Exit::Code(c) => Status::Exited(c),
            sys::Exit::Signal(s) => Status::Signaled(s),
        },
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout: std::mem::take(&mut out.kept),
        stderr: std::mem::take(&mut err.kept),
        limits_hit,
        duration: started.elapsed(),
        enforcement: Enforcement {
            transparent_egress,
            ..enforcement
        },
        warnings,
        cancelled: pumped.cancelled,
    })
}

/// The proxy of a call behind the connect broker: a listener on a fresh
/// loopback port of the host, served by `gateway` admitting only the
/// broker's connections, and the broker that makes them.
fn start_broker(
    gateway: &std::sync::Arc<dyn super::spec::Gateway>,
) -> std::io::Result<(Box<dyn super::spec::Attached>, Broker)> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let admission = Admission::new();
    let attached = gateway.attach(listener, Some(admission.clone()))?;
    let (ip, port) = super::spec::PROXY_ADDR;
    let (log, judge) = (gateway.clone(), gateway.clone());
    Ok((
        attached,
        Broker {
            published: std::net::SocketAddr::from((ip, port)),
            listener: addr,
            admission,
            carries: Box::new(move |a| judge.carries_direct(a)),
            refused: Box::new(move |a| log.refused_direct(a)),
        },
    ))
}

/// The child read a refusal from the caller's gate: the reason, from the
/// gate itself.
fn refused_by_gate(spec: &Spec) -> JailError {
    let message = match spec.gate.as_ref().map(|g| g.pass()) {
        Some(Err(message)) => message,
        _ => "the call's gate did not open".into(),
    };
    JailError::Gate { message }
}

/// Failures that mean "this kernel or this user cannot have namespaces".
fn step_is_namespace(step: Step, errno: i32) -> bool {
    match step {
        Step::Parent => matches!(
            errno,
            libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS
        ),
        // A source that is no longer the object resolved for it was
        // replaced by someone racing the call: never a reason to fall back.
        Step::Mount => errno != libc::ESTALE,
        Step::Namespaces | Step::IdMap => true,
        _ => false,
    }
}

/// Clones the child with `flags` and waits until it has exec'd. On failure
/// returns the step and errno (clone itself failing is reported as
/// `Step::Parent`).
fn launch(p: &mut Prepared, flags: libc::c_ulong) -> Result<OwnedFd, (Step, i32)> {
    let (report_r, report_w) = pipe().map_err(|_| (Step::Parent, libc::EMFILE))?;
    p.report = report_w.as_raw_fd();
    p.report_read_end = report_r.as_raw_fd();
    let clone_failed = |e: std::io::Error| {
        let step = if flags == 0 {
            Step::Parent
        } else {
            Step::Namespaces
        };
        (step, e.raw_os_error().unwrap_or(libc::EINVAL))
    };
    let pidfd = if p.reaper {
        // The reaper never execs (it waits for the tool): a fork-style
        // clone, so that the supervisor is not suspended for the call.
        // SAFETY: the child branch calls only `child_main`, which performs
        // async-signal-safe system calls on prepared data and never returns.
        match unsafe { sys::clone_process(flags) }.map_err(clone_failed)? {
            Forked::Child => super::child::main(p),
            Forked::Parent { pidfd, .. } => pidfd,
        }
    } else {
        // SAFETY: `child_main` only makes async-signal-safe system calls on
        // the prepared data, allocates nothing, writes no memory of the
        // supervisor's, and ends in `execve` or `_exit`.
        unsafe { sys::clone_vfork(flags, &mut || super::child::main(p)) }.map_err(clone_failed)?
    };
    drop(report_w);
    let mut report_file = std::fs::File::from(report_r);
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        match report_file.read(&mut msg[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if got == 0 {
        return Ok(pidfd);
    }
    let _ = sys::pidfd_wait(pidfd.as_raw_fd());
    let step = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let errno = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    Err((Step::from_u32(step).unwrap_or(Step::Exec), errno))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jail::child::{below_hard, HOME, OLD_ROOT, OLD_ROOT_FDS, OLD_ROOT_NAME, STAGE};
    use crate::jail::tree::{self, Op};

    #[test]
    fn a_lower_hard_limit_binds_instead_of_failing() {
        assert_eq!(below_hard(4096, 1024, libc::EPERM), Some(1024));
        // Never looser than asked, and other failures stand.
        assert_eq!(below_hard(4096, 8192, libc::EPERM), None);
        assert_eq!(below_hard(4096, 1024, libc::EINVAL), None);
    }

    #[test]
    fn set_up_errors_name_the_step_errno_cause_and_fix() {
        let e = JailError::child_failed(Step::Namespaces, libc::ENOSPC, Path::new("/bin/true"));
        let m = e.to_string();
        assert!(e.is_unavailable(), "{m}");
        for want in [
            "creating the jail's namespaces",
            "ENOSPC",
            "user.max_user_namespaces",
            "run as root",
            "namespace-free",
        ] {
            assert!(m.contains(want), "{want:?} missing: {m}");
        }
        let m =
            JailError::child_failed(Step::Cgroup, libc::EACCES, Path::new("/bin/true")).to_string();
        assert!(m.contains("joining the call's cgroups (EACCES"), "{m}");
        assert!(m.contains("delegate"), "{m}");
        let m =
            JailError::child_failed(Step::Reaper, libc::ENOENT, Path::new("/bin/true")).to_string();
        assert!(m.contains("subreaper") && m.contains("ENOENT"), "{m}");
    }

    #[test]
    fn host_homes_of_dead_supervisors_are_swept_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        // A pid that no process has now.
        let dead = (100_000..4_000_000u32)
            .rev()
            .find(|p| !Path::new(&format!("/proc/{p}")).exists())
            .unwrap();
        let stale = t.path().join(format!("{HOST_HOME_PREFIX}{dead}-abc"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("f"), "x").unwrap();
        let live = t.path().join(format!("{HOST_HOME_PREFIX}1-abc"));
        std::fs::create_dir(&live).unwrap();
        let ours = t
            .path()
            .join(format!("{HOST_HOME_PREFIX}{}-abc", std::process::id()));
        std::fs::create_dir(&ours).unwrap();
        let old_style = t.path().join(format!("{HOST_HOME_PREFIX}Xy12ab"));
        std::fs::create_dir(&old_style).unwrap();
        // A link named like a stale home is never followed.
        let target = t.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let link = t.path().join(format!("{HOST_HOME_PREFIX}{dead}-lnk"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        sweep_host_homes(t.path());
        assert!(!stale.exists(), "the dead supervisor's home was swept");
        for kept in [&live, &ours, &old_style, &target.join("keep")] {
            assert!(kept.exists(), "{kept:?} was kept");
        }
        assert!(link.symlink_metadata().is_ok(), "the link itself stays");
    }

    #[test]
    fn the_jail_home_is_a_bounded_tmpfs_holding_the_spec_files() {
        let ops = tree::home_ops(64 << 20, &[("ca.pem", b"PEM")]).unwrap();
        assert_eq!(ops[0], Op::Mkdir(HOME.into()));
        let Op::Tmpfs { at, options } = &ops[1] else {
            panic!("{ops:?}")
        };
        assert_eq!(at.as_c_str(), HOME);
        let o = options.to_str().unwrap();
        assert!(
            o.contains("mode=0700")
                && o.contains(&format!("size={}", 64 << 20))
                && !o.contains("nr_inodes"),
            "{o}"
        );
        assert_eq!(
            ops[2],
            Op::File {
                path: c"/.glovebox-home/ca.pem".into(),
                contents: b"PEM".to_vec()
            }
        );
        for bad in ["", "a/b", ".", ".."] {
            assert!(tree::home_ops(1 << 20, &[(bad, b"")]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn child_constants_match_the_tree() {
        assert_eq!(OLD_ROOT.to_str().unwrap(), tree::OLD_ROOT);
        assert_eq!(STAGE.to_str().unwrap(), tree::STAGE);
        assert_eq!(HOME.to_str().unwrap(), tree::HOME);
        assert_eq!(
            OLD_ROOT_FDS.to_str().unwrap(),
            format!("{}/proc/self/fd/", tree::OLD_ROOT)
        );
        assert_eq!(
            format!("/{}", OLD_ROOT_NAME.to_str().unwrap()),
            tree::OLD_ROOT
        );
    }
}
