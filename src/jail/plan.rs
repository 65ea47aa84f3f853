//! What a call's jail enforces and by which mechanism, or why it is
//! refused: decided from the [`Spec`], the kernel's facts and the usable
//! cgroups before anything is created. Pure (no system call), so every
//! kernel and privilege combination is table-tested here;
//! [`super::spawn`] carries the [`Plan`] out.
//!
//! A restriction that cannot be enforced refuses the call
//! ([`JailError::Unavailable`], naming it), unless the spec opted into
//! degraded mode, where each gap is a warning on the result instead.

use super::cgroup::Version;
use super::fs as jfs;
use super::network::{self as net, NetPlan};
use super::probe::{self, Kernel, Mode};
use super::seccomp::Sockets;
use super::spec::{Enforcement, MemoryLimitBy, MetadataBy, PidsLimitBy, Spec};
use super::tree::{self, MetadataGuard};
use super::JailError;

/// What the plan needs to know about this machine besides the [`Kernel`].
#[derive(Debug, Clone, Copy)]
pub struct Host<'a> {
    /// What the kernel and this process can do.
    pub kernel: &'a Kernel,
    /// A jail may also have its own network namespace: probed for an
    /// empty one (`Spec::netns`); for a call behind the egress proxy the
    /// launch itself finds out (see [`super::spawn::run`]).
    pub net_ns: bool,
    /// A subreaper can find what it inherited
    /// ([`probe::subreaper_available`]).
    pub subreaper: bool,
    /// A seccomp notification listener can be made
    /// ([`probe::seccomp_listener`]): asked only where it decides
    /// something (root without a pids cgroup), else `false`.
    pub notify: bool,
}

/// The cgroup controllers this process can use for a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cgroups {
    /// The memory controller, through this version.
    pub memory: Option<Version>,
    /// The pids controller, through this version.
    pub pids: Option<Version>,
}

impl Cgroups {
    /// What [`super::cgroup::available`] found.
    pub fn found() -> Cgroups {
        // Tests of the mechanisms used where no cgroup can be made (a
        // container's read-only cgroup file system) set this; it can only
        // take a mechanism away, never a refusal.
        if std::env::var_os("GLOVEBOX_NO_CGROUPS").is_some_and(|v| v == "1") {
            return Cgroups {
                memory: None,
                pids: None,
            };
        }
        let a = super::cgroup::available();
        Cgroups {
            memory: a.memory.as_ref().map(|c| c.version),
            pids: a.pids.as_ref().map(|c| c.version),
        }
    }
}

/// What the jail of one call is made of.
#[derive(Clone)]
pub struct Plan {
    /// Namespaces to clone into (`CLONE_NEW*`).
    pub flags: libc::c_ulong,
    /// Landlock with this ABI (`None`: degraded, no Landlock).
    pub landlock_abi: Option<i32>,
    /// Which mechanism keeps metadata calls off what the jail may not
    /// change (the tree is built only with [`MetadataGuard::Tree`]).
    pub guard: MetadataGuard,
    /// The seccomp filter's sockets (`None`: degraded, no seccomp).
    pub seccomp: Option<Sockets>,
    /// How the call reaches the network.
    pub net: NetPlan,
    /// Use the memory cgroup (else `RLIMIT_DATA`, in `rlimits`).
    pub memory_cgroup: bool,
    /// Use the pids cgroup (else `RLIMIT_NPROC`, in `rlimits`, or
    /// `count_forks`).
    pub pids_cgroup: bool,
    /// Root without a pids cgroup in the namespace-free jail: the
    /// supervisor counts the call's tasks ([`super::forks`]).
    pub count_forks: bool,
    /// Resource limits set in the child.
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// Drop every capability (a root supervisor).
    pub drop_caps: bool,
    /// Write the user namespace's id maps (an unprivileged supervisor).
    pub id_maps: bool,
    /// Mount a private `/proc` (PID + mount namespaces).
    pub private_proc: bool,
    /// No PID namespace: the first process is the call's subreaper.
    pub reaper: bool,
    /// What the result reports as enforced.
    pub enforcement: Enforcement,
    /// Gaps accepted in degraded mode, and notes.
    pub warnings: Vec<String>,
}

impl Plan {
    /// Whether `other` makes the same jail: every decision but the
    /// network's, which both must have off (a standby jail's,
    /// [`super::standby`], has no network).
    pub fn same_jail(&self, other: &Plan) -> bool {
        matches!((&self.net, &other.net), (NetPlan::Off, NetPlan::Off))
            && self.flags == other.flags
            && self.landlock_abi == other.landlock_abi
            && self.guard == other.guard
            && self.seccomp == other.seccomp
            && self.memory_cgroup == other.memory_cgroup
            && self.pids_cgroup == other.pids_cgroup
            && self.count_forks == other.count_forks
            && self.rlimits == other.rlimits
            && self.drop_caps == other.drop_caps
            && self.id_maps == other.id_maps
            && self.private_proc == other.private_proc
            && self.reaper == other.reaper
            && self.enforcement == other.enforcement
            && self.warnings == other.warnings
    }
}

/// Whether planning `spec` needs to know if network namespaces can be
/// made (trying costs a clone: asked only then).
pub fn wants_net_ns(spec: &Spec) -> bool {
    if spec.network {
        spec.gateway.is_some() && !spec.direct_network
    } else {
        spec.netns
    }
}

/// The spec's own mistakes, refused before anything is held or made
/// (and by [`plan`] itself): no command, or a home file whose name is
/// not a plain file name.
pub fn check_spec(spec: &Spec) -> Result<(), JailError> {
    if spec.argv.is_empty() {
        return Err(JailError::InvalidSpec {
            message: "no command given".into(),
        });
    }
    for f in &spec.home_files {
        let name = f.name.as_str();
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(JailError::InvalidSpec {
                message: format!("home file name {name:?} is not a plain file name"),
            });
        }
    }
    Ok(())
}

/// Whether the jail on `kernel` has its own root (a mount tree: mount and
/// PID namespaces, and a fresh `/proc` can be mounted). Asked before the
/// plan too, by the grants' split ([`jfs::split_held`]), which the plan
/// then reports.
pub fn mount_tree(kernel: &Kernel) -> bool {
    kernel.mode == Mode::Namespaces && kernel.pid_ns && kernel.mount_proc
}

/// Refuses a missing restriction, or records it in degraded mode.
struct Gaps<'a> {
    degraded: bool,
    warnings: &'a mut Vec<String>,
}

impl Gaps<'_> {
    fn require(&mut self, ok: bool, feature: &str) -> Result<(), JailError> {
        if ok {
            return Ok(());
        }
        if self.degraded {
            self.warnings.push(format!(
                "degraded: {feature} is not enforced on this machine"
            ));
            Ok(())
        } else {
            Err(JailError::Unavailable {
                feature: feature.to_string(),
            })
        }
    }
}

/// Decides the jail of `spec` on `host` with `cgroups`; `split` says
/// that, without a tree, the write grants were split around the protected
/// paths inside them ([`jfs::split_held`]). Refuses what cannot be
/// enforced unless `spec.degraded`.
pub fn plan(spec: &Spec, host: &Host, cgroups: &Cgroups, split: bool) -> Result<Plan, JailError> {
    check_spec(spec)?;
    let kernel = host.kernel;
    let mut warnings = Vec::new();
    let mut gaps = Gaps {
        degraded: spec.degraded,
        warnings: &mut warnings,
    };
    let mut e = Enforcement::default();
    let mut flags: libc::c_ulong = 0;

    // --- namespaces, or the namespace-free jail (see `probe::Mode`).
    let root = kernel.euid == 0;
    let mode = kernel.mode;
    let ns_usable = mode == Mode::Namespaces;
    let userns = ns_usable && !root;
    e.mode = mode.reported();
    if !ns_usable {
        gaps.require(
            mode == Mode::NamespaceFree,
            &format!(
                "process isolation: no namespaces can be created here ({}) and the namespace-free jail needs landlock abi {} and seccomp (found abi {}, seccomp {}); run on a kernel with landlock 6, as root, or where user namespaces are allowed",
                kernel.namespaces_error.as_deref().unwrap_or("unknown"),
                probe::NAMESPACE_FREE_ABI,
                kernel.landlock_abi,
                if kernel.seccomp { "yes" } else { "no" }
            ),
        )?;
    }
    if userns {
        flags |= libc::CLONE_NEWUSER as libc::c_ulong;
        e.user_namespace = true;
    }
    let pid_ns = ns_usable && kernel.pid_ns;
    if pid_ns {
        flags |= libc::CLONE_NEWPID as libc::c_ulong;
        e.pid_namespace = true;
    }
    let private_proc = mount_tree(kernel);
    if private_proc {
        flags |= libc::CLONE_NEWNS as libc::c_ulong;
        e.private_proc = true;
    }
    // Without a PID namespace a subreaper ends the call whole; it finds
    // what it inherited in /proc/thread-self/children.
    if !pid_ns {
        gaps.require(
            host.subreaper,
            "a call ending whole (no pid namespace, and no /proc/thread-self/children for a subreaper: a kernel without CONFIG_PROC_CHILDREN)",
        )?;
    }
    let reaper = !pid_ns && host.subreaper;
    e.subreaper = reaper;

    // --- Landlock: the second layer under the tree (from ABI 2, whose
    // rename rules match the tree's; ABI 1 refuses every cross-directory
    // rename, which the tree allows), the only filesystem layer without
    // one (ABI 3 at least: truncate). With a tree and no usable Landlock
    // (gVisor, a kernel without it) the tree alone holds the view.
    let landlock_ok = if private_proc {
        kernel.landlock_abi >= jfs::TREE_MIN_ABI
    } else {
        gaps.require(
            kernel.landlock_abi >= jfs::MIN_ABI,
            &format!(
                "filesystem confinement without a mount namespace (landlock abi {} found, {} needed{})",
                kernel.landlock_abi,
                jfs::MIN_ABI,
                if kernel.landlock_abi == 0 {
                    "; the kernel has no landlock: check that `landlock` is in its lsm= list (cat /sys/kernel/security/lsm), or allow namespaces, whose mount tree holds the view instead"
                } else {
                    ""
                }
            ),
        )?;
        kernel.landlock_abi >= jfs::MIN_ABI
    };
    let landlock_abi = landlock_ok.then_some(kernel.landlock_abi);
    if landlock_ok {
        e.landlock_abi = kernel.landlock_abi;
    }

    // --- the filesystem view: the tree in the mount namespace, else
    // seccomp refuses the metadata family for every path.
    let guard = tree::metadata_guard(private_proc);
    match guard {
        MetadataGuard::Tree => e.mount_tree = true,
        MetadataGuard::Seccomp => {
            // The namespace-free jail's own mechanism (Landlock hides the
            // contents, the supervisor decides the metadata family);
            // elsewhere a missing tree is a gap.
            gaps.require(
                mode == Mode::NamespaceFree,
                "a constructed filesystem (mount namespace): ungranted paths stay visible to stat; metadata calls are decided by the supervisor instead (seccomp user notification)",
            )?;
            if split {
                gaps.warnings.push(
                    "no mount namespace: the write grants are split around the protected paths (.glee/, tools.json, .git/, tool files), so no entry can be created or removed directly in a directory that holds one (the project root); write below it (src/, out/…) or allow user namespaces".into(),
                );
            }
        }
    }

    // --- seccomp.
    gaps.require(kernel.seccomp, "system call filtering (seccomp)")?;
    e.seccomp = kernel.seccomp;
    e.metadata_guard = match guard {
        MetadataGuard::Tree => MetadataBy::Tree,
        MetadataGuard::Seccomp if kernel.seccomp => MetadataBy::Seccomp,
        MetadataGuard::Seccomp => MetadataBy::Nothing,
    };
    if ns_usable && kernel.ipc_ns {
        // Its own IPC objects, and its own host and domain names (a root
        // jail can never change the host's, whatever else the kernel
        // lacks; seccomp refuses sethostname too).
        flags |= (libc::CLONE_NEWIPC | libc::CLONE_NEWUTS) as libc::c_ulong;
        e.ipc_namespace = true;
        e.uts_namespace = true;
    }

    // --- network.
    let net_ns = ns_usable && host.net_ns;
    let brokered = mode == Mode::NamespaceFree && guard == MetadataGuard::Seccomp && kernel.seccomp;
    let net_plan = network(spec, mode, net_ns, brokered, &mut flags, &mut e, &mut gaps)?;
    let seccomp = kernel.seccomp.then(|| net::sockets(&net_plan));

    // --- limits: cgroups where possible, rlimits otherwise.
    let counted = countable(host, reaper || pid_ns, guard);
    let (rlimits, count_forks) = limits(spec, cgroups, root, counted, &mut e, &mut gaps)?;
    e.capabilities_dropped = root;

    Ok(Plan {
        flags,
        landlock_abi,
        guard,
        seccomp,
        memory_cgroup: cgroups.memory.is_some(),
        pids_cgroup: cgroups.pids.is_some(),
        count_forks,
        rlimits,
        drop_caps: root,
        id_maps: userns,
        private_proc,
        reaper,
        net: net_plan,
        enforcement: e,
        warnings,
    })
}

/// How the call reaches the network ([`net::plan`]), and the namespace
/// flags and enforcement that go with it.
fn network(
    spec: &Spec,
    mode: Mode,
    net_ns: bool,
    brokered: bool,
    flags: &mut libc::c_ulong,
    e: &mut Enforcement,
    gaps: &mut Gaps<'_>,
) -> Result<NetPlan, JailError> {
    let net_plan = net::plan(spec, net_ns, brokered)?;
    match &net_plan {
        NetPlan::Proxied(_) => {
            *flags |= libc::CLONE_NEWNET as libc::c_ulong;
            e.net_namespace = true;
            e.egress_proxy = true;
        }
        NetPlan::Brokered(_) => {
            e.egress_proxy = true;
            e.connect_broker = true;
        }
        NetPlan::Direct => gaps.warnings.push(
            "direct network: the tool uses the host's network without glovebox's egress proxy (explicitly configured)"
                .into(),
        ),
        NetPlan::Off => {}
    }
    if !spec.network && spec.netns && mode != Mode::NamespaceFree {
        gaps.require(net_ns, "network namespaces")?;
        if net_ns {
            *flags |= libc::CLONE_NEWNET as libc::c_ulong;
            e.net_namespace = true;
        }
    }
    Ok(net_plan)
}

/// Whether the supervisor can count the call's tasks: they all descend
/// from one process it knows (`one_root`: the subreaper, or the PID
/// namespace's first process, to which orphans go) and a notification
/// listener hands it their forks (the namespace-free jail's own, whose
/// guard is seccomp's, or one made for the count alone).
fn countable(host: &Host, one_root: bool, guard: MetadataGuard) -> bool {
    host.kernel.seccomp && one_root && (guard == MetadataGuard::Seccomp || host.notify)
}

/// The resource limits: cgroups where `cgroups` has them, rlimits
/// otherwise; for root without a pids cgroup, the supervisor's count
/// where the jail is `counted` (its tasks below one known process, and a
/// notification listener for their forks), else a gap. Returns the rlimits and whether
/// the forks are counted.
fn limits(
    spec: &Spec,
    cgroups: &Cgroups,
    root: bool,
    counted: bool,
    e: &mut Enforcement,
    gaps: &mut Gaps<'_>,
) -> Result<(Vec<(libc::__rlimit_resource_t, u64)>, bool), JailError> {
    let mut rlimits = vec![
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_FSIZE, spec.limits.file_size_bytes),
        (libc::RLIMIT_NOFILE, spec.limits.open_files),
    ];
    match cgroups.memory {
        Some(v) => e.memory_limit = v.memory(),
        None => {
            rlimits.push((libc::RLIMIT_DATA, spec.limits.memory_bytes));
            e.memory_limit = MemoryLimitBy::RlimitData;
        }
    }
    let mut count_forks = false;
    match cgroups.pids {
        Some(v) => e.pids_limit = v.pids(),
        None if !root => {
            // RLIMIT_NPROC binds every uid but root.
            rlimits.push((libc::RLIMIT_NPROC, spec.limits.pids));
            e.pids_limit = PidsLimitBy::RlimitNproc;
        }
        // Root without a pids cgroup (a container's, a kernel without
        // cgroups): the supervisor counts the call's tasks below its
        // reaper or PID namespace's first process (`super::forks`); a
        // refused fork is recorded, so the call fails as `resource_limit`.
        None if counted => {
            count_forks = true;
            e.pids_limit = PidsLimitBy::SeccompCount;
        }
        None => {
            gaps.require(
                false,
                "a process limit (no writable pids cgroup, and RLIMIT_NPROC does not bind root); run glovebox as a non-root user, give it a writable cgroup (a delegated cgroup v2 subtree), or opt into degraded mode (a container's own pids limit then bounds the call)",
            )?;
            e.pids_limit = PidsLimitBy::None;
        }
    }
    Ok((rlimits, count_forks))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::jail::spec::Gateway;
    use std::sync::Arc;

    #[derive(Debug)]
    struct NoGateway;
    impl Gateway for NoGateway {
        fn attach(
            &self,
            _: std::net::TcpListener,
            _: Option<std::sync::Arc<crate::jail::broker::Admission>>,
        ) -> std::io::Result<Box<dyn crate::jail::Attached>> {
            Err(std::io::Error::other("test gateway"))
        }
    }

    /// A kernel with `mode`, everything else present (a root or
    /// unprivileged supervisor).
    fn kernel(mode: Mode, root: bool) -> Kernel {
        let ns = mode == Mode::Namespaces;
        Kernel {
            landlock_abi: 7,
            seccomp: true,
            euid: if root { 0 } else { 1000 },
            egid: if root { 0 } else { 1000 },
            user_ns: ns,
            user_ns_error: None,
            pid_ns: ns,
            mount_proc: ns,
            ipc_ns: ns,
            net_ns: false,
            namespaces_error: (!ns).then(|| "EPERM: test".to_string()),
            mode,
            release: "test".into(),
        }
    }

    const V1: Cgroups = Cgroups {
        memory: Some(Version::V1),
        pids: Some(Version::V1),
    };
    const NONE: Cgroups = Cgroups {
        memory: None,
        pids: None,
    };

    fn spec() -> Spec {
        Spec::new(["/bin/true"])
    }

    fn host(k: &Kernel) -> Host<'_> {
        Host {
            kernel: k,
            net_ns: true,
            subreaper: true,
            notify: false,
        }
    }

    fn flag(p: &Plan, f: libc::c_int) -> bool {
        p.flags & f as libc::c_ulong != 0
    }

    fn refused(r: Result<Plan, JailError>) -> String {
        match r {
            Err(e @ JailError::Unavailable { .. }) => e.to_string(),
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("planned, expected a refusal"),
        }
    }

    #[test]
    fn each_kernel_and_privilege_gets_its_mechanisms() {
        // (mode, root, cgroups) -> (userns, pidns, tree, reaper, caps
        // dropped, memory label, pids label)
        type Want = (bool, bool, bool, bool, bool, &'static str, &'static str);
        let table: &[(Mode, bool, Cgroups, Want)] = &[
            (
                Mode::Namespaces,
                true,
                V1,
                (false, true, true, false, true, "cgroup-v1", "cgroup-v1"),
            ),
            (
                Mode::Namespaces,
                false,
                NONE,
                (
                    true,
                    true,
                    true,
                    false,
                    false,
                    "rlimit-data",
                    "rlimit-nproc",
                ),
            ),
            (
                Mode::NamespaceFree,
                false,
                NONE,
                (
                    false,
                    false,
                    false,
                    true,
                    false,
                    "rlimit-data",
                    "rlimit-nproc",
                ),
            ),
            (
                Mode::NamespaceFree,
                true,
                V1,
                (false, false, false, true, true, "cgroup-v1", "cgroup-v1"),
            ),
        ];
        for (mode, root, cg, want) in table {
            let k = kernel(*mode, *root);
            let p = plan(&spec(), &host(&k), cg, false).expect("planned");
            let e = &p.enforcement;
            let got = (
                flag(&p, libc::CLONE_NEWUSER),
                flag(&p, libc::CLONE_NEWPID),
                p.guard == MetadataGuard::Tree,
                p.reaper,
                p.drop_caps,
                e.memory_limit.as_str(),
                e.pids_limit.as_str(),
            );
            assert_eq!(&got, want, "{mode:?} root={root}");
            assert_eq!(e.user_namespace, got.0);
            assert_eq!(e.pid_namespace, got.1);
            assert_eq!(e.mount_tree, got.2);
            assert_eq!(p.id_maps, got.0);
            assert_eq!(e.mode.as_str(), mode.label());
            assert_eq!(p.seccomp, Some(Sockets::None));
            assert_eq!(e.landlock_abi, 7);
            assert_eq!(
                e.metadata_guard.as_str(),
                if got.2 { "tree" } else { "seccomp" },
                "{mode:?}"
            );
            assert!(p.warnings.is_empty(), "{:?}", p.warnings);
            assert!(!flag(&p, libc::CLONE_NEWNET), "no network: no netns");
            // rlimits only for what no cgroup covers.
            let has = |r| p.rlimits.iter().any(|(x, _)| *x == r);
            assert_eq!(has(libc::RLIMIT_DATA), cg.memory.is_none());
            assert_eq!(has(libc::RLIMIT_NPROC), cg.pids.is_none());
            assert!(has(libc::RLIMIT_CORE) && has(libc::RLIMIT_FSIZE) && has(libc::RLIMIT_NOFILE));
        }
    }

    #[test]
    fn missing_mechanisms_refuse_unless_degraded() {
        // Each row: a machine lacking something, the words the refusal
        // names.
        // Without a mount namespace, Landlock is the filesystem layer.
        let mut no_landlock = kernel(Mode::NamespaceFree, false);
        no_landlock.landlock_abi = 0;
        let mut no_seccomp = kernel(Mode::Namespaces, true);
        no_seccomp.seccomp = false;
        let none = kernel(Mode::None, false);
        let rows: Vec<(&str, Kernel, Cgroups, bool, &str)> = vec![
            ("no landlock", no_landlock, V1, true, "landlock abi 0 found"),
            ("no seccomp", no_seccomp, V1, true, "seccomp"),
            (
                "no namespaces, no ns-free",
                none,
                NONE,
                true,
                "process isolation",
            ),
            (
                "root without a pids cgroup",
                kernel(Mode::Namespaces, true),
                Cgroups {
                    memory: Some(Version::V1),
                    pids: None,
                },
                true,
                "a process limit",
            ),
            (
                "no subreaper without a pid namespace",
                kernel(Mode::NamespaceFree, false),
                NONE,
                false,
                "a call ending whole",
            ),
        ];
        for (what, k, cg, subreaper, words) in rows {
            let h = Host {
                kernel: &k,
                net_ns: true,
                subreaper,
                notify: false,
            };
            let m = refused(plan(&spec(), &h, &cg, false));
            assert!(m.contains(words), "{what}: {m}");
            let mut s = spec();
            s.degraded = true;
            let p = plan(&s, &h, &cg, false).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                p.warnings
                    .iter()
                    .any(|w| w.starts_with("degraded: ") && w.contains(words)),
                "{what}: {:?}",
                p.warnings
            );
        }
    }

    #[test]
    fn degraded_records_what_is_missing_in_the_enforcement() {
        let mut k = kernel(Mode::Namespaces, true);
        k.landlock_abi = 0;
        k.seccomp = false;
        let mut s = spec();
        s.degraded = true;
        let p = plan(&s, &host(&k), &V1, false).unwrap();
        assert_eq!(p.landlock_abi, None);
        assert_eq!(p.seccomp, None);
        assert_eq!(p.enforcement.landlock_abi, 0);
        assert!(!p.enforcement.seccomp);
        // The tree holds the filesystem view without Landlock: only
        // seccomp is a gap.
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    }

    #[test]
    fn with_a_tree_landlock_is_a_second_layer_from_abi_2() {
        // (abi, root) -> Landlock used
        for (abi, root, used) in [
            (0, true, None),
            (0, false, None),
            (1, true, None),
            (2, false, Some(2)),
            (3, true, Some(3)),
            (7, false, Some(7)),
        ] {
            let mut k = kernel(Mode::Namespaces, root);
            k.landlock_abi = abi;
            let p = plan(&spec(), &host(&k), &V1, false)
                .unwrap_or_else(|e| panic!("abi {abi}: refused: {e}"));
            assert_eq!(p.landlock_abi, used, "abi {abi}");
            assert_eq!(p.guard, MetadataGuard::Tree);
            assert!(p.enforcement.mount_tree);
            assert!(p.warnings.is_empty(), "abi {abi}: {:?}", p.warnings);
        }
        // Without a tree, ABI 3 at least.
        let mut k = kernel(Mode::NamespaceFree, false);
        k.landlock_abi = 2;
        assert!(refused(plan(&spec(), &host(&k), &NONE, false)).contains("abi 2 found"));
    }

    #[test]
    fn protected_paths_split_the_grants_without_a_tree() {
        // Namespace-free: planned, the split write grants said in a
        // warning (the supervisor decides the metadata family).
        let k = kernel(Mode::NamespaceFree, false);
        let p = plan(&spec(), &host(&k), &NONE, true).unwrap();
        assert_eq!(p.guard, MetadataGuard::Seccomp);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("split around the protected paths")),
            "{:?}",
            p.warnings
        );
        // With namespaces the tree binds them read-only.
        let k = kernel(Mode::Namespaces, true);
        let p = plan(&spec(), &host(&k), &V1, false).unwrap();
        assert_eq!(p.guard, MetadataGuard::Tree);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn the_network_is_proxied_direct_or_refused() {
        let k = kernel(Mode::Namespaces, false);
        let mut s = spec();
        s.network = true;
        s.gateway = Some(Arc::new(NoGateway));
        assert!(wants_net_ns(&s));
        let p = plan(&s, &host(&k), &NONE, false).unwrap();
        assert!(matches!(p.net, NetPlan::Proxied(_)));
        assert!(flag(&p, libc::CLONE_NEWNET) && p.enforcement.egress_proxy);
        assert_eq!(p.seccomp, Some(Sockets::NoUnix));
        // No network namespace here: refused, degraded or not.
        let h = Host {
            net_ns: false,
            ..host(&k)
        };
        refused(plan(&s, &h, &NONE, false));
        s.degraded = true;
        refused(plan(&s, &h, &NONE, false));
        // Explicitly direct.
        let mut s = spec();
        s.network = true;
        s.direct_network = true;
        assert!(!wants_net_ns(&s));
        let p = plan(&s, &h, &NONE, false).unwrap();
        assert!(matches!(p.net, NetPlan::Direct));
        assert_eq!(p.seccomp, Some(Sockets::All));
        assert!(p.warnings[0].starts_with("direct network"));
        // Network without a gateway or direct: invalid.
        let mut s = spec();
        s.network = true;
        assert!(matches!(
            plan(&s, &host(&k), &NONE, false),
            Err(JailError::InvalidSpec { .. })
        ));
        // An empty namespace on request.
        let mut s = spec();
        s.netns = true;
        assert!(wants_net_ns(&s));
        let p = plan(&s, &host(&k), &NONE, false).unwrap();
        assert!(flag(&p, libc::CLONE_NEWNET) && !p.enforcement.egress_proxy);
        let m = refused(plan(&s, &h, &NONE, false));
        assert!(m.contains("network namespaces"), "{m}");
        assert!(!wants_net_ns(&spec()));
    }

    /// When the namespaces the probe made fail at a call's launch, the
    /// call is planned again from the facts of a machine without them
    /// (`Kernel::without_namespaces`): nothing is patched after a plan.
    #[test]
    fn a_launch_without_namespaces_is_planned_again_without_them() {
        let why = "creating the namespaces: EPERM: test".to_string();
        let gateway = |s: &mut Spec| {
            s.network = true;
            s.gateway = Some(Arc::new(NoGateway));
        };
        // (root, landlock abi, networked, degraded) -> mode, or refused
        let table: &[(bool, i32, bool, bool, Option<&str>)] = &[
            (false, 7, false, false, Some("namespace-free")),
            (true, 7, false, false, Some("namespace-free")),
            // A call behind the egress proxy: the connect broker.
            (false, 7, true, false, Some("namespace-free")),
            (true, 6, true, false, Some("namespace-free")),
            // Landlock too old for the namespace-free jail: refused,
            // naming what failed, unless degraded.
            (false, 3, false, false, None),
            (false, 3, false, true, Some("none")),
            (false, 3, true, true, None),
        ];
        for &(root, abi, networked, degraded, want) in table {
            let mut k = kernel(Mode::Namespaces, root);
            k.landlock_abi = abi;
            let without = k.without_namespaces(why.clone(), true);
            assert!(!without.pid_ns && !without.mount_proc && !without.net_ns);
            let mut s = spec();
            s.degraded = degraded;
            if networked {
                gateway(&mut s);
            }
            let h = Host {
                net_ns: false,
                ..host(&without)
            };
            let case = format!("root {root}, abi {abi}, network {networked}, degraded {degraded}");
            match (plan(&s, &h, &V1, false), want) {
                (Ok(p), Some(mode)) => {
                    assert_eq!(p.enforcement.mode.as_str(), mode, "{case}");
                    assert_eq!(p.flags, 0, "{case}");
                    assert!(p.reaper, "{case}");
                    assert_eq!(p.guard, MetadataGuard::Seccomp, "{case}");
                    assert_eq!(matches!(p.net, NetPlan::Brokered(_)), networked, "{case}");
                    if degraded {
                        assert!(
                            p.warnings.iter().any(|w| w.contains("EPERM: test")),
                            "{case}: {:?}",
                            p.warnings
                        );
                    }
                }
                (Err(e), None) => {
                    let m = e.to_string();
                    assert!(m.contains("EPERM: test") || networked, "{case}: {m}");
                }
                (r, _) => panic!("{case}: {:?}", r.map(|p| p.enforcement.mode)),
            }
        }
        // Without a subreaper there is no namespace-free jail either.
        let k = kernel(Mode::Namespaces, false);
        assert_eq!(k.without_namespaces(why, false).mode, Mode::None);
    }

    #[test]
    fn no_command_is_invalid() {
        let k = kernel(Mode::Namespaces, true);
        let s = Spec::new(Vec::<String>::new());
        assert!(matches!(
            plan(&s, &host(&k), &V1, false),
            Err(JailError::InvalidSpec { .. })
        ));
    }

    /// Root with namespaces but no pids cgroup (a kernel without cgroups,
    /// a read-only cgroup file system): where a notification listener can
    /// be made the supervisor counts the call's tasks below the PID
    /// namespace's first process (no metadata notifications: the tree
    /// holds the view); where it cannot, the gap is named, degraded or not
    /// aside.
    #[test]
    fn root_without_a_pids_cgroup_is_counted_where_a_listener_can_be_made() {
        let k = kernel(Mode::Namespaces, true);
        let cg = Cgroups {
            memory: Some(Version::V1),
            pids: None,
        };
        let h = Host {
            notify: true,
            ..host(&k)
        };
        let p = plan(&spec(), &h, &cg, false).unwrap();
        assert!(flag(&p, libc::CLONE_NEWPID) && flag(&p, libc::CLONE_NEWNS));
        assert!(p.count_forks);
        assert_eq!(p.guard, MetadataGuard::Tree);
        assert_eq!(p.enforcement.pids_limit, PidsLimitBy::SeccompCount);
        assert!(!p.rlimits.iter().any(|(r, _)| *r == libc::RLIMIT_NPROC));
        // Without a listener: refused by name.
        let m = refused(plan(&spec(), &host(&k), &cg, false));
        assert!(m.contains("a process limit"), "{m}");
        // With a pids cgroup nothing is counted, listener or not.
        let p = plan(&spec(), &h, &V1, false).unwrap();
        assert!(!p.count_forks);
    }
}
