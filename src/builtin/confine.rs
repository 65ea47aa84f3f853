//! The supervisor's path checks for the built-ins: a parameter is made
//! relative to the root without touching the file system, and refused when
//! it leaves the root (`..`, an absolute path elsewhere) or, for writes,
//! names glovebox's own `.glee/` directory.
//!
//! These checks give clear errors early; they are not the guarantee. The
//! jail is: the helper can only reach the root (and, for a write, the
//! target's directory) whatever a symbolic link says.

use std::path::{Component, Path, PathBuf};

/// The directory a write may never touch, at any depth.
pub const GLEE_DIR: &str = ".glee";

/// Why a path parameter is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfineError {
    /// The parameter is empty.
    #[error("Error: {param} is empty; give a path relative to the project root")]
    Empty {
        /// The parameter's name.
        param: &'static str,
    },
    /// The path leaves the root.
    #[error("Error: {path} is outside the project root; give a path inside it (relative paths start at the root)")]
    Outside {
        /// The path as given.
        path: String,
    },
    /// The path is part of the project's control surface.
    #[error("Error: {path} is {what}; write_file never changes what a tool runs or may do (edit it yourself)")]
    Protected {
        /// The path as given.
        path: String,
        /// What the protected path is.
        what: String,
    },
    /// The path names `.glee/` (or something inside it).
    #[error("Error: {path} is inside .glee/, glovebox's own configuration; write_file never writes there (edit those files yourself)")]
    GleeDir {
        /// The path as given.
        path: String,
    },
}

impl ConfineError {
    /// The Outcome's error kind: an empty path is a bad parameter, any
    /// other refusal a reach beyond what the built-in may touch.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        match self {
            ConfineError::Empty { .. } => crate::kind::ErrorKind::InputInvalid,
            _ => crate::kind::ErrorKind::PermissionExceedsCeiling,
        }
    }
}

/// `given` relative to `root`, normalised lexically (`.` dropped, `..`
/// applied). `"."` for the root itself.
pub fn relative(root: &Path, given: &str, param: &'static str) -> Result<PathBuf, ConfineError> {
    if given.is_empty() {
        return Err(ConfineError::Empty { param });
    }
    let outside = || ConfineError::Outside {
        path: given.to_owned(),
    };
    let path = Path::new(given);
    let rest = if path.is_absolute() {
        path.strip_prefix(root).map_err(|_| outside())?
    } else {
        path
    };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop().ok_or_else(outside)?;
            }
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    if parts.is_empty() {
        return Ok(PathBuf::from("."));
    }
    Ok(parts.iter().collect())
}

/// Refuses a write target `rel` (relative to `root`) that is, or is
/// inside, a path of the project's control surface `surface` (absolute,
/// under `root`: see [`crate::surface`]).
pub fn unprotected(
    root: &Path,
    rel: &Path,
    surface: &[PathBuf],
    given: &str,
) -> Result<(), ConfineError> {
    let target = root.join(rel);
    let Some(hit) = surface.iter().find(|p| target.starts_with(p)) else {
        return Ok(());
    };
    let name = hit.strip_prefix(root).unwrap_or(hit);
    let what = match name.to_str() {
        Some(".glee") => "inside .glee/, glovebox's own configuration".to_string(),
        Some("tools.json") => "the project's tools.json (it defines tools)".to_string(),
        Some(".git") => "inside .git/ (git runs its hooks and config outside any jail)".to_string(),
        _ if hit.is_dir() => format!(
            "inside {}, which a tool of the project runs",
            name.display()
        ),
        _ => format!("{}, which a tool of the project runs", name.display()),
    };
    Err(ConfineError::Protected {
        path: given.to_owned(),
        what,
    })
}

/// Refuses a write target inside any `.glee/` directory.
pub fn writable(rel: &Path, given: &str) -> Result<(), ConfineError> {
    if rel.components().any(|c| c.as_os_str() == GLEE_DIR) {
        return Err(ConfineError::GleeDir {
            path: given.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn normalises_inside_and_refuses_escapes() {
        let root = Path::new("/p/root");
        let rel = |s| relative(root, s, "path");
        assert_eq!(rel("a/./b/../c.txt").unwrap(), PathBuf::from("a/c.txt"));
        assert_eq!(rel(".").unwrap(), PathBuf::from("."));
        assert_eq!(rel("a/..").unwrap(), PathBuf::from("."));
        assert_eq!(rel("/p/root/x").unwrap(), PathBuf::from("x"));
        assert!(matches!(rel("../x"), Err(ConfineError::Outside { .. })));
        assert!(matches!(
            rel("a/../../x"),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(
            rel("/etc/passwd"),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(
            rel("/p/rootx/y"),
            Err(ConfineError::Outside { .. })
        ));
        assert!(matches!(rel(""), Err(ConfineError::Empty { .. })));
    }

    #[test]
    fn glee_is_never_writable() {
        assert!(writable(Path::new(".glee/config.yml"), "x").is_err());
        assert!(writable(Path::new("sub/.glee/tools/t/tool.yml"), "x").is_err());
        assert!(writable(Path::new(".gleeful"), "x").is_ok());
    }
}
