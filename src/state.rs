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
    /// The audit key this process signs with is no longer on disk (its
    /// state directory was deleted or moved): a line signed with it now
    /// could never be verified.
    #[error("the audit key {path:?} that this glovebox signs with is gone (its state directory was deleted or moved); calls are refused: put the state directory back (from a backup), or restart glovebox to begin a new key (lines signed with the lost key cannot be verified)")]
    KeyGone { path: PathBuf },
    /// The audit key on disk is another key than the one this process
    /// loaded.
    #[error("the audit key {path:?} was replaced by another key since this glovebox loaded it; calls are refused: put the original key back, or restart glovebox to sign with the new one")]
    KeyReplaced { path: PathBuf },
    /// No audit key where the state's audit heads show one was in use: a
    /// new one would leave every line the lost one signed unverifiable.
    #[error("the audit key {path:?} is missing, but {heads:?} holds the heads of audit logs it signed (it was deleted or lost); calls are refused: restore the key from a backup of the state directory, or move {heads:?} away to begin a new key (lines signed with the lost key cannot be verified)")]
    KeyLost { path: PathBuf, heads: PathBuf },
    /// No audit key to check or reseal a log with (none is made for it).
    #[error("the audit key {path:?} is missing; lines cannot be verified or resealed without it: restore it from a backup of the state directory, or name the state that signed them with --state-dir DIR")]
    KeyMissing { path: PathBuf },
}

impl StateError {
    /// The Outcome's error kind: a grant reaching the state is beyond
    /// what any tool may ever have, whoever asks for it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StateError::Exposed { .. } => ErrorKind::PermissionExceedsCeiling,
            StateError::NoLocation
            | StateError::Config { .. }
            | StateError::Io { .. }
            | StateError::KeyGone { .. }
            | StateError::KeyReplaced { .. }
            | StateError::KeyLost { .. }
            | StateError::KeyMissing { .. } => ErrorKind::Internal,
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
    let doc = crate::yaml::parse(&text).map_err(|e| bad(e.to_string()))?;
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

/// The audit key's file in the state directory `dir`.
pub fn key_path(dir: &Path) -> PathBuf {
    dir.join("audit.key")
}

/// Which file a key came from, as one `stat` tells it: device, inode and
/// change time (an inode number is reused by the next file made; the
/// change time of a new file, or of one written or renamed since, is not
/// the same).
type FileId = (u64, u64, i64, i64);

fn file_id(meta: &fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
}

/// The audit key as this process loaded it, and the identity of the file
/// it came from.
#[derive(Debug, Clone)]
struct Loaded {
    dir: PathBuf,
    key: Vec<u8>,
    id: FileId,
}

/// The 32-byte secret key of this user's state (created on first use,
/// mode 0600). Used to MAC the audit log.
///
/// Read once per state directory and process; at every later use the key
/// file is checked to be the file it was read from (one `stat`: device,
/// inode and change time; another file, or this one changed, is read
/// again and compared), so a process never signs with a key that is no longer on
/// disk: a key gone since ([`StateError::KeyGone`]: the state directory
/// was deleted or moved) or replaced by another
/// ([`StateError::KeyReplaced`]) refuses. A file put back with the same
/// key (a state directory restored from a backup) is taken again. A new
/// key is made only where none was in use: not where the state's audit
/// heads show one signed logs ([`StateError::KeyLost`]).
pub fn key() -> Result<Vec<u8>, StateError> {
    static KEY: std::sync::Mutex<Option<Loaded>> = std::sync::Mutex::new(None);
    let dir = dir()?;
    let mut known = KEY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(loaded) = known.as_mut().filter(|l| l.dir == dir) {
        still_on_disk(loaded)?;
        return Ok(loaded.key.clone());
    }
    let dir = ensure_dir()?;
    let (key, id) = key_in(&dir)?;
    *known = Some(Loaded {
        dir,
        key: key.clone(),
        id,
    });
    Ok(key)
}

/// Checks that the key `loaded` holds is still the key on disk: the same
/// file, or a file put back with the same bytes (then remembered as it).
fn still_on_disk(loaded: &mut Loaded) -> Result<(), StateError> {
    let path = key_path(&loaded.dir);
    let meta = match fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StateError::KeyGone { path })
        }
        Err(e) => return Err(io(&path)(e)),
    };
    if file_id(&meta) == loaded.id {
        return Ok(());
    }
    match read_key(&path)? {
        Some((k, id)) if k == loaded.key => {
            loaded.id = id;
            Ok(())
        }
        Some(_) => Err(StateError::KeyReplaced { path }),
        None => Err(StateError::KeyGone { path }),
    }
}

/// The key in the file `path` and the file's identity, `None` when there
/// is no such file. Read from the descriptor it was identified by.
fn read_key(path: &Path) -> Result<Option<(Vec<u8>, FileId)>, StateError> {
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let meta = f.metadata().map_err(io(path))?;
    let mut k = Vec::new();
    f.read_to_end(&mut k).map_err(io(path))?;
    Ok(Some((k, file_id(&meta))))
}

/// The audit key of the state directory `dir` if there is one, never
/// made: what `glovebox audit --verify` checks with (a key made to
/// verify would call every line edited).
pub fn existing_key(dir: &Path) -> Result<Option<Vec<u8>>, StateError> {
    Ok(read_key(&key_path(dir))?.map(|(k, _)| k))
}

/// Whether `dir/audit` holds a log's head (a key signed there before).
fn holds_heads(heads: &Path) -> bool {
    fs::read_dir(heads).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "head"))
    })
}

/// [`key`] of the state directory `dir`, and its file's identity.
fn key_in(dir: &Path) -> Result<(Vec<u8>, FileId), StateError> {
    let path = key_path(dir);
    if let Some(found) = read_key(&path)? {
        return Ok(found);
    }
    let heads = dir.join("audit");
    if holds_heads(&heads) {
        return Err(StateError::KeyLost { path, heads });
    }
    let mut k = vec![0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut k))
        .map_err(io(Path::new("/dev/urandom")))?;
    // A temporary file of its own (threads of one process race too), put
    // in place only if no key is there yet: whoever lost the race uses
    // the winner's key. Synced, with its directory, before it is used: a
    // key lost in a crash would leave the lines it signed unverifiable.
    let mut tmp = tempfile::Builder::new()
        .prefix(".audit.key.")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(io(dir))?;
    std::io::Write::write_all(&mut tmp, &k).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    match tmp.persist_noclobber(&path) {
        Ok(f) => {
            let meta = f.metadata().map_err(io(&path))?;
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok((k, file_id(&meta)))
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            read_key(&path)?.ok_or(StateError::KeyGone { path })
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

/// The list of secret key files glovebox made or used
/// ([`remember_key`]), in the state directory.
const KEYS_FILE: &str = "keys";

/// Records `key` (a secret key file `glovebox approve --generate-key`
/// made, or `--sign-with` / `serve --checkpoint-key` used) in the state
/// directory, so that a learning run never sees it wherever it is
/// (`crate::learn::sensitive`). Its absolute path and its resolved one
/// are kept; recording one already there changes nothing.
pub fn remember_key(key: &Path) -> Result<(), StateError> {
    let dir = ensure_dir()?;
    let file = dir.join(KEYS_FILE);
    let mut known = known_keys();
    let abs = std::path::absolute(key).unwrap_or_else(|_| key.to_path_buf());
    let real = fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
    let before = known.len();
    for p in [abs, real] {
        if !known.contains(&p) {
            known.push(p);
        }
    }
    if known.len() == before {
        return Ok(());
    }
    let mut text = String::new();
    for p in &known {
        // A path with a newline cannot be listed on a line: such a key is
        // still out of every project's copy (its format is recognised).
        if let Some(s) = p.to_str().filter(|s| !s.contains('\n')) {
            text.push_str(s);
            text.push('\n');
        }
    }
    write_atomic(&file, text.as_bytes())
}

/// The key files recorded by [`remember_key`] (none when the state
/// directory or the list does not exist).
pub fn known_keys() -> Vec<PathBuf> {
    let Ok(dir) = dir() else {
        return Vec::new();
    };
    fs::read_to_string(dir.join(KEYS_FILE))
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with('/'))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
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
                .map(|h| h.join().unwrap().unwrap().0)
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

    #[test]
    fn a_loaded_key_is_checked_against_the_file_on_disk() {
        let d = tempfile::tempdir().unwrap();
        let (key, id) = key_in(d.path()).unwrap();
        let mut loaded = Loaded {
            dir: d.path().to_path_buf(),
            key: key.clone(),
            id,
        };
        still_on_disk(&mut loaded).unwrap();
        let path = key_path(d.path());
        // Put back with the same bytes (a restored backup): taken again.
        fs::remove_file(&path).unwrap();
        assert!(matches!(
            still_on_disk(&mut loaded),
            Err(StateError::KeyGone { .. })
        ));
        fs::write(&path, &key).unwrap();
        still_on_disk(&mut loaded).unwrap();
        assert_ne!(loaded.id, id, "the new file is remembered");
        // Another key in its place: refused, whatever its age.
        fs::remove_file(&path).unwrap();
        fs::write(&path, [9u8; 32]).unwrap();
        let e = still_on_disk(&mut loaded).unwrap_err();
        assert!(matches!(e, StateError::KeyReplaced { .. }), "{e}");
        // The whole directory gone: gone, and nothing is made.
        drop(d);
        let e = still_on_disk(&mut loaded).unwrap_err();
        assert!(e.to_string().contains("audit.key"), "{e}");
        assert!(matches!(e, StateError::KeyGone { .. }), "{e}");
        assert!(!loaded.dir.exists());
    }

    #[test]
    fn no_key_is_made_where_heads_show_one_was_in_use() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(existing_key(d.path()).unwrap(), None);
        fs::create_dir(d.path().join("audit")).unwrap();
        fs::write(d.path().join("audit/0123.head"), "x").unwrap();
        let e = key_in(d.path()).unwrap_err();
        assert!(matches!(e, StateError::KeyLost { .. }), "{e}");
        assert!(!key_path(d.path()).exists());
        assert_eq!(existing_key(d.path()).unwrap(), None);
        // Without heads, the first key is made (and then read back).
        fs::remove_file(d.path().join("audit/0123.head")).unwrap();
        let (k, _) = key_in(d.path()).unwrap();
        assert_eq!(existing_key(d.path()).unwrap(), Some(k));
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
