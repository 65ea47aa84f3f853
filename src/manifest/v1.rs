//! Glee v1 single-file tools (`.glee/tools/<name>.yml`, format:
//! `tools-v1.md`), mapped onto the v2 model.
//!
//! A v1 file is parsed with positions ([`super::yaml`]), checked against the
//! embedded `schemas/tool-v1.schema.json`, then rewritten as the JSON of the
//! equivalent v2 manifest, whose [`PositionIndex`] points back into the v1
//! file. The v2 lint then runs on that document unchanged, so a v1 tool
//! obeys every v2 rule (placeholders that resolve, secrets kept out of the
//! URL's authority, …) and each finding still reads `file.yml:line:col`.
//! `glovebox migrate` writes the same JSON as a v2 `tool.yml`, which is why
//! a migrated tool behaves exactly like its v1 original.
//!
//! The mapping:
//!
//! - `parameters[]` → `inputs.schema` (an object schema, no extra
//!   properties): `type`, `description`, `enum`, `default`, and the JSON
//!   Schema bounds are copied; `required: true` lists the name in
//!   `required`. `category` (path, query, hash, body, header) documents
//!   where the value goes; the `api` templates place it.
//! - `api.endpoint` → `exec.http.url`; `api.base_url` + `api.endpoints` →
//!   `url` + `exec.http.dispatch` routed on the `action` parameter (each
//!   endpoint's `path`, `method`, `query_params`, `headers`, `body` become
//!   a route); `method` (any case, default GET), `headers`,
//!   `query_params` → `query`, `body` as they are.
//! - `response.results_path` / `fields` → `exec.http.response.json_path` /
//!   `fields`; `outputs.format` is json.
//! - `secrets: {K: ${env:K}}` → `permissions.secrets.K` (a required
//!   string); `${K}` in `api` is the secret. A secret read from another
//!   variable or written literally is refused (`v1-unsupported`): v2 reads
//!   each secret from the variable of its own name. `${env:K}` written
//!   directly in `api` declares secret `K` the same way.
//! - `permissions.network` is true (an http tool needs it); nothing else
//!   is granted. `examples` are kept.
//! - A placeholder in `api` that names no parameter and no secret is
//!   declared as an optional input of any type, as the seed's own
//!   `${issue_number}` needs — unless its name is upper-case or reads like
//!   a credential: that stays an `unknown-placeholder` error, so a
//!   forgotten `secrets` entry never turns a credential into a caller
//!   parameter.

use serde_json::{json, Map, Value};

use super::diagnostic::{Rule, Severity};
use super::discover::ToolEntry;
use super::lint::{self, CREDENTIAL_WORDS};
use super::project::Origin;
use super::schema::{self, Finding, SchemaError, Which};
use super::slots;
use super::yaml::{self, Document, NodePosition, PositionIndex, YamlError};

/// Parameter keys copied into the v2 property schema as they are.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "description",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
];

/// The input that picks an endpoint in the action-dispatch form.
pub const ACTION_PARAM: &str = "action";

/// Why a v1 file could not be mapped at all.
#[derive(Debug, thiserror::Error)]
pub enum V1Error {
    /// The text is not one YAML document.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// The embedded v1 schema is broken (a glovebox bug).
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// A v1 file mapped onto the v2 model.
#[derive(Debug, Clone)]
pub struct Mapped {
    /// The equivalent v2 manifest as JSON, positions pointing into the v1
    /// file; `None` when a finding is an error.
    pub document: Option<Document>,
    /// Findings about the v1 text itself (schema, unsupported constructs).
    pub findings: Vec<Finding>,
    /// The file's `name` field, when it is a non-empty string (even if the
    /// file has errors), so they can be reported under the tool's name.
    pub name: Option<String>,
}

/// Parses v1 `text` and maps it onto the v2 model (see the module doc).
pub fn map(text: &str) -> Result<Mapped, V1Error> {
    let doc = yaml::parse(text)?;
    let findings = schema::check(Which::ToolV1, &doc)?;
    let name = doc
        .value
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let fatal = |f: &[Finding]| f.iter().any(|f| f.rule.severity() == Severity::Error);
    if fatal(&findings) || !doc.value.is_object() {
        return Ok(Mapped {
            document: None,
            findings,
            name,
        });
    }
    let mut mapper = Mapper {
        src: &doc,
        out: PositionIndex::default(),
        findings,
        secrets: Map::new(),
    };
    let value = mapper.manifest();
    let findings = mapper.findings;
    let document = (!fatal(&findings)).then_some(Document {
        value,
        positions: mapper.out,
    });
    Ok(Mapped {
        document,
        findings,
        name,
    })
}

/// Lints v1 `text` as the file `.glee/tools/tool.yml` of a project at a
/// root that does not exist, touching no file: the whole v1 path (YAML,
/// v1 schema, mapping, every v2 rule, the model) for a fuzz target or a
/// quick check. A `name` other than `tool` adds a `name-mismatch` error.
pub fn check(text: &str) -> lint::Checked {
    let entry = ToolEntry {
        name: "tool".into(),
        file: std::path::PathBuf::from("/nonexistent/.glee/tools/tool.yml"),
        display: ".glee/tools/tool.yml".into(),
        origin: Origin::V1,
    };
    lint::lint_v1(std::path::Path::new("/nonexistent"), &entry, text)
}

struct Mapper<'a> {
    src: &'a Document,
    out: PositionIndex,
    findings: Vec<Finding>,
    secrets: Map<String, Value>,
}

impl Mapper<'_> {
    /// `dst` and everything below it sit where `src` and its subtree do.
    fn graft(&mut self, src: &str, dst: &str) {
        self.out.graft(&self.src.positions, src, dst);
    }

    /// `dst` alone sits where `src` (or its nearest ancestor) does.
    fn alias(&mut self, src: &str, dst: &str) {
        let at = self.src.positions.node(src);
        self.out.insert(dst, at);
    }

    fn unsupported(&mut self, pointer: &str, message: String) {
        self.findings.push(Finding {
            pointer: pointer.to_owned(),
            at: self.src.positions.value(pointer),
            rule: Rule::V1Unsupported,
            message,
        });
    }

    fn get(&self, pointer: &str) -> Option<&Value> {
        self.src.value.pointer(pointer)
    }

    fn manifest(&mut self) -> Value {
        self.alias("", "");
        let mut out = Map::new();
        for key in ["name", "description"] {
            let v = self.get(&format!("/{key}")).cloned().unwrap_or_default();
            out.insert(key.into(), v);
            self.graft(&format!("/{key}"), &format!("/{key}"));
        }
        out.insert("kind".into(), json!("http"));
        self.alias("/api", "/kind");
        let version = self.get("/version").cloned().unwrap_or(json!(1));
        out.insert("version".into(), version);
        self.alias("/version", "/version");

        self.secrets();
        let mut properties = self.parameters();
        let mut http = self.http(&mut properties);
        for (name, pointer) in rewrite_env(&mut http) {
            self.env_secret(&name, &pointer);
        }
        self.infer_inputs(&http, &mut properties);

        let required: Vec<Value> = self
            .get("/parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("required") == Some(&Value::Bool(true)))
            .filter_map(|p| p.get("name").cloned())
            .chain(
                properties
                    .get(ACTION_PARAM)
                    .filter(|_| !self.declares(ACTION_PARAM) && http.get("dispatch").is_some())
                    .map(|_| json!(ACTION_PARAM)),
            )
            .collect();
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("additionalProperties".into(), json!(false));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("properties".into(), Value::Object(properties));
        out.insert("inputs".into(), json!({ "schema": schema }));
        self.alias("/parameters", "/inputs");
        self.alias("/parameters", "/inputs/schema");
        self.alias("/parameters", "/inputs/schema/required");
        self.alias("/parameters", "/inputs/schema/properties");

        out.insert("outputs".into(), json!({"format": "json"}));
        self.alias("/response", "/outputs");
        out.insert("exec".into(), json!({ "http": http }));
        self.alias("/api", "/exec");
        let mut permissions = Map::new();
        permissions.insert("network".into(), json!(true));
        permissions.insert(
            "secrets".into(),
            Value::Object(std::mem::take(&mut self.secrets)),
        );
        out.insert("permissions".into(), Value::Object(permissions));
        self.alias("/secrets", "/permissions");
        self.alias("/secrets", "/permissions/secrets");
        out.insert("approval".into(), json!({"required": false}));
        if let Some(examples) = self.get("/examples").cloned() {
            out.insert("examples".into(), examples);
            self.graft("/examples", "/examples");
        }
        Value::Object(out)
    }

    fn declares(&self, name: &str) -> bool {
        self.get("/parameters")
            .and_then(Value::as_array)
            .is_some_and(|ps| ps.iter().any(|p| p.get("name") == Some(&json!(name))))
    }

    /// `secrets` → `permissions.secrets`.
    fn secrets(&mut self) {
        let Some(secrets) = self.get("/secrets").and_then(Value::as_object).cloned() else {
            return;
        };
        for (key, value) in secrets {
            let src = yaml::pointer_of(["secrets", &key]);
            let text = value.as_str().unwrap_or_default().trim();
            match text
                .strip_prefix("${env:")
                .and_then(|rest| rest.strip_suffix('}'))
            {
                Some(var) if var == key => {}
                Some(var) => {
                    let message = format!(
                        "secret `{key}` reads `${{env:{var}}}`; glovebox reads each secret from the environment variable of its own name: write `{var}: ${{env:{var}}}` and use `${{{var}}}` in `api`, or export `{key}` and write `${{env:{key}}}`"
                    );
                    self.unsupported(&src, message);
                }
                None => {
                    let message = format!(
                        "secret `{key}` is not read from the environment (a value written in the file is not supported); write `{key}: ${{env:{key}}}` and export `{key}`"
                    );
                    self.unsupported(&src, message);
                }
            }
            self.secrets
                .insert(key.clone(), json!({"type": "string", "required": true}));
            self.graft(&src, &yaml::pointer_of(["permissions", "secrets", &key]));
        }
    }

    /// `${env:NAME}` written in `api`: declares secret NAME.
    fn env_secret(&mut self, name: &str, pointer: &str) {
        if self.secrets.contains_key(name) {
            return;
        }
        self.secrets
            .insert(name.to_owned(), json!({"type": "string", "required": true}));
        let dst = yaml::pointer_of(["permissions", "secrets", name]);
        let at = self.out.value(pointer);
        self.out.insert(
            &dst,
            NodePosition {
                key: Some(at),
                value: at,
            },
        );
    }

    /// `parameters` → the properties of `inputs.schema`.
    fn parameters(&mut self) -> Map<String, Value> {
        let mut properties = Map::new();
        let params = self
            .get("/parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, p) in params.iter().enumerate() {
            let src = format!("/parameters/{i}");
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            if properties.contains_key(name) {
                let message = format!("parameter `{name}` is declared twice; keep one declaration");
                self.findings.push(Finding {
                    pointer: format!("{src}/name"),
                    at: self.src.positions.value(&format!("{src}/name")),
                    rule: Rule::InvalidValue,
                    message,
                });
                continue;
            }
            let mut prop = Map::new();
            for key in SCHEMA_KEYS {
                if let Some(v) = p.get(*key) {
                    prop.insert((*key).to_owned(), v.clone());
                }
            }
            properties.insert(name.to_owned(), Value::Object(prop));
            let dst = yaml::pointer_of(["inputs", "schema", "properties", name]);
            self.graft(&src, &dst);
            let item = self.src.positions.value(&src);
            let key = self.src.positions.value(&format!("{src}/name"));
            self.out.insert(
                &dst,
                NodePosition {
                    key: Some(key),
                    value: item,
                },
            );
        }
        properties
    }

    /// `api` and `response` → `exec.http`.
    fn http(&mut self, properties: &mut Map<String, Value>) -> Value {
        let api = self
            .get("/api")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut http = Map::new();
        let method = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .map(str::to_ascii_uppercase)
                .map(Value::String)
        };
        http.insert(
            "method".into(),
            method(api.get("method")).unwrap_or(json!("GET")),
        );
        self.graft("/api/method", "/exec/http/method");
        let (url, endpoints) = match (
            api.get("endpoint"),
            api.get("base_url"),
            api.get("endpoints"),
        ) {
            (Some(url), None, None) => {
                self.graft("/api/endpoint", "/exec/http/url");
                (url.clone(), None)
            }
            (None, Some(base), Some(Value::Object(endpoints))) => {
                self.graft("/api/base_url", "/exec/http/url");
                let base = base.as_str().unwrap_or_default().trim_end_matches('/');
                (json!(base), Some(endpoints.clone()))
            }
            (Some(_), _, _) => {
                self.unsupported(
                    "/api/endpoint",
                    "`api` has both `endpoint` and `base_url`/`endpoints`; keep `endpoint` for one request, or `base_url` + `endpoints` for one request per action".into(),
                );
                (Value::Null, None)
            }
            (None, Some(_), _) => {
                self.unsupported(
                    "/api/base_url",
                    "`api.base_url` needs `api.endpoints` (a path per action); for a single request write `api.endpoint` instead".into(),
                );
                (Value::Null, None)
            }
            (None, None, Some(_)) => {
                self.unsupported(
                    "/api/endpoints",
                    "`api.endpoints` needs `api.base_url`, the URL its paths are appended to; add it".into(),
                );
                (Value::Null, None)
            }
            (None, None, None) => {
                self.unsupported(
                    "/api",
                    "`api` has no `endpoint`; add `endpoint: https://…` (or `base_url` + `endpoints`)"
                        .into(),
                );
                (Value::Null, None)
            }
        };
        http.insert("url".into(), url);
        self.templates(&api, "/api", "/exec/http", &mut http);
        if let Some(response) = self.get("/response").and_then(Value::as_object).cloned() {
            let mut r = Map::new();
            if let Some(path) = response.get("results_path") {
                r.insert("json_path".into(), path.clone());
                self.graft("/response/results_path", "/exec/http/response/json_path");
            }
            if let Some(fields) = response.get("fields") {
                r.insert("fields".into(), fields.clone());
                self.graft("/response/fields", "/exec/http/response/fields");
            }
            http.insert("response".into(), Value::Object(r));
            self.alias("/response", "/exec/http/response");
        }
        if let Some(endpoints) = endpoints {
            let mut routes = Map::new();
            for (action, endpoint) in &endpoints {
                let src = yaml::pointer_of(["api", "endpoints", action]);
                let dst = yaml::pointer_of(["exec", "http", "dispatch", "routes", action]);
                let Some(endpoint) = endpoint.as_object() else {
                    continue;
                };
                let mut route = Map::new();
                if let Some(path) = endpoint.get("path") {
                    route.insert("path".into(), path.clone());
                }
                if let Some(m) = method(endpoint.get("method")) {
                    route.insert("method".into(), m);
                }
                self.templates(endpoint, &src, &dst, &mut route);
                routes.insert(action.clone(), Value::Object(route));
                self.graft(&src, &dst);
            }
            if !self.declares(ACTION_PARAM) {
                let names: Vec<Value> = routes.keys().map(|k| json!(k)).collect();
                properties.insert(
                    ACTION_PARAM.into(),
                    json!({
                        "type": "string",
                        "description": "Which endpoint to call (implied by `api.endpoints`)",
                        "enum": names,
                    }),
                );
                self.alias(
                    "/api/endpoints",
                    &yaml::pointer_of(["inputs", "schema", "properties", ACTION_PARAM]),
                );
            }
            http.insert(
                "dispatch".into(),
                json!({"param": ACTION_PARAM, "routes": routes}),
            );
            self.alias("/api/endpoints", "/exec/http/dispatch");
            self.alias("/api/endpoints", "/exec/http/dispatch/param");
            self.alias("/api/endpoints", "/exec/http/dispatch/routes");
        }
        Value::Object(http)
    }

    /// `headers`, `query_params` and `body` of `from` into `to`.
    fn templates(
        &mut self,
        from: &Map<String, Value>,
        src: &str,
        dst: &str,
        to: &mut Map<String, Value>,
    ) {
        for (v1, v2) in [
            ("headers", "headers"),
            ("query_params", "query"),
            ("body", "body"),
        ] {
            if let Some(v) = from.get(v1) {
                to.insert(v2.into(), v.clone());
                self.graft(&format!("{src}/{v1}"), &format!("{dst}/{v2}"));
            }
        }
    }

    /// Declares the placeholders of `http` that name nothing (see the
    /// module doc) as optional inputs.
    fn infer_inputs(&mut self, http: &Value, properties: &mut Map<String, Value>) {
        let mut found = Vec::new();
        each_string(http, &mut "/exec/http".to_owned(), &mut |text, pointer| {
            if let Ok(list) = slots::scan(text) {
                for p in list {
                    found.push((p.name.to_owned(), pointer.to_owned()));
                }
            }
        });
        for (name, pointer) in found {
            let lower = name.to_ascii_lowercase();
            let credential = CREDENTIAL_WORDS.iter().any(|w| lower.contains(w));
            if properties.contains_key(&name)
                || self.secrets.contains_key(&name)
                || !slots::is_identifier(&name)
                || !name.chars().any(|c| c.is_ascii_lowercase())
                || credential
            {
                continue;
            }
            properties.insert(
                name.clone(),
                json!({"description": "Not declared in the v1 file's parameters; inferred from its use in `api`"}),
            );
            let at = self.out.value(&pointer);
            self.out.insert(
                &yaml::pointer_of(["inputs", "schema", "properties", &name]),
                NodePosition {
                    key: Some(at),
                    value: at,
                },
            );
        }
    }
}

/// Calls `f` on every string value under `value` with its pointer.
fn each_string(value: &Value, pointer: &mut String, f: &mut impl FnMut(&str, &str)) {
    match value {
        Value::String(s) => f(s, pointer),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                yaml::push_token(pointer, &i.to_string());
                each_string(item, pointer, f);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let len = pointer.len();
                yaml::push_token(pointer, k);
                each_string(v, pointer, f);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Rewrites `${env:NAME}` to `${NAME}` in every string of `http` (an
/// `exec.http` value); returns each name with the pointer of its string.
fn rewrite_env(http: &mut Value) -> Vec<(String, String)> {
    fn walk(value: &mut Value, pointer: &mut String, out: &mut Vec<(String, String)>) {
        match value {
            Value::String(s) => {
                while let Some(start) = s.find("${env:") {
                    let Some(len) = s[start..].find('}') else {
                        break;
                    };
                    let name = s[start + 6..start + len].to_owned();
                    if !slots::is_identifier(&name) {
                        break;
                    }
                    out.push((name.clone(), pointer.clone()));
                    s.replace_range(start..start + len + 1, &format!("${{{name}}}"));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    yaml::push_token(pointer, &i.to_string());
                    walk(item, pointer, out);
                    pointer.truncate(len);
                }
            }
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    let len = pointer.len();
                    yaml::push_token(pointer, k);
                    walk(v, pointer, out);
                    pointer.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(http, &mut "/exec/http".to_owned(), &mut out);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn mapped(text: &str) -> Value {
        let m = map(text).unwrap();
        assert!(m.findings.is_empty(), "{:?}", m.findings);
        m.document.unwrap().value
    }

    #[test]
    fn endpoint_form_maps_field_for_field() {
        let v = mapped(
            "name: t\ndescription: d\nparameters:\n  - name: q\n    type: string\n    category: query\n    required: true\n  - name: n\n    type: integer\n    default: 3\napi:\n  endpoint: https://a.example/s\n  method: post\n  headers:\n    X-Key: ${KEY}\n  query_params:\n    q: ${q}\n  body:\n    n: ${n}\nresponse:\n  results_path: a.b\n  fields:\n    - name: x\n      path: y\nsecrets:\n  KEY: ${env:KEY}\n",
        );
        assert_eq!(
            v,
            json!({
                "name": "t", "description": "d", "kind": "http", "version": 1,
                "inputs": {"schema": {"type": "object", "additionalProperties": false,
                    "required": ["q"],
                    "properties": {"q": {"type": "string"}, "n": {"type": "integer", "default": 3}}}},
                "outputs": {"format": "json"},
                "exec": {"http": {"method": "POST", "url": "https://a.example/s",
                    "headers": {"X-Key": "${KEY}"}, "query": {"q": "${q}"}, "body": {"n": "${n}"},
                    "response": {"json_path": "a.b", "fields": [{"name": "x", "path": "y"}]}}},
                "permissions": {"network": true, "secrets": {"KEY": {"type": "string", "required": true}}},
                "approval": {"required": false},
            })
        );
    }

    #[test]
    fn env_in_api_declares_the_secret_and_credentials_are_not_inferred() {
        let v = mapped(
            "name: t\ndescription: d\napi:\n  endpoint: https://a.example/${id}\n  headers:\n    A: ${env:TOK}\n    B: ${api_token}\n",
        );
        assert_eq!(v["exec"]["http"]["headers"]["A"], "${TOK}");
        assert!(v["permissions"]["secrets"]["TOK"].is_object());
        let props = &v["inputs"]["schema"]["properties"];
        assert!(props["id"].is_object());
        assert!(props.get("api_token").is_none());
    }

    #[test]
    fn check_runs_the_whole_path_on_text() {
        let ok = check("name: tool\ndescription: d\napi:\n  endpoint: https://a.example/\n");
        assert!(ok.manifest.is_some(), "{:?}", ok.diagnostics);
        assert_eq!(ok.diagnostics.len(), 1);
        assert_eq!(ok.diagnostics[0].rule, Rule::LegacyV1);
        for bad in [
            "",
            "- a",
            "name: [",
            "api: 3",
            "name: tool\ndescription: d\napi: {}\n",
        ] {
            assert!(check(bad).manifest.is_none(), "{bad:?}");
        }
    }

    #[test]
    fn every_prefix_and_byte_flip_of_a_seed_file_is_handled() {
        let seed = include_str!("../../tests/fixtures/v1/github-issues.yml");
        let full = check(&seed.replace("name: github_issues", "name: tool"));
        assert!(full.manifest.is_some(), "{:?}", full.diagnostics);
        for (i, _) in seed.char_indices() {
            let _ = check(&seed[..i]);
        }
        let specials = ['$', '{', '}', ':', '-', '\n', '[', '#', '"', '&', '*'];
        for (i, c) in seed.char_indices().step_by(7) {
            let mut text = seed.to_owned();
            let with = specials[i % specials.len()].to_string();
            text.replace_range(i..i + c.len_utf8(), &with);
            let _ = check(&text);
        }
    }

    #[test]
    fn secrets_from_elsewhere_are_refused_with_position() {
        let m = map("name: t\ndescription: d\napi:\n  endpoint: https://a.example\nsecrets:\n  A: ${env:B}\n  C: literal\n").unwrap();
        assert!(m.document.is_none());
        let at: Vec<_> = m.findings.iter().map(|f| (f.rule, f.at.line)).collect();
        assert_eq!(at, [(Rule::V1Unsupported, 6), (Rule::V1Unsupported, 7)]);
    }
}
