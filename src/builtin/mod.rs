//! Built-in tools, shipped with glovebox: GLM-CLI's `read_file`,
//! `write_file` and `list_files`.
//!
//! Every project has them unless `.glee/config.yml` narrows the list
//! (`builtins: [read_file, list_files]`, or `builtins: []` for none —
//! `read_file` can read everything in the root, `.env` files included, so
//! a project holding secrets in its tree should turn it off). Enabled, each
//! is a [`Tool`] with [`Origin::Builtin`] and an ordinary [`Manifest`]
//! (JSON Schema, description, the widest permissions it may use), so
//! `list`, `show`, `explain`, `run`, MCP and HTTP treat it like any tool,
//! and every call goes through [`crate::engine::Engine::call`] (validated,
//! audited). A project tool of the same name wins, with a
//! `builtin-shadowed` lint warning.
//!
//! Each call runs the glovebox binary itself in the jail
//! ([`jailed`], [`helper`]): the root readable, nothing else, and for a
//! write the target's directory writable. The path checks in [`confine`]
//! give early, clear errors; the jail is the guarantee against `..`,
//! symbolic links (created before or during the call) and `.glee/`.

pub mod confine;
pub mod helper;
pub mod jailed;
pub mod list_files;
pub mod protocol;
pub mod read_file;
pub mod write_file;

use std::path::Path;

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use crate::caller::Caller;
use crate::manifest::config::Config;
use crate::manifest::diagnostic::{Diagnostic, Rule};
use crate::manifest::discover;
use crate::manifest::model::{
    Approval, CommandExec, Example, Exec, Format, FsPermissions, Inputs, Kind, Manifest, Outputs,
    Permissions, Stdout, DEFAULT_TIMEOUT_MS,
};
use crate::manifest::project::{Origin, Project, Tool};
use crate::manifest::yaml::Position;
use crate::run::{ErrorKind, Outcome};

/// The names of every built-in, sorted: the names `.glee/config.yml`'s
/// `builtins:` accepts.
pub const NAMES: [&str; 3] = crate::manifest::config::BUILTINS;

/// What a built-in call needs from the engine.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The project root.
    pub root: &'a Path,
    /// The project config.
    pub config: &'a Config,
    /// Who calls (consent for `write_file`, cancellation).
    pub caller: &'a Caller,
    /// The project's control surface ([`crate::surface`]): never written,
    /// and read-only in the helper's jail.
    pub surface: &'a [std::path::PathBuf],
}

impl Context<'_> {
    /// Runs `request` in the jailed helper for built-in `tool` (see
    /// [`jailed::exchange`]), with `write_dir` writable when given.
    fn exchange(
        &self,
        tool: &str,
        write_dir: Option<std::path::PathBuf>,
        request: &protocol::Request,
    ) -> Result<protocol::Reply, Box<Outcome>> {
        jailed::exchange(
            tool,
            self.root,
            write_dir,
            self.surface,
            self.config,
            self.caller.cancel.clone(),
            request,
        )
    }

    /// The request that reads `rel` (relative to the root), at most
    /// `limits.output_bytes`.
    fn read_request(&self, rel: &Path) -> protocol::Request {
        protocol::Request::Read {
            root: self.root.to_path_buf(),
            path: rel.to_string_lossy().into_owned(),
            max_bytes: self.config.limits.output_bytes,
        }
    }
}

/// The manifest of the built-in `name`.
pub fn manifest(name: &str) -> Option<Manifest> {
    match name {
        read_file::NAME => Some(read_file::manifest()),
        write_file::NAME => Some(write_file::manifest()),
        list_files::NAME => Some(list_files::manifest()),
        _ => None,
    }
}

/// `project` with the built-ins its config enables, when it was loaded
/// whole and is a Glee project (a bare tools.json drop-in lists exactly
/// its own tools, as agentcli does; a project loaded for one tool
/// directory holds that tool only). Built-ins come from glovebox, not
/// from the project's files, so they are added here, above the manifest
/// layer, by whoever loads a project to use it (the engine, the CLI).
/// Adding them twice changes nothing.
pub fn add_to(mut project: Project) -> Project {
    let root = &project.root;
    let glee_project =
        root.join(discover::TOOLS_DIR).is_dir() || root.join(discover::CONFIG_FILE).is_file();
    let added = project.tools.iter().any(|t| t.origin == Origin::Builtin);
    if let (Some(config), true, false) = (&project.config, project.whole && glee_project, added) {
        add_enabled(
            &project.root,
            config,
            &mut project.tools,
            &project.rejected,
            &mut project.diagnostics,
        );
        // Stable: each file's findings stay in line order.
        project.diagnostics.sort_by(|a, b| a.file.cmp(&b.file));
    }
    project
}

/// Adds the built-ins `config` enables to `tools` (kept sorted by name).
/// A project tool of the same name, valid or `rejected`, wins; each such
/// clash is a warning.
fn add_enabled(
    root: &Path,
    config: &Config,
    tools: &mut Vec<Tool>,
    rejected: &[String],
    diagnostics: &mut Vec<Diagnostic>,
) {
    for name in &config.builtins {
        let Some(manifest) = manifest(name) else {
            continue;
        };
        if let Some(own) = tools.iter().find(|t| t.name == *name) {
            let file = own
                .file
                .strip_prefix(root)
                .unwrap_or(&own.file)
                .to_string_lossy()
                .into_owned();
            diagnostics.push(shadowed(&file, name));
            continue;
        }
        if rejected.iter().any(|r| r == name) {
            diagnostics.push(shadowed(&format!(".glee/tools/{name}/tool.yml"), name));
            continue;
        }
        tools.push(Tool {
            name: name.clone(),
            file: format!("builtin:{name}").into(),
            manifest,
            origin: Origin::Builtin,
        });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
}

fn shadowed(file: &str, name: &str) -> Diagnostic {
    Diagnostic::new(
        Rule::BuiltinShadowed,
        file,
        Some(name),
        Position::START,
        format!(
            "this tool shadows the built-in `{name}` enabled in .glee/config.yml; the project's tool is used (rename it, or drop `{name}` from `builtins`)"
        ),
    )
}

/// Runs the built-in `name` with validated `params`.
pub fn call(name: &str, params: &Map<String, Value>, ctx: &Context<'_>) -> Outcome {
    match name {
        read_file::NAME => read_file::call(params, ctx),
        write_file::NAME => write_file::call(params, ctx),
        list_files::NAME => list_files::call(params, ctx),
        _ => Outcome::failure(
            name,
            ErrorKind::ToolNotFound,
            format!("no built-in named `{name}`"),
            json!({}),
        ),
    }
}

/// A string parameter (the schema has made it present and a string).
fn text<'p>(params: &'p Map<String, Value>, key: &str) -> &'p str {
    params.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The Outcome for a refused path.
fn refused(tool: &str, e: &confine::ConfineError) -> Outcome {
    Outcome::failure(tool, e.kind(), e.to_string(), json!({}))
}

/// The manifest shared by the built-ins: a command run in the jail (the
/// glovebox binary's helper), text output, the given schema and paths.
fn builtin_manifest(
    name: &str,
    description: &str,
    schema: Value,
    write: bool,
    examples: Vec<(&str, Value)>,
) -> Manifest {
    let root = vec![".".to_owned()];
    Manifest {
        name: name.to_owned(),
        description: description.to_owned(),
        kind: Kind::Command,
        version: 1,
        inputs: Inputs { schema },
        outputs: Outputs {
            format: Format::Text,
            schema: None,
        },
        exec: Exec::Command(CommandExec {
            entrypoint: "glovebox".into(),
            args: vec![jailed::SUBCOMMAND.into()],
            cwd: ".".into(),
            stdout: Stdout::default(),
            exit_codes_ok: vec![0],
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }),
        permissions: Permissions {
            network: false.into(),
            fs: FsPermissions {
                read: root.clone(),
                write: if write { root } else { Vec::new() },
            },
            secrets: IndexMap::new(),
        },
        approval: Approval::default(),
        examples: examples
            .into_iter()
            .map(|(description, params)| Example {
                description: description.into(),
                params,
                expected_output: None,
            })
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::validate::Schemas;

    #[test]
    fn manifests_have_valid_schemas_and_examples() {
        for name in NAMES {
            let m = manifest(name).unwrap();
            assert_eq!(m.name, name);
            let schemas = Schemas::compile(&m.inputs.schema, None).unwrap();
            for e in &m.examples {
                schemas.check_input(e.params.clone()).unwrap();
            }
        }
    }

    #[test]
    fn project_tool_wins_with_a_warning() {
        let config = Config {
            builtins: vec!["read_file".into(), "list_files".into()],
            ..Config::default()
        };
        let mut tools = vec![Tool {
            name: "read_file".into(),
            file: "/r/.glee/tools/read_file/tool.yml".into(),
            manifest: read_file::manifest(),
            origin: Origin::Dir,
        }];
        let mut diagnostics = Vec::new();
        add_enabled(Path::new("/r"), &config, &mut tools, &[], &mut diagnostics);
        let names: Vec<_> = tools.iter().map(|t| (t.name.as_str(), t.origin)).collect();
        assert_eq!(
            names,
            [("list_files", Origin::Builtin), ("read_file", Origin::Dir)]
        );
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].rule, Rule::BuiltinShadowed);
        assert_eq!(diagnostics[0].file, ".glee/tools/read_file/tool.yml");
    }
}
