//! Filesystem confinement with Landlock.
//!
//! The ruleset handles every filesystem right the running kernel knows, so
//! anything not granted is denied: read paths get read + execute, write
//! paths read + write (no execute unless also listed as read or exec). With
//! the network off it also handles TCP bind/connect (ABI 4+) with no rule,
//! and it always scopes signals and abstract unix sockets to the jail
//! (ABI 6+). The ruleset is built in the supervisor before the child is
//! created; the child only calls `landlock_restrict_self`.

use std::path::{Path, PathBuf};

use std::os::fd::AsFd;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};

use super::hold::{self, Held, HoldError, Kind, Links};

/// The oldest Landlock ABI glovebox accepts: 3 adds `truncate`, without
/// which a jailed process could truncate files it may only read.
pub const MIN_ABI: i32 = 3;

/// The oldest Landlock ABI glovebox adds as a second layer under the
/// jail's mount tree: 2 handles cross-directory renames and links
/// (`REFER`) the way the tree allows them; ABI 1 refuses every one.
pub const TREE_MIN_ABI: i32 = 2;

/// Errors while building the Landlock ruleset.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The kernel offers no Landlock, or one too old.
    #[error("landlock abi {found} is below the required {MIN_ABI} (filesystem confinement)")]
    Unsupported { found: i32 },
    /// The landlock crate refused the ruleset.
    #[error("failed to build the landlock ruleset")]
    Ruleset {
        #[source]
        source: landlock::RulesetError,
    },
}

impl From<landlock::RulesetError> for FsError {
    fn from(source: landlock::RulesetError) -> Self {
        FsError::Ruleset { source }
    }
}

/// The paths a jail may touch, by kind of access.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FsAccess {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read and write (no execute).
    pub write: Vec<PathBuf>,
    /// Read and execute (kept apart from `read` for `explain`).
    pub exec: Vec<PathBuf>,
    /// Read-only data paths, no execute (e.g. `/etc` entries, `/proc`).
    pub read_only: Vec<PathBuf>,
}

/// The held paths of one ruleset, by access ([`super::hold`]).
#[derive(Debug, Default)]
pub struct Rules<'a> {
    /// Read files and directories.
    pub read_only: Vec<&'a Held>,
    /// Read and execute.
    pub read_exec: Vec<&'a Held>,
    /// Read and write (no execute).
    pub write: Vec<&'a Held>,
}

/// Builds the ruleset for `rules` on a kernel with Landlock ABI `abi`,
/// each rule added on the path's held descriptor (a link's rule is on its
/// target, held beside it; the link itself gets none).
pub fn ruleset_held(abi: i32, rules: &Rules<'_>, network: bool) -> Result<RulesetCreated, FsError> {
    if abi < TREE_MIN_ABI {
        return Err(FsError::Unsupported { found: abi });
    }
    let level = ABI::from(abi);
    let read_only = AccessFs::ReadFile | AccessFs::ReadDir;
    let read_exec = read_only | AccessFs::Execute;
    let write = write_access(level);

    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(level))?;
    if !network && abi >= 4 {
        rs = rs.handle_access(AccessNet::from_all(level))?;
    }
    if abi >= 6 {
        rs = rs.scope(Scope::from_all(level))?;
    }
    let mut created = rs.create()?;
    let file = AccessFs::from_file(level);
    for (list, access) in [
        (&rules.read_only, read_only),
        (&rules.read_exec, read_exec),
        (&rules.write, write),
    ] {
        for h in list.iter().filter(|h| h.id.kind != Kind::Link) {
            let access = if h.id.kind == Kind::Dir {
                access
            } else {
                access & file
            };
            created = created.add_rule(PathBeneath::new(h.fd.as_fd(), access))?;
        }
    }
    Ok(created)
}

/// Everything a write path needs except device nodes, which no tool
/// should create, and execute.
fn write_access(level: ABI) -> landlock::BitFlags<AccessFs> {
    (AccessFs::from_all(level) & !(AccessFs::MakeChar | AccessFs::MakeBlock)) & !AccessFs::Execute
}

/// The access of a write grant on ABI `abi`, for a rule added from inside
/// the child (the jail's private home, a tmpfs that only exists there).
pub fn write_access_bits(abi: i32) -> u64 {
    write_access(ABI::from(abi)).bits()
}

/// Access rights for a path-beneath rule added from inside the child (the
/// jail's own `/proc`): read files and directories.
pub fn proc_access_bits() -> u64 {
    (AccessFs::ReadFile | AccessFs::ReadDir).bits()
}

/// The access a jail without a PID namespace gets to the host's system-wide
/// `/proc` files in [`HOST_PROC_FILES`] (read only).
pub fn proc_file_bits() -> u64 {
    landlock::BitFlags::from(AccessFs::ReadFile).bits()
}

/// System-wide `/proc` files a jail without a PID namespace may read (what
/// a private `/proc` shows too: no other process's entries). Its own
/// `/proc/self` is added in the child, where it resolves to the tool.
pub const HOST_PROC_FILES: [&std::ffi::CStr; 8] = [
    c"/proc/cpuinfo",
    c"/proc/meminfo",
    c"/proc/stat",
    c"/proc/loadavg",
    c"/proc/uptime",
    c"/proc/version",
    c"/proc/filesystems",
    c"/proc/sys/kernel/osrelease",
];

/// True when `path` or one of its ancestors is in `list`.
pub fn covered(path: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|p| path.starts_with(p))
}

/// Write grants reshaped for a jail without a mount namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Paths that keep the write rule (none of them holds a protected path).
    pub write: Vec<PathBuf>,
    /// Directories that hold a protected path somewhere below: readable
    /// (no execute, as a write grant), not writable — no entry can be
    /// created, removed or renamed directly in them.
    pub read_only: Vec<PathBuf>,
}

/// One entry of a directory, as [`split_write`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// Its path.
    pub path: PathBuf,
    /// A symbolic link (never given a rule: Landlock would follow it out
    /// of the grant).
    pub link: bool,
}

/// Splits `write` (real paths) around `protected` (real paths) so that no
/// Landlock write rule covers a protected path: Landlock rules only add
/// access beneath a directory, so a grant holding a protected path is
/// replaced by a read rule on it and a write rule on each of its entries
/// (`children`) that holds none, recursively along the way to each
/// protected path. A grant inside a protected path becomes read-only.
/// The cost: no entry can be created or removed directly in a directory
/// on the way to a protected path (the project root when `.glee/` is
/// protected); everything below its other entries stays writable.
pub fn split_write(
    write: &[PathBuf],
    protected: &[PathBuf],
    children: &dyn Fn(&Path) -> Vec<Child>,
) -> Split {
    fn walk(
        dir: &Path,
        protected: &[&PathBuf],
        children: &dyn Fn(&Path) -> Vec<Child>,
        out: &mut Split,
        depth: u8,
    ) {
        out.read_only.push(dir.to_path_buf());
        if depth > 64 {
            return;
        }
        for c in children(dir) {
            if c.link || protected.iter().any(|p| **p == c.path) {
                continue;
            }
            let inner: Vec<&PathBuf> = protected
                .iter()
                .copied()
                .filter(|p| p.starts_with(&c.path))
                .collect();
            if inner.is_empty() {
                out.write.push(c.path);
            } else {
                walk(&c.path, &inner, children, out, depth + 1);
            }
        }
    }
    let mut out = Split::default();
    for w in write {
        if covered(w, protected) {
            out.read_only.push(w.clone());
            continue;
        }
        let inner: Vec<&PathBuf> = protected.iter().filter(|p| p.starts_with(w)).collect();
        if inner.is_empty() {
            out.write.push(w.clone());
        } else {
            walk(w, &inner, children, &mut out, 0);
        }
    }
    out.write.sort();
    out.write.dedup();
    out.read_only.sort();
    out.read_only.dedup();
    out
}

/// Write grants reshaped for a jail without a mount namespace, held.
#[derive(Debug, Default)]
pub struct SplitHeld {
    /// Keep the write rule.
    pub write: Vec<Held>,
    /// Readable, not writable.
    pub read_only: Vec<Held>,
}

/// [`split_write`] on the held grants `write` around the held `protected`
/// paths, by their real paths. A directory's entries are read through its
/// held descriptor; each entry that gets a rule is held then, with no link
/// followed (a link never gets a rule; one that appears meanwhile refuses
/// the call). A directory that cannot be read contributes no entries
/// (nothing below it is writable).
pub fn split_held(write: &[Held], protected: &[Held]) -> Result<SplitHeld, HoldError> {
    let grants: Vec<PathBuf> = write
        .iter()
        .filter(|h| h.id.kind != Kind::Link)
        .map(|h| h.real.clone())
        .collect();
    let protected: Vec<PathBuf> = protected.iter().map(|h| h.real.clone()).collect();
    let fd_of = |dir: &Path| {
        write
            .iter()
            .find(|h| h.real == dir)
            .map(|h| h.fd_path())
            .unwrap_or_else(|| dir.to_path_buf())
    };
    let children = |dir: &Path| -> Vec<Child> {
        let Ok(rd) = std::fs::read_dir(fd_of(dir)) else {
            return Vec::new();
        };
        rd.filter_map(Result::ok)
            .map(|e| Child {
                path: dir.join(e.file_name()),
                link: e.file_type().map(|t| t.is_symlink()).unwrap_or(true),
            })
            .collect()
    };
    let split = split_write(&grants, &protected, &children);
    let held = |paths: &[PathBuf]| -> Result<Vec<Held>, HoldError> {
        let mut out = Vec::new();
        for p in paths {
            match write.iter().find(|h| h.real == *p) {
                Some(h) => out.push(h.try_clone().map_err(|source| HoldError::Open {
                    path: p.clone(),
                    source,
                })?),
                None => out.extend(
                    hold::hold(p, &Links::Checked { root: None })?
                        .into_iter()
                        .filter(|h| h.id.kind != Kind::Link),
                ),
            }
        }
        Ok(out)
    };
    Ok(SplitHeld {
        write: held(&split.write)?,
        read_only: held(&split.read_only)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path) -> Vec<Child> {
        let names: &[&str] = match dir.to_str().unwrap_or("") {
            "/p" => &[".glee", ".git", "tools.json", "src", "scripts", "link"],
            "/p/scripts" => &["a.sh", "b.sh", "lib"],
            "/p/src" => &["main.rs"],
            _ => &[],
        };
        names
            .iter()
            .map(|n| Child {
                path: dir.join(n),
                link: *n == "link",
            })
            .collect()
    }

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_grant_holding_protected_paths_is_split_around_them() {
        let s = split_write(
            &paths(&["/p", "/home/x"]),
            &paths(&["/p/.glee", "/p/.git", "/p/tools.json", "/p/scripts/a.sh"]),
            &tree,
        );
        assert_eq!(
            s.write,
            paths(&["/home/x", "/p/scripts/b.sh", "/p/scripts/lib", "/p/src"])
        );
        assert_eq!(s.read_only, paths(&["/p", "/p/scripts"]));
    }

    #[test]
    fn grants_without_protected_paths_are_kept_and_inside_ones_become_read_only() {
        let s = split_write(
            &paths(&["/p/src", "/p/.git/hooks"]),
            &paths(&["/p/.git"]),
            &tree,
        );
        assert_eq!(s.write, paths(&["/p/src"]));
        assert_eq!(s.read_only, paths(&["/p/.git/hooks"]));
        // A sibling sharing a prefix is not inside.
        let s = split_write(&paths(&["/p/.github"]), &paths(&["/p/.git"]), &tree);
        assert_eq!(s.write, paths(&["/p/.github"]));
    }
}
