//! Importers: tool files written for other runners, turned into v2 tool
//! directories (`.glee/tools/<name>/tool.yml`) that lint clean.
//!
//! A converter ([`hdn`]) turns each entry of a file into a manifest or a
//! [`Refused`] entry saying what glovebox cannot express; [`write_tool`]
//! writes a converted manifest. Writing is careful:
//!
//! - the manifest is linted before anything touches the disk, and is not
//!   written when lint finds an error;
//! - only `.glee/tools/<name>/` is written, with `<name>` a valid tool name,
//!   and only when `.glee/tools` resolves to itself (no symlinked `.glee` or
//!   `tools` leading elsewhere);
//! - the directory is built under a hidden temporary name and renamed into
//!   place, so a complete tool appears or nothing; an existing tool is never
//!   replaced without `force`, and with it the old directory is exchanged
//!   for the new one atomically and then removed.

pub mod hdn;
pub mod mcp;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{renameat2, RenameFlags};
use serde_json::Value;

use crate::manifest::diagnostic::Diagnostic;
use crate::manifest::discover::{self, ToolEntry};
use crate::manifest::{lint, yaml};

/// Largest tool file an importer reads.
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// An entry of the input converted to a v2 manifest.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The tool's name (its directory).
    pub name: String,
    /// The manifest, as JSON.
    pub manifest: Value,
    /// What the conversion decided that a reader should know.
    pub notes: Vec<String>,
}

/// An entry that was not imported, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The entry: its name, or `tool[i]` when it has none.
    pub tool: String,
    /// What is wrong or unsupported, and what to do.
    pub reason: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: not imported: {}", self.tool, self.reason)
    }
}

/// A tool written to disk.
#[derive(Debug, Clone)]
pub struct Written {
    /// The tool's name.
    pub name: String,
    /// `tool.yml`, relative to the root.
    pub display: String,
    /// Whether an existing tool directory was replaced (`force`).
    pub replaced: bool,
    /// Conversion notes and lint warnings.
    pub notes: Vec<String>,
}

/// The result of importing one file.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Tools written.
    pub written: Vec<Written>,
    /// Entries not imported.
    pub refused: Vec<Refused>,
}

/// Failures that stop an import as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input file cannot be read.
    #[error("cannot read {path:?}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The input file is larger than [`MAX_INPUT_BYTES`].
    #[error("{path:?} is larger than {MAX_INPUT_BYTES} bytes; split it")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The input is not in the expected format.
    #[error("{path:?} is not {expected}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        expected: &'static str,
        /// What is wrong.
        message: String,
    },
    /// `.glee/tools` cannot be created or resolves outside the root.
    #[error("cannot use {path:?}: {message}")]
    ToolsDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads an input file, capped at [`MAX_INPUT_BYTES`].
pub fn read_input(path: &Path) -> Result<Vec<u8>, ImportError> {
    use std::io::Read;
    let err = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(err)?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(ImportError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// Whether `name` may name a tool directory (`tool.schema.json`'s rule:
/// letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, at most
/// 64 characters).
pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= 64
        && (first.is_ascii_alphanumeric() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Creates `.glee/tools` under `root` if needed and checks that it is a
/// real directory of the root (no symlink leads elsewhere).
pub fn tools_dir(root: &Path) -> Result<PathBuf, ImportError> {
    let dir = root.join(discover::TOOLS_DIR);
    let err = |message: String| ImportError::ToolsDir {
        path: dir.clone(),
        message,
    };
    fs::create_dir_all(&dir).map_err(|e| err(e.to_string()))?;
    let real_root = fs::canonicalize(root).map_err(|e| err(e.to_string()))?;
    let real = fs::canonicalize(&dir).map_err(|e| err(e.to_string()))?;
    if real != real_root.join(discover::TOOLS_DIR) {
        return Err(err(format!(
            "it resolves to {real:?}, outside the project root; replace the symlink with a directory"
        )));
    }
    Ok(real)
}

/// Lints `c` and writes it as `<tools>/<name>/tool.yml`; `header` is a
/// comment put on top of the file. Refused (nothing written) when the
/// name is invalid, lint finds an error, or the tool exists and `force` is
/// off.
pub fn write_tool(
    root: &Path,
    tools: &Path,
    c: &Converted,
    header: &str,
    force: bool,
) -> Result<Written, Refused> {
    let refuse = |reason: String| Refused {
        tool: c.name.clone(),
        reason,
    };
    if !valid_tool_name(&c.name) {
        return Err(refuse(format!(
            "`{}` is not a valid tool name (letters, digits, `_`, `.`, `-`, not starting with `.` or `-`, at most 64 characters); rename it in the input",
            c.name
        )));
    }
    let body = yaml::emit(&c.manifest).map_err(|e| refuse(format!("cannot render YAML: {e}")))?;
    let text = format!("{header}{body}");
    let display = format!("{}/{}/{}", discover::TOOLS_DIR, c.name, discover::TOOL_FILE);
    let entry = ToolEntry {
        name: c.name.clone(),
        file: tools.join(&c.name).join(discover::TOOL_FILE),
        display: display.clone(),
        origin: crate::manifest::Origin::Dir,
    };
    let checked = lint::lint_tool(root, &entry, &text);
    let errors: Vec<&Diagnostic> = checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(|d| d.to_string()).collect();
        return Err(refuse(format!(
            "the converted manifest does not lint clean: {}",
            list.join("; ")
        )));
    }
    let mut notes = c.notes.clone();
    notes.extend(checked.diagnostics.iter().map(|d| d.to_string()));

    let target = tools.join(&c.name);
    let exists = fs::symlink_metadata(&target).is_ok();
    if exists && !force {
        return Err(refuse(format!(
            "{}/{} already exists; pass --force to replace it",
            discover::TOOLS_DIR,
            c.name
        )));
    }
    let io = |what: &str, e: std::io::Error| refuse(format!("cannot {what}: {e}"));
    let tmp = tempfile::Builder::new()
        .prefix(".import-")
        .tempdir_in(tools)
        .map_err(|e| io("create a temporary directory", e))?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755))
        .map_err(|e| io("set permissions", e))?;
    let file = tmp.path().join(discover::TOOL_FILE);
    fs::write(&file, &text).map_err(|e| io("write tool.yml", e))?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644))
        .map_err(|e| io("set permissions", e))?;
    let dir = fs::File::open(tools).map_err(|e| io("open .glee/tools", e))?;
    let tmp_name = tmp
        .path()
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let name = PathBuf::from(&c.name);
    if exists {
        // Swap old and new in one step, then remove the old (now under the
        // temporary name; dropping `tmp` deletes it).
        renameat2(&dir, &tmp_name, &dir, &name, RenameFlags::RENAME_EXCHANGE)
            .map_err(|e| io("replace the tool directory", e.into()))?;
        let old = tmp.path().to_path_buf();
        if fs::symlink_metadata(&old).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(&old).map_err(|e| io("remove the replaced entry", e))?;
            let _ = tmp.keep();
        } else {
            tmp.close()
                .map_err(|e| io("remove the replaced directory", e))?;
        }
    } else {
        renameat2(&dir, &tmp_name, &dir, &name, RenameFlags::RENAME_NOREPLACE).map_err(|e| {
            io(
                "move the tool directory into place (did it appear meanwhile?)",
                e.into(),
            )
        })?;
        // Already moved: nothing left for the guard to delete.
        let _ = tmp.keep();
    }
    Ok(Written {
        name: c.name.clone(),
        display,
        replaced: exists,
        notes,
    })
}
