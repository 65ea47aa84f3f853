//! Resolve once, then use the descriptor (invariant 13).
//!
//! Every path a call is granted, every protected path and every directory
//! the tree pins is resolved here exactly once per call, to an `O_PATH`
//! descriptor ([`Held`]) and its identity (device, inode, kind). What the
//! jail does with the path afterwards uses that descriptor or that
//! identity, never the name again:
//!
//! - the Landlock rules are added on the descriptor ([`super::fs`]);
//! - the tree's nodes ([`super::tree`]) are decided from its `fstat`, and
//!   the child binds a source only after opening it again in its own mount
//!   namespace and finding the same device and inode
//!   (`sys::bind_checked`; a mount cannot be cloned across mount
//!   namespaces, so the child must open it there), else the call fails;
//! - the state directory is kept out by identity ([`Held::covers`]),
//!   whatever name leads to it.
//!
//! A path that a decider above the jail has already checked in its
//! resolved form (the policy's grants: links followed, the result checked
//! against the project root) is held with [`Links::Checked`]: no link is
//! followed below the project root, and one found there means the path
//! changed after the check — the call is refused ([`HoldError::Link`]),
//! never pointed somewhere else. Paths typed by the user for one command
//! (`glovebox sandbox --read`) and the system baseline are held with
//! [`Links::Follow`]: their links are followed now, once, and the tree
//! recreates a trailing link as a link with its target held beside it.
//!
//! The descriptors are closed as soon as every decision about them is
//! made (the tree planned, the Landlock rules added: those hold the inodes
//! themselves), so calls in flight do not pile them up. The child's
//! identity check does not need them open: an inode freed and its number
//! reused could only be found at the same path, which is what was
//! decided on.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::sys;

/// How links met while holding a path are treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Links {
    /// Followed, once (the user's own paths, the system baseline).
    Follow,
    /// The path was checked in its resolved form by a decider above the
    /// jail: links are followed only within `root` as spelled (a project
    /// reached through a link keeps its spelling); anywhere else one means
    /// the path changed after the check, and the call is refused.
    Checked { root: Option<PathBuf> },
}

/// What a held object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file, a device node, a socket or a fifo.
    File,
    /// A symbolic link (held itself, not followed).
    Link,
}

/// Which object a descriptor is: compared by the child before a bind, and
/// by the state directory's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Its kind.
    pub kind: Kind,
}

impl Id {
    fn of(fd: RawFd) -> std::io::Result<Id> {
        let st = sys::fstat(fd).map_err(std::io::Error::from_raw_os_error)?;
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Link,
            _ => Kind::File,
        };
        Ok(Id {
            dev: st.st_dev,
            ino: st.st_ino,
            kind,
        })
    }
}

/// One path resolved once.
#[derive(Debug)]
pub struct Held {
    /// Where the jail shows it (the path as given).
    pub path: PathBuf,
    /// Where it is: every link on the way resolved.
    pub real: PathBuf,
    /// An `O_PATH` handle on it (a link: on the link itself).
    pub fd: OwnedFd,
    /// Which object that is.
    pub id: Id,
    /// A link's target, as stored in the link.
    pub target: Option<PathBuf>,
}

/// Errors holding a path.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// A checked path now passes through a link.
    #[error("{path:?} now leads through a symbolic link ({link:?}); it changed after glovebox checked it, so the call is refused rather than follow it (grant the link's real target, or stop the tool that replaces it)")]
    Link { path: PathBuf, link: PathBuf },
    /// The path cannot be held.
    #[error("cannot open {path:?} to grant it")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path with a NUL byte or not absolute.
    #[error("{path:?} cannot be granted: {why}")]
    Invalid { path: PathBuf, why: &'static str },
}

/// `path` made absolute and lexically clean (`.` dropped, `..` applied).
pub fn clean(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Some(out)
}

fn cstr(p: &Path) -> Result<CString, HoldError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| HoldError::Invalid {
        path: p.to_path_buf(),
        why: "it contains a NUL byte",
    })
}

fn open_err(path: &Path) -> impl FnOnce(i32) -> HoldError + '_ {
    move |e| HoldError::Open {
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(e),
    }
}

/// How many links one path may pass through.
const MAX_LINKS: u32 = 40;

/// Holds `path` (and, for a trailing link under [`Links::Follow`], what it
/// leads to, recursively): the result lists the link first, then its
/// target. Empty when nothing is there (there is nothing to grant).
pub fn hold(path: &Path, links: &Links) -> Result<Vec<Held>, HoldError> {
    let mut out = Vec::new();
    hold_into(path, links, &mut out, 0)?;
    Ok(out)
}

fn hold_into(path: &Path, links: &Links, out: &mut Vec<Held>, depth: u8) -> Result<(), HoldError> {
    let Some(p) = clean(path) else {
        return Err(HoldError::Invalid {
            path: path.to_path_buf(),
            why: "it is not absolute",
        });
    };
    if let Some(fd) = own_descriptor(&p) {
        // A descriptor of this process handed over as /proc/self/fd/N
        // (the built-ins hold their directory that way): that object.
        let held = open_magic(&p, fd)?;
        out.extend(held);
        return Ok(());
    }
    let Some((fd, real)) = walk(&p, links)? else {
        return Ok(());
    };
    let id = Id::of(fd.as_raw_fd()).map_err(|source| HoldError::Open {
        path: p.clone(),
        source,
    })?;
    if id.kind != Kind::Link {
        out.push(Held {
            path: p,
            real,
            fd,
            id,
            target: None,
        });
        return Ok(());
    }
    if let Links::Checked { .. } = links {
        return Err(HoldError::Link {
            path: p,
            link: real,
        });
    }
    let target = sys::read_link_fd(fd.as_raw_fd()).map_err(|source| HoldError::Open {
        path: p.clone(),
        source,
    })?;
    let parent = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    out.push(Held {
        path: p,
        real,
        fd,
        id,
        target: Some(target.clone()),
    });
    // Landlock grants what a link points to; the tree does too.
    if depth < 8 {
        let next = if target.is_absolute() {
            target
        } else {
            parent.join(target)
        };
        hold_into(&next, links, out, depth + 1)?;
    }
    Ok(())
}

/// The descriptor number of `/proc/self/fd/N`, if `p` is that.
fn own_descriptor(p: &Path) -> Option<RawFd> {
    let rest = p.strip_prefix("/proc/self/fd").ok()?;
    let n = rest.to_str()?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// Holds this process's own descriptor `fd` (named `p`): a new handle on
/// the same object, shown at its real path.
fn open_magic(p: &Path, fd: RawFd) -> Result<Option<Held>, HoldError> {
    let c = cstr(p)?;
    let held = match sys::open_path(libc::AT_FDCWD, &c, 0) {
        Ok(h) => h,
        Err(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(open_err(p)(e)),
    };
    let id = Id::of(held.as_raw_fd()).map_err(|source| HoldError::Open {
        path: p.to_path_buf(),
        source,
    })?;
    let real =
        std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|source| HoldError::Open {
            path: p.to_path_buf(),
            source,
        })?;
    if real.starts_with("/proc") || !real.is_absolute() {
        return Ok(None);
    }
    Ok(Some(Held {
        path: real.clone(),
        real,
        fd: held,
        id,
        target: None,
    }))
}

/// Opens `p` (clean, absolute) without following a trailing link: one
/// `openat2` refusing every link where the kernel has it; else (a link on
/// the way, or no `openat2`) component by component, each opened with
/// `O_NOFOLLOW` relative to the one before, a link followed only where
/// `links` allows it. Returns the handle and the real path, or `None`
/// when nothing is there.
fn walk(p: &Path, links: &Links) -> Result<Option<(OwnedFd, PathBuf)>, HoldError> {
    let c = cstr(p)?;
    match sys::openat2_path(libc::AT_FDCWD, &c, sys::RESOLVE_NO_LINKS) {
        Ok(fd) => return Ok(Some((fd, p.to_path_buf()))),
        Err(libc::ENOENT | libc::ENOTDIR) => return Ok(None),
        // A link on the way (ELOOP), or no usable openat2 (a kernel before
        // 5.6, a container profile refusing it): the walk decides.
        Err(_) => {}
    }
    walk_components(p, links)
}

/// [`walk`]'s component-by-component resolution (the whole of it where
/// `openat2` is missing or refused).
fn walk_components(p: &Path, links: &Links) -> Result<Option<(OwnedFd, PathBuf)>, HoldError> {
    let trusted = match links {
        Links::Follow => None,
        Links::Checked { root } => Some(root.as_deref()),
    };
    let mut current = p.to_path_buf();
    let mut followed = 0u32;
    'restart: loop {
        let mut dir =
            sys::open_path(libc::AT_FDCWD, c"/", libc::O_DIRECTORY).map_err(open_err(p))?;
        let mut real = PathBuf::from("/");
        let comps: Vec<&OsStr> = current
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        for (i, name) in comps.iter().enumerate() {
            let cname = CString::new(name.as_bytes()).map_err(|_| HoldError::Invalid {
                path: p.to_path_buf(),
                why: "it contains a NUL byte",
            })?;
            let fd = match sys::open_path(dir.as_raw_fd(), &cname, libc::O_NOFOLLOW) {
                Ok(fd) => fd,
                Err(libc::ENOENT | libc::ENOTDIR) => return Ok(None),
                Err(e) => return Err(open_err(p)(e)),
            };
            real.push(name);
            let last = i + 1 == comps.len();
            let id = Id::of(fd.as_raw_fd()).map_err(|source| HoldError::Open {
                path: p.to_path_buf(),
                source,
            })?;
            if id.kind != Kind::Link || last {
                dir = fd;
                continue;
            }
            // A link on the way.
            let allowed = match trusted {
                None => true,
                Some(root) => root.is_some_and(|r| r.starts_with(&real)),
            };
            if !allowed {
                return Err(HoldError::Link {
                    path: p.to_path_buf(),
                    link: real,
                });
            }
            followed += 1;
            if followed > MAX_LINKS {
                return Err(open_err(p)(libc::ELOOP));
            }
            let target = sys::read_link_fd(fd.as_raw_fd()).map_err(|source| HoldError::Open {
                path: p.to_path_buf(),
                source,
            })?;
            let base = real.parent().unwrap_or(Path::new("/"));
            let mut next = if target.is_absolute() {
                target
            } else {
                base.join(target)
            };
            for rest in &comps[i + 1..] {
                next.push(rest);
            }
            let Some(next) = clean(&next) else {
                return Ok(None);
            };
            current = next;
            continue 'restart;
        }
        return Ok(Some((dir, real)));
    }
}

impl Held {
    /// Another handle on the same object.
    pub fn try_clone(&self) -> std::io::Result<Held> {
        Ok(Held {
            path: self.path.clone(),
            real: self.real.clone(),
            fd: self.fd.try_clone()?,
            id: self.id,
            target: self.target.clone(),
        })
    }

    /// True when this held directory is `id` or one of its ancestors.
    pub fn covers(&self, ancestors: &[Id]) -> bool {
        self.id.kind == Kind::Dir
            && ancestors
                .iter()
                .any(|a| a.dev == self.id.dev && a.ino == self.id.ino)
    }

    /// The descriptor as a `/proc/self/fd/N` path (for APIs that take a
    /// path: it names this very object).
    pub fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// The read grants of `read` that do not exist and that a write grant of
/// the same call holds (strictly), none of them at or under a path of
/// `keep` (the control surface, names the call may not create): each with
/// the write grant and the part below it. A build's `target/` on a fresh
/// checkout: the call could make it itself, and its read grant (which
/// carries the execute a write grant does not) would otherwise grant
/// nothing. Decided on the names; made by [`make_beneath`].
pub fn missing_under<'a>(
    read: &'a [PathBuf],
    write: &'a [PathBuf],
    keep: &[PathBuf],
) -> Vec<(&'a Path, PathBuf)> {
    let mut out = Vec::new();
    for r in read {
        let Some(r) = clean(r) else { continue };
        if std::fs::symlink_metadata(&r).is_ok() || keep.iter().any(|k| r.starts_with(k)) {
            continue;
        }
        let holder = write
            .iter()
            .filter(|w| r.starts_with(w) && r != **w)
            .max_by_key(|w| w.components().count());
        if let Some(w) = holder {
            if let Ok(rel) = r.strip_prefix(w) {
                out.push((w.as_path(), rel.to_path_buf()));
            }
        }
    }
    out
}

/// Makes the directory `rel` below the write grant `dir` (resolved as its
/// grant is, under `links`), one component at a time: each made with
/// `mkdirat` beneath the descriptor of the one before, and opened again
/// with no link followed. It stops, making nothing more, at a component
/// that is anything but a directory — a link there is never followed, so
/// nothing is made outside the write grant; the read grant is then held
/// as it is, by the usual rules. Returns whether `rel` is a directory
/// now.
pub fn make_beneath(dir: &Path, rel: &Path, links: &Links) -> Result<bool, HoldError> {
    let Some(p) = clean(dir) else {
        return Err(HoldError::Invalid {
            path: dir.to_path_buf(),
            why: "it is not absolute",
        });
    };
    let Some((mut fd, _)) = walk(&p, links)? else {
        return Ok(false);
    };
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Ok(false);
        };
        let cname = CString::new(name.as_bytes()).map_err(|_| HoldError::Invalid {
            path: p.join(rel),
            why: "it contains a NUL byte",
        })?;
        match nix::sys::stat::mkdirat(
            &fd,
            cname.as_c_str(),
            nix::sys::stat::Mode::from_bits_truncate(0o755),
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => {
                return Err(HoldError::Open {
                    path: p.join(rel),
                    source: std::io::Error::from(e),
                })
            }
        }
        match sys::open_path(fd.as_raw_fd(), &cname, libc::O_NOFOLLOW | libc::O_DIRECTORY) {
            Ok(next) => fd = next,
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// The identities of `path` and of every directory above it, up to `/`
/// (found through `..` from the held directory, not by name): a grant
/// that is one of them holds `path`.
pub fn ancestors(path: &Path) -> Vec<Id> {
    let Ok(held) = hold(path, &Links::Follow) else {
        return Vec::new();
    };
    let Some(last) = held.into_iter().last() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut fd = last.fd;
    for _ in 0..256 {
        let Ok(id) = Id::of(fd.as_raw_fd()) else {
            break;
        };
        if out.contains(&id) {
            break;
        }
        out.push(id);
        match sys::open_path(fd.as_raw_fd(), c"..", libc::O_DIRECTORY) {
            Ok(up) => fd = up,
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_missing_read_grant_under_a_write_grant_is_made_there_and_nowhere_else() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("p/.glee")).unwrap();
        fs::create_dir_all(b.join("elsewhere")).unwrap();
        let read = vec![
            b.join("p/target/debug"),
            b.join("p/.glee/x"),
            b.join("q/x"),
            b.join("p"),
        ];
        let write = vec![b.join("p")];
        let keep = vec![b.join("p/.glee")];
        let m = missing_under(&read, &write, &keep);
        assert_eq!(
            m,
            vec![(b.join("p").as_path(), PathBuf::from("target/debug"))]
        );
        let follow = Links::Follow;
        assert!(make_beneath(&b.join("p"), Path::new("target/debug"), &follow).unwrap());
        assert!(b.join("p/target/debug").is_dir());
        // A link in the way is not followed: nothing is made beyond it.
        symlink(b.join("elsewhere"), b.join("p/out")).unwrap();
        assert!(!make_beneath(&b.join("p"), Path::new("out/sub"), &follow).unwrap());
        assert!(!b.join("elsewhere/sub").exists());
    }

    fn base() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let b = fs::canonicalize(t.path()).unwrap();
        (t, b)
    }

    #[test]
    fn a_plain_path_is_held_as_itself() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("a/data")).unwrap();
        let h = hold(&b.join("a/data"), &Links::Checked { root: None }).unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].real, b.join("a/data"));
        assert_eq!(h[0].id.kind, Kind::Dir);
        assert!(hold(&b.join("nope"), &Links::Follow).unwrap().is_empty());
    }

    #[test]
    fn a_checked_path_that_became_a_link_is_refused() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("a")).unwrap();
        symlink("/etc", b.join("a/data")).unwrap();
        let e = hold(&b.join("a/data"), &Links::Checked { root: None }).unwrap_err();
        assert!(matches!(e, HoldError::Link { .. }), "{e}");
        // A link on the way too.
        fs::create_dir_all(b.join("real/x")).unwrap();
        symlink(b.join("real"), b.join("via")).unwrap();
        let e = hold(&b.join("via/x"), &Links::Checked { root: None }).unwrap_err();
        assert!(matches!(e, HoldError::Link { .. }), "{e}");
        // ...unless it is the project root's own spelling.
        let h = hold(
            &b.join("via/x"),
            &Links::Checked {
                root: Some(b.join("via")),
            },
        )
        .unwrap();
        assert_eq!(h[0].real, b.join("real/x"));
        assert_eq!(h[0].path, b.join("via/x"));
        // Below the root, still refused.
        symlink("/etc", b.join("real/x/in")).unwrap();
        assert!(hold(
            &b.join("via/x/in/passwd"),
            &Links::Checked {
                root: Some(b.join("via")),
            },
        )
        .is_err());
    }

    #[test]
    fn followed_links_are_listed_with_their_targets() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("real")).unwrap();
        symlink("real", b.join("l")).unwrap();
        let h = hold(&b.join("l"), &Links::Follow).unwrap();
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(h[0].id.kind, Kind::Link);
        assert_eq!(h[0].target.as_deref(), Some(Path::new("real")));
        assert_eq!(h[1].real, b.join("real"));
        assert_eq!(h[1].id.kind, Kind::Dir);
    }

    #[test]
    fn the_walk_without_openat2_decides_as_openat2_does() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("real/x")).unwrap();
        symlink(b.join("real"), b.join("via")).unwrap();
        symlink("/etc", b.join("real/x/in")).unwrap();
        let checked = Links::Checked { root: None };
        let plain = walk_components(&b.join("real/x"), &checked)
            .unwrap()
            .unwrap();
        assert_eq!(plain.1, b.join("real/x"));
        assert!(walk_components(&b.join("nope/x"), &checked)
            .unwrap()
            .is_none());
        // A link on the way: refused when checked, followed otherwise.
        assert!(matches!(
            walk_components(&b.join("via/x"), &checked),
            Err(HoldError::Link { .. })
        ));
        let (_, real) = walk_components(&b.join("via/x"), &Links::Follow)
            .unwrap()
            .unwrap();
        assert_eq!(real, b.join("real/x"));
        // ...within the project root's own spelling only.
        let rooted = Links::Checked {
            root: Some(b.join("via")),
        };
        let (_, real) = walk_components(&b.join("via/x"), &rooted).unwrap().unwrap();
        assert_eq!(real, b.join("real/x"));
        assert!(walk_components(&b.join("via/x/in/passwd"), &rooted).is_err());
        // A trailing link is returned itself, never followed.
        let (fd, _) = walk_components(&b.join("real/x/in"), &checked)
            .unwrap()
            .unwrap();
        assert_eq!(Id::of(fd.as_raw_fd()).unwrap().kind, Kind::Link);
    }

    #[test]
    fn ancestors_are_found_by_identity() {
        let (_t, b) = base();
        fs::create_dir_all(b.join("s/state")).unwrap();
        let up = ancestors(&b.join("s/state"));
        let grant = hold(&b.join("s"), &Links::Follow).unwrap();
        assert!(grant[0].covers(&up));
        fs::create_dir_all(b.join("other")).unwrap();
        let other = hold(&b.join("other"), &Links::Follow).unwrap();
        assert!(!other[0].covers(&up));
        // A link to an ancestor is the ancestor.
        symlink(b.join("s"), b.join("alias")).unwrap();
        let alias = hold(&b.join("alias"), &Links::Follow).unwrap();
        assert!(alias.last().unwrap().covers(&up));
    }
}
