//! [`Project`]: the root, its config and every tool, loaded and linted once.
//! This is the library entry point for `lint`, `list`, `show` and the runner.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::config::{self, Config, ConfigError};
use super::diagnostic::{Diagnostic, Rule};
use super::discover::{self, DiscoverError, ToolEntry};
use super::lint;
use super::model::Manifest;
use super::schema::did_you_mean;
use super::yaml::{Position, MAX_DOCUMENT_BYTES};

/// The format a tool was written in. Every format is mapped onto the same
/// [`Manifest`] model, so validation, policy, the jail and the audit log are
/// shared; the origin only says where it came from and what differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A v2 tool directory: `.glee/tools/<name>/tool.yml`.
    Dir,
    /// A Glee v1 single-file tool: `.glee/tools/<name>.yml` (legacy).
    V1,
    /// An entry of an agentcli `tools.json`.
    AgentCli,
    /// A built-in shipped with glovebox (GLM-CLI's file tools).
    Builtin,
}

/// A tool whose manifest loaded without errors.
#[derive(Debug, Clone)]
pub struct Tool {
    /// The tool's name (= its directory name).
    pub name: String,
    /// Absolute path of its manifest file (`tool.yml` for [`Origin::Dir`]).
    pub file: PathBuf,
    /// The normalised manifest.
    pub manifest: Manifest,
    /// The format it was written in.
    pub origin: Origin,
}

/// A project root with its config and tools.
#[derive(Debug, Clone)]
pub struct Project {
    /// Absolute path of the directory holding `.glee/`.
    pub root: PathBuf,
    /// The config; `None` when `.glee/config.yml` is invalid (see
    /// `diagnostics`). Nothing may run then: use [`Project::config`].
    pub config: Option<Config>,
    /// Tools that loaded without errors, sorted by name.
    pub tools: Vec<Tool>,
    /// Names of tool directories whose manifest has errors.
    pub rejected: Vec<String>,
    /// Every finding for the config and all manifests, by file then line.
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a project or a tool is unavailable.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The root could not be found or listed.
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// The config could not be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `.glee/config.yml` has errors.
    #[error(".glee/config.yml is invalid; run `glovebox lint` and fix the errors it reports")]
    ConfigInvalid,
    /// No tool directory of that name.
    #[error("no tool named `{name}`{hint}; run `glovebox list` to see the tools")]
    ToolNotFound {
        /// The requested name.
        name: String,
        /// A did-you-mean suffix, possibly empty.
        hint: String,
    },
    /// The tool exists but its manifest has errors.
    #[error(
        "tool `{name}` has an invalid manifest; run `glovebox lint` and fix the errors it reports"
    )]
    ToolInvalid {
        /// The tool's name.
        name: String,
        /// The errors.
        diagnostics: Vec<Diagnostic>,
    },
}

impl Project {
    /// Finds the root (`--root` or the nearest `.glee/` above the working
    /// directory) and loads it.
    pub fn discover(explicit_root: Option<&Path>) -> Result<Project, ProjectError> {
        let root = discover::find_root(explicit_root)?;
        Project::load(&root)
    }

    /// Loads and lints the config and every tool under `root`. Content
    /// problems become diagnostics; only an unreadable root is an error.
    pub fn load(root: &Path) -> Result<Project, ProjectError> {
        let root = discover::normalize(root);
        let mut diagnostics = Vec::new();
        let config = load_config(&root, &mut diagnostics)?;
        let mut tools = Vec::new();
        let mut rejected = Vec::new();
        let entries = discover::tool_entries(&root)?;
        for (entry, loaded) in entries.iter().zip(load_all(&root, &entries)) {
            match loaded {
                (Some(manifest), found) => {
                    diagnostics.extend(found);
                    tools.push(Tool {
                        name: entry.name.clone(),
                        file: entry.file.clone(),
                        manifest,
                        origin: Origin::Dir,
                    });
                }
                (None, found) => {
                    // A directory without tool.yml is only a warning.
                    if found.iter().any(Diagnostic::is_error) {
                        rejected.push(entry.name.clone());
                    }
                    diagnostics.extend(found);
                }
            }
        }
        Ok(Project {
            root,
            config,
            tools,
            rejected,
            diagnostics,
        })
    }

    /// Loads the config and only the tool directory `name` (what `run`,
    /// `explain` and `approve` need): no other tool is read or linted, so a
    /// broken *other* tool does not block this one. A name that is not a
    /// tool directory falls back to [`Project::load`], so unknown names get
    /// the same error (and did-you-mean hint) as with a full load.
    pub fn load_one(root: &Path, name: &str) -> Result<Project, ProjectError> {
        let root = discover::normalize(root);
        let dir = root.join(discover::TOOLS_DIR).join(name);
        let plain = !name.is_empty() && !name.starts_with('.') && !name.contains('/');
        if !plain || !dir.is_dir() {
            return Project::load(&root);
        }
        let mut diagnostics = Vec::new();
        let config = load_config(&root, &mut diagnostics)?;
        let entry = ToolEntry {
            name: name.to_owned(),
            file: dir.join(discover::TOOL_FILE),
            display: format!("{}/{name}/{}", discover::TOOLS_DIR, discover::TOOL_FILE),
        };
        let (mut tools, mut rejected) = (Vec::new(), Vec::new());
        match load_tool(&root, &entry) {
            (Some(manifest), found) => {
                diagnostics.extend(found);
                tools.push(Tool {
                    name: entry.name,
                    file: entry.file,
                    manifest,
                    origin: Origin::Dir,
                });
            }
            (None, found) if found.iter().any(Diagnostic::is_error) => {
                diagnostics.extend(found);
                rejected.push(entry.name);
            }
            // Not a tool after all (no tool.yml): answer as a full load does.
            (None, _) => return Project::load(&root),
        }
        Ok(Project {
            root,
            config,
            tools,
            rejected,
            diagnostics,
        })
    }

    /// The config, or an error when `.glee/config.yml` is invalid.
    pub fn config(&self) -> Result<&Config, ProjectError> {
        self.config.as_ref().ok_or(ProjectError::ConfigInvalid)
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The tool called `name`; an invalid or unknown tool is an error.
    pub fn tool(&self, name: &str) -> Result<&Tool, ProjectError> {
        if let Some(tool) = self.tools.iter().find(|t| t.name == name) {
            return Ok(tool);
        }
        if self.rejected.iter().any(|r| r == name) {
            return Err(ProjectError::ToolInvalid {
                name: name.to_owned(),
                diagnostics: self
                    .diagnostics
                    .iter()
                    .filter(|d| d.tool.as_deref() == Some(name) && d.is_error())
                    .cloned()
                    .collect(),
            });
        }
        let known: Vec<String> = self
            .tools
            .iter()
            .map(|t| t.name.clone())
            .chain(self.rejected.iter().cloned())
            .collect();
        let hint = did_you_mean(name, &known)
            .map(|best| format!(" (did you mean `{best}`?)"))
            .unwrap_or_default();
        Err(ProjectError::ToolNotFound {
            name: name.to_owned(),
            hint,
        })
    }
}

/// Loads `.glee/config.yml`; content problems go to `diagnostics` (and
/// give `None`), only an unusable schema is an error.
fn load_config(
    root: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Option<Config>, ProjectError> {
    Ok(match config::load(root) {
        Ok(config) => Some(config),
        Err(ConfigError::Invalid { diagnostics: found }) => {
            diagnostics.extend(found);
            None
        }
        Err(ConfigError::Read { source }) => {
            diagnostics.push(Diagnostic::new(
                Rule::FileUnreadable,
                discover::CONFIG_FILE,
                None,
                Position::START,
                format!("cannot read the file: {source}"),
            ));
            None
        }
        Err(e @ ConfigError::Schema(_)) => return Err(e.into()),
    })
}

/// Tools per thread below which loading stays on the calling thread.
const PARALLEL_THRESHOLD: usize = 64;

/// Loads every entry, spread over the available cores; results keep the
/// order of `entries`.
fn load_all(root: &Path, entries: &[ToolEntry]) -> Vec<(Option<Manifest>, Vec<Diagnostic>)> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(entries.len() / PARALLEL_THRESHOLD)
        .max(1);
    if threads == 1 {
        return entries.iter().map(|e| load_tool(root, e)).collect();
    }
    let chunk = entries.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || part.iter().map(|e| load_tool(root, e)).collect::<Vec<_>>())
            })
            .collect();
        workers
            .into_iter()
            .zip(entries.chunks(chunk))
            .flat_map(|(worker, part)| {
                // A worker only panics on a bug; lint its part here instead.
                worker
                    .join()
                    .unwrap_or_else(|_| part.iter().map(|e| load_tool(root, e)).collect())
            })
            .collect()
    })
}

/// Reads and lints one tool directory's manifest.
fn load_tool(root: &Path, entry: &ToolEntry) -> (Option<Manifest>, Vec<Diagnostic>) {
    let unreadable = |rule: Rule, message: String| {
        vec![Diagnostic::new(
            rule,
            &entry.display,
            Some(&entry.name),
            Position::START,
            message,
        )]
    };
    let file = match fs::File::open(&entry.file) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let message = format!(
                "tool directory has no {}; add one or remove the directory",
                discover::TOOL_FILE
            );
            return (None, unreadable(Rule::ToolFileMissing, message));
        }
        Err(e) => {
            return (
                None,
                unreadable(Rule::FileUnreadable, format!("cannot read the file: {e}")),
            )
        }
    };
    let mut text = String::new();
    let limit = (MAX_DOCUMENT_BYTES + 1) as u64;
    if let Err(e) = file.take(limit).read_to_string(&mut text) {
        return (
            None,
            unreadable(Rule::FileUnreadable, format!("cannot read the file: {e}")),
        );
    }
    if text.len() > MAX_DOCUMENT_BYTES {
        let message = format!(
            "file is larger than the {MAX_DOCUMENT_BYTES}-byte limit; a manifest should be a few kilobytes"
        );
        return (None, unreadable(Rule::FileUnreadable, message));
    }
    let checked = lint::lint_tool(root, entry, &text);
    (checked.manifest, checked.diagnostics)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tool_suggests() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".glee/tools/echo");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("tool.yml"),
            "name: echo\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema: {type: object}\noutputs:\n  format: text\nexec:\n  command:\n    entrypoint: echo\n",
        )
        .unwrap();
        let project = Project::load(tmp.path()).unwrap();
        assert!(!project.has_errors(), "{:?}", project.diagnostics);
        assert_eq!(project.tools.len(), 1);
        let err = project.tool("ecko").unwrap_err();
        assert!(err.to_string().contains("did you mean `echo`"), "{err}");
    }

    #[test]
    fn oversized_manifest_is_refused_unread() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".glee/tools/big");
        fs::create_dir_all(&dir).unwrap();
        let mut text = "name: big\n".to_owned();
        text.push_str(&"# padding\n".repeat(MAX_DOCUMENT_BYTES / 10 + 1));
        fs::write(dir.join("tool.yml"), text).unwrap();
        let project = Project::load(tmp.path()).unwrap();
        assert_eq!(project.rejected, ["big"]);
        assert_eq!(project.diagnostics[0].rule, Rule::FileUnreadable);
        assert!(matches!(
            project.tool("big"),
            Err(ProjectError::ToolInvalid { .. })
        ));
    }

    #[test]
    fn load_one_reads_only_the_called_tool() {
        let tmp = tempfile::tempdir().unwrap();
        let tools = tmp.path().join(".glee/tools");
        fs::create_dir_all(tools.join("echo")).unwrap();
        fs::write(
            tools.join("echo/tool.yml"),
            "name: echo\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema: {type: object}\noutputs:\n  format: text\nexec:\n  command:\n    entrypoint: echo\n",
        )
        .unwrap();
        fs::create_dir_all(tools.join("broken")).unwrap();
        fs::write(tools.join("broken/tool.yml"), "name: [unclosed\n").unwrap();
        // The full load sees the broken tool; loading `echo` alone does not.
        assert!(Project::load(tmp.path()).unwrap().has_errors());
        let one = Project::load_one(tmp.path(), "echo").unwrap();
        assert!(!one.has_errors(), "{:?}", one.diagnostics);
        assert_eq!(one.tools.len(), 1);
        assert!(one.tool("echo").is_ok());
        // The broken tool itself is refused as before.
        let bad = Project::load_one(tmp.path(), "broken").unwrap();
        assert!(matches!(
            bad.tool("broken"),
            Err(ProjectError::ToolInvalid { .. })
        ));
        // Unknown names answer as a full load does, hint included.
        for name in ["ecko", "../echo", ".hidden", ""] {
            let err = Project::load_one(tmp.path(), name)
                .unwrap()
                .tool(name)
                .unwrap_err();
            let full = Project::load(tmp.path()).unwrap().tool(name).unwrap_err();
            assert_eq!(err.to_string(), full.to_string());
        }
        let project = Project::load_one(tmp.path(), "ecko").unwrap();
        let err = project.tool("ecko").unwrap_err();
        assert!(err.to_string().contains("did you mean `echo`"), "{err}");
    }

    #[test]
    fn invalid_config_blocks_config_access() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".glee")).unwrap();
        fs::write(
            tmp.path().join(".glee/config.yml"),
            "sandbox:\n  degrade: true\n",
        )
        .unwrap();
        let project = Project::load(tmp.path()).unwrap();
        assert!(project.has_errors());
        assert!(matches!(project.config(), Err(ProjectError::ConfigInvalid)));
        assert_eq!(project.diagnostics[0].line, 2);
    }
}
