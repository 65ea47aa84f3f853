//! glovebox's own state: approvals, the audit key and the audit head. It
//! lives outside every project, in the user's state directory
//! (`$GLOVEBOX_STATE_DIR`, else `$XDG_STATE_HOME/glovebox`, else
//! `~/.local/state/glovebox`), created with mode 0700.
//!
//! Landlock can only allow, so it cannot carve this directory out of a
//! writable project root. Instead glovebox refuses to start any jail whose
//! read, write or exec paths cover it ([`ensure_not_exposed`]): no tool can
//! read the audit key, write an approval or move the audit head, whatever
//! its manifest asks for. A jail that runs a copy of glovebox finds a
//! different, empty state directory (its `HOME` is private and its
//! environment scrubbed).

use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::jail::FsAccess;

/// Errors about the state directory.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No usable location (no HOME and nothing configured).
    #[error("cannot find a state directory: set GLOVEBOX_STATE_DIR or HOME")]
    NoLocation,
    /// A file or directory of the state could not be used.
    #[error("cannot use {path:?}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A jail would be able to reach the state.
    #[error("{path:?} would expose glovebox's state directory {state:?} to the jail; narrow the path (or move the state with GLOVEBOX_STATE_DIR)")]
    Exposed { path: PathBuf, state: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The state directory's path (not created).
pub fn dir() -> Result<PathBuf, StateError> {
    let from = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = from("GLOVEBOX_STATE_DIR") {
        return Ok(p);
    }
    if let Some(p) = from("XDG_STATE_HOME") {
        return Ok(p.join("glovebox"));
    }
    from("HOME")
        .map(|h| h.join(".local/state/glovebox"))
        .ok_or(StateError::NoLocation)
}

/// The state directory, created (0700) if needed.
pub fn ensure_dir() -> Result<PathBuf, StateError> {
    let d = dir()?;
    if !d.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)
            .map_err(io(&d))?;
    }
    Ok(d)
}

/// A stable key for a project: sha256 of its canonical root path.
pub fn project_key(root: &Path) -> String {
    let canonical = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    hex::encode(Sha256::digest(canonical.as_os_str().as_encoded_bytes()))
}

/// The 32-byte secret key of this user's state (created on first use,
/// mode 0600). Used to MAC the audit log.
pub fn key() -> Result<Vec<u8>, StateError> {
    let path = ensure_dir()?.join("audit.key");
    match fs::read(&path) {
        Ok(k) if k.len() == 32 => return Ok(k),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&path)(e)),
    }
    let mut k = vec![0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut k))
        .map_err(io(Path::new("/dev/urandom")))?;
    // create_new: if another process won the race, use its key.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &k))
        .map_err(io(&tmp))?;
    match fs::hard_link(&tmp, &path) {
        Ok(()) => {
            let _ = fs::remove_file(&tmp);
            Ok(k)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(&tmp);
            fs::read(&path).map_err(io(&path))
        }
        Err(e) => Err(io(&path)(e)),
    }
}

/// Writes `data` to `path` atomically (temp file in the same directory,
/// then rename), mode 0600.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    std::io::Write::write_all(&mut tmp, data).map_err(io(path))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    Ok(())
}

/// Refuses `access` when any of its paths is the state directory or one of
/// its ancestors (reading would reveal the key; writing would forge
/// approvals or the audit head).
pub fn ensure_not_exposed(access: &FsAccess) -> Result<(), StateError> {
    let Ok(state) = dir() else {
        return Ok(());
    };
    let state = fs::canonicalize(&state).unwrap_or(state);
    for p in access
        .read
        .iter()
        .chain(&access.write)
        .chain(&access.exec)
        .chain(&access.read_only)
    {
        let canonical = fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        if state.starts_with(&canonical) {
            return Err(StateError::Exposed {
                path: p.clone(),
                state,
            });
        }
    }
    Ok(())
}

/// sha256 of a file's bytes, hex.
pub fn file_sha256(path: &Path) -> Result<String, StateError> {
    let bytes = fs::read(path).map_err(io(path))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}
