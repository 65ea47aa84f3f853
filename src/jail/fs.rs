//! Filesystem confinement with Landlock.
//!
//! The ruleset handles every filesystem right the running kernel knows, so
//! anything not granted is denied: read paths get read + execute, write
//! paths read + write (no execute unless also listed as read or exec). With
//! the network off it also handles TCP bind/connect (ABI 4+) with no rule,
//! and it always scopes signals and abstract unix sockets to the jail
//! (ABI 6+). The ruleset is built in the supervisor before the child is
//! created; the child only calls `landlock_restrict_self`.

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};

/// The oldest Landlock ABI glovebox accepts: 3 adds `truncate`, without
/// which a jailed process could truncate files it may only read.
pub const MIN_ABI: i32 = 3;

/// Errors while building the Landlock ruleset.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The kernel offers no Landlock, or one too old.
    #[error("landlock abi {found} is below the required {MIN_ABI} (filesystem confinement)")]
    Unsupported { found: i32 },
    /// The landlock crate refused the ruleset.
    #[error("failed to build the landlock ruleset")]
    Ruleset {
        #[source]
        source: landlock::RulesetError,
    },
}

impl From<landlock::RulesetError> for FsError {
    fn from(source: landlock::RulesetError) -> Self {
        FsError::Ruleset { source }
    }
}

/// The paths a jail may touch, by kind of access.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FsAccess {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read and write (no execute).
    pub write: Vec<PathBuf>,
    /// Read and execute (kept apart from `read` for `explain`).
    pub exec: Vec<PathBuf>,
    /// Read-only data paths, no execute (e.g. `/etc` entries, `/proc`).
    pub read_only: Vec<PathBuf>,
}

/// Builds the ruleset for `access` on a kernel with Landlock ABI `abi`.
///
/// Paths that do not exist are skipped (there is nothing to grant).
pub fn ruleset(abi: i32, access: &FsAccess, network: bool) -> Result<RulesetCreated, FsError> {
    if abi < MIN_ABI {
        return Err(FsError::Unsupported { found: abi });
    }
    let level = ABI::from(abi);
    let read_only = AccessFs::ReadFile | AccessFs::ReadDir;
    let read_exec = read_only | AccessFs::Execute;
    // Everything a write path needs except device nodes, which no tool
    // should create.
    let write = (AccessFs::from_all(level) & !(AccessFs::MakeChar | AccessFs::MakeBlock))
        & !AccessFs::Execute;

    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(level))?;
    if !network && abi >= 4 {
        rs = rs.handle_access(AccessNet::from_all(level))?;
    }
    if abi >= 6 {
        rs = rs.scope(Scope::from_all(level))?;
    }
    let created = rs
        .create()?
        .add_rules(path_beneath_rules(&access.read_only, read_only))?
        .add_rules(path_beneath_rules(
            access.read.iter().chain(&access.exec),
            read_exec,
        ))?
        .add_rules(path_beneath_rules(&access.write, write))?;
    Ok(created)
}

/// Access rights for a path-beneath rule added from inside the child (the
/// jail's own `/proc`): read files and directories.
pub fn proc_access_bits() -> u64 {
    (AccessFs::ReadFile | AccessFs::ReadDir).bits()
}

/// The access a jail without a PID namespace gets to the host's system-wide
/// `/proc` files in [`HOST_PROC_FILES`] (read only).
pub fn proc_file_bits() -> u64 {
    landlock::BitFlags::from(AccessFs::ReadFile).bits()
}

/// System-wide `/proc` files a jail without a PID namespace may read (what
/// a private `/proc` shows too: no other process's entries). Its own
/// `/proc/self` is added in the child, where it resolves to the tool.
pub const HOST_PROC_FILES: [&std::ffi::CStr; 8] = [
    c"/proc/cpuinfo",
    c"/proc/meminfo",
    c"/proc/stat",
    c"/proc/loadavg",
    c"/proc/uptime",
    c"/proc/version",
    c"/proc/filesystems",
    c"/proc/sys/kernel/osrelease",
];

/// True when `path` or one of its ancestors is in `list`.
pub fn covered(path: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|p| path.starts_with(p))
}
