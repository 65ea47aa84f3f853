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
//! placeholder keeps the parameter's JSON type).

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::manifest::placeholder;

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

fn scan(template: &str) -> Result<Vec<placeholder::Placeholder<'_>>, TemplateError> {
    placeholder::scan(template).map_err(|e| TemplateError::Malformed {
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
    fn non_strings_render_as_json_in_argv() {
        with(json!({"count": 3, "q": {"a": [1, true]}}), |b| {
            assert_eq!(argv("${count}", b).unwrap().unwrap(), "3");
            assert_eq!(argv("${q}", b).unwrap().unwrap(), r#"{"a":[1,true]}"#);
        });
    }
}
