//! An audit line's text: how an [`Event`] is written
//! (`[time] EVENT key=value … key_id=…`, each value through
//! [`field_value`]), the sanitisers for what callers supply
//! ([`client_label`]) and what is shown ([`display`]), and reading a line
//! back ([`Entry`], strictly for `--verify`). The ` mac=` that ends a
//! line is [`super::chain`]'s.

use serde::Serialize;

use super::event::{self, Event};

/// The current time, RFC 3339 UTC with seconds.
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

pub(super) fn rfc3339(secs: u64) -> String {
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

impl Event {
    /// The line of this event without its mac, ending with the id of the
    /// key that signs it.
    pub(super) fn render(&self, key_id: &str) -> String {
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

/// Every field a record may hold (besides its `mac`); a record with
/// another one, or with one field twice, fails [`Log::verify`](super::Log::verify).
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
pub(super) fn parse(line: &str) -> Option<Entry> {
    parse_body(line).map(|(mut e, _)| {
        e.fields.retain(|(k, _)| k != "key_id");
        e
    })
}

/// The record of a verified line, and an error when it is not a record
/// glovebox writes: text that is no field, an unknown field, a field twice.
pub(super) fn strict(body: &str) -> Result<Entry, String> {
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
