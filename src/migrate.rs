//! `glovebox migrate`: Glee v1 single-file tools → v2 tool directories.
//!
//! For each selected `.glee/tools/<file>.yml`, the v2 manifest that
//! [`crate::manifest::v1`] maps it to is rendered as YAML under a comment
//! header naming its origin, then checked before anything is written: it
//! must lint without errors as `.glee/tools/<name>/tool.yml` and load to
//! exactly the [`Manifest`] the v1 file loads to (so the migrated tool
//! behaves identically). Only when every selected tool passes is anything
//! written:
//!
//! - the directory is staged under a hidden temporary name in
//!   `.glee/tools/` and renamed into place, so a complete directory appears
//!   or nothing; an existing `.glee/tools/<name>` (file or directory) is
//!   never overwritten;
//! - the v1 file is then renamed to `<file>.yml.v1-migrated` (not loaded,
//!   never lost silently), or deleted with `--remove`; an existing backup
//!   is never overwritten.
//!
//! `--dry-run` does all the checks and returns the text without writing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::manifest::diagnostic::Diagnostic;
use crate::manifest::discover::{self, ToolEntry, TOOLS_DIR, TOOL_FILE};
use crate::manifest::lint;
use crate::manifest::model::Manifest;
use crate::manifest::project::{Origin, Project, ProjectError};
use crate::manifest::v1;
use crate::manifest::yaml::{self, YamlError};

/// Suffix appended to a migrated v1 file's name.
pub const BACKUP_SUFFIX: &str = ".v1-migrated";

/// Why a migration was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The project could not be loaded.
    #[error(transparent)]
    Project(#[from] ProjectError),
    /// Neither names nor `--all` were given.
    #[error("name the tools to migrate, or pass --all")]
    NothingSelected,
    /// `--all` found no v1 file.
    #[error("no Glee v1 tool (.glee/tools/<name>.yml) to migrate")]
    NoV1Tools,
    /// A name that is not a v1 file.
    #[error(
        "`{name}` is not a Glee v1 tool{hint}; `glovebox lint` lists them with a legacy-v1 warning"
    )]
    NotV1 {
        /// The requested name.
        name: String,
        /// Why, when known.
        hint: String,
    },
    /// The v1 file has errors.
    #[error("{file} has errors; fix them first (`glovebox lint` shows them):\n{}", diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The v1 file, relative to the root.
        file: String,
        /// Its errors.
        diagnostics: Vec<Diagnostic>,
    },
    /// The target exists.
    #[error(
        "{path:?} already exists; refusing to overwrite it (remove or rename it, or the v1 file)"
    )]
    Exists {
        /// The target directory.
        path: PathBuf,
    },
    /// The backup name is taken.
    #[error("{path:?} already exists; move it away (or pass --remove to delete the v1 file instead of keeping it)")]
    BackupExists {
        /// The backup path.
        path: PathBuf,
    },
    /// The same tool selected twice.
    #[error("`{name}` is selected twice")]
    Twice {
        /// The tool.
        name: String,
    },
    /// The rendered v2 manifest did not reproduce the v1 tool (a bug).
    #[error("the v2 manifest rendered for `{name}` does not load to the same tool ({reason}); nothing was written, please report this glovebox bug")]
    Mismatch {
        /// The tool.
        name: String,
        /// What differed.
        reason: String,
    },
    /// YAML rendering failed.
    #[error("cannot render the v2 manifest")]
    Emit(#[from] YamlError),
    /// A filesystem operation failed.
    #[error("failed to {action} {path:?}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What to migrate and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Tool names (or v1 file stems) to migrate.
    pub names: Vec<String>,
    /// Migrate every v1 file.
    pub all: bool,
    /// Check and render only; write nothing.
    pub dry_run: bool,
    /// Delete the v1 file instead of keeping it as `<file>.yml.v1-migrated`.
    pub remove: bool,
}

/// One migrated (or, with `--dry-run`, migratable) tool.
#[derive(Debug, Clone)]
pub struct Migrated {
    /// The tool's name.
    pub name: String,
    /// The v1 file, relative to the root.
    pub from: String,
    /// The v2 manifest written, relative to the root.
    pub to: String,
    /// Where the v1 file was kept, relative to the root; `None` when
    /// removed.
    pub backup: Option<String>,
    /// The v2 manifest text.
    pub text: String,
}

struct Plan {
    entry: ToolEntry,
    name: String,
    dir: PathBuf,
    backup: Option<PathBuf>,
    text: String,
}

/// Migrates the v1 tools `opts` selects under `root` (see the module doc).
/// Every check passes for every selected tool before anything is written.
pub fn migrate(root: &Path, opts: &Options) -> Result<Vec<Migrated>, MigrateError> {
    let project = crate::builtin::add_to(Project::load(root)?);
    let root = project.root.clone();
    let entries: Vec<ToolEntry> = discover::tool_entries(&root)
        .map_err(ProjectError::from)?
        .into_iter()
        .filter(|e| e.origin == Origin::V1)
        .collect();
    let selected = select(&project, &entries, opts)?;
    let mut plans: Vec<Plan> = Vec::new();
    for entry in selected {
        let plan = plan(&project, &entry, opts)?;
        if plans.iter().any(|p| p.name == plan.name) {
            return Err(MigrateError::Twice { name: plan.name });
        }
        plans.push(plan);
    }
    let mut done = Vec::new();
    for plan in plans {
        if !opts.dry_run {
            write(&root, &plan)?;
        }
        let rel = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
        done.push(Migrated {
            to: rel(&plan.dir.join(TOOL_FILE)),
            from: plan.entry.display.clone(),
            backup: plan.backup.as_deref().map(rel),
            name: plan.name,
            text: plan.text,
        });
    }
    Ok(done)
}

fn select(
    project: &Project,
    entries: &[ToolEntry],
    opts: &Options,
) -> Result<Vec<ToolEntry>, MigrateError> {
    if opts.all {
        if entries.is_empty() {
            return Err(MigrateError::NoV1Tools);
        }
        return Ok(entries.to_vec());
    }
    if opts.names.is_empty() {
        return Err(MigrateError::NothingSelected);
    }
    let mut out = Vec::new();
    for name in &opts.names {
        let by_tool = project
            .tools
            .iter()
            .find(|t| t.origin == Origin::V1 && &t.name == name)
            .map(|t| t.file.clone());
        let found = entries
            .iter()
            .find(|e| &e.name == name || Some(&e.file) == by_tool.as_ref());
        match found {
            Some(e) => out.push(e.clone()),
            None => {
                let is_dir = project
                    .tools
                    .iter()
                    .any(|t| &t.name == name && t.origin == Origin::Dir);
                let hint = if is_dir {
                    " (it is already a v2 tool directory)".to_owned()
                } else {
                    String::new()
                };
                return Err(MigrateError::NotV1 {
                    name: name.clone(),
                    hint,
                });
            }
        }
    }
    Ok(out)
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> MigrateError {
    let path = path.to_path_buf();
    move |source| MigrateError::Io {
        action,
        path,
        source,
    }
}

fn plan(project: &Project, entry: &ToolEntry, opts: &Options) -> Result<Plan, MigrateError> {
    let errors: Vec<Diagnostic> = project
        .diagnostics
        .iter()
        .filter(|d| d.file == entry.display && d.is_error())
        .cloned()
        .collect();
    let tool = project
        .tools
        .iter()
        .find(|t| t.file == entry.file && t.origin == Origin::V1);
    let tool = match tool {
        Some(tool) if errors.is_empty() => tool,
        _ => {
            return Err(MigrateError::Invalid {
                file: entry.display.clone(),
                diagnostics: errors,
            })
        }
    };
    let name = tool.name.clone();
    let tools = project.root.join(TOOLS_DIR);
    let dir = tools.join(&name);
    if dir.symlink_metadata().is_ok() {
        return Err(MigrateError::Exists { path: dir });
    }
    let backup = if opts.remove {
        None
    } else {
        let mut file = entry.file.clone().into_os_string();
        file.push(BACKUP_SUFFIX);
        let backup = PathBuf::from(file);
        if backup.symlink_metadata().is_ok() {
            return Err(MigrateError::BackupExists { path: backup });
        }
        Some(backup)
    };
    let source = fs::read_to_string(&entry.file).map_err(io("read", &entry.file))?;
    let text = render(entry, backup.as_deref(), &source, &tool.manifest)?;
    Ok(Plan {
        entry: entry.clone(),
        name,
        dir,
        backup,
        text,
    })
}

/// The v2 `tool.yml` text for the v1 file `entry` with content `source`,
/// checked to load to `expected` (see the module doc).
fn render(
    entry: &ToolEntry,
    backup: Option<&Path>,
    source: &str,
    expected: &Manifest,
) -> Result<String, MigrateError> {
    let name = expected.name.clone();
    let mismatch = |reason: String| MigrateError::Mismatch {
        name: name.clone(),
        reason,
    };
    let mapped = v1::map(source).map_err(|e| mismatch(e.to_string()))?;
    let Some(document) = mapped.document else {
        return Err(mismatch("the v1 file no longer maps".into()));
    };
    let kept = match backup.and_then(Path::file_name) {
        Some(b) => format!(
            "# The v1 file is kept as .glee/tools/{}.\n",
            b.to_string_lossy()
        ),
        None => String::new(),
    };
    let text = format!(
        "# Migrated by `glovebox migrate` from the Glee v1 file {}.\n{kept}{}",
        entry.display,
        yaml::emit(&document.value)?
    );
    let root = entry
        .file
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"));
    let target = ToolEntry {
        name: name.clone(),
        file: root.join(TOOLS_DIR).join(&name).join(TOOL_FILE),
        display: format!("{TOOLS_DIR}/{name}/{TOOL_FILE}"),
        origin: Origin::Dir,
    };
    let checked = lint::lint_tool(root, &target, &text);
    if let Some(error) = checked.diagnostics.iter().find(|d| d.is_error()) {
        return Err(mismatch(error.to_string()));
    }
    match checked.manifest {
        Some(m) if &m == expected => Ok(text),
        Some(_) => Err(mismatch("the manifests differ".into())),
        None => Err(mismatch("the v2 manifest does not load".into())),
    }
}

fn write(root: &Path, plan: &Plan) -> Result<(), MigrateError> {
    let tools = root.join(TOOLS_DIR);
    let staged = tempfile::Builder::new()
        .prefix(&format!(".migrate-{}-", plan.name))
        .tempdir_in(&tools)
        .map_err(io("create a directory in", &tools))?;
    let file = staged.path().join(TOOL_FILE);
    fs::write(&file, plan.text.as_bytes()).map_err(io("write", &file))?;
    fs::File::open(&file)
        .and_then(|f| f.sync_all())
        .map_err(io("sync", &file))?;
    if plan.dir.symlink_metadata().is_ok() {
        return Err(MigrateError::Exists {
            path: plan.dir.clone(),
        });
    }
    let staged = staged.keep();
    if let Err(source) = fs::rename(&staged, &plan.dir) {
        let _ = fs::remove_dir_all(&staged);
        return Err(MigrateError::Io {
            action: "create",
            path: plan.dir.clone(),
            source,
        });
    }
    match &plan.backup {
        Some(backup) => {
            fs::rename(&plan.entry.file, backup).map_err(io("rename", &plan.entry.file))
        }
        None => fs::remove_file(&plan.entry.file).map_err(io("remove", &plan.entry.file)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const V1: &str = "name: ping_it\ndescription: d\nparameters:\n  - name: q\n    type: string\n    required: true\napi:\n  endpoint: https://a.example/p/${q}\n";

    fn project() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".glee/tools")).unwrap();
        fs::write(tmp.path().join(".glee/tools/ping-it.yml"), V1).unwrap();
        tmp
    }

    #[test]
    fn dry_run_writes_nothing_and_migration_keeps_a_backup() {
        let tmp = project();
        let opts = Options {
            names: vec!["ping_it".into()],
            dry_run: true,
            ..Options::default()
        };
        let done = migrate(tmp.path(), &opts).unwrap();
        assert_eq!(done[0].to, ".glee/tools/ping_it/tool.yml");
        assert!(done[0].text.starts_with("# Migrated by `glovebox migrate`"));
        assert!(!tmp.path().join(".glee/tools/ping_it").exists());
        let opts = Options {
            all: true,
            ..Options::default()
        };
        migrate(tmp.path(), &opts).unwrap();
        assert!(tmp.path().join(".glee/tools/ping_it/tool.yml").is_file());
        assert_eq!(
            fs::read_to_string(tmp.path().join(".glee/tools/ping-it.yml.v1-migrated")).unwrap(),
            V1
        );
        assert!(!tmp.path().join(".glee/tools/ping-it.yml").exists());
        let p = Project::load(tmp.path()).unwrap();
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(p.tool("ping_it").unwrap().origin, Origin::Dir);
    }

    #[test]
    fn refuses_to_overwrite_and_names_both_files() {
        let tmp = project();
        fs::create_dir_all(tmp.path().join(".glee/tools/ping_it")).unwrap();
        let err = migrate(
            tmp.path(),
            &Options {
                names: vec!["ping-it".into()],
                ..Options::default()
            },
        )
        .unwrap_err();
        assert!(matches!(err, MigrateError::Exists { .. }), "{err}");
        assert_eq!(
            fs::read_to_string(tmp.path().join(".glee/tools/ping-it.yml")).unwrap(),
            V1
        );
    }
}
