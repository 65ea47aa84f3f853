//! The embedded JSON Schemas (`schemas/tool.schema.json`,
//! `schemas/config.schema.json`), compiled once, and the translation of
//! their validation errors into positioned lint findings.
//!
//! The schemas avoid `$ref` and combinators on purpose: every error's schema
//! path is then a plain pointer into the schema document, which is how an
//! unknown field finds the list of allowed keys for its did-you-mean.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use super::diagnostic::Rule;
use super::yaml::{push_token, Document, Position};

/// Text of `schemas/tool.schema.json`.
pub const TOOL_SCHEMA: &str = include_str!("../../schemas/tool.schema.json");
/// Text of `schemas/tool-v1.schema.json` (Glee v1 single-file tools).
pub const TOOL_V1_SCHEMA: &str = include_str!("../../schemas/tool-v1.schema.json");
/// Text of `schemas/config.schema.json`.
pub const CONFIG_SCHEMA: &str = include_str!("../../schemas/config.schema.json");

/// Which embedded schema to validate against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `tool.schema.json`.
    Tool,
    /// `config.schema.json`.
    Config,
    /// `tool-v1.schema.json`.
    ToolV1,
}

/// An embedded schema failed to load (a build defect, not a user error).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// The embedded schema text or its compilation failed.
    #[error("embedded {name} is broken: {reason}; this is a glovebox bug, please report it")]
    Embedded {
        /// File name of the schema.
        name: &'static str,
        /// What went wrong.
        reason: String,
    },
}

struct Compiled {
    document: Value,
    validator: Validator,
}

fn compile(name: &'static str, text: &str) -> Result<Compiled, SchemaError> {
    let broken = |reason: String| SchemaError::Embedded { name, reason };
    let document: Value = serde_json::from_str(text).map_err(|e| broken(e.to_string()))?;
    let validator = jsonschema::draft202012::new(&document).map_err(|e| broken(e.to_string()))?;
    Ok(Compiled {
        document,
        validator,
    })
}

fn compiled(which: Which) -> Result<&'static Compiled, SchemaError> {
    static TOOL: OnceLock<Result<Compiled, SchemaError>> = OnceLock::new();
    static CONFIG: OnceLock<Result<Compiled, SchemaError>> = OnceLock::new();
    static TOOL_V1: OnceLock<Result<Compiled, SchemaError>> = OnceLock::new();
    let slot = match which {
        Which::ToolV1 => TOOL_V1.get_or_init(|| compile("tool-v1.schema.json", TOOL_V1_SCHEMA)),
        Which::Tool => TOOL.get_or_init(|| compile("tool.schema.json", TOOL_SCHEMA)),
        Which::Config => CONFIG.get_or_init(|| compile("config.schema.json", CONFIG_SCHEMA)),
    };
    slot.as_ref().map_err(Clone::clone)
}

/// One schema violation, positioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// JSON pointer of the offending node.
    pub pointer: String,
    /// Where to report it.
    pub at: Position,
    /// Rule id.
    pub rule: Rule,
    /// Lowercase message.
    pub message: String,
}

/// Validates `doc` against the chosen embedded schema.
pub fn check(which: Which, doc: &Document) -> Result<Vec<Finding>, SchemaError> {
    let compiled = compiled(which)?;
    let mut findings = Vec::new();
    for error in compiled.validator.iter_errors(&doc.value) {
        translate(which, &compiled.document, doc, &error, &mut findings);
    }
    findings.sort_by_key(|f| f.at);
    findings.dedup();
    Ok(findings)
}

fn translate(
    which: Which,
    schema: &Value,
    doc: &Document,
    error: &ValidationError<'_>,
    out: &mut Vec<Finding>,
) {
    let pointer = error.instance_path().as_str().to_owned();
    let schema_path = error.schema_path().as_str();
    let here = display_path(&pointer);
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let allowed = allowed_keys(schema, schema_path);
            for key in unexpected {
                let mut child = pointer.clone();
                push_token(&mut child, key);
                let mut message = if pointer.is_empty() {
                    format!("unknown field `{key}`")
                } else {
                    format!("unknown field `{key}` in `{here}`")
                };
                match did_you_mean(key, &allowed) {
                    Some(best) => message.push_str(&format!("; did you mean `{best}`?")),
                    None if !allowed.is_empty() => {
                        message.push_str(&format!("; expected one of: {}", allowed.join(", ")))
                    }
                    None => {}
                }
                out.push(Finding {
                    at: doc.positions.key(&child),
                    pointer: child,
                    rule: Rule::UnknownField,
                    message,
                });
            }
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let message = if pointer.is_empty() {
                format!("missing required field `{name}`; add it at the top level")
            } else {
                format!("missing required field `{name}` in `{here}`")
            };
            out.push(Finding {
                at: doc.positions.key(&pointer),
                pointer,
                rule: Rule::MissingField,
                message,
            });
        }
        ValidationErrorKind::Type { .. } => {
            let expected = schema
                .pointer(schema_path)
                .map(describe_types)
                .unwrap_or_else(|| "another type".to_owned());
            let found = json_type(error.instance());
            let message = if pointer.is_empty() {
                let file = match which {
                    Which::Tool | Which::ToolV1 => "a tool manifest",
                    Which::Config => "the config file",
                };
                format!("{file} must be a mapping of fields, found {found}")
            } else {
                format!("`{here}` must be {expected}, found {found}")
            };
            out.push(Finding {
                at: doc.positions.value(&pointer),
                pointer,
                rule: Rule::InvalidType,
                message,
            });
        }
        ValidationErrorKind::Enum { options } => {
            let choices: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(plain).collect())
                .unwrap_or_default();
            let found = plain(error.instance());
            let rule = if which == Which::Tool && pointer == "/kind" {
                Rule::UnknownKind
            } else {
                Rule::InvalidValue
            };
            let mut message = if rule == Rule::UnknownKind {
                format!("unknown kind `{found}`; use one of: {}", choices.join(", "))
            } else {
                format!("`{here}` is `{found}`; use one of: {}", choices.join(", "))
            };
            if let Some(best) = did_you_mean(&found, &choices) {
                message.push_str(&format!(" (did you mean `{best}`?)"));
            }
            out.push(Finding {
                at: doc.positions.value(&pointer),
                pointer,
                rule,
                message,
            });
        }
        // Secret names are checked by the `secret-name-invalid` rule.
        ValidationErrorKind::PropertyNames { .. } if which == Which::Tool => {}
        _ => {
            let text = error.to_string();
            out.push(Finding {
                at: doc.positions.value(&pointer),
                message: format!(
                    "`{here}`: {}",
                    crate::manifest::diagnostic::lowercase_first(&truncate(&text, 200))
                ),
                pointer,
                rule: Rule::InvalidValue,
            });
        }
    }
}

/// Keys of `properties` beside the failing `additionalProperties` keyword.
fn allowed_keys(schema: &Value, schema_path: &str) -> Vec<String> {
    let parent = schema_path
        .strip_suffix("/additionalProperties")
        .unwrap_or(schema_path);
    schema
        .pointer(parent)
        .and_then(|node| node.get("properties"))
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}

/// The closest candidate to `word`, if one is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (c, strsim::jaro_winkler(&lower, &c.to_lowercase())))
        .filter(|(_, score)| *score >= 0.8)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c.as_str())
}

/// `/exec/command/args/0` → `exec.command.args[0]`.
pub fn display_path(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    if out.is_empty() {
        out.push_str("(top level)");
    }
    out
}

fn describe_types(types: &Value) -> String {
    let article = |t: &str| match t {
        "object" => "a mapping".to_owned(),
        "array" => "a list".to_owned(),
        "integer" => "an integer".to_owned(),
        "null" => "null".to_owned(),
        other => format!("a {other}"),
    };
    match types {
        Value::String(t) => article(t),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(article)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "another type".to_owned(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::manifest::yaml::parse;

    #[test]
    fn embedded_schemas_compile() {
        assert!(compiled(Which::Tool).is_ok());
        assert!(compiled(Which::Config).is_ok());
    }

    #[test]
    fn unknown_field_suggests() {
        let doc = parse("name: x\ndescripton: y\n").unwrap();
        let findings = check(Which::Tool, &doc).unwrap();
        let unknown = findings
            .iter()
            .find(|f| f.rule == Rule::UnknownField)
            .unwrap();
        assert_eq!(unknown.at.line, 2);
        assert!(
            unknown.message.contains("did you mean `description`"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn paths_display() {
        assert_eq!(display_path("/exec/command/args/0"), "exec.command.args[0]");
        assert_eq!(display_path(""), "(top level)");
    }
}
