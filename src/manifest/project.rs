//! [`Project`]: the root, its config and every tool, loaded and linted once.
//! This is the library entry point for `lint`, `list`, `show` and the runner.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::agentcli::{self, AgentCliError, TOOLS_JSON};
use super::config::{self, Config, ConfigError};
use super::diagnostic::{Diagnostic, Rule};
use super::discover::{self, DiscoverError, ToolEntry};
use super::lint;
use super::model::{Approval, Manifest};
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
    /// The agentcli `tools.json` loaded beside `.glee/tools/`, if any.
    pub tools_json: Option<PathBuf>,
    /// Every tool of the project was loaded ([`Project::load`]), not one
    /// tool directory ([`Project::load_one`]). The built-in file tools
    /// are added above this layer, to a project loaded whole
    /// (`crate::builtin::add_to`).
    pub whole: bool,
}

/// The approval reason of an entry of a `tools.json` found in the root.
pub const FOUND_TOOLS_JSON_REASON: &str = "an entry of the tools.json found in the project root, which a tool that may write the root could have written; approve it once you have read it (an edited tools.json needs a new approval)";

/// Why a project or a tool is unavailable.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The root could not be found or listed.
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// The config could not be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The agentcli `tools.json` could not be read.
    #[error(transparent)]
    AgentCli(#[from] AgentCliError),
    /// The project is tainted, or its planted-name records could not be
    /// read ([`crate::planted`]).
    #[error(transparent)]
    Planted(#[from] crate::planted::PlantedError),
    /// `--tools-json` names no file.
    #[error("tools.json {path:?} does not exist; pass --tools-json with the path of an agentcli tools.json")]
    ToolsJsonMissing {
        /// The given path.
        path: PathBuf,
    },
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

impl ProjectError {
    /// The Outcome's error kind: no such tool, or an unusable project.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        match self {
            ProjectError::ToolNotFound { .. } => crate::kind::ErrorKind::ToolNotFound,
            ProjectError::Discover(e) => e.kind(),
            ProjectError::Config(e) => e.kind(),
            ProjectError::AgentCli(e) => e.kind(),
            ProjectError::Planted(e) => e.kind(),
            ProjectError::ToolsJsonMissing { .. }
            | ProjectError::ConfigInvalid
            | ProjectError::ToolInvalid { .. } => crate::kind::ErrorKind::ManifestInvalid,
        }
    }
}

impl Project {
    /// Files of tools that could not be read at all (a `tools.json` that
    /// is not JSON, or too large), as one sentence naming each with its
    /// first error and `glovebox lint`: every command that loads the
    /// project says it, not only `lint` (their tools are missing from the
    /// list, and "no tool named" would not say why). `None` when there is
    /// none.
    pub fn unread_notice(&self) -> Option<String> {
        let file = self.tools_json.as_ref()?;
        let display = match file.strip_prefix(&self.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => file.display().to_string(),
        };
        let d = self.diagnostics.iter().find(|d| {
            d.severity == super::diagnostic::Severity::Error
                && d.tool.is_none()
                && d.file == display
        })?;
        Some(format!(
            "{display} could not be read (line {}:{}: {}), so none of its tools is loaded; run `glovebox lint` and fix it",
            d.line, d.col, d.message
        ))
    }

    /// Finds the root (`--root` or the nearest `.glee/` above the working
    /// directory) and loads it.
    pub fn discover(explicit_root: Option<&Path>) -> Result<Project, ProjectError> {
        Project::discover_with(explicit_root, None)
    }

    /// Like [`Project::discover`], with an explicit agentcli `tools.json`
    /// (`--tools-json FILE`). The root is then `explicit_root` when given,
    /// else the directory holding the file; without `tools_json`, a working
    /// directory that holds `tools.json` (and no `.glee/` above it) is a
    /// root too.
    pub fn discover_with(
        explicit_root: Option<&Path>,
        tools_json: Option<&Path>,
    ) -> Result<Project, ProjectError> {
        let Some(file) = tools_json else {
            let root = match discover::find_root(explicit_root) {
                Err(DiscoverError::NoRoot { start }) if start.join(TOOLS_JSON).is_file() => start,
                found => found?,
            };
            return Project::load(&root);
        };
        let cwd = std::env::current_dir().map_err(|source| DiscoverError::CurrentDir { source })?;
        let file = discover::normalize(&cwd.join(file));
        if !file.is_file() {
            return Err(ProjectError::ToolsJsonMissing { path: file });
        }
        let root = match explicit_root {
            Some(_) => discover::find_root(explicit_root)?,
            None => file.parent().map_or(cwd, Path::to_path_buf),
        };
        Project::load_with(&root, Some(&file))
    }

    /// Loads and lints the config and every tool under `root`, and the
    /// root's `tools.json` when it has one. Content problems become
    /// diagnostics; only an unreadable root is an error.
    pub fn load(root: &Path) -> Result<Project, ProjectError> {
        Project::load_with(root, None)
    }

    /// Like [`Project::load`], reading the agentcli `tools_json` (absolute)
    /// instead of looking for `tools.json` in the root. A name defined both
    /// in `.glee/tools/` and in `tools.json` is an error: neither runs.
    ///
    /// Names a call still running could have planted are not read
    /// ([`crate::planted::guarded`]), and a tainted project is refused.
    pub fn load_with(root: &Path, tools_json: Option<&Path>) -> Result<Project, ProjectError> {
        let root = discover::normalize(root);
        crate::planted::guarded(&root, |hidden| {
            Project::load_visible(&root, tools_json, hidden)
        })?
    }

    /// [`Project::load_with`] treating each of `hidden` as absent.
    fn load_visible(
        root: &Path,
        tools_json: Option<&Path>,
        hidden: &[PathBuf],
    ) -> Result<Project, ProjectError> {
        let root = root.to_path_buf();
        let visible = |p: &Path| !crate::planted::is_hidden(p, hidden);
        let mut diagnostics = Vec::new();
        let config = load_config(&root, &mut diagnostics, hidden)?;
        let mut tools = Vec::new();
        let mut rejected = Vec::new();
        let mut entries = discover::tool_entries(&root)?;
        entries.retain(|e| visible(&e.file));
        for (entry, loaded) in entries.iter().zip(load_all(&root, &entries)) {
            match loaded {
                (Some(manifest), found) => {
                    diagnostics.extend(found);
                    tools.push(Tool {
                        // A v1 file's stem may spell `_` as `-`; its
                        // `name` field is the tool's name.
                        name: match entry.origin {
                            Origin::V1 => manifest.name.clone(),
                            _ => entry.name.clone(),
                        },
                        file: entry.file.clone(),
                        manifest,
                        origin: entry.origin,
                    });
                }
                (None, found) => {
                    // A directory without tool.yml is only a warning.
                    if found.iter().any(Diagnostic::is_error) {
                        // A v1 file's findings carry its `name` field.
                        let name = match entry.origin {
                            Origin::V1 => found.iter().find_map(|d| d.tool.clone()),
                            _ => None,
                        };
                        rejected.push(name.unwrap_or_else(|| entry.name.clone()));
                    }
                    diagnostics.extend(found);
                }
            }
        }
        refuse_duplicates(&root, &mut tools, &mut rejected, &mut diagnostics);
        let auto = root.join(TOOLS_JSON);
        let found = tools_json.is_none();
        let tools_json = match tools_json {
            Some(file) => Some(discover::normalize(file)).filter(|f| visible(f)),
            None => (auto.is_file() && visible(&auto)).then_some(auto),
        };
        if let Some(file) = &tools_json {
            let display = match file.strip_prefix(&root) {
                Ok(rel) => rel.display().to_string(),
                Err(_) => file.display().to_string(),
            };
            let mut loaded = agentcli::load(&root, file, &display, config.as_ref())?;
            if found {
                // Found in the root, not named by the user (`--tools-json`):
                // anything that may write the root may have written it, so
                // each entry waits for a person's approval, which covers
                // the file's bytes (one that appears or changes is not
                // trusted until approved again).
                for tool in &mut loaded.tools {
                    tool.manifest.approval = Approval {
                        required: true,
                        reason: Some(FOUND_TOOLS_JSON_REASON.into()),
                    };
                }
            }
            diagnostics.extend(loaded.diagnostics);
            for name in loaded.rejected {
                if !rejected.contains(&name) {
                    rejected.push(name);
                }
            }
            for tool in loaded.tools {
                if tools.iter().any(|t| t.name == tool.name) || rejected.contains(&tool.name) {
                    diagnostics.push(Diagnostic::new(
                        Rule::NameClash,
                        &display,
                        None,
                        Position::START,
                        format!(
                            "tool `{}` is defined both in {} and in {display}; rename one of them (neither runs until then)",
                            tool.name,
                            discover::TOOLS_DIR
                        ),
                    ));
                    tools.retain(|t| t.name != tool.name);
                    if !rejected.contains(&tool.name) {
                        rejected.push(tool.name);
                    }
                } else {
                    tools.push(tool);
                }
            }
            tools.sort_by(|a, b| a.name.cmp(&b.name));
        }
        diagnostics.extend(super::node_modules::check(&root, &tools));
        // Stable: each file's findings stay in line order.
        diagnostics.sort_by(|a, b| a.file.cmp(&b.file));
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Project {
            root,
            config,
            tools,
            rejected,
            diagnostics,
            tools_json,
            whole: true,
        })
    }

    /// Loads the config and only the tool directory `name` (what `run`,
    /// `explain` and `approve` need): no other tool is read or linted, so a
    /// broken *other* tool does not block this one. A name that is not a
    /// tool directory falls back to [`Project::load`], so unknown names get
    /// the same error (and did-you-mean hint) as with a full load.
    ///
    /// Checks that compare tools with each other need every tool, so a
    /// project that has other formats beside its directories (a
    /// `tools.json`, Glee v1 `.yml` files, which may clash with `name`) is
    /// loaded whole too.
    pub fn load_one(root: &Path, name: &str) -> Result<Project, ProjectError> {
        let root = discover::normalize(root);
        crate::planted::guarded(&root, |hidden| {
            Project::load_one_visible(&root, name, hidden)
        })?
    }

    /// [`Project::load_one`] treating each of `hidden` as absent.
    fn load_one_visible(
        root: &Path,
        name: &str,
        hidden: &[PathBuf],
    ) -> Result<Project, ProjectError> {
        let root = root.to_path_buf();
        let dir = root.join(discover::TOOLS_DIR).join(name);
        let plain = !name.is_empty() && !name.starts_with('.') && !name.contains('/');
        if !plain
            || !dir.is_dir()
            || crate::planted::is_hidden(&dir.join(discover::TOOL_FILE), hidden)
            || has_other_formats(&root)
        {
            return Project::load_visible(&root, None, hidden);
        }
        let mut diagnostics = Vec::new();
        let config = load_config(&root, &mut diagnostics, hidden)?;
        let entry = ToolEntry {
            name: name.to_owned(),
            file: dir.join(discover::TOOL_FILE),
            display: format!("{}/{name}/{}", discover::TOOLS_DIR, discover::TOOL_FILE),
            origin: Origin::Dir,
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
            (None, _) => return Project::load_visible(&root, None, hidden),
        }
        Ok(Project {
            root,
            config,
            tools,
            rejected,
            diagnostics,
            tools_json: None,
            whole: false,
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
        let mut hint = did_you_mean(name, &known)
            .map(|best| format!(" (did you mean `{best}`?)"))
            .unwrap_or_default();
        if let Some(notice) = self.unread_notice() {
            hint.push_str(&format!(" ({notice})"));
        }
        Err(ProjectError::ToolNotFound {
            name: name.to_owned(),
            hint,
        })
    }
}

/// Two tools of one name (a v1 file beside a v2 directory, or two v1
/// files whose stems differ only in `-`/`_`): which one a call meant is
/// unknowable, so neither runs and each file gets a `duplicate-tool` error
/// naming the other.
fn refuse_duplicates(
    root: &Path,
    tools: &mut Vec<Tool>,
    rejected: &mut Vec<String>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let display = |t: &Tool| {
        t.file
            .strip_prefix(root)
            .unwrap_or(&t.file)
            .display()
            .to_string()
    };
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let mut twice: Vec<String> = names
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0].to_owned())
        .collect();
    twice.dedup();
    for name in twice {
        let files: Vec<String> = tools
            .iter()
            .filter(|t| t.name == name)
            .map(display)
            .collect();
        for file in &files {
            let others: Vec<&str> = files
                .iter()
                .filter(|f| *f != file)
                .map(String::as_str)
                .collect();
            let message = format!(
                "tool `{name}` is also defined by {}; remove one of them (`glovebox migrate` keeps the v1 file as `<name>.yml.v1-migrated`, which is not loaded)",
                others.join(", ")
            );
            diagnostics.push(Diagnostic::new(
                Rule::DuplicateTool,
                file,
                Some(&name),
                Position::START,
                message,
            ));
        }
        tools.retain(|t| t.name != name);
        rejected.push(name);
    }
}

/// Whether `root` has tools in another format than directories: a
/// `tools.json`, or a `.yml` file (Glee v1) in `.glee/tools/`. Unreadable
/// counts as yes (the full load then reports it).
fn has_other_formats(root: &Path) -> bool {
    if root.join(TOOLS_JSON).exists() {
        return true;
    }
    match fs::read_dir(root.join(discover::TOOLS_DIR)) {
        Ok(entries) => entries.into_iter().any(|e| {
            e.map_or(true, |e| {
                Path::new(&e.file_name())
                    .extension()
                    .is_some_and(|x| x == "yml" || x == "yaml")
            })
        }),
        Err(_) => true,
    }
}

/// Loads `.glee/config.yml`; content problems go to `diagnostics` (and
/// give `None`), only an unusable schema is an error.
fn load_config(
    root: &Path,
    diagnostics: &mut Vec<Diagnostic>,
    hidden: &[PathBuf],
) -> Result<Option<Config>, ProjectError> {
    if crate::planted::is_hidden(&root.join(discover::CONFIG_FILE), hidden) {
        return Ok(Some(Config::default()));
    }
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
        let own: Vec<_> = project
            .tools
            .iter()
            .filter(|t| t.origin == Origin::Dir)
            .collect();
        assert_eq!(own.len(), 1);
        let project = crate::builtin::add_to(project);
        assert_eq!(project.tools.len(), 1 + crate::builtin::NAMES.len());
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
