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
//! The key is [`state::key`], which refuses once the key a process
//! loaded is no longer the file on disk (its state directory deleted or
//! moved): no line is signed with a key nothing could verify it with.
//! `--verify` never makes a key ([`state::existing_key`]): without one it
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

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use crate::kind::ErrorKind;
use crate::state::{self, StateError};

mod background;
pub mod checkpoint;
mod commit;
pub mod export;
mod head;
pub mod otlp;

pub use background::{Durable, SIGNAL_DURABLE};
pub use head::{Acknowledged, Head};
use head::{Layout, Plan, Stored};

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

/// The current time, RFC 3339 UTC with seconds.
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (proleptic Gregorian), Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The names of the audit log's events (a line's type). Everything that
/// writes or reads a line names its event through these.
pub mod event {
    /// A call's intent, written and synced before it starts anything.
    pub const TOOL_STARTED: &str = "TOOL_STARTED";
    /// A call's result.
    pub const TOOL_EXECUTED: &str = "TOOL_EXECUTED";
    /// A call, creation or deletion refused (`reason=`).
    pub const TOOL_DENIED: &str = "TOOL_DENIED";
    /// An agent created a tool.
    pub const TOOL_CREATED: &str = "TOOL_CREATED";
    /// An agent deleted a tool it created.
    pub const TOOL_DELETED: &str = "TOOL_DELETED";
    /// A person approved a tool.
    pub const TOOL_APPROVED: &str = "TOOL_APPROVED";
    /// A write to the log was interrupted before its end.
    pub const AUDIT_INTERRUPTED: &str = "AUDIT_INTERRUPTED";
    /// The log's end no longer matched its head when a line was added.
    pub const AUDIT_BREAK: &str = "AUDIT_BREAK";
    /// A person acknowledged the damage (`audit --reseal`).
    pub const AUDIT_RESEALED: &str = "AUDIT_RESEALED";
}

/// One event to log: its type and `key=value` fields, in order.
#[derive(Debug, Clone)]
pub struct Event {
    /// One of [`event`]'s names.
    pub kind: &'static str,
    /// Fields; values are written as they are (callers keep them on one
    /// line and redacted).
    pub fields: Vec<(&'static str, String)>,
}

/// Who made a call, as its lines name it: the caller's id and, when the
/// client said, its agent and project (`agent_id=`, `project_id=`, each
/// through [`client_label`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Who<'a> {
    /// Free-form identity (`cli`, an MCP client name, …).
    pub caller: &'a str,
    /// HTTP `X-Agent-ID`.
    pub agent_id: Option<&'a str>,
    /// HTTP `X-Project-ID`.
    pub project_id: Option<&'a str>,
    /// The caller's W3C `traceparent` (validated where the interface
    /// reads it).
    pub trace: Option<&'a str>,
}

/// A call's end, as its [`event::TOOL_EXECUTED`] line records it.
#[derive(Debug, Clone)]
pub struct CallResult<'a> {
    /// The tool's name (as the caller gave it).
    pub name: &'a str,
    /// The call's id, when its intent was written.
    pub call: Option<&'a str>,
    /// The parameters as the log keeps them (redacted, abbreviated).
    pub params: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// Its error kind, if it failed.
    pub kind: Option<ErrorKind>,
    /// Its wall time.
    pub duration_ms: u64,
    /// An agentcli tool's passed-through variable names, as a JSON array.
    pub env_keys: Option<String>,
    /// Fields the run added (`egress=[…]`, `network=direct`, …).
    pub extra: Vec<(&'static str, String)>,
}

impl Event {
    /// [`event::TOOL_STARTED`]: a call's intent, written before it
    /// starts anything.
    pub fn call_started(name: &str, call: &str, params: &str, who: Who<'_>) -> Event {
        Event {
            kind: event::TOOL_STARTED,
            fields: vec![
                ("name", client_label(name)),
                ("call", call.to_string()),
                ("params", params.to_string()),
                ("caller", who.caller.to_string()),
            ],
        }
        .with_client(who)
    }

    /// [`event::TOOL_DENIED`] `reason=approval_required`: a call refused
    /// for want of an approval.
    pub fn call_unapproved(name: &str, call: Option<&str>, params: String, who: Who<'_>) -> Event {
        let mut fields = vec![("name", client_label(name))];
        match call {
            // Its intent line holds the parameters.
            Some(id) => fields.push(("call", id.to_string())),
            None => fields.push(("params", params)),
        }
        fields.extend([
            ("reason", "approval_required".into()),
            ("caller", who.caller.to_string()),
        ]);
        Event {
            kind: event::TOOL_DENIED,
            fields,
        }
        .with_client(who)
    }

    /// [`event::TOOL_EXECUTED`]: a call's result.
    pub fn call_result(r: CallResult<'_>, who: Who<'_>) -> Event {
        let mut fields = vec![("name", client_label(r.name))];
        match r.call {
            // The intent line of the same call id holds the parameters:
            // said once, not twice.
            Some(id) => fields.push(("call", id.to_string())),
            None => fields.push(("params", r.params)),
        }
        fields.push(("status", if r.ok { "success" } else { "error" }.to_string()));
        if let Some(k) = r.kind {
            fields.push((
                "kind",
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            ));
        }
        fields.push(("duration_ms", r.duration_ms.to_string()));
        if let Some(keys) = r.env_keys {
            fields.push(("envKeys", keys));
        }
        fields.extend(r.extra);
        fields.push(("caller", who.caller.to_string()));
        Event {
            kind: event::TOOL_EXECUTED,
            fields,
        }
        .with_client(who)
    }

    /// The event with the client's `agent_id` / `project_id`, when given.
    fn with_client(mut self, who: Who<'_>) -> Self {
        if let Some(a) = who.agent_id {
            self.fields.push(("agent_id", client_label(a)));
        }
        if let Some(p) = who.project_id {
            self.fields.push(("project_id", client_label(p)));
        }
        if let Some(t) = who.trace {
            self.fields.push(("traceparent", client_label(t)));
        }
        self
    }
}

/// One line read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Timestamp.
    pub ts: String,
    /// Event type.
    pub event: String,
    /// Fields in order (without `mac`).
    pub fields: Vec<(String, String)>,
}

impl Entry {
    /// The value of field `key`, if the line has it.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the line records a call's end: its result
    /// ([`event::TOOL_EXECUTED`]), or its refusal for want of an
    /// approval ([`event::TOOL_DENIED`] `reason=approval_required`), not
    /// a refused creation or deletion.
    pub fn is_call_result(&self) -> bool {
        self.event == event::TOOL_EXECUTED
            || (self.event == event::TOOL_DENIED
                && self
                    .fields
                    .iter()
                    .any(|(k, v)| k == "reason" && v == "approval_required"))
    }
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Lines whose mac checked out.
    pub valid_lines: usize,
    /// Signs of tampering or damage, each naming a line number (1-based);
    /// empty when none.
    pub problems: Vec<String>,
    /// Interrupted writes (a glovebox that stopped mid-write): not
    /// tampering, and repaired by the next append.
    pub interrupted: Vec<String>,
    /// Calls whose intent was recorded and whose result never was: they
    /// were in flight when glovebox stopped (or still are).
    pub unfinished: Vec<String>,
    /// Problems a person acknowledged with `glovebox audit --reseal`.
    pub acknowledged: usize,
    /// Lines (1-based) signed with another key than this state's: written
    /// by a glovebox with another state directory; this key cannot vouch
    /// for them.
    pub other_key_lines: Vec<usize>,
    /// The key ids of those lines, in order of appearance.
    pub other_key_ids: Vec<String>,
    /// The id of the key used to verify (empty when there is none).
    pub key_id: String,
    /// The state directory that key is in.
    pub state_dir: PathBuf,
    /// The key file, when the state directory holds no key: no line can
    /// be verified, and none is called edited (`verify` never makes a
    /// key). `other_key_ids` then lists the keys the lines claim.
    pub key_missing: Option<PathBuf>,
}

impl Verification {
    /// True when every line checked out with this state's key.
    pub fn intact(&self) -> bool {
        self.problems.is_empty() && self.other_key_lines.is_empty() && self.key_missing.is_none()
    }

    /// True when something is wrong beyond lines of another key.
    pub fn tampered(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// The public name of an audit key: a hash of it, 16 hex digits.
pub fn key_id(key: &[u8]) -> String {
    let mut h = <Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut h, b"glovebox audit key id\n");
    sha2::Digest::update(&mut h, key);
    hex::encode(sha2::Digest::finalize(h))[..16].to_string()
}

/// The `key_id` a raw line claims.
fn claimed_key_id(body: &str) -> Option<&str> {
    let (_, rest) = body.rsplit_once(" key_id=")?;
    (rest.len() == 16 && rest.chars().all(|c| c.is_ascii_hexdigit())).then_some(rest)
}

/// A line written and its head moved, not yet known to be on disk
/// ([`Log::append_pending`]).
#[derive(Debug)]
#[must_use = "the line is not durable until `wait` says so"]
pub struct Pending {
    log: Log,
    /// The log, open (the writers' lock already released).
    file: fs::File,
    group: std::sync::Arc<commit::Commit>,
    ticket: u64,
}

impl Pending {
    /// Returns once the line is durable: a sync of the log and then the
    /// head, begun after the line was written, has finished (this
    /// caller's or one shared with other appends of this process, see
    /// `commit`). [`AuditError::NotDurable`] when that sync failed.
    pub fn wait(self) -> Result<(), AuditError> {
        self.group
            .wait(self.ticket, || self.log.sync(&self.file))
            .map_err(|e| self.log.not_durable(e))
    }
}

/// The audit log of one project.
#[derive(Debug, Clone)]
pub struct Log {
    path: PathBuf,
    head: PathBuf,
    /// The log's directory, opened once ([`Log::pinned`]): the log is
    /// then opened relative to it, whatever happened to the path above
    /// it since (a call's tool may take the search bit off the project
    /// root it may write, which kept its result line out of the log).
    dir: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], prev: &str, line: &str) -> String {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| {
        // HMAC accepts keys of any length; this branch cannot be taken.
        <HmacSha256 as Mac>::new_from_slice(&[0u8; 32]).unwrap_or_else(|_| unreachable!())
    });
    m.update(prev.as_bytes());
    m.update(b"\n");
    m.update(line.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

/// A field value as written to the log: a JSON object or array that
/// glovebox serialised (parameters, permissions) as it is; anything else
/// with `\` → `\\`, every control character (C0, DEL, C1) and Unicode
/// line, paragraph and bidi-override character escaped (`\n`, `\r`,
/// `\t`, `\xNN`, `\u{NNNN}`), and `=` → `\x3d`, so that a value can
/// neither end the line, nor move the terminal, nor pose as another
/// `key=value` field.
pub fn field_value(v: &str) -> String {
    let json = (v.starts_with('{') || v.starts_with('['))
        && !v.chars().any(needs_escape)
        && serde_json::from_str::<serde::de::IgnoredAny>(v).is_ok();
    if json {
        return v.to_string();
    }
    let mut out = escape_controls(v);
    if out.contains('=') {
        out = out.replace('=', "\\x3d");
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with `\` doubled and every control, line-separator and
/// bidi-override character escaped: safe to print on a terminal and to
/// keep on one line. What `glovebox audit` and the usage endpoint show.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(|c| c == '\\' || needs_escape(c)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && needs_escape(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A value read back from the log, made safe to show: see
/// [`escape_controls`]. A line glovebox wrote never needs it; a line
/// written by anything else might.
pub fn display(v: &str) -> String {
    if v.chars().any(needs_escape) {
        escape_controls(v)
    } else {
        v.to_string()
    }
}

/// Longest client label kept, in bytes (before escaping).
pub const MAX_LABEL_BYTES: usize = 128;

/// The one sanitiser for every string a caller supplies that reaches the
/// log: MCP `clientInfo` name, the `X-Agent-ID` and `X-Project-ID`
/// headers, a tool name taken from a request, an agent's name for a
/// creation, who reseals. Cut to [`MAX_LABEL_BYTES`] (then `...`), every
/// byte that is not printable ASCII, and space, `=`, `%` and `` ` ``,
/// percent-encoded, so it can neither end the line, nor pose as another
/// `key=value` field, nor hide as a look-alike character. The same
/// function shows an invalid tool name in messages
/// ([`crate::manifest::name::shown`]), so a name is encoded once.
pub fn client_label(raw: &str) -> String {
    crate::manifest::name::shown(raw)
}

/// How many bytes past the head an append examines before it calls the
/// rest unknown (a glovebox that died mid-write leaves at most a few lines).
const MAX_UNRECORDED_BYTES: u64 = 1 << 20;

/// Where the log stands against its head, as an append finds it.
enum End {
    /// The log ends where the head says, plus `recovered` lines a writer
    /// wrote before it died (they chain), and maybe an unterminated
    /// fragment from `keep` on (an interrupted write, to be removed).
    Continues {
        mac: String,
        lines: u64,
        /// Lines up to `keep` this key signed, when known without
        /// reading the whole log.
        own: Option<u64>,
        keep: u64,
        fragment: Option<Vec<u8>>,
    },
    /// Continuity is broken: why.
    Broken(String),
}

/// Syncs the directory `dir` (the names in it); a filesystem that cannot
/// sync a directory (`EINVAL`) has nothing more to do.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match fs::File::open(dir)?.sync_all() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

fn split_line(raw: &str) -> Option<(&str, &str)> {
    raw.strip_suffix('\n').and_then(|l| l.rsplit_once(" mac="))
}

fn digest(items: &[String]) -> String {
    use sha2::Digest;
    let mut h = Sha256::new();
    for i in items {
        h.update(i.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

impl Log {
    /// The log of the project at `root`.
    pub fn for_project(root: &Path) -> Result<Log, AuditError> {
        let path = match crate::replica::audit_dir() {
            Some(dir) => dir.join("tools.log"),
            None => root.join(".glee/audit/tools.log"),
        };
        Ok(Log {
            path,
            head: state::dir()?
                .join("audit")
                .join(format!("{}.head", state::project_key(root))),
            dir: None,
        })
    }

    /// This log with its directory opened now (created if needed), so that
    /// later appends reach it through the descriptor; as it is when the
    /// directory cannot be opened (appends then report it).
    pub fn pinned(mut self) -> Log {
        let Some(dir) = self.path.parent() else {
            return self;
        };
        let _ = fs::create_dir_all(dir);
        if let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir)
        {
            self.dir = Some(std::sync::Arc::new(f.into()));
        }
        self
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn not_durable(&self, source: std::io::Error) -> AuditError {
        AuditError::NotDurable {
            path: self.head.clone(),
            source,
        }
    }

    /// The head file as it is now ([`Stored::absent`] when there is none
    /// yet). A file that cannot be read is an error: continuity cannot be
    /// checked without it.
    fn load_head(&self) -> Result<Stored, AuditError> {
        match fs::read(&self.head) {
            Ok(bytes) => Ok(Stored::decode(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::absent()),
            Err(e) => Err(AuditError::State(StateError::Io {
                path: self.head.clone(),
                source: e,
            })),
        }
    }

    /// What `stored` says, `None` when there is no head yet. A head file
    /// neither of whose records is whole (not something a crash leaves:
    /// see [`head`]) says nothing of where the log ended: it reads as a
    /// head that records no end and holds that damage as a break, so the
    /// next append records an `AUDIT_BREAK` (unless the log is empty) and
    /// `--verify` fails until a reseal, never as a clean log.
    fn head_of(&self, stored: &Stored) -> Option<Head> {
        match (&stored.head, stored.layout) {
            (Some(h), _) => Some(h.clone()),
            (None, Layout::Absent) => None,
            (None, _) => Some(Head {
                broken: vec![format!(
                    "{}: the audit head {} could not be read (neither of its records is whole): where the log ended is unknown",
                    now(),
                    self.head.display()
                )],
                ..Head::default()
            }),
        }
    }

    /// The head, `None` when there is none yet (see [`Log::head_of`]).
    fn read_head(&self) -> Result<Option<Head>, AuditError> {
        Ok(self.head_of(&self.load_head()?))
    }

    /// Writes `head` over the file read as `stored` (the writers' lock
    /// held since it was read): in place, one `pwrite` of a record into
    /// the slot not holding the newest one, synced with `durable`; or, for
    /// a head in an older format, none yet, or one that outgrew its slots,
    /// a new file with slots big enough (mode 0600, synced) renamed over
    /// it. (The directory is not synced: a rename lost in a crash leaves
    /// the older head, and the lines written since chain on from it, so
    /// the next append takes them in.)
    fn write_head(&self, stored: &Stored, head: &Head, durable: bool) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        match stored.plan(head) {
            Plan::InPlace { offset, bytes } => {
                let file = OpenOptions::new().write(true).open(&self.head)?;
                file.write_all_at(&bytes, offset)?;
                if durable {
                    file.sync_data()?;
                }
                Ok(())
            }
            Plan::Whole(bytes) => {
                let dir = self.head.parent().unwrap_or(Path::new("."));
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
                let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
                tmp.write_all(&bytes)?;
                tmp.as_file()
                    .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
                // Rare (a new head, an upgrade, slots doubled): synced, so
                // a crash never leaves a renamed file without its records.
                tmp.as_file().sync_data()?;
                tmp.persist(&self.head).map_err(|e| e.error)?;
                if matches!(stored.layout, Layout::Absent) {
                    // A first head: its name made durable too (and the
                    // audit directory's, which may be new), so a crash
                    // cannot lose the head of lines already on disk.
                    sync_dir(dir)?;
                    if let Some(up) = dir.parent() {
                        sync_dir(up)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Makes the head file (there is none yet) saying `head`, before any
    /// line of this state is written to the log ([`Log::append_keyed`]);
    /// the file as then stored. Failing, it is a state error: nothing was
    /// written.
    fn create_head(&self, head: &Head) -> Result<Stored, AuditError> {
        let state = |source| {
            AuditError::State(StateError::Io {
                path: self.head.clone(),
                source,
            })
        };
        self.write_head(&Stored::absent(), head, true)
            .map_err(state)?;
        let stored = self.load_head()?;
        if stored.head.as_ref() != Some(head) {
            return Err(state(std::io::Error::other(
                "the new head did not read back as written",
            )));
        }
        Ok(stored)
    }

    /// Opens the log for appending (creating it and its directory) and
    /// takes the writers' lock.
    fn open_locked(&self) -> Result<nix::fcntl::Flock<fs::File>, AuditError> {
        if let (Some(dir), Some(name)) = (&self.dir, self.path.file_name()) {
            use nix::fcntl::OFlag;
            let fd = nix::fcntl::openat(
                &**dir,
                name,
                OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::from_bits_truncate(0o644),
            )
            .map_err(|e| self.io(e.into()))?;
            return nix::fcntl::Flock::lock(
                fs::File::from(fd),
                nix::fcntl::FlockArg::LockExclusive,
            )
            .map_err(|(_, e)| self.io(e.into()));
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| self.io(e.into()))
    }

    /// Appends `event`, chained to the previous line, and moves the head.
    /// Not synced to disk: a crash may lose it (a call's result line: the
    /// call then shows as unfinished). [`Log::append_durable`] syncs.
    pub fn append(&self, event: &Event) -> Result<(), AuditError> {
        self.append_with(event, false).map(drop)
    }

    /// Appends `event` made durable before it returns: the line written
    /// and the head moved under the writers' lock, then, the lock
    /// released, the log synced and then the head, in one sync shared
    /// with the lines other threads of this process wrote meanwhile
    /// (group commit). For a call's intent, which must be on disk before
    /// the call starts.
    pub fn append_durable(&self, event: &Event) -> Result<(), AuditError> {
        self.append_pending(event)?.wait()
    }

    /// [`Log::append_durable`] in two halves: the line is written and the
    /// head moved before this returns; the sync is [`Pending::wait`], which
    /// the caller runs when it likes (on another thread, while it prepares
    /// what must not start before the line is on disk).
    pub fn append_pending(&self, event: &Event) -> Result<Pending, AuditError> {
        self.append_with(event, true)?
            .ok_or_else(|| self.not_durable(std::io::Error::other("no sync was prepared")))
    }

    /// Appends `event` (see [`Log::append`]).
    ///
    /// The log must end where the head says. Lines past the head that
    /// chain (a writer died before moving the head) are taken in; an
    /// unterminated fragment (an interrupted write) is removed and an
    /// `AUDIT_INTERRUPTED` event says so. Anything else (a log cut,
    /// emptied, deleted, replaced or extended by something else) is a
    /// break: an `AUDIT_BREAK` event is written first, chained to what
    /// the log now holds, and the head keeps the break so that `--verify`
    /// fails until `glovebox audit --reseal`.
    ///
    /// [`AuditError::NotDurable`] means the line *was* written (but the
    /// disk did not confirm it, or the head could not be moved); any other
    /// error means it was not. A durable append returns its sync still to
    /// be waited for ([`Pending`]).
    fn append_with(&self, event: &Event, durable: bool) -> Result<Option<Pending>, AuditError> {
        self.append_keyed(&state::key()?, event, durable)
    }

    /// [`Log::append_with`] with `key`.
    fn append_keyed(
        &self,
        key: &[u8],
        event: &Event,
        durable: bool,
    ) -> Result<Option<Pending>, AuditError> {
        let mut file = self.open_locked()?;
        let mut stored = self.load_head()?;
        let head = self.head_of(&stored);
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        let end = self
            .find_end(&mut file, len, head.as_ref(), key)
            .map_err(|e| self.io(e))?;
        let mut head = head.unwrap_or_default();
        let mut events = Vec::new();
        let (mut prev, mut lines, mut close, own) = match end {
            End::Continues {
                mac,
                lines,
                own,
                keep,
                fragment,
            } => {
                if matches!(stored.layout, Layout::Absent) {
                    // This state's first line in this log: its head is
                    // made first, saying where the log ends now (synced,
                    // with its directory). A head that cannot be made (a
                    // full state directory) then leaves nothing written,
                    // and no line of this key is ever in the log without
                    // a head, which the next append could only take for a
                    // head removed (a false `AUDIT_BREAK`). Past this
                    // point the head is moved in place (its slots are
                    // allocated): a move that fails leaves lines past the
                    // head, which chain and are taken in.
                    let first = Head {
                        lines: Some(lines),
                        bytes: Some(keep),
                        mac: mac.clone(),
                        own,
                        ..Head::default()
                    };
                    stored = self.create_head(&first)?;
                }
                if let Some(bytes) = fragment {
                    file.set_len(keep).map_err(|e| self.io(e))?;
                    use sha2::Digest;
                    events.push(Event {
                        kind: event::AUDIT_INTERRUPTED,
                        fields: vec![
                            ("bytes", bytes.len().to_string()),
                            ("sha256", hex::encode(Sha256::digest(&bytes))),
                            (
                                "detail",
                                "an interrupted write left an unterminated line; it was removed"
                                    .into(),
                            ),
                        ],
                    });
                }
                (mac, lines, false, own)
            }
            End::Broken(reason) => {
                let text = tail(&mut file).map_err(|e| self.io(e))?;
                let lines = count_lines(&mut file).map_err(|e| self.io(e))?;
                let close = !text.is_empty() && !text.ends_with('\n');
                events.push(Event {
                    kind: event::AUDIT_BREAK,
                    fields: vec![
                        (
                            "expected_lines",
                            head.lines.map_or("unknown".into(), |n| n.to_string()),
                        ),
                        ("found_lines", lines.to_string()),
                        ("detail", reason.clone()),
                    ],
                });
                head.broken.push(format!("{}: {reason}", now()));
                eprintln!(
                    "glovebox: the audit log {} was changed outside glovebox: {reason}; `glovebox audit --verify` fails until `glovebox audit --reseal`",
                    self.path.display()
                );
                (last_mac(&text), lines, close, None)
            }
        };
        // Unknown (a head of an older glovebox, or a break): counted once.
        let own = match own {
            Some(n) => n,
            None => count_own(&mut file, key).map_err(|e| self.io(e))?,
        };
        events.push(event.clone());
        let mut out = String::new();
        for e in &events {
            if close {
                out.push('\n'); // close a line left unterminated
                lines += 1;
                close = false;
            }
            let line = e.render(&key_id(key));
            let m = mac(key, &prev, &line);
            out.push_str(&line);
            out.push_str(" mac=");
            out.push_str(&m);
            out.push('\n');
            prev = m;
            lines += 1;
        }
        let before = file.metadata().map_err(|e| self.io(e))?.len();
        if let Err(e) = file.write_all(out.as_bytes()) {
            // Leave no half line behind: the call is reported unwritten.
            let _ = file.set_len(before);
            return Err(self.io(e));
        }
        // Exported while the writers' lock is held: in the log's order.
        export::written(&out);
        head.lines = Some(lines);
        head.bytes = Some(before + out.len() as u64);
        head.own = Some(own + events.len() as u64);
        head.mac = prev;
        self.write_head(&stored, &head, false)
            .map_err(|e| self.not_durable(e))?;
        if !durable {
            return Ok(None);
        }
        // Group commit (see `commit`): the lock is released before the
        // sync, which covers every line written before it starts.
        let file = file.try_clone().map_err(|e| self.not_durable(e))?;
        let meta = file.metadata().map_err(|e| self.not_durable(e))?;
        let group = commit::of(meta.dev(), meta.ino());
        let ticket = group.ticket();
        Ok(Some(Pending {
            log: self.clone(),
            file,
            group,
            ticket,
        }))
    }

    /// Makes what the log and the head say durable: the log, then the
    /// head (`fdatasync` of each: the head is rewritten in place, its size
    /// does not change). The head synced may already count lines written
    /// after the log's sync began; they are covered by the sync their own
    /// durable append waits for, and until then a crash can leave the
    /// head ahead of the log, the window the renamed head of before had
    /// too (a journal commit carried every earlier rename with it).
    /// Makes every line written so far durable (the log, then the head),
    /// at a server's shutdown; a log that does not exist is nothing to
    /// sync.
    pub fn sync_tail(&self) -> Result<(), AuditError> {
        let log = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(e)),
        };
        self.sync(&log).map_err(|e| self.not_durable(e))
    }

    fn sync(&self, log: &fs::File) -> std::io::Result<()> {
        let head = fs::File::open(&self.head)?;
        log.sync_data()?;
        head.sync_data()
    }

    /// Where the log stands against `head` (the writers' lock held).
    fn find_end(
        &self,
        file: &mut fs::File,
        len: u64,
        head: Option<&Head>,
        key: &[u8],
    ) -> std::io::Result<End> {
        let Some(head) = head else {
            if len == 0 {
                return Ok(End::Continues {
                    mac: String::new(),
                    lines: 0,
                    own: Some(0),
                    keep: 0,
                    fragment: None,
                });
            }
            // No head: fine for a log only other states' keys wrote (this
            // state's first line in it), a break if this key wrote any of
            // it (its head was removed).
            let mut text = Vec::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut text)?;
            let text = String::from_utf8_lossy(&text);
            let chain = walk(key, &key_id(key), &text);
            let own = chain.ends.iter().any(|(_, _, own)| *own);
            if own || !chain.problems.is_empty() || chain.other_lines.is_empty() {
                return Ok(End::Broken(format!(
                    "the log holds {len} bytes but glovebox has no head for it (the head was removed, or the log was not written by glovebox)"
                )));
            }
            let keep = chain.ends.last().map_or(0, |(end, _, _)| *end);
            let mut fragment = Vec::new();
            if keep < len {
                file.seek(SeekFrom::Start(keep))?;
                file.read_to_end(&mut fragment)?;
            }
            return Ok(End::Continues {
                mac: chain
                    .ends
                    .last()
                    .map(|(_, m, _)| m.clone())
                    .unwrap_or_default(),
                lines: chain.ends.len() as u64,
                own: Some(0),
                keep,
                fragment: (!fragment.is_empty()).then_some(fragment),
            });
        };
        let (Some(bytes), Some(lines)) = (head.bytes, head.lines) else {
            // A head of an older glovebox: the last mac only.
            let text = tail(file)?;
            let last = last_mac(&text);
            if last != head.mac {
                return Ok(End::Broken(
                    "the log does not end where glovebox last wrote it".into(),
                ));
            }
            let fragment_at =
                len - text.len() as u64 + text.rfind('\n').map_or(0, |i| i as u64 + 1);
            let lines = count_lines(file)?;
            let mut fragment = Vec::new();
            file.seek(SeekFrom::Start(fragment_at))?;
            file.read_to_end(&mut fragment)?;
            return Ok(End::Continues {
                mac: last,
                lines,
                own: None,
                keep: fragment_at,
                fragment: (!fragment.is_empty()).then_some(fragment),
            });
        };
        if len < bytes {
            return Ok(End::Broken(format!(
                "the log is shorter than glovebox left it ({lines} lines, {bytes} bytes; now {len} bytes): lines were removed from its end, or it was emptied, deleted or replaced"
            )));
        }
        if last_line_mac(file, bytes)? != head.mac {
            return Ok(End::Broken(
                "the log does not end where glovebox left it: it was rewritten or replaced".into(),
            ));
        }
        if len == bytes {
            return Ok(End::Continues {
                mac: head.mac.clone(),
                lines,
                own: head.own,
                keep: len,
                fragment: None,
            });
        }
        if len - bytes > MAX_UNRECORDED_BYTES {
            return Ok(End::Broken(format!(
                "{} bytes were added to the log after glovebox's last line",
                len - bytes
            )));
        }
        let mut extra = Vec::new();
        file.seek(SeekFrom::Start(bytes))?;
        file.read_to_end(&mut extra)?;
        let mut prev = head.mac.clone();
        let mut lines = lines;
        let mut own = head.own;
        let mut keep = bytes;
        for raw in extra.split_inclusive(|b| *b == b'\n') {
            if !raw.ends_with(b"\n") {
                return Ok(End::Continues {
                    mac: prev,
                    lines,
                    own,
                    keep,
                    fragment: Some(raw.to_vec()),
                });
            }
            let text = String::from_utf8_lossy(raw);
            match split_line(&text) {
                Some((body, m)) if mac(key, &prev, body) == m => {
                    prev = m.to_string();
                    lines += 1;
                    own = own.map(|n| n + 1);
                    keep += raw.len() as u64;
                }
                // A line of another state's key (a glovebox started with
                // another state directory): taken in as it is; `--verify`
                // reports it as unverifiable with this key.
                Some((body, m)) if claimed_key_id(body).is_some_and(|k| k != key_id(key)) => {
                    prev = m.to_string();
                    lines += 1;
                    keep += raw.len() as u64;
                }
                _ => {
                    return Ok(End::Broken(
                        "lines that glovebox did not write were added to the log".into(),
                    ))
                }
            }
        }
        Ok(End::Continues {
            mac: prev,
            lines,
            own,
            keep,
            fragment: None,
        })
    }

    /// Every well-formed entry, oldest first.
    pub fn entries(&self) -> Result<Vec<Entry>, AuditError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        Ok(text.lines().filter_map(parse).collect())
    }

    /// The well-formed entries in the last `max_bytes` of the log, oldest
    /// first: memory bounded by `max_bytes` whatever the log's size.
    pub fn recent_entries(&self, max_bytes: u64) -> Result<Vec<Entry>, AuditError> {
        let mut file = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        let start = len.saturating_sub(max_bytes);
        file.seek(SeekFrom::Start(start)).map_err(|e| self.io(e))?;
        let mut bytes = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(e))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = if start > 0 {
            text.split_once('\n').map_or("", |(_, rest)| rest)
        } else {
            &text
        };
        Ok(text.lines().filter_map(parse).collect())
    }

    /// Checks the chain, the head and the calls' intents, with the key
    /// of the state directory. Never makes a key: without one, the
    /// verification says the key is missing
    /// ([`Verification::key_missing`]) and checks nothing (a new key
    /// would call every line edited).
    pub fn verify(&self) -> Result<Verification, AuditError> {
        let state_dir = state::dir()?;
        let key = state::existing_key(&state_dir)?;
        let (bytes, head) = match fs::File::open(&self.path) {
            Ok(f) => {
                // Readers share the lock: no append is seen half done, and
                // the head is read with the log it describes.
                let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockShared)
                    .map_err(|(_, e)| self.io(e.into()))?;
                let mut b = Vec::new();
                f.read_to_end(&mut b).map_err(|e| self.io(e))?;
                (b, self.read_head()?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), self.read_head()?),
            Err(e) => return Err(self.io(e)),
        };
        Ok(match key {
            Some(key) => check(&key, &bytes, head.as_ref(), state_dir),
            None => unverifiable(&bytes, state_dir),
        })
    }

    /// Accepts the log as it now is, after a person looked at what
    /// `--verify` reports: an `AUDIT_RESEALED` event (with `by`, and how
    /// many problems it acknowledges) is appended, the head is moved to
    /// it and its breaks cleared. The problems then present stay
    /// acknowledged only as long as those lines do not change again.
    ///
    /// Like `verify`, never makes a key: with none, nothing can be
    /// acknowledged ([`StateError::KeyMissing`]).
    pub fn reseal(&self, by: &str) -> Result<Verification, AuditError> {
        let state_dir = state::dir()?;
        let Some(key) = state::existing_key(&state_dir)? else {
            return Err(StateError::KeyMissing {
                path: state::key_path(&state_dir),
            }
            .into());
        };
        let mut file = self.open_locked()?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).map_err(|e| self.io(e))?;
        file.read_to_end(&mut bytes).map_err(|e| self.io(e))?;
        let mut stored = self.load_head()?;
        let head = self.head_of(&stored);
        let before = check(&key, &bytes, head.as_ref(), state_dir);
        if matches!(stored.layout, Layout::Absent) {
            // No head yet: one is made before the reseal's line (see
            // `append_keyed`), so that a head that cannot be made leaves
            // nothing written. Until the reseal's own head replaces it,
            // it says that the reseal did not complete (or, for an empty
            // log, that the log is empty).
            let first = if bytes.is_empty() {
                Head {
                    lines: Some(0),
                    bytes: Some(0),
                    own: Some(0),
                    ..Head::default()
                }
            } else {
                Head {
                    broken: vec![format!(
                        "{}: a reseal began on a log with no head and did not complete; run `glovebox audit --reseal` again",
                        now()
                    )],
                    ..Head::default()
                }
            };
            stored = self.create_head(&first)?;
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let close = !text.is_empty() && !text.ends_with('\n');
        let mut lines = text.matches('\n').count() as u64 + u64::from(close);
        let walked = walk(&key, &key_id(&key), &text);
        let own = walked.ends.iter().filter(|(_, _, own)| *own).count() as u64;
        let chain = walked.problems;
        let chain_text: Vec<String> = chain.iter().map(|(_, p)| p.clone()).collect();
        let event = Event {
            kind: event::AUDIT_RESEALED,
            fields: vec![
                ("by", client_label(by)),
                ("problems", before.problems.len().to_string()),
                ("acknowledged", chain_text.len().to_string()),
                ("digest", digest(&chain_text)),
            ],
        };
        let prev = last_mac(&text);
        let line = event.render(&key_id(&key));
        let m = mac(&key, &prev, &line);
        let out = format!("{}{line} mac={m}\n", if close { "\n" } else { "" });
        let len = bytes.len() as u64;
        if let Err(e) = file.write_all(out.as_bytes()) {
            let _ = file.set_len(len);
            return Err(self.io(e));
        }
        file.sync_data().map_err(|e| self.not_durable(e))?;
        lines += 1;
        let head = Head {
            lines: Some(lines),
            bytes: Some(len + out.len() as u64),
            mac: m,
            own: Some(own + 1),
            broken: Vec::new(),
            acknowledged: Some(head::Acknowledged {
                line: lines,
                digest: digest(&chain_text),
                count: chain_text.len(),
            }),
        };
        self.write_head(&stored, &head, true)
            .map_err(|e| self.not_durable(e))?;
        Ok(before)
    }
}

impl Event {
    /// The line of this event without its mac, ending with the id of the
    /// key that signs it.
    fn render(&self, key_id: &str) -> String {
        let mut line = format!("[{}] {}", now(), self.kind);
        for (k, v) in &self.fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(&field_value(v));
        }
        if let Some(id) = crate::replica::id() {
            line.push_str(" replica=");
            line.push_str(id);
        }
        line.push_str(" key_id=");
        line.push_str(key_id);
        line
    }
}

/// What walking the chain found.
#[derive(Debug, Default)]
struct Chain {
    /// Problems, each with its 1-based line.
    problems: Vec<(usize, String)>,
    /// An unterminated last line.
    interrupted: Vec<String>,
    /// Each complete line's end offset, the mac the chain goes on from,
    /// and whether this key signed it.
    ends: Vec<(u64, String, bool)>,
    /// Lines signed by another state's key, and those keys' ids.
    other_lines: Vec<usize>,
    other_ids: Vec<String>,
}

/// Walks the chain of `text` with `key` (whose id is `own_id`).
fn walk(key: &[u8], own_id: &str, text: &str) -> Chain {
    let mut c = Chain::default();
    let mut offset = 0u64;
    let mut prev = String::new();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        offset += raw.len() as u64;
        if !raw.ends_with('\n') {
            c.interrupted.push(format!(
                "line {n}: unterminated (an interrupted write; the next call removes it)"
            ));
            break;
        }
        match split_line(raw) {
            Some((body, m)) if mac(key, &prev, body) == m => {
                prev = m.to_string();
                c.ends.push((offset, prev.clone(), true));
                if let Err(why) = strict(body) {
                    c.problems.push((n, format!("line {n}: {why}")));
                }
                continue;
            }
            Some((body, m)) => match claimed_key_id(body) {
                Some(other) if other != own_id => {
                    // Another state's key: chain on from its mac.
                    c.other_lines.push(n);
                    if !c.other_ids.iter().any(|k| k == other) {
                        c.other_ids.push(other.to_string());
                    }
                    prev = m.to_string();
                    c.ends.push((offset, prev.clone(), false));
                    continue;
                }
                _ => c.problems.push((
                    n,
                    format!(
                        "line {n}: mac does not match (edited, inserted, removed or reordered lines)"
                    ),
                )),
            },
            None => c
                .problems
                .push((n, format!("line {n}: no mac (not written by glovebox)"))),
        }
        // Continue from the mac the bad line claims.
        if let Some((_, m)) = split_line(raw) {
            prev = m.to_string();
        }
        c.ends.push((offset, prev.clone(), false));
    }
    c
}

/// What `verify` reports for a log's bytes and its head.
fn check(key: &[u8], bytes: &[u8], head: Option<&Head>, state_dir: PathBuf) -> Verification {
    let own_id = key_id(key);
    let text = String::from_utf8_lossy(bytes);
    let Chain {
        problems: chain,
        mut interrupted,
        ends,
        other_lines,
        other_ids,
    } = walk(key, &own_id, &text);
    let valid = ends.iter().filter(|(_, _, own)| *own).count();
    let mut problems = Vec::new();
    let mut acknowledged = 0;
    let ack = head.and_then(|h| h.acknowledged.as_ref());
    let (before, after): (Vec<_>, Vec<_>) = chain
        .into_iter()
        .partition(|(n, _)| ack.is_some_and(|a| (*n as u64) < a.line));
    if let Some(a) = ack {
        let before_text: Vec<String> = before.iter().map(|(_, p)| p.clone()).collect();
        if digest(&before_text) == a.digest {
            acknowledged = before_text.len();
        } else {
            problems.push(format!(
                "the lines before the reseal at line {} changed after it",
                a.line
            ));
            problems.extend(before_text);
        }
    }
    problems.extend(after.into_iter().map(|(_, p)| p));
    let len = bytes.len() as u64;
    match head {
        None if len == 0 => {}
        // Only other states wrote here: this one has no head for it.
        None if valid == 0 && !other_lines.is_empty() => {}
        None => problems.push("no head recorded for this log (it was not written by this user's glovebox, or the head was removed)".into()),
        Some(h) => {
            match (h.bytes, h.lines) {
                (Some(b), Some(lines)) => {
                    let found = ends.iter().filter(|(end, _, _)| *end <= b).count() as u64;
                    if len < b {
                        problems.push(format!(
                            "the log is shorter than glovebox left it: {lines} lines expected, {found} found (lines were removed from its end, or it was emptied, deleted or replaced)"
                        ));
                    } else if b > 0 && !ends.iter().any(|(end, m, _)| *end == b && *m == h.mac) {
                        problems.push("the log does not end where glovebox left it (it was rewritten or replaced)".into());
                    } else if found != lines {
                        problems.push(format!(
                            "the log has {found} lines where glovebox left {lines}"
                        ));
                    } else {
                        // Every line this key signed up to the head still
                        // claims it: a line of this key edited to name
                        // another key is tampering, not a foreign line.
                        let foreign = other_lines
                            .iter()
                            .filter(|n| ends.get(*n - 1).is_some_and(|(end, _, _)| *end <= b))
                            .count() as u64;
                        if let Some(own) = h.own {
                            let claimed = found.saturating_sub(foreign);
                            if claimed < own {
                                problems.push(format!(
                                    "{} line(s) this state's key signed now claim another key (their key_id was changed): the log was edited",
                                    own - claimed
                                ));
                            }
                        }
                        // Lines of this key past the head (lines of other
                        // states' keys are reported as theirs).
                        let past = ends.iter().filter(|(end, _, own)| *end > b && *own).count();
                        if past > 0 {
                            interrupted.push(format!(
                                "{past} line(s) past where the head was last moved (a glovebox stopped, or could not move the head — a full state directory —, before recording them, or a call is being written); the next call takes them in"
                            ));
                        }
                    }
                }
                _ => {
                    let last = ends
                        .iter()
                        .rfind(|(_, _, own)| *own || other_lines.is_empty())
                        .map(|(_, m, _)| m.clone())
                        .unwrap_or_default();
                    if last != h.mac {
                        problems.push("the log does not end where glovebox last wrote it (lines were removed from its end, or it was replaced)".into());
                    }
                }
            }
            for b in &h.broken {
                problems.push(format!(
                    "continuity broken ({b}); once you have looked, `glovebox audit --reseal` records that you did"
                ));
            }
        }
    }
    Verification {
        valid_lines: valid,
        problems,
        interrupted,
        unfinished: unfinished_calls(&text),
        acknowledged,
        other_key_lines: other_lines,
        other_key_ids: other_ids,
        key_id: own_id,
        state_dir,
        key_missing: None,
    }
}

/// What `verify` reports for a log's bytes when the state directory
/// holds no key: nothing checked, nothing called edited; the keys the
/// lines claim, the calls left unfinished and an unterminated last line
/// are still said.
fn unverifiable(bytes: &[u8], state_dir: PathBuf) -> Verification {
    let text = String::from_utf8_lossy(bytes);
    let mut ids: Vec<String> = Vec::new();
    for body in text.lines().filter_map(|l| l.rsplit_once(" mac=")) {
        if let Some(id) = claimed_key_id(body.0) {
            if !ids.iter().any(|k| k == id) {
                ids.push(id.to_string());
            }
        }
    }
    let interrupted = if !text.is_empty() && !text.ends_with('\n') {
        vec![format!(
            "line {}: unterminated (an interrupted write; the next call removes it)",
            text.lines().count()
        )]
    } else {
        Vec::new()
    };
    Verification {
        valid_lines: 0,
        problems: Vec::new(),
        interrupted,
        unfinished: unfinished_calls(&text),
        acknowledged: 0,
        other_key_lines: Vec::new(),
        other_key_ids: ids,
        key_id: String::new(),
        key_missing: Some(state::key_path(&state_dir)),
        state_dir,
    }
}

/// The calls whose intent (`TOOL_STARTED call=ID`) has no result line.
fn unfinished_calls(text: &str) -> Vec<String> {
    let mut started: Vec<(usize, String, String, String)> = Vec::new();
    let mut finished = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let Some(e) = parse(line) else { continue };
        let Some(id) = e.field("call").map(String::from) else {
            continue;
        };
        if e.event == event::TOOL_STARTED {
            let name = e.field("name").unwrap_or_default().to_string();
            started.push((i + 1, id, name, e.ts.clone()));
        } else {
            finished.insert(id);
        }
    }
    started
        .into_iter()
        .filter(|(_, id, _, _)| !finished.contains(id))
        .map(|(n, id, name, ts)| {
            format!("line {n}: call {id} of `{name}` started at {ts} and never finished (glovebox stopped mid-call, or the call is still running)")
        })
        .collect()
}

/// The end of `file`, from the start of its last complete line (or the
/// whole file when it is short): enough to chain to, without reading a log
/// that grows with every call.
fn tail(file: &mut std::fs::File) -> std::io::Result<String> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut window: u64 = 8 * 1024;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // Enough when the window holds a full line before the last one
        // (two newlines: the end of an earlier line and of the last one).
        if start == 0 || text.matches('\n').count() >= 2 {
            return Ok(if start == 0 {
                text
            } else {
                // Drop the partial first line of the window.
                text.split_once('\n')
                    .map_or(text.clone(), |(_, rest)| rest.to_string())
            });
        }
        window = window.saturating_mul(4);
    }
}

/// The mac of the complete line ending exactly at byte `end` (empty when
/// `end` is 0 or no such line).
fn last_line_mac(file: &mut std::fs::File, end: u64) -> std::io::Result<String> {
    if end == 0 {
        return Ok(String::new());
    }
    let mut window: u64 = 8 * 1024;
    loop {
        let start = end.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = vec![0; (end - start) as usize];
        file.read_exact(&mut bytes)?;
        if bytes.last() != Some(&b'\n') {
            return Ok(String::new());
        }
        let body = &bytes[..bytes.len() - 1];
        match body.iter().rposition(|b| *b == b'\n') {
            Some(i) => return Ok(mac_of(&body[i + 1..])),
            None if start == 0 => return Ok(mac_of(body)),
            None => window = window.saturating_mul(4),
        }
    }
}

fn mac_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .rsplit_once(" mac=")
        .map(|(_, m)| m.to_string())
        .unwrap_or_default()
}

/// Complete lines in `file` signed with `key` (the whole log is read).
fn count_own(file: &mut std::fs::File, key: &[u8]) -> std::io::Result<u64> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    let chain = walk(key, &key_id(key), &String::from_utf8_lossy(&bytes));
    Ok(chain.ends.iter().filter(|(_, _, own)| *own).count() as u64)
}

/// Complete lines in `file`, read in blocks.
fn count_lines(file: &mut std::fs::File) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let got = file.read(&mut buf)?;
        if got == 0 {
            return Ok(n);
        }
        n += buf[..got].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

/// The mac of the last complete line (an unterminated one is an
/// interrupted write and is not chained to).
fn last_mac(text: &str) -> String {
    text.split_inclusive('\n')
        .rfind(|l| l.ends_with('\n'))
        .and_then(|l| l.trim_end().rsplit_once(" mac="))
        .map(|(_, m)| m.to_string())
        .unwrap_or_default()
}

/// Every field a record may hold (besides its `mac`); a record with
/// another one, or with one field twice, fails [`Log::verify`].
pub const FIELDS: &[&str] = &[
    "name",
    "params",
    "status",
    "kind",
    "duration_ms",
    "envKeys",
    "caller",
    "agent_id",
    "project_id",
    "reason",
    "creator",
    "detail",
    "permissions",
    "approver",
    "call",
    "bytes",
    "sha256",
    "expected_lines",
    "found_lines",
    "by",
    "problems",
    "acknowledged",
    "digest",
    "key_id",
    "egress",
    "network",
    "placeholders",
];

fn is_key(k: &str) -> bool {
    k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where a plain value ends: before the next ` key=`, or at the end.
fn next_field(value: &str) -> usize {
    let mut from = 0;
    while let Some(i) = value[from..].find(' ') {
        let at = from + i;
        let next = &value[at + 1..];
        if next.split_once('=').is_some_and(|(k, _)| is_key(k)) {
            return at;
        }
        from = at + 1;
    }
    value.len()
}

/// A line's entry (without its `key_id`, which names the signing key).
fn parse(line: &str) -> Option<Entry> {
    parse_body(line).map(|(mut e, _)| {
        e.fields.retain(|(k, _)| k != "key_id");
        e
    })
}

/// The record of a verified line, and an error when it is not a record
/// glovebox writes: text that is no field, an unknown field, a field twice.
fn strict(body: &str) -> Result<Entry, String> {
    let (entry, rest) =
        parse_body(body).ok_or_else(|| "not an audit record ([time] EVENT fields)".to_string())?;
    if !rest.is_empty() {
        return Err(format!(
            "text that is not a `key=value` field: {:?}",
            display(rest)
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (k, _) in &entry.fields {
        if !FIELDS.contains(&k.as_str()) {
            return Err(format!(
                "unknown field `{}` (a forged or foreign record)",
                display(k)
            ));
        }
        if seen.contains(&k.as_str()) {
            return Err(format!("field `{k}` appears twice (a forged field)"));
        }
        seen.push(k);
    }
    Ok(entry)
}

/// A line's entry and the text after its last field that no field took.
fn parse_body(line: &str) -> Option<(Entry, &str)> {
    let body = line.rsplit_once(" mac=").map_or(line, |(b, _)| b);
    let rest = body.strip_prefix('[')?;
    let (ts, rest) = rest.split_once("] ")?;
    let mut parts = rest.splitn(2, ' ');
    let event = parts.next()?.to_string();
    let mut fields = Vec::new();
    let mut left = "";
    if let Some(tail) = parts.next() {
        let mut rest = tail;
        left = rest;
        while let Some((key, after)) = rest.split_once('=') {
            if !is_key(key) {
                break;
            }
            // A JSON value (params, permissions) ends where its JSON ends,
            // so text inside it cannot pose as a field; any other value
            // runs to the next ` key=` (values may hold spaces).
            let json_end = (after.starts_with('{') || after.starts_with('['))
                .then(|| {
                    let mut values = serde_json::Deserializer::from_str(after)
                        .into_iter::<serde::de::IgnoredAny>();
                    match values.next() {
                        Some(Ok(_)) => Some(values.byte_offset()),
                        _ => None,
                    }
                })
                .flatten()
                .filter(|&end| after[end..].is_empty() || after[end..].starts_with(' '));
            let end = json_end.unwrap_or_else(|| next_field(after));
            fields.push((key.to_string(), after[..end].to_string()));
            match after[end..].strip_prefix(' ') {
                Some(next) => {
                    rest = next;
                    left = next;
                }
                None => {
                    left = "";
                    break;
                }
            }
        }
    }
    Some((
        Entry {
            ts: ts.to_string(),
            event,
            fields,
        },
        left,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `log.append_keyed`, its sync (if durable) waited for.
    fn append_now(log: &Log, key: &[u8], event: &Event, durable: bool) {
        if let Some(pending) = log.append_keyed(key, event, durable).unwrap() {
            pending.wait().unwrap();
        }
    }

    #[test]
    fn a_first_line_is_never_written_without_its_head() {
        let dir = tempfile::tempdir().unwrap();
        // The head cannot be made (its directory is a file: as a full
        // state directory, and for root too).
        std::fs::write(dir.path().join("state"), "").unwrap();
        let log = Log {
            path: dir.path().join("tools.log"),
            head: dir.path().join("state/x.head"),
            dir: None,
        };
        let key = vec![7u8; 32];
        for durable in [false, true] {
            let e = log.append_keyed(&key, &call(0), durable).unwrap_err();
            assert!(!e.written(), "{e:?}");
            assert!(matches!(e, AuditError::State(_)), "{e:?}");
            assert_eq!(std::fs::read(&log.path).unwrap(), b"", "nothing written");
        }
        // Made possible again: the first line goes in, and nothing reads
        // as a break or tampering.
        std::fs::remove_file(dir.path().join("state")).unwrap();
        append_now(&log, &key, &call(1), true);
        append_now(&log, &key, &call(2), false);
        let v = verify_with(&log, &key);
        assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
        let text = std::fs::read_to_string(&log.path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.contains("AUDIT_"), "{text}");
        // A log of other states' lines gets this state's head before its
        // first line too, and its lines are taken in as they are.
        let other = tempfile::tempdir().unwrap();
        let (theirs, _) = log_in(other.path());
        append_now(&theirs, &[8u8; 32], &call(3), false);
        let ours = Log {
            path: theirs.path.clone(),
            head: dir.path().join("state/y.head"),
            dir: None,
        };
        append_now(&ours, &key, &call(4), true);
        let v = verify_with(&ours, &key);
        assert!(v.problems.is_empty(), "{v:?}");
        assert_eq!(v.other_key_lines, vec![1], "{v:?}");
        assert_eq!(ours.read_head().unwrap().unwrap().own, Some(1));
    }

    #[test]
    fn without_a_key_nothing_is_verified_nor_called_edited() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        let started = Event::call_started("t", "c1", "{}", Who::default());
        append_now(&log, &key, &started, true);
        append_now(&log, &key, &call(1), false);
        let bytes = std::fs::read(&log.path).unwrap();
        let v = unverifiable(&bytes, dir.path().into());
        assert!(!v.intact() && !v.tampered(), "{v:?}");
        assert_eq!(v.key_missing, Some(dir.path().join("audit.key")));
        assert_eq!(v.other_key_ids, vec![key_id(&key)]);
        assert_eq!(v.unfinished.len(), 1, "{v:?}");
        assert_eq!(v.valid_lines, 0);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_736_434_800), "2025-01-09T15:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn text_inside_a_json_value_is_not_a_field() {
        let e = parse("[t] TOOL_EXECUTED name=x params={\"q\":\"a agent_id=admin status=success\",\"n\":[1, 2]} status=error caller=http mac=ab").unwrap();
        let keys: Vec<&str> = e.fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["name", "params", "status", "caller"], "{e:?}");
        assert_eq!(e.fields[2].1, "error");
        // Not JSON after all: read as before.
        let e = parse("[t] TOOL_DENIED name=x detail={oops status=y").unwrap();
        assert_eq!(e.fields[1], ("detail".into(), "{oops".into()));
        assert_eq!(e.fields[2], ("status".into(), "y".into()));
    }

    #[test]
    fn verify_accepts_only_records_glovebox_writes() {
        let ok = "[t] TOOL_EXECUTED name=x status=error kind=exit_code caller=cli key_id=ab";
        assert!(strict(ok).is_ok(), "{:?}", strict(ok));
        let twice = "[t] TOOL_EXECUTED name=x status=error status=success caller=cli";
        assert!(strict(twice)
            .unwrap_err()
            .contains("`status` appears twice"));
        let unknown = "[t] TOOL_EXECUTED name=x status=error admin=yes caller=cli";
        assert!(strict(unknown)
            .unwrap_err()
            .contains("unknown field `admin`"));
        assert!(strict("TOOL_EXECUTED name=x").is_err());
    }

    #[test]
    fn client_labels_stay_one_field() {
        assert_eq!(client_label("agent-7/a.b"), "agent-7/a.b");
        assert_eq!(
            client_label("a\n[x] TOOL_EXECUTED status=success"),
            "a%0A[x]%20TOOL_EXECUTED%20status%3Dsuccess"
        );
        assert_eq!(client_label("\u{1b}[2J\r%"), "%1B[2J%0D%25");
        assert_eq!(client_label("é"), "%C3%A9");
        let long = "é".repeat(200);
        assert_eq!(client_label(&long).len(), 64 * 6 + "...".len());
        let line = format!(
            "[t] TOOL_EXECUTED name=x agent_id={} mac=ab",
            client_label("a b=c\nd")
        );
        let e = parse(&line).unwrap();
        assert_eq!(e.fields.len(), 2, "{e:?}");
    }

    #[test]
    fn recent_entries_read_only_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log {
            path: dir.path().join("tools.log"),
            head: dir.path().join("head"),
            dir: None,
        };
        let text: String = (0..1000)
            .map(|i| format!("[t{i:04}] TOOL_EXECUTED name=x n={i:04} mac=ab\n"))
            .collect();
        std::fs::write(&log.path, &text).unwrap();
        let line_len = text.lines().next().unwrap().len() as u64 + 1;
        let recent = log.recent_entries(10 * line_len + 5).unwrap();
        assert_eq!(recent.len(), 10, "{recent:?}");
        assert_eq!(recent.last().unwrap().ts, "t0999");
        assert_eq!(log.recent_entries(1 << 30).unwrap().len(), 1000);
    }

    /// `call(n)` appended durably, its sync on the syncer thread.
    fn in_background(log: &Log, key: &[u8], n: usize) -> std::sync::Arc<Durable> {
        let pending = log.append_keyed(key, &call(n), true).unwrap().unwrap();
        pending.in_background()
    }

    #[test]
    fn a_background_sync_says_when_the_line_is_durable_and_when_it_failed() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        let durable = in_background(&log, &key, 1);
        assert!(durable.wait().is_ok());
        assert!(matches!(durable.decided(), Some(Ok(()))));
        // The line is written before the sync is known: it is in the log.
        let pending = log.append_keyed(&key, &call(2), true).unwrap().unwrap();
        assert!(std::fs::read_to_string(&log.path)
            .unwrap()
            .contains("call=2"));
        // The head gone before its sync: the sync fails, and says so to
        // every asker.
        std::fs::remove_file(&log.head).unwrap();
        let durable = pending.in_background();
        let e = durable.wait().unwrap_err();
        assert!(matches!(*e, AuditError::NotDurable { .. }), "{e:?}");
        assert!(durable.wait().is_err());
        assert!(matches!(durable.decided(), Some(Err(_))));
    }

    #[test]
    fn a_background_sync_signals_its_answer_through_a_pipe() {
        use std::io::Read;
        let byte = |fd: std::os::fd::OwnedFd| {
            let mut b = [9u8];
            std::fs::File::from(fd).read_exact(&mut b).unwrap();
            b[0]
        };
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        // Asked before and after the answer: the same byte.
        let durable = in_background(&log, &key, 1);
        let early = durable.signal(false).unwrap();
        durable.wait().unwrap();
        assert_eq!(byte(early), SIGNAL_DURABLE);
        assert_eq!(byte(durable.signal(false).unwrap()), SIGNAL_DURABLE);
        // A failed sync: another byte, unless the failure is tolerated.
        let pending = log.append_keyed(&key, &call(2), true).unwrap().unwrap();
        std::fs::remove_file(&log.head).unwrap();
        let durable = pending.in_background();
        assert!(durable.wait().is_err());
        assert_ne!(byte(durable.signal(false).unwrap()), SIGNAL_DURABLE);
        assert_eq!(byte(durable.signal(true).unwrap()), SIGNAL_DURABLE);
    }

    #[test]
    fn concurrent_durable_appends_keep_one_intact_chain() {
        let dir = tempfile::tempdir().unwrap();
        let log = std::sync::Arc::new(Log {
            path: dir.path().join("tools.log"),
            head: dir.path().join("head"),
            dir: None,
        });
        let key = vec![7u8; 32];
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (log, key) = (log.clone(), key.clone());
                std::thread::spawn(move || {
                    for i in 0..25 {
                        let e = Event {
                            kind: if i % 2 == 0 {
                                "TOOL_STARTED"
                            } else {
                                "TOOL_EXECUTED"
                            },
                            fields: vec![("call", format!("{t}-{i}"))],
                        };
                        append_now(&log, &key, &e, i % 2 == 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let bytes = std::fs::read(&log.path).unwrap();
        let v = check(
            &key,
            &bytes,
            log.read_head().unwrap().as_ref(),
            dir.path().into(),
        );
        assert!(v.intact(), "{v:?}");
        assert_eq!(String::from_utf8_lossy(&bytes).lines().count(), 200);
        let head = log.read_head().unwrap().unwrap();
        assert_eq!(head.lines, Some(200));
        assert_eq!(head.bytes, Some(bytes.len() as u64));
    }

    #[test]
    fn a_pinned_log_is_reached_whatever_happened_to_its_path() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join(".glee/audit")).unwrap();
        let log = Log {
            path: root.join(".glee/audit/tools.log"),
            head: d.path().join("head"),
            dir: None,
        }
        .pinned();
        let key = vec![7u8; 32];
        append_now(&log, &key, &call(0), false);
        // The path no longer leads there (a tool may take the search bit
        // off the root it may write; moving it away is the same to a
        // path): the next line still lands in the same log.
        std::fs::rename(&root, d.path().join("moved")).unwrap();
        append_now(&log, &key, &call(1), false);
        let text = std::fs::read_to_string(d.path().join("moved/.glee/audit/tools.log")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!root.exists());
    }

    /// A log in `dir` and the key its tests sign with.
    fn log_in(dir: &Path) -> (Log, Vec<u8>) {
        let log = Log {
            path: dir.join("tools.log"),
            head: dir.join("head"),
            dir: None,
        };
        (log, vec![7u8; 32])
    }

    fn call(n: usize) -> Event {
        Event {
            kind: "TOOL_EXECUTED",
            fields: vec![("call", n.to_string())],
        }
    }

    fn verify_with(log: &Log, key: &[u8]) -> Verification {
        let bytes = std::fs::read(&log.path).unwrap_or_default();
        let head = log.read_head().unwrap();
        check(
            key,
            &bytes,
            head.as_ref(),
            log.head.parent().unwrap().into(),
        )
    }

    /// The head file is in the slot format (both records' magic checked
    /// by reading it back as such).
    fn slotted(log: &Log) -> bool {
        matches!(
            log.load_head().unwrap().layout,
            Layout::Slots {
                newest: Some(_),
                ..
            }
        )
    }

    #[test]
    fn older_heads_are_read_and_upgraded_on_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        for n in 0..3 {
            append_now(&log, &key, &call(n), n == 0);
        }
        // The JSON object alone, as the glovebox before this format wrote
        // it; then the bare mac of the one before that: each the head as
        // the last append left it, in the old form.
        for json in [true, false] {
            let head = log.read_head().unwrap().unwrap();
            let old = if json {
                head.to_text()
            } else {
                format!("{}\n", head.mac)
            };
            std::fs::write(&log.head, &old).unwrap();
            assert!(!slotted(&log));
            let v = verify_with(&log, &key);
            assert!(v.intact(), "{old}: {v:?}");
            append_now(&log, &key, &call(9), true);
            assert!(slotted(&log), "{old}: upgraded");
            let meta = std::fs::metadata(&log.head).unwrap();
            assert_eq!(meta.mode() & 0o777, 0o600);
            let v = verify_with(&log, &key);
            assert!(v.intact(), "{old}: {v:?}");
            assert!(!std::fs::read_to_string(&log.path)
                .unwrap()
                .contains("AUDIT_BREAK"));
            let head = log.read_head().unwrap().unwrap();
            assert_eq!(
                head.lines,
                Some(std::fs::read_to_string(&log.path).unwrap().lines().count() as u64)
            );
        }
    }

    #[test]
    fn a_torn_head_write_falls_back_to_the_previous_record() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        for n in 0..5 {
            append_now(&log, &key, &call(n), false);
        }
        // A crash tore the last head write: its slot's record is garbled.
        let Layout::Slots {
            size,
            newest: Some((slot, _)),
        } = log.load_head().unwrap().layout
        else {
            panic!("not slotted");
        };
        let mut bytes = std::fs::read(&log.head).unwrap();
        bytes[(slot * size) as usize + 40] ^= 0x20;
        std::fs::write(&log.head, &bytes).unwrap();
        // The record before it stands: the last line is past the head, and
        // chains, so it is taken in, not a break.
        assert_eq!(log.read_head().unwrap().unwrap().lines, Some(4));
        let v = verify_with(&log, &key);
        assert!(v.intact(), "{v:?}");
        assert_eq!(v.interrupted.len(), 1, "{v:?}");
        append_now(&log, &key, &call(5), true);
        let v = verify_with(&log, &key);
        assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
        assert_eq!(log.read_head().unwrap().unwrap().lines, Some(6));
    }

    #[test]
    fn an_unreadable_head_is_a_break() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        for n in 0..3 {
            append_now(&log, &key, &call(n), false);
        }
        let mut bytes = std::fs::read(&log.head).unwrap();
        let half = bytes.len() / 2;
        bytes[40] ^= 1;
        bytes[half + 40] ^= 1;
        std::fs::write(&log.head, &bytes).unwrap();
        let v = verify_with(&log, &key);
        assert!(!v.intact(), "{v:?}");
        assert!(format!("{v:?}").contains("could not be read"), "{v:?}");
        append_now(&log, &key, &call(3), true);
        assert!(std::fs::read_to_string(&log.path)
            .unwrap()
            .contains("AUDIT_BREAK"));
        let v = verify_with(&log, &key);
        assert!(!v.intact(), "still a break after an append: {v:?}");
    }

    #[test]
    fn a_cut_after_many_appends_is_still_caught() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = log_in(dir.path());
        for n in 0..301 {
            append_now(&log, &key, &call(n), n % 2 == 0);
        }
        assert!(verify_with(&log, &key).intact());
        let text = std::fs::read_to_string(&log.path).unwrap();
        let cut: String = text.lines().take(300).map(|l| format!("{l}\n")).collect();
        std::fs::write(&log.path, cut).unwrap();
        let v = verify_with(&log, &key);
        assert!(!v.intact(), "the last line cut: {v:?}");
        append_now(&log, &key, &call(301), true);
        assert!(std::fs::read_to_string(&log.path)
            .unwrap()
            .contains("AUDIT_BREAK"));
        assert!(!verify_with(&log, &key).intact());
        assert_eq!(log.read_head().unwrap().unwrap().broken.len(), 1);
    }

    /// Set in the copies of the test binary that
    /// `concurrent_appends_from_two_processes_keep_one_intact_chain` starts:
    /// the directory of the shared log.
    const CHILD_DIR: &str = "GLOVEBOX_TEST_AUDIT_CHILD_DIR";

    #[test]
    fn concurrent_appends_from_two_processes_keep_one_intact_chain() {
        const PER_PROCESS: usize = 3 * 40;
        if let Some(dir) = std::env::var_os(CHILD_DIR) {
            // A child: three threads appending to the shared log.
            let (log, key) = log_in(Path::new(&dir));
            std::thread::scope(|s| {
                for t in 0..3 {
                    let (log, key) = (&log, &key);
                    s.spawn(move || {
                        for i in 0..PER_PROCESS / 3 {
                            log.append_keyed(key, &call(t * 1000 + i), i % 2 == 0)
                                .unwrap();
                        }
                    });
                }
            });
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "audit::tests::concurrent_appends_from_two_processes_keep_one_intact_chain",
                        "--test-threads=1",
                    ])
                    .env(CHILD_DIR, dir.path())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{said}{out:?}");
            // The child really ran the test (not filtered out).
            assert!(said.contains("1 passed"), "{said}");
        }
        let (log, key) = log_in(dir.path());
        let v = verify_with(&log, &key);
        assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
        let text = std::fs::read_to_string(&log.path).unwrap();
        assert_eq!(text.lines().count(), 2 * PER_PROCESS);
        assert!(!text.contains("AUDIT_"), "no break, no repair: {text}");
        let head = log.read_head().unwrap().unwrap();
        assert_eq!(head.lines, Some(2 * PER_PROCESS as u64));
        assert_eq!(head.own, Some(2 * PER_PROCESS as u64));
        assert_eq!(head.bytes, Some(text.len() as u64));
    }

    #[test]
    fn lines_parse_back() {
        let e = parse("[2025-01-09T15:00:10Z] TOOL_EXECUTED name=weather params={\"q\": \"a b\"} status=success mac=ab").unwrap();
        assert_eq!(e.event, "TOOL_EXECUTED");
        assert_eq!(
            e.fields[1],
            ("params".to_string(), "{\"q\": \"a b\"}".to_string())
        );
        assert_eq!(e.fields[2].1, "success");
    }
}
