//! Lint of one tool manifest: YAML syntax, the embedded `tool.schema.json`,
//! then the rules a schema cannot express (name = directory, one exec block
//! matching `kind`, placeholders that resolve, secrets kept away from caller
//! input and from the URL's authority, paths inside the root, …).
//!
//! Rules read the manifest as JSON, so each one reports even when another
//! part of the file is broken, and each finding carries the line and column
//! of the node it is about.

use std::collections::HashSet;
use std::path::Path;

use jsonschema::Validator;
use serde_json::Value;

use super::diagnostic::{Diagnostic, Rule};
use super::discover::{self, ToolEntry};
use super::model::Manifest;
use super::project::Origin;
use super::schema::{self, display_path, Which};
use super::slots::{self, SlotError};
use super::v1;
use super::yaml::{self, push_token, Document, Position};

mod permissions;

/// The result of checking one manifest.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The normalised manifest, present when no finding is an error.
    pub manifest: Option<Manifest>,
    /// Every finding, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Input names that suggest the caller is asked for a credential.
pub(crate) const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "credential",
    "private_key",
];

/// Checks the manifest `text` of the tool `entry` under `root`: a v2
/// `tool.yml`, or a Glee v1 file (see [`lint_v1`]) when `entry.origin` is
/// [`Origin::V1`].
pub fn lint_tool(root: &Path, entry: &ToolEntry, text: &str) -> Checked {
    if entry.origin == Origin::V1 {
        return lint_v1(root, entry, text);
    }
    let mut lint = Lint {
        root,
        entry,
        diagnostics: Vec::new(),
    };
    let manifest = lint.run(text);
    let mut diagnostics = lint.diagnostics;
    diagnostics.sort_by_key(|d| (d.line, d.col));
    let manifest = manifest.filter(|_| !diagnostics.iter().any(Diagnostic::is_error));
    Checked {
        manifest,
        diagnostics,
    }
}

/// Checks the Glee v1 file `text` of `entry`: the v1 schema and mapping
/// ([`v1::map`]), then every v2 rule on the mapped manifest, all reported
/// at the v1 file's lines, plus a `legacy-v1` warning. The tool's name is
/// its `name` field, which must equal the file stem up to `-` vs `_`.
pub fn lint_v1(root: &Path, entry: &ToolEntry, text: &str) -> Checked {
    let mut diagnostics = Vec::new();
    let mut manifest = None;
    let mut named = entry.clone();
    match v1::map(text) {
        Err(v1::V1Error::Yaml(e)) => diagnostics.push(Diagnostic::new(
            Rule::YamlSyntax,
            &entry.display,
            Some(&entry.name),
            e.position(),
            e.to_string(),
        )),
        Err(v1::V1Error::Schema(e)) => diagnostics.push(Diagnostic::new(
            Rule::InvalidSchema,
            &entry.display,
            Some(&entry.name),
            Position::START,
            e.to_string(),
        )),
        Ok(mapped) => {
            if let Some(name) = &mapped.name {
                named.name.clone_from(name);
            }
            for f in &mapped.findings {
                diagnostics.push(Diagnostic::new(
                    f.rule,
                    &entry.display,
                    Some(&named.name),
                    f.at,
                    f.message.clone(),
                ));
            }
            if let Some(doc) = mapped.document {
                if named.name.replace('-', "_") != entry.name.replace('-', "_") {
                    let message = format!(
                        "name `{}` differs from the file name `{}.yml`; rename one to match the other",
                        named.name, entry.name
                    );
                    diagnostics.push(Diagnostic::new(
                        Rule::NameMismatch,
                        &entry.display,
                        Some(&named.name),
                        doc.positions.value("/name"),
                        message,
                    ));
                }
                let mut lint = Lint {
                    root,
                    entry: &named,
                    diagnostics: Vec::new(),
                };
                manifest = lint.run_document(doc);
                diagnostics.extend(lint.diagnostics);
            }
        }
    }
    diagnostics.push(Diagnostic::new(
        Rule::LegacyV1,
        &entry.display,
        Some(&named.name),
        Position::START,
        format!(
            "Glee v1 single-file tool (legacy format); run `glovebox migrate {}` to turn it into .glee/tools/{}/{}",
            named.name,
            named.name,
            discover::TOOL_FILE
        ),
    ));
    diagnostics.sort_by_key(|d| (d.line, d.col));
    let manifest = manifest.filter(|_| !diagnostics.iter().any(Diagnostic::is_error));
    Checked {
        manifest,
        diagnostics,
    }
}

struct Lint<'a> {
    root: &'a Path,
    entry: &'a ToolEntry,
    diagnostics: Vec<Diagnostic>,
}

impl Lint<'_> {
    fn report(&mut self, rule: Rule, at: Position, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(
            rule,
            &self.entry.display,
            Some(&self.entry.name),
            at,
            message,
        ));
    }

    fn run(&mut self, text: &str) -> Option<Manifest> {
        match yaml::parse(text) {
            Ok(doc) => self.run_document(doc),
            Err(e) => {
                self.report(Rule::YamlSyntax, e.position(), e.to_string());
                None
            }
        }
    }

    fn run_document(&mut self, mut doc: Document) -> Option<Manifest> {
        // An MCP server's tools bring their own schemas.
        crate::manifest::model::default_mcp_io(&mut doc.value);
        match schema::check(Which::Tool, &doc) {
            Ok(findings) => {
                for f in findings {
                    self.report(f.rule, f.at, f.message);
                }
            }
            Err(e) => {
                self.report(Rule::InvalidSchema, Position::START, e.to_string());
                return None;
            }
        }
        if !doc.value.is_object() {
            return None;
        }
        self.name(&doc);
        self.exec_blocks(&doc);
        self.mcp_transport(&doc);
        self.approval(&doc);
        let inputs = self.schemas(&doc);
        let input_names = keys_at(&doc.value, "/inputs/schema/properties");
        let secret_names = keys_at(&doc.value, "/permissions/secrets");
        self.secrets(&doc, &input_names, &secret_names);
        self.placeholders(&doc, &input_names, &secret_names);
        self.url_authority(&doc, &secret_names);
        self.paths(&doc);
        self.control_surface_writes(&doc);
        self.database_file_writes(&doc);
        self.http_permissions(&doc);
        self.network_patterns(&doc);
        self.secret_hosts(&doc);
        self.dispatch(&doc, &input_names);
        self.entrypoint(&doc, &input_names);
        if let Some(validator) = inputs {
            self.examples(&doc, &validator);
        }
        // Only about an otherwise clean tool: one problem at a time.
        if self.diagnostics.is_empty() {
            self.unused_inputs(&doc, &input_names);
        }
        if self.diagnostics.iter().any(Diagnostic::is_error) {
            return None;
        }
        let mut value = doc.value;
        crate::manifest::model::default_stdout_format(&mut value);
        match serde_json::from_value::<Manifest>(value) {
            Ok(m) => Some(m),
            Err(e) => {
                self.report(
                    Rule::InvalidValue,
                    Position::START,
                    format!("manifest does not match the model: {e}"),
                );
                None
            }
        }
    }

    /// `name-mismatch`.
    fn name(&mut self, doc: &Document) {
        if let Some(name) = doc.value.get("name").and_then(Value::as_str) {
            if name != self.entry.name {
                let message = format!(
                    "name `{name}` differs from its directory `{}`; rename one to match the other",
                    self.entry.name
                );
                self.report(Rule::NameMismatch, doc.positions.value("/name"), message);
            }
        }
    }

    /// `exec-block-count` and `kind-mismatch`.
    fn exec_blocks(&mut self, doc: &Document) {
        let Some(exec) = doc.value.get("exec").and_then(Value::as_object) else {
            return;
        };
        let blocks: Vec<&str> = ["http", "command", "python", "mcp"]
            .into_iter()
            .filter(|b| exec.contains_key(*b))
            .collect();
        match blocks.as_slice() {
            [] => self.report(
                Rule::ExecBlockCount,
                doc.positions.key("/exec"),
                "exec has no block; add exactly one of `http`, `command`, `python`, `mcp`",
            ),
            [only] => {
                if let Some(kind) = doc.value.get("kind").and_then(Value::as_str) {
                    let known = matches!(kind, "http" | "command" | "python" | "mcp");
                    if known && kind != *only {
                        let message = format!(
                            "kind is `{kind}` but exec holds a `{only}` block; make them match"
                        );
                        self.report(Rule::KindMismatch, doc.positions.value("/kind"), message);
                    }
                }
            }
            [_, second, ..] => {
                let message = format!(
                    "exec holds several blocks ({}); keep exactly one, the one named by `kind`",
                    blocks.join(", ")
                );
                self.report(
                    Rule::ExecBlockCount,
                    doc.positions.key(&format!("/exec/{second}")),
                    message,
                );
            }
        }
    }

    /// `exec-block-count` for `exec.mcp`: a program or a URL, exactly
    /// one; a remote server needs the network.
    fn mcp_transport(&mut self, doc: &Document) {
        let Some(mcp) = doc.value.pointer("/exec/mcp").and_then(Value::as_object) else {
            return;
        };
        match (mcp.contains_key("entrypoint"), mcp.contains_key("url")) {
            (true, true) => self.report(
                Rule::ExecBlockCount,
                doc.positions.key("/exec/mcp/url"),
                "exec.mcp has both `entrypoint` and `url`; keep one: a program glovebox runs in its jail, or a remote server's URL",
            ),
            (false, false) => self.report(
                Rule::ExecBlockCount,
                doc.positions.key("/exec/mcp"),
                "exec.mcp names no server; add `entrypoint` (a program glovebox runs in its jail) or `url` (a remote server)",
            ),
            (false, true) => {
                let network = doc.value.pointer("/permissions/network");
                if matches!(network, None | Some(Value::Bool(false))) {
                    self.report(
                        Rule::InvalidValue,
                        doc.positions.key("/exec/mcp/url"),
                        "a remote MCP server needs the network; add its host to permissions.network.allow",
                    );
                }
                if mcp.contains_key("args") || mcp.contains_key("env") {
                    self.report(
                        Rule::InvalidValue,
                        doc.positions.key("/exec/mcp/url"),
                        "`args` and `env` are for a program; a remote server takes `headers`",
                    );
                }
            }
            (true, false) => {
                if mcp.contains_key("headers") {
                    self.report(
                        Rule::InvalidValue,
                        doc.positions.key("/exec/mcp/headers"),
                        "`headers` are for a remote server (`url`); a program takes `env`",
                    );
                }
            }
        }
    }

    /// `approval-reason-missing`.
    fn approval(&mut self, doc: &Document) {
        let required = doc.value.pointer("/approval/required") == Some(&Value::Bool(true));
        let reason = doc
            .value
            .pointer("/approval/reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if required && reason.is_empty() {
            self.report(
                Rule::ApprovalReasonMissing,
                doc.positions.key("/approval/required"),
                "approval is required but no reason is given; add `approval.reason` for the approver",
            );
        }
    }

    /// `invalid-schema` and `inputs-not-object`; returns the compiled inputs schema.
    fn schemas(&mut self, doc: &Document) -> Option<Validator> {
        let mut inputs = None;
        for base in ["/inputs/schema", "/outputs/schema"] {
            let Some(schema) = doc.value.pointer(base) else {
                continue;
            };
            if !schema.is_object() && !schema.is_boolean() {
                continue; // reported by the manifest schema
            }
            match jsonschema::draft202012::new(schema) {
                Ok(validator) if base == "/inputs/schema" => inputs = Some(validator),
                Ok(_) => {}
                Err(e) => {
                    let mut pointer = base.to_owned();
                    pointer.push_str(e.instance_path().as_str());
                    let message = format!(
                        "`{}` is not a valid JSON Schema 2020-12: `{}`: {}",
                        display_path(base),
                        display_path(&pointer),
                        crate::manifest::diagnostic::lowercase_first(&e.to_string())
                    );
                    self.report(Rule::InvalidSchema, doc.positions.value(&pointer), message);
                }
            }
        }
        let declared = doc.value.pointer("/inputs/schema/type");
        let is_object = match declared {
            None => true,
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
            Some(_) => true, // reported as invalid-schema
        };
        if !is_object {
            self.report(
                Rule::InputsNotObject,
                doc.positions.value("/inputs/schema/type"),
                "inputs.schema must describe an object (`type: object`): parameters are named",
            );
        }
        inputs
    }

    /// `secret-name-invalid`, `input-shadows-secret`, `input-looks-like-secret`.
    fn secrets(&mut self, doc: &Document, inputs: &[String], secrets: &[String]) {
        for name in secrets {
            if !slots::is_identifier(name) {
                let at = doc
                    .positions
                    .key(&yaml::pointer_of(["permissions", "secrets", name]));
                let message = format!(
                    "secret `{name}` is not a valid environment variable name; use letters, digits and `_`, not starting with a digit"
                );
                self.report(Rule::SecretNameInvalid, at, message);
            }
        }
        for input in inputs {
            let at =
                doc.positions
                    .key(&yaml::pointer_of(["inputs", "schema", "properties", input]));
            if let Some(secret) = secrets.iter().find(|s| s.eq_ignore_ascii_case(input)) {
                let message = format!(
                    "input `{input}` has the name of the secret `{secret}`; rename the input so a caller can never supply or shadow the secret"
                );
                self.report(Rule::InputShadowsSecret, at, message);
            } else {
                let lower = input.to_ascii_lowercase();
                if CREDENTIAL_WORDS.iter().any(|w| lower.contains(w)) {
                    let message = format!(
                        "input `{input}` looks like a credential; declare it under permissions.secrets instead of taking it from the caller"
                    );
                    self.report(Rule::InputLooksLikeSecret, at, message);
                }
            }
        }
    }

    /// `unknown-placeholder`, `unterminated-placeholder`, `invalid-placeholder`.
    fn placeholders(&mut self, doc: &Document, inputs: &[String], secrets: &[String]) {
        let Some(exec) = doc.value.get("exec") else {
            return;
        };
        let mut known: Vec<String> = inputs.to_vec();
        known.extend(secrets.iter().cloned());
        let mut templates = Vec::new();
        collect_strings(exec, &mut "/exec".to_owned(), &mut templates);
        for (pointer, text, is_key) in templates {
            let at = if is_key {
                doc.positions.key(&pointer)
            } else {
                doc.positions.value(&pointer)
            };
            let where_ = display_path(&pointer);
            match slots::scan(&text) {
                Err(e @ SlotError::Unterminated { .. }) => {
                    self.report(
                        Rule::UnterminatedPlaceholder,
                        at,
                        format!("`{where_}`: {e}"),
                    );
                }
                Err(e @ SlotError::InvalidName { .. }) => {
                    self.report(Rule::InvalidPlaceholder, at, format!("`{where_}`: {e}"));
                }
                Ok(found) => {
                    let mut seen = HashSet::new();
                    for p in found {
                        if known.iter().any(|k| k == p.name) || !seen.insert(p.name) {
                            continue;
                        }
                        let mut message = format!(
                            "`${{{}}}` in `{where_}` is neither an input property nor a declared secret; add it to inputs.schema.properties or permissions.secrets",
                            p.name
                        );
                        if let Some(best) = schema::did_you_mean(p.name, &known) {
                            message.push_str(&format!(" (did you mean `{best}`?)"));
                        }
                        self.report(Rule::UnknownPlaceholder, at, message);
                    }
                }
            }
        }
    }

    /// `unused-input`: an input of a command tool, or of a python tool
    /// with `args`, that no template of `exec` names (a python tool without
    /// `args` gets every input as a keyword argument; an http tool may
    /// send inputs without templates).
    fn unused_inputs(&mut self, doc: &Document, inputs: &[String]) {
        let exec = match doc.value.get("exec") {
            Some(e) if e.get("command").is_some() => e,
            Some(e) if e.pointer("/python/args").is_some() => e,
            _ => return,
        };
        let mut templates = Vec::new();
        collect_strings(exec, &mut "/exec".to_owned(), &mut templates);
        let mut used = HashSet::new();
        for (_, text, _) in &templates {
            if let Ok(found) = slots::scan(text) {
                used.extend(found.into_iter().map(|p| p.name.to_string()));
            }
        }
        for name in inputs {
            if !used.contains(name) {
                let mut pointer = "/inputs/schema/properties".to_owned();
                push_token(&mut pointer, name);
                let message = format!(
                    "input `{name}` is used by no template of exec, so its value never reaches the tool; pass it with `${{{name}}}` or remove it"
                );
                self.report(Rule::UnusedInput, doc.positions.key(&pointer), message);
            }
        }
    }

    /// `url-authority-placeholder`.
    fn url_authority(&mut self, doc: &Document, secrets: &[String]) {
        let Some(url) = doc.value.pointer("/exec/http/url").and_then(Value::as_str) else {
            return;
        };
        if secrets.is_empty() {
            return;
        }
        let authority = url_authority(url);
        if authority.contains("${") {
            let message = format!(
                "a placeholder in the scheme, host or port (`{authority}`) could send the tool's secrets anywhere; write the scheme and host literally"
            );
            self.report(
                Rule::UrlAuthorityPlaceholder,
                doc.positions.value("/exec/http/url"),
                message,
            );
        }
    }

    /// `dispatch-invalid`.
    fn dispatch(&mut self, doc: &Document, inputs: &[String]) {
        let Some(dispatch) = doc.value.pointer("/exec/http/dispatch") else {
            return;
        };
        let param = dispatch
            .get("param")
            .and_then(Value::as_str)
            .unwrap_or("action");
        if !inputs.iter().any(|i| i == param) {
            let pointer = if dispatch.get("param").is_some() {
                "/exec/http/dispatch/param"
            } else {
                "/exec/http/dispatch"
            };
            let message = format!(
                "dispatch routes on input `{param}`, which inputs.schema.properties does not declare; declare it (a string with an `enum` of the route names)"
            );
            self.report(Rule::DispatchInvalid, doc.positions.key(pointer), message);
        }
        let Some(routes) = dispatch.get("routes").and_then(Value::as_object) else {
            return;
        };
        for (name, route) in routes {
            let Some(path) = route.get("path").and_then(Value::as_str) else {
                continue;
            };
            if !path.starts_with('/') {
                let pointer =
                    yaml::pointer_of(["exec", "http", "dispatch", "routes", name, "path"]);
                let message = format!(
                    "route `{name}` has path `{path}`, which does not start with `/`; it is appended to exec.http.url, so start it with `/`"
                );
                self.report(
                    Rule::DispatchInvalid,
                    doc.positions.value(&pointer),
                    message,
                );
            }
        }
        let enum_pointer = yaml::pointer_of(["inputs", "schema", "properties", param, "enum"]);
        if let Some(values) = doc.value.pointer(&enum_pointer).and_then(Value::as_array) {
            for v in values {
                let routed = v.as_str().is_some_and(|v| routes.contains_key(v));
                if !routed {
                    let message = format!(
                        "input `{param}` allows {v}, which has no route in exec.http.dispatch.routes; add a route or remove the value"
                    );
                    self.report(
                        Rule::DispatchInvalid,
                        doc.positions.value(&enum_pointer),
                        message,
                    );
                }
            }
        }
    }

    /// `entrypoint-placeholder` and `entrypoint-missing`.
    fn entrypoint(&mut self, doc: &Document, inputs: &[String]) {
        let (pointer, entrypoint) = match ["/exec/command/entrypoint", "/exec/mcp/entrypoint"]
            .into_iter()
            .find_map(|p| Some((p, doc.value.pointer(p)?.as_str()?)))
        {
            Some(found) => found,
            None => return,
        };
        let at = doc.positions.value(pointer);
        let Ok(found) = slots::scan(entrypoint) else {
            return; // reported by the placeholder rules
        };
        if found.iter().any(|p| inputs.iter().any(|i| i == p.name)) {
            self.report(
                Rule::EntrypointPlaceholder,
                at,
                "the entrypoint takes a caller-supplied placeholder, so the caller chooses the program; name the program literally",
            );
        }
        if found.is_empty()
            && entrypoint.contains('/')
            && !Path::new(entrypoint).is_absolute()
            && !discover::resolve(self.root, entrypoint).exists()
        {
            let message = format!(
                "entrypoint `{entrypoint}` does not exist under the project root; create it or fix the path"
            );
            self.report(Rule::EntrypointMissing, at, message);
        }
    }

    /// `example-params-invalid`.
    fn examples(&mut self, doc: &Document, inputs: &Validator) {
        let Some(examples) = doc.value.get("examples").and_then(Value::as_array) else {
            return;
        };
        for (i, example) in examples.iter().enumerate() {
            let Some(params) = example.get("params") else {
                continue;
            };
            if let Some(error) = inputs.iter_errors(params).next() {
                let mut pointer = format!("/examples/{i}/params");
                pointer.push_str(error.instance_path().as_str());
                let message = format!(
                    "example {} does not satisfy inputs.schema: {}",
                    i + 1,
                    crate::manifest::diagnostic::lowercase_first(&error.to_string())
                );
                self.report(
                    Rule::ExampleParamsInvalid,
                    doc.positions.value(&pointer),
                    message,
                );
            }
        }
    }
}

/// Keys of the object at `pointer`, or none.
fn keys_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every string under `value` (values and object keys) with its pointer;
/// the flag says whether the string is a key.
fn collect_strings(value: &Value, pointer: &mut String, out: &mut Vec<(String, String, bool)>) {
    match value {
        Value::String(s) => out.push((pointer.clone(), s.clone(), false)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                collect_strings(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let len = pointer.len();
                push_token(pointer, k);
                if k.contains('$') {
                    out.push((pointer.clone(), k.clone(), true));
                }
                collect_strings(v, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// The part of a URL template before its path: `scheme://host:port`, or
/// everything up to the first `/`, `?` or `#` when there is no `://`.
pub fn url_authority(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn authority_of_urls() {
        assert_eq!(url_authority("https://a.b:8/x?y"), "https://a.b:8");
        assert_eq!(url_authority("https://a.b"), "https://a.b");
        assert_eq!(url_authority("https://a.b?q=1"), "https://a.b");
        assert_eq!(url_authority("${base}/v1"), "${base}");
        assert_eq!(url_authority("https://${host}/v1"), "https://${host}");
        assert_eq!(url_authority("https://api.x/${path}"), "https://api.x");
    }
}
