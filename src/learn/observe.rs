//! The learning run's workspace: where it writes (a throw-away copy of
//! the project, key files left out), and how an observed path in that
//! copy maps back to the project. What it may read is [`super::view`]'s.
//!
//! The observation itself is the jail's ([`crate::jail::observe`]: seccomp
//! user notification on every open, exec, create, remove and rename of the
//! call's whole process tree); this module only prepares the run and reads
//! the record.

use std::path::{Path, PathBuf};

use super::LearnError;

/// A throw-away copy of a directory (the project, or the sandbox's working
/// directory): the learning run writes there, never in the original.
#[derive(Debug)]
pub struct Workspace {
    /// The directory copied.
    pub original: PathBuf,
    /// The copy (removed with this value).
    pub copy: PathBuf,
    /// Files of the original left out of the copy: secret key files
    /// (`glovebox approve --generate-key`'s format, whatever their name).
    pub left_out: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Workspace {
    /// Copies `original` (files, directories and links as they are;
    /// sockets and devices left out) into a new temporary directory.
    pub fn copy_of(original: &Path) -> Result<Workspace, LearnError> {
        let dir = tempfile::Builder::new()
            .prefix("glovebox-learn-")
            .tempdir()
            .map_err(|source| LearnError::Copy {
                path: original.to_path_buf(),
                source,
            })?;
        let name = original
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| "root".into());
        let copy = dir.path().join(name);
        let mut budget = Budget {
            entries: MAX_ENTRIES,
            bytes: MAX_BYTES,
            left_out: Vec::new(),
        };
        let skip = original.join(".glee/audit");
        copy_tree(original, &copy, &mut budget, &skip).map_err(|source| {
            if source.kind() == std::io::ErrorKind::FileTooLarge {
                LearnError::TooLarge {
                    path: original.to_path_buf(),
                }
            } else {
                LearnError::Copy {
                    path: original.to_path_buf(),
                    source,
                }
            }
        })?;
        Ok(Workspace {
            original: original.to_path_buf(),
            copy,
            left_out: budget.left_out,
            _dir: dir,
        })
    }

    /// `observed` spelled in the original when it lies in the copy.
    pub fn map_back(&self, observed: &Path) -> PathBuf {
        match observed.strip_prefix(&self.copy) {
            Ok(rest) if rest.as_os_str().is_empty() => self.original.clone(),
            Ok(rest) => self.original.join(rest),
            Err(_) => observed.to_path_buf(),
        }
    }
}

/// The most a learning copy holds: a learning run is for a project or a
/// step's working directory, not a home directory.
const MAX_ENTRIES: u64 = 200_000;
const MAX_BYTES: u64 = 4 << 30;

struct Budget {
    entries: u64,
    bytes: u64,
    /// Key files met (left out).
    left_out: Vec<PathBuf>,
}

/// Copies `from` to `to`, leaving out `skip` (the project's audit log:
/// the learning calls are not the project's calls, and a copied log would
/// not match the head glovebox keeps for it) and every secret key file
/// (recognised by its text: a learning run never sees a key, wherever
/// it was put).
fn copy_tree(from: &Path, to: &Path, budget: &mut Budget, skip: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if from == skip {
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(from)?;
    budget.entries = budget
        .entries
        .checked_sub(1)
        .ok_or(std::io::ErrorKind::FileTooLarge)?;
    budget.bytes = budget
        .bytes
        .checked_sub(meta.len())
        .ok_or(std::io::ErrorKind::FileTooLarge)?;
    let t = meta.file_type();
    if t.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if t.is_dir() {
        std::fs::create_dir(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            copy_tree(&e.path(), &to.join(e.file_name()), budget, skip)?;
        }
        std::fs::set_permissions(
            to,
            std::fs::Permissions::from_mode(meta.permissions().mode()),
        )
    } else if t.is_file() {
        if crate::signing::is_key_file(from) {
            budget.left_out.push(from.to_path_buf());
            return Ok(());
        }
        std::fs::copy(from, to).map(|_| ())
    } else {
        Ok(())
    }
}

/// The observer's record made ready to fold: each path mapped back from
/// the copy, and what the filesystem says of it after the run. A read of
/// a path that does not exist (a lookup along a search path) is dropped:
/// its absence is the same with or without a grant. A write is kept when
/// its directory exists (the run may have been refused it).
pub fn settle(
    accesses: &[crate::jail::observe::Access],
    workspace: Option<&Workspace>,
) -> Vec<super::fold::Seen> {
    use crate::jail::observe::Op;
    let mut out = Vec::with_capacity(accesses.len());
    let mut done = std::collections::HashSet::new();
    for a in accesses {
        if !done.insert((a.op, a.path.clone(), a.program.clone())) {
            continue;
        }
        let meta = std::fs::metadata(&a.path);
        let exists = meta.is_ok() || std::fs::symlink_metadata(&a.path).is_ok();
        let keep = match a.op {
            Op::Read | Op::Exec => exists,
            Op::Write | Op::Create | Op::Remove => {
                exists || a.path.parent().is_some_and(Path::exists)
            }
        };
        if !keep {
            continue;
        }
        let path = workspace.map_or_else(|| a.path.clone(), |w| w.map_back(&a.path));
        let existed = std::fs::symlink_metadata(&path).is_ok();
        // The jail's own child makes the command's first `execve` (its
        // name is still glovebox's): that one is the command's.
        let program = if a.op == Op::Exec && a.program == "glovebox" {
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        } else {
            a.program.clone()
        };
        out.push(super::fold::Seen {
            op: a.op,
            dir: meta.is_ok_and(|m| m.is_dir()),
            existed,
            path,
            program,
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_maps_back_and_leaves_the_original_alone() {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        std::fs::create_dir_all(proj.join("data")).unwrap();
        std::fs::write(proj.join("data/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("data/a.txt", proj.join("link")).unwrap();
        let w = Workspace::copy_of(&proj).unwrap();
        assert_eq!(
            std::fs::read_to_string(w.copy.join("data/a.txt")).unwrap(),
            "a"
        );
        assert!(std::fs::symlink_metadata(w.copy.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            w.map_back(&w.copy.join("data/a.txt")),
            proj.join("data/a.txt")
        );
        assert_eq!(w.map_back(&w.copy), proj);
        assert_eq!(w.map_back(Path::new("/etc/x")), PathBuf::from("/etc/x"));
    }

    #[test]
    fn a_key_file_is_left_out_of_the_copy_whatever_its_name() {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        std::fs::create_dir_all(proj.join("keys")).unwrap();
        crate::signing::generate(&proj.join("keys/notes.txt")).unwrap();
        let w = Workspace::copy_of(&proj).unwrap();
        assert!(!w.copy.join("keys/notes.txt").exists());
        assert!(w.copy.join("keys/notes.txt.pub").exists());
        assert_eq!(w.left_out, vec![proj.join("keys/notes.txt")]);
    }
}
