//! `glovebox export`: the project's tools as the tool list of another
//! client — OpenAI Chat Completions, the OpenAI Responses API, the Anthropic
//! Messages API, or an MCP `tools/list` result.
//!
//! | target | one tool | document |
//! |---|---|---|
//! | `openai` | `{"type":"function","function":{name, description, parameters}}` | array |
//! | `openai-responses` | `{"type":"function", name, description, parameters, strict: false}` | array |
//! | `anthropic` | `{name, description, input_schema[, input_examples]}` | array |
//! | `mcp` | the tool of [`mcp_tool`] (what `tools/list` serves) | `{"tools": [...]}` |
//!
//! Every target's text is the MCP tool's ([`crate::offer`]): what the
//! person approving the tool was shown, without the code points nobody
//! sees ([`crate::invisible`]). `parameters` / `input_schema` /
//! `inputSchema` is the manifest's `inputs.schema` (an object schema is
//! required); `input_examples` are the `examples[].params`.
//! `strict` is `false` because the Responses API defaults to strict mode,
//! which only accepts schemas that list every property as required.
//!
//! Tools are sorted by name. A tool a target does not accept (a name
//! outside the target's documented pattern, an example its schema rejects,
//! a manifest with errors) is a [`Problem`]: nothing is renamed or dropped,
//! and the export as a whole fails, so a partial list never reaches a
//! client unnoticed.

use serde_json::{json, Value};

use crate::manifest::model::Manifest;
use crate::manifest::project::Project;

use rmcp::model::Tool;

/// A client format `glovebox export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// OpenAI Chat Completions `tools`.
    OpenAi,
    /// OpenAI Responses API `tools` (the flat function form).
    OpenAiResponses,
    /// Anthropic Messages API `tools`.
    Anthropic,
    /// An MCP `tools/list` result.
    Mcp,
}

/// The documented name rule of a target.
struct NameRule {
    /// The rule as the target's documentation writes it.
    pattern: &'static str,
    /// Longest accepted name, in characters.
    max: usize,
    /// Characters accepted besides ASCII letters and digits.
    extra: &'static [char],
    /// Where the rule comes from.
    source: &'static str,
}

const OPENAI_NAMES: NameRule = NameRule {
    pattern: "^[a-zA-Z0-9_-]{1,64}$",
    max: 64,
    extra: &['_', '-'],
    source: "OpenAI function names",
};

const ANTHROPIC_NAMES: NameRule = NameRule {
    pattern: "^[a-zA-Z0-9_-]{1,64}$",
    max: 64,
    extra: &['_', '-'],
    source: "Anthropic tool names",
};

const MCP_NAMES: NameRule = NameRule {
    pattern: "^[A-Za-z0-9_.-]{1,128}$",
    max: 128,
    extra: &['_', '-', '.'],
    source: "MCP tool names (specification 2025-11-25)",
};

impl Target {
    /// Every target, in documentation order.
    pub const ALL: &'static [Target] = &[
        Target::OpenAi,
        Target::OpenAiResponses,
        Target::Anthropic,
        Target::Mcp,
    ];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::OpenAi => "openai",
            Target::OpenAiResponses => "openai-responses",
            Target::Anthropic => "anthropic",
            Target::Mcp => "mcp",
        }
    }

    fn names(self) -> &'static NameRule {
        match self {
            Target::OpenAi | Target::OpenAiResponses => &OPENAI_NAMES,
            Target::Anthropic => &ANTHROPIC_NAMES,
            Target::Mcp => &MCP_NAMES,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool the target does not accept, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The tool's name.
    pub tool: String,
    /// The rule it breaks and how to fix it.
    pub rule: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tool `{}`: {}", self.tool, self.rule)
    }
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Some tools cannot be expressed in the target format.
    #[error("{} tool(s) cannot be exported as {target}; nothing was written", problems.len())]
    Rejected {
        /// The target format.
        target: Target,
        /// Every tool the target does not accept.
        problems: Vec<Problem>,
    },
    /// A tool could not be turned into JSON (a bug; please report it).
    #[error("cannot serialize tool `{tool}`")]
    Serialize {
        /// The tool's name.
        tool: String,
        /// The cause.
        source: serde_json::Error,
    },
    /// `--out` could not be written.
    #[error("cannot write {path:?}: {error}; check that its directory exists and is writable")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// The cause (in the message, before the advice, so not a
        /// `source()` too).
        error: std::io::Error,
    },
}

/// The project's tools as `target`'s document, or every problem found.
pub fn export(project: &Project, target: Target) -> Result<Value, ExportError> {
    let mut tools: Vec<&Manifest> = project.tools.iter().map(|t| &t.manifest).collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut problems: Vec<Problem> = project
        .rejected
        .iter()
        .map(|name| Problem {
            tool: name.clone(),
            rule: "its manifest has errors, so it cannot be exported; run `glovebox lint` and fix them".into(),
        })
        .collect();
    for m in &tools {
        problems.extend(check(m, target));
    }
    if !problems.is_empty() {
        problems.sort_by(|a, b| a.tool.cmp(&b.tool));
        return Err(ExportError::Rejected { target, problems });
    }
    let items = tools
        .iter()
        .map(|m| one(m, target))
        .collect::<Result<Vec<Value>, _>>()?;
    Ok(match target {
        Target::Mcp => json!({ "tools": items }),
        _ => Value::Array(items),
    })
}

/// What `target` rejects about `m`.
pub fn check(m: &Manifest, target: Target) -> Vec<Problem> {
    let mut out = Vec::new();
    let rule = target.names();
    let chars = m.name.chars().count();
    let bad: Vec<char> = m
        .name
        .chars()
        .filter(|c| !c.is_ascii_alphanumeric() && !rule.extra.contains(c))
        .collect();
    if chars == 0 || chars > rule.max || !bad.is_empty() {
        let why = if bad.is_empty() {
            format!("{chars} characters")
        } else {
            format!("has {:?}", bad.iter().collect::<String>())
        };
        out.push(Problem {
            tool: m.name.clone(),
            rule: format!(
                "name does not match {} `{}` ({why}); rename the tool (its directory and `name`)",
                rule.source, rule.pattern
            ),
        });
    }
    if m.inputs.schema.get("type") != Some(&json!("object")) {
        out.push(Problem {
            tool: m.name.clone(),
            rule: format!(
                "{target} requires a parameters schema with `type: object`; add it to inputs.schema"
            ),
        });
    }
    if target == Target::Anthropic {
        out.extend(invalid_examples(m));
    }
    out
}

/// Examples whose params the tool's own schema rejects (Anthropic refuses
/// `input_examples` that do not match `input_schema`).
fn invalid_examples(m: &Manifest) -> Vec<Problem> {
    let Ok(validator) = jsonschema::draft202012::new(&m.inputs.schema) else {
        return vec![Problem {
            tool: m.name.clone(),
            rule: "inputs.schema does not compile, so its examples cannot be checked; run `glovebox lint`".into(),
        }];
    };
    m.examples
        .iter()
        .enumerate()
        .filter(|(_, e)| !validator.is_valid(&e.params))
        .map(|(i, _)| Problem {
            tool: m.name.clone(),
            rule: format!(
                "examples[{i}].params does not match inputs.schema, and Anthropic rejects input_examples that do not; fix the example"
            ),
        })
        .collect()
}

/// One tool in `target`'s shape: its name, description and input schema
/// are the MCP tool's clients get ([`crate::offer::forwarded`]: what a
/// person approved, without invisible code points); the examples are
/// cleaned the same way.
fn one(m: &Manifest, target: Target) -> Result<Value, ExportError> {
    let serialize = |source| ExportError::Serialize {
        tool: m.name.clone(),
        source,
    };
    let offered = serde_json::to_value(mcp_tool(m)).map_err(serialize)?;
    let (name, description) = (&offered["name"], &offered["description"]);
    let schema = offered["inputSchema"].clone();
    Ok(match target {
        Target::OpenAi => json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }),
        Target::OpenAiResponses => json!({
            "type": "function",
            "name": name,
            "description": description,
            "parameters": schema,
            "strict": false,
        }),
        Target::Anthropic => {
            let mut t = json!({"name": name, "description": description, "input_schema": schema});
            if !m.examples.is_empty() {
                let mut examples =
                    Value::Array(m.examples.iter().map(|e| e.params.clone()).collect());
                crate::invisible::remove_in(&mut examples);
                t["input_examples"] = examples;
            }
            t
        }
        Target::Mcp => offered,
    })
}

/// A manifest as an MCP tool: what `tools/list` serves and
/// `export --target mcp` writes ([`crate::offer::forwarded`]).
pub fn mcp_tool(m: &Manifest) -> Tool {
    crate::offer::forwarded(m)
}

/// The document as written: pretty JSON and a final newline.
pub fn render(document: &Value) -> String {
    format!("{document:#}\n")
}

/// Writes `text` to `path` atomically: a temporary file beside it, renamed
/// over it, so a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &std::path::Path, text: &str) -> Result<(), ExportError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let err = |error| ExportError::Write {
        path: path.to_path_buf(),
        error,
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::serve::mcp::catalog;

    fn examples() -> Project {
        Project::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")).unwrap()
    }

    #[test]
    fn mcp_export_is_what_tools_list_serves() {
        let project = examples();
        let doc = export(&project, Target::Mcp).unwrap();
        let served: Vec<Value> = catalog::tools(&project)
            .into_iter()
            .filter(|t| !catalog::is_meta_tool(&t.name))
            .map(|t| serde_json::to_value(t).unwrap())
            .collect();
        assert_eq!(doc["tools"], Value::Array(served));
    }

    #[test]
    fn name_rules() {
        let project = examples();
        let mut m = project.tools[0].manifest.clone();
        for (name, openai_ok, mcp_ok) in [
            ("a-b_C9", true, true),
            ("a.b", false, true),
            (&"x".repeat(64), true, true),
            (&"x".repeat(65), false, true),
            (&"x".repeat(129), false, false),
            ("", false, false),
        ] {
            m.name = name.to_string();
            assert_eq!(check(&m, Target::OpenAi).is_empty(), openai_ok, "{name}");
            assert_eq!(check(&m, Target::Anthropic).is_empty(), openai_ok, "{name}");
            assert_eq!(check(&m, Target::Mcp).is_empty(), mcp_ok, "{name}");
        }
    }
}
