//! Facts about the host that users ask `doctor` about, beyond what the
//! jail's probe needs: the runtime glovebox runs in (a container, gVisor,
//! a Kata VM), the switches that restrict user namespaces, whether the
//! kernel still allows `TIOCSTI`, and Landlock's errata. Read from `/proc`
//! and `/sys` (nothing is changed); the interpretation is pure and tested.

use serde::Serialize;

/// What `doctor` reports besides the probe's facts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostFacts {
    /// The runtime: "gvisor", "kata", "container", or "host".
    pub runtime: &'static str,
    /// Why it was taken for that runtime.
    pub runtime_evidence: String,
    /// The switches that limit unprivileged user namespaces, as
    /// "name=value" for each one this kernel has.
    pub userns_switches: Vec<String>,
    /// `dev.tty.legacy_tiocsti` (Linux 6.2): `Some(true)` when the kernel
    /// still lets any process push input into its terminal.
    pub legacy_tiocsti: Option<bool>,
    /// Landlock's errata bits (`LANDLOCK_CREATE_RULESET_ERRATA`, Linux
    /// 6.15), when the kernel reports them.
    pub landlock_errata: Option<u32>,
}

/// The fixed `/proc/version` of gVisor's kernel.
const GVISOR_VERSION: &str = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016";

/// Which runtime the files say this is (pure): `version` is
/// `/proc/version`, `cmdline` `/proc/cmdline`, `marker` the container
/// marker file found (`/.dockerenv`, `/run/.containerenv`), if any.
pub fn runtime(version: &str, cmdline: &str, marker: Option<&str>) -> (&'static str, String) {
    if version.trim() == GVISOR_VERSION || version.contains("gVisor") {
        return ("gvisor", "/proc/version is gVisor's".into());
    }
    if cmdline.contains("agent.") && cmdline.contains("kata") || cmdline.contains("kata_") {
        return ("kata", "the kernel command line names kata's agent".into());
    }
    if let Some(m) = marker {
        return ("container", format!("{m} exists"));
    }
    ("host", "no container marker".into())
}

/// Reads the facts of this host.
pub fn read() -> HostFacts {
    let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let marker = ["/.dockerenv", "/run/.containerenv"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let (runtime, runtime_evidence) =
        runtime(&file("/proc/version"), &file("/proc/cmdline"), marker);
    let userns_switches = [
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ]
    .into_iter()
    .filter_map(|p| {
        let v = std::fs::read_to_string(p).ok()?;
        let name = p.trim_start_matches("/proc/sys/").replace('/', ".");
        Some(format!("{name}={}", v.trim()))
    })
    .collect();
    let legacy_tiocsti = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .ok()
        .map(|v| v.trim() == "1");
    HostFacts {
        runtime,
        runtime_evidence,
        userns_switches,
        legacy_tiocsti,
        landlock_errata: super::sys::landlock_errata(),
    }
}

/// What the user-namespace switches mean for an unprivileged glovebox
/// (pure): `None` when none of them forbids it.
pub fn userns_restriction(switches: &[String]) -> Option<String> {
    let value = |name: &str| {
        switches
            .iter()
            .find_map(|s| s.strip_prefix(name)?.strip_prefix('='))
    };
    if value("user.max_user_namespaces") == Some("0") {
        return Some("user.max_user_namespaces is 0: no user namespace can be made".into());
    }
    if value("kernel.unprivileged_userns_clone") == Some("0") {
        return Some(
            "kernel.unprivileged_userns_clone is 0: only root makes user namespaces".into(),
        );
    }
    if value("kernel.apparmor_restrict_unprivileged_userns") == Some("1") {
        return Some("kernel.apparmor_restrict_unprivileged_userns is 1: AppArmor denies unprivileged user namespaces to programs without a profile allowing them (Ubuntu 24.04)".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_told_apart() {
        assert_eq!(runtime(GVISOR_VERSION, "", None).0, "gvisor");
        assert_eq!(
            runtime(
                "Linux version 6.1.0",
                "console=ttyS0 agent.log=debug kata",
                None
            )
            .0,
            "kata"
        );
        assert_eq!(
            runtime("Linux version 6.1.0", "quiet", Some("/.dockerenv")).0,
            "container"
        );
        assert_eq!(runtime("Linux version 6.1.0", "quiet", None).0, "host");
    }

    #[test]
    fn the_switch_that_forbids_user_namespaces_is_named() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            userns_restriction(&s(&["user.max_user_namespaces=15000"])),
            None
        );
        assert!(userns_restriction(&s(&["user.max_user_namespaces=0"]))
            .is_some_and(|m| m.contains("max_user_namespaces")));
        assert!(userns_restriction(&s(&[
            "user.max_user_namespaces=15000",
            "kernel.apparmor_restrict_unprivileged_userns=1"
        ]))
        .is_some_and(|m| m.contains("AppArmor")));
        assert!(
            userns_restriction(&s(&["kernel.unprivileged_userns_clone=0"]))
                .is_some_and(|m| m.contains("only root"))
        );
    }
}
