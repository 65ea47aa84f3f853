//! `glovebox doctor`: which kernel features this machine offers and which
//! security invariants are therefore enforced, found by running a real
//! jailed process rather than by reading version numbers alone.

use serde::Serialize;

use super::cgroup;
use super::probe::{self, Kernel, Mode};
use super::spec::{Enforcement, MemoryLimitBy, MetadataBy, PidsLimitBy, Spec};

/// One security invariant and whether it holds here.
#[derive(Debug, Clone, Serialize)]
pub struct Invariant {
    /// Short name.
    pub name: &'static str,
    /// Enforced on this machine.
    pub enforced: bool,
    /// By what, or what is missing.
    pub how: String,
}

/// The doctor's findings.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Kernel facts.
    pub kernel: Kernel,
    /// Memory cgroup in use ("cgroup-v1", "cgroup-v2" or "none").
    pub cgroup_memory: &'static str,
    /// Pids cgroup in use.
    pub cgroup_pids: &'static str,
    /// Joining a call's cgroups is cheap (v1 thread moves, or a v2
    /// hierarchy mounted with `favordynmods`).
    pub cgroup_fast_attach: bool,
    /// What a jailed `true` actually got, or why it could not run.
    pub enforcement: Result<Enforcement, String>,
    /// Each invariant of DESIGN.md.
    pub invariants: Vec<Invariant>,
    /// The runtime, user-namespace switches, `legacy_tiocsti`, Landlock
    /// errata.
    pub facts: super::facts::HostFacts,
}

impl Report {
    /// True when every invariant is enforced.
    pub fn all_enforced(&self) -> bool {
        self.invariants.iter().all(|i| i.enforced)
    }
}

fn label(c: &Option<cgroup::Controller>) -> &'static str {
    c.as_ref().map_or("none", |c| c.version.label())
}

/// Whether a call's network namespace gets a TUN device (transparent
/// egress for clients that ignore the proxy variables), and if not why.
fn transparent_egress() -> String {
    match super::sys::tun_openable() {
        Ok(()) => "transparent egress: a tun device per call, raw tcp clients reach allowed hosts by name (fake-address dns, the same decision as the proxy)".into(),
        Err(e) => format!(
            "no transparent egress (/dev/net/tun: {}): only clients that use the proxy variables reach the network; for raw tcp clients {}",
            super::sys::errno_name(e),
            if e == libc::ENOENT {
                "give the container the device (`--device /dev/net/tun`)"
            } else {
                "let this user open it (mode 0666, as most distributions ship it)"
            }
        ),
    }
}

/// Examines this machine.
pub fn examine() -> Report {
    let mut kernel = probe::kernel().clone();
    kernel.net_ns = probe::net_ns();
    let avail = cgroup::available();
    let mut spec = Spec::new(["true"]);
    spec.limits.wall = std::time::Duration::from_secs(10);
    let enforcement = super::run(&spec)
        .map(|r| r.enforcement)
        .map_err(|e| e.to_string());
    let e = enforcement.clone().unwrap_or_default();
    let ok = enforcement.is_ok();
    let inv = |name, enforced: bool, how: String| Invariant {
        name,
        enforced: ok && enforced,
        how,
    };
    let free = e.mode == Mode::NamespaceFree.reported();
    let invariants = vec![
        inv(
            "deny-by-default filesystem",
            e.mount_tree || e.landlock_abi >= super::fs::MIN_ABI,
            if e.mount_tree && e.landlock_abi > 0 {
                format!(
                    "the jail's own root (ungranted paths do not exist) + landlock abi {} as a second layer",
                    e.landlock_abi
                )
            } else if e.mount_tree {
                format!(
                    "the jail's own root (mount namespace): ungranted paths do not exist (landlock abi {}: no second layer — {}; files written in a write grant can also be executed)",
                    kernel.landlock_abi,
                    probe::landlock_absence(&kernel).unwrap_or_else(|| "abi 2 needed".into())
                )
            } else {
                format!(
                    "landlock abi {}: ungranted paths cannot be read, listed or executed (stat still sees they exist: no mount namespace)",
                    kernel.landlock_abi
                )
            },
        ),
        inv(
            "read-only outside fs.write",
            e.metadata_guard != MetadataBy::Nothing,
            match e.metadata_guard {
                MetadataBy::Tree => "the jail's own root (mount namespace): ungranted paths do not exist, read-only binds refuse chmod/chown/utimes/xattrs (EROFS) whatever the uid".into(),
                MetadataBy::Seccomp => "no mount namespace: chmod/chown/utimes/xattrs go to the supervisor (seccomp user notification), which performs them only inside write grants and outside protected paths; inotify/fanotify, inode flags (chattr, file_setattr) refused".into(),
                MetadataBy::Nothing => "nothing keeps metadata calls off files the jail may not change".into(),
            },
        ),
        inv(
            "tools cannot rewrite tools",
            e.mount_tree || free,
            if e.mount_tree {
                "protected paths (.glee/, tools.json, .git/, what tools run) bound read-only inside write grants; also those of projects and repositories nested below the grants; names a call could plant invisible while it runs, removed and checked gone after it (else the project is refused until `glovebox untaint`)".into()
            } else {
                "no mount namespace: landlock write rules split around the protected paths (.glee/, tools.json, .git/, what tools run), whose directories stay read-only; metadata calls on them refused by the supervisor".into()
            },
        ),
        inv(
            "no network when network is false",
            e.seccomp,
            format!(
                "seccomp socket filter{}{}",
                if e.landlock_abi >= 4 { " + landlock tcp" } else { "" },
                if e.landlock_abi >= 6 { " + abstract unix scope" } else { "" }
            ),
        ),
        inv(
            "network: true only through glovebox's egress proxy",
            // Without network namespaces the namespace-free jail's connect
            // broker holds it (seccomp user notification: the metadata
            // supervisor's mechanism, which that jail needs anyway).
            kernel.net_ns || (free && e.seccomp),
            if kernel.net_ns {
                format!(
                    "own network namespace per call (loopback only) + the supervisor's proxy behind the ssrf guard; {}",
                    transparent_egress()
                )
            } else if free && e.seccomp {
                format!(
                    "connect broker: each connect() made by the supervisor on the tool's socket (seccomp user notification, pidfd_getfd), only to the call's own proxy, which serves only those connections; only tcp sockets, no listen, no tcp fast open{}",
                    if e.landlock_abi >= 4 { "; landlock leaves the tool no tcp connect/bind of its own" } else { "" }
                )
            } else {
                "no network namespaces and no connect broker here: network: true is refused unless sandbox.direct_network".to_string()
            },
        ),
        inv(
            "no reach into other processes",
            e.seccomp && ((e.pid_namespace && e.private_proc) || (free && e.landlock_abi >= 1)),
            if e.pid_namespace && e.landlock_abi > 0 {
                "pid namespace + private /proc + seccomp (ptrace, process_vm) + landlock ptrace and signal scoping".into()
            } else if e.pid_namespace {
                "pid namespace (no outsider has a pid to name) + private /proc + seccomp (ptrace, process_vm)".into()
            } else {
                "no pid namespace: landlock keeps /proc closed and scopes signals and ptrace to the jail; seccomp (ptrace, process_vm)".into()
            },
        ),
        inv(
            "empty environment",
            true,
            "built by glovebox: PATH, HOME, TMPDIR, LANG, TZ plus declared variables".into(),
        ),
        inv(
            "a call ends whole",
            e.pid_namespace || e.subreaper,
            if e.pid_namespace {
                "pid namespace: the tree dies with its first process; PDEATHSIG ties it to the supervisor".into()
            } else {
                "a subreaper inherits every orphan and kills all descendants when the tool ends, times out or the supervisor dies".into()
            },
        ),
        inv(
            "bounded resources",
            !matches!(e.pids_limit, PidsLimitBy::Unset | PidsLimitBy::None),
            format!(
                "memory: {}{}, processes: {}, wall time, output and file size",
                e.memory_limit,
                if matches!(e.memory_limit, MemoryLimitBy::RlimitData) {
                    " (each process's private memory only: shared memory, memfd and the \
                     stack are not bounded without a memory cgroup; see SECURITY.md)"
                } else {
                    ""
                },
                e.pids_limit
            ),
        ),
        inv(
            "no controlling terminal",
            e.seccomp,
            "setsid, stdin never a terminal, seccomp denies TIOCSTI and TIOCLINUX".into(),
        ),
        inv(
            "no capabilities",
            e.capabilities_dropped || kernel.euid != 0,
            if kernel.euid == 0 {
                "all capabilities dropped, bounding set emptied, no_new_privs".into()
            } else {
                "unprivileged supervisor, no_new_privs".into()
            },
        ),
    ];
    Report {
        kernel,
        cgroup_memory: label(&avail.memory),
        cgroup_pids: label(&avail.pids),
        cgroup_fast_attach: cgroup::fast_attach(),
        enforcement,
        invariants,
        facts: super::facts::read(),
    }
}
