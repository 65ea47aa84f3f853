//! The audit log, `.glee/audit/tools.log`, one event per line in the
//! seed's format, made tamper-evident.
//!
//! ```text
//! [2026-11-22T14:00:00Z] TOOL_EXECUTED name=repo_scan params={"path":"."} status=success duration_ms=12 mac=…
//! ```
//!
//! Each line ends with `key_id=… mac=HMAC-SHA256(key, previous mac ‖ line)`,
//! the key being in glovebox's state directory, out of every jail's reach
//! ([`crate::state`]); `key_id` names the key (a hash of it, not the key)
//! so that `--verify` tells a line signed by another state directory's
//! key (glovebox started with another `--state-dir`) from a forged or
//! edited one. Such lines are reported as unverifiable with this key, not
//! as tampering, and never as intact (an append takes them in as they
//! are). Editing, inserting or deleting a line breaks the chain. The [`Head`], also in the state directory, records how many
//! lines and bytes the log had after the last write and the last mac:
//! a log cut, emptied, deleted (with `.glee/` or alone) or replaced no
//! longer ends there, which `--verify` reports, and which the next append
//! records as an `AUDIT_BREAK` event before its own line rather than
//! chaining on silently; `--verify` keeps failing until a person runs
//! `glovebox audit --reseal` (itself an `AUDIT_RESEALED` event).
//!
//! Writers take an exclusive `flock` on the log, check its end against the
//! head, append with one `write` on an `O_APPEND` descriptor, then move the
//! head (one `pwrite` of a checksummed record into the one of its two slots
//! not holding the newest record, so a torn write leaves the previous head;
//! the format is described in `src/audit/head.rs`): safe for concurrent
//! processes.
//! A call's intent is also synced (log, then head) before the call starts
//! ([`Log::append_durable`]); other lines are not (a crash may lose a
//! call's result line: the call then shows as unfinished). The sync
//! happens after the lock is released, as a group commit shared by the
//! calls of one process that wrote in the meantime (`commit`): calls do
//! not queue behind each other's `fsync`. A crash mid-write leaves
//! at most an unterminated last line (reported as interrupted, never as
//! tampering; the next writer removes it and logs `AUDIT_INTERRUPTED`) or
//! lines past the head (they chain, and the next writer takes them in).
//! A failed write is cut back so no half line stays; a line written whose
//! sync or head move failed is [`AuditError::NotDurable`], never reported
//! as unwritten, and its lines stand past the head: reported as
//! interrupted, taken in by the next append. A log's head is made before
//! this state's first line in that log, so a head that cannot be made (a
//! full state directory) leaves nothing written: "could not be written"
//! never reads as "edited" (a line without a head would read as a head
//! removed, an `AUDIT_BREAK`).
//!
//! The key is [`state::key`](crate::state::key), which refuses once the key a process
//! loaded is no longer the file on disk (its state directory deleted or
//! moved): no line is signed with a key nothing could verify it with.
//! `--verify` never makes a key ([`state::existing_key`](crate::state::existing_key)): without one it
//! says so ([`Verification::key_missing`]), never that lines were edited.
//!
//! A call is logged twice ([`crate::engine`]): its intent
//! (`TOOL_STARTED call=ID params=…`) before the tool starts and its result
//! (`TOOL_EXECUTED call=ID`, without the parameters: the intent of the
//! same call id has them) after; a call refused before any intent
//! (invalid, not found, busy, never started) has one line, with its
//! parameters; `--verify` lists the intents without a
//! result as unfinished calls. Secret values never reach the log: the
//! caller redacts them.
//!
//! By job: [`event`] (the vocabulary), `line` (encoding, escaping,
//! parsing), `chain` (where a line is MACed), `log` (the writer: append,
//! recovery, reseal), `verify`, `head` (the head's two slots), `commit`
//! and `background` (the group commit), [`export`], [`checkpoint`] and
//! [`otlp`]. The intent log of a call in flight is `intent`.

use std::path::{Path, PathBuf};

use crate::state::StateError;

mod background;
mod chain;
pub mod checkpoint;
mod commit;
pub mod event;
pub mod export;
mod head;
pub(crate) mod intent;
mod line;
mod log;
pub mod otlp;
mod verify;

pub use background::{Durable, SIGNAL_DURABLE};
pub use chain::key_id;
pub use event::{CallResult, Event, Who};
pub use head::{Acknowledged, Head};
pub use line::{
    client_label, display, escape_controls, field_value, now, Entry, FIELDS, MAX_LABEL_BYTES,
};
pub use log::{Log, Pending};
pub use verify::Verification;

/// Errors of the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The state directory (key, head).
    #[error(transparent)]
    State(#[from] StateError),
    /// The log file: nothing was written.
    #[error("cannot write the audit log {path:?}; check the disk and the file's permissions")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A reseal of a log this state's head does not describe.
    #[error("refusing to reseal {path:?}: this state's audit head describes the log {described:?}, not this one (pass the server's --audit-dir, or GLOVEBOX_AUDIT_DIR, to verify or reseal that one)")]
    NotThisLog {
        /// The log asked for.
        path: PathBuf,
        /// The log the head describes.
        described: PathBuf,
    },
    /// A reseal of a log that does not exist.
    #[error("refusing to reseal {path:?}: there is no audit log there (a server with --audit-dir, or GLOVEBOX_AUDIT_DIR, writes its log in that directory: pass the same)")]
    NoLog {
        /// The log asked for.
        path: PathBuf,
    },
    /// The line was written, but the disk did not confirm it or the head
    /// (`path`) could not be moved past it.
    #[error("the audit line was written but not made durable ({path:?} could not be synced or moved); check the disk")]
    NotDurable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AuditError {
    /// Whether the line was written all the same ([`AuditError::NotDurable`]).
    pub fn written(&self) -> bool {
        matches!(self, AuditError::NotDurable { .. })
    }

    /// The Outcome's error kind: the call cannot be recorded.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::AuditUnavailable
    }

    /// The audit key file, when what failed is the key itself (gone,
    /// replaced or lost: [`StateError::KeyGone`] and its kin), whose
    /// message says what to do; `None` for a log or head that could not
    /// be written (a full disk, permissions).
    pub fn key_file(&self) -> Option<&Path> {
        match self {
            AuditError::State(
                StateError::KeyGone { path }
                | StateError::KeyReplaced { path }
                | StateError::KeyLost { path, .. }
                | StateError::KeyMissing { path },
            ) => Some(path),
            _ => None,
        }
    }
}
