//! One replica of a replicated `glovebox serve` (see README, "Running
//! replicas"): the settings a process takes once, at start, and that the
//! library then reads.
//!
//! - The replica's id, written on every audit line (`replica=`) and on
//!   every exported one.
//! - Whether the process is replicated: then tools come only from the
//!   image or the mounted project, and `glee_tool_create` /
//!   `POST /api/v1/tools` are refused ([`crate::create`]), since a tool
//!   written on one replica would exist on that one alone.
//! - Where the audit log is written instead of the project's
//!   `.glee/audit/` (a replica's project is read-only).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A replica's settings.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Written as `replica=` on every audit line; `None`: not written.
    pub id: Option<String>,
    /// Tools come from the image or the mounted project only.
    pub replicated: bool,
    /// The directory of the audit log (`tools.log`) instead of
    /// `.glee/audit/` in the project.
    pub audit_dir: Option<PathBuf>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets this process's settings; only the first call counts (returns
/// false for a later one).
pub fn set(settings: Settings) -> bool {
    SETTINGS.set(settings).is_ok()
}

fn get() -> Option<&'static Settings> {
    SETTINGS.get()
}

/// The replica's id, if one was set.
pub fn id() -> Option<&'static str> {
    get().and_then(|s| s.id.as_deref())
}

/// Whether this process is a replica of a replicated deployment.
pub fn replicated() -> bool {
    get().is_some_and(|s| s.replicated)
}

/// Where the audit log of every project goes, if not in the project.
pub fn audit_dir() -> Option<&'static Path> {
    get().and_then(|s| s.audit_dir.as_deref())
}

/// A replica id that can be written in a line as it is: letters,
/// digits, `.`, `_`, `-`, at most 63 characters (a pod's name fits).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 63
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The default id: the host's name (a pod's name in Kubernetes).
pub fn default_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| valid_id(h))
        .unwrap_or_else(|| "replica".into())
}
