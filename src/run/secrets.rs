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

/// The declared secrets that are set (for redaction when a call fails
/// before `resolve`).
pub fn available(permissions: &Permissions, source: &SecretSource) -> IndexMap<String, String> {
    permissions
        .secrets
        .keys()
        .filter_map(|name| source.get(name).map(|v| (name.clone(), v)))
        .collect()
}

/// Replaces every secret value found in text with `[REDACTED:NAME]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (needle, replacement), longest needle first.
    pairs: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor for these secret values (empty values are ignored). The
    /// JSON-escaped, form-encoded and percent-encoded forms of each value
    /// are redacted too.
    pub fn new(secrets: &IndexMap<String, String>) -> Self {
        let mut pairs = Vec::new();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            let mark = format!("[REDACTED:{name}]");
            pairs.push((value.clone(), mark.clone()));
            let escaped = Value::String(value.clone()).to_string();
            // The forms a value takes in JSON text and in a URL (an http
            // tool's error may quote a Location or a query).
            let forms = [
                escaped[1..escaped.len() - 1].to_string(),
                url::form_urlencoded::byte_serialize(value.as_bytes()).collect(),
                percent_encoding::utf8_percent_encode(value, crate::template::SEGMENT).to_string(),
                percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            ];
            for form in forms {
                if form != *value && !pairs.iter().any(|(p, _)| *p == form) {
                    pairs.push((form, mark.clone()));
                }
            }
        }
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        Redactor { pairs }
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `text` with every secret value replaced.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (needle, mark) in &self.pairs {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), mark);
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
