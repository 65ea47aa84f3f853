//! The tool manifest (`.glee/tools/<name>/tool.yml`) as typed data.
//!
//! Field for field this follows `tools-v2.md` and `schemas/tool.schema.json`.
//! Defaults are filled on load, so a [`Manifest`] is the normalised form that
//! `glovebox show` prints and the runner consumes: a missing `permissions`
//! block is "nothing allowed", `exit_codes_ok` is `[0]`, `timeout_ms` is
//! 30 000 and so on.
//!
//! Paths (`entrypoint`, `cwd`, `venv`, `fs.*`) are kept as written; resolve
//! them with [`crate::manifest::discover::resolve`].

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Default wall-clock limit of a command or python call, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// One tool manifest, normalised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Tool name; equals the name of the directory holding `tool.yml`.
    pub name: String,
    /// What the tool does, for agents deciding whether to call it.
    pub description: String,
    /// Which exec block the tool uses.
    pub kind: Kind,
    /// Manifest revision chosen by the tool author.
    pub version: u64,
    /// Parameters the tool accepts.
    pub inputs: Inputs,
    /// What the tool returns.
    pub outputs: Outputs,
    /// How the tool runs: exactly one of http, command, python.
    pub exec: Exec,
    /// What the tool may touch; absent means nothing.
    #[serde(default)]
    pub permissions: Permissions,
    /// Whether a human must approve each call.
    #[serde(default)]
    pub approval: Approval,
    /// Sample calls that help agents use the tool.
    #[serde(default)]
    pub examples: Vec<Example>,
}

impl Manifest {
    /// Names of the properties declared in `inputs.schema.properties`.
    pub fn input_names(&self) -> impl Iterator<Item = &str> {
        self.inputs
            .schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|props| props.keys().map(String::as_str))
    }
}

/// The kind of a tool, naming its exec block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An HTTP request made by glovebox itself.
    Http,
    /// A program run in the jail.
    Command,
    /// A python function run in the jail.
    Python,
    /// An MCP server run in the jail, its tools offered as glovebox tools
    /// (a Glee extension; see [`McpExec`]).
    Mcp,
}

impl Kind {
    /// The lowercase name used in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Command => "command",
            Kind::Python => "python",
            Kind::Mcp => "mcp",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `inputs`: the JSON Schema (2020-12) that call parameters must satisfy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// The parameters' schema, an object schema.
    pub schema: Value,
}

/// `outputs`: how to read what the tool returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outputs {
    /// Parse the output as JSON or return it as text.
    pub format: Format,
    /// Optional JSON Schema (2020-12) for the output; a mismatch is a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// JSON or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Parsed as JSON.
    Json,
    /// Returned as a string.
    #[default]
    Text,
}

/// `exec`: exactly one way of running the tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exec {
    /// `exec.http`.
    Http(HttpExec),
    /// `exec.command`.
    Command(CommandExec),
    /// `exec.python`.
    Python(PythonExec),
    /// An entry of an agentcli `tools.json` (never written in a `tool.yml`):
    /// argv as given, the call's arguments on stdin, one JSON line back.
    #[serde(rename = "agentcli")]
    AgentCli(AgentCliExec),
    /// `exec.mcp`: an MCP server speaking over stdio (a Glee extension).
    Mcp(McpExec),
}

impl Exec {
    /// The [`Kind`] this block belongs to.
    pub fn kind(&self) -> Kind {
        match self {
            Exec::Http(_) => Kind::Http,
            Exec::Command(_) => Kind::Command,
            Exec::Python(_) => Kind::Python,
            Exec::AgentCli(_) => Kind::Command,
            Exec::Mcp(_) => Kind::Mcp,
        }
    }
}

/// `exec.http`: a request glovebox sends on the tool's behalf.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpExec {
    /// HTTP method, uppercase.
    pub method: Method,
    /// URL template; placeholders may not touch scheme, host or port.
    pub url: String,
    /// Header templates, in manifest order.
    #[serde(default, deserialize_with = "string_map")]
    pub headers: IndexMap<String, String>,
    /// Query-string templates, in manifest order.
    #[serde(default, deserialize_with = "string_map")]
    pub query: IndexMap<String, String>,
    /// JSON body template (any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// How to shape the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    /// Action dispatch (a glovebox extension, from Glee v1's per-action
    /// `endpoints`): the value of one input picks a route that extends
    /// this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<Box<Dispatch>>,
    /// Follow a redirect to another origin (without the headers and query
    /// entries whose templates mention a secret) instead of failing.
    #[serde(default)]
    pub follow_cross_origin_redirects: bool,
    /// Wall-clock limit of the whole exchange (connect, redirects, the
    /// full response), in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Largest response body read, in bytes; past it the call fails with
    /// `resource_limit`.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
}

/// `exec.http.dispatch`: one request shape per value of an input.
///
/// A call whose `param` value is `v` sends `routes[v]`: its `path` is
/// appended to `exec.http.url` (so it can never change the origin), its
/// `method` replaces `exec.http.method`, its `query` and `headers` entries
/// are added to (or replace same-named) `exec.http` ones, and its `body`
/// replaces `exec.http.body`. A value without a route is `input_invalid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dispatch {
    /// The input whose (string) value names the route.
    #[serde(default = "action")]
    pub param: String,
    /// Route per value, in manifest order.
    pub routes: IndexMap<String, Route>,
}

/// One route of [`Dispatch`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Path template appended to `exec.http.url`; starts with `/`.
    pub path: String,
    /// Method of this route; default: `exec.http.method`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// Extra query-string templates.
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub query: IndexMap<String, String>,
    /// Extra header templates.
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub headers: IndexMap<String, String>,
    /// Body template of this route; default: `exec.http.body`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

impl HttpExec {
    /// The request shape for a call with `params`: `self` without
    /// dispatch, else `self` extended by the route the dispatch input
    /// names (see [`Dispatch`]). `Err` explains a missing or unknown value.
    pub fn route(
        &self,
        params: &serde_json::Map<String, Value>,
    ) -> Result<std::borrow::Cow<'_, HttpExec>, String> {
        let Some(dispatch) = &self.dispatch else {
            return Ok(std::borrow::Cow::Borrowed(self));
        };
        let choices = || {
            dispatch
                .routes
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let value = match params.get(&dispatch.param) {
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Null) | None => {
                return Err(format!(
                    "`{}` is required: it picks the request to send; pass one of {}",
                    dispatch.param,
                    choices()
                ))
            }
            Some(other) => {
                return Err(format!(
                    "`{}` is {other}, not a string; pass one of {}",
                    dispatch.param,
                    choices()
                ))
            }
        };
        let Some(route) = dispatch.routes.get(value) else {
            return Err(format!(
                "`{}` is `{value}`, which has no route; pass one of {}",
                dispatch.param,
                choices()
            ));
        };
        let mut out = self.clone();
        out.dispatch = None;
        out.url.push_str(&route.path);
        if let Some(m) = route.method {
            out.method = m;
        }
        for (k, v) in &route.query {
            out.query.insert(k.clone(), v.clone());
        }
        for (k, v) in &route.headers {
            out.headers.insert(k.clone(), v.clone());
        }
        if route.body.is_some() {
            out.body.clone_from(&route.body);
        }
        Ok(std::borrow::Cow::Owned(out))
    }
}

/// Default cap on an http tool's response body: 10 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;

fn default_max_response_bytes() -> u64 {
    DEFAULT_MAX_RESPONSE_BYTES
}

/// HTTP methods an http tool may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
    /// HEAD
    Head,
}

/// `exec.http.response`: extraction and projection of the response body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    /// Dotted path of the value to extract (`web.results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    /// Projection applied to the extracted value (to each item of a list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
}

/// One projected field of an http response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// Key in the output object.
    pub name: String,
    /// Dotted path in the response body.
    pub path: String,
}

/// `exec.command`: a program run in the jail, without a shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandExec {
    /// Program to run: a path (relative to the root) or a name looked up in PATH.
    pub entrypoint: String,
    /// Argument templates, each one argv entry.
    #[serde(default, deserialize_with = "string_list")]
    pub args: Vec<String>,
    /// Working directory, relative to the root.
    #[serde(default = "dot")]
    pub cwd: String,
    /// How to read standard output.
    #[serde(default)]
    pub stdout: Stdout,
    /// Exit codes that mean success.
    #[serde(default = "default_exit_codes")]
    pub exit_codes_ok: Vec<i32>,
    /// Wall-clock limit in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

/// How an agentcli `tools.json` entry runs (see
/// [`crate::manifest::agentcli`]): no shell and no templates; the call's
/// JSON arguments are written to stdin and stdout must be one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentCliExec {
    /// The argv exactly as given, with a relative `command[0]` already
    /// resolved against the directory of `tools.json` (absolute).
    pub command: Vec<String>,
    /// The directory holding `tools.json` (absolute): the working
    /// directory of the call. `envPassthrough` becomes optional
    /// `permissions.secrets`, so it is injected and redacted like secrets.
    pub dir: String,
    /// Wall-clock limit in milliseconds (`timeoutSec`); `None`: the
    /// config's `limits.timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `exec.mcp`: an MCP server glovebox starts in one jail (per glovebox
/// process, on first use) and speaks to over its stdin and stdout; each
/// tool the server lists is offered as the glovebox tool `SERVER__TOOL`
/// (see `crate::mcpwrap`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpExec {
    /// Program to run: a path (relative to the root) or a name looked up
    /// in the jail's PATH. Empty for a remote server ([`McpExec::url`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub entrypoint: String,
    /// A remote server's Streamable HTTP endpoint, instead of a program:
    /// glovebox sends its requests itself, as it does an http tool's
    /// (the network allowlist and SSRF guard on every request, TLS
    /// verified, no redirect to another origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent to a remote server; a value may name declared secrets
    /// as `${NAME}` (their real values: glovebox sends them, to that
    /// origin only).
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub headers: IndexMap<String, String>,
    /// Its arguments; an argument may name declared secrets as `${NAME}`
    /// (as `env`): the server gets no call's parameters on its command
    /// line.
    #[serde(default, deserialize_with = "string_list")]
    pub args: Vec<String>,
    /// Working directory, relative to the root.
    #[serde(default = "dot")]
    pub cwd: String,
    /// Extra environment variables; a value may name declared secrets as
    /// `${NAME}` (expanded once, to the value the jail gets: a placeholder
    /// for a secret bound to hosts).
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub env: IndexMap<String, String>,
    /// Wall-clock limit of one tool call, in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// The server is stopped after this long without a call, in
    /// milliseconds (started again on the next one).
    #[serde(default = "default_idle_ms")]
    pub idle_ms: u64,
    /// Which of the server's tools are offered, and which need approval.
    #[serde(default, skip_serializing_if = "ToolRules::is_empty")]
    pub tools: ToolRules,
    /// Set by glovebox on the tools it makes of the server's list; never
    /// written in a manifest.
    #[serde(skip)]
    pub wrapped: Option<Wrapped>,
}

/// Default idle time of an MCP server before glovebox stops it: 5 minutes.
pub const DEFAULT_MCP_IDLE_MS: u64 = 300_000;

fn default_idle_ms() -> u64 {
    DEFAULT_MCP_IDLE_MS
}

/// `exec.mcp.tools`: name patterns (`*` any run of characters, `?` one)
/// over the server's own tool names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRules {
    /// Only these tools are offered (default: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// These tools are never offered (wins over `allow`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// Calls of these tools need an approval (`glovebox approve SERVER`),
    /// even when the manifest's `approval` does not ask for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve: Vec<String>,
}

impl ToolRules {
    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.approve.is_empty()
    }
}

/// What makes an `exec.mcp` tool one of a server's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// The server's tool name (its directory under `.glee/tools/`).
    pub server: String,
    /// The tool's name on the server; empty for the server's own entry.
    pub tool: String,
    /// The digest of what clients are offered of the server's list when
    /// this was made: the text `glovebox approve` shows of every tool of
    /// the list glovebox offers (`crate::offer::shown`), what an approval
    /// covers besides the manifest; empty when the list could not be read.
    pub served: String,
}

/// Gives an `exec.mcp` manifest (as JSON) the `inputs` and `outputs` it
/// does not write: a server's tools bring their own schemas.
pub fn default_mcp_io(manifest: &mut Value) {
    if manifest.get("kind").and_then(Value::as_str) != Some("mcp") {
        return;
    }
    let Some(m) = manifest.as_object_mut() else {
        return;
    };
    m.entry("inputs")
        .or_insert_with(|| serde_json::json!({"schema": {"type": "object"}}));
    m.entry("outputs")
        .or_insert_with(|| serde_json::json!({"format": "json"}));
}

/// Gives a manifest (as JSON, before it becomes a [`Manifest`]) without
/// `exec.command.stdout.format` the format of its `outputs.format`: a
/// command tool declaring JSON output has its stdout read as JSON unless
/// it says otherwise.
pub fn default_stdout_format(manifest: &mut Value) {
    let Some(format) = manifest
        .pointer("/outputs/format")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    let Some(command) = manifest
        .pointer_mut("/exec/command")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let stdout = command
        .entry("stdout")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(stdout) = stdout.as_object_mut() {
        stdout
            .entry("format")
            .or_insert_with(|| Value::String(format));
    }
}

/// `exec.command.stdout`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stdout {
    /// JSON or text.
    #[serde(default)]
    pub format: Format,
    /// Which part of stdout is the output (opt-in; requires `format: json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Select>,
}

/// `exec.command.stdout.select`: a rule picking the output out of stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// HDN's rule: the whole of stdout when it is JSON, else its last line
    /// that is a JSON object or array, else `{"output": "<stdout>"}`.
    LastJsonLine,
}

/// `exec.python`: a function of a python module, run in the jail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonExec {
    /// Dotted module name, importable from `cwd`.
    pub module: String,
    /// Function of the module to call.
    pub function: String,
    /// Positional argument templates (JSON values). Without `args`, the
    /// function is called with the validated parameters as keyword
    /// arguments (`add(a=3, b=1)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Value>>,
    /// Virtual environment directory, relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub venv: Option<String>,
    /// Working directory, relative to the root.
    #[serde(default = "dot")]
    pub cwd: String,
    /// How the function's return value is passed back.
    #[serde(rename = "return", default = "json_format")]
    pub returns: Format,
    /// Wall-clock limit in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Under `serve` and `mcp`, calls fork a warm worker that has already
    /// imported the module (module-level code runs once per worker, not
    /// per call; see `crate::run::warm`). `false`: every call starts its
    /// own interpreter, as `run` always does.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub warm: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

/// `permissions`: everything a call may touch. The default allows nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Network access: none, the internet through glovebox's egress
    /// proxy, or only the hosts of an allowlist.
    #[serde(default)]
    pub network: Network,
    /// Filesystem paths the tool may read or write.
    #[serde(default)]
    pub fs: FsPermissions,
    /// Secrets (environment variables of the caller) the tool receives.
    #[serde(default)]
    pub secrets: IndexMap<String, Secret>,
}

/// `permissions.network`: `false`, `true` (any host the SSRF guard
/// passes) or `{allow: [PATTERN…]}` (only those hosts; see
/// [`crate::net::allow`]). A bare list is read as `{allow: list}` (the
/// form `security.max_permissions.network` also takes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Network {
    /// `true` or `false`.
    Enabled(bool),
    /// `{allow: [...]}`.
    Allow(NetworkAllow),
    /// `[...]`.
    List(Vec<String>),
}

/// The object form of [`Network`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkAllow {
    /// Host patterns: `host`, `host:port`, `*.suffix`, an IP literal.
    pub allow: Vec<String>,
}

impl Default for Network {
    fn default() -> Self {
        Network::Enabled(false)
    }
}

impl From<bool> for Network {
    fn from(on: bool) -> Self {
        Network::Enabled(on)
    }
}

impl Network {
    /// True when the tool may use the network at all.
    pub fn enabled(&self) -> bool {
        !matches!(self, Network::Enabled(false))
    }

    /// The allowlist's patterns, when the network is narrowed to one.
    pub fn allow(&self) -> Option<&[String]> {
        match self {
            Network::Enabled(_) => None,
            Network::Allow(a) => Some(&a.allow),
            Network::List(l) => Some(l),
        }
    }

    /// The parsed allowlist (`None`: any host, or no network).
    pub fn allowlist(&self) -> Result<Option<crate::net::Allowlist>, crate::net::PatternError> {
        self.allow().map(crate::net::Allowlist::parse).transpose()
    }
}

/// `permissions.fs`: paths relative to the root (absolute paths honoured).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsPermissions {
    /// Readable paths.
    #[serde(default)]
    pub read: Vec<String>,
    /// Readable and writable paths.
    #[serde(default)]
    pub write: Vec<String>,
}

/// One declared secret, read from the environment variable of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// Value type; only `string` exists.
    #[serde(rename = "type", default)]
    pub kind: SecretType,
    /// Whether the call fails when the variable is unset.
    #[serde(default = "yes")]
    pub required: bool,
    /// The hosts the secret is meant for (network allowlist patterns).
    /// With `hosts` it is a *placeholder secret*: the tool gets a random
    /// stand-in of the same length and glovebox's egress proxy swaps in
    /// the real value only on connections to these hosts (see
    /// [`crate::egress::placeholder`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// A header the proxy sets on every request to `hosts`, the real
    /// value put in `format` (a placeholder secret only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject: Option<Inject>,
    /// Also swap the placeholder in request bodies sent to `hosts`
    /// (headers only by default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body: bool,
}

/// `permissions.secrets.NAME.inject`: a header the egress proxy sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inject {
    /// The header's name (`Authorization`).
    pub header: String,
    /// Its value, `{}` standing for the secret (`Bearer {}`); default `{}`.
    #[serde(default = "just_the_value")]
    pub format: String,
}

fn just_the_value() -> String {
    "{}".into()
}

/// Type of a secret value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretType {
    /// A string.
    #[default]
    String,
}

/// `approval`: whether a human must confirm each call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// Ask before every call.
    #[serde(default)]
    pub required: bool,
    /// Shown to the approver; mandatory when `required` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One entry of `examples`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// What the example shows.
    pub description: String,
    /// Parameters of the call.
    #[serde(default = "empty_object")]
    pub params: Value,
    /// What the call returns (usually text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_output: Option<Value>,
}

fn action() -> String {
    "action".to_owned()
}

fn dot() -> String {
    ".".to_owned()
}

fn yes() -> bool {
    true
}

fn json_format() -> Format {
    Format::Json
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_exit_codes() -> Vec<i32> {
    vec![0]
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A scalar written where a string template is expected (`count: 10`).
#[derive(Deserialize)]
#[serde(untagged)]
enum StringLike {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl From<StringLike> for String {
    fn from(v: StringLike) -> Self {
        match v {
            StringLike::Str(s) => s,
            StringLike::Int(i) => i.to_string(),
            StringLike::Float(f) => f.to_string(),
            StringLike::Bool(b) => b.to_string(),
        }
    }
}

fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<IndexMap<String, String>, D::Error> {
    let raw = IndexMap::<String, StringLike>::deserialize(d)?;
    Ok(raw.into_iter().map(|(k, v)| (k, v.into())).collect())
}

fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let raw = Vec::<StringLike>::deserialize(d)?;
    Ok(raw.into_iter().map(String::from).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_filled() {
        let m: Manifest = serde_json::from_value(json!({
            "name": "t", "description": "d", "kind": "command", "version": 1,
            "inputs": {"schema": {"type": "object"}},
            "outputs": {"format": "text"},
            "exec": {"command": {"entrypoint": "echo", "args": ["a", 3]}}
        }))
        .unwrap();
        let Exec::Command(c) = &m.exec else {
            panic!("not a command")
        };
        assert_eq!(c.args, ["a", "3"]);
        assert_eq!(c.exit_codes_ok, [0]);
        assert_eq!(c.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(c.cwd, ".");
        assert_eq!(m.permissions, Permissions::default());
        assert!(!m.permissions.network.enabled());
        assert!(!m.approval.required);
    }

    #[test]
    fn secrets_keep_order_and_default_required() {
        let p: Permissions = serde_json::from_value(json!({
            "secrets": {"B": {"type": "string"}, "A": {"required": false}}
        }))
        .unwrap();
        let names: Vec<_> = p.secrets.keys().collect();
        assert_eq!(names, ["B", "A"]);
        assert!(p.secrets["B"].required);
        assert!(!p.secrets["A"].required);
    }

    #[test]
    fn two_exec_blocks_are_rejected() {
        let e: Result<Exec, _> = serde_json::from_value(json!({
            "http": {"method": "GET", "url": "https://x"},
            "command": {"entrypoint": "echo"}
        }));
        assert!(e.is_err());
    }
}
