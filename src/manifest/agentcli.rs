//! agentcli `tools.json` as a drop-in (`seeds/agentcli-tools-json.md`).
//!
//! A `tools.json` holds `{"tools": [ToolSpec, …]}`. [`check`] validates the
//! text the way agentcli does, with its error messages byte for byte
//! (`tool[i]: name is required`, `tool[i] "<name>": duplicate name`, …;
//! `i` and `j` are 0-based indexes, names quoted like Go's `%q`), except
//! that it reports every problem instead of stopping at the first. An entry
//! with an error is rejected; a duplicated name rejects every entry of that
//! name (the seed reports it at the second). Unknown keys are ignored, as
//! agentcli ignores them, but each one is a warning.
//!
//! [`load`] maps each valid entry onto the shared [`Manifest`]: kind
//! `command`, `exec.agentcli` (argv as given, a relative `command[0]`
//! resolved against the directory of `tools.json`), `inputs.schema` = the
//! entry's `schema` (default: any object), `outputs.format: json`, and the
//! default policy: read the `tools.json` directory, no network, no writes,
//! `envPassthrough` as optional `permissions.secrets` (injected when set,
//! redacted from everything returned). The glovebox extension
//! `permissions` (`network`, `fs.read`, `fs.write`, relative to the
//! `tools.json` directory) widens that, within `security.max_permissions`
//! when the config sets one.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::config::Config;
use super::diagnostic::{Diagnostic, Rule};
use super::discover::{normalize, resolve};
use super::model::{
    AgentCliExec, Approval, Exec, Format, FsPermissions, Inputs, Kind, Manifest, Outputs,
    Permissions, Secret, SecretType,
};
use super::project::{Origin, Tool};
use super::yaml::Position;

/// The file name auto-detected in a root.
pub const TOOLS_JSON: &str = "tools.json";

/// Largest `tools.json` read, in bytes.
pub const MAX_FILE_BYTES: usize = 4 << 20;

/// The prefix a relative `command[0]` must have.
const BIN_PREFIX: &str = "./tools/bin/";

/// Keys of a ToolSpec glovebox understands (the last one is its extension).
const KNOWN_KEYS: &[&str] = &[
    "name",
    "description",
    "schema",
    "command",
    "timeoutSec",
    "envPassthrough",
    "permissions",
];

/// Why a `tools.json` could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum AgentCliError {
    /// The file could not be read.
    #[error("cannot read {path:?}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl AgentCliError {
    /// The Outcome's error kind: the `tools.json` is unusable.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
}

/// A `tools.json` entry that passed validation, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Index in the `tools` array (0-based).
    pub index: usize,
    /// The tool name.
    pub name: String,
    /// `description`, empty when absent.
    pub description: String,
    /// `schema`, when given.
    pub schema: Option<Value>,
    /// `command` as written.
    pub command: Vec<String>,
    /// `timeoutSec`, when given.
    pub timeout_sec: Option<u64>,
    /// `envPassthrough`, uppercased, first occurrence kept.
    pub env_passthrough: Vec<String>,
    /// The glovebox extension `permissions`, when given (paths as written).
    pub permissions: Option<Permissions>,
}

/// One problem found in a `tools.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `agentcli-invalid` (error) or `agentcli-unknown-key` (warning).
    pub rule: Rule,
    /// The message; for the seed's cases exactly agentcli's text.
    pub message: String,
    /// The entry's name, when it has one.
    pub name: Option<String>,
    /// JSON pointer of the offending node (`/tools/2/command`).
    pub pointer: String,
}

/// The result of [`check`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// Valid entries, in file order.
    pub entries: Vec<Entry>,
    /// Names of entries rejected for an error (a duplicated name once).
    pub rejected: Vec<String>,
    /// Every finding, in file order.
    pub findings: Vec<Finding>,
}

/// Go's `%q` of a string: quoted, with `"`, `\` and non-printable
/// characters escaped.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Lexical clean of a slash path, like Go's `path.Clean`.
fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// A JSON pointer from unescaped tokens.
fn pointer(tokens: &[&str]) -> String {
    super::yaml::pointer_of(tokens.iter().copied())
}

/// Whether `name` is a valid glovebox tool name ([`super::name`]).
fn is_tool_name(name: &str) -> bool {
    super::name::is_valid(name)
}

/// Whether `name` matches `[A-Z_][A-Z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// What is wrong with a relative `command[0]`, if anything (agentcli's
/// rules: the cleaned path must stay under `./tools/bin/`).
fn command_path_error(prefix: &str, raw: &str) -> Option<String> {
    let mut norm = clean(raw);
    if norm.starts_with("tools/") || norm == "tools" {
        norm = format!("./{norm}");
    }
    if norm.starts_with("../") || norm == ".." {
        return Some(format!(
            "{prefix}: command[0] must not start with '..' or escape tools/bin (got {})",
            go_quote(raw)
        ));
    }
    if norm.starts_with(BIN_PREFIX) {
        return None;
    }
    if raw.starts_with(BIN_PREFIX) || raw == "./tools/bin" {
        Some(format!(
            "{prefix}: command[0] escapes ./tools/bin after normalization (got {} -> {})",
            go_quote(raw),
            go_quote(&norm)
        ))
    } else {
        Some(format!(
            "{prefix}: relative command[0] must start with ./tools/bin/"
        ))
    }
}

/// Validates `tools.json` text. Never panics, whatever the input: this is
/// the fuzz target's entry point.
pub fn check(text: &str) -> Checked {
    let mut out = Checked::default();
    let error = |out: &mut Checked, message: String| {
        out.findings.push(Finding {
            rule: Rule::AgentCliInvalid,
            message,
            name: None,
            pointer: String::new(),
        })
    };
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            error(
                &mut out,
                format!("tools.json is not valid JSON: {e}; fix the syntax"),
            );
            return out;
        }
    };
    let Some(top) = root.as_object() else {
        error(
            &mut out,
            "tools.json must be an object of the form {\"tools\": [...]}".into(),
        );
        return out;
    };
    for key in top.keys().filter(|k| *k != "tools") {
        out.findings.push(Finding {
            rule: Rule::AgentCliUnknownKey,
            message: format!("unknown top-level key {} is ignored", go_quote(key)),
            name: None,
            pointer: pointer(&[key]),
        });
    }
    let tools = match top.get("tools") {
        None | Some(Value::Null) => return out,
        Some(Value::Array(tools)) => tools,
        Some(_) => {
            error(
                &mut out,
                "\"tools\" must be an array of tool objects".into(),
            );
            return out;
        }
    };
    let mut seen: IndexMap<String, usize> = IndexMap::new();
    let mut duplicated: Vec<String> = Vec::new();
    for (i, raw) in tools.iter().enumerate() {
        let before = out.findings.len();
        let entry = check_entry(i, raw, &mut seen, &mut duplicated, &mut out.findings);
        let failed = out.findings[before..]
            .iter()
            .any(|f| f.rule == Rule::AgentCliInvalid);
        match entry {
            Some(e) if !failed => out.entries.push(e),
            Some(e) if !out.rejected.contains(&e.name) => out.rejected.push(e.name),
            _ => {}
        }
    }
    // A name given twice is ambiguous: none of its entries runs.
    out.entries.retain(|e| !duplicated.contains(&e.name));
    for name in duplicated {
        if !out.rejected.contains(&name) {
            out.rejected.push(name);
        }
    }
    out
}

/// Checks one entry; `None` when it has no usable name.
fn check_entry(
    i: usize,
    raw: &Value,
    seen: &mut IndexMap<String, usize>,
    duplicated: &mut Vec<String>,
    findings: &mut Vec<Finding>,
) -> Option<Entry> {
    let before = findings.len();
    let index = i.to_string();
    let mut error = |at: &[&str], message: String| {
        let mut tokens = vec!["tools", index.as_str()];
        tokens.extend_from_slice(at);
        findings.push(Finding {
            rule: Rule::AgentCliInvalid,
            message,
            name: None,
            pointer: pointer(&tokens),
        });
    };
    let Some(obj) = raw.as_object() else {
        error(&[], format!("tool[{i}]: must be an object"));
        return None;
    };
    let name = match obj.get("name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            error(&["name"], format!("tool[{i}]: \"name\" must be a string"));
            return None;
        }
    };
    if name.is_empty() {
        error(&["name"], format!("tool[{i}]: name is required"));
        return None;
    }
    let prefix = format!("tool[{i}] {}", go_quote(&name));
    if !is_tool_name(&name) {
        error(
            &["name"],
            format!("{prefix}: invalid name for glovebox (must match [A-Za-z0-9_][A-Za-z0-9_.-]*, at most 64 characters: it names the tool over MCP, in exports, approvals and the audit log)"),
        );
    }
    if seen.contains_key(&name) {
        error(&["name"], format!("{prefix}: duplicate name"));
        if !duplicated.contains(&name) {
            duplicated.push(name.clone());
        }
    } else {
        seen.insert(name.clone(), i);
    }
    let description = match obj.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            error(
                &["description"],
                format!("{prefix}: \"description\" must be a string"),
            );
            String::new()
        }
    };
    let schema = match obj.get("schema") {
        None | Some(Value::Null) => None,
        Some(v @ (Value::Object(_) | Value::Bool(_))) => {
            if let Err(e) = crate::validate::Schemas::compile(v, None) {
                error(
                    &["schema"],
                    format!("{prefix}: schema is not a valid JSON Schema: {e}; fix the schema"),
                );
            }
            Some(v.clone())
        }
        Some(_) => {
            error(
                &["schema"],
                format!("{prefix}: \"schema\" must be a JSON Schema object"),
            );
            None
        }
    };
    let command: Vec<String> = match obj.get("command") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            match strings {
                Some(s) => s,
                None => {
                    error(
                        &["command"],
                        format!("{prefix}: \"command\" must be an array of strings"),
                    );
                    Vec::new()
                }
            }
        }
        Some(_) => {
            error(
                &["command"],
                format!("{prefix}: \"command\" must be an array of strings"),
            );
            Vec::new()
        }
    };
    match command.first() {
        None => error(
            &["command"],
            format!("{prefix}: command must have at least program name"),
        ),
        Some(program) if program.is_empty() => error(
            &["command", "0"],
            format!("{prefix}: command[0] must not be empty"),
        ),
        Some(program) if !program.starts_with('/') => {
            if let Some(message) = command_path_error(&prefix, program) {
                error(&["command", "0"], message);
            }
        }
        Some(_) => {}
    }
    if command.iter().any(|a| a.contains('\0')) {
        error(
            &["command"],
            format!("{prefix}: command must not contain NUL bytes"),
        );
    }
    let timeout_sec = match obj.get("timeoutSec") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) | None => {
                error(
                    &["timeoutSec"],
                    format!("{prefix}: timeoutSec must be a positive integer (got {n})"),
                );
                None
            }
            Some(s) => Some(s),
        },
        Some(_) => {
            error(
                &["timeoutSec"],
                format!("{prefix}: timeoutSec must be a positive integer"),
            );
            None
        }
    };
    let mut env_passthrough: Vec<String> = Vec::new();
    match obj.get("envPassthrough") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (j, item) in items.iter().enumerate() {
                let Some(k) = item.as_str() else {
                    error(
                        &["envPassthrough", &j.to_string()],
                        format!("{prefix}: envPassthrough[{j}]: must be a string"),
                    );
                    continue;
                };
                let trimmed = k.trim();
                if trimmed.is_empty() {
                    error(
                        &["envPassthrough", &j.to_string()],
                        format!("{prefix}: envPassthrough[{j}]: empty name"),
                    );
                    continue;
                }
                let upper = trimmed.to_uppercase();
                if !is_env_name(&upper) {
                    error(&["envPassthrough", &j.to_string()], format!(
                        "{prefix}: envPassthrough[{j}]: invalid name {} (must match [A-Z_][A-Z0-9_]*)",
                        go_quote(k)
                    ));
                    continue;
                }
                if !env_passthrough.contains(&upper) {
                    env_passthrough.push(upper);
                }
            }
        }
        Some(_) => error(
            &["envPassthrough"],
            format!("{prefix}: \"envPassthrough\" must be an array of strings"),
        ),
    }
    let permissions = match obj.get("permissions") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<Permissions>(v.clone()) {
            Ok(p) if !p.secrets.is_empty() => {
                error(&["permissions", "secrets"], format!(
                    "{prefix}: permissions.secrets is not supported in tools.json; list the variables in envPassthrough"
                ));
                None
            }
            Ok(p) => Some(p),
            Err(e) => {
                error(&["permissions"], format!(
                    "{prefix}: permissions: {e}; the glovebox extension takes {{\"network\": bool, \"fs\": {{\"read\": [...], \"write\": [...]}}}}"
                ));
                None
            }
        },
    };
    for key in obj.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        findings.push(Finding {
            rule: Rule::AgentCliUnknownKey,
            message: format!(
                "{prefix}: unknown key {} is ignored (agentcli ignores it too)",
                go_quote(key)
            ),
            name: None,
            pointer: pointer(&["tools", &index, key]),
        });
    }
    for f in &mut findings[before..] {
        f.name = Some(name.clone());
    }
    Some(Entry {
        index: i,
        name,
        description,
        schema,
        command,
        timeout_sec,
        env_passthrough,
        permissions,
    })
}

/// The manifest of a valid entry of the `tools.json` in `dir` (absolute).
pub fn manifest(dir: &Path, e: &Entry) -> Manifest {
    let mut command = e.command.clone();
    if let Some(program) = command.first_mut() {
        if !program.starts_with('/') {
            *program = resolve(dir, program).to_string_lossy().into_owned();
        }
    }
    let absolute = |paths: &[String]| -> Vec<String> {
        paths
            .iter()
            .map(|p| resolve(dir, p).to_string_lossy().into_owned())
            .collect()
    };
    let dir_text = dir.to_string_lossy().into_owned();
    let extra = e.permissions.clone().unwrap_or_default();
    let mut read = vec![dir_text.clone()];
    for p in absolute(&extra.fs.read) {
        if !read.contains(&p) {
            read.push(p);
        }
    }
    let secrets = e
        .env_passthrough
        .iter()
        .map(|k| {
            (
                k.clone(),
                Secret {
                    kind: SecretType::String,
                    required: false,
                    hosts: None,
                    inject: None,
                    body: false,
                },
            )
        })
        .collect();
    Manifest {
        name: e.name.clone(),
        description: e.description.clone(),
        kind: Kind::Command,
        version: 1,
        inputs: Inputs {
            schema: e.schema.clone().unwrap_or_else(|| {
                let mut m = Map::new();
                m.insert("type".into(), Value::String("object".into()));
                Value::Object(m)
            }),
        },
        outputs: Outputs {
            format: Format::Json,
            schema: None,
        },
        exec: Exec::AgentCli(AgentCliExec {
            command,
            dir: dir_text,
            timeout_ms: e.timeout_sec.map(|s| s.saturating_mul(1000)),
        }),
        permissions: Permissions {
            network: extra.network,
            fs: FsPermissions {
                read,
                write: absolute(&extra.fs.write),
            },
            secrets,
        },
        approval: Approval::default(),
        examples: Vec::new(),
    }
}

/// What [`load`] found.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Tools ready to run.
    pub tools: Vec<Tool>,
    /// Names of rejected entries.
    pub rejected: Vec<String>,
    /// Findings, as diagnostics on the file.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads and maps the `tools.json` at `file`; `display` names it in
/// diagnostics. Entries whose `permissions` exceed the config's
/// `security.max_permissions` (when it sets one) are rejected.
pub fn load(
    root: &Path,
    file: &Path,
    display: &str,
    config: Option<&Config>,
) -> Result<Loaded, AgentCliError> {
    let file = normalize(file);
    let read_error = |source| AgentCliError::Read {
        path: file.clone(),
        source,
    };
    let mut text = String::new();
    fs::File::open(&file)
        .map_err(read_error)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    let diagnostic = |rule: Rule, name: Option<&str>, at: Position, message: String| {
        Diagnostic::new(rule, display, name, at, message)
    };
    let mut loaded = Loaded::default();
    if text.len() > MAX_FILE_BYTES {
        loaded.diagnostics.push(diagnostic(
            Rule::FileUnreadable,
            None,
            Position::START,
            format!("file is larger than the {MAX_FILE_BYTES}-byte limit; split the tools"),
        ));
        return Ok(loaded);
    }
    let dir = file
        .parent()
        .map_or_else(|| root.to_path_buf(), Path::to_path_buf);
    let checked = check(&text);
    // JSON is YAML: the YAML reader gives line:col of each node (best
    // effort; 1:1 when it cannot read the text).
    let index = super::yaml::parse(&text).ok().map(|d| d.positions);
    let at = |pointer: &str| {
        index
            .as_ref()
            .map_or(Position::START, |ix| ix.value(pointer))
    };
    loaded.rejected = checked.rejected;
    loaded.diagnostics = checked
        .findings
        .into_iter()
        .map(|f| diagnostic(f.rule, f.name.as_deref(), at(&f.pointer), f.message))
        .collect();
    let ceiling = config.and_then(|c| c.security.max_permissions.as_ref());
    for entry in &checked.entries {
        let m = manifest(&dir, entry);
        if let Some(extra) = &entry.permissions {
            let lists = [("read", &extra.fs.read), ("write", &extra.fs.write)];
            for (which, paths) in lists {
                for (j, p) in paths.iter().enumerate() {
                    let resolved = resolve(&dir, p);
                    if !resolved.starts_with(&dir) {
                        loaded.diagnostics.push(diagnostic(
                            Rule::PathLeavesRoot,
                            Some(&entry.name),
                            at(&pointer(&[
                                "tools",
                                &entry.index.to_string(),
                                "permissions",
                                "fs",
                                which,
                                &j.to_string(),
                            ])),
                            format!(
                                "tool[{}] {}: permissions.fs.{which}[{j}] {} reaches outside the tools.json directory ({resolved:?}); make sure that is intended",
                                entry.index,
                                go_quote(&entry.name),
                                go_quote(p)
                            ),
                        ));
                    }
                }
            }
        }
        if let (Some(ceiling), Some(extra)) = (ceiling, &entry.permissions) {
            let mut asked = m.clone();
            asked.permissions = Permissions {
                network: extra.network.clone(),
                fs: FsPermissions {
                    read: extra
                        .fs
                        .read
                        .iter()
                        .map(|p| resolve(&dir, p).to_string_lossy().into_owned())
                        .collect(),
                    write: m.permissions.fs.write.clone(),
                },
                secrets: IndexMap::new(),
            };
            let excess = super::ceiling::excess(root, &asked, ceiling);
            if !excess.is_empty() {
                loaded.diagnostics.push(diagnostic(
                    Rule::ExceedsCeiling,
                    Some(&entry.name),
                    at(&pointer(&["tools", &entry.index.to_string(), "permissions"])),
                    format!(
                        "tool[{}] {}: permissions exceed security.max_permissions: {}; narrow them or raise the ceiling in .glee/config.yml",
                        entry.index,
                        go_quote(&entry.name),
                        excess.join("; ")
                    ),
                ));
                loaded.rejected.push(entry.name.clone());
                continue;
            }
        }
        loaded.tools.push(Tool {
            name: entry.name.clone(),
            file: file.clone(),
            manifest: m,
            origin: Origin::AgentCli,
        });
    }
    Ok(loaded)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn messages(text: &str) -> Vec<String> {
        check(text)
            .findings
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("é"), "\"é\"");
    }

    #[test]
    fn cleans_like_go() {
        assert_eq!(clean("./tools/bin/../hack"), "tools/hack");
        assert_eq!(clean("./tools/bin/x"), "tools/bin/x");
        assert_eq!(clean("../x"), "../x");
        assert_eq!(clean("a/../.."), "..");
        assert_eq!(clean("/../a"), "/a");
        assert_eq!(clean(""), ".");
    }

    #[test]
    fn command_paths() {
        let p = "tool[0] \"t\"";
        assert_eq!(command_path_error(p, "./tools/bin/x"), None);
        assert_eq!(command_path_error(p, "tools/bin/x"), None);
        assert_eq!(
            command_path_error(p, "./tools/bin/../hack").unwrap(),
            "tool[0] \"t\": command[0] escapes ./tools/bin after normalization (got \"./tools/bin/../hack\" -> \"./tools/hack\")"
        );
        assert_eq!(
            command_path_error(p, "./bin/x").unwrap(),
            "tool[0] \"t\": relative command[0] must start with ./tools/bin/"
        );
        assert!(command_path_error(p, "../x")
            .unwrap()
            .contains("must not start with '..'"));
    }

    #[test]
    fn env_is_normalised_and_deduplicated() {
        let c = check(
            r#"{"tools":[{"name":"t","command":["/bin/true"],"envPassthrough":["tz"," TZ","HOME","tz"]}]}"#,
        );
        assert!(c.findings.is_empty(), "{:?}", c.findings);
        assert_eq!(c.entries[0].env_passthrough, ["TZ", "HOME"]);
    }

    #[test]
    fn every_error_is_reported() {
        let m = messages(
            r#"{"tools":[{"command":["/x"]},{"name":"a","command":[]},{"name":"a","command":["./bin/a"],"envPassthrough":["1BAD"]}]}"#,
        );
        assert_eq!(
            m,
            [
                "tool[0]: name is required",
                "tool[1] \"a\": command must have at least program name",
                "tool[2] \"a\": duplicate name",
                "tool[2] \"a\": relative command[0] must start with ./tools/bin/",
                "tool[2] \"a\": envPassthrough[0]: invalid name \"1BAD\" (must match [A-Z_][A-Z0-9_]*)",
            ]
        );
    }

    #[test]
    fn duplicates_reject_every_entry_of_the_name() {
        let c = check(
            r#"{"tools":[{"name":"a","command":["/x"]},{"name":"a","command":["/y"]},{"name":"b","command":["/z"]}]}"#,
        );
        let names: Vec<_> = c.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(c.rejected, ["a"]);
    }

    #[test]
    fn unknown_keys_warn() {
        let c = check(r#"{"tools":[{"name":"a","command":["/x"],"extra":1}]}"#);
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.findings[0].rule, Rule::AgentCliUnknownKey);
        assert_eq!(
            c.findings[0].message,
            "tool[0] \"a\": unknown key \"extra\" is ignored (agentcli ignores it too)"
        );
    }

    #[test]
    fn garbage_never_panics() {
        for text in ["", "[]", "null", "{\"tools\":1}", "{\"tools\":[1,null,[]]}", "{\"tools\":[{\"name\":\"x\",\"command\":[\"\"],\"timeoutSec\":-1,\"permissions\":{\"nope\":1}}]}"] {
            let c = check(text);
            assert!(c.entries.is_empty(), "{text}");
        }
    }
}
