//! Files people run by hand, watched across a call: a build file
//! (`Makefile`), a package's scripts (`package.json`), `pyproject.toml`'s
//! build settings, CI workflows (the list is
//! [`crate::surface::RUN_BY_HAND`]). A tool may change them where its
//! write grants reach (editing the build is ordinary work), but the
//! person or the agent framework that runs them next must know: the call
//! that changed one says so in its Outcome (`run_surfaces_changed`, and a
//! warning) and its audit line.
//!
//! [`Snapshot::take`] records what each path is before the call — its
//! kind, device and inode, size, mode, and modification and change times
//! to the nanosecond (the change time moves with every write, `chmod` and
//! `touch`, and no call can set it back), a link's target; for a
//! directory, the same for every entry below it (at most
//! [`MAX_ENTRIES`], [`MAX_DEPTH`] levels, links never followed) — and
//! [`Snapshot::changed`] names those that differ after it (created,
//! removed or changed). A directory past its bound is compared as far as
//! it was read, plus its own times (which move when an entry is added or
//! removed directly in it).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How many entries below one watched directory are compared, at most.
pub const MAX_ENTRIES: usize = 512;

/// How deep below a watched directory entries are compared.
pub const MAX_DEPTH: usize = 4;

/// What one path is, as far as a change to it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    Present {
        kind: u32,
        dev: u64,
        ino: u64,
        size: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
        link: Option<PathBuf>,
    },
}

fn state(p: &Path) -> State {
    match p.symlink_metadata() {
        Err(_) => State::Absent,
        Ok(m) => State::Present {
            kind: m.mode(),
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            link: m
                .file_type()
                .is_symlink()
                .then(|| std::fs::read_link(p).ok())
                .flatten(),
        },
    }
}

/// The watched paths as they were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Each watched path, with what it and (for a directory) the entries
    /// below it were.
    watched: Vec<(PathBuf, Vec<(PathBuf, State)>)>,
}

impl Snapshot {
    /// What `paths` are now.
    pub fn take(paths: &[PathBuf]) -> Snapshot {
        Snapshot {
            watched: paths.iter().map(|p| (p.clone(), below(p))).collect(),
        }
    }

    /// True when nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// The watched paths that are not as they were (sorted).
    pub fn changed(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|(p, was)| below(p) != *was)
            .map(|(p, _)| p.clone())
            .collect();
        out.sort();
        out
    }
}

/// `p` and, for a directory, the entries below it, breadth first.
fn below(p: &Path) -> Vec<(PathBuf, State)> {
    let top = state(p);
    let is_dir = matches!(top, State::Present { kind, .. } if kind & 0o170000 == 0o040000);
    let mut out = vec![(p.to_path_buf(), top)];
    if !is_dir {
        return out;
    }
    let mut level = vec![p.to_path_buf()];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            names.sort();
            for e in names {
                if out.len() > MAX_ENTRIES {
                    return out;
                }
                let s = state(&e);
                if matches!(s, State::Present { kind, .. } if kind & 0o170000 == 0o040000) {
                    next.push(e.clone());
                }
                out.push((e, s));
            }
        }
        level = next;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_write_a_new_file_a_removal_and_a_chmod_are_each_a_change() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::write(root.join("Makefile"), "all:\n").unwrap();
        fs::create_dir_all(root.join(".github/workflows")).unwrap();
        fs::write(root.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        let watched = [
            root.join("Makefile"),
            root.join("package.json"),
            root.join(".github/workflows"),
        ];
        let s = Snapshot::take(&watched);
        assert!(s.changed().is_empty());
        // Same size, mtime put back: the change time still moves.
        let mtime = fs::metadata(root.join("Makefile"))
            .unwrap()
            .modified()
            .unwrap();
        fs::write(root.join("Makefile"), "evl:\n").unwrap();
        fs::File::options()
            .write(true)
            .open(root.join("Makefile"))
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(s.changed(), [root.join("Makefile")]);
        let s = Snapshot::take(&watched);
        fs::write(root.join("package.json"), "{}").unwrap();
        fs::write(root.join(".github/workflows/ci.yml"), "on: pull\n").unwrap();
        assert_eq!(
            s.changed(),
            [root.join(".github/workflows"), root.join("package.json")]
        );
        let s = Snapshot::take(&watched);
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("Makefile"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::remove_file(root.join("package.json")).unwrap();
        assert_eq!(
            s.changed(),
            [root.join("Makefile"), root.join("package.json")]
        );
    }
}
