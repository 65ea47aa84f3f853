//! Declared secrets: read from the caller's environment, injected only into
//! the tool that declares them, and redacted from everything that comes
//! back (`[REDACTED:NAME]`).

use indexmap::IndexMap;
use serde_json::Value;

use crate::manifest::model::Permissions;

/// Where a caller's secrets come from.
#[derive(Debug, Clone, Default)]
pub enum SecretSource {
    /// The supervisor's own environment (the CLI).
    #[default]
    Environment,
    /// An explicit map (servers, tests).
    Map(IndexMap<String, String>),
}

impl SecretSource {
    fn get(&self, name: &str) -> Option<String> {
        match self {
            SecretSource::Environment => std::env::var(name).ok(),
            SecretSource::Map(m) => m.get(name).cloned(),
        }
    }
}

/// Resolves the declared secrets. `Err(names)`: required ones are missing.
pub fn resolve(
    permissions: &Permissions,
    source: &SecretSource,
) -> Result<IndexMap<String, String>, Vec<String>> {
    let mut found = IndexMap::new();
    let mut missing = Vec::new();
    for (name, spec) in &permissions.secrets {
        match source.get(name) {
            Some(v) => {
                found.insert(name.clone(), v);
            }
            None if spec.required => missing.push(name.clone()),
            None => {}
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(missing)
    }
}

/// Errors making a call's placeholder secrets.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// `permissions.secrets.NAME.hosts` holds a pattern that does not parse.
    #[error("permissions.secrets.{name}.hosts: {source}")]
    Hosts {
        /// The secret.
        name: String,
        /// The pattern's error.
        #[source]
        source: crate::net::PatternError,
    },
    /// The placeholder could not be made.
    #[error(transparent)]
    Placeholder(#[from] crate::egress::placeholder::PlaceholderError),
}

impl SecretError {
    /// The Outcome's error kind: a `hosts` pattern that does not parse is
    /// the manifest's fault; a placeholder that cannot be made is the
    /// secret's.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        use crate::kind::ErrorKind;
        match self {
            SecretError::Hosts { .. } => ErrorKind::ManifestInvalid,
            SecretError::Placeholder(_) => ErrorKind::SecretMissing,
        }
    }
}

/// The placeholder secrets of a call: each set secret with `hosts` gets a
/// fresh placeholder (see [`crate::egress::placeholder`]).
pub fn placeholders(
    permissions: &Permissions,
    values: &IndexMap<String, String>,
) -> Result<crate::egress::placeholder::Placeholders, SecretError> {
    use crate::egress::placeholder::{Inject, Placeholders, Secret};
    let mut out = Vec::new();
    for (name, spec) in &permissions.secrets {
        let (Some(hosts), Some(value)) = (&spec.hosts, values.get(name)) else {
            continue;
        };
        let hosts = crate::net::Allowlist::parse(hosts).map_err(|source| SecretError::Hosts {
            name: name.clone(),
            source,
        })?;
        let inject = spec.inject.as_ref().map(|i| Inject {
            header: i.header.clone(),
            format: i.format.clone(),
        });
        out.push(Secret::new(name, value, hosts, inject, spec.body)?);
    }
    Ok(Placeholders::new(out))
}

/// The values the jail sees: each placeholder secret's placeholder in
/// place of its value.
pub fn jail_values(
    values: &IndexMap<String, String>,
    placeholders: &crate::egress::placeholder::Placeholders,
) -> IndexMap<String, String> {
    values
        .iter()
        .map(|(k, v)| {
            let shown = placeholders
                .iter()
                .find(|s| s.name() == k)
                .map(|s| s.placeholder().to_string())
                .unwrap_or_else(|| v.clone());
            (k.clone(), shown)
        })
        .collect()
}

/// The declared secrets that are set (for redaction when a call fails
/// before `resolve`).
pub fn available(permissions: &Permissions, source: &SecretSource) -> IndexMap<String, String> {
    permissions
        .secrets
        .keys()
        .filter_map(|name| source.get(name).map(|v| (name.clone(), v)))
        .collect()
}

/// Shortest trailing piece of a secret that is redacted after a cut.
pub const MIN_CUT_PREFIX: usize = 4;

/// Secrets at least this long are also redacted in base64 and hex.
pub const MIN_ENCODED_SECRET: usize = 16;

/// Replaces every secret value found in text with `[REDACTED:NAME]`: the
/// one redactor of every path that returns or logs anything (command,
/// python and http output, errors, stderr, the audit log's parameters).
///
/// It matches each value as it is, in its JSON-escaped, form-encoded and
/// percent-encoded forms, and — for values of at least
/// [`MIN_ENCODED_SECRET`] bytes — its base64 (standard and URL-safe, at
/// every byte alignment, so inside a longer encoding too) and hex forms.
/// Text holding backslash escapes is also decoded the way JSON decodes a
/// string (`\/`, `\uXXXX`, surrogate pairs, any mix) and a value found in
/// the decoded text is redacted over the span of its escaped form, and so
/// is a value found by [`crate::egress::reflect::find`]: HTML character
/// references (`&#x2F;`, `&#47;`, `&sol;`, mixed with plain characters),
/// percent and JSON escapes mixed with them, and the value with its
/// letters' case changed (`SK-LIVE-…`), in every view. Text
/// that was cut (an excerpt, an output cap) is redacted whole first, by
/// the caller, and [`Redactor::text_cut`] redacts a trailing prefix of a
/// value (at least [`MIN_CUT_PREFIX`] characters) left by the cut.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (needle, replacement), longest needle first.
    pairs: Vec<(String, String)>,
    /// (value, replacement): the plain values, for decoded text.
    values: Vec<(String, String)>,
    /// Every other form of `values` (same order).
    forms: crate::egress::reflect::Finder,
}

/// The parts of `value`'s base64 encodings that depend on `value` alone,
/// at each of the three byte alignments it may sit at in a longer text.
fn base64_forms(value: &[u8]) -> Vec<String> {
    use base64::Engine;
    let mut out = Vec::new();
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for k in 0..3usize {
            let mut bytes = vec![0u8; k];
            bytes.extend_from_slice(value);
            let enc = engine.encode(&bytes);
            // Drop the group holding the k filler bytes, and a last group
            // whose bits also depend on what follows.
            let head = if k > 0 { 4 } else { 0 };
            let full = bytes.len() / 3 * 4;
            if full > head {
                out.push(enc[head..full].to_string());
            }
        }
    }
    out
}

/// `text` decoded as the inside of a JSON string where it holds escapes:
/// the decoded text and, for each of its bytes, the byte range of `text`
/// it came from. `None` when there is nothing to decode.
fn json_decoded(text: &str) -> Option<(String, Vec<(usize, usize)>)> {
    // Without `\/` or `\u`, every escape is the one serde_json writes, and
    // the JSON-escaped form of each value is already a needle.
    if !text.contains("\\/") && !text.contains("\\u") {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    let hex4 = |at: usize| -> Option<u32> {
        let h = text.get(at..at + 4)?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(h, 16).ok()
    };
    let mut i = 0;
    let push =
        |out: &mut String, map: &mut Vec<(usize, usize)>, c: char, from: usize, to: usize| {
            let before = out.len();
            out.push(c);
            for _ in before..out.len() {
                map.push((from, to));
            }
        };
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let simple = match bytes[i + 1] {
                b'"' => Some('"'),
                b'\\' => Some('\\'),
                b'/' => Some('/'),
                b'b' => Some('\u{8}'),
                b'f' => Some('\u{c}'),
                b'n' => Some('\n'),
                b'r' => Some('\r'),
                b't' => Some('\t'),
                _ => None,
            };
            if let Some(c) = simple {
                push(&mut out, &mut map, c, i, i + 2);
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'u' {
                if let Some(u) = hex4(i + 2) {
                    // A surrogate pair: \uD8xx\uDCxx.
                    if (0xD800..0xDC00).contains(&u) && text.get(i + 6..i + 8) == Some("\\u") {
                        if let Some(l) = hex4(i + 8).filter(|l| (0xDC00..0xE000).contains(l)) {
                            let c = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
                            if let Some(c) = char::from_u32(c) {
                                push(&mut out, &mut map, c, i, i + 12);
                                i += 12;
                                continue;
                            }
                        }
                    }
                    if let Some(c) = char::from_u32(u) {
                        push(&mut out, &mut map, c, i, i + 6);
                        i += 6;
                        continue;
                    }
                }
            }
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        let n = c.len_utf8();
        push(&mut out, &mut map, c, i, i + n);
        i += n;
    }
    Some((out, map))
}

impl Redactor {
    /// A redactor for these secret values (empty values are ignored). The
    /// JSON-escaped, form-encoded and percent-encoded forms of each value
    /// are redacted too, and base64 and hex for long values.
    pub fn new(secrets: &IndexMap<String, String>) -> Self {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut values = Vec::new();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            let mark = format!("[REDACTED:{name}]");
            pairs.push((value.clone(), mark.clone()));
            values.push((value.clone(), mark.clone()));
            let escaped = Value::String(value.clone()).to_string();
            // The forms a value takes in JSON text and in a URL (an http
            // tool's error may quote a Location or a query).
            let mut forms = vec![
                escaped[1..escaped.len() - 1].to_string(),
                url::form_urlencoded::byte_serialize(value.as_bytes()).collect(),
                percent_encoding::utf8_percent_encode(value, crate::template::SEGMENT).to_string(),
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            ];
            if value.len() >= MIN_ENCODED_SECRET {
                forms.extend(base64_forms(value.as_bytes()));
                forms.push(hex::encode(value.as_bytes()));
                forms.push(hex::encode_upper(value.as_bytes()));
            }
            for form in forms {
                if form != *value && !pairs.iter().any(|(p, _)| *p == form) {
                    pairs.push((form, mark.clone()));
                }
            }
        }
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        values.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        let plain: Vec<&[u8]> = values.iter().map(|(v, _)| v.as_bytes()).collect();
        let forms = crate::egress::reflect::Finder::new(&plain, MIN_ENCODED_SECRET);
        Redactor {
            pairs,
            values,
            forms,
        }
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `text` with every secret value replaced.
    pub fn text(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        let mut out = text.to_string();
        for (needle, mark) in &self.pairs {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), mark);
            }
        }
        self.reflected(self.escaped(out))
    }

    /// Values in any other form [`crate::egress::reflect::find`] knows
    /// (HTML references, escapes of every kind mixed, another case),
    /// replaced over the span of that form.
    fn reflected(&self, text: String) -> String {
        let found = self.forms.find(text.as_bytes());
        let spans: Vec<(usize, usize, &str)> = found
            .iter()
            .filter(|f| text.is_char_boundary(f.start) && text.is_char_boundary(f.end))
            .map(|f| (f.start, f.end, self.values[f.value].1.as_str()))
            .collect();
        replace_spans(&text, spans)
    }

    /// `text` (whole, redacted or not) that was cut at its end: redacted,
    /// and a trailing prefix of a secret (in any of its forms, at least
    /// [`MIN_CUT_PREFIX`] characters) replaced too.
    pub fn text_cut(&self, text: &str) -> String {
        let out = self.text(text);
        if self.is_empty() {
            return out;
        }
        self.tail(out)
    }

    /// `text` redacted whole, then cut to at most `max_bytes` (on a
    /// character boundary) with a trailing prefix of a secret left by the
    /// cut redacted too; `true` when something was cut off.
    pub fn cut(&self, text: &str, max_bytes: usize) -> (String, bool) {
        let whole = self.text(text);
        if whole.len() <= max_bytes {
            return (whole, false);
        }
        let mut end = max_bytes;
        while !whole.is_char_boundary(end) {
            end -= 1;
        }
        (self.tail(whole[..end].to_string()), true)
    }

    /// Values hidden behind JSON escapes: found in the decoded text, the
    /// span of their escaped form replaced.
    fn escaped(&self, text: String) -> String {
        let Some((decoded, map)) = json_decoded(&text) else {
            return text;
        };
        let mut spans: Vec<(usize, usize, &str)> = Vec::new();
        for (value, mark) in &self.values {
            for (at, _) in decoded.match_indices(value.as_str()) {
                let (from, to) = (map[at].0, map[at + value.len() - 1].1);
                if !spans.iter().any(|&(f, t, _)| from < t && f < to) {
                    spans.push((from, to, mark));
                }
            }
        }
        replace_spans(&text, spans)
    }

    /// A trailing prefix of a secret left by a cut, replaced.
    fn tail(&self, text: String) -> String {
        // What a cut leaves after the last whole character of a value: a
        // replaced partial UTF-8 sequence, half an escape (`\u00`, `%2`).
        let body = cut_debris(&text);
        let mut best: Option<(usize, &str)> = None;
        for (needle, mark) in &self.pairs {
            if let Some(start) = trailing_prefix(body, needle) {
                if best.is_none_or(|(b, _)| start < b) {
                    best = Some((start, mark));
                }
            }
        }
        if let Some((decoded, map)) = json_decoded(body) {
            for (value, mark) in &self.values {
                if let Some(start) = trailing_prefix(&decoded, value) {
                    let from = map[start].0;
                    if best.is_none_or(|(b, _)| from < b) {
                        best = Some((from, mark));
                    }
                }
            }
        }
        // HTML references, mixed escapes, another case.
        let values: Vec<&[u8]> = self.values.iter().map(|(v, _)| v.as_bytes()).collect();
        if let Some((from, i)) =
            crate::egress::reflect::trailing(&values, body.as_bytes(), MIN_CUT_PREFIX)
        {
            if text.is_char_boundary(from) && best.is_none_or(|(b, _)| from < b) {
                best = Some((from, &self.values[i].1));
            }
        }
        match best {
            Some((start, mark)) => format!("{}{mark}", &text[..start]),
            None => text,
        }
    }

    /// Every string in `value` (keys included) with secrets replaced.
    pub fn value(&self, value: Value) -> Value {
        if self.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| (self.text(&k), self.value(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// `text` without what a cut leaves dangling at its end: U+FFFD from a
/// split UTF-8 sequence, and an unfinished `\`, `\uXXX` or `%X` escape.
fn cut_debris(text: &str) -> &str {
    let mut body = text.trim_end_matches('\u{FFFD}');
    let tail_start = body.len().saturating_sub(5);
    if let Some(at) = body.get(tail_start..).and_then(|t| t.rfind('\\')) {
        let rest = &body[tail_start + at + 1..];
        let unfinished = rest.is_empty()
            || (rest.starts_with('u')
                && rest.len() < 5
                && rest[1..].bytes().all(|b| b.is_ascii_hexdigit()));
        if unfinished {
            body = &body[..tail_start + at];
        }
    }
    let tail_start = body.len().saturating_sub(2);
    if let Some(at) = body.get(tail_start..).and_then(|t| t.rfind('%')) {
        let rest = &body[tail_start + at + 1..];
        if rest.len() < 2 && rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            body = &body[..tail_start + at];
        }
    }
    body
}

/// Where `text` ends with a proper prefix of `needle` at least
/// [`MIN_CUT_PREFIX`] characters long (the longest such prefix).
fn trailing_prefix(text: &str, needle: &str) -> Option<usize> {
    let mut ends: Vec<usize> = needle
        .char_indices()
        .map(|(i, _)| i)
        .skip(MIN_CUT_PREFIX)
        .collect();
    ends.reverse();
    for end in ends {
        if text.ends_with(&needle[..end]) {
            return Some(text.len() - end);
        }
    }
    None
}

/// `text` with each (from, to) byte span replaced by its mark.
fn replace_spans(text: &str, mut spans: Vec<(usize, usize, &str)>) -> String {
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort_by_key(|s| s.0);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to, mark) in spans {
        if from < at {
            continue;
        }
        out.push_str(&text[at..from]);
        out.push_str(mark);
        at = to;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_with_hosts_become_placeholders_for_the_jail_only() {
        let permissions: Permissions = serde_json::from_value(json!({
            "network": {"allow": ["api.example.com:443"]},
            "secrets": {
                "HOSTED": {"hosts": ["api.example.com:443"]},
                "PLAIN": {},
                "UNSET": {"required": false, "hosts": ["api.example.com"]}
            }
        }))
        .unwrap_or_default();
        let mut values = IndexMap::new();
        values.insert("HOSTED".to_string(), "sk-abcdefgh12345678".to_string());
        values.insert("PLAIN".to_string(), "plainvalue".to_string());
        let p = placeholders(&permissions, &values).unwrap_or_default();
        assert_eq!(p.iter().map(|s| s.name()).collect::<Vec<_>>(), ["HOSTED"]);
        let jail = jail_values(&values, &p);
        assert_eq!(jail["PLAIN"], "plainvalue");
        assert_ne!(jail["HOSTED"], values["HOSTED"]);
        assert_eq!(jail["HOSTED"].len(), values["HOSTED"].len());
        assert!(jail["HOSTED"].starts_with("sk-"));
        let bad: Permissions = serde_json::from_value(json!({
            "secrets": {"HOSTED": {"hosts": ["http://x"]}}
        }))
        .unwrap_or_default();
        assert!(matches!(
            placeholders(&bad, &values),
            Err(SecretError::Hosts { .. })
        ));
    }

    #[test]
    fn redacts_plain_and_json_escaped_values() {
        let mut s = IndexMap::new();
        s.insert("TOKEN".to_string(), "ab\"cd".to_string());
        let r = Redactor::new(&s);
        assert_eq!(r.text("x ab\"cd y"), "x [REDACTED:TOKEN] y");
        assert_eq!(r.text(r#"{"t":"ab\"cd"}"#), r#"{"t":"[REDACTED:TOKEN]"}"#);
        assert_eq!(r.text("?k=ab%22cd&x"), "?k=[REDACTED:TOKEN]&x");
        assert_eq!(
            r.value(json!({"ab\"cd": ["ab\"cd"]})),
            json!({"[REDACTED:TOKEN]": ["[REDACTED:TOKEN]"]})
        );
    }

    fn one(value: &str) -> Redactor {
        let mut s = IndexMap::new();
        s.insert("T".to_string(), value.to_string());
        Redactor::new(&s)
    }

    /// No 8-character run of `secret` in `text`.
    fn clean(text: &str, secret: &str) -> bool {
        let chars: Vec<char> = secret.chars().collect();
        chars
            .windows(8)
            .all(|w| !text.contains(&w.iter().collect::<String>()))
    }

    #[test]
    fn json_escapes_of_any_kind_are_seen_through() {
        let secret = "sk/live+9f3a8c7e6d5b4a39";
        let r = one(secret);
        for escaped in [
            r"sk\/live+9f3a8c7e6d5b4a39",
            r"sk\/live\u002B9f3a8c7e6d5b4a39",
            r"\u0073\u006b\/live\u002b9f3a8c7e6d5b4a39",
        ] {
            let text = format!(r#"{{"auth":"Bearer {escaped}","n":1}}"#);
            let out = r.text(&text);
            assert_eq!(out, r#"{"auth":"Bearer [REDACTED:T]","n":1}"#, "{escaped}");
        }
        // A character outside the BMP, written as a surrogate pair.
        let r = one("key-\u{1F511}-abcdefgh");
        let out = r.text(r#"{"k":"key-\ud83d\udd11-abcdefgh"}"#);
        assert_eq!(out, r#"{"k":"[REDACTED:T]"}"#);
    }

    #[test]
    fn a_cut_inside_a_character_or_an_escape_is_seen_through() {
        let r = one("clé-secrète-0123");
        let bytes = "x clé-secrète-0123".as_bytes();
        for end in 6..bytes.len() {
            let text = String::from_utf8_lossy(&bytes[..end]);
            let out = r.text_cut(&text);
            assert!(!out.contains("clé-"), "{end}: {out}");
        }
        let r = one("sk/live+9f3a8c7e6d5b4a39");
        for cut in [r"x sk\/live\u00", r"x sk\/live\", r"x sk%2Flive%2"] {
            let out = r.text_cut(cut);
            assert!(out.ends_with("[REDACTED:T]"), "{cut}: {out}");
        }
    }

    #[test]
    fn base64_and_hex_of_long_values_are_redacted() {
        use base64::Engine;
        let secret = "sk-live-0123456789abcdef";
        let r = one(secret);
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        assert!(clean(&r.text(&format!("x {b64} y")), &b64));
        for prefix in ["", "u:", "us:", "use:"] {
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{secret}"));
            let out = r.text(&format!("Authorization: Basic {basic}"));
            assert!(out.contains("[REDACTED:T]"), "{prefix}: {out}");
            // At most a group of four characters is left on either side.
            let left = out
                .trim_start_matches("Authorization: Basic ")
                .replace("[REDACTED:T]", "");
            assert!(left.len() <= 8 + prefix.len(), "{prefix}: {out}");
        }
        let hex = hex::encode(secret);
        assert_eq!(r.text(&hex), "[REDACTED:T]");
        assert_eq!(r.text(&hex.to_uppercase()), "[REDACTED:T]");
        // Short values are not looked for in encodings (too many false hits).
        let short = one("abcd");
        assert_eq!(short.text("YWJjZA"), "YWJjZA");
    }

    #[test]
    fn html_references_and_another_case_are_redacted_cut_or_not() {
        let secret = "sk/live+9f3a8c7e6d5b4a39";
        let r = one(secret);
        let html: String = secret
            .chars()
            .enumerate()
            .map(|(i, c)| match (c, i % 3) {
                ('/', _) => "&sol;".to_string(),
                (c, 0) => format!("&#x{:X};", c as u32),
                (c, 1) => format!("&#{};", c as u32),
                (c, _) => c.to_string(),
            })
            .collect();
        for shown in [
            html.clone(),
            secret.to_uppercase(),
            "SK&#x2F;LIVE%2B9F3A8C7E6D5B4A39".to_string(),
            secret.replace('/', "&#47;"),
        ] {
            let out = r.text(&format!("<p>token: {shown}</p>"));
            assert_eq!(out, "<p>token: [REDACTED:T]</p>", "{shown}");
            for end in 4..shown.len() {
                if !shown.is_char_boundary(end) {
                    continue;
                }
                let cut = r.text_cut(&format!("token: {}", &shown[..end]));
                assert!(clean(&cut, secret), "{end}: {cut}");
                assert!(clean(&cut.to_lowercase(), secret), "{end}: {cut}");
            }
        }
        // An ordinary word in another case than a short secret is not
        // what a cut leaves.
        let short = one("hunter2x");
        assert_eq!(
            short.text("HUNTER2X and Hunter2x"),
            "[REDACTED:T] and [REDACTED:T]"
        );
    }

    #[test]
    fn a_cut_never_leaves_a_piece_of_a_secret() {
        let secret = "sk/live+9f3a8c7e6d5b4a39";
        let r = one(secret);
        for escaped in [
            secret.to_string(),
            r"sk\/live\u002B9f3a8c7e6d5b4a39".to_string(),
        ] {
            let body = format!("{}Authorization: Bearer {escaped} end", "p".repeat(100));
            for max in 90..body.len() + 2 {
                let (cut, _) = r.cut(&body, max);
                assert!(clean(&cut, secret), "{max}: {cut}");
                assert!(
                    !cut.contains("sk/l") || cut.contains("[REDACTED"),
                    "{max}: {cut}"
                );
                let tail = r.text_cut(&body[..max.min(body.len())]);
                assert!(clean(&tail, secret), "{max}: {tail}");
                // Four characters or more of the secret never end it.
                let debris = r.text_cut(&format!("{}\\u00", &body[..max.min(body.len())]));
                assert!(clean(&debris, secret), "{max}: {debris}");
                for n in MIN_CUT_PREFIX..secret.len() {
                    assert!(!tail.ends_with(&secret[..n]), "{max}: {tail}");
                }
            }
        }
    }
}
