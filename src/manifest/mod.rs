//! Tool manifests: model, discovery, config and lint.
//!
//! A project is a directory holding `.glee/`; each tool is
//! `.glee/tools/<name>/tool.yml` (format: `tools-v2.md`). Loading goes
//! through these pieces, one concept per file:
//!
//! - [`yaml`] parses YAML with saphyr's marked nodes into a
//!   [`serde_json::Value`] plus a [`yaml::PositionIndex`] (JSON pointer →
//!   line:col of the key and of the value). Everything after it works on
//!   JSON and reports positions through the index. Documents are capped at
//!   [`yaml::MAX_DOCUMENT_BYTES`]; alias expansion is bounded by saphyr.
//! - [`schema`] holds `schemas/tool.schema.json` and
//!   `schemas/config.schema.json` (embedded, compiled once) and maps each
//!   validation error to a rule id, a position and a lowercase message —
//!   with a did-you-mean for unknown fields.
//! - [`lint`] adds the rules a schema cannot say: name = directory, one exec
//!   block matching `kind`, placeholders that resolve, secrets that callers
//!   cannot shadow or redirect, paths that stay in the root. [`diagnostic`]
//!   holds [`Diagnostic`] and the stable [`Rule`] ids.
//! - [`model`] is the typed, normalised [`Manifest`] (defaults filled; no
//!   `permissions` = nothing allowed) that the runner consumes;
//!   [`slots`] finds the `${NAME}` slots of its templates.
//! - [`discover`] finds the root and the tool directories and resolves
//!   manifest paths lexically against the root; [`config`] loads
//!   `.glee/config.yml` (unknown keys are errors).
//! - [`project`] ties them together: [`Project::discover`] / [`Project::load`]
//!   read and lint everything once. A tool with any error-level finding is
//!   never handed out ([`Project::tool`] refuses it), and an invalid config
//!   leaves [`Project::config`] failing, so nothing runs on a manifest or a
//!   ceiling glovebox did not fully understand.
//! - [`agentcli`] reads an agentcli `tools.json` (`--tools-json FILE`, or
//!   `tools.json` in the root) onto the same model: [`Origin::AgentCli`]
//!   tools with an `exec.agentcli` block.
//! - [`name`] is the tool name grammar every entry point checks first.

pub mod agentcli;
pub mod ceiling;
pub mod config;
pub mod diagnostic;
pub mod discover;
pub mod lint;
pub mod model;
pub mod name;
pub mod node_modules;
pub mod project;
pub mod schema;
pub mod slots;
pub mod v1;
pub use crate::yaml;

pub use config::{Config, Limits, MaxPermissions, SafetyMode};
pub use diagnostic::{Diagnostic, Rule, Severity};
pub use model::{
    AgentCliExec, Approval, CommandExec, Dispatch, Example, Exec, Field, Format, FsPermissions,
    HttpExec, Inputs, Kind, Manifest, Method, Outputs, Permissions, PythonExec, Response, Route,
    Secret, SecretType, Stdout,
};
pub use project::{Origin, Project, ProjectError, Tool};
