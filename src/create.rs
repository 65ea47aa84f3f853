//! Tools created by agents, under the project's permission ceiling.
//!
//! [`create`] is the one library call behind `glovebox create`, MCP's
//! `glee_tool_create` and `POST /api/v1/tools`; [`delete`] (behind
//! `DELETE /api/v1/tools/{name}`) removes a tool an agent created, and
//! nothing else. The definition is linted
//! like any `tool.yml`; its permissions must lie within
//! `security.max_permissions` of `.glee/config.yml` (by default: no
//! network, read the project, write nothing, no secrets); `approval.required`
//! is forced on, so a created tool never runs before a person approves it.
//! Paths are compared after resolving symlinks, so a link inside the
//! project cannot smuggle in a path outside the ceiling. The tool is
//! written atomically (a temporary directory renamed into place) and never
//! replaces a tool an agent did not create. Who created what is kept in
//! glovebox's state directory and in the audit log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::approval;
use crate::audit::{self, Event};
use crate::manifest::ceiling::{default_ceiling, excess};
use crate::manifest::diagnostic::Diagnostic;
use crate::manifest::discover::{ToolEntry, TOOL_FILE};
use crate::manifest::project::Project;
use crate::manifest::{lint, yaml};
use crate::state::{self, StateError};

/// Why a tool could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The name cannot be a tool directory.
    #[error("invalid tool name {name:?}: use letters, digits, `_` and `-`")]
    InvalidName { name: String },
    /// The definition is not a JSON object, or names another tool.
    #[error("invalid definition: {message}")]
    InvalidDefinition { message: String },
    /// The definition does not lint clean.
    #[error("the definition has errors: {}", .diagnostics.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; "))]
    Lint { diagnostics: Vec<Diagnostic> },
    /// It asks for more than the ceiling allows.
    #[error("the tool asks for more than security.max_permissions allows: {}", .excess.join("; "))]
    ExceedsCeiling { excess: Vec<String> },
    /// A tool of that name exists and was not created by an agent.
    #[error("tool `{name}` already exists and was not created by an agent; pick another name")]
    Exists { name: String },
    /// The name is in an MCP server's namespace (`SERVER__TOOL`): a
    /// created tool of that name would take the place of the server's
    /// approved tool (the wrapped servers' tools are added only where no
    /// tool has their name).
    #[error("tool name `{name}` belongs to the MCP server `{server}`, whose tools are named `{server}__TOOL`; pick another name")]
    ServersName { name: String, server: String },
    /// The project config is invalid.
    #[error(".glee/config.yml is invalid; run `glovebox lint`")]
    Config,
    /// Deleting a tool that no agent created.
    #[error("tool `{name}` was not created by an agent: only agent-created tools can be deleted this way; remove .glee/tools/{name}/ by hand")]
    NotCreated { name: String },
    /// Deleting a tool that does not exist.
    #[error("no agent-created tool `{name}`")]
    NotFound { name: String },
    /// A replica of a replicated `glovebox serve`: tools come from the
    /// image or the mounted project, never from one replica's disk.
    #[error("this glovebox serve is a replica (--replicated): tools come from the image or the mounted project, so a tool created here would exist on this replica alone; add `.glee/tools/{name}/tool.yml` to the project, approve it with `glovebox approve {name} --sign-with KEY`, and roll it out")]
    Replicated { name: String },
    /// Writing failed.
    #[error("cannot write {path:?}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// glovebox's state.
    #[error(transparent)]
    State(#[from] StateError),
    /// The audit log.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// Approvals.
    #[error(transparent)]
    Approval(#[from] approval::ApprovalError),
}

impl CreateError {
    /// The Outcome's error kind, the same on MCP (`glee_tool_create`)
    /// and HTTP (`POST`/`DELETE /api/v1/tools`).
    pub fn kind(&self) -> crate::kind::ErrorKind {
        match self {
            CreateError::ExceedsCeiling { .. }
            | CreateError::NotCreated { .. }
            | CreateError::Replicated { .. } => crate::kind::ErrorKind::PermissionExceedsCeiling,
            CreateError::NotFound { .. } => crate::kind::ErrorKind::ToolNotFound,
            CreateError::InvalidName { .. }
            | CreateError::InvalidDefinition { .. }
            | CreateError::Lint { .. }
            | CreateError::Exists { .. }
            | CreateError::ServersName { .. }
            | CreateError::Config => crate::kind::ErrorKind::ManifestInvalid,
            CreateError::Io { .. }
            | CreateError::State(_)
            | CreateError::Audit(_)
            | CreateError::Approval(_) => crate::kind::ErrorKind::Internal,
        }
    }

    /// Structured details for the failure's `details`: what exceeds the
    /// ceiling, or the lint diagnostics.
    pub fn details(&self) -> serde_json::Value {
        match self {
            CreateError::ExceedsCeiling { excess } => serde_json::json!({"excess": excess}),
            CreateError::Lint { diagnostics } => {
                serde_json::json!({"diagnostics": diagnostics.iter().map(|d| d.to_string()).collect::<Vec<_>>()})
            }
            _ => serde_json::json!({}),
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn registry_path(root: &Path) -> Result<PathBuf, StateError> {
    Ok(state::dir()?
        .join("created")
        .join(format!("{}.json", state::project_key(root))))
}

/// Tools of the project that agents created: name → creator.
pub fn created_tools(root: &Path) -> BTreeMap<String, String> {
    registry_path(root)
        .ok()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// A created tool.
#[derive(Debug, Clone)]
pub struct Created {
    /// Its name.
    pub name: String,
    /// Its `tool.yml`.
    pub file: PathBuf,
}

/// Creates tool `name` from `definition` (the fields of `tool.yml`) on
/// behalf of `creator`. Nothing is written unless every check passes.
pub fn create(
    project: &Project,
    name: &str,
    definition: Value,
    creator: &str,
) -> Result<Created, CreateError> {
    if crate::replica::replicated() {
        return Err(CreateError::Replicated { name: name.into() });
    }
    let root = &project.root;
    let log = audit::Log::for_project(root)?;
    let deny = |reason: &str, detail: String| {
        let _ = log.append(&Event {
            kind: audit::event::TOOL_DENIED,
            fields: vec![
                ("name", audit::client_label(name)),
                ("creator", creator.to_string()),
                ("reason", reason.to_string()),
                ("detail", detail),
            ],
        });
    };
    if !valid_name(name) {
        return Err(CreateError::InvalidName { name: name.into() });
    }
    let Value::Object(mut def) = definition else {
        return Err(CreateError::InvalidDefinition {
            message: "it must be a JSON object with the fields of tool.yml".into(),
        });
    };
    match def.get("name") {
        Some(Value::String(n)) if n != name => {
            return Err(CreateError::InvalidDefinition {
                message: format!("it names tool {n:?}, not {name:?}"),
            })
        }
        _ => {}
    }
    def.insert("name".into(), Value::String(name.into()));
    let reason = def
        .get("approval")
        .and_then(|a| a.get("reason"))
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| format!("created by an agent ({creator})"));
    def.insert(
        "approval".into(),
        json!({"required": true, "reason": reason}),
    );
    let definition = Value::Object(def);

    let text = yaml::emit(&definition).map_err(|e| CreateError::InvalidDefinition {
        message: e.to_string(),
    })?;
    let dir = root.join(".glee/tools").join(name);
    let entry = ToolEntry {
        name: name.to_string(),
        file: dir.join(TOOL_FILE),
        display: format!(".glee/tools/{name}/{TOOL_FILE}"),
        origin: crate::manifest::project::Origin::Dir,
    };
    let checked = lint::lint_tool(root, &entry, &text);
    let Some(manifest) = checked
        .manifest
        .filter(|_| !checked.diagnostics.iter().any(Diagnostic::is_error))
    else {
        let errors: Vec<Diagnostic> = checked
            .diagnostics
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect();
        deny(
            "invalid",
            errors
                .iter()
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
        );
        return Err(CreateError::Lint {
            diagnostics: errors,
        });
    };
    let config = project.config().map_err(|_| CreateError::Config)?;
    let ceiling = config
        .security
        .max_permissions
        .clone()
        .unwrap_or_else(default_ceiling);
    let too_much = excess(root, &manifest, &ceiling);
    if !too_much.is_empty() {
        deny("ceiling", too_much.join("; "));
        return Err(CreateError::ExceedsCeiling { excess: too_much });
    }
    let mut registry = created_tools(root);
    // A tool of that name in another format (a Glee v1 file) is never
    // shadowed or turned into a duplicate by an agent.
    let other_format = project
        .tools
        .iter()
        .any(|t| t.name == name && t.origin != crate::manifest::project::Origin::Dir)
        || root
            .join(".glee/tools")
            .join(format!(
                "{name}.{}",
                crate::manifest::discover::V1_EXTENSION
            ))
            .exists();
    // Nor is an MCP server's tool: the server's tools are added under
    // `SERVER__TOOL` only where no other tool has that name, so an agent's
    // tool there would replace the one a person approved (whether the
    // server lists it now or will).
    if let Some(server) = mcp_server_owning(project, name) {
        deny(
            "exists",
            format!("the name belongs to the MCP server `{server}`"),
        );
        return Err(CreateError::ServersName {
            name: name.into(),
            server,
        });
    }
    if (dir.exists() && !registry.contains_key(name)) || other_format {
        deny(
            "exists",
            "a tool not created by an agent has this name".into(),
        );
        return Err(CreateError::Exists { name: name.into() });
    }

    // Write atomically: a complete directory appears, or nothing.
    let tools = root.join(".glee/tools");
    std::fs::create_dir_all(&tools).map_err(|source| CreateError::Io {
        path: tools.clone(),
        source,
    })?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".create-{name}-"))
        .tempdir_in(&tools)
        .map_err(|source| CreateError::Io {
            path: tools.clone(),
            source,
        })?;
    let file = tmp.path().join(TOOL_FILE);
    std::fs::write(&file, text.as_bytes()).map_err(|source| CreateError::Io {
        path: file.clone(),
        source,
    })?;
    let staged = tmp.keep();
    if dir.exists() {
        let old = tools.join(format!(".replaced-{name}-{}", std::process::id()));
        std::fs::rename(&dir, &old).map_err(|source| CreateError::Io {
            path: dir.clone(),
            source,
        })?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&staged, &dir).map_err(|source| CreateError::Io {
        path: dir.clone(),
        source,
    })?;

    registry.insert(name.to_string(), creator.to_string());
    save_registry(root, &registry)?;
    approval::Store::open(root)?.revoke(name)?;
    let perms = serde_json::to_string(&manifest.permissions).unwrap_or_default();
    log.append(&Event {
        kind: audit::event::TOOL_CREATED,
        fields: vec![
            ("name", name.to_string()),
            ("creator", creator.to_string()),
            ("permissions", perms),
        ],
    })?;
    Ok(Created {
        name: name.to_string(),
        file: dir.join(TOOL_FILE),
    })
}

/// The MCP server (`kind: mcp`) of `project` in whose namespace
/// `SERVER__…` the tool name `name` lies, if any.
fn mcp_server_owning(project: &Project, name: &str) -> Option<String> {
    let sep = crate::manifest::name::MCP_SEPARATOR;
    name.match_indices(sep).find_map(|(i, _)| {
        let prefix = &name[..i];
        project
            .tools
            .iter()
            .find(|t| {
                t.name == prefix && matches!(t.manifest.exec, crate::manifest::model::Exec::Mcp(_))
            })
            .map(|t| t.name.clone())
    })
}

fn save_registry(root: &Path, registry: &BTreeMap<String, String>) -> Result<(), CreateError> {
    let reg_path = registry_path(root)?;
    if let Some(d) = reg_path.parent() {
        std::fs::create_dir_all(d).map_err(|source| CreateError::Io {
            path: d.to_path_buf(),
            source,
        })?;
    }
    state::write_atomic(
        &reg_path,
        &serde_json::to_vec_pretty(registry).unwrap_or_default(),
    )?;
    Ok(())
}

/// Deletes tool `name`, which an agent must have created (see
/// [`created_tools`]), on behalf of `deleter`: its directory, its record
/// and its approval go; the audit log gets `TOOL_DELETED`, or
/// `TOOL_DENIED` when the tool is not an agent's.
pub fn delete(project: &Project, name: &str, deleter: &str) -> Result<(), CreateError> {
    if crate::replica::replicated() {
        return Err(CreateError::Replicated { name: name.into() });
    }
    let root = &project.root;
    let log = audit::Log::for_project(root)?;
    if !valid_name(name) {
        return Err(CreateError::InvalidName { name: name.into() });
    }
    let mut registry = created_tools(root);
    let tools = root.join(".glee/tools");
    let dir = tools.join(name);
    if !registry.contains_key(name) {
        let exists = dir.exists() || project.tools.iter().any(|t| t.name == name);
        if !exists {
            return Err(CreateError::NotFound { name: name.into() });
        }
        log.append(&Event {
            kind: audit::event::TOOL_DENIED,
            fields: vec![
                ("name", audit::client_label(name)),
                ("caller", deleter.to_string()),
                ("reason", "delete_not_agent_created".into()),
            ],
        })?;
        return Err(CreateError::NotCreated { name: name.into() });
    }
    if dir.exists() {
        // Out of the tool directory first (one rename), then removed.
        let doomed = tools.join(format!(".deleted-{name}-{}", std::process::id()));
        std::fs::rename(&dir, &doomed).map_err(|source| CreateError::Io {
            path: dir.clone(),
            source,
        })?;
        std::fs::remove_dir_all(&doomed).map_err(|source| CreateError::Io {
            path: doomed.clone(),
            source,
        })?;
    }
    registry.remove(name);
    save_registry(root, &registry)?;
    approval::Store::open(root)?.revoke(name)?;
    log.append(&Event {
        kind: audit::event::TOOL_DELETED,
        fields: vec![("name", name.to_string()), ("caller", deleter.to_string())],
    })?;
    Ok(())
}
