//! Finding the project root and the tool manifests under it, and resolving
//! manifest paths against the root.
//!
//! The root is the directory holding `.glee/`: the one given with `--root`,
//! or the nearest ancestor of the working directory that has one. Tools live
//! at `.glee/tools/<name>/tool.yml`. Manifest paths are resolved lexically —
//! no symlink is followed here; the jail decides what a path really reaches.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::project::Origin;

/// Directory that marks a project root.
pub const GLEE_DIR: &str = ".glee";
/// Tools directory, relative to the root.
pub const TOOLS_DIR: &str = ".glee/tools";
/// Manifest file name inside a tool directory.
pub const TOOL_FILE: &str = "tool.yml";
/// Extension of a Glee v1 single-file tool (`.glee/tools/<name>.yml`).
pub const V1_EXTENSION: &str = "yml";
/// Config file, relative to the root.
pub const CONFIG_FILE: &str = ".glee/config.yml";

/// Why the root or the tools could not be found.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// No `.glee/` in the working directory or any ancestor.
    #[error(
        "no .glee/ directory in {start:?} or any parent; run inside a project or pass --root DIR"
    )]
    NoRoot {
        /// Where the search started.
        start: PathBuf,
    },
    /// `--root` names something that is not a directory.
    #[error(
        "project root {path:?} is not a directory; pass --root with the directory holding .glee/"
    )]
    RootNotDir {
        /// The given root.
        path: PathBuf,
    },
    /// The working directory is unavailable.
    #[error("failed to read the working directory")]
    CurrentDir {
        /// The OS error.
        source: io::Error,
    },
    /// A directory could not be listed.
    #[error("failed to list {path:?}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

impl DiscoverError {
    /// The Outcome's error kind: no usable project.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
}

/// The root for `explicit` (`--root`), else the nearest ancestor of the
/// working directory holding `.glee/`. The result is absolute.
pub fn find_root(explicit: Option<&Path>) -> Result<PathBuf, DiscoverError> {
    let cwd = std::env::current_dir().map_err(|source| DiscoverError::CurrentDir { source })?;
    match explicit {
        Some(dir) => {
            let path = normalize(&cwd.join(dir));
            if path.is_dir() {
                Ok(path)
            } else {
                Err(DiscoverError::RootNotDir { path })
            }
        }
        None => find_root_from(&cwd),
    }
}

/// The nearest ancestor of `start` (itself included) that holds `.glee/`.
pub fn find_root_from(start: &Path) -> Result<PathBuf, DiscoverError> {
    start
        .ancestors()
        .find(|dir| dir.join(GLEE_DIR).is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| DiscoverError::NoRoot {
            start: start.to_path_buf(),
        })
}

/// A tool found under `.glee/tools/`: a v2 directory or a Glee v1 file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEntry {
    /// The directory name (v2), which is the tool's name, or the file stem
    /// (v1), which may spell `_` as `-`.
    pub name: String,
    /// Absolute path of `tool.yml` (which may not exist) or of the v1 file.
    pub file: PathBuf,
    /// `file` relative to the root, with `/` separators, for messages.
    pub display: String,
    /// [`Origin::Dir`] or [`Origin::V1`].
    pub origin: Origin,
}

/// The tools of `root`, sorted by name: directories (v2) and `<name>.yml`
/// files (Glee v1). A missing `.glee/tools/` means no tools; hidden
/// entries and other files are skipped.
pub fn tool_entries(root: &Path) -> Result<Vec<ToolEntry>, DiscoverError> {
    let dir = root.join(TOOLS_DIR);
    let read = match fs::read_dir(&dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(DiscoverError::ReadDir { path: dir, source }),
    };
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|source| DiscoverError::ReadDir {
            path: dir.clone(),
            source,
        })?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            entries.push(ToolEntry {
                display: format!("{TOOLS_DIR}/{name}/{TOOL_FILE}"),
                file: path.join(TOOL_FILE),
                name,
                origin: Origin::Dir,
            });
        } else if path.is_file() {
            let Some(stem) = name
                .strip_suffix(V1_EXTENSION)
                .and_then(|s| s.strip_suffix('.'))
                .filter(|s| !s.is_empty())
            else {
                continue;
            };
            entries.push(ToolEntry {
                display: format!("{TOOLS_DIR}/{name}"),
                name: stem.to_owned(),
                file: path,
                origin: Origin::V1,
            });
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name).then(a.display.cmp(&b.display)));
    Ok(entries)
}

/// Resolves a manifest path: relative paths are joined to `root`, absolute
/// ones honoured, `~/…` is below the home directory of the user running
/// glovebox ([`crate::state::home`]: its passwd entry's, the same however
/// glovebox was started); the result is normalised lexically (see
/// [`normalize`]).
pub fn resolve(root: &Path, path: &str) -> PathBuf {
    match home_relative(path) {
        Some(rest) => match crate::state::home() {
            Some(home) => normalize(&home.join(rest)),
            // No home: a path nothing is at (`~` is never the project's).
            None => normalize(&Path::new("/nonexistent").join(rest)),
        },
        None => normalize(&root.join(path)),
    }
}

/// The part after `~/` of a manifest path written below the home (`""`
/// for `~` itself), if it is one.
pub fn home_relative(path: &str) -> Option<&str> {
    if path == "~" {
        return Some("");
    }
    path.strip_prefix("~/")
}

/// Whether a manifest path names a place by itself (absolute, or `~/…`)
/// rather than relative to the root.
pub fn names_itself(path: &str) -> bool {
    Path::new(path).is_absolute() || home_relative(path).is_some()
}

/// Removes `.` components and folds `..` into its parent, without touching
/// the filesystem. `..` at the filesystem root stays at the root.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let at_top = matches!(
                    out.components().next_back(),
                    None | Some(Component::RootDir | Component::Prefix(_))
                );
                if at_top {
                    if out.as_os_str().is_empty() {
                        out.push("..");
                    }
                } else if out.components().next_back() == Some(Component::ParentDir) {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether the manifest path `path` resolves outside `root`.
pub fn leaves_root(root: &Path, path: &str) -> bool {
    !resolve(root, path).starts_with(normalize(root))
}

/// [`resolved`], spelled under `root` as the root itself is spelled when
/// it leads inside the root: links inside the project are followed, the
/// root's own path (which may pass through a link, as every protected
/// path's does) is kept. Outside the root: the real path.
pub fn resolved_under(root: &Path, path: &Path) -> PathBuf {
    let real = resolved(path);
    let real_root = resolved(root);
    match real.strip_prefix(&real_root) {
        Ok(rest) if rest.as_os_str().is_empty() => root.to_path_buf(),
        Ok(rest) => root.join(rest),
        Err(_) => real,
    }
}

/// A path with symlinks resolved as far as it exists; the missing rest is
/// appended as written (`..` and `.` already gone, see [`resolve`]).
pub fn resolved(path: &Path) -> PathBuf {
    resolved_within(path, 40)
}

/// [`resolved`] following at most `hops` dangling links (a loop ends).
fn resolved_within(path: &Path, hops: u32) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    // A dangling link resolves to where it points.
    let mut out = std::fs::canonicalize(&existing).unwrap_or_else(|_| dangling(&existing, hops));
    for part in rest.iter().rev() {
        out.push(part);
    }
    out
}

/// Where a dangling symlink points (its parent resolved), or the path.
fn dangling(path: &Path, hops: u32) -> PathBuf {
    match (std::fs::read_link(path), path.parent()) {
        (Ok(target), Some(parent)) if hops > 0 => {
            let joined = normalize(&parent.join(target));
            if joined == path {
                return joined;
            }
            resolved_within(&joined, hops - 1)
        }
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), Path::new("/x"));
        assert_eq!(normalize(Path::new("a/../../b")), Path::new("../b"));
        assert_eq!(normalize(Path::new("./")), Path::new("."));
    }

    #[test]
    fn resolves_from_root() {
        let root = Path::new("/p");
        assert_eq!(resolve(root, "src/"), Path::new("/p/src"));
        assert_eq!(resolve(root, "."), Path::new("/p"));
        assert_eq!(resolve(root, "/etc"), Path::new("/etc"));
        assert!(!leaves_root(root, "."));
        assert!(!leaves_root(root, "a/../b"));
        assert!(!leaves_root(root, "/p/x"));
        assert!(leaves_root(root, ".."));
        assert!(leaves_root(root, "src/../../etc"));
        assert!(leaves_root(root, "/etc"));
        assert!(leaves_root(root, "/pp"));
    }

    #[test]
    fn finds_nearest_root() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".glee/tools/t")).unwrap();
        fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let root = find_root_from(&tmp.path().join("a/b")).unwrap();
        assert_eq!(root, tmp.path());
        fs::write(
            tmp.path().join(".glee/tools/old-one.yml"),
            "name: old_one\n",
        )
        .unwrap();
        fs::write(tmp.path().join(".glee/tools/notes.txt"), "x").unwrap();
        fs::write(tmp.path().join(".glee/tools/x.yml.v1-migrated"), "x").unwrap();
        let tools = tool_entries(&root).unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].display, ".glee/tools/old-one.yml");
        assert_eq!(tools[0].name, "old-one");
        assert_eq!(tools[0].origin, Origin::V1);
        assert_eq!(tools[1].display, ".glee/tools/t/tool.yml");
        assert_eq!(tools[1].origin, Origin::Dir);
    }
}
