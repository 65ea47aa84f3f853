//! Findings about manifests and the config file: [`Diagnostic`], its
//! [`Severity`] and the stable [`Rule`] ids.

use std::fmt;

use serde::Serialize;

use super::yaml::Position;

/// How bad a finding is. Errors make `lint` fail and keep a tool from running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth fixing; the tool still loads.
    Warning,
    /// The tool (or config) is rejected.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident = $id:literal, $sev:ident;)*) => {
        /// A lint rule. The kebab-case id is stable: scripts and tests match on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule {
            $($(#[$doc])* $variant,)*
        }

        impl Rule {
            /// Every rule, in documentation order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable kebab-case id.
            pub fn id(self) -> &'static str {
                match self {
                    $(Rule::$variant => $id,)*
                }
            }

            /// The severity findings of this rule carry.
            pub fn severity(self) -> Severity {
                match self {
                    $(Rule::$variant => Severity::$sev,)*
                }
            }
        }
    };
}

rules! {
    /// The file is not valid YAML (or holds several documents).
    YamlSyntax = "yaml-syntax", Error;
    /// The file cannot be read or is too large.
    FileUnreadable = "file-unreadable", Error;
    /// A tool directory without `tool.yml`.
    ToolFileMissing = "tool-file-missing", Warning;
    /// A required field is absent.
    MissingField = "missing-field", Error;
    /// A field the schema does not know.
    UnknownField = "unknown-field", Error;
    /// A value of the wrong JSON type.
    InvalidType = "invalid-type", Error;
    /// A value outside its allowed set or range.
    InvalidValue = "invalid-value", Error;
    /// `kind` is not http, command or python.
    UnknownKind = "unknown-kind", Error;
    /// `name` differs from the tool's directory name.
    NameMismatch = "name-mismatch", Error;
    /// `exec` holds zero or several blocks.
    ExecBlockCount = "exec-block-count", Error;
    /// `kind` names a different block than the one in `exec`.
    KindMismatch = "kind-mismatch", Error;
    /// `approval.required: true` without a `reason`.
    ApprovalReasonMissing = "approval-reason-missing", Error;
    /// `inputs.schema` or `outputs.schema` is not a valid 2020-12 schema.
    InvalidSchema = "invalid-schema", Error;
    /// `inputs.schema` does not describe an object.
    InputsNotObject = "inputs-not-object", Error;
    /// `${X}` where X is neither an input property nor a declared secret.
    UnknownPlaceholder = "unknown-placeholder", Error;
    /// `${` without a closing `}`.
    UnterminatedPlaceholder = "unterminated-placeholder", Error;
    /// `${}` or `${name}` with a name that is not an identifier.
    InvalidPlaceholder = "invalid-placeholder", Error;
    /// An input property has the name of a declared secret.
    InputShadowsSecret = "input-shadows-secret", Error;
    /// An input property named like a credential (token, password, ...).
    InputLooksLikeSecret = "input-looks-like-secret", Warning;
    /// An input property of a command tool (or of a python tool with
    /// `args`) that no template uses: the caller's value would be dropped.
    UnusedInput = "unused-input", Warning;
    /// A placeholder in the scheme, host or port of an http tool with secrets.
    UrlAuthorityPlaceholder = "url-authority-placeholder", Error;
    /// A secret name that is not a valid environment-variable name.
    SecretNameInvalid = "secret-name-invalid", Error;
    /// A path in `fs.read`, `fs.write` or `cwd` that resolves outside the root.
    PathLeavesRoot = "path-leaves-root", Warning;
    /// A granted path (`fs.*`, `cwd`, `venv`) that goes through a symlink.
    GrantThroughLink = "grant-through-link", Warning;
    /// An `fs.write` entry on `.glee/` or a root `tools.json`, which stay
    /// read-only in every jail (invariant 3): the grant gives nothing there.
    WriteOnControlSurface = "write-on-control-surface", Warning;
    /// An `fs.write` entry naming a SQLite database file alone: SQLite
    /// creates and removes its journal (`-journal`, `-wal`, `-shm`) beside
    /// it, which only a grant of the directory allows.
    DatabaseFileGrant = "database-file-grant", Warning;
    /// An http tool with filesystem permissions (http tools run no code).
    HttpWithFs = "http-with-fs", Warning;
    /// An http tool with `network: false` cannot reach anything.
    HttpWithoutNetwork = "http-without-network", Warning;
    /// A `permissions.network.allow` entry that is not a host pattern.
    NetworkPatternInvalid = "network-pattern-invalid", Error;
    /// A placeholder secret's `hosts` entry the tool's network allowlist
    /// does not cover (the proxy would never reach it).
    SecretHostsOutsideNetwork = "secret-hosts-outside-network", Error;
    /// A networked command, python or agent-cli tool handed a secret's
    /// value (no `hosts`): its code can send it anywhere it reaches.
    SecretWithoutHosts = "secret-without-hosts", Warning;
    /// `hosts` on an http tool's secret: http tools never give a secret
    /// to code, so it changes nothing there.
    SecretHostsOnHttpTool = "secret-hosts-on-http-tool", Warning;
    /// A placeholder in `exec.command.entrypoint` lets the caller pick the program.
    EntrypointPlaceholder = "entrypoint-placeholder", Warning;
    /// A relative entrypoint path that does not exist.
    EntrypointMissing = "entrypoint-missing", Warning;
    /// An example's params do not satisfy `inputs.schema`.
    ExampleParamsInvalid = "example-params-invalid", Warning;
    /// An agentcli `tools.json` (or one of its entries) is invalid.
    AgentCliInvalid = "agentcli-invalid", Error;
    /// A key of a `tools.json` entry that agentcli and glovebox ignore.
    AgentCliUnknownKey = "agentcli-unknown-key", Warning;
    /// Two tools of different origins (`.glee/tools/`, `tools.json`) share a name.
    NameClash = "name-clash", Error;
    /// A `tools.json` entry's `permissions` exceed `security.max_permissions`.
    ExceedsCeiling = "exceeds-ceiling", Error;
    /// A project tool with the name of a built-in the config enables.
    BuiltinShadowed = "builtin-shadowed", Warning;
    /// `exec.http.dispatch` names no input, a route path that does not
    /// start with `/`, or leaves a value of the input's `enum` unrouted.
    DispatchInvalid = "dispatch-invalid", Error;
    /// A Glee v1 single-file tool (`.glee/tools/<name>.yml`); it runs, and
    /// `glovebox migrate NAME` turns it into a v2 tool directory.
    LegacyV1 = "legacy-v1", Warning;
    /// A Glee v1 value glovebox cannot map (a secret not read from the
    /// environment variable of its own name, an `api` with both or
    /// neither of `endpoint` and `base_url` + `endpoints`, …).
    V1Unsupported = "v1-unsupported", Error;
    /// Two tools of the same name (a v1 file and a v2 directory, or two
    /// v1 files); neither runs until one is removed or renamed.
    DuplicateTool = "duplicate-tool", Error;
    /// A node tool's `node_modules` lookup (from its script's directory up
    /// to the root) lies under a write grant of a tool of the project: a
    /// package planted there runs as the node tool.
    NodeModulesWritable = "node-modules-writable", Warning;
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// One finding, anchored at `file:line:col`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Path of the file, relative to the project root, with `/` separators.
    pub file: String,
    /// The tool concerned (its directory name); `None` for the config file.
    pub tool: Option<String>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// Stable rule id.
    pub rule: Rule,
    /// Lowercase explanation, saying what to do where possible.
    pub message: String,
}

impl Diagnostic {
    /// A finding of `rule` (severity from the rule) at `at` in `file`.
    pub fn new(
        rule: Rule,
        file: &str,
        tool: Option<&str>,
        at: Position,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: rule.severity(),
            file: file.to_owned(),
            tool: tool.map(str::to_owned),
            line: at.line,
            col: at.col,
            rule,
            message: message.into(),
        }
    }

    /// Whether this finding is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// `file:line:col: severity[rule] tool: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}[{}]",
            self.file,
            self.line,
            self.col,
            self.severity.as_str(),
            self.rule.id()
        )?;
        match &self.tool {
            Some(tool) => write!(f, " {tool}: {}", self.message),
            None => write!(f, " {}", self.message),
        }
    }
}

pub(crate) use crate::yaml::lowercase_first;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for rule in Rule::ALL {
            let id = rule.id();
            assert!(seen.insert(id), "duplicate id {id}");
            assert!(id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit()));
        }
    }

    #[test]
    fn display_format() {
        let d = Diagnostic {
            severity: Severity::Error,
            file: ".glee/tools/x/tool.yml".into(),
            tool: Some("x".into()),
            line: 12,
            col: 5,
            rule: Rule::MissingField,
            message: "missing required field `kind`".into(),
        };
        assert_eq!(
            d.to_string(),
            ".glee/tools/x/tool.yml:12:5: error[missing-field] x: missing required field `kind`"
        );
    }
}
