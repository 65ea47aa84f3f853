//! `${name}` substitution in exec templates.
//!
//! One pass over the manifest's own template text: each placeholder is
//! replaced by a parameter or a declared secret, and the result is never
//! scanned again, so a parameter value holding `${OTHER}`, `$(…)` or
//! backticks stays literal. Values never pass through a shell: command
//! arguments become argv entries. A template that is exactly one
//! placeholder naming an unset optional parameter is dropped (argv entry,
//! JSON field), never passed as an empty string or a literal placeholder;
//! inside longer text an unset parameter drops the whole entry too.
//!
//! Contexts: [`argv`] (strings; a JSON value is rendered as its JSON text,
//! a string as itself) and [`json`] (a template that is exactly one
//! placeholder keeps the parameter's JSON type), and the three contexts of
//! an http request:
//!
//! - [`url()`]: every value is percent-encoded as ONE path segment (only
//!   `A-Z a-z 0-9 - . _ ~` stay as they are; `/ ? # @ : %` are encoded), so
//!   a value cannot add a segment, start a query, or touch the scheme, host
//!   or port. A segment that would read as `.` or `..` (as the URL
//!   parser reads it: tab, LF and CR dropped, spaces and C0 controls at
//!   its ends trimmed, `\` a separator) is refused
//!   ([`TemplateError::DotSegment`]): URL parsers and servers resolve those,
//!   even percent-encoded, so no encoding keeps them literal.
//! - [`query_value`]: form-encoded (`application/x-www-form-urlencoded`).
//! - [`header_value`]: as text, refused when it holds CR, LF or NUL
//!   ([`TemplateError::HeaderControl`]), so a value cannot add a header.

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::manifest::slots;

/// Errors while expanding a template.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    /// A placeholder that is neither a parameter nor a declared secret
    /// (lint reports these; reaching one here means the manifest changed).
    #[error("placeholder `${{{name}}}` is neither an input nor a declared secret")]
    Unknown { name: String },
    /// A malformed placeholder.
    #[error("malformed placeholder in {template:?}: {message}")]
    Malformed { template: String, message: String },
    /// An expanded URL path segment reads as `.` or `..`.
    #[error("the value of `${{{name}}}` would make a URL path segment `.` or `..`, which would change the request's path; pass another value")]
    DotSegment { name: String },
    /// A header value holds CR, LF or NUL.
    #[error("header `{header}` would contain a CR, LF or NUL character (from `${{{name}}}` or the template); header values must be one line")]
    HeaderControl { header: String, name: String },
}

impl TemplateError {
    /// True when the call's values (not the manifest) are at fault.
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            TemplateError::DotSegment { .. } | TemplateError::HeaderControl { .. }
        )
    }

    /// The Outcome's error kind: the call's values or the manifest.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        if self.is_input_error() {
            crate::kind::ErrorKind::InputInvalid
        } else {
            crate::kind::ErrorKind::ManifestInvalid
        }
    }
}

/// What placeholders expand to.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    /// The call's parameters (defaults already applied).
    pub params: &'a Map<String, Value>,
    /// Declared input names (a declared but unset input expands to nothing).
    pub inputs: &'a [String],
    /// Declared secrets that are set: name → value.
    pub secrets: &'a IndexMap<String, String>,
}

enum Bound<'a> {
    Value(&'a Value),
    Secret(&'a str),
    Unset,
}

impl<'a> Bindings<'a> {
    fn lookup(&self, name: &str) -> Result<Bound<'a>, TemplateError> {
        if let Some(v) = self.params.get(name) {
            if !v.is_null() || self.inputs.iter().any(|i| i == name) {
                return Ok(if v.is_null() {
                    Bound::Unset
                } else {
                    Bound::Value(v)
                });
            }
        }
        if let Some(s) = self.secrets.get(name) {
            return Ok(Bound::Secret(s));
        }
        if self.inputs.iter().any(|i| i == name) {
            return Ok(Bound::Unset);
        }
        Err(TemplateError::Unknown {
            name: name.to_string(),
        })
    }
}

/// A JSON value as an argv string: strings as they are, anything else as
/// compact JSON.
pub fn value_to_arg(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn scan(template: &str) -> Result<Vec<slots::Slot<'_>>, TemplateError> {
    slots::scan(template).map_err(|e| TemplateError::Malformed {
        template: template.to_string(),
        message: e.to_string(),
    })
}

/// Expands a string template. `None`: a placeholder in it is unset, so the
/// entry is dropped.
pub fn argv(template: &str, b: &Bindings<'_>) -> Result<Option<String>, TemplateError> {
    let found = scan(template)?;
    let mut out = String::with_capacity(template.len());
    let mut last = 0;
    for p in found {
        out.push_str(&template[last..p.start]);
        match b.lookup(p.name)? {
            Bound::Value(v) => out.push_str(&value_to_arg(v)),
            Bound::Secret(s) => out.push_str(s),
            Bound::Unset => return Ok(None),
        }
        last = p.end;
    }
    out.push_str(&template[last..]);
    Ok(Some(out))
}

/// Expands a JSON template: strings are expanded (a string that is exactly
/// one placeholder takes the parameter's JSON value), arrays and objects
/// recursively; entries whose placeholder is unset are dropped. `None`: the
/// whole template is dropped.
pub fn json(template: &Value, b: &Bindings<'_>) -> Result<Option<Value>, TemplateError> {
    match template {
        Value::String(s) => {
            let found = scan(s)?;
            if let [only] = found.as_slice() {
                if only.start == 0 && only.end == s.len() {
                    return Ok(match b.lookup(only.name)? {
                        Bound::Value(v) => Some(v.clone()),
                        Bound::Secret(sec) => Some(Value::String(sec.to_string())),
                        Bound::Unset => None,
                    });
                }
            }
            Ok(argv(s, b)?.map(Value::String))
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if let Some(v) = json(item, b)? {
                    out.push(v);
                }
            }
            Ok(Some(Value::Array(out)))
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if let Some(v) = json(v, b)? {
                    out.insert(k.clone(), v);
                }
            }
            Ok(Some(Value::Object(out)))
        }
        other => Ok(Some(other.clone())),
    }
}

/// Names of the placeholders in `template` (empty when it is malformed;
/// expansion reports that).
pub fn names(template: &str) -> Vec<&str> {
    slots::scan(template)
        .map(|found| found.into_iter().map(|p| p.name).collect())
        .unwrap_or_default()
}

/// What [`url()`] percent-encodes: everything but `A-Z a-z 0-9 - . _ ~`
/// (RFC 3986 unreserved).
pub const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Path separators of http(s) URLs: the URL parser reads `\` as `/`.
const SEPARATORS: [char; 2] = ['/', '\\'];

fn is_dot_segment(segment: &str) -> bool {
    // The URL parser drops ASCII tab, LF and CR anywhere in its input and
    // trims C0 controls and spaces from both ends of it; trimming them
    // from any segment refuses a little more than needed (fail closed).
    let s: String = segment
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let s = s
        .trim_matches(|c: char| c <= ' ')
        .to_ascii_lowercase()
        .replace("%2e", ".");
    s == "." || s == ".."
}

/// Expands a URL template, percent-encoding every value as one path
/// segment (see the module doc). `None`: a placeholder is unset.
pub fn url(template: &str, b: &Bindings<'_>) -> Result<Option<String>, TemplateError> {
    let found = scan(template)?;
    let mut out = String::with_capacity(template.len() + 16);
    let mut last = 0;
    // (name, start, end) of each expansion in `out`.
    let mut spans = Vec::with_capacity(found.len());
    for p in found {
        out.push_str(&template[last..p.start]);
        let start = out.len();
        let text = match b.lookup(p.name)? {
            Bound::Value(v) => value_to_arg(v),
            Bound::Secret(s) => s.to_string(),
            Bound::Unset => return Ok(None),
        };
        out.extend(percent_encoding::utf8_percent_encode(&text, SEGMENT));
        spans.push((p.name, start, out.len()));
        last = p.end;
    }
    out.push_str(&template[last..]);
    // Only the path resolves dot segments; values never add a raw `?`/`#`.
    let path_end = out.find(['?', '#']).unwrap_or(out.len());
    for (name, start, end) in spans {
        // `start == path_end` is an empty value ending the path (a value
        // never holds a raw `?`/`#`): it still completes the last segment.
        if start > path_end {
            continue;
        }
        let seg_start = out[..start].rfind(SEPARATORS).map_or(0, |i| i + 1);
        let seg_end = out[end..path_end]
            .find(SEPARATORS)
            .map_or(path_end, |i| end + i);
        if is_dot_segment(&out[seg_start..seg_end]) {
            return Err(TemplateError::DotSegment {
                name: name.to_string(),
            });
        }
    }
    Ok(Some(out))
}

/// Expands a query value template and form-encodes the result. `None`: a
/// placeholder is unset, so the query entry is dropped.
pub fn query_value(template: &str, b: &Bindings<'_>) -> Result<Option<String>, TemplateError> {
    Ok(argv(template, b)?.map(|v| url::form_urlencoded::byte_serialize(v.as_bytes()).collect()))
}

/// Expands the template of header `header`. `None`: a placeholder is
/// unset, so the header is not sent.
pub fn header_value(
    header: &str,
    template: &str,
    b: &Bindings<'_>,
) -> Result<Option<String>, TemplateError> {
    let Some(v) = argv(template, b)? else {
        return Ok(None);
    };
    if v.contains(['\r', '\n', '\0']) {
        return Err(TemplateError::HeaderControl {
            header: header.to_string(),
            name: names(template).join("}, ${"),
        });
    }
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with<R>(params: Value, f: impl FnOnce(&Bindings<'_>) -> R) -> R {
        let params = params.as_object().unwrap().clone();
        let inputs = vec!["path".to_string(), "count".into(), "opt".into(), "q".into()];
        let mut secrets = IndexMap::new();
        secrets.insert("TOKEN".to_string(), "s3cret".to_string());
        f(&Bindings {
            params: &params,
            inputs: &inputs,
            secrets: &secrets,
        })
    }

    #[test]
    fn values_are_never_expanded_again() {
        with(
            json!({"path": "${TOKEN} $(touch x) `id` ; rm -rf /"}),
            |b| {
                assert_eq!(
                    argv("${path}", b).unwrap().unwrap(),
                    "${TOKEN} $(touch x) `id` ; rm -rf /"
                );
            },
        );
    }

    #[test]
    fn unset_optional_drops_the_entry() {
        with(json!({"path": "."}), |b| {
            assert_eq!(argv("${opt}", b).unwrap(), None);
            assert_eq!(argv("--opt=${opt}", b).unwrap(), None);
            assert_eq!(argv("--path=${path}", b).unwrap().unwrap(), "--path=.");
            assert_eq!(argv("plain", b).unwrap().unwrap(), "plain");
        });
    }

    #[test]
    fn json_keeps_types_and_drops_unset_fields() {
        with(json!({"count": 5, "q": "a"}), |b| {
            let t =
                json!({"n": "${count}", "s": "n=${count}", "o": "${opt}", "l": ["${q}", "${opt}"]});
            assert_eq!(
                json(&t, b).unwrap().unwrap(),
                json!({"n": 5, "s": "n=5", "l": ["a"]})
            );
        });
    }

    #[test]
    fn secrets_expand_from_the_manifest_text_only() {
        with(json!({"q": "${TOKEN}"}), |b| {
            assert_eq!(
                argv("Bearer ${TOKEN}", b).unwrap().unwrap(),
                "Bearer s3cret"
            );
            assert_eq!(argv("${q}", b).unwrap().unwrap(), "${TOKEN}");
        });
    }

    #[test]
    fn unknown_placeholders_are_errors() {
        with(json!({}), |b| {
            assert!(matches!(
                argv("${nope}", b),
                Err(TemplateError::Unknown { .. })
            ));
            assert!(argv("${", b).is_err());
        });
    }

    #[test]
    fn url_values_are_one_encoded_segment() {
        let t = "https://h.example/api/${path}/x";
        for (v, want) in [
            ("a/b?c#d", "https://h.example/api/a%2Fb%3Fc%23d/x"),
            (
                "@127.0.0.1:9/x",
                "https://h.example/api/%40127.0.0.1%3A9%2Fx/x",
            ),
            ("..%2F..", "https://h.example/api/..%252F../x"),
            ("../admin", "https://h.example/api/..%2Fadmin/x"),
            ("caf\u{e9} ~_-.", "https://h.example/api/caf%C3%A9%20~_-./x"),
        ] {
            with(json!({ "path": v }), |b| {
                assert_eq!(url(t, b).unwrap().unwrap(), want, "{v}");
            });
        }
        for v in [".", "..", "%2e", "%2E%2e"] {
            with(json!({ "path": v }), |b| {
                // `%` is encoded, so only literal dots read as dot segments.
                let r = url(t, b);
                if v.contains('%') {
                    assert!(r.is_ok(), "{v}");
                } else {
                    assert!(matches!(r, Err(TemplateError::DotSegment { .. })), "{v}");
                }
            });
        }
        with(json!({ "path": "." }), |b| {
            assert!(url("https://h/a/%2e${path}", b).is_err());
            assert_eq!(
                url("https://h/a/v${path}", b).unwrap().unwrap(),
                "https://h/a/v."
            );
            assert_eq!(
                url("https://h/a?q=${path}", b).unwrap().unwrap(),
                "https://h/a?q=."
            );
        });
        with(json!({}), |b| assert_eq!(url(t, b).unwrap(), None));
    }

    #[test]
    fn an_empty_value_cannot_complete_a_dot_segment_at_the_end_of_the_path() {
        // Found by fuzz/template: `..${path}` with "" ended the path as
        // `..`, which the URL parser resolves (one segment up).
        with(json!({ "path": "" }), |b| {
            for t in [
                "https://h/a/..${path}",
                "https://h/a/.${path}",
                "https://h/a/..${path}?x=1",
                "https://h/a/.${path}#f",
            ] {
                assert!(
                    matches!(url(t, b), Err(TemplateError::DotSegment { .. })),
                    "{t}"
                );
            }
            assert_eq!(
                url("https://h/a/b${path}", b).unwrap().unwrap(),
                "https://h/a/b"
            );
            assert_eq!(
                url("https://h/a?q=..${path}", b).unwrap().unwrap(),
                "https://h/a?q=.."
            );
        });
    }

    #[test]
    fn dot_segments_are_judged_as_the_url_parser_reads_them() {
        // Found by fuzz/template: the URL parser drops tab/LF/CR, trims
        // spaces and C0 controls at the ends and reads `\` as `/`, so each
        // of these resolved as a dot segment when `path` is empty.
        with(json!({ "path": "" }), |b| {
            for t in [
                "https://h/a/.\n${path}/x",
                "https://h/a/.\t.${path}",
                "https://h/a\\..${path}",
                "https://h/a/..${path}\\x",
                "https://h/a/..${path}  ",
            ] {
                assert!(
                    matches!(url(t, b), Err(TemplateError::DotSegment { .. })),
                    "{t:?}"
                );
            }
        });
        with(json!({ "path": "v" }), |b| {
            assert_eq!(
                url("https://h/a\\..${path}", b).unwrap().unwrap(),
                "https://h/a\\..v"
            );
        });
    }

    #[test]
    fn query_values_are_form_encoded() {
        with(json!({"q": "a b&c=d#"}), |b| {
            assert_eq!(query_value("${q}", b).unwrap().unwrap(), "a+b%26c%3Dd%23");
            assert_eq!(query_value("${opt}", b).unwrap(), None);
        });
    }

    #[test]
    fn header_values_reject_line_breaks() {
        for v in ["a\r\nX-Evil: 1", "a\nb", "a\0b"] {
            with(json!({ "q": v }), |b| {
                assert!(matches!(
                    header_value("X", "v ${q}", b),
                    Err(TemplateError::HeaderControl { .. })
                ));
            });
        }
        with(json!({"q": "ok"}), |b| {
            assert_eq!(
                header_value("X", "Bearer ${TOKEN}", b).unwrap().unwrap(),
                "Bearer s3cret"
            );
            assert_eq!(header_value("X", "${opt}", b).unwrap(), None);
        });
    }

    #[test]
    fn non_strings_render_as_json_in_argv() {
        with(json!({"count": 3, "q": {"a": [1, true]}}), |b| {
            assert_eq!(argv("${count}", b).unwrap().unwrap(), "3");
            assert_eq!(argv("${q}", b).unwrap().unwrap(), r#"{"a":[1,true]}"#);
        });
    }
}
