//! Names a running call could plant: recorded before the call starts,
//! invisible to every loader while it runs, removed and verified gone
//! after it; a name that cannot be removed leaves the project *tainted*,
//! refused by every loader until a person acts (invariant 13).
//!
//! A call whose write grants cover control names that do not exist yet
//! ([`crate::surface::absent`]: a root `tools.json`, `.git`, `.glee`, code
//! some tool would run) writes a record of them, with its own pid and that
//! process's start time, into glovebox's state directory before its jail
//! starts ([`Watch::begin`]). Every loader reads the project's records
//! ([`guarded`]) and treats the names a live record lists as absent; a
//! loader that raced a record being written loads again (each record bumps
//! the project's sequence number, read before and after a load). After the
//! call, [`Watch::finish`] removes each name that appeared, never following
//! a link, giving glovebox back the owner's bits on the directories
//! involved where the tool took them away (and putting the modes back
//! after), checks that each name is gone (`lstat` answers `ENOENT`), and
//! only then drops the record. A name it cannot remove taints the
//! project ([`Taint`]); a record whose process is gone (the supervisor was
//! killed) is finished the same way by the next loader.
//!
//! Where it lives: `<state>/planted/<project key>/` ([`crate::state`]),
//! out of every jail's reach: `seq` (the sequence number), `lock`,
//! `call-<pid>-<start>-<seq>.json` (one per running call) and
//! `taint.json`. A call without absent names writes nothing; a loader of a
//! project that never had a record pays three failed lookups.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::sys::stat::{self, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};
use serde::{Deserialize, Serialize};

use crate::state::{self, StateError};

/// Errors of the planted-name records.
#[derive(Debug, thiserror::Error)]
pub enum PlantedError {
    /// The state directory could not be used.
    #[error(transparent)]
    State(#[from] StateError),
    /// A record file could not be read or written.
    #[error("cannot use {path:?} of glovebox's state; fix its permissions")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The project is tainted: files a call planted are still there.
    #[error("the project {root:?} is refused: a call planted {} and glovebox could not remove {}; remove {}, then run `glovebox untaint` ({})", list(files), them(files), them(files), state)]
    Tainted {
        root: PathBuf,
        files: Vec<PathBuf>,
        state: String,
    },
    /// Records kept changing while the project was loaded.
    #[error("the project {root:?} kept changing while it was loaded (calls that may plant control files keep starting); retry")]
    Busy { root: PathBuf },
    /// `untaint` found planted files still there.
    #[error(
        "still there: {}; remove {}, then run `glovebox untaint` again",
        list(files),
        them(files)
    )]
    StillThere { files: Vec<PathBuf> },
}

impl PlantedError {
    /// The Outcome's error kind: the project cannot be used as it is.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        match self {
            PlantedError::Tainted { .. } | PlantedError::StillThere { .. } => {
                crate::kind::ErrorKind::ManifestInvalid
            }
            PlantedError::State(e) => e.kind(),
            PlantedError::Io { .. } | PlantedError::Busy { .. } => crate::kind::ErrorKind::Internal,
        }
    }
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| format!("{}", f.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn them(files: &[PathBuf]) -> &'static str {
    if files.len() == 1 {
        "it"
    } else {
        "them"
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PlantedError + '_ {
    move |source| PlantedError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How deep a planted directory tree glovebox removes (one descriptor per
/// level). A deeper one is not removed: the project is tainted.
pub const MAX_DEPTH: usize = 64;

/// How many times a loader loads again when records changed meanwhile.
const LOAD_TRIES: usize = 8;

const SEQ: &str = "seq";
const LOCK: &str = "lock";
const TAINT: &str = "taint.json";

/// The project's directory of records: `<state>/planted/<key>`.
fn project_dir(root: &Path) -> Result<PathBuf, StateError> {
    Ok(state::dir()?.join("planted").join(state::project_key(root)))
}

/// One running call's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    root: PathBuf,
    pid: u32,
    /// The process's start time (`/proc/PID/stat` field 22), so that a
    /// reused pid does not keep a dead call's record alive.
    start: u64,
    names: Vec<PathBuf>,
}

/// The taint of a project.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Taint {
    /// The project root.
    pub root: PathBuf,
    /// The planted files glovebox could not remove.
    pub files: Vec<PathBuf>,
}

/// The start time of process `pid`, `None` when there is no such process.
/// An unreadable entry (hidden `/proc`) counts as a live process of
/// unknown start (`Some(None)`).
fn start_time(pid: u32) -> Option<Option<u64>> {
    let text = match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some(None),
    };
    // After the command name (which may hold spaces and parentheses):
    // field 3 onwards; the start time is field 22.
    let rest = text.rsplit_once(')').map(|(_, r)| r)?;
    Some(rest.split_whitespace().nth(19).and_then(|s| s.parse().ok()))
}

fn own_start() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| start_time(std::process::id()).flatten().unwrap_or(0))
}

impl Record {
    fn live(&self) -> bool {
        match start_time(self.pid) {
            None => false,
            Some(None) => true,
            Some(Some(s)) => s == self.start,
        }
    }
}

/// The project's lock, held while records or the taint change.
fn lock(dir: &Path) -> Result<nix::fcntl::Flock<fs::File>, PlantedError> {
    let path = dir.join(LOCK);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| io(&path)(e.into()))
}

fn read_seq(dir: &Path) -> Result<u64, PlantedError> {
    let path = dir.join(SEQ);
    match fs::read_to_string(&path) {
        Ok(t) => Ok(t.trim().parse().unwrap_or(0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io(&path)(e)),
    }
}

/// A running call's record of the names it could plant.
///
/// Dropped without [`Watch::finish`] (a panic between the two), it
/// finishes itself.
#[derive(Debug)]
pub struct Watch {
    dir: PathBuf,
    file: PathBuf,
    record: Record,
    finished: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.finished {
            self.undo_and_drop();
        }
    }
}

/// What [`Watch::finish`] did.
#[derive(Debug, Default)]
pub struct Undone {
    /// Names the call created, now removed and verified gone.
    pub removed: Vec<PathBuf>,
    /// Names the call created that glovebox could not remove (the project
    /// is tainted), with why.
    pub left: Vec<(PathBuf, String)>,
    /// The taint could not be recorded either (the record stays, so the
    /// next loader tries again).
    pub unrecorded: Option<String>,
}

impl Undone {
    /// Nothing was planted.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.left.is_empty()
    }
}

impl Watch {
    /// Records that the calling process is about to run a call that could
    /// plant `names` under the project at `root`. `None` (nothing written)
    /// when there are no names.
    pub fn begin(root: &Path, names: &[PathBuf]) -> Result<Option<Watch>, PlantedError> {
        if names.is_empty() {
            return Ok(None);
        }
        let dir = project_dir(root)?;
        state::ensure_dir()?;
        fs::DirBuilder::new()
            .recursive(true)
            .create(&dir)
            .map_err(io(&dir))?;
        let _held = lock(&dir)?;
        let seq = read_seq(&dir)? + 1;
        let record = Record {
            root: root.to_path_buf(),
            pid: std::process::id(),
            start: own_start(),
            names: names.to_vec(),
        };
        let file = dir.join(format!("call-{}-{}-{seq}.json", record.pid, record.start));
        let bytes = serde_json::to_vec(&record).map_err(|e| io(&file)(e.into()))?;
        state::write_atomic(&file, &bytes)?;
        // The record first, then the number: a loader that read the old
        // number before listing the records either saw this one or finds
        // the number changed after its load (the jail starts only after
        // this returns), and loads again.
        if let Err(e) = state::write_atomic(&dir.join(SEQ), seq.to_string().as_bytes()) {
            let _ = fs::remove_file(&file);
            return Err(e.into());
        }
        Ok(Some(Watch {
            dir,
            file,
            record,
            finished: false,
        }))
    }

    /// After the call: removes each name that appeared, checks it is gone,
    /// taints the project for each that is not, then drops the record.
    pub fn finish(mut self) -> Undone {
        self.finished = true;
        self.undo_and_drop()
    }

    fn undo_and_drop(&mut self) -> Undone {
        let mut undone = undo(&self.record.names);
        if !undone.left.is_empty() {
            let files: Vec<PathBuf> = undone.left.iter().map(|(p, _)| p.clone()).collect();
            if let Err(e) =
                lock(&self.dir).and_then(|_held| taint(&self.dir, &self.record.root, &files))
            {
                // Keep the record: the next loader finds it dead and
                // tries again (or taints).
                undone.unrecorded = Some(crate::kind::error_chain(&e));
                return undone;
            }
        }
        let _ = fs::remove_file(&self.file);
        undone
    }
}

/// Removes each of `names` that exists and verifies it is gone.
pub(crate) fn undo(names: &[PathBuf]) -> Undone {
    let mut undone = Undone::default();
    for name in names {
        match name.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            _ => {}
        }
        match remove(name) {
            Ok(()) => undone.removed.push(name.clone()),
            Err(why) => undone.left.push((name.clone(), why)),
        }
    }
    undone
}

/// Adds `files` to the project's taint (the lock held).
fn taint(dir: &Path, root: &Path, files: &[PathBuf]) -> Result<(), PlantedError> {
    let path = dir.join(TAINT);
    let mut t = read_taint(dir)?.unwrap_or_default();
    t.root = root.to_path_buf();
    for f in files {
        if !t.files.contains(f) {
            t.files.push(f.clone());
        }
    }
    let bytes = serde_json::to_vec_pretty(&t).map_err(|e| io(&path)(e.into()))?;
    state::write_atomic(&path, &bytes)?;
    Ok(())
}

fn read_taint(dir: &Path) -> Result<Option<Taint>, PlantedError> {
    let path = dir.join(TAINT);
    match fs::read(&path) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b).unwrap_or_else(|_| Taint {
            // Unreadable: still a taint, naming the file that says so.
            root: PathBuf::new(),
            files: vec![path.clone()],
        }))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path)(e)),
    }
}

/// The project's records as a loader needs them.
#[derive(Debug, Default)]
struct View {
    seq: u64,
    hidden: Vec<PathBuf>,
}

/// Reads the records of `root`: the names live records list, after
/// finishing dead ones; the taint is an error.
fn view(root: &Path, dir: &Path) -> Result<View, PlantedError> {
    let seq = read_seq(dir)?;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(View {
                seq,
                hidden: Vec::new(),
            })
        }
        Err(e) => return Err(io(dir)(e)),
    };
    let (mut hidden, mut dead, mut tainted) = (Vec::new(), Vec::new(), false);
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == TAINT {
            tainted = true;
        } else if name.starts_with("call-") && name.ends_with(".json") {
            let path = entry.path();
            let record: Record = match fs::read(&path) {
                Ok(b) => match serde_json::from_slice(&b) {
                    Ok(r) => r,
                    // A record cut short cannot say its names: the
                    // project is refused until a person looks.
                    Err(_) => {
                        return Err(PlantedError::Tainted {
                            root: root.to_path_buf(),
                            files: vec![path],
                            state: state::describe(),
                        })
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&path)(e)),
            };
            if record.live() {
                hidden.extend(record.names);
            } else {
                dead.push((path, record));
            }
        }
    }
    if !dead.is_empty() {
        let _held = lock(dir)?;
        for (path, record) in dead {
            if !path.exists() {
                continue; // finished by another loader meanwhile
            }
            let undone = undo(&record.names);
            if !undone.left.is_empty() {
                let files: Vec<PathBuf> = undone.left.into_iter().map(|(p, _)| p).collect();
                taint(dir, &record.root, &files)?;
                tainted = true;
            }
            let _ = fs::remove_file(&path);
        }
    }
    if tainted {
        if let Some(t) = read_taint(dir)? {
            return Err(PlantedError::Tainted {
                root: root.to_path_buf(),
                files: t.files,
                state: state::describe(),
            });
        }
    }
    hidden.sort();
    hidden.dedup();
    Ok(View { seq, hidden })
}

/// Runs `load` (a loader of the project at `root`) with the names it must
/// treat as absent (those a running call could plant), and loads again
/// when a record was written meanwhile. A tainted project is refused. No
/// state directory: nothing can have been recorded, `load` runs as is.
pub fn guarded<T>(root: &Path, mut load: impl FnMut(&[PathBuf]) -> T) -> Result<T, PlantedError> {
    let Ok(dir) = project_dir(root) else {
        return Ok(load(&[]));
    };
    guarded_in(&dir, root, load)
}

/// [`guarded`] with the records in `dir`.
fn guarded_in<T>(
    dir: &Path,
    root: &Path,
    mut load: impl FnMut(&[PathBuf]) -> T,
) -> Result<T, PlantedError> {
    for _ in 0..LOAD_TRIES {
        let v = view(root, dir)?;
        let out = load(&v.hidden);
        if read_seq(dir)? == v.seq {
            return Ok(out);
        }
    }
    Err(PlantedError::Busy {
        root: root.to_path_buf(),
    })
}

/// The names to treat as absent in `root` now (no retry: for a check made
/// right before a call, whose own load was [`guarded`]).
pub fn hidden(root: &Path) -> Result<Vec<PathBuf>, PlantedError> {
    match project_dir(root) {
        Ok(dir) => Ok(view(root, &dir)?.hidden),
        Err(_) => Ok(Vec::new()),
    }
}

/// Whether `path` is one of `hidden` or inside one.
pub fn is_hidden(path: &Path, hidden: &[PathBuf]) -> bool {
    hidden.iter().any(|h| path.starts_with(h))
}

/// `glovebox untaint`: clears the taint of `root` once every file it names
/// is gone (finishing dead records first). Returns the files it named
/// (empty: the project was not tainted).
pub fn untaint(root: &Path) -> Result<Vec<PathBuf>, PlantedError> {
    let dir = project_dir(root)?;
    // Dead records first (they may add to the taint).
    match view(root, &dir) {
        Ok(_) | Err(PlantedError::Tainted { .. }) => {}
        Err(e) => return Err(e),
    }
    let _held = match lock(&dir) {
        Ok(l) => l,
        Err(_) if !dir.exists() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let Some(t) = read_taint(&dir)? else {
        return Ok(Vec::new());
    };
    let still: Vec<PathBuf> = t
        .files
        .iter()
        .filter(
            |f| !matches!(f.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound),
        )
        .cloned()
        .collect();
    if !still.is_empty() {
        return Err(PlantedError::StillThere { files: still });
    }
    let path = dir.join(TAINT);
    fs::remove_file(&path).map_err(io(&path))?;
    Ok(t.files)
}

// ---- removal: descriptors, never a link followed ----

/// Directories whose owner bits glovebox gave back, with their modes.
#[derive(Default)]
struct Restore(Vec<(OwnedFd, u32)>);

impl Drop for Restore {
    fn drop(&mut self) {
        for (fd, mode) in self.0.drain(..).rev() {
            let _ = chmod_fd(&fd, mode);
        }
    }
}

fn chmod_fd(fd: &OwnedFd, mode: u32) -> std::io::Result<()> {
    // An O_PATH descriptor takes no fchmod; its /proc link reaches the
    // same inode, whatever its path is now.
    fs::set_permissions(
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        fs::Permissions::from_mode(mode),
    )
}

/// Gives glovebox back the owner's read, write and search bits on the
/// directory `dir` when the tool took them away and glovebox owns it
/// (root needs no bits). Remembers the old mode in `restore` when given.
fn give_back(dir: &OwnedFd, restore: Option<&mut Restore>) -> Result<(), Errno> {
    let euid = unistd::geteuid();
    if euid.is_root() {
        return Ok(());
    }
    let st = stat::fstat(dir)?;
    let mode = st.st_mode & 0o7777;
    if mode & 0o700 == 0o700 || st.st_uid != euid.as_raw() {
        return Ok(());
    }
    chmod_fd(dir, mode | 0o700)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    if let Some(r) = restore {
        r.0.push((unistd::dup(dir)?, mode));
    }
    Ok(())
}

const DIR_PATH: OFlag = OFlag::O_PATH
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC);

/// Opens the directory `path` (`O_PATH`), giving back the owner's bits on
/// an ancestor whose search bit the tool took away.
fn open_dir(path: &Path, restore: &mut Restore) -> Result<OwnedFd, Errno> {
    match fcntl::open(path, DIR_PATH, Mode::empty()) {
        Err(Errno::EACCES) => {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(Errno::EACCES);
            };
            let p = open_dir(parent, restore)?;
            give_back(&p, Some(restore))?;
            fcntl::openat(&p, name, DIR_PATH | OFlag::O_NOFOLLOW, Mode::empty())
        }
        other => other,
    }
}

/// Removes the planted `path` and checks it is gone; `Err` says why not.
fn remove(path: &Path) -> Result<(), String> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err("not a removable name".into());
    };
    let mut restore = Restore::default();
    let result = (|| {
        let dir = open_dir(parent, &mut restore)
            .map_err(|e| format!("cannot open {}: {e}", parent.display()))?;
        give_back(&dir, Some(&mut restore))
            .map_err(|e| format!("cannot change the mode of {}: {e}", parent.display()))?;
        remove_at(&dir, name, 0).map_err(|e| match e {
            Errno::ELOOP => format!("a directory tree deeper than {MAX_DEPTH} levels"),
            e => e.desc().to_lowercase(),
        })?;
        // Gone from the directory glovebox removed it from, and from the
        // path every loader uses.
        match stat::fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => {}
            _ => return Err("still there after its removal".into()),
        }
        match path.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot check it is gone: {e}")),
            Ok(_) => Err("still there after its removal".into()),
        }
    })();
    drop(restore);
    result
}

fn is_dir(st: &nix::sys::stat::FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR
}

/// Removes `name` in `dir` (a directory: what it holds first), never
/// following a link; `ELOOP` past [`MAX_DEPTH`].
fn remove_at(dir: &OwnedFd, name: &OsStr, depth: usize) -> Result<(), Errno> {
    let st = match stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => return Ok(()),
        r => r?,
    };
    if !is_dir(&st) {
        return unistd::unlinkat(dir, name, UnlinkatFlags::NoRemoveDir);
    }
    if depth >= MAX_DEPTH {
        return Err(Errno::ELOOP);
    }
    let sub = fcntl::openat(dir, name, DIR_PATH | OFlag::O_NOFOLLOW, Mode::empty())?;
    give_back(&sub, None)?;
    // Listed through its descriptor's /proc link: the same directory,
    // whatever its path is now.
    let names: Vec<OsString> = fs::read_dir(format!("/proc/self/fd/{}", sub.as_raw_fd()))
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    for n in names {
        remove_at(&sub, &n, depth + 1)?;
    }
    unistd::unlinkat(dir, name, UnlinkatFlags::RemoveDir)
}

#[cfg(test)]
#[path = "planted_tests.rs"]
mod tests;
