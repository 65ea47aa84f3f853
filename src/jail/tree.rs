//! The jail's filesystem view: a root built for each call, holding only
//! what the call is granted.
//!
//! [`Tree::build`] decides, without privileges, what the child's root
//! contains: every granted path bound at its own path (read-only unless an
//! `fs.write` grant covers it), symbolic links among the grants recreated
//! as links, the *protected* paths (the project's control surface: `.glee/`,
//! `tools.json`, `.git/`, the files tools run) bound again read-only where
//! a write grant would otherwise cover them (a protected link is bound
//! onto itself, as a link, and its target protected), and empty directories where
//! the working directory needs one; inside a write grant, every directory
//! between the grant and a protected path is bound onto itself (pinned: a
//! mountpoint cannot be renamed or removed, so a project under a writable
//! home cannot be moved away and replaced). Nothing else exists: an ungranted path
//! is `ENOENT` for `stat`, `open`, `chmod`, `inotify_add_watch` alike, and
//! a read-only bind refuses every change, metadata included (`EROFS`),
//! whatever the uid. [`Tree::mount_ops`] turns it into [`MountOps`]: C strings and
//! a flat list of operations prepared before `clone`, which the child
//! carries out with single system calls (nothing allocates between clone
//! and exec). See [`super::spawn`] for where in the child's sequence it
//! runs and `sys` for the calls.
//!
//! The child's sequence (bubblewrap's shape, one pivot):
//! 1. every mount private; a tmpfs on `/tmp` (the staging root);
//! 2. `pivot_root` into it, the host's root kept at [`OLD_ROOT`];
//! 3. the plan's operations: directories and empty files as mountpoints,
//!    links, bind mounts from `OLD_ROOT/<path>` to `<path>` (recursive),
//!    then `mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)` on every
//!    read-only one (only adds flags, so the flags a user namespace locks
//!    on the source — nosuid, nodev, noexec — are kept); then the
//!    private home: a tmpfs at [`HOME`] holding the spec's files
//!    ([`home_ops`]);
//! 4. the jail's own `/proc`, a minimal `/dev` (the device nodes of the
//!    baseline: null, zero, full, random, urandom — bound one by one, no
//!    other host device, each read-only: writing to a device needs no
//!    writable mount, and a root jail must not chmod, chown or touch the
//!    host's `/dev/null`), links `/dev/fd`, `/dev/std{in,out,err}`, and
//!    the call's private `/dev/shm` (a tmpfs, [`shm_ops`]);
//! 5. the host's root detached, the staging root made read-only.
//!
//! The tree is decided per call, before `clone`: which grants and
//! protected paths exist is read then, so a path created since an earlier
//! call is never missed (a cached plan could leave a new protected file
//! writable). Deciding costs a few `lstat`s per grant.
//!
//! Landlock stays on top, with the same rules, as a second independent
//! layer. [`metadata_guard`] decides what covers metadata calls where no
//! mount namespace can be made.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fs::FsAccess;
use super::hold::{self, clean, Held, Id, Kind, Links};

/// Where the host's root is kept while the tree is built (removed before
/// the tool starts; no grant may name it).
pub const OLD_ROOT: &str = "/.glovebox-old-root";

/// The staging mountpoint (a tmpfs is mounted there, then becomes `/`).
pub const STAGE: &str = "/tmp";

/// The private `HOME` (and `TMPDIR`) of a jail with a tree: a tmpfs of its
/// own mounted there by the child ([`home_ops`]), so nothing is made or
/// left on the host. A host path of the same name is never bound (the
/// home stands there).
pub const HOME: &str = "/.glovebox-home";

/// Device nodes a jail may have, bound from the host one by one.
pub const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Files of the jail's own `/proc` covered with `/dev/null` (what
/// container runtimes mask): kernel memory, logs, addresses, slab and
/// page-table statistics, timers, the key rings and the SysRq trigger.
/// Most are root-only on the host, so a root jail would read them; none
/// is something a tool needs.
pub const PROC_MASKED: [&std::ffi::CStr; 20] = [
    c"/proc/kcore",
    c"/proc/kmsg",
    c"/proc/kallsyms",
    c"/proc/slabinfo",
    c"/proc/kpagecount",
    c"/proc/kpageflags",
    c"/proc/kpagecgroup",
    c"/proc/timer_list",
    c"/proc/timer_stats",
    c"/proc/vmallocinfo",
    c"/proc/pagetypeinfo",
    c"/proc/sched_debug",
    c"/proc/latency_stats",
    c"/proc/keys",
    c"/proc/key-users",
    c"/proc/iomem",
    c"/proc/ioports",
    c"/proc/mtrr",
    c"/proc/modules",
    c"/proc/sysrq-trigger",
];

/// Directories of the jail's own `/proc` covered with an empty read-only
/// tmpfs (hardware and firmware interfaces).
pub const PROC_HIDDEN_DIRS: [&std::ffi::CStr; 3] = [c"/proc/acpi", c"/proc/asound", c"/proc/scsi"];

/// Directories of the jail's own `/proc` bound read-only over themselves:
/// the kernel's settings (`/proc/sys`: a root jail must never change the
/// host's `kernel.domainname`, whatever other layer the kernel lacks) and
/// bus/interrupt/filesystem tunables.
pub const PROC_READ_ONLY: [&std::ffi::CStr; 4] =
    [c"/proc/sys", c"/proc/bus", c"/proc/fs", c"/proc/irq"];

/// Where POSIX shared memory and named semaphores live (`shm_open`,
/// `sem_open`: glibc names files there). A jail gets a private, empty one
/// per call ([`shm_ops`]), never the host's.
pub const SHM: &str = "/dev/shm";

/// Errors deciding the tree.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A path cannot be put in a tree.
    #[error("{path:?} cannot be granted: {why}")]
    Path { path: PathBuf, why: &'static str },
    /// A path could not be held, or changed after it was checked.
    #[error(transparent)]
    Hold(hold::HoldError),
}

/// What a node of the tree is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    /// A directory bound from the host (with everything under it).
    Dir,
    /// A file (or device node) bound from the host.
    File,
    /// A symbolic link, recreated with this target.
    Link { target: PathBuf },
    /// An empty directory of the tree itself (a working directory that
    /// is not granted).
    Empty,
    /// A directory of a write grant that holds a protected path, bound
    /// onto itself (writable, as the grant): a mountpoint cannot be renamed
    /// or removed, so the protected path cannot be moved away with it and
    /// replaced by a planted one at the same path.
    Pin,
}

/// One entry of the tree, at the same path as on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Where it appears in the jail.
    pub path: PathBuf,
    /// Where it comes from on the host (the same path: the tree mirrors
    /// the host's layout).
    pub source: PathBuf,
    /// What it is.
    pub node: Node,
    /// Writable (an `fs.write` grant covers it and no protected path does).
    pub writable: bool,
    /// A protected path, bound again read-only inside a write grant.
    pub protected: bool,
    /// The object the source was resolved to ([`super::hold`]): the child
    /// binds the source only when it is still that object.
    #[serde(skip)]
    pub id: Option<Id>,
}

/// The tree one call sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tree {
    /// Entries in the order they are made (parents before children,
    /// protected rebinds last).
    pub entries: Vec<Entry>,
}

impl Tree {
    /// Whether the call's private `/dev/shm` ([`shm_ops`]) can be mounted:
    /// no grant lies under [`SHM`]. One that does (a project kept in
    /// the host's `/dev/shm`) is shown as granted instead, and the jail
    /// has no private one: a tmpfs mounted over the grant would hide it,
    /// and its Landlock rule (writable) would cover the grant too.
    pub fn private_shm(&self) -> bool {
        !self.entries.iter().any(|e| in_host_shm(&e.path))
    }
}

/// A path strictly under [`SHM`]: a directory or file kept in the host's
/// `/dev/shm`, shown when granted. `/dev/shm` itself, where every process
/// of the host keeps its POSIX shared memory and semaphores, never is.
fn in_host_shm(p: &Path) -> bool {
    p.starts_with(SHM) && p != Path::new(SHM)
}

/// How metadata calls (chmod, chown, utimes, xattrs, inotify, fanotify)
/// are kept off what a jail may not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataGuard {
    /// The constructed tree: ungranted paths do not exist, read-only binds
    /// refuse every change (`EROFS`); write grants allow them.
    Tree,
    /// No mount namespace: seccomp hands the family to the supervisor,
    /// which performs a change only inside write grants and outside the
    /// protected paths (`super::metadata`); watches are refused.
    Seccomp,
}

/// Which mechanism covers metadata calls: the tree when the jail gets a
/// mount namespace, else the supervisor through seccomp user notification.
pub fn metadata_guard(mount_namespace: bool) -> MetadataGuard {
    if mount_namespace {
        MetadataGuard::Tree
    } else {
        MetadataGuard::Seccomp
    }
}

fn covers(outer: &Path, inner: &Path) -> bool {
    inner.starts_with(outer)
}

/// A grant as the builder sees it.
struct Grant {
    path: PathBuf,
    source: PathBuf,
    node: Node,
    write: bool,
    id: Option<Id>,
}

/// The grants of one call, each held once ([`super::hold`]): what the
/// tree, the Landlock rules and the metadata supervisor all use.
#[derive(Debug, Default)]
pub struct HeldAccess {
    /// Read-only data paths.
    pub read_only: Vec<Held>,
    /// Read and execute.
    pub read: Vec<Held>,
    /// Read and execute (kept apart for `explain`).
    pub exec: Vec<Held>,
    /// Read and write.
    pub write: Vec<Held>,
}

impl HeldAccess {
    /// Holds every path of `access` as `links` says; paths that do not
    /// exist are left out (there is nothing to grant), `/` stands for each
    /// of its entries.
    pub fn hold(access: &FsAccess, links: &Links) -> Result<HeldAccess, TreeError> {
        let list = |paths: &[PathBuf]| -> Result<Vec<Held>, TreeError> {
            let mut out = Vec::new();
            for p in paths {
                hold_grant(p, links, &mut out)?;
            }
            Ok(out)
        };
        Ok(HeldAccess {
            read_only: list(&access.read_only)?,
            read: list(&access.read)?,
            exec: list(&access.exec)?,
            write: list(&access.write)?,
        })
    }

    /// Other handles on the same objects.
    pub fn try_clone(&self) -> std::io::Result<HeldAccess> {
        let list = |l: &[Held]| {
            l.iter()
                .map(Held::try_clone)
                .collect::<std::io::Result<Vec<_>>>()
        };
        Ok(HeldAccess {
            read_only: list(&self.read_only)?,
            read: list(&self.read)?,
            exec: list(&self.exec)?,
            write: list(&self.write)?,
        })
    }

    /// Adds `other`'s holds.
    pub fn extend(&mut self, other: HeldAccess) {
        self.read_only.extend(other.read_only);
        self.read.extend(other.read);
        self.exec.extend(other.exec);
        self.write.extend(other.write);
    }

    /// Every hold with whether it is a write grant.
    pub fn all(&self) -> impl Iterator<Item = (&Held, bool)> {
        self.read_only
            .iter()
            .chain(&self.read)
            .chain(&self.exec)
            .map(|h| (h, false))
            .chain(self.write.iter().map(|h| (h, true)))
    }
}

/// Holds the grant `p` into `out`: `/` as each of its entries (the
/// jail's own root, `/proc` and `/dev` stay the jail's).
fn hold_grant(p: &Path, links: &Links, out: &mut Vec<Held>) -> Result<(), TreeError> {
    if clean(p).as_deref() == Some(Path::new("/")) {
        let Ok(dir) = std::fs::read_dir("/") else {
            return Ok(());
        };
        for e in dir.flatten() {
            let entry = Path::new("/").join(e.file_name());
            if entry == Path::new(HOME) || entry == Path::new(OLD_ROOT) {
                continue;
            }
            out.extend(hold::hold(&entry, &Links::Follow)?);
        }
        return Ok(());
    }
    out.extend(hold::hold(p, links)?);
    Ok(())
}

impl From<hold::HoldError> for TreeError {
    fn from(e: hold::HoldError) -> TreeError {
        TreeError::Hold(e)
    }
}

impl Tree {
    /// [`Tree::from_held`] with every path held now, links followed (for
    /// tests and `explain`, which run nothing).
    pub fn build(
        access: &FsAccess,
        protected: &[PathBuf],
        empty_dirs: &[PathBuf],
    ) -> Result<Tree, TreeError> {
        let held = HeldAccess::hold(access, &Links::Follow)?;
        let mut prot = Vec::new();
        for p in protected {
            prot.extend(hold::hold(p, &Links::Follow)?);
        }
        Ok(Tree::from_held(&held, &prot, empty_dirs))
    }

    /// Decides the tree for the held grants `access` (baseline and grants
    /// merged; the private HOME is a tmpfs of its own, [`home_ops`]), with
    /// the held `protected` paths read-only wherever a write grant covers
    /// them and `empty_dirs` (the working directory) present even when not
    /// granted. Every node comes from a hold: nothing is looked up by name
    /// here, and every bind carries the identity the child checks.
    pub fn from_held(access: &HeldAccess, protected: &[Held], empty_dirs: &[PathBuf]) -> Tree {
        let mut grants: Vec<Grant> = access
            .all()
            .filter(|(h, _)| !h.real.starts_with("/proc"))
            .map(|(h, write)| Grant {
                path: h.path.clone(),
                source: h.real.clone(),
                node: match (h.id.kind, &h.target) {
                    (Kind::Link, Some(t)) => Node::Link { target: t.clone() },
                    (Kind::Dir, _) => Node::Dir,
                    _ => Node::File,
                },
                write,
                id: Some(h.id),
            })
            .collect();
        let protected_paths: Vec<PathBuf> = protected
            .iter()
            .flat_map(|h| [h.path.clone(), h.real.clone()])
            .collect();
        let write_paths: Vec<PathBuf> = grants
            .iter()
            .filter(|g| g.write && !matches!(g.node, Node::Link { .. }))
            .map(|g| g.path.clone())
            .collect();
        let writable = |p: &Path| {
            write_paths.iter().any(|w| covers(w, p))
                && !protected_paths.iter().any(|x| covers(x, p))
        };
        // One entry per path; the writable one wins.
        grants.sort_by(|a, b| a.path.cmp(&b.path).then(b.write.cmp(&a.write)));
        grants.dedup_by(|b, a| a.path == b.path);

        let mut entries: Vec<Entry> = Vec::new();
        for g in grants {
            let w = writable(&g.path);
            if let Node::Link { .. } = g.node {
                entries.push(Entry {
                    path: g.path,
                    source: g.source,
                    node: g.node,
                    writable: false,
                    protected: false,
                    id: g.id,
                });
                continue;
            }
            // Already there with the same access through a directory bound
            // above it (under a protected path everything is read-only).
            let inside = entries.iter().rev().find(|e| {
                matches!(e.node, Node::Dir) && covers(&e.path, &g.path) && e.path != g.path
            });
            if let Some(outer) = inside {
                if outer.writable == w {
                    continue;
                }
                if !w && outer.writable {
                    // A read grant inside a write grant: writable wins.
                    continue;
                }
            }
            entries.push(Entry {
                path: g.path,
                source: g.source,
                node: g.node,
                writable: w,
                protected: false,
                id: g.id,
            });
        }
        // Protected paths inside a writable bind: bound again, read-only,
        // where the jail shows them. A protected path given in its
        // resolved form is also found under a writable entry reached
        // through a link (a project under a symlinked directory).
        let real_writable: Vec<(PathBuf, PathBuf)> = entries
            .iter()
            .filter(|e| e.writable && e.node == Node::Dir && e.source != e.path)
            .map(|e| (e.source.clone(), e.path.clone()))
            .collect();
        let mut prot: Vec<(PathBuf, &Held)> = Vec::new();
        for h in protected {
            prot.push((h.path.clone(), h));
            for (real, shown) in &real_writable {
                if let Ok(rest) = h.real.strip_prefix(real) {
                    prot.push((shown.join(rest), h));
                }
            }
        }
        prot.sort_by(|a, b| a.0.cmp(&b.0));
        prot.dedup_by(|b, a| a.0 == b.0);
        let granted = entries.len();
        for (shown, h) in prot {
            match (&h.target, h.id.kind) {
                // The link itself is bound onto itself (a mountpoint cannot
                // be removed or replaced); its target is held (and
                // protected) as the next entry of `protected`.
                (Some(target), Kind::Link) => {
                    push_protected_link(&mut entries, shown, h, target.clone())
                }
                (_, Kind::Link) => {}
                (_, kind) => push_protected(&mut entries, shown, h, kind == Kind::Dir),
            }
        }
        let pins = pins(&entries[..granted], &entries[granted..]);
        entries.splice(granted..granted, pins);
        for d in empty_dirs {
            let Some(d) = clean(d) else { continue };
            if d == Path::new("/") {
                continue;
            }
            let present = entries
                .iter()
                .any(|e| covers(&e.path, &d) && !matches!(e.node, Node::Link { .. }));
            if !present {
                entries.push(Entry {
                    path: d.clone(),
                    source: d,
                    node: Node::Empty,
                    writable: false,
                    protected: false,
                    id: None,
                });
            }
        }
        Tree { entries }
    }

    /// Paths the tool may change.
    pub fn writable(&self) -> impl Iterator<Item = &Path> {
        self.entries
            .iter()
            .filter(|e| e.writable && e.node != Node::Pin)
            .map(|e| e.path.as_path())
    }

    /// Directories inside write grants that cannot be renamed or removed
    /// (they hold protected paths).
    pub fn pinned(&self) -> impl Iterator<Item = &Path> {
        self.entries
            .iter()
            .filter(|e| e.node == Node::Pin)
            .map(|e| e.path.as_path())
    }

    /// Paths bound read-only (protected ones included).
    pub fn read_only(&self) -> impl Iterator<Item = &Path> {
        self.entries
            .iter()
            .filter(|e| !e.writable && matches!(e.node, Node::Dir | Node::File))
            .map(|e| e.path.as_path())
    }

    /// Protected paths bound again read-only inside write grants.
    pub fn protected(&self) -> impl Iterator<Item = &Path> {
        self.entries
            .iter()
            .filter(|e| e.protected)
            .map(|e| e.path.as_path())
    }

    /// True when `path` is in the tree and writable there.
    pub fn is_writable(&self, path: &Path) -> bool {
        let Some(p) = clean(path) else { return false };
        // The deepest mount covering the path decides.
        self.entries
            .iter()
            .filter(|e| matches!(e.node, Node::Dir | Node::File) && covers(&e.path, &p))
            .max_by_key(|e| (e.path.components().count(), e.protected))
            .is_some_and(|e| e.writable)
    }

    /// Compiles the tree into operations on prepared C strings.
    pub fn mount_ops(&self) -> Result<MountOps, TreeError> {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes()).map_err(|_| TreeError::Path {
                path: p.to_path_buf(),
                why: "it contains a NUL byte",
            })
        };
        let old = Path::new(OLD_ROOT);
        let mut ops = Vec::new();
        // Directories the tree itself holds (so no mkdir is repeated).
        let mut made: Vec<PathBuf> = vec![PathBuf::from("/")];
        let mut mounted: Vec<&Path> = Vec::new();
        let mut mkdirs =
            |ops: &mut Vec<Op>, dir: &Path, mounted: &[&Path]| -> Result<(), TreeError> {
                let mut cur = PathBuf::from("/");
                for comp in dir.components().skip(1) {
                    cur.push(comp);
                    if mounted.iter().any(|m| covers(m, &cur)) {
                        // Host content from here on: it exists.
                        return Ok(());
                    }
                    if !made.contains(&cur) {
                        ops.push(Op::Mkdir(c(&cur)?));
                        made.push(cur.clone());
                    }
                }
                Ok(())
            };
        let dev = Path::new("/dev");
        let mut devices_done = false;
        for e in &self.entries {
            if e.path.starts_with(old) || e.path == Path::new("/") {
                return Err(TreeError::Path {
                    path: e.path.clone(),
                    why: "it is the jail's root or its staging directory",
                });
            }
            if e.path.starts_with("/proc") || e.path.starts_with(HOME) {
                // The jail's own /proc and private home stand there.
                continue;
            }
            if e.path.starts_with(dev) && !e.protected && !in_host_shm(&e.path) {
                // Only the device nodes of DEVICES, each bound alone (a
                // grant in the host's /dev/shm is shown as granted: see
                // `Tree::private_shm`).
                if !devices_done {
                    devices_done = true;
                    mkdirs(&mut ops, dev, &mounted)?;
                    ops.push(Op::Symlink {
                        target: c(Path::new("/proc/self/fd"))?,
                        at: c(Path::new("/dev/fd"))?,
                    });
                    for (i, n) in ["stdin", "stdout", "stderr"].iter().enumerate() {
                        ops.push(Op::Symlink {
                            target: c(&Path::new("/proc/self/fd").join(i.to_string()))?,
                            at: c(&dev.join(n))?,
                        });
                    }
                }
                if !DEVICES.iter().any(|d| Path::new(d) == e.path) {
                    continue;
                }
            }
            let parent = e.path.parent().unwrap_or(Path::new("/"));
            let held = |e: &Entry| {
                e.id.ok_or_else(|| TreeError::Path {
                    path: e.path.clone(),
                    why: "it was not resolved before the jail was planned",
                })
            };
            if let (Node::Link { .. }, true) = (&e.node, e.protected) {
                // The host's link, inside a writable bind: bound onto
                // itself.
                let src = old.join(e.source.strip_prefix("/").unwrap_or(&e.source));
                let id = held(e)?;
                ops.push(Op::BindLink {
                    src: c(&src)?,
                    dst: c(&e.path)?,
                    dev: id.dev,
                    ino: id.ino,
                    check_dst: true,
                });
                continue;
            }
            match &e.node {
                Node::Link { target } => {
                    mkdirs(&mut ops, parent, &mounted)?;
                    ops.push(Op::Symlink {
                        target: c(target)?,
                        at: c(&e.path)?,
                    });
                    continue;
                }
                Node::Empty => {
                    mkdirs(&mut ops, &e.path, &mounted)?;
                    continue;
                }
                Node::Dir | Node::Pin => mkdirs(&mut ops, &e.path, &mounted)?,
                Node::File => {
                    let host = mounted.iter().any(|m| covers(m, &e.path));
                    mkdirs(&mut ops, parent, &mounted)?;
                    if !host {
                        ops.push(Op::Touch(c(&e.path)?));
                    }
                }
            }
            let src = old.join(e.source.strip_prefix("/").unwrap_or(&e.source));
            let id = held(e)?;
            ops.push(Op::Bind {
                src: c(&src)?,
                dst: c(&e.path)?,
                dev: id.dev,
                ino: id.ino,
                check_dst: mounted.iter().any(|m| covers(m, &e.path)),
                may_vanish: !e.protected,
            });
            // A device node is bound read-only even when written to (a
            // write to a device needs no writable mount): its mode, owner
            // and times are the host's, shared by every process there.
            let device = DEVICES.iter().any(|d| Path::new(d) == e.path);
            if !e.writable || device {
                ops.push(Op::ReadOnly(c(&e.path)?));
            }
            mounted.push(&e.path);
        }
        // The directories the tree made only to reach its mountpoints
        // (`/`, `/tmp` on the way to a grant below it…) can be passed
        // through but not listed, as Landlock would have it: without
        // Landlock they would show the names of other grants' parents.
        // An empty working directory and `/dev` stay listable.
        let listable = |d: &Path| {
            d == dev
                || mounted.contains(&d)
                || self
                    .entries
                    .iter()
                    .any(|e| e.node == Node::Empty && e.path == d)
        };
        let sealed = made
            .iter()
            .filter(|d| !listable(d))
            .map(|d| c(d))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MountOps { ops, sealed })
    }
}

/// The writable directory entry covering `p` most closely, if the
/// closest one is writable and no protected entry covers `p` already.
fn inside_writable(entries: &[Entry], p: &Path) -> bool {
    let writable = entries
        .iter()
        .filter(|e| matches!(e.node, Node::Dir) && covers(&e.path, p))
        .max_by_key(|e| e.path.components().count())
        .is_some_and(|e| e.writable);
    writable && !entries.iter().any(|e| e.protected && covers(&e.path, p))
}

/// Adds a read-only rebind of the held `h`, shown at `p`, when a writable
/// entry covers it (entries inside protected paths are already
/// read-only; a writable grant strictly inside `p` was made read-only by
/// the builder already).
fn push_protected(entries: &mut Vec<Entry>, p: PathBuf, h: &Held, is_dir: bool) {
    if !inside_writable(entries, &p) {
        return;
    }
    entries.push(Entry {
        path: p,
        source: h.real.clone(),
        node: if is_dir { Node::Dir } else { Node::File },
        writable: false,
        protected: true,
        id: Some(h.id),
    });
}

/// Adds the protected link `h`, shown at `p`, (bound onto itself) when a
/// writable entry covers it.
fn push_protected_link(entries: &mut Vec<Entry>, p: PathBuf, h: &Held, target: PathBuf) {
    if !inside_writable(entries, &p) {
        return;
    }
    entries.push(Entry {
        path: p,
        source: h.real.clone(),
        node: Node::Link { target },
        writable: false,
        protected: true,
        id: Some(h.id),
    });
}

/// The directories to pin ([`Node::Pin`]) for `protected` rebinds over
/// the `granted` entries: every directory strictly between a protected
/// path and the writable bind that covers it (the bind itself is a
/// mountpoint already), parents first. Renaming one of them would move
/// the protected path away and leave its name free for a planted one.
/// Each is held (no link followed: a mount on a link would land on its
/// target), so the child pins the directory that was found.
fn pins(granted: &[Entry], protected: &[Entry]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for p in protected {
        let Some(bind) = granted
            .iter()
            .filter(|e| e.node == Node::Dir && e.writable && covers(&e.path, &p.path))
            .max_by_key(|e| e.path.components().count())
        else {
            continue;
        };
        let mut dir = p.path.parent();
        while let Some(d) = dir {
            if d == bind.path
                || !d.starts_with(&bind.path)
                || protected.iter().any(|q| covers(&q.path, d))
            {
                // Up to the bind, never inside a protected path (read-only
                // whole already).
                break;
            }
            if !out.iter().any(|o| o.path == d) {
                let source = d
                    .strip_prefix(&bind.path)
                    .map(|rest| bind.source.join(rest))
                    .unwrap_or_else(|_| d.to_path_buf());
                let held = hold::hold(&source, &Links::Checked { root: None })
                    .ok()
                    .and_then(|h| h.into_iter().next())
                    .filter(|h| h.id.kind == Kind::Dir);
                if let Some(h) = held {
                    out.push(Entry {
                        path: d.to_path_buf(),
                        source: h.real,
                        node: Node::Pin,
                        writable: true,
                        protected: false,
                        id: Some(h.id),
                    });
                }
            }
            dir = d.parent();
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// One step of building the tree in the child (paths absolute, in the
/// staging root; bind sources under [`OLD_ROOT`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `mkdir(path, 0755)`; an existing one is fine.
    Mkdir(CString),
    /// Creates an empty file as a mountpoint; an existing one is fine.
    Touch(CString),
    /// `symlink(target, at)`; an existing one is fine.
    Symlink { target: CString, at: CString },
    /// A recursive bind mount of `src`, only while it is the object
    /// `dev`/`ino` (else the call fails: it changed after it was held).
    Bind {
        src: CString,
        dst: CString,
        dev: u64,
        ino: u64,
        /// `dst` lies in host content bound earlier (a grant inside
        /// another): opened and checked too. Otherwise it is a node the
        /// tree made on its own tmpfs, which nothing else can change.
        check_dst: bool,
        /// A grant (not a protected path): removed since it was held, it
        /// is left out as one that did not exist then would be. A
        /// protected path removed since fails the call: what a tool could
        /// plant in its place must stay out of reach.
        may_vanish: bool,
    },
    /// Makes the mount at this path, and every mount under it, read-only.
    ReadOnly(CString),
    /// Mounts a fresh tmpfs (`nosuid`, `nodev`) with these options.
    Tmpfs { at: CString, options: CString },
    /// Creates a new file (mode 0644) holding `contents`.
    File { path: CString, contents: Vec<u8> },
    /// Binds a symbolic link itself (not its target) onto the same link,
    /// only while it is the link `dev`/`ino`: a protected link cannot be
    /// removed or replaced.
    BindLink {
        src: CString,
        dst: CString,
        dev: u64,
        ino: u64,
        /// As [`Op::Bind`]'s (always: a protected link is in host content).
        check_dst: bool,
    },
}

/// The operations that give a jail its private home at [`HOME`]: a tmpfs
/// of at most `size` bytes (the call's memory limit: its pages are
/// charged to the call's memory cgroup anyway), mode 0700, owned by the
/// jail's user, holding `files` (name, contents). Run after the grants are
/// bound, before the root is made read-only.
pub fn home_ops(size: u64, files: &[(&str, &[u8])]) -> Result<Vec<Op>, TreeError> {
    let home = Path::new(HOME);
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| TreeError::Path {
            path: p.to_path_buf(),
            why: "it contains a NUL byte",
        })
    };
    let options = CString::new(format!("mode=0700,size={}", size.max(1 << 20))).map_err(|_| {
        TreeError::Path {
            path: home.to_path_buf(),
            why: "its mount options contain a NUL byte",
        }
    })?;
    let mut ops = vec![
        Op::Mkdir(c(home)?),
        Op::Tmpfs {
            at: c(home)?,
            options,
        },
    ];
    for (name, contents) in files {
        if name.is_empty() || name.contains('/') || *name == "." || *name == ".." {
            return Err(TreeError::Path {
                path: home.join(name),
                why: "a home file needs a plain file name",
            });
        }
        ops.push(Op::File {
            path: c(&home.join(name))?,
            contents: contents.to_vec(),
        });
    }
    Ok(ops)
}

/// The operations that give a jail its private [`SHM`]: a tmpfs of at most
/// `size` bytes (charged to the call's memory cgroup, like the home), mode
/// 0700, owned by the jail's user. Python's `multiprocessing` locks, queues
/// and pools and `shared_memory` need it; the host's `/dev/shm`, shared
/// with every process there, stays out. Run after the grants are bound.
pub fn shm_ops(size: u64) -> Result<Vec<Op>, TreeError> {
    let shm = Path::new(SHM);
    let err = |why| TreeError::Path {
        path: shm.to_path_buf(),
        why,
    };
    let at = CString::new(SHM).map_err(|_| err("it contains a NUL byte"))?;
    let options = CString::new(format!("mode=0700,size={}", size.max(1 << 20)))
        .map_err(|_| err("its mount options contain a NUL byte"))?;
    Ok(vec![Op::Mkdir(at.clone()), Op::Tmpfs { at, options }])
}

/// The prepared operations of one tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountOps {
    /// In order.
    pub ops: Vec<Op>,
    /// Directories of the tree itself (never a mountpoint: the child checks
    /// each is on its staging tmpfs) made traversable only (mode 0111)
    /// once every operation is done (the home's and `/dev/shm`'s too).
    pub sealed: Vec<CString>,
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
