//! What this kernel and this process can really do, found once per process
//! by trying it (creating namespaces in a child that exits at once) rather
//! than by reading sysctls: a container, a seccomp profile or an AppArmor
//! rule can forbid what the sysctls allow. The facts ([`Kernel`]) decide
//! the jail's [`Mode`]; `glovebox doctor` shows them and adds a real
//! jailed run.
//!
//! Trying costs two clones into new namespaces (about a millisecond),
//! which a one-shot CLI call would pay every time. A call therefore plans
//! with [`assumed`] facts until something needs the real ones: the facts
//! that cost no process (Landlock ABI, seccomp, ids) are read, namespaces
//! are assumed creatable, and the call's own clone is the test (see
//! [`super::spawn::run`]: when it fails making them, [`kernel`] runs and
//! the call is planned again). No fact is carried across processes.

use std::sync::OnceLock;

use super::sys;

/// The strongest jail this process can build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// PID, mount and IPC namespaces (plus a user namespace when not
    /// root): the constructed mount tree, a private `/proc`, the call
    /// ends with its PID namespace.
    Namespaces,
    /// No namespaces can be created here (a container, a runner that
    /// forbids unprivileged user namespaces): Landlock (deny by default,
    /// signal and abstract-socket scoping, ABI 6 or later), seccomp (no
    /// sockets, the metadata family decided by the supervisor), a subreaper that kills
    /// every descendant, rlimits or cgroups.
    NamespaceFree,
    /// Neither: only degraded runs are possible.
    None,
}

impl Mode {
    /// The name shown by `doctor` and on results.
    pub fn label(self) -> &'static str {
        self.reported().as_str()
    }

    /// The mode as a result reports it.
    pub fn reported(self) -> super::spec::JailMode {
        use super::spec::JailMode;
        match self {
            Mode::Namespaces => JailMode::Namespaces,
            Mode::NamespaceFree => JailMode::NamespaceFree,
            Mode::None => JailMode::None,
        }
    }
}

/// The Landlock ABI a namespace-free jail needs (signal and abstract unix
/// socket scoping keep it away from other processes).
pub const NAMESPACE_FREE_ABI: i32 = 6;

/// Facts about the running kernel and process.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Kernel {
    /// Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Seccomp filters can be installed.
    pub seccomp: bool,
    /// Effective uid of the supervisor.
    pub euid: u32,
    /// Effective gid of the supervisor.
    pub egid: u32,
    /// This process could create a user namespace (tried).
    pub user_ns: bool,
    /// Why creating a user namespace failed, when it did.
    pub user_ns_error: Option<String>,
    /// PID namespaces can be created (tried, with a user namespace when
    /// not root).
    pub pid_ns: bool,
    /// Mount namespaces can be created (tried with the PID namespace).
    pub mount_proc: bool,
    /// IPC namespaces can be created (tried with the PID namespace).
    pub ipc_ns: bool,
    /// Network namespaces can be created (tried only when first needed,
    /// see [`net_ns`]: creating one costs more than the others; `doctor`
    /// fills it in).
    pub net_ns: bool,
    /// Why creating the jail's namespaces failed, when it did.
    pub namespaces_error: Option<String>,
    /// The jail this process builds.
    pub mode: Mode,
    /// Kernel release.
    pub release: String,
}

impl Kernel {
    /// These facts once the jail's namespaces failed at a call's launch
    /// (`why`) although the probe made them: what a probe that found none
    /// would say — the namespace-free jail where Landlock, seccomp and a
    /// subreaper (`subreaper`) hold it, else none.
    pub fn without_namespaces(&self, why: String, subreaper: bool) -> Kernel {
        let mode = if self.landlock_abi >= NAMESPACE_FREE_ABI && self.seccomp && subreaper {
            Mode::NamespaceFree
        } else {
            Mode::None
        };
        Kernel {
            pid_ns: false,
            mount_proc: false,
            ipc_ns: false,
            net_ns: false,
            namespaces_error: Some(why),
            mode,
            ..self.clone()
        }
    }
}

static PROBED: OnceLock<Kernel> = OnceLock::new();

/// The facts, found once per process (namespaces tried).
pub fn kernel() -> &'static Kernel {
    PROBED.get_or_init(read)
}

/// The facts, when this process has already probed ([`kernel`]).
pub fn known() -> Option<&'static Kernel> {
    PROBED.get()
}

/// The facts found without creating a process: Landlock ABI, seccomp,
/// ids, release; namespaces assumed creatable ([`Mode::Namespaces`]) until
/// a clone that needs them fails. Only for planning a call whose own
/// clone tests the assumption; `doctor` and `explain` use [`kernel`].
pub fn assumed() -> &'static Kernel {
    static CELL: OnceLock<Kernel> = OnceLock::new();
    CELL.get_or_init(|| {
        let mut k = cheap();
        k.user_ns = k.euid != 0;
        k.pid_ns = true;
        k.mount_proc = true;
        k.ipc_ns = true;
        k.mode = Mode::Namespaces;
        k
    })
}

/// Whether a subreaper can find the processes it inherited
/// (`/proc/thread-self/children`, `CONFIG_PROC_CHILDREN`).
pub fn subreaper_available() -> bool {
    exists("/proc/thread-self/children")
}

/// The namespaces of a jail (a user namespace too when not root).
fn jail_flags(root: bool) -> libc::c_ulong {
    let mut flags =
        (libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS)
            as libc::c_ulong;
    if !root {
        flags |= libc::CLONE_NEWUSER as libc::c_ulong;
    }
    flags
}

/// Whether a jail can also have its own network namespace here (tried
/// once per process, on first use).
pub fn net_ns() -> bool {
    static CELL: OnceLock<bool> = OnceLock::new();
    *CELL.get_or_init(|| {
        // Fails too where the jail's other namespaces cannot be made.
        let root = sys::ids().0 == 0;
        sys::probe_clone(jail_flags(root) | libc::CLONE_NEWNET as libc::c_ulong).is_ok()
    })
}

/// Whether a seccomp notification listener can be made here (tried once
/// per process, on first use: gVisor and some container profiles refuse
/// it).
pub fn seccomp_listener() -> bool {
    static CELL: OnceLock<bool> = OnceLock::new();
    *CELL.get_or_init(sys::probe_seccomp_listener)
}

/// Why this process has no Landlock (`None` when it has one): told apart
/// by the active security modules (`/sys/kernel/security/lsm`) and the
/// kernel release, so `doctor` says what to change.
pub fn landlock_absence(k: &Kernel) -> Option<String> {
    if k.landlock_abi > 0 {
        return None;
    }
    let lsm = std::fs::read_to_string("/sys/kernel/security/lsm").ok();
    let release: Vec<u32> = k
        .release
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .filter_map(|n| n.parse().ok())
        .collect();
    if release.len() == 2 && release.as_slice() < [5, 13].as_slice() {
        return Some("this kernel predates landlock (5.13)".into());
    }
    Some(match lsm.as_deref().map(str::trim) {
        Some(list) if !list.split(',').any(|m| m == "landlock") => format!(
            "landlock is not in the active lsm list ({list}): add it to the kernel's lsm= boot parameter (or CONFIG_LSM)"
        ),
        Some(_) => "landlock is active in the kernel but its system calls are refused here (a seccomp profile: gVisor, a container runtime's older profile)".into(),
        None => "the kernel has no landlock, or it is not in the lsm= boot parameter (mount securityfs to see /sys/kernel/security/lsm)".into(),
    })
}

fn exists(p: &str) -> bool {
    std::path::Path::new(p).exists()
}

fn read_num(p: &str) -> Option<i64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Why creating a namespace failed, and what to do about it.
pub fn namespace_failure(errno: i32, user: bool) -> String {
    let name = sys::errno_name(errno);
    let cause = match errno {
        libc::ENOSPC | libc::EUSERS if user => {
            let max = read_num("/proc/sys/user/max_user_namespaces");
            match max {
                Some(0) => "user.max_user_namespaces is 0 in this namespace (a container or a sandbox that disables nesting)".to_string(),
                _ => "the user namespace limit is reached, or this process runs in a sandbox that disables nesting (bwrap --disable-userns)".to_string(),
            }
        }
        libc::EPERM if user => {
            if read_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, e.g. Ubuntu 24.04 and GitHub runners)".to_string()
            } else if read_num("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
                "kernel.unprivileged_userns_clone is 0".to_string()
            } else {
                "a seccomp profile or security module forbids it (Docker's default profile, Kubernetes pods)".to_string()
            }
        }
        libc::EPERM => {
            "this process lacks CAP_SYS_ADMIN (a container without it, or a seccomp profile)"
                .to_string()
        }
        libc::EINVAL => "the kernel lacks these namespaces".to_string(),
        _ => "the kernel refused".to_string(),
    };
    format!("{name}: {cause}")
}

/// The facts that cost no process; namespaces not tried (none).
fn cheap() -> Kernel {
    let (euid, egid) = sys::ids();
    // PR_GET_SECCOMP answers 0 when seccomp is built in and we are not yet
    // filtered (a filtered process may still stack filters: 2).
    let seccomp = sys::seccomp_mode().is_some() && exists("/proc/sys/kernel/seccomp/actions_avail");
    Kernel {
        landlock_abi: sys::landlock_abi(),
        seccomp,
        euid,
        egid,
        user_ns: false,
        user_ns_error: None,
        pid_ns: false,
        mount_proc: false,
        ipc_ns: false,
        net_ns: false,
        namespaces_error: None,
        mode: Mode::None,
        release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

fn read() -> Kernel {
    let Kernel {
        landlock_abi,
        seccomp,
        euid,
        egid,
        release,
        ..
    } = cheap();
    let root = euid == 0;
    let user = libc::CLONE_NEWUSER as libc::c_ulong;
    let user_try = sys::probe_clone(user);
    // The jail's namespaces, with a fresh /proc mounted in them: a
    // container that masks parts of the host's /proc (podman's and
    // Docker's defaults) lets the namespaces be made but refuses that
    // mount, and a jail without its own /proc has no tree either.
    let mut proc_refused = None;
    let ns_try = if !root && user_try.is_err() {
        user_try
    } else {
        match sys::probe_clone_proc(jail_flags(root)) {
            Ok(()) => Ok(()),
            Err(errno) => {
                let made = sys::probe_clone(jail_flags(root));
                if made.is_ok() {
                    proc_refused = Some(errno);
                }
                Err(errno)
            }
        }
    };
    let mode = if ns_try.is_ok() {
        Mode::Namespaces
    } else if landlock_abi >= NAMESPACE_FREE_ABI && seccomp && subreaper_available() {
        Mode::NamespaceFree
    } else {
        Mode::None
    };
    let ns_ok = ns_try.is_ok();
    Kernel {
        landlock_abi,
        seccomp,
        euid,
        egid,
        user_ns: user_try.is_ok(),
        user_ns_error: user_try.err().map(|e| namespace_failure(e, true)),
        pid_ns: ns_ok || proc_refused.is_some(),
        mount_proc: ns_ok,
        ipc_ns: ns_ok || proc_refused.is_some(),
        net_ns: false,
        namespaces_error: match proc_refused {
            Some(errno) => Some(format!(
                "{}: the namespaces can be created but a fresh /proc cannot be mounted in them (a container masks parts of its /proc), so the jail has no tree of its own",
                sys::errno_name(errno)
            )),
            None => ns_try.err().map(|e| namespace_failure(e, !root)),
        },
        mode,
        release,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_errno_and_a_cause() {
        let m = namespace_failure(libc::ENOSPC, true);
        assert!(m.starts_with("ENOSPC: "), "{m}");
        let m = namespace_failure(libc::EPERM, false);
        assert!(m.contains("CAP_SYS_ADMIN"), "{m}");
    }

    #[test]
    fn assumed_facts_are_the_probed_ones_but_for_namespaces() {
        let (a, k) = (assumed(), kernel());
        assert_eq!(a.mode, Mode::Namespaces);
        assert_eq!(
            (a.landlock_abi, a.seccomp, a.euid, a.egid),
            (k.landlock_abi, k.seccomp, k.euid, k.egid)
        );
        assert_eq!(known().map(|k| k.mode), Some(k.mode));
    }

    #[test]
    fn landlock_absence_names_a_cause_only_without_landlock() {
        let mut k = cheap();
        k.landlock_abi = 1;
        assert_eq!(landlock_absence(&k), None);
        k.landlock_abi = 0;
        k.release = "5.10.0-32-amd64".into();
        let why = landlock_absence(&k).unwrap_or_default();
        assert!(why.contains("predates landlock"), "{why}");
        k.release = "6.12.117+deb13-amd64".into();
        let why = landlock_absence(&k).unwrap_or_default();
        assert!(
            why.contains("landlock") && !why.contains("predates"),
            "{why}"
        );
    }

    #[test]
    fn the_mode_follows_what_could_be_created() {
        let k = kernel();
        assert_eq!(k.mode == Mode::Namespaces, k.mount_proc);
        assert_eq!(k.namespaces_error.is_some(), !k.mount_proc);
        // Namespaces that cannot have their own /proc are not used.
        assert!(k.mount_proc <= k.pid_ns);
    }
}
