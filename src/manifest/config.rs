//! The project configuration, `.glee/config.yml`: the permission ceiling,
//! http security, resource limits, sandbox mode and safety mode.
//!
//! The file is optional (absent = every default). When present it is
//! validated against `schemas/config.schema.json` first, so an unknown or
//! misspelt key is an error with `file:line:col` and a did-you-mean, never a
//! silently ignored setting.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, Rule};
use super::discover::CONFIG_FILE;
use super::schema::{self, SchemaError, Which};
use super::yaml::{self, Position};

/// `.glee/config.yml`, with defaults filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Ceiling and http settings.
    #[serde(default)]
    pub security: Security,
    /// Resource limits applied to every call.
    #[serde(default)]
    pub limits: Limits,
    /// Sandbox behaviour when the kernel lacks a feature.
    #[serde(default)]
    pub sandbox: Sandbox,
    /// How approvals are handled.
    #[serde(default)]
    pub safety_mode: SafetyMode,
    /// Built-in tools to enable (`read_file`, `write_file`, `list_files`);
    /// all three by default, `builtins: []` turns them off. See
    /// [`crate::builtin`].
    #[serde(default = "all_builtins")]
    pub builtins: Vec<String>,
    /// What a call does when its audit record cannot be written.
    #[serde(default)]
    pub audit: AuditMode,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            security: Security::default(),
            limits: Limits::default(),
            sandbox: Sandbox::default(),
            safety_mode: SafetyMode::default(),
            builtins: all_builtins(),
            audit: AuditMode::default(),
        }
    }
}

/// The names `builtins:` accepts: every built-in file tool, sorted (the
/// tools themselves live above the manifest layer, in [`crate::builtin`]).
pub const BUILTINS: [&str; 3] = ["list_files", "read_file", "write_file"];

/// Every built-in, in the order `glovebox list` shows them.
fn all_builtins() -> Vec<String> {
    BUILTINS.iter().map(|n| (*n).to_owned()).collect()
}

/// `security`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Security {
    /// The most any tool may declare; `None` when the file sets no ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_permissions: Option<MaxPermissions>,
    /// Outbound HTTP settings for http tools.
    #[serde(default)]
    pub http: HttpSecurity,
}

/// `security.max_permissions`: the ceiling. Absent parts allow nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxPermissions {
    /// Whether tools may have network access, and to which hosts
    /// (`true`, `false`, a list of patterns or `{allow: [...]}`).
    #[serde(default)]
    pub network: super::model::Network,
    /// Paths tools may read or write (relative to the root).
    #[serde(default)]
    pub fs: super::model::FsPermissions,
    /// Names of secrets tools may receive.
    #[serde(default)]
    pub secrets: Vec<String>,
}

/// `security.http`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSecurity {
    /// Allow requests to private, loopback, unspecified and multicast
    /// addresses (link-local and cloud metadata stay refused).
    #[serde(default)]
    pub allow_private: bool,
    /// PEM file of extra trusted CAs, relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_ca_file: Option<String>,
}

/// `limits`: bounded by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit per call, in milliseconds.
    #[serde(default = "Limits::default_timeout_ms")]
    pub timeout_ms: u64,
    /// Memory limit per call, in MiB.
    #[serde(default = "Limits::default_memory_mb")]
    pub memory_mb: u64,
    /// Maximum number of processes per call.
    #[serde(default = "Limits::default_pids")]
    pub pids: u64,
    /// Maximum captured output (stdout, stderr, response body) in bytes.
    #[serde(default = "Limits::default_output_bytes")]
    pub output_bytes: u64,
    /// Largest file a call may write, in MiB.
    #[serde(default = "Limits::default_file_size_mb")]
    pub file_size_mb: u64,
}

impl Limits {
    fn default_timeout_ms() -> u64 {
        super::model::DEFAULT_TIMEOUT_MS
    }
    fn default_memory_mb() -> u64 {
        512
    }
    fn default_pids() -> u64 {
        64
    }
    fn default_output_bytes() -> u64 {
        1024 * 1024
    }
    fn default_file_size_mb() -> u64 {
        64
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: Self::default_timeout_ms(),
            memory_mb: Self::default_memory_mb(),
            pids: Self::default_pids(),
            output_bytes: Self::default_output_bytes(),
            file_size_mb: Self::default_file_size_mb(),
        }
    }
}

/// `sandbox`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// Run even when a declared restriction cannot be enforced (each
    /// Outcome then carries a warning). Off by default: fail closed.
    #[serde(default)]
    pub degraded: bool,
    /// `network: true` tools use the host's network as it is: no network
    /// namespace, no egress proxy, no SSRF guard, no allowlist. For CI
    /// steps that need it; every call then says so in a warning and in
    /// its audit line (`network=direct`). Off by default.
    #[serde(default)]
    pub direct_network: bool,
}

/// `safety_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyMode {
    /// Ask for approval where manifests require it.
    #[default]
    Ask,
    /// Refuse tools that require approval when no human can answer.
    Strict,
    /// Never ask.
    AlwaysAllow,
}

/// `audit`: what happens when a call's audit record cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditMode {
    /// No record, no call: a call whose intent cannot be written (and made
    /// durable) before it starts is refused with `audit_unavailable`.
    #[default]
    Required,
    /// The call runs anyway; its Outcome carries a warning.
    BestEffort,
}

/// Why the config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("failed to read {CONFIG_FILE}")]
    Read {
        /// The OS error.
        source: io::Error,
    },
    /// The file has errors; each is a positioned diagnostic.
    #[error("{CONFIG_FILE} is invalid ({} problem(s)); run `glovebox lint` for details", diagnostics.len())]
    Invalid {
        /// What is wrong, with line and column.
        diagnostics: Vec<Diagnostic>,
    },
    /// An embedded schema is broken.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

impl ConfigError {
    /// The Outcome's error kind: `.glee/config.yml` is unusable.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
}

/// Loads `.glee/config.yml` under `root`; a missing file gives the defaults.
pub fn load(root: &Path) -> Result<Config, ConfigError> {
    let path = root.join(CONFIG_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Config::default()),
        Err(source) => Err(ConfigError::Read { source }),
    }
}

/// Parses and validates config text.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let invalid = |rule, at, message: String| ConfigError::Invalid {
        diagnostics: vec![Diagnostic::new(rule, CONFIG_FILE, None, at, message)],
    };
    let doc = match yaml::parse(text) {
        Ok(doc) => doc,
        Err(e) => return Err(invalid(Rule::YamlSyntax, e.position(), e.to_string())),
    };
    if doc.value.is_null() {
        return Ok(Config::default());
    }
    let findings = schema::check(Which::Config, &doc)?;
    if !findings.is_empty() {
        return Err(ConfigError::Invalid {
            diagnostics: findings
                .into_iter()
                .map(|f| Diagnostic::new(f.rule, CONFIG_FILE, None, f.at, f.message))
                .collect(),
        });
    }
    serde_json::from_value(doc.value).map_err(|e| {
        invalid(
            Rule::InvalidValue,
            Position::START,
            format!("config does not match its model: {e}"),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn empty_gives_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
        assert_eq!(Config::default().limits.timeout_ms, 30_000);
        assert!(!Config::default().sandbox.degraded);
    }

    #[test]
    fn full_config() {
        let c = parse(
            "security:\n  max_permissions:\n    network: true\n    fs:\n      read: [\".\"]\n      write: [\".glee/\"]\n    secrets: []\n  http:\n    allow_private: false\nlimits:\n  memory_mb: 256\nsandbox:\n  degraded: true\nsafety_mode: strict\n",
        )
        .unwrap();
        let max = c.security.max_permissions.unwrap();
        assert!(max.network.enabled());
        assert_eq!(max.fs.write, [".glee/"]);
        assert_eq!(c.limits.memory_mb, 256);
        assert_eq!(c.limits.pids, 64);
        assert!(c.sandbox.degraded);
        assert_eq!(c.safety_mode, SafetyMode::Strict);
    }

    #[test]
    fn builtins_are_on_by_default_and_checked() {
        assert_eq!(
            Config::default().builtins,
            ["list_files", "read_file", "write_file"]
        );
        assert!(parse("builtins: []\n").unwrap().builtins.is_empty());
        let c = parse("builtins: [read_file, list_files]\n").unwrap();
        assert_eq!(c.builtins, ["read_file", "list_files"]);
        let err = parse("builtins: [read_files]\n").unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
    }

    #[test]
    fn unknown_key_is_an_error() {
        let err = parse("limits:\n  timeout_ms: 5\n  memroy_mb: 3\n").unwrap_err();
        let ConfigError::Invalid { diagnostics } = err else {
            panic!("expected invalid")
        };
        assert_eq!(diagnostics[0].rule, Rule::UnknownField);
        assert_eq!(diagnostics[0].line, 3);
        assert!(diagnostics[0].message.contains("memory_mb"));
    }
}
