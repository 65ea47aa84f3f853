//! The embedded JSON Schemas (`schemas/tool.schema.json`,
//! `schemas/tool-v1.schema.json`, `schemas/config.schema.json`), compiled
//! into code when glovebox is built, and the translation of their
//! validation errors into positioned lint findings.
//!
//! Compiled at build time (jsonschema's `validator` macro), not at run time:
//! compiling `tool.schema.json` in each process (and meta-validating it
//! against draft 2020-12 first, which builds a Unicode regex for its `$id`)
//! was about an eighth of the CPU of a one-shot `glovebox run`. The schema
//! documents themselves are parsed only when a manifest has errors to
//! explain (`allowed_keys`, `describe_types` read them). Their `pattern`s
//! are compiled (lazily, once per process) by the `regex` crate rather than
//! `fancy-regex`: none of them needs look-around or back-references, and
//! `fancy-regex` parsed and translated each one before handing it to the
//! same engine (about a fifth of the schema check of a one-shot `run`).
//!
//! The schemas avoid `$ref` and combinators on purpose: every error's schema
//! path is then a plain pointer into the schema document, which is how an
//! unknown field finds the list of allowed keys for its did-you-mean.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::ValidationError;
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

#[jsonschema::validator(
    path = "schemas/tool.schema.json",
    draft = Draft202012,
    pattern_options = { engine = regex },
    methods = { is_valid = false, validate = false }
)]
struct ToolSchema;

#[jsonschema::validator(
    path = "schemas/tool-v1.schema.json",
    draft = Draft202012,
    pattern_options = { engine = regex },
    methods = { is_valid = false, validate = false }
)]
struct ToolV1Schema;

#[jsonschema::validator(
    path = "schemas/config.schema.json",
    draft = Draft202012,
    pattern_options = { engine = regex },
    methods = { is_valid = false, validate = false }
)]
struct ConfigSchema;

fn errors(which: Which, value: &Value) -> Vec<ValidationError<'_>> {
    match which {
        Which::Tool => ToolSchema::iter_errors(value).collect(),
        Which::ToolV1 => ToolV1Schema::iter_errors(value).collect(),
        Which::Config => ConfigSchema::iter_errors(value).collect(),
    }
}

/// The parsed schema document, for explaining an error (parsed once).
fn document(which: Which) -> Result<&'static Value, SchemaError> {
    fn parse(name: &'static str, text: &str) -> Result<Value, SchemaError> {
        serde_json::from_str(text).map_err(|e| SchemaError::Embedded {
            name,
            reason: e.to_string(),
        })
    }
    static TOOL: OnceLock<Result<Value, SchemaError>> = OnceLock::new();
    static CONFIG: OnceLock<Result<Value, SchemaError>> = OnceLock::new();
    static TOOL_V1: OnceLock<Result<Value, SchemaError>> = OnceLock::new();
    let slot = match which {
        Which::ToolV1 => TOOL_V1.get_or_init(|| parse("tool-v1.schema.json", TOOL_V1_SCHEMA)),
        Which::Tool => TOOL.get_or_init(|| parse("tool.schema.json", TOOL_SCHEMA)),
        Which::Config => CONFIG.get_or_init(|| parse("config.schema.json", CONFIG_SCHEMA)),
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
    explain(which, doc, &errors(which, &doc.value))
}

/// The findings for `errors` of `doc` against the chosen schema.
fn explain(
    which: Which,
    doc: &Document,
    errors: &[ValidationError<'_>],
) -> Result<Vec<Finding>, SchemaError> {
    let mut findings = Vec::new();
    if errors.is_empty() {
        return Ok(findings);
    }
    let schema = document(which)?;
    for error in errors {
        translate(which, schema, doc, error, &mut findings);
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
    // A key that breaks `propertyNames`: the run-time compiler wraps the
    // inner keyword's error in `PropertyNames`, the built validator reports
    // the inner keyword itself; both are explained alike.
    if matches!(error.kind(), ValidationErrorKind::PropertyNames { .. })
        || schema_path.contains("/propertyNames/")
    {
        // Secret names are checked by the `secret-name-invalid` rule.
        if which != Which::Tool {
            out.push(generic(doc, pointer, &here, error));
        }
        return;
    }
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
        _ => out.push(generic(doc, pointer, &here, error)),
    }
}

/// An error without a message of its own: the validator's, positioned.
fn generic(doc: &Document, pointer: String, here: &str, error: &ValidationError<'_>) -> Finding {
    let text = error.to_string();
    Finding {
        at: doc.positions.value(&pointer),
        message: format!(
            "`{here}`: {}",
            crate::manifest::diagnostic::lowercase_first(&truncate(&text, 200))
        ),
        pointer,
        rule: Rule::InvalidValue,
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
    fn embedded_schemas_parse() {
        for which in [Which::Tool, Which::ToolV1, Which::Config] {
            assert!(document(which).is_ok(), "{which:?}");
        }
    }

    /// Every YAML document of the repository's fixtures, examples, bench
    /// projects and fuzz seeds, and each again with unknown keys, a wrong
    /// type, a missing field and an unknown kind added (positions of the
    /// original document).
    fn corpus() -> Vec<(String, Document)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if matches!(p.extension().and_then(|x| x.to_str()), Some("yml" | "yaml")) {
                    out.push(p);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["examples", "tests/fixtures", "bench/projects", "fuzz/seeds"] {
            walk(&root.join(dir), &mut files);
        }
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            let name = f.display().to_string();
            let Ok(doc) = parse(&text) else {
                continue;
            };
            if let Value::Object(map) = &doc.value {
                let mut extra = map.clone();
                extra.insert("descripton".into(), Value::from("typo"));
                if let Some(Value::Object(perm)) = extra.get_mut("permissions") {
                    perm.insert("netwrk".into(), Value::Bool(true));
                    perm.insert("network".into(), Value::from(7));
                }
                if let Some(Value::Object(exec)) = extra.get_mut("exec") {
                    exec.insert("shell".into(), Value::from("sh -c"));
                }
                let mut missing = map.clone();
                missing.remove("name");
                missing.insert("kind".into(), Value::from("shell"));
                for (what, value) in [("mutated", extra), ("missing name, bad kind", missing)] {
                    let mut copy = parse(&text).unwrap();
                    copy.value = Value::Object(value);
                    out.push((format!("{name} ({what})"), copy));
                }
            }
            out.push((name, doc));
        }
        out
    }

    /// The build-time validators explain a manifest exactly as the
    /// run-time compiler of the same schema did: the same findings (rule,
    /// place, message) for every document of the corpus.
    #[test]
    fn the_built_validators_agree_with_the_runtime_compiler() {
        let corpus = corpus();
        assert!(corpus.len() > 100, "corpus of {} documents", corpus.len());
        let mut failing = 0;
        for (which, text) in [
            (Which::Tool, TOOL_SCHEMA),
            (Which::ToolV1, TOOL_V1_SCHEMA),
            (Which::Config, CONFIG_SCHEMA),
        ] {
            let schema: Value = serde_json::from_str(text).unwrap();
            let runtime = jsonschema::draft202012::new(&schema).unwrap();
            for (name, doc) in &corpus {
                let want: Vec<ValidationError<'_>> = runtime.iter_errors(&doc.value).collect();
                let want = explain(which, doc, &want).unwrap();
                let got = check(which, doc).unwrap();
                assert_eq!(got, want, "{which:?} on {name}");
                failing += usize::from(!got.is_empty());
            }
        }
        // The comparison covered errors, not only valid documents.
        assert!(failing > 100, "{failing} documents with errors");
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
