//! The jail: one child process the kernel confines.
//!
//! A [`Spec`] names the program, its working directory, extra environment,
//! the paths it may read, write or execute, whether it may use the network
//! and its limits. [`run`] starts it and returns a [`JailResult`]: how it
//! ended, its output (bounded), which limits it hit and what was enforced.
//! This is the only way glovebox starts a tool's process.
//!
//! Layers, each in its own module:
//! - [`tree`]: the jail's own root (mount namespace): only the baseline
//!   from [`profile`], the grants, `/proc`, a minimal `/dev` and the
//!   private HOME exist; everything is read-only except write grants, and
//!   the project's control surface stays read-only inside them too;
//! - [`fs`]: Landlock, deny by default, the second independent layer;
//! - [`seccomp`]: no sockets without network, no ptrace, no namespaces, no
//!   mounts, no terminal injection, no foreign architectures;
//! - namespaces (in [`spawn`]): PID (the call ends whole; no view of other
//!   processes), mount (the tree and a private `/proc`), IPC, user
//!   (unprivileged supervisor), network (every `network: true` call,
//!   behind the supervisor's egress proxy — see `crate::egress`; optional
//!   extra without network);
//! - [`cgroup`]: memory and process limits for the whole tree, with rlimit
//!   fallbacks;
//! - capabilities dropped, `no_new_privs`, `setsid`, a scrubbed
//!   environment with a private `HOME` (a tmpfs of the jail's own in the
//!   tree, [`tree::HOME`]; a host directory without one).
//!
//! That is the `namespaces` mode. Where this process cannot create
//! namespaces (a container, a runner that forbids user namespaces), the
//! [`probe`] picks the namespace-free mode instead: no tree and no private
//! `/proc` (Landlock keeps the host's closed), the metadata family decided
//! call by call by the supervisor ([`metadata`], seccomp user
//! notification), write grants split around the control surface
//! ([`fs::split_write`]), and the jail's first process is a subreaper that
//! kills every descendant, so a call still ends whole.
//!
//! What a call gets, by which mechanism, or why it is refused, is decided
//! by [`plan`] (pure, no system call); [`spawn`] carries it out. In a
//! server, [`standby`] makes the next call's jail ahead of it and hands it
//! the call only when the call's grants, held again, are the same objects. The
//! order in which the child applies them is documented in [`spawn`];
//! every raw system call is in `sys`. When a restriction cannot be
//! enforced the call is refused with [`JailError::Unavailable`] naming the
//! feature, unless the spec opted into degraded mode, in which case each
//! gap is a warning on the result.

pub mod broker;
pub mod cancel;
pub mod cgroup;
mod child;
pub mod churn;
pub mod doctor;
pub mod facts;
pub mod forks;
pub mod fs;
pub mod hold;
mod home;
mod launch;
pub mod metadata;
pub mod network;
pub mod observe;
pub mod plan;
mod prepare;
pub mod probe;
pub mod profile;
mod pump;
pub mod seccomp;
pub mod spawn;
pub mod spec;
pub mod standby;
mod supervise;
mod sys;
pub mod tree;
#[cfg(test)]
pub mod weaken;

pub use cancel::Cancel;
pub use fs::FsAccess;
pub use spawn::{run, run_fresh, run_keeping_out};
pub use spec::{
    Attached, Channel, Enforcement, Gate, Gateway, HomeFile, JailResult, LimitHit, Limits, Output,
    Spec, Status, Stdin, ToolMemory, GATE_OPEN, PROXY_ADDR, PROXY_URL, TUN,
};

/// The one supervisor loop, for a warm worker's calls too (`crate::run::warm`).
pub(crate) use pump::{limits_hit, pump_call, Sink, Supervised};
/// The supervisor's side of a call's TUN device, registered with the
/// egress runtime (`crate::egress::transparent`).
pub(crate) use sys::async_fd as sys_async_fd;
/// The forbidden calls `doctor --prove`'s battery tries from inside a jail.
pub use sys::attempt;
/// The supervisor's allocator: memory freed goes back to the kernel
/// (transparent egress's connection buffers).
pub use sys::heap::{map_large_allocations, return_freed_memory};

use std::path::PathBuf;

use crate::kind::ErrorKind;
use spawn::Step;

/// The Landlock ABI the running kernel offers (0: none).
pub fn landlock_abi() -> i32 {
    sys::landlock_abi()
}

/// Why a jailed run could not happen.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    /// The kernel cannot enforce a restriction that was asked for.
    #[error("sandbox unavailable: {feature}{}", unavailable_hint(feature))]
    Unavailable { feature: String },
    /// The spec itself is unusable.
    #[error("invalid sandbox request: {message}")]
    InvalidSpec { message: String },
    /// The program is not in the jail's PATH, or it (its link target, its
    /// `#!` interpreter) is not inside the jail.
    #[error("command not found: {program}")]
    NotFound { program: String },
    /// The jail refused to execute the program.
    #[error("{program}: execution denied by the jail (not in a read or exec path)")]
    ExecDenied {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The program could not be executed.
    #[error("{program}: cannot execute")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A step in the child before exec failed.
    /// The OS error is part of the message (before the advice), so it is
    /// not also a `source()`.
    #[error("failed while {} ({}: {error}); {}", step.describe(), sys::errno_name(*errno), step.advice(*errno))]
    Child {
        step: Step,
        errno: i32,
        error: std::io::Error,
    },
    /// Creating the child failed.
    #[error("failed to create the jailed process")]
    Clone {
        #[source]
        source: std::io::Error,
    },
    /// Preparing the call failed.
    #[error("failed while {what}")]
    Prepare {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the child failed.
    #[error("failed to wait for the jailed process")]
    Wait {
        #[source]
        source: std::io::Error,
    },
    /// Landlock ruleset.
    #[error(transparent)]
    Fs(#[from] fs::FsError),
    /// Seccomp filter.
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    /// The metadata supervisor (namespace-free jail).
    #[error(transparent)]
    Metadata(#[from] metadata::MetadataError),
    /// Cgroups.
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    /// Sandbox profiles.
    #[error(transparent)]
    Profile(#[from] profile::ProfileError),
    /// The jail's mount tree.
    #[error(transparent)]
    Tree(#[from] tree::TreeError),
    /// A granted path was replaced between its resolution and its bind.
    #[error("a granted path was replaced while the jail was being built (another process, such as a second tool, is renaming or swapping it); nothing ran: retry, or stop what changes it")]
    Changed,
    /// Files of the system baseline kept being replaced by the host
    /// while the jail was being built ([`churn`]): transient.
    #[error("the host replaced {} (files every jail is given, as a package install or a resolver rewrites them) each of the {tries} times this call's jail was built; nothing ran: retry in a moment", paths.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", "))]
    HostChurn { paths: Vec<PathBuf>, tries: u32 },
    /// A grant is, or holds, a path no jail may reach (glovebox's state
    /// directory), found by identity after resolving it.
    #[error("{path:?} would expose glovebox's state directory {kept:?} to the jail (it is or holds it); narrow the path (or move the state with --state-dir)")]
    KeptOut { path: PathBuf, kept: PathBuf },
    /// The caller's [`Gate`] refused the call right before its code would
    /// have started (nothing of it ran).
    #[error("the call was not started: {message}")]
    Gate { message: String },
}

/// Why a program that exists on the host was not found (or not allowed)
/// in the jail — what it leads to is outside the paths the jail grants,
/// or missing — as ` (…)` to follow the error; empty when it does not
/// exist on the host either (a relative path is taken from the current
/// directory). `grant` says how to grant a directory, in the words of
/// the interface the person used (`grant its directory (--read DIR)`).
/// Only for a person who typed the command (`glovebox sandbox`, `wrap`):
/// it looks at the host's files outside the grants, which a tool's
/// caller must not learn about.
pub fn not_found_hint(program: &str, grant: &str) -> String {
    let path = std::path::Path::new(program);
    if !program.contains('/') || std::fs::symlink_metadata(path).is_err() {
        return String::new();
    }
    let link = std::fs::read_link(path)
        .ok()
        .map(|_| std::fs::canonicalize(path));
    match link {
        Some(Err(_)) => {
            let to = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            return format!(" (it is a link to {to}, which does not exist)");
        }
        Some(Ok(target)) if interpreter(&target).is_none() => {
            return format!(
                " (it exists, but it is a link to {}, which is outside the paths the jail grants: {grant})",
                target.display()
            );
        }
        _ => {}
    }
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match interpreter(&target) {
        Some(Interpreter::Env(name)) => format!(
            " (it exists, but its interpreter {name}, run by `#!/usr/bin/env`, is not on the jail's PATH: set PATH (--env PATH=…) and {grant})"
        ),
        Some(Interpreter::Path(interp)) => {
            let real = std::fs::canonicalize(&interp);
            match real {
                Err(_) => format!(
                    " (it exists, but its interpreter {} (its #! line) does not exist: recreate the virtual environment, or fix the #! line)",
                    interp.display()
                ),
                Ok(real) if real != interp => format!(
                    " (it exists, but its interpreter {} (its #! line), a link to {}, is outside the paths the jail grants (the link, or what it leads to): {grant})",
                    interp.display(),
                    real.display()
                ),
                Ok(_) => format!(
                    " (it exists, but its interpreter {} (its #! line) is outside the paths the jail grants: {grant})",
                    interp.display()
                ),
            }
        }
        None => format!(
            " (it exists on the host, but what it needs to run (its directory, or its ELF loader) is outside the paths the jail grants: {grant})"
        ),
    }
}

/// The interpreter a script's `#!` line names.
enum Interpreter {
    /// `#!/usr/bin/env NAME`.
    Env(String),
    /// `#!/path/to/interpreter`.
    Path(PathBuf),
}

fn interpreter(script: &std::path::Path) -> Option<Interpreter> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return Some(Interpreter::Env(name.to_string()));
    }
    Some(Interpreter::Path(PathBuf::from(first)))
}

/// The generic advice, unless the message already says what to do.
fn unavailable_hint(feature: &str) -> &'static str {
    if feature.contains("degraded mode")
        || feature.contains("namespace-free jail")
        || feature.contains("learn mode")
        || feature.contains("direct_network")
    {
        ""
    } else {
        "; use a kernel that provides it, or opt into degraded mode"
    }
}

impl JailError {
    pub(super) fn child_failed(step: Step, errno: i32, program: &std::path::Path) -> JailError {
        let source = std::io::Error::from_raw_os_error(errno);
        let program = program.display().to_string();
        match (step, errno) {
            (Step::Mount, libc::ESTALE) => JailError::Changed,
            (Step::Exec, libc::ENOENT) => JailError::NotFound { program },
            (Step::Exec, libc::EACCES) => JailError::ExecDenied { program, source },
            (Step::Exec, _) => JailError::Exec { program, source },
            (
                Step::Landlock
                | Step::Seccomp
                | Step::Mount
                | Step::IdMap
                | Step::Net
                | Step::Namespaces,
                _,
            ) => JailError::Unavailable {
                feature: format!(
                    "{} failed ({}: {source}); {}",
                    step.describe(),
                    sys::errno_name(errno),
                    step.advice(errno)
                ),
            },
            _ => JailError::Child {
                step,
                errno,
                error: source,
            },
        }
    }

    /// True when the failure is the host's, for a moment: the same call
    /// may work when tried again (HTTP answers 503 with `Retry-After`).
    pub fn is_transient(&self) -> bool {
        matches!(self, JailError::HostChurn { .. })
    }

    /// True when the error means the sandbox cannot be provided here
    /// (`sandbox_unavailable`, exit status 3).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            JailError::Unavailable { .. }
                | JailError::Fs(fs::FsError::Unsupported { .. })
                | JailError::Metadata(metadata::MetadataError::Sizes)
        )
    }

    /// The Outcome's error kind for this failure: the parameters when
    /// they make the command line too long for the kernel, the kernel
    /// when it cannot enforce the jail, the manifest when its program
    /// cannot run, else glovebox itself.
    pub fn kind(&self) -> ErrorKind {
        match self {
            JailError::Exec { source, .. } if source.raw_os_error() == Some(libc::E2BIG) => {
                ErrorKind::InputInvalid
            }
            _ if self.is_unavailable() => ErrorKind::SandboxUnavailable,
            JailError::NotFound { .. } | JailError::ExecDenied { .. } | JailError::Exec { .. } => {
                ErrorKind::ManifestInvalid
            }
            JailError::InvalidSpec { .. } => ErrorKind::InputInvalid,
            JailError::KeptOut { .. } => ErrorKind::PermissionExceedsCeiling,
            JailError::Changed => ErrorKind::ManifestInvalid,
            // Nothing the manifest or the caller did: the host, for now.
            JailError::HostChurn { .. } => ErrorKind::SandboxUnavailable,
            JailError::Tree(tree::TreeError::Hold(hold::HoldError::Link { .. })) => {
                ErrorKind::ManifestInvalid
            }
            _ => ErrorKind::Internal,
        }
    }
}
