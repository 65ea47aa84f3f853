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
//! created, ends in `EACCES`, never in the file it points to.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
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
            restrict(root, None)?;
            read(path, *max_bytes)
        }
        Request::List {
            root,
            directory,
            recursive,
            max_entries,
        } => {
            restrict(root, None)?;
            list(directory, *recursive, *max_entries)
        }
        Request::Write {
            root,
            write_dir,
            dir,
            name,
            content,
        } => {
            restrict(root, Some(write_dir))?;
            write(dir, name, content)
        }
    };
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, &reply)
        .map_err(io::Error::from)
        .and_then(|()| out.flush())
        .map_err(|source| HelperError::Reply { source })
}

/// Narrows this process to reading `root` and, if given, writing files
/// directly in `write_dir`. Landlock domains stack, so this can only take
/// access away from what the jail granted.
fn restrict(root: &Path, write_dir: Option<&Path>) -> Result<(), HelperError> {
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
    Ok(())
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
    if e.kind() == io::ErrorKind::NotFound && link_out_of_view(path) {
        return Reply::Denied {
            detail: format!("{what}: a symbolic link leads outside the allowed paths"),
        };
    }
    failure(e, what)
}

fn read(path: &str, max_bytes: u64) -> Reply {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return path_failure(&e, "open", Path::new(path)),
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

/// One directory's entries: subdirectories first, then everything else,
/// each group sorted by name ignoring case. Symbolic links are listed as
/// files and never followed.
fn entries(dir: &Path) -> io::Result<Vec<(String, bool)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let is_dir = entry.file_type()?.is_dir();
        found.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    found.sort_by(|(a, a_dir), (b, b_dir)| {
        b_dir
            .cmp(a_dir)
            .then_with(|| a.to_lowercase().cmp(&b.to_lowercase()))
            .then_with(|| a.cmp(b))
    });
    Ok(found)
}

fn list(directory: &str, recursive: bool, max_entries: usize) -> Reply {
    match fs::metadata(directory) {
        Ok(m) if !m.is_dir() => return Reply::WrongType,
        Ok(_) => {}
        Err(e) => return failure(&e, "stat"),
    }
    let mut lines = Vec::new();
    let mut truncated = false;
    if let Err(e) = walk(
        Path::new(directory),
        0,
        recursive,
        max_entries,
        &mut lines,
        &mut truncated,
    ) {
        return failure(&e, "list");
    }
    if truncated {
        lines.push(format!("... (listing stopped at {max_entries} entries)"));
    }
    Reply::Listing {
        text: lines.join("\n"),
    }
}

fn walk(
    dir: &Path,
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
            walk(
                &dir.join(&name),
                depth + 1,
                recursive,
                max_entries,
                lines,
                truncated,
            )?;
        }
    }
    Ok(())
}

fn write(dir: &str, name: &str, content: &str) -> Reply {
    match write_atomically(dir, name, content) {
        Ok(()) => Reply::Written,
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
fn write_atomically(dir: &str, name: &str, content: &str) -> Result<(), Errno> {
    let dirfd = fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
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
