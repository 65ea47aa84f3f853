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
//! as tampering, and never as intact. Editing, inserting or deleting a line breaks the
//! chain; truncating the tail is caught by the head (the last mac written)
//! kept in the state directory. Writers take an exclusive `flock` on
//! the log, read the last mac, append the line with one `write` on an
//! `O_APPEND` descriptor and move the head: safe for concurrent processes.
//! A crash mid-write leaves at most an unterminated last line, which the
//! next writer closes with a newline and `--verify` reports without
//! doubting the lines before it. Secret values never reach the log: the
//! caller redacts them.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use crate::state::{self, StateError};

/// Errors of the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The state directory (key, head).
    #[error(transparent)]
    State(#[from] StateError),
    /// The log file.
    #[error("cannot use the audit log {path:?}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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

/// One event to log: its type and `key=value` fields, in order.
#[derive(Debug, Clone)]
pub struct Event {
    /// `TOOL_CREATED`, `TOOL_APPROVED`, `TOOL_EXECUTED`, `TOOL_DENIED`, …
    pub kind: &'static str,
    /// Fields; values are written as they are (callers keep them on one
    /// line and redacted).
    pub fields: Vec<(&'static str, String)>,
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

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Lines whose mac checked out.
    pub valid_lines: usize,
    /// Signs of tampering or damage, each naming a line number (1-based);
    /// empty when none.
    pub problems: Vec<String>,
    /// Lines (1-based) signed with another key than this state's: written
    /// by a glovebox with another state directory; this key cannot vouch
    /// for them.
    pub other_key_lines: Vec<usize>,
    /// The key ids of those lines, in order of appearance.
    pub other_key_ids: Vec<String>,
    /// The id of the key used to verify.
    pub key_id: String,
    /// The state directory that key is in.
    pub state_dir: PathBuf,
}

impl Verification {
    /// True when every line checked out with this state's key.
    pub fn intact(&self) -> bool {
        self.problems.is_empty() && self.other_key_lines.is_empty()
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

/// The audit log of one project.
#[derive(Debug, Clone)]
pub struct Log {
    path: PathBuf,
    head: PathBuf,
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
/// log: MCP `clientInfo` name and version, the `X-Agent-ID` and
/// `X-Project-ID` headers, a tool name taken from a request, an agent's
/// name for a creation. Cut to [`MAX_LABEL_BYTES`] on a character boundary, then
/// every control character, space, `=`, `%` and non-ASCII character
/// percent-encoded, so it can neither end the line, nor pose as another
/// `key=value` field, nor hide as a look-alike character.
pub fn client_label(raw: &str) -> String {
    let mut end = raw.len().min(MAX_LABEL_BYTES);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end);
    for c in raw[..end].chars() {
        if c.is_ascii_graphic() && c != '=' && c != '%' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

impl Log {
    /// The log of the project at `root`.
    pub fn for_project(root: &Path) -> Result<Log, AuditError> {
        Ok(Log {
            path: root.join(".glee/audit/tools.log"),
            head: state::dir()?
                .join("audit")
                .join(format!("{}.head", state::project_key(root))),
        })
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

    /// Appends `event`, chained to the previous line.
    pub fn append(&self, event: &Event) -> Result<(), AuditError> {
        let key = state::key()?;
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        let lock = nix::fcntl::Flock::lock(
            file.try_clone().map_err(|e| self.io(e))?,
            nix::fcntl::FlockArg::LockExclusive,
        )
        .map_err(|(_, e)| self.io(e.into()))?;
        // Only the end of the log matters: the last complete line's mac,
        // and whether a crash left the very last line unterminated.
        let text = tail(&mut file).map_err(|e| self.io(e))?;
        let prev = last_mac(&text);
        let mut line = format!("[{}] {}", now(), event.kind);
        for (k, v) in &event.fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(&field_value(v));
        }
        line.push_str(" key_id=");
        line.push_str(&key_id(&key));
        let m = mac(&key, &prev, &line);
        let mut out = String::new();
        if !text.is_empty() && !text.ends_with('\n') {
            out.push('\n'); // close a line a crash left unterminated
        }
        out.push_str(&line);
        out.push_str(" mac=");
        out.push_str(&m);
        out.push('\n');
        file.write_all(out.as_bytes()).map_err(|e| self.io(e))?;
        if let Some(dir) = self.head.parent() {
            fs::create_dir_all(dir).map_err(|e| {
                AuditError::State(StateError::Io {
                    path: dir.to_path_buf(),
                    source: e,
                })
            })?;
        }
        state::write_atomic(&self.head, format!("{m}\n").as_bytes())?;
        drop(lock);
        Ok(())
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

    /// Checks the chain and the head.
    pub fn verify(&self) -> Result<Verification, AuditError> {
        let key = state::key()?;
        let own_id = key_id(&key);
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(self.io(e)),
        };
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let split = |raw: &str| {
            raw.strip_suffix('\n')
                .and_then(|l| l.rsplit_once(" mac="))
                .map(|(b, m)| (b.to_string(), m.to_string()))
        };
        let mut problems = Vec::new();
        let mut other_key_lines = Vec::new();
        let mut other_key_ids: Vec<String> = Vec::new();
        let mut prev = String::new();
        // The mac of the last line this key signed: where the head points.
        let mut own_last = String::new();
        let mut valid = 0;
        for (i, raw) in lines.iter().enumerate() {
            let n = i + 1;
            match split(raw) {
                Some((body, m)) if mac(&key, &prev, &body) == m => {
                    prev = m.clone();
                    own_last = m;
                    valid += 1;
                    if let Err(why) = strict(&body) {
                        problems.push(format!("line {n}: {why}"));
                    }
                    continue;
                }
                Some((body, m)) if raw.ends_with('\n') => {
                    match claimed_key_id(&body) {
                        Some(other) if other != own_id => {
                            // Another state's key: chain on from its mac.
                            other_key_lines.push(n);
                            if !other_key_ids.iter().any(|k| k == other) {
                                other_key_ids.push(other.to_string());
                            }
                            prev = m;
                            continue;
                        }
                        _ => problems.push(format!(
                            "line {n}: mac does not match (edited, inserted, removed or reordered lines)"
                        )),
                    }
                }
                Some(_) => {}
                None if !raw.ends_with('\n') => {}
                None => problems.push(format!("line {n}: no mac (not written by glovebox)")),
            }
            if !raw.ends_with('\n') {
                problems.push(format!("line {n}: unterminated (an interrupted write)"));
            }
            // Chain past a bad line when the next one was written after it
            // (an interrupted write, closed by the next writer); otherwise
            // continue from the mac the bad line claims.
            let next_chains = lines
                .get(i + 1)
                .and_then(|r| split(r))
                .is_some_and(|(b, m)| mac(&key, &prev, &b) == m);
            if !next_chains {
                if let Some((_, m)) = split(raw) {
                    prev = m;
                }
            }
        }
        let expected_end = if other_key_lines.is_empty() {
            prev
        } else {
            own_last
        };
        match fs::read_to_string(&self.head) {
            Ok(h) => {
                let last = h.trim();
                if last != expected_end {
                    problems.push(
                        "the log does not end where glovebox last wrote it (lines were removed from its end, or it was replaced)"
                            .to_string(),
                    );
                }
            }
            Err(_) if text.is_empty() || valid == 0 && !other_key_lines.is_empty() => {}
            Err(_) => problems.push("no head recorded for this log (it was not written by this user's glovebox, or the head was removed)".into()),
        }
        Ok(Verification {
            valid_lines: valid,
            problems,
            other_key_lines,
            other_key_ids,
            key_id: own_id,
            state_dir: state::dir()?,
        })
    }
}

/// The mac of the last complete line (an unterminated one is an
/// interrupted write and is not chained to).
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
    "key_id",
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
mod tests {
    use super::*;

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
    fn client_labels_stay_one_field() {
        assert_eq!(client_label("agent-7/a.b"), "agent-7/a.b");
        assert_eq!(
            client_label("a\n[x] TOOL_EXECUTED status=success"),
            "a%0A[x]%20TOOL_EXECUTED%20status%3Dsuccess"
        );
        assert_eq!(client_label("\u{1b}[2J\r%"), "%1B[2J%0D%25");
        assert_eq!(client_label("é"), "%C3%A9");
        let long = "é".repeat(200);
        assert_eq!(client_label(&long).len(), 64 * 6);
        let line = format!(
            "[t] TOOL_EXECUTED name=x agent_id={} mac=ab",
            client_label("a b=c\nd")
        );
        let e = parse(&line).unwrap();
        assert_eq!(e.fields.len(), 2, "{e:?}");
    }

    #[test]
    fn values_cannot_end_the_line_or_pose_as_fields() {
        assert_eq!(field_value("plain text"), "plain text");
        assert_eq!(field_value("{\"q\":\"a=b\"}"), "{\"q\":\"a=b\"}");
        assert_eq!(
            field_value("x status=success\u{1b}[2K\n\\"),
            "x status\\x3dsuccess\\x1b[2K\\n\\\\"
        );
        assert_eq!(field_value("\u{9b}\u{202e}"), "\\u{009b}\\u{202e}");
        // JSON with a raw newline between tokens is escaped like text.
        assert_eq!(field_value("{\n}"), "{\\n}");
        let line = format!(
            "[t] TOOL_DENIED name=x detail={} reason=ceiling",
            field_value("a reason=ok status=success")
        );
        let e = strict(&line).unwrap();
        assert_eq!(e.fields.len(), 3, "{e:?}");
        assert_eq!(e.fields[2], ("reason".into(), "ceiling".into()));
        assert_eq!(display("a\u{1b}b"), "a\\x1bb");
        assert_eq!(display("a\\b"), "a\\b");
    }

    #[test]
    fn strict_records_have_known_fields_once() {
        assert!(strict("[t] TOOL_EXECUTED name=x status=error caller=cli").is_ok());
        let dup = strict("[t] TOOL_EXECUTED name=x status=error status=success").unwrap_err();
        assert!(dup.contains("`status` appears twice"), "{dup}");
        let unknown = strict("[t] TOOL_EXECUTED name=x verdict=ok").unwrap_err();
        assert!(unknown.contains("unknown field `verdict`"), "{unknown}");
        assert!(strict("[t] TOOL_EXECUTED junk").is_err());
        assert!(strict("no record").is_err());
        // envKeys is a field of its own, not part of duration_ms.
        let e =
            strict("[t] TOOL_EXECUTED name=x duration_ms=3 envKeys=[\"A\"] caller=cli").unwrap();
        assert_eq!(e.fields[1], ("duration_ms".into(), "3".into()));
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
