//! What this kernel offers, probed without side effects. The cheap facts
//! (`Kernel`) are read once per process and decide how a jail is built;
//! `glovebox doctor` adds a real jailed run to show what is enforced.

use std::sync::OnceLock;

use super::sys;

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
    /// Unprivileged user namespaces are allowed (read from sysctls; the
    /// real test is creating one).
    pub user_ns: bool,
    /// PID namespaces exist.
    pub pid_ns: bool,
    /// A fresh `/proc` can be mounted in a new mount namespace.
    pub mount_proc: bool,
    /// IPC namespaces exist.
    pub ipc_ns: bool,
    /// Network namespaces exist.
    pub net_ns: bool,
    /// Kernel release.
    pub release: String,
}

/// The facts, read once per process.
pub fn kernel() -> &'static Kernel {
    static CELL: OnceLock<Kernel> = OnceLock::new();
    CELL.get_or_init(read)
}

fn exists(p: &str) -> bool {
    std::path::Path::new(p).exists()
}

fn read_num(p: &str) -> Option<i64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn read() -> Kernel {
    let (euid, egid) = sys::ids();
    // PR_GET_SECCOMP answers 0 when seccomp is built in and we are not yet
    // filtered (a filtered process may still stack filters: 2).
    let seccomp = sys::seccomp_mode().is_some() && exists("/proc/sys/kernel/seccomp/actions_avail");
    let user_ns = read_num("/proc/sys/user/max_user_namespaces").unwrap_or(0) > 0
        && read_num("/proc/sys/kernel/unprivileged_userns_clone").unwrap_or(1) != 0;
    Kernel {
        landlock_abi: sys::landlock_abi(),
        seccomp,
        euid,
        egid,
        user_ns,
        pid_ns: exists("/proc/self/ns/pid"),
        mount_proc: exists("/proc/self/ns/mnt"),
        ipc_ns: exists("/proc/self/ns/ipc"),
        net_ns: exists("/proc/self/ns/net"),
        release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}
