//! glovebox's own state: approvals, the audit key and the audit head. It
//! lives outside every project, in the user's state directory, found the
//! same way whatever environment glovebox was started with (an MCP client
//! that starts `glovebox mcp` with a stripped environment finds the
//! approvals made in the user's terminal). The first of:
//!
//! 1. `--state-dir DIR` ([`set_dir`], from the command line);
//! 2. `$GLOVEBOX_STATE_DIR` (an explicit override, as before);
//! 3. `state_dir:` in the user's config file,
//!    `<home>/.config/glovebox/config.yml` ([`user_config_file`]);
//! 4. `<home>/.local/state/glovebox`,
//!
//! where `<home>` is the home directory of the user's passwd entry
//! (`getpwuid`), never `$HOME` or `$XDG_STATE_HOME`, which MCP clients
//! strip or change. Only when the passwd entry names no existing home
//! (`nobody`'s `/nonexistent`) is `$HOME` used. A project cannot move it:
//! a project's `.glee/config.yml` could point it at approvals the project
//! wrote itself. Created with mode 0700. Every message about approvals and
//! the audit log names the directory in use ([`describe`]).
//!
//! It is not in any jail's filesystem: a jail's root holds only what it is
//! granted ([`crate::jail::tree`]), and glovebox refuses to start any jail
//! whose read, write or exec paths cover this directory
//! (`crate::run::start` hands it to `crate::jail::run_keeping_out`, which compares the resolved grants with it by identity), so no grant can bring it in: no tool can
//! even `stat` it, read the audit key, write an approval, `chmod` the key
//! or move the audit head, whatever its manifest asks for. A jail that runs a copy of glovebox finds a
//! different, empty state directory (its `HOME` is private and its
//! environment scrubbed).

use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::kind::ErrorKind;

/// Errors about the state directory.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No usable location (no home directory and nothing configured).
    #[error("cannot find a state directory: the user has no home directory; pass --state-dir DIR or set GLOVEBOX_STATE_DIR")]
    NoLocation,
    /// The user config file is unreadable or its `state_dir` is not a path.
    #[error("the user config {path:?} is unusable: {reason}; fix it, or pass --state-dir DIR")]
    Config { path: PathBuf, reason: String },
    /// A file or directory of the state could not be used.
    #[error("cannot use {path:?}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A jail would be able to reach the state.
    #[error("{path:?} would expose glovebox's state directory {state:?} to the jail; narrow the path (or move the state with --state-dir)")]
    Exposed { path: PathBuf, state: PathBuf },
}

impl StateError {
    /// The Outcome's error kind: a grant reaching the state is beyond
    /// what any tool may ever have, whoever asks for it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StateError::Exposed { .. } => ErrorKind::PermissionExceedsCeiling,
            StateError::NoLocation | StateError::Config { .. } | StateError::Io { .. } => {
                ErrorKind::Internal
            }
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

static CHOSEN: OnceLock<PathBuf> = OnceLock::new();

/// Uses `dir` as the state directory for the rest of the process
/// (`--state-dir`); a second call changes nothing.
pub fn set_dir(dir: PathBuf) {
    let _ = CHOSEN.set(dir);
}

/// The home directory of the user running glovebox, from its passwd
/// entry; `$HOME` only when the entry names no existing directory.
pub fn home() -> Option<PathBuf> {
    // The passwd entry is read once per process (a served call asked for
    // it several times: state directory, key, approvals).
    static PASSWD: OnceLock<Option<PathBuf>> = OnceLock::new();
    let from_passwd = PASSWD
        .get_or_init(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .clone()
        .filter(|d| d.is_absolute() && d.is_dir());
    from_passwd.or_else(|| {
        std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|d| d.is_absolute())
    })
}

/// The user's config file: `<home>/.config/glovebox/config.yml`.
pub fn user_config_file() -> Option<PathBuf> {
    home().map(|h| h.join(".config/glovebox/config.yml"))
}

/// `state_dir` of the user config file `path`, if it sets one (`~/` is
/// the home directory; a relative path is relative to the file).
fn configured(path: &Path) -> Result<Option<PathBuf>, StateError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let bad = |reason: String| StateError::Config {
        path: path.to_path_buf(),
        reason,
    };
    let doc = crate::manifest::yaml::parse(&text).map_err(|e| bad(e.to_string()))?;
    match doc.value.get("state_dir") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if !s.is_empty() => {
            let p = match s.strip_prefix("~/") {
                Some(rest) => home().ok_or(StateError::NoLocation)?.join(rest),
                None => PathBuf::from(s),
            };
            Ok(Some(if p.is_absolute() {
                p
            } else {
                path.parent().unwrap_or(Path::new("/")).join(p)
            }))
        }
        Some(_) => Err(bad("`state_dir` must be a non-empty path".into())),
    }
}

/// `state_dir` of the user config file, read once per process: a served
/// call asked for the state directory several times, and a server keeps
/// the state it started with (a config edited meanwhile takes effect at
/// the next start, never in the middle of an audit chain). An unreadable
/// or invalid config is not remembered: it is an error every time.
fn user_configured() -> Result<Option<PathBuf>, StateError> {
    static READ: OnceLock<Option<PathBuf>> = OnceLock::new();
    if let Some(p) = READ.get() {
        return Ok(p.clone());
    }
    let found = match user_config_file() {
        Some(file) => configured(&file)?,
        None => None,
    };
    Ok(READ.get_or_init(|| found).clone())
}

/// The state directory's path (not created).
pub fn dir() -> Result<PathBuf, StateError> {
    if let Some(p) = CHOSEN.get() {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("GLOVEBOX_STATE_DIR").filter(|v| !v.is_empty()) {
        // Made absolute, like --state-dir: the exposure check compares it
        // with the jail's absolute grants.
        let p = PathBuf::from(p);
        return Ok(std::path::absolute(&p).unwrap_or(p));
    }
    if let Some(p) = user_configured()? {
        return Ok(p);
    }
    home()
        .map(|h| h.join(".local/state/glovebox"))
        .ok_or(StateError::NoLocation)
}

/// `state DIR` for messages: the state directory in use, or why none.
pub fn describe() -> String {
    match dir() {
        Ok(d) => format!("state {}", d.display()),
        Err(e) => format!("no state directory: {e}"),
    }
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
///
/// Remembered per path for the process (a served call asked for it three
/// times: audit head, approvals, created tools); a root reached through a
/// symbolic link keeps the key of where it led first.
pub fn project_key(root: &Path) -> String {
    type Keys = std::sync::Mutex<std::collections::HashMap<PathBuf, String>>;
    static KEYS: OnceLock<Keys> = OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    if let Some(k) = keys
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(root)
    {
        return k.clone();
    }
    let canonical = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let key = hex::encode(Sha256::digest(canonical.as_os_str().as_encoded_bytes()));
    let mut keys = keys
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Bounded: a process sees a handful of roots; past that, stop adding.
    if keys.len() < 64 {
        keys.insert(root.to_path_buf(), key.clone());
    }
    key
}

/// The 32-byte secret key of this user's state (created on first use,
/// mode 0600). Used to MAC the audit log.
pub fn key() -> Result<Vec<u8>, StateError> {
    // Read once per state directory and process (twice per call before:
    // the intent and the result line).
    static KEY: std::sync::Mutex<Option<(PathBuf, Vec<u8>)>> = std::sync::Mutex::new(None);
    let dir = ensure_dir()?;
    let mut known = KEY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((d, k)) = known.as_ref() {
        if *d == dir {
            return Ok(k.clone());
        }
    }
    let k = key_in(&dir)?;
    *known = Some((dir, k.clone()));
    Ok(k)
}

/// [`key`] of the state directory `dir`.
fn key_in(dir: &Path) -> Result<Vec<u8>, StateError> {
    let path = dir.join("audit.key");
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
    // A temporary file of its own (threads of one process race too), put
    // in place only if no key is there yet: whoever lost the race uses
    // the winner's key.
    let mut tmp = tempfile::Builder::new()
        .prefix(".audit.key.")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(io(dir))?;
    std::io::Write::write_all(&mut tmp, &k).map_err(io(tmp.path()))?;
    match tmp.persist_noclobber(&path) {
        Ok(_) => Ok(k),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::read(&path).map_err(io(&path))
        }
        Err(e) => Err(io(&path)(e.error)),
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

/// sha256 of a file's bytes, hex.
pub fn file_sha256(path: &Path) -> Result<String, StateError> {
    let bytes = fs::read(path).map_err(io(path))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_racing_to_make_the_first_key_all_get_the_same_one() {
        let d = tempfile::tempdir().unwrap();
        let keys: Vec<Vec<u8>> = std::thread::scope(|s| {
            let all: Vec<_> = (0..8).map(|_| s.spawn(|| key_in(d.path()))).collect();
            all.into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        assert!(keys.iter().all(|k| k.len() == 32 && *k == keys[0]));
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["audit.key"], "no temporary file is left");
        let mode = fs::metadata(d.path().join("audit.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config.yml");
        fs::write(&f, text).unwrap();
        (d, f)
    }

    #[test]
    fn the_user_config_can_name_the_state_dir() {
        let (_d, f) = config("state_dir: /srv/glovebox-state\n");
        assert_eq!(
            configured(&f).unwrap(),
            Some(PathBuf::from("/srv/glovebox-state"))
        );
        // Relative to the config file's directory.
        let (d, f) = config("state_dir: state\n");
        assert_eq!(configured(&f).unwrap(), Some(d.path().join("state")));
        // Unset, null or no file: not configured.
        let (_d, f) = config("other: 1\n");
        assert_eq!(configured(&f).unwrap(), None);
        let (_d, f) = config("state_dir: null\n");
        assert_eq!(configured(&f).unwrap(), None);
        assert_eq!(
            configured(Path::new("/nonexistent/config.yml")).unwrap(),
            None
        );
        // Anything else is an error naming the file, never ignored.
        for bad in ["state_dir: 5\n", "state_dir: ''\n", "state_dir: [a\n"] {
            let (_d, f) = config(bad);
            let e = configured(&f).unwrap_err().to_string();
            assert!(e.contains("config.yml"), "{bad}: {e}");
        }
    }
}
