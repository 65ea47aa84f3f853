//! The file probes: reads and listings outside every grant (directly,
//! through `..`, a symbolic link and `/proc/self/root`), writes and
//! creations outside `fs.write`, metadata changes (`chmod`, times,
//! extended attributes) on granted read-only files, set-id files, the
//! project's control surface (another tool's directory, `.git/hooks`,
//! protected paths inside write grants) and glovebox's state directory.
//!
//! Targets are the canary file and directory (glovebox's own) and the
//! host's files as the policy leaves them: a file just outside a grant is
//! only read; a file in a read-only grant only opened for writing (nothing
//! written) or given the mode, times and attributes it already has, so
//! that a broken jail changes nothing of the user's but a `ctime`. What an
//! attack could create is a canary name, removed afterwards. An attempt is
//! planned only where this process itself could do it (file permissions
//! would refuse it otherwise, proving nothing of the jail).

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::battery::{how, refusal, Ctx, Plan};
use super::canary::{digest, DIGESTED};
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply};

/// How many grants (and files) each kind of attack is tried on at most.
const PER_KIND: usize = 3;

/// The extended attribute an attack sets.
const XATTR: &std::ffi::CStr = c"user.glovebox-prove";

// ---------------------------------------------------------------- plan

/// Plans the file probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    deny_by_default(ctx, plan);
    read_only(ctx, plan);
    control_surface(ctx, plan);
    state(ctx, plan);
}

/// The tool's own grants (read, write, its runtime), directories first.
fn grants(ctx: &Ctx<'_>) -> Vec<PathBuf> {
    let p = ctx.policy;
    let mut all: Vec<PathBuf> = p
        .read
        .iter()
        .chain(&p.write)
        .chain(&p.runtime)
        .cloned()
        .collect();
    all.sort_by_key(|g| !g.is_dir());
    all.dedup();
    all
}

/// Whether `path` is inside a write grant of the tool.
fn writable(ctx: &Ctx<'_>, path: &Path) -> bool {
    crate::jail::fs::covered(path, &ctx.policy.write)
}

/// Whether this process may write in the directory `dir` (so that only
/// the jail can refuse it).
fn may_write(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// A canary name in `dir` for attack `tag`.
fn canary_in(ctx: &Ctx<'_>, dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!(".glovebox-prove-{}-{tag}", ctx.nonce))
}

/// `to` reached from `from` through `..` (up to `/`, then down).
fn through_dotdot(from: &Path, to: &Path) -> PathBuf {
    let mut p = from.to_path_buf();
    for _ in from.components().skip(1) {
        p.push("..");
    }
    p.join(to.strip_prefix("/").unwrap_or(to))
}

/// The digest of `path`'s first bytes as the battery reports a read.
fn file_digest(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    Read::by_ref(&mut f)
        .take(DIGESTED as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(digest(&buf))
}

/// The digest of a listing as the battery reports it.
fn listing(names: &mut [String]) -> String {
    names.sort();
    format!("{}:{}", names.len(), digest(names.join("\n").as_bytes()))
}

fn host_listing(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    (!names.is_empty()).then(|| listing(&mut names))
}

/// Judges a read of a file whose content digest is `digest`.
fn read_judge(path: PathBuf, digest: String) -> super::battery::Judge {
    Box::new(move |r: &Reply, _: &_| {
        if r.ok && r.data == digest {
            Verdict::broken(format!("read the contents of {}", path.display()))
        } else if r.ok {
            Verdict::held("a different file is at that path in the jail (not the host's)")
        } else {
            Verdict::held(how(r.errno))
        }
    })
}

/// Judges a listing of a directory whose listing digest is `digest`.
fn list_judge(path: PathBuf, digest: String) -> super::battery::Judge {
    Box::new(move |r: &Reply, _: &_| {
        if r.ok && r.data == digest {
            Verdict::broken(format!("listed {}", path.display()))
        } else if r.ok {
            Verdict::held("a different directory is at that path in the jail")
        } else {
            Verdict::held(how(r.errno))
        }
    })
}

/// Judges a creation of `path`: broken when it exists afterwards (the
/// prover removes it) or the call worked.
fn created_judge(path: PathBuf) -> super::battery::Judge {
    Box::new(move |r: &Reply, _: &_| {
        if std::fs::symlink_metadata(&path).is_ok() {
            Verdict::broken(format!(
                "{} was created on the host (glovebox removed it)",
                path.display()
            ))
        } else {
            refusal(r)
        }
    })
}

/// A file's metadata as a change would show: mode and change time.
fn stamp(path: &Path) -> Option<(u32, i64, i64)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.mode(), m.ctime(), m.ctime_nsec()))
}

/// Judges a metadata change of `path` (stamped `before`): broken when
/// the call worked or the file's change time moved.
fn unchanged_judge(path: PathBuf, before: Option<(u32, i64, i64)>) -> super::battery::Judge {
    Box::new(move |r: &Reply, _: &_| {
        let after = stamp(&path);
        if r.ok {
            Verdict::broken(format!("the call worked on {}", path.display()))
        } else if before.is_some() && after != before {
            Verdict::broken(format!(
                "{} changed (its mode or ctime moved)",
                path.display()
            ))
        } else if matches!(r.errno, Some(libc::ENOTSUP)) {
            Verdict::not_applicable("this file system has no user extended attributes")
        } else {
            Verdict::held(how(r.errno))
        }
    })
}

/// Judges a set-id creation: broken when a file got a set-id bit.
fn setid_judge() -> super::battery::Judge {
    Box::new(|r: &Reply, _: &_| {
        let mode = u32::from_str_radix(&r.data, 8).unwrap_or(0);
        if r.ok && mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
            Verdict::broken(format!("made a file with mode {:o}", mode & 0o7777))
        } else if r.ok {
            Verdict::held(format!(
                "the file got mode {:o}: no set-id bit",
                mode & 0o7777
            ))
        } else {
            Verdict::held(how(r.errno))
        }
    })
}

/// A regular file outside every grant, next to `grant` (in its parent),
/// that this process can read, other than the battery's own program.
fn sibling_outside(ctx: &Ctx<'_>, grant: &Path) -> Option<PathBuf> {
    let parent = grant.parent()?;
    if ctx.policy.can_read(parent) {
        return None;
    }
    // The battery's own program is granted to it, whatever its place.
    let exe = std::fs::canonicalize(ctx.exe).unwrap_or_else(|_| ctx.exe.to_path_buf());
    std::fs::read_dir(parent)
        .ok()?
        .take(200)
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p != grant && !ctx.policy.can_read(p))
        .filter(|p| std::fs::canonicalize(p).map_or(true, |c| c != exe))
        .find(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
                && nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::R_OK).is_ok()
        })
}

/// A regular file in `grant` (itself when it is one) owned by this
/// process's user, outside every write grant, found in a bounded walk.
fn owned_file_in(ctx: &Ctx<'_>, grant: &Path) -> Option<PathBuf> {
    let owned = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.uid() == ctx.euid)
            && !writable(ctx, p)
    };
    if owned(grant) {
        return Some(grant.to_path_buf());
    }
    let mut queue = std::collections::VecDeque::from([grant.to_path_buf()]);
    let mut seen = 0;
    while let Some(dir) = queue.pop_front() {
        for e in std::fs::read_dir(&dir).ok()?.filter_map(|e| e.ok()) {
            seen += 1;
            if seen > 500 {
                return None;
            }
            let p = e.path();
            if owned(&p) {
                return Some(p);
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) && queue.len() < 64 {
                queue.push_back(p);
            }
        }
    }
    None
}

fn deny_by_default(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::DenyByDefault;
    plan.control(
        inv,
        format!("read {} (granted to the battery)", ctx.exe.display()),
        Action::Read {
            path: ctx.exe.to_path_buf(),
        },
    );
    let grants = grants(ctx);
    if let Some((file, dig)) = &ctx.canaries.file {
        let what = |how: &str| format!("read the canary file {} {how}", file.display());
        plan.attack(
            inv,
            what("(outside every grant)"),
            Action::Read { path: file.clone() },
            read_judge(file.clone(), dig.clone()),
        );
        plan.attack(
            inv,
            what("through a symbolic link made in HOME"),
            Action::ReadVia {
                link: PathBuf::from("~/glovebox-prove-link"),
                target: file.clone(),
            },
            read_judge(file.clone(), dig.clone()),
        );
        let via_proc = Path::new("/proc/self/root").join(file.strip_prefix("/").unwrap_or(file));
        plan.attack(
            inv,
            what("through /proc/self/root"),
            Action::Read { path: via_proc },
            read_judge(file.clone(), dig.clone()),
        );
        for g in grants.iter().filter(|g| g.is_dir()).take(PER_KIND) {
            plan.attack(
                inv,
                what(&format!("through .. from the grant {}", g.display())),
                Action::Read {
                    path: through_dotdot(g, file),
                },
                read_judge(file.clone(), dig.clone()),
            );
        }
        if let Some(dir) = file.parent() {
            if let Some(l) = host_listing(dir) {
                plan.attack(
                    inv,
                    format!("list the canary directory {}", dir.display()),
                    Action::List {
                        path: dir.to_path_buf(),
                    },
                    list_judge(dir.to_path_buf(), l),
                );
            }
        }
    } else {
        plan.skip(
            inv,
            "read a canary file outside every grant",
            "no directory outside the tool's grants could hold one",
        );
    }
    for g in grants.iter().take(PER_KIND) {
        if let Some(s) = sibling_outside(ctx, g) {
            if let Some(d) = file_digest(&s) {
                plan.attack(
                    inv,
                    format!("read {} (next to the grant {})", s.display(), g.display()),
                    Action::Read { path: s.clone() },
                    read_judge(s, d),
                );
            }
        }
    }
}

fn read_only(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::ReadOnly;
    plan.control(
        inv,
        "create a file in the private HOME".into(),
        Action::Create {
            path: PathBuf::from("~/glovebox-prove-control"),
        },
    );
    if let Some(scratch) = ctx.canaries.file.as_ref().and_then(|(f, _)| f.parent()) {
        let target = scratch.join("created");
        plan.attack(
            inv,
            format!("create {} (outside every grant)", target.display()),
            Action::Create {
                path: target.clone(),
            },
            created_judge(target.clone()),
        );
        plan.clean_up(target);
        let target = scratch.join("created-via-link");
        plan.attack(
            inv,
            format!(
                "create {} through a symbolic link made in HOME",
                target.display()
            ),
            Action::CreateVia {
                link: PathBuf::from("~/glovebox-prove-link2"),
                target: target.clone(),
            },
            created_judge(target.clone()),
        );
        plan.clean_up(target);
    }
    let grants = grants(ctx);
    for g in grants.iter().take(PER_KIND) {
        let Some(parent) = g.parent() else { continue };
        if writable(ctx, parent) || !may_write(parent) {
            continue;
        }
        let target = canary_in(ctx, parent, "outside");
        plan.attack(
            inv,
            format!(
                "create {} (next to the grant {})",
                target.display(),
                g.display()
            ),
            Action::Create {
                path: target.clone(),
            },
            created_judge(target.clone()),
        );
        plan.clean_up(target);
    }
    let read_only: Vec<&PathBuf> = ctx
        .policy
        .read
        .iter()
        .chain(&ctx.policy.runtime)
        .filter(|g| !writable(ctx, g))
        .take(PER_KIND)
        .collect();
    for g in &read_only {
        if g.is_dir() && may_write(g) {
            let target = canary_in(ctx, g, "ro");
            plan.attack(
                inv,
                format!("create {} (in the read-only grant)", target.display()),
                Action::Create {
                    path: target.clone(),
                },
                created_judge(target.clone()),
            );
            plan.clean_up(target);
        }
        let Some(f) = owned_file_in(ctx, g) else {
            continue;
        };
        let before = stamp(&f);
        let shown = f.display().to_string();
        plan.attack(
            inv,
            format!("open {shown} (read-only grant) for writing"),
            Action::OpenWrite { path: f.clone() },
            unchanged_judge(f.clone(), before),
        );
        plan.attack(
            inv,
            format!("chmod {shown} (read-only grant) to its own mode"),
            Action::ChmodSame { path: f.clone() },
            unchanged_judge(f.clone(), before),
        );
        plan.attack(
            inv,
            format!("set {shown}'s times (read-only grant) to their own values"),
            Action::UtimeSame { path: f.clone() },
            unchanged_judge(f.clone(), before),
        );
        let path = f.clone();
        plan.attack(
            inv,
            format!("set an extended attribute on {shown} (read-only grant)"),
            Action::SetXattr { path: f.clone() },
            Box::new(move |r, o| {
                let set = xattr_present(&path);
                if set {
                    let _ = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                        .map(|p| crate::jail::attempt::removexattr(&p, XATTR));
                }
                if set {
                    Verdict::broken(format!(
                        "{} got the attribute (glovebox removed it)",
                        path.display()
                    ))
                } else {
                    unchanged_judge(path.clone(), before)(r, o)
                }
            }),
        );
    }
    if read_only.is_empty() {
        plan.skip(
            inv,
            "change a read-only grant",
            "the tool has no read-only grant",
        );
    }
    // Set-id files: in a write grant (where glovebox sees the result) or
    // the private HOME.
    let setid_dir = ctx
        .policy
        .write
        .iter()
        .find(|w| w.is_dir() && !ctx.policy.protected.iter().any(|p| p == *w))
        .cloned();
    let target = match &setid_dir {
        Some(w) => canary_in(ctx, w, "setid"),
        None => PathBuf::from("~/glovebox-prove-setid"),
    };
    if setid_dir.is_some() {
        plan.clean_up(target.clone());
    }
    plan.attack(
        inv,
        format!(
            "create {} with the setuid and setgid bits",
            target.display()
        ),
        Action::CreateSetId { path: target },
        setid_judge(),
    );
    plan.attack(
        inv,
        "chmod a file of the private HOME setuid".into(),
        Action::ChmodSetId {
            path: PathBuf::from("~/glovebox-prove-setid2"),
        },
        setid_judge(),
    );
}

/// Whether `path` carries the attribute an attack sets.
fn xattr_present(path: &Path) -> bool {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .is_ok_and(|p| crate::jail::attempt::has_xattr(&p, XATTR))
}

fn control_surface(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::ControlSurface;
    plan.control(
        inv,
        "create a file in the private HOME".into(),
        Action::Create {
            path: PathBuf::from("~/glovebox-prove-control-surface"),
        },
    );
    let root = &ctx.project.root;
    let mut dirs: Vec<(PathBuf, String)> = Vec::new();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for p in ctx.policy.protected.iter().take(2 * PER_KIND) {
        let shown = format!("{} (protected inside a write grant)", p.display());
        if p.is_dir() {
            dirs.push((p.clone(), shown));
        } else if p.is_file() {
            files.push((p.clone(), shown));
        }
    }
    let hooks = root.join(".git/hooks");
    if hooks.is_dir() {
        dirs.push((hooks, ".git/hooks".into()));
    }
    let own = ctx.tool.file.parent().map(Path::to_path_buf);
    if let Some(d) = own.as_ref().filter(|d| d.starts_with(root.join(".glee"))) {
        dirs.push((d.clone(), "the tool's own directory".into()));
        files.push((ctx.tool.file.clone(), "the tool's own manifest".into()));
    }
    let other = ctx
        .project
        .tools
        .iter()
        .filter(|t| t.name != ctx.tool.name)
        .filter_map(|t| t.file.parent().map(Path::to_path_buf))
        .find(|d| d.starts_with(root.join(".glee/tools")) && Some(d) != own.as_ref());
    if let Some(d) = other {
        let shown = format!("another tool's directory {}", d.display());
        dirs.push((d, shown));
    }
    let mut planned = 0;
    for (dir, shown) in dirs {
        if !may_write(&dir) {
            continue;
        }
        let target = canary_in(ctx, &dir, "surface");
        plan.attack(
            inv,
            format!("create a file in {shown}"),
            Action::Create {
                path: target.clone(),
            },
            created_judge(target.clone()),
        );
        plan.clean_up(target);
        planned += 1;
    }
    for (f, shown) in files {
        if std::fs::symlink_metadata(&f).map_or(true, |m| m.uid() != ctx.euid) {
            continue;
        }
        let before = stamp(&f);
        plan.attack(
            inv,
            format!("open {shown} for writing"),
            Action::OpenWrite { path: f.clone() },
            unchanged_judge(f.clone(), before),
        );
        plan.attack(
            inv,
            format!("chmod {shown} to its own mode"),
            Action::ChmodSame { path: f.clone() },
            unchanged_judge(f, before),
        );
        planned += 1;
    }
    if planned == 0 {
        plan.skip(
            inv,
            "change the control surface",
            "no tool directory, .git/hooks or protected path this user could change",
        );
    }
}

fn state(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::State;
    let Some(dir) = ctx.state_dir.clone().filter(|d| d.is_dir()) else {
        plan.skip(
            inv,
            "reach the state directory",
            "there is no state directory yet",
        );
        return;
    };
    plan.control(
        inv,
        format!("read {} (granted to the battery)", ctx.exe.display()),
        Action::Read {
            path: ctx.exe.to_path_buf(),
        },
    );
    plan.control(
        inv,
        "create a file in the private HOME".into(),
        Action::Create {
            path: PathBuf::from("~/glovebox-prove-control-state"),
        },
    );
    if let Some(l) = host_listing(&dir) {
        plan.attack(
            inv,
            format!("list the state directory {}", dir.display()),
            Action::List { path: dir.clone() },
            list_judge(dir.clone(), l),
        );
    }
    let key = crate::state::key_path(&dir);
    if let Some(d) = file_digest(&key) {
        plan.attack(
            inv,
            format!("read the audit key {}", key.display()),
            Action::Read { path: key.clone() },
            read_judge(key, d),
        );
    }
    if may_write(&dir) {
        let target = canary_in(ctx, &dir, "state");
        plan.attack(
            inv,
            format!("create a file in the state directory {}", dir.display()),
            Action::Create {
                path: target.clone(),
            },
            created_judge(target.clone()),
        );
        plan.clean_up(target);
    }
}

// ---------------------------------------------------- in the jail

/// `path` with a leading `~/` taken from the jail's `HOME`.
pub fn expand(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/nonexistent"))
            .join(rest),
        Err(_) => path.to_path_buf(),
    }
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn failed(id: usize, e: &std::io::Error) -> Reply {
    Reply::failed(id, errno(e), "")
}

fn read(id: usize, path: &Path) -> Reply {
    let mut buf = Vec::new();
    match std::fs::File::open(path).and_then(|f| f.take(DIGESTED as u64).read_to_end(&mut buf)) {
        Ok(_) => Reply::ok(id, digest(&buf)),
        Err(e) => failed(id, &e),
    }
}

fn create(id: usize, path: &Path, mode: u32) -> Result<std::fs::File, Reply> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| failed(id, &e))
}

/// Tries a file action; `None` for another family's.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    Some(match action {
        Action::Read { path } => read(id, &expand(path)),
        Action::List { path } => match std::fs::read_dir(expand(path)) {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                Reply::ok(id, listing(&mut names))
            }
            Err(e) => failed(id, &e),
        },
        Action::Create { path } => match create(id, &expand(path), 0o600) {
            Ok(mut f) => {
                let _ = f.write_all(super::wire::PAYLOAD.as_bytes());
                Reply::ok(id, "")
            }
            Err(r) => r,
        },
        Action::OpenWrite { path } => {
            match std::fs::OpenOptions::new().write(true).open(expand(path)) {
                Ok(_) => Reply::ok(id, "opened for writing (nothing written)"),
                Err(e) => failed(id, &e),
            }
        }
        Action::ChmodSame { path } => {
            let path = expand(path);
            match std::fs::symlink_metadata(&path).and_then(|m| {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m.mode() & 0o7777))
            }) {
                Ok(()) => Reply::ok(id, ""),
                Err(e) => failed(id, &e),
            }
        }
        Action::UtimeSame { path } => {
            let path = expand(path);
            let r = std::fs::metadata(&path).and_then(|m| {
                let times = std::fs::FileTimes::new()
                    .set_accessed(m.accessed()?)
                    .set_modified(m.modified()?);
                std::fs::File::open(&path)?.set_times(times)
            });
            match r {
                Ok(()) => Reply::ok(id, ""),
                Err(e) => failed(id, &e),
            }
        }
        Action::SetXattr { path } => {
            let Ok(p) = std::ffi::CString::new(expand(path).into_os_string().into_encoded_bytes())
            else {
                return Some(Reply::not_tried(id, libc::EINVAL, "a path with a NUL byte"));
            };
            match crate::jail::attempt::setxattr(&p, XATTR, b"1", 0) {
                Ok(()) => {
                    let _ = crate::jail::attempt::removexattr(&p, XATTR);
                    Reply::ok(id, "set (and removed)")
                }
                Err(e) => Reply::failed(id, e, ""),
            }
        }
        Action::ReadVia { link, target } => {
            let link = expand(link);
            if let Err(e) = std::os::unix::fs::symlink(target, &link) {
                return Some(Reply::not_tried(id, errno(&e), "making the link"));
            }
            let r = read(id, &link);
            let _ = std::fs::remove_file(&link);
            r
        }
        Action::CreateVia { link, target } => {
            let link = expand(link);
            if let Err(e) = std::os::unix::fs::symlink(target, &link) {
                return Some(Reply::not_tried(id, errno(&e), "making the link"));
            }
            let r = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&link);
            let _ = std::fs::remove_file(&link);
            match r {
                Ok(_) => Reply::ok(id, ""),
                Err(e) => failed(id, &e),
            }
        }
        Action::CreateSetId { path } => {
            let path = expand(path);
            match create(id, &path, 0o6755) {
                Ok(f) => {
                    let mode = f.metadata().map(|m| m.mode()).unwrap_or(0);
                    let _ = std::fs::remove_file(&path);
                    Reply::ok(id, format!("{:o}", mode & 0o7777))
                }
                Err(r) => r,
            }
        }
        Action::ChmodSetId { path } => {
            let path = expand(path);
            if let Err(r) = create(id, &path, 0o755) {
                return Some(Reply {
                    data: "creating the file".into(),
                    ..r
                });
            }
            let r = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4755))
                .and_then(|()| std::fs::symlink_metadata(&path));
            let _ = std::fs::remove_file(&path);
            match r {
                Ok(m) => Reply::ok(id, format!("{:o}", m.mode() & 0o7777)),
                Err(e) => failed(id, &e),
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dotdot_climbs_to_the_root_then_down() {
        let p = through_dotdot(Path::new("/a/b"), Path::new("/tmp/x/canary"));
        assert_eq!(p, PathBuf::from("/a/b/../../tmp/x/canary"));
        // Lexically it is the target.
        let lexical: PathBuf = p.components().fold(PathBuf::new(), |mut acc, c| {
            match c {
                std::path::Component::ParentDir => {
                    acc.pop();
                }
                other => acc.push(other),
            }
            acc
        });
        assert_eq!(lexical, PathBuf::from("/tmp/x/canary"));
    }

    #[test]
    fn home_paths_are_the_jails() {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if let Some(h) = home {
            assert_eq!(expand(Path::new("~/x")), h.join("x"));
        }
        assert_eq!(expand(Path::new("/etc/x")), PathBuf::from("/etc/x"));
    }
}
