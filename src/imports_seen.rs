//! The project-local modules python tools were seen importing.
//!
//! A warm worker's zygote reports the file of every module it loaded
//! outside the Python installation once its import is done
//! ([`crate::run::warm`]), and the check of an approved tool's code
//! ([`crate::run::pins`]) reports each project file it refused to load
//! (a module imported under a computed name, a plugin added since the
//! approval, a python command's helper). Those inside the project root
//! (outside the tool's venv, which is protected whole) are recorded here,
//! per tool, in
//! glovebox's state directory (`imports/<project key>.json`, out of every
//! jail's reach), and [`crate::footprint`] counts them as code the tool
//! runs: hashed into its approval fingerprint, read-only in every jail,
//! watched by its warm workers. This covers what the static reader
//! ([`crate::pyimports`]) cannot see: a module imported at import time
//! under a computed name (`importlib.import_module(f"plugins.{n}")`).
//!
//! Records only grow (a file seen once stays covered, and its removal
//! voids the approval like any change). A module first seen *after* the
//! tool was approved voids that approval ("… appeared"): it is code the
//! approver never saw, so the tool must be approved again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::state::{self, StateError};

/// True when `file` is named as python code the interpreter loads: a
/// module (`.py`), a sourceless `.pyc`, a native extension (`.so`), or an
/// archive on `sys.path` (`.zip`, `.egg`, `.whl`, `.pyz`).
pub fn is_code(file: &Path) -> bool {
    file.extension()
        .and_then(|x| x.to_str())
        .is_some_and(|x| ["py", "pyc", "so", "zip", "egg", "whl", "pyz"].contains(&x))
}

/// At most this many files are recorded for one tool.
const MAX_PER_TOOL: usize = 1024;

/// The records of one project: tool name → paths relative to the root.
type Records = BTreeMap<String, BTreeSet<String>>;

fn file_of(root: &Path) -> Result<PathBuf, StateError> {
    Ok(state::dir()?
        .join("imports")
        .join(format!("{}.json", state::project_key(root))))
}

fn load(path: &Path) -> Records {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The files `tool` of the project at `root` was seen importing
/// (absolute; none when nothing was recorded or the state directory
/// cannot be read).
pub fn of(root: &Path, tool: &str) -> Vec<PathBuf> {
    let Ok(path) = file_of(root) else {
        return Vec::new();
    };
    load(&path)
        .remove(tool)
        .unwrap_or_default()
        .into_iter()
        .map(|rel| root.join(rel))
        .collect()
}

/// Adds to `tool`'s record the files of `loaded` that are python code
/// ([`is_code`]) inside `root` and outside `skip` (its venv). Writes only
/// when the record grows.
pub fn record(
    root: &Path,
    tool: &str,
    loaded: &[PathBuf],
    skip: Option<&Path>,
) -> Result<(), StateError> {
    let wanted: Vec<String> = loaded
        .iter()
        .filter(|f| is_code(f))
        .filter(|f| skip.is_none_or(|s| !f.starts_with(s)))
        .filter_map(|f| f.strip_prefix(root).ok())
        .filter(|rel| {
            rel.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
        .map(|rel| rel.display().to_string())
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let path = file_of(root)?;
    let mut records = load(&path);
    let entry = records.entry(tool.to_string()).or_default();
    let before = entry.len();
    for rel in wanted {
        if entry.len() >= MAX_PER_TOOL {
            break;
        }
        entry.insert(rel);
    }
    if entry.len() == before {
        return Ok(());
    }
    state::ensure_dir()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let text = serde_json::to_vec_pretty(&records).unwrap_or_default();
    state::write_atomic(&path, &text)
}
