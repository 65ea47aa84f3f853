//! What a caller asks of the jail ([`Spec`], [`Limits`]) and what it gets
//! back ([`JailResult`], [`Enforcement`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::cancel::Cancel;
use super::fs::FsAccess;

/// Resource limits of one call. Every field has a bounded default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Wall-clock time before the whole tree is killed.
    pub wall: Duration,
    /// Memory of the whole tree (cgroup), or per process (RLIMIT_DATA) where
    /// no memory cgroup can be used.
    pub memory_bytes: u64,
    /// Processes (and threads) alive at once in the tree.
    pub pids: u64,
    /// Bytes of stdout kept (the rest is read and discarded); stderr too.
    pub output_bytes: u64,
    /// Largest file the tree may write (RLIMIT_FSIZE).
    pub file_size_bytes: u64,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            pids: 256,
            output_bytes: 10 << 20,
            file_size_bytes: 1 << 30,
            open_files: 4096,
        }
    }
}

/// Where the child's standard input comes from.
#[derive(Debug, Clone, Default)]
pub enum Stdin {
    /// `/dev/null`.
    #[default]
    Null,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// The supervisor's own stdin, passed through only when it is a pipe or
    /// a regular file (never a terminal or a socket); otherwise `/dev/null`.
    InheritIfSafe,
    /// This descriptor (one end of a socket pair: a warm worker's control
    /// channel, see `crate::run::warm`). Taken by the first run that uses
    /// it, so the jailed process holds the only copy: its end closes when
    /// the process ends.
    Channel(Channel),
    /// This descriptor as stdin and stdout both (one end of a socket pair:
    /// an MCP server's stdio, see `crate::mcpwrap`), taken like
    /// [`Stdin::Channel`]. The result's `stdout` stays empty.
    Duplex(Channel),
}

/// A descriptor handed to exactly one jailed process as its stdin.
#[derive(Debug, Clone, Default)]
pub struct Channel(std::sync::Arc<std::sync::Mutex<Option<std::os::fd::OwnedFd>>>);

impl Channel {
    /// Wraps `fd`.
    pub fn new(fd: std::os::fd::OwnedFd) -> Channel {
        Channel(std::sync::Arc::new(std::sync::Mutex::new(Some(fd))))
    }

    /// The descriptor, once.
    pub fn take(&self) -> Option<std::os::fd::OwnedFd> {
        self.0.lock().ok().and_then(|mut fd| fd.take())
    }
}

/// What happens to the child's stdout and stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Output {
    /// Kept in the result, up to `Limits::output_bytes` each.
    #[default]
    Capture,
    /// Copied to the supervisor's own stdout/stderr as it arrives, up to
    /// `Limits::output_bytes` each; nothing is kept.
    Stream,
}

/// Where the jail's egress proxy listens, inside the call's own network
/// namespace (`network: true` through a [`Gateway`]).
pub const PROXY_ADDR: ([u8; 4], u16) = ([127, 0, 0, 1], 3128);

/// Directories the jail keeps read-only inside any write grant that
/// covers them (with a mount tree): where glovebox's servers record their
/// listen addresses (`crate::egress::listeners`), so that no tool can
/// remove a record and then reach that server through the egress proxy.
pub const ALWAYS_PROTECTED: [&str; 2] = ["/run/glovebox/listeners", "/tmp/glovebox-listeners"];

/// The proxy URL a networked tool is given (`HTTP_PROXY` and friends).
pub const PROXY_URL: &str = "http://127.0.0.1:3128";

/// The TUN device a networked call gets in its own namespace, where one
/// can be made (transparent egress, see `crate::egress::transparent`):
/// the jail's address on it, inside the reserved 198.18.0.0/15
/// (RFC 2544), whose other addresses are the fake ones of
/// `crate::egress::fakedns`; a large MTU, so that a transfer crosses
/// the supervisor's user-space stack in few packets.
pub const TUN: super::sys::TunSetup = super::sys::TunSetup {
    name: b"glovebox0\0",
    addr: [198, 18, 0, 1],
    mtu: 65_000,
};

/// The supervisor side of a networked call: serves the listening socket the
/// child opened in its own network namespace (see `crate::egress`).
pub trait Gateway: std::fmt::Debug + Send + Sync {
    /// Starts serving `listener`; the returned value stops the proxy and
    /// closes every connection when dropped.
    ///
    /// With `admission` (the namespace-free jail's connect broker, whose
    /// listener is on the host's loopback), only connections from a source
    /// the broker recorded are served, each once; others are closed unread.
    fn attach(
        &self,
        listener: std::net::TcpListener,
        admission: Option<std::sync::Arc<super::broker::Admission>>,
    ) -> std::io::Result<Box<dyn Attached>>;

    /// Whether the connect broker may carry the tool's own connection to
    /// `addr` (not the proxy's address) to the proxy, for the proxy to
    /// decide again and connect there ([`super::broker::Carried::To`]): a
    /// raw TCP client's, to an address the call may reach. Asked by the
    /// broker only; a gateway that carries none refuses all.
    fn carries_direct(&self, addr: std::net::SocketAddr) -> bool {
        let _ = addr;
        false
    }

    /// The connect broker refused the tool's direct connection to `addr`
    /// (recorded in the call's egress log like a proxy refusal).
    fn refused_direct(&self, addr: std::net::SocketAddr) {
        let _ = addr;
    }

    /// Starts serving the call's TUN device ([`TUN`]): its DNS and the TCP
    /// connections of clients that ignore the proxy variables; `dns` are
    /// UDP sockets bound to port 53 of loopback addresses in the call's
    /// namespace ([`super::network::LoopbackDns`]), answered the same
    /// way. A gateway
    /// that has no such service refuses, and the device is closed (the
    /// call keeps the proxy only).
    /// `tool`: the tool's memory limit, where one is in force, to charge
    /// what the service holds for the call (its connections' buffers).
    fn attach_tun(
        &self,
        tun: std::os::fd::OwnedFd,
        dns: Vec<std::os::fd::OwnedFd>,
        tool: Option<std::sync::Arc<dyn ToolMemory>>,
    ) -> std::io::Result<Box<dyn Attached>> {
        drop((tun, dns, tool));
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

/// The memory limit of a call's tool, to which the supervisor charges
/// what it holds in memory for the call (transparent egress's buffers):
/// the tool and those together stay within the limit
/// (`super::cgroup`'s lowers the tool's own limit by what is charged).
pub trait ToolMemory: std::fmt::Debug + Send + Sync {
    /// Charges `bytes`, or returns the limit (bytes) they would pass.
    fn take(&self, bytes: u64) -> Result<(), u64>;

    /// Returns `bytes` charged before.
    fn give(&self, bytes: u64);
}

/// A running [`Gateway`]; dropping it stops the proxy.
pub trait Attached: Send {}

/// A condition a call must meet right before its code starts: the
/// engine's, that the call's intent line is on disk (`crate::engine`),
/// decided while the jail is prepared. Asked by whatever would start the
/// call's code first (the jail right before its `clone`, a warm worker
/// before it is handed the call); a refusal means nothing of the call ran
/// ([`super::JailError::Gate`]). Asked again, it gives the same answer.
pub trait Gate: std::fmt::Debug + Send + Sync {
    /// Blocks until decided: `Ok` to start, `Err(why)` to refuse the call.
    fn pass(&self) -> Result<(), String>;

    /// The read end of a pipe that receives one byte once decided:
    /// [`GATE_OPEN`] to start, anything else to refuse. The jail's child
    /// reads it right before `execve`, so that the jail's own set-up in the
    /// child (namespaces, mounts, Landlock, seccomp) overlaps the wait too;
    /// on a refusal the jail asks [`Gate::pass`] for the reason. `None`:
    /// the jail asks [`Gate::pass`] before its `clone` instead.
    fn signal(&self) -> Option<std::os::fd::OwnedFd> {
        None
    }
}

/// The byte a [`Gate::signal`] pipe receives when the call may start.
pub const GATE_OPEN: u8 = 1;

/// A file the jail writes into the call's private TMPDIR (its HOME)
/// before the tool starts, and the variables set to its path (the CA
/// bundle of a call with placeholder secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeFile {
    /// The file name (no `/`).
    pub name: String,
    /// Its contents (world-readable: the tool may run as another uid).
    pub contents: Vec<u8>,
    /// Variables set to the file's path, after every other one.
    pub variables: Vec<String>,
}

/// Everything needed to start one jailed process.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program and its arguments. A program name without `/` is looked
    /// up in the jail's `PATH`.
    pub argv: Vec<OsString>,
    /// Working directory of the child.
    pub cwd: PathBuf,
    /// Extra environment variables (secrets, `--env`), on top of the
    /// minimal base (`PATH`, `HOME`, `TMPDIR`, `LANG`, `TZ`).
    pub env: Vec<(OsString, OsString)>,
    /// Files written into the private TMPDIR, and the variables naming them.
    pub home_files: Vec<HomeFile>,
    /// Filesystem access, on top of the profile baseline.
    pub fs: FsAccess,
    /// Paths kept read-only even inside `fs.write` grants (the project's
    /// control surface: `.glee/`, `tools.json`, `.git/`, the files its
    /// tools run). Needs the jail's mount tree: without a mount namespace
    /// a protected path inside a write grant makes the call unavailable
    /// (or a warning in degraded mode).
    pub protect: Vec<PathBuf>,
    /// Whether the child may use the network: through `gateway` in its own
    /// network namespace, or, only with `direct_network`, the host's.
    pub network: bool,
    /// The egress proxy of a networked call. With `network` and no gateway
    /// the call is refused unless `direct_network` is set.
    pub gateway: Option<std::sync::Arc<dyn Gateway>>,
    /// `network` means the host's own network, with no namespace and no
    /// proxy (`sandbox --net=direct`, config `sandbox.direct_network`):
    /// an explicit opt-out, reported as a warning on every result.
    pub direct_network: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Standard input.
    pub stdin: Stdin,
    /// Standard output and error handling.
    pub output: Output,
    /// Run even where a restriction cannot be enforced (each gap becomes a
    /// warning in the result).
    pub degraded: bool,
    /// Put the child in a fresh, empty network namespace when the network
    /// is off (defense in depth; costs about 0.6 ms per call).
    pub netns: bool,
    /// Kills the call (its whole tree) when cancelled while it runs.
    pub cancel: Option<Cancel>,
    /// Asked right before the call's code starts; see [`Gate`].
    pub gate: Option<std::sync::Arc<dyn Gate>>,
    /// How links in `fs`'s read, write and read-only paths are treated
    /// when the jail resolves them ([`super::hold`]): followed once
    /// (paths typed for one command), or refused below the project root
    /// (paths a policy checked in resolved form).
    pub links: super::hold::Links,
    /// Learn mode: every path the call's processes open, execute, create
    /// or remove is recorded here ([`super::observe`]); the call is
    /// refused where the jail cannot observe it.
    pub observe: Option<std::sync::Arc<super::observe::Observer>>,
}

impl Spec {
    /// A spec for `argv` with defaults: no network, no paths beyond the
    /// baseline, default limits, cwd `/`.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Spec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            home_files: Vec::new(),
            fs: FsAccess::default(),
            protect: Vec::new(),
            network: false,
            gateway: None,
            direct_network: false,
            limits: Limits::default(),
            stdin: Stdin::Null,
            output: Output::Capture,
            degraded: false,
            netns: false,
            cancel: None,
            gate: None,
            links: super::hold::Links::Follow,
            observe: None,
        }
    }
}

/// How a jailed process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Exited with a status code.
    Exited(i32),
    /// Killed by a signal.
    Signaled(i32),
}

impl Status {
    /// A shell-style exit code: the status, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Status::Exited(c) => c,
            Status::Signaled(s) => 128 + s,
        }
    }
}

/// A limit the tree ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitHit {
    /// Wall time ran out; the tree was killed.
    Timeout,
    /// The memory limit was reached (the kernel killed a process).
    Memory,
    /// The process limit refused a fork.
    Pids,
    /// Output beyond `output_bytes` was discarded.
    Output,
}

/// A closed set of labels, serialised as its label: the strings results,
/// `doctor` and the JSON have always shown (empty: not decided).
macro_rules! labels {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl $name {
            /// The label shown on results and by `doctor`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

labels! {
    /// What keeps metadata calls off what the jail may not change.
    MetadataBy {
        /// Neither (a degraded run).
        #[default]
        Nothing => "",
        /// The jail's own tree: read-only binds, absent paths.
        Tree => "tree",
        /// The supervisor, through seccomp user notification.
        Seccomp => "seccomp",
    }
}

labels! {
    /// How a call's memory is limited.
    MemoryLimitBy {
        /// Not decided (no plan).
        #[default]
        Unset => "",
        /// A cgroup v1 memory controller.
        CgroupV1 => "cgroup-v1",
        /// A cgroup v2 memory controller.
        CgroupV2 => "cgroup-v2",
        /// `RLIMIT_DATA`.
        RlimitData => "rlimit-data",
    }
}

labels! {
    /// How a call's processes are limited.
    PidsLimitBy {
        /// Not decided (no plan).
        #[default]
        Unset => "",
        /// A cgroup v1 pids controller.
        CgroupV1 => "cgroup-v1",
        /// A cgroup v2 pids controller.
        CgroupV2 => "cgroup-v2",
        /// `RLIMIT_NPROC` (binds every uid but root).
        RlimitNproc => "rlimit-nproc",
        /// The supervisor counts the call's tasks ([`super::forks`]).
        SeccompCount => "seccomp-count",
        /// Nothing (a degraded run).
        None => "none",
    }
}

labels! {
    /// The jail's mode, as a result reports it ([`super::probe::Mode`]).
    JailMode {
        /// Not decided (no plan).
        #[default]
        Unset => "",
        /// Namespaces and the jail's own root.
        Namespaces => "namespaces",
        /// Landlock, seccomp and a subreaper, without namespaces.
        NamespaceFree => "namespace-free",
        /// No mode that enforces (degraded runs only).
        None => "none",
    }
}

/// Which protections were actually in force for a call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    /// Landlock ABI used (0: none).
    pub landlock_abi: i32,
    /// Seccomp filter installed.
    pub seccomp: bool,
    /// New PID namespace (the call ends whole when its first process ends).
    pub pid_namespace: bool,
    /// Private `/proc` showing only the jail's processes.
    pub private_proc: bool,
    /// The jail's own root: only granted paths exist, read-only unless
    /// writable, protected paths read-only (mount namespace).
    pub mount_tree: bool,
    /// What keeps metadata calls (chmod, chown, utimes, xattrs, inotify)
    /// off what the jail may not change: "tree" (read-only binds, absent
    /// paths) or "seccomp" (decided by the supervisor through seccomp user
    /// notification: only inside write grants); empty when neither.
    pub metadata_guard: MetadataBy,
    /// New network namespace.
    pub net_namespace: bool,
    /// Network only through the supervisor's egress proxy.
    pub egress_proxy: bool,
    /// Without a network namespace: every `connect` decided and made by
    /// the supervisor (the connect broker, [`super::broker`]).
    pub connect_broker: bool,
    /// Clients that ignore the proxy variables reach allowed hosts too,
    /// through the call's TUN device and the supervisor's DNS and TCP
    /// stack (by name, under the same decision as the proxy).
    pub transparent_egress: bool,
    /// New user namespace (unprivileged supervisor).
    pub user_namespace: bool,
    /// New IPC namespace (no System V / POSIX IPC with the host).
    pub ipc_namespace: bool,
    /// New UTS namespace (its own host and domain names).
    pub uts_namespace: bool,
    /// All capabilities dropped (supervisor running as root).
    pub capabilities_dropped: bool,
    /// How memory is limited: "cgroup-v1", "cgroup-v2", "rlimit-data".
    pub memory_limit: MemoryLimitBy,
    /// How processes are limited: "cgroup-v1", "cgroup-v2", "rlimit-nproc",
    /// "seccomp-count" or "none".
    pub pids_limit: PidsLimitBy,
    /// The jail's mode ("namespaces", "namespace-free"; see
    /// [`super::probe::Mode`]).
    pub mode: JailMode,
    /// A subreaper ends the call whole (no PID namespace).
    pub subreaper: bool,
}

/// The result of one jailed run.
#[derive(Debug, Clone, Serialize)]
pub struct JailResult {
    /// How the first process ended.
    pub status: Status,
    /// Captured stdout (empty when streamed).
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Captured stderr (empty when streamed).
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// Total stdout bytes the child wrote (kept or not).
    pub stdout_bytes: u64,
    /// Total stderr bytes the child wrote (kept or not).
    pub stderr_bytes: u64,
    /// Limits the call ran into.
    pub limits_hit: Vec<LimitHit>,
    /// Wall time of the call.
    pub duration: Duration,
    /// What was enforced.
    pub enforcement: Enforcement,
    /// Restrictions that could not be enforced (degraded mode only).
    pub warnings: Vec<String>,
    /// The caller cancelled the call; the tree was killed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
}

impl JailResult {
    /// True when wall time ran out.
    pub fn timed_out(&self) -> bool {
        self.limits_hit.contains(&LimitHit::Timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enums serialise to the strings results have always carried.
    #[test]
    fn enforcement_labels_serialise_as_the_strings_they_replaced() {
        let v = serde_json::to_value(Enforcement::default()).unwrap();
        for k in ["metadata_guard", "memory_limit", "pids_limit", "mode"] {
            assert_eq!(v[k], "", "{k}");
        }
        let e = Enforcement {
            metadata_guard: MetadataBy::Seccomp,
            memory_limit: MemoryLimitBy::RlimitData,
            pids_limit: PidsLimitBy::SeccompCount,
            mode: JailMode::NamespaceFree,
            ..Enforcement::default()
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["metadata_guard"], "seccomp");
        assert_eq!(v["memory_limit"], "rlimit-data");
        assert_eq!(v["pids_limit"], "seccomp-count");
        assert_eq!(v["mode"], "namespace-free");
        assert_eq!(
            format!("{} {}", e.memory_limit, e.pids_limit),
            "rlimit-data seccomp-count"
        );
        for (m, s) in [
            (super::super::probe::Mode::Namespaces, "namespaces"),
            (super::super::probe::Mode::NamespaceFree, "namespace-free"),
            (super::super::probe::Mode::None, "none"),
        ] {
            assert_eq!(m.label(), s);
            assert_eq!(serde_json::to_value(m.reported()).unwrap(), s);
        }
        for (v, mem, pids) in [
            (super::super::cgroup::Version::V1, "cgroup-v1", "cgroup-v1"),
            (super::super::cgroup::Version::V2, "cgroup-v2", "cgroup-v2"),
        ] {
            assert_eq!((v.memory().as_str(), v.pids().as_str()), (mem, pids));
        }
        assert_eq!(PidsLimitBy::RlimitNproc.as_str(), "rlimit-nproc");
        assert_eq!(PidsLimitBy::None.as_str(), "none");
        assert_eq!(MetadataBy::Tree.as_str(), "tree");
    }
}
