//! The in-jail half of the built-ins: `glovebox __builtin`, started by the
//! supervisor inside [`crate::jail::run`] with the project root as its
//! working directory.
//!
//! It reads one [`Request`] from stdin, narrows its own Landlock domain to
//! exactly what the request needs (the root read-only; for a write, also
//! the target's directory read-write) — on top of the jail's, so the
//! system baseline the binary needed to start is gone too — then does the
//! work and prints one [`Reply`]. Symbolic links are resolved by the kernel
//! under that domain: one that leads out of the root, whenever it was
//! created, ends in `EACCES`, never in the file it points to. Where the
//! kernel has no Landlock (gVisor; the jail's mount tree holds the view
//! then), every path is opened relative to the root's descriptor with
//! `openat2(RESOLVE_BENEATH)` instead (`Confine::Beneath`): a link that
//! leads out of the root, absolute or by `..`, ends in `EXDEV`.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, ABI,
};
use nix::errno::Errno;
use nix::fcntl::{self, OFlag};
use nix::sys::stat::{self, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};

use super::protocol::{Reply, Request};

/// Largest request read from stdin (content of a write included).
const MAX_REQUEST_BYTES: u64 = 1 << 30;

/// Errors of the helper itself (not of the operation it was asked for).
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    /// The request could not be read.
    #[error("failed to read the request from stdin")]
    Stdin {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The request is not valid JSON of the expected shape.
    #[error("the request is not valid")]
    Request {
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The Landlock domain could not be narrowed.
    #[error("failed to restrict the helper to the project root")]
    Restrict {
        /// The landlock error.
        #[source]
        source: landlock::RulesetError,
    },
    /// The kernel did not enforce the narrowed domain fully.
    #[error("the kernel did not fully enforce the helper's landlock ruleset")]
    NotEnforced,
    /// The project root could not be opened (no Landlock: paths are
    /// opened beneath it).
    #[error("failed to open the project root")]
    Root {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The reply could not be written.
    #[error("failed to write the reply")]
    Reply {
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Entry point of `glovebox __builtin`: 0 when a reply was printed.
pub fn main() -> ExitCode {
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("glovebox __builtin: {}", crate::run::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

fn serve() -> Result<(), HelperError> {
    let mut input = Vec::new();
    io::stdin()
        .take(MAX_REQUEST_BYTES)
        .read_to_end(&mut input)
        .map_err(|source| HelperError::Stdin { source })?;
    let request: Request =
        serde_json::from_slice(&input).map_err(|source| HelperError::Request { source })?;
    let reply = match &request {
        Request::Read {
            root,
            path,
            max_bytes,
        } => {
            let confine = restrict(root, None)?;
            read(&confine, path, *max_bytes)
        }
        Request::List {
            root,
            directory,
            recursive,
            max_entries,
        } => {
            let confine = restrict(root, None)?;
            list(&confine, directory, *recursive, *max_entries)
        }
        Request::Write {
            root,
            write_dir,
            dir,
            name,
            content,
        } => {
            let confine = restrict(root, Some(write_dir))?;
            write(&confine, write_dir, dir, name, content)
        }
    };
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, &reply)
        .map_err(io::Error::from)
        .and_then(|()| out.flush())
        .map_err(|source| HelperError::Reply { source })
}

/// How the helper's paths are kept inside the root.
enum Confine {
    /// Its own Landlock domain (the root read-only, the write directory
    /// writable): paths are opened as given.
    Landlock,
    /// No Landlock here: every path is opened beneath the root's
    /// descriptor (`RESOLVE_BENEATH`), whose real path is kept to turn an
    /// absolute path inside it into a relative one.
    Beneath { root: OwnedFd, real: PathBuf },
}

impl Confine {
    /// Opens `path` (relative to the root, or absolute inside it) with
    /// `flags`.
    fn open(&self, path: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
        match self {
            Confine::Landlock => fcntl::open(path, flags | OFlag::O_CLOEXEC, Mode::empty()),
            Confine::Beneath { root, real } => {
                let rel = if path.is_absolute() {
                    path.strip_prefix(real).map_err(|_| Errno::EXDEV)?
                } else {
                    path
                };
                open_beneath(root, real, rel, flags)
            }
        }
    }
}

/// Opens `rel` beneath the directory `root` with `flags`, one component
/// at a time, each opened relative to the one before without following a
/// link (`O_NOFOLLOW`); a link is read and its target walked the same way,
/// so `..` above `root`, or an absolute target outside `real` (the root's
/// real path; one inside it goes on from the root), is `EXDEV` (what
/// `openat2(RESOLVE_BENEATH)` does, which the jail's seccomp filter
/// refuses: its mode is out of the filter's sight).
fn open_beneath(root: &OwnedFd, real: &Path, rel: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;
    let split = |p: &Path| -> Result<Vec<OsString>, Errno> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Ok(n.to_os_string())),
                Component::ParentDir => Some(Ok(OsString::from(".."))),
                Component::CurDir => None,
                Component::RootDir | Component::Prefix(_) => Some(Err(Errno::EXDEV)),
            })
            .collect()
    };
    let mut queue: VecDeque<OsString> = split(rel)?.into();
    let mut stack: Vec<OwnedFd> = vec![root.try_clone().map_err(|_| Errno::EMFILE)?];
    let mut links = 0;
    let open_flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            if stack.len() == 1 {
                return Err(Errno::EXDEV);
            }
            stack.pop();
            continue;
        }
        let dir = stack.last().ok_or(Errno::EXDEV)?;
        let st = stat::fstatat(dir, name.as_os_str(), fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFLNK.bits() {
            links += 1;
            if links > 40 {
                return Err(Errno::ELOOP);
            }
            let target = PathBuf::from(fcntl::readlinkat(dir, name.as_os_str())?);
            let target = if target.is_absolute() {
                stack.truncate(1);
                target
                    .strip_prefix(real)
                    .map_err(|_| Errno::EXDEV)?
                    .to_path_buf()
            } else {
                target
            };
            let mut next: VecDeque<OsString> = split(&target)?.into();
            next.extend(queue);
            queue = next;
            continue;
        }
        if queue.is_empty() {
            // The object itself, opened as asked (a link swapped in since
            // the check is ELOOP: O_NOFOLLOW).
            return fcntl::openat(dir, name.as_os_str(), open_flags, Mode::empty());
        }
        let next = fcntl::openat(
            dir,
            name.as_os_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        stack.push(next);
    }
    let dir = stack.last().ok_or(Errno::EXDEV)?;
    fcntl::openat(dir, ".", flags | OFlag::O_CLOEXEC, Mode::empty())
}

/// Narrows this process to reading `root` and, if given, writing files
/// directly in `write_dir`. Landlock domains stack, so this can only take
/// access away from what the jail granted. Without Landlock (the jail's
/// mount tree alone holds its view) the paths are confined by
/// [`Confine::Beneath`] instead.
fn restrict(root: &Path, write_dir: Option<&Path>) -> Result<Confine, HelperError> {
    if crate::jail::landlock_abi() < crate::jail::fs::MIN_ABI {
        let err = |source: io::Error| HelperError::Root { source };
        let fd = fcntl::open(
            root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| err(e.into()))?;
        let real = fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd)
        ))
        .map_err(err)?;
        return Ok(Confine::Beneath { root: fd, real });
    }
    let abi = ABI::V3;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let write =
        read | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::MakeReg | AccessFs::RemoveFile;
    let err = |source| HelperError::Restrict { source };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules([root], read))
        .map_err(err)?
        .add_rules(path_beneath_rules(write_dir, write))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(HelperError::NotEnforced);
    }
    Ok(Confine::Landlock)
}

/// The reply for a failed file-system operation.
fn failure(e: &io::Error, what: &str) -> Reply {
    match e.raw_os_error().map(Errno::from_raw) {
        _ if e.kind() == io::ErrorKind::NotFound => Reply::Missing,
        Some(Errno::ENOTDIR) => Reply::Missing,
        Some(Errno::EACCES | Errno::EPERM) => Reply::Denied {
            detail: format!("{what}: {e}"),
        },
        Some(Errno::EISDIR) => Reply::WrongType,
        _ => Reply::Failed {
            detail: format!("{what}: {e}"),
        },
    }
}

/// True when `path` or one of its ancestors is a symbolic link that leads
/// to nothing the jail can see (its target is not in the jail's tree).
fn link_out_of_view(path: &Path) -> bool {
    path.ancestors().any(|p| {
        fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
            && fs::metadata(p).is_err()
    })
}

/// `failure`, except that a path leading through a link out of the
/// jail's view is refused rather than missing.
fn path_failure(e: &io::Error, what: &str, path: &Path) -> Reply {
    let escaped = e.raw_os_error() == Some(libc::EXDEV);
    if escaped || (e.kind() == io::ErrorKind::NotFound && link_out_of_view(path)) {
        return Reply::Denied {
            detail: format!("{what}: a symbolic link leads outside the allowed paths"),
        };
    }
    failure(e, what)
}

fn read(confine: &Confine, path: &str, max_bytes: u64) -> Reply {
    let file = match confine.open(Path::new(path), OFlag::O_RDONLY) {
        Ok(f) => fs::File::from(f),
        Err(e) => return path_failure(&io::Error::from(e), "open", Path::new(path)),
    };
    match file.metadata() {
        Ok(m) if m.is_dir() => return Reply::WrongType,
        Ok(m) if m.len() > max_bytes => return Reply::TooLarge { size: m.len() },
        Ok(_) => {}
        Err(e) => return failure(&e, "stat"),
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(max_bytes + 1).read_to_end(&mut bytes) {
        return failure(&e, "read");
    }
    if bytes.len() as u64 > max_bytes {
        return Reply::TooLarge {
            size: bytes.len() as u64,
        };
    }
    match String::from_utf8(bytes) {
        Ok(text) => Reply::Content { text },
        Err(_) => Reply::Failed {
            detail: "not a UTF-8 text file".into(),
        },
    }
}

/// One directory's entries (`dir` an open directory): subdirectories
/// first, then everything else, each group sorted by name ignoring case.
/// Symbolic links are listed as files and never followed.
fn entries(dir: &OwnedFd) -> io::Result<Vec<(String, bool)>> {
    let mut found = Vec::new();
    let mut d = nix::dir::Dir::from_fd(dir.try_clone()?).map_err(io::Error::from)?;
    for entry in d.iter() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            Some(t) => t == nix::dir::Type::Directory,
            None => stat::fstatat(dir, entry.file_name(), fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits()),
        };
        found.push((name, is_dir));
    }
    found.sort_by(|(a, a_dir), (b, b_dir)| {
        b_dir
            .cmp(a_dir)
            .then_with(|| a.to_lowercase().cmp(&b.to_lowercase()))
            .then_with(|| a.cmp(b))
    });
    Ok(found)
}

fn list(confine: &Confine, directory: &str, recursive: bool, max_entries: usize) -> Reply {
    let dir = match confine.open(Path::new(directory), OFlag::O_RDONLY) {
        Ok(fd) => fd,
        Err(e) => return path_failure(&io::Error::from(e), "open", Path::new(directory)),
    };
    match stat::fstat(&dir) {
        Ok(st) if st.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFDIR.bits() => {
            return Reply::WrongType
        }
        Ok(_) => {}
        Err(e) => return failure(&io::Error::from(e), "stat"),
    }
    let mut lines = Vec::new();
    let mut truncated = false;
    if let Err(e) = walk(&dir, 0, recursive, max_entries, &mut lines, &mut truncated) {
        return failure(&e, "list");
    }
    if truncated {
        lines.push(format!("... (listing stopped at {max_entries} entries)"));
    }
    Reply::Listing {
        text: lines.join("\n"),
    }
}

/// Lists `dir` (an open directory) into `lines`, its subdirectories
/// opened relative to it without following a link.
fn walk(
    dir: &OwnedFd,
    depth: usize,
    recursive: bool,
    max_entries: usize,
    lines: &mut Vec<String>,
    truncated: &mut bool,
) -> io::Result<()> {
    for (name, is_dir) in entries(dir)? {
        if lines.len() >= max_entries {
            *truncated = true;
            return Ok(());
        }
        let indent = "  ".repeat(depth);
        lines.push(format!("{indent}{name}{}", if is_dir { "/" } else { "" }));
        if is_dir && recursive {
            let sub = fcntl::openat(
                dir,
                name.as_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(io::Error::from)?;
            walk(&sub, depth + 1, recursive, max_entries, lines, truncated)?;
        }
    }
    Ok(())
}

fn write(confine: &Confine, write_dir: &Path, dir: &str, name: &str, content: &str) -> Reply {
    match write_atomically(confine, write_dir, dir, name, content) {
        Ok(()) => Reply::Written,
        Err(Errno::EXDEV) => Reply::Denied {
            detail: "a symbolic link leads outside the allowed paths".into(),
        },
        Err(Errno::ENOENT | Errno::ENOTDIR) if link_out_of_view(&Path::new(dir).join(name)) => {
            Reply::Denied {
                detail: "a symbolic link leads outside the allowed paths".into(),
            }
        }
        Err(Errno::ENOENT | Errno::ENOTDIR) => Reply::Missing,
        Err(Errno::EISDIR) => Reply::WrongType,
        Err(Errno::EROFS) => Reply::Denied {
            detail: "read-only in the jail (outside the writable paths, or a protected path)"
                .into(),
        },
        Err(Errno::ELOOP) => Reply::Denied {
            detail: "the file is a symbolic link; write to its target instead".into(),
        },
        Err(e @ (Errno::EACCES | Errno::EPERM)) => Reply::Denied {
            detail: e.desc().into(),
        },
        Err(e) => Reply::Failed {
            detail: e.desc().into(),
        },
    }
}

/// Writes `content` to a new temporary file in `dir`, syncs it, gives it
/// the mode of the file it replaces and renames it over `name`. The
/// rename replaces a symbolic link at `name` rather than following it; the
/// temporary file is removed on any failure.
fn write_atomically(
    confine: &Confine,
    write_dir: &Path,
    dir: &str,
    name: &str,
    content: &str,
) -> Result<(), Errno> {
    let dirfd = confine.open(Path::new(dir), OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    if let Confine::Beneath { .. } = confine {
        // Without Landlock nothing else keeps the write to the granted
        // directory: it must be that very directory.
        let granted = confine.open(write_dir, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        let (a, b) = (stat::fstat(&dirfd)?, stat::fstat(&granted)?);
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(Errno::EACCES);
        }
    }
    let mode = match stat::fstatat(&dirfd, name, fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFLNK {
                return Err(Errno::ELOOP);
            }
            if kind != SFlag::S_IFREG {
                return Err(Errno::EISDIR);
            }
            Some(Mode::from_bits_truncate(st.st_mode & 0o7777))
        }
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(e),
    };
    // The pid alone repeats across jails (each has its own PID namespace).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = format!(".{name}.glovebox-{}-{nanos}.tmp", std::process::id());
    let fd: OwnedFd = fcntl::openat(
        &dirfd,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        // Created with the old file's permissions already, so that the
        // usual case needs no chmod (which a jail without a mount
        // namespace refuses for every file).
        mode.map_or(Mode::from_bits_truncate(0o666), |m| {
            m & Mode::from_bits_truncate(0o777)
        }),
    )?;
    let filled = (|| {
        let mut file = fs::File::from(fd);
        file.write_all(content.as_bytes())
            .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))?;
        if let Some(mode) = mode {
            let now = stat::fstat(&file)?;
            if Mode::from_bits_truncate(now.st_mode & 0o7777) != mode {
                stat::fchmod(&file, mode)?;
            }
        }
        unistd::fsync(&file)?;
        fcntl::renameat(&dirfd, temp.as_str(), &dirfd, name)
    })();
    if let Err(e) = filled {
        let _ = unistd::unlinkat(&dirfd, temp.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    // The rename is durable once the directory is synced; a failure here
    // leaves the new content in place, so it is not an error.
    let _ = unistd::fsync(&dirfd);
    Ok(())
}
