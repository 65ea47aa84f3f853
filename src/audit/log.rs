//! The writer: [`Log::append`] and its durable forms under the writers'
//! `flock`, recovery of the log's end against its head (lines past the
//! head taken in, an interrupted write removed, anything else an
//! `AUDIT_BREAK`), the head moved after each write, and
//! [`Log::reseal`]. Lines are sealed by [`super::chain::seal`].

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::Sha256;

use super::chain::{self, claimed_key_id, key_id, last_line_mac, last_mac, split_line, walk};
use super::event::{self, Event};
use super::head::{self, Head, Layout, Plan, Stored};
use super::line::{client_label, now, parse, Entry};
use super::verify::{check, digest, Verification};
use super::{commit, export, AuditError};
use crate::state::{self, StateError};

/// A line written and its head moved, not yet known to be on disk
/// ([`Log::append_pending`]).
#[derive(Debug)]
#[must_use = "the line is not durable until `wait` says so"]
pub struct Pending {
    pub(super) log: Log,
    /// The log, open (the writers' lock already released).
    pub(super) file: fs::File,
    pub(super) group: std::sync::Arc<commit::Commit>,
    pub(super) ticket: u64,
}

impl Pending {
    /// Returns once the line is durable: a sync of the log and then the
    /// head, begun after the line was written, has finished (this
    /// caller's or one shared with other appends of this process, see
    /// `commit`). [`AuditError::NotDurable`] when that sync failed.
    pub fn wait(self) -> Result<(), AuditError> {
        self.group
            .wait(self.ticket, || self.log.sync(&self.file))
            .map_err(|e| self.log.not_durable(e))
    }
}

/// The audit log of one project.
#[derive(Debug, Clone)]
pub struct Log {
    pub(super) path: PathBuf,
    pub(super) head: PathBuf,
    /// The log's directory, opened once ([`Log::pinned`]): the log is
    /// then opened relative to it, whatever happened to the path above
    /// it since (a call's tool may take the search bit off the project
    /// root it may write, which kept its result line out of the log).
    pub(super) dir: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

/// How many bytes past the head an append examines before it calls the
/// rest unknown (a glovebox that died mid-write leaves at most a few lines).
const MAX_UNRECORDED_BYTES: u64 = 1 << 20;

/// Where the log stands against its head, as an append finds it.
enum End {
    /// The log ends where the head says, plus `recovered` lines a writer
    /// wrote before it died (they chain), and maybe an unterminated
    /// fragment from `keep` on (an interrupted write, to be removed).
    Continues {
        mac: String,
        lines: u64,
        /// Lines up to `keep` this key signed, when known without
        /// reading the whole log.
        own: Option<u64>,
        keep: u64,
        fragment: Option<Vec<u8>>,
    },
    /// Continuity is broken: why.
    Broken(String),
}

/// Syncs the directory `dir` (the names in it); a filesystem that cannot
/// sync a directory (`EINVAL`) has nothing more to do.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match fs::File::open(dir)?.sync_all() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

impl Log {
    /// The log of the project at `root`.
    pub fn for_project(root: &Path) -> Result<Log, AuditError> {
        let path = match crate::replica::audit_dir() {
            Some(dir) => dir.join("tools.log"),
            None => root.join(".glee/audit/tools.log"),
        };
        Ok(Log {
            path,
            head: state::dir()?
                .join("audit")
                .join(format!("{}.head", state::project_key(root))),
            dir: None,
        })
    }

    /// This log with its directory opened now (created if needed), so that
    /// later appends reach it through the descriptor; as it is when the
    /// directory cannot be opened (appends then report it).
    pub fn pinned(mut self) -> Log {
        let Some(dir) = self.path.parent() else {
            return self;
        };
        let _ = fs::create_dir_all(dir);
        if let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir)
        {
            self.dir = Some(std::sync::Arc::new(f.into()));
        }
        self
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn io(&self, source: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn not_durable(&self, source: std::io::Error) -> AuditError {
        AuditError::NotDurable {
            path: self.head.clone(),
            source,
        }
    }

    /// The head file as it is now ([`Stored::absent`] when there is none
    /// yet). A file that cannot be read is an error: continuity cannot be
    /// checked without it.
    fn load_head(&self) -> Result<Stored, AuditError> {
        match fs::read(&self.head) {
            Ok(bytes) => Ok(Stored::decode(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::absent()),
            Err(e) => Err(AuditError::State(StateError::Io {
                path: self.head.clone(),
                source: e,
            })),
        }
    }

    /// What `stored` says, `None` when there is no head yet. A head file
    /// neither of whose records is whole (not something a crash leaves:
    /// see [`head`]) says nothing of where the log ended: it reads as a
    /// head that records no end and holds that damage as a break, so the
    /// next append records an `AUDIT_BREAK` (unless the log is empty) and
    /// `--verify` fails until a reseal, never as a clean log.
    fn head_of(&self, stored: &Stored) -> Option<Head> {
        match (&stored.head, stored.layout) {
            (Some(h), _) => Some(h.clone()),
            (None, Layout::Absent) => None,
            (None, _) => Some(Head {
                broken: vec![format!(
                    "{}: the audit head {} could not be read (neither of its records is whole): where the log ended is unknown",
                    now(),
                    self.head.display()
                )],
                ..Head::default()
            }),
        }
    }

    /// The log `head` describes, when it is not this one (a server's
    /// `--audit-dir` log, verified without it).
    pub(super) fn describes_other(&self, head: &Head) -> Option<PathBuf> {
        head.log.clone().filter(|l| *l != self.path)
    }

    /// The head, `None` when there is none yet (see [`Log::head_of`]).
    pub(super) fn read_head(&self) -> Result<Option<Head>, AuditError> {
        Ok(self.head_of(&self.load_head()?))
    }

    /// Writes `head` over the file read as `stored` (the writers' lock
    /// held since it was read): in place, one `pwrite` of a record into
    /// the slot not holding the newest one, synced with `durable`; or, for
    /// a head in an older format, none yet, or one that outgrew its slots,
    /// a new file with slots big enough (mode 0600, synced) renamed over
    /// it. (The directory is not synced: a rename lost in a crash leaves
    /// the older head, and the lines written since chain on from it, so
    /// the next append takes them in.)
    fn write_head(&self, stored: &Stored, head: &Head, durable: bool) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        match stored.plan(head) {
            Plan::InPlace { offset, bytes } => {
                let file = OpenOptions::new().write(true).open(&self.head)?;
                file.write_all_at(&bytes, offset)?;
                if durable {
                    file.sync_data()?;
                }
                Ok(())
            }
            Plan::Whole(bytes) => {
                let dir = self.head.parent().unwrap_or(Path::new("."));
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
                let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
                tmp.write_all(&bytes)?;
                tmp.as_file()
                    .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
                // Rare (a new head, an upgrade, slots doubled): synced, so
                // a crash never leaves a renamed file without its records.
                tmp.as_file().sync_data()?;
                tmp.persist(&self.head).map_err(|e| e.error)?;
                if matches!(stored.layout, Layout::Absent) {
                    // A first head: its name made durable too (and the
                    // audit directory's, which may be new), so a crash
                    // cannot lose the head of lines already on disk.
                    sync_dir(dir)?;
                    if let Some(up) = dir.parent() {
                        sync_dir(up)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Makes the head file (there is none yet) saying `head`, before any
    /// line of this state is written to the log ([`Log::append_keyed`]);
    /// the file as then stored. Failing, it is a state error: nothing was
    /// written.
    fn create_head(&self, head: &Head) -> Result<Stored, AuditError> {
        let state = |source| {
            AuditError::State(StateError::Io {
                path: self.head.clone(),
                source,
            })
        };
        self.write_head(&Stored::absent(), head, true)
            .map_err(state)?;
        let stored = self.load_head()?;
        if stored.head.as_ref() != Some(head) {
            return Err(state(std::io::Error::other(
                "the new head did not read back as written",
            )));
        }
        Ok(stored)
    }

    /// Opens the log for appending (creating it and its directory) and
    /// takes the writers' lock.
    fn open_locked(&self) -> Result<nix::fcntl::Flock<fs::File>, AuditError> {
        if let (Some(dir), Some(name)) = (&self.dir, self.path.file_name()) {
            use nix::fcntl::OFlag;
            let fd = nix::fcntl::openat(
                &**dir,
                name,
                OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::from_bits_truncate(0o644),
            )
            .map_err(|e| self.io(e.into()))?;
            return nix::fcntl::Flock::lock(
                fs::File::from(fd),
                nix::fcntl::FlockArg::LockExclusive,
            )
            .map_err(|(_, e)| self.io(e.into()));
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| self.io(e.into()))
    }

    /// Appends `event`, chained to the previous line, and moves the head.
    /// Not synced to disk: a crash may lose it (a call's result line: the
    /// call then shows as unfinished). [`Log::append_durable`] syncs.
    pub fn append(&self, event: &Event) -> Result<(), AuditError> {
        self.append_with(event, false).map(drop)
    }

    /// Appends `event` made durable before it returns: the line written
    /// and the head moved under the writers' lock, then, the lock
    /// released, the log synced and then the head, in one sync shared
    /// with the lines other threads of this process wrote meanwhile
    /// (group commit). For a call's intent, which must be on disk before
    /// the call starts.
    pub fn append_durable(&self, event: &Event) -> Result<(), AuditError> {
        self.append_pending(event)?.wait()
    }

    /// [`Log::append_durable`] in two halves: the line is written and the
    /// head moved before this returns; the sync is [`Pending::wait`], which
    /// the caller runs when it likes (on another thread, while it prepares
    /// what must not start before the line is on disk).
    pub fn append_pending(&self, event: &Event) -> Result<Pending, AuditError> {
        self.append_with(event, true)?
            .ok_or_else(|| self.not_durable(std::io::Error::other("no sync was prepared")))
    }

    /// Appends `event` (see [`Log::append`]).
    ///
    /// The log must end where the head says. Lines past the head that
    /// chain (a writer died before moving the head) are taken in; an
    /// unterminated fragment (an interrupted write) is removed and an
    /// `AUDIT_INTERRUPTED` event says so. Anything else (a log cut,
    /// emptied, deleted, replaced or extended by something else) is a
    /// break: an `AUDIT_BREAK` event is written first, chained to what
    /// the log now holds, and the head keeps the break so that `--verify`
    /// fails until `glovebox audit --reseal`.
    ///
    /// [`AuditError::NotDurable`] means the line *was* written (but the
    /// disk did not confirm it, or the head could not be moved); any other
    /// error means it was not. A durable append returns its sync still to
    /// be waited for ([`Pending`]).
    fn append_with(&self, event: &Event, durable: bool) -> Result<Option<Pending>, AuditError> {
        self.append_keyed(&state::key()?, event, durable)
    }

    /// [`Log::append_with`] with `key`.
    fn append_keyed(
        &self,
        key: &[u8],
        event: &Event,
        durable: bool,
    ) -> Result<Option<Pending>, AuditError> {
        let mut file = self.open_locked()?;
        let mut stored = self.load_head()?;
        let head = self.head_of(&stored);
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        let end = self
            .find_end(&mut file, len, head.as_ref(), key)
            .map_err(|e| self.io(e))?;
        let mut head = head.unwrap_or_default();
        let mut events = Vec::new();
        let (mut prev, mut lines, mut close, own) = match end {
            End::Continues {
                mac,
                lines,
                own,
                keep,
                fragment,
            } => {
                if matches!(stored.layout, Layout::Absent) {
                    // This state's first line in this log: its head is
                    // made first, saying where the log ends now (synced,
                    // with its directory). A head that cannot be made (a
                    // full state directory) then leaves nothing written,
                    // and no line of this key is ever in the log without
                    // a head, which the next append could only take for a
                    // head removed (a false `AUDIT_BREAK`). Past this
                    // point the head is moved in place (its slots are
                    // allocated): a move that fails leaves lines past the
                    // head, which chain and are taken in.
                    let first = Head {
                        lines: Some(lines),
                        bytes: Some(keep),
                        mac: mac.clone(),
                        own,
                        log: Some(self.path.clone()),
                        ..Head::default()
                    };
                    stored = self.create_head(&first)?;
                }
                if let Some(bytes) = fragment {
                    file.set_len(keep).map_err(|e| self.io(e))?;
                    use sha2::Digest;
                    events.push(Event {
                        kind: event::AUDIT_INTERRUPTED,
                        fields: vec![
                            ("bytes", bytes.len().to_string()),
                            ("sha256", hex::encode(Sha256::digest(&bytes))),
                            (
                                "detail",
                                "an interrupted write left an unterminated line; it was removed"
                                    .into(),
                            ),
                        ],
                    });
                }
                (mac, lines, false, own)
            }
            End::Broken(reason) => {
                let text = tail(&mut file).map_err(|e| self.io(e))?;
                let lines = count_lines(&mut file).map_err(|e| self.io(e))?;
                let close = !text.is_empty() && !text.ends_with('\n');
                events.push(Event {
                    kind: event::AUDIT_BREAK,
                    fields: vec![
                        (
                            "expected_lines",
                            head.lines.map_or("unknown".into(), |n| n.to_string()),
                        ),
                        ("found_lines", lines.to_string()),
                        ("detail", reason.clone()),
                    ],
                });
                head.broken.push(format!("{}: {reason}", now()));
                eprintln!(
                    "glovebox: the audit log {} was changed outside glovebox: {reason}; `glovebox audit --verify` fails until `glovebox audit --reseal`",
                    self.path.display()
                );
                (last_mac(&text), lines, close, None)
            }
        };
        // Unknown (a head of an older glovebox, or a break): counted once.
        let own = match own {
            Some(n) => n,
            None => count_own(&mut file, key).map_err(|e| self.io(e))?,
        };
        events.push(event.clone());
        let mut out = String::new();
        for e in &events {
            if close {
                out.push('\n'); // close a line left unterminated
                lines += 1;
                close = false;
            }
            let (sealed, m) = chain::seal(key, &prev, &e.render(&key_id(key)));
            out.push_str(&sealed);
            prev = m;
            lines += 1;
        }
        let before = file.metadata().map_err(|e| self.io(e))?.len();
        if let Err(e) = file.write_all(out.as_bytes()) {
            // Leave no half line behind: the call is reported unwritten.
            let _ = file.set_len(before);
            return Err(self.io(e));
        }
        // Exported while the writers' lock is held: in the log's order.
        export::written(&out);
        head.lines = Some(lines);
        head.bytes = Some(before + out.len() as u64);
        head.own = Some(own + events.len() as u64);
        head.mac = prev;
        head.log = Some(self.path.clone());
        self.write_head(&stored, &head, false)
            .map_err(|e| self.not_durable(e))?;
        if !durable {
            return Ok(None);
        }
        // Group commit (see `commit`): the lock is released before the
        // sync, which covers every line written before it starts.
        let file = file.try_clone().map_err(|e| self.not_durable(e))?;
        let meta = file.metadata().map_err(|e| self.not_durable(e))?;
        let group = commit::of(meta.dev(), meta.ino());
        let ticket = group.ticket();
        Ok(Some(Pending {
            log: self.clone(),
            file,
            group,
            ticket,
        }))
    }

    /// Makes what the log and the head say durable: the log, then the
    /// head (`fdatasync` of each: the head is rewritten in place, its size
    /// does not change). The head synced may already count lines written
    /// after the log's sync began; they are covered by the sync their own
    /// durable append waits for, and until then a crash can leave the
    /// head ahead of the log, the window the renamed head of before had
    /// too (a journal commit carried every earlier rename with it).
    /// Makes every line written so far durable (the log, then the head),
    /// at a server's shutdown; a log that does not exist is nothing to
    /// sync.
    pub fn sync_tail(&self) -> Result<(), AuditError> {
        let log = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(e)),
        };
        self.sync(&log).map_err(|e| self.not_durable(e))
    }

    fn sync(&self, log: &fs::File) -> std::io::Result<()> {
        let head = fs::File::open(&self.head)?;
        log.sync_data()?;
        head.sync_data()
    }

    /// Where the log stands against `head` (the writers' lock held).
    fn find_end(
        &self,
        file: &mut fs::File,
        len: u64,
        head: Option<&Head>,
        key: &[u8],
    ) -> std::io::Result<End> {
        let Some(head) = head else {
            if len == 0 {
                return Ok(End::Continues {
                    mac: String::new(),
                    lines: 0,
                    own: Some(0),
                    keep: 0,
                    fragment: None,
                });
            }
            // No head: fine for a log only other states' keys wrote (this
            // state's first line in it), a break if this key wrote any of
            // it (its head was removed).
            let mut text = Vec::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut text)?;
            let text = String::from_utf8_lossy(&text);
            let chain = walk(key, &key_id(key), &text);
            let own = chain.ends.iter().any(|(_, _, own)| *own);
            if own || !chain.problems.is_empty() || chain.other_lines.is_empty() {
                return Ok(End::Broken(format!(
                    "the log holds {len} bytes but glovebox has no head for it (the head was removed, or the log was not written by glovebox)"
                )));
            }
            let keep = chain.ends.last().map_or(0, |(end, _, _)| *end);
            let mut fragment = Vec::new();
            if keep < len {
                file.seek(SeekFrom::Start(keep))?;
                file.read_to_end(&mut fragment)?;
            }
            return Ok(End::Continues {
                mac: chain
                    .ends
                    .last()
                    .map(|(_, m, _)| m.clone())
                    .unwrap_or_default(),
                lines: chain.ends.len() as u64,
                own: Some(0),
                keep,
                fragment: (!fragment.is_empty()).then_some(fragment),
            });
        };
        let (Some(bytes), Some(lines)) = (head.bytes, head.lines) else {
            // A head of an older glovebox: the last mac only.
            let text = tail(file)?;
            let last = last_mac(&text);
            if last != head.mac {
                return Ok(End::Broken(
                    "the log does not end where glovebox last wrote it".into(),
                ));
            }
            let fragment_at =
                len - text.len() as u64 + text.rfind('\n').map_or(0, |i| i as u64 + 1);
            let lines = count_lines(file)?;
            let mut fragment = Vec::new();
            file.seek(SeekFrom::Start(fragment_at))?;
            file.read_to_end(&mut fragment)?;
            return Ok(End::Continues {
                mac: last,
                lines,
                own: None,
                keep: fragment_at,
                fragment: (!fragment.is_empty()).then_some(fragment),
            });
        };
        if len < bytes {
            return Ok(End::Broken(format!(
                "the log is shorter than glovebox left it ({lines} lines, {bytes} bytes; now {len} bytes): lines were removed from its end, or it was emptied, deleted or replaced"
            )));
        }
        if last_line_mac(file, bytes)? != head.mac {
            return Ok(End::Broken(
                "the log does not end where glovebox left it: it was rewritten or replaced".into(),
            ));
        }
        if len == bytes {
            return Ok(End::Continues {
                mac: head.mac.clone(),
                lines,
                own: head.own,
                keep: len,
                fragment: None,
            });
        }
        if len - bytes > MAX_UNRECORDED_BYTES {
            return Ok(End::Broken(format!(
                "{} bytes were added to the log after glovebox's last line",
                len - bytes
            )));
        }
        let mut extra = Vec::new();
        file.seek(SeekFrom::Start(bytes))?;
        file.read_to_end(&mut extra)?;
        let mut prev = head.mac.clone();
        let mut lines = lines;
        let mut own = head.own;
        let mut keep = bytes;
        for raw in extra.split_inclusive(|b| *b == b'\n') {
            if !raw.ends_with(b"\n") {
                return Ok(End::Continues {
                    mac: prev,
                    lines,
                    own,
                    keep,
                    fragment: Some(raw.to_vec()),
                });
            }
            let text = String::from_utf8_lossy(raw);
            match split_line(&text) {
                Some((body, m)) if chain::verifies(key, &prev, body, m) => {
                    prev = m.to_string();
                    lines += 1;
                    own = own.map(|n| n + 1);
                    keep += raw.len() as u64;
                }
                // A line of another state's key (a glovebox started with
                // another state directory): taken in as it is; `--verify`
                // reports it as unverifiable with this key.
                Some((body, m)) if claimed_key_id(body).is_some_and(|k| k != key_id(key)) => {
                    prev = m.to_string();
                    lines += 1;
                    keep += raw.len() as u64;
                }
                _ => {
                    return Ok(End::Broken(
                        "lines that glovebox did not write were added to the log".into(),
                    ))
                }
            }
        }
        Ok(End::Continues {
            mac: prev,
            lines,
            own,
            keep,
            fragment: None,
        })
    }

    /// Every well-formed entry, oldest first.
    pub fn entries(&self) -> Result<Vec<Entry>, AuditError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        Ok(text.lines().filter_map(parse).collect())
    }

    /// The well-formed entries in the last `max_bytes` of the log, oldest
    /// first: memory bounded by `max_bytes` whatever the log's size.
    pub fn recent_entries(&self, max_bytes: u64) -> Result<Vec<Entry>, AuditError> {
        let mut file = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        let start = len.saturating_sub(max_bytes);
        file.seek(SeekFrom::Start(start)).map_err(|e| self.io(e))?;
        let mut bytes = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(e))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = if start > 0 {
            text.split_once('\n').map_or("", |(_, rest)| rest)
        } else {
            &text
        };
        Ok(text.lines().filter_map(parse).collect())
    }

    /// Accepts the log as it now is, after a person looked at what
    /// `--verify` reports: an `AUDIT_RESEALED` event (with `by`, and how
    /// many problems it acknowledges) is appended, the head is moved to
    /// it and its breaks cleared. The problems then present stay
    /// acknowledged only as long as those lines do not change again.
    ///
    /// Like `verify`, never makes a key: with none, nothing can be
    /// acknowledged ([`StateError::KeyMissing`]).
    pub fn reseal(&self, by: &str) -> Result<Verification, AuditError> {
        let state_dir = state::dir()?;
        let Some(key) = state::existing_key(&state_dir)? else {
            return Err(StateError::KeyMissing {
                path: state::key_path(&state_dir),
            }
            .into());
        };
        // Never a log this state's head does not describe: acknowledging
        // it would move the head off the log the server writes (its next
        // line: a false AUDIT_BREAK).
        let head = self.read_head()?;
        if let Some(described) = head.as_ref().and_then(|h| self.describes_other(h)) {
            return Err(AuditError::NotThisLog {
                path: self.path.clone(),
                described,
            });
        }
        // Gone, and the head (of an older glovebox) does not say it was
        // this one: it may be elsewhere.
        let unnamed = head
            .as_ref()
            .is_some_and(|h| h.log.is_none() && h.lines.unwrap_or(0) > 0);
        if unnamed && !self.path.exists() {
            return Err(AuditError::NoLog {
                path: self.path.clone(),
            });
        }
        let mut file = self.open_locked()?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).map_err(|e| self.io(e))?;
        file.read_to_end(&mut bytes).map_err(|e| self.io(e))?;
        let mut stored = self.load_head()?;
        let head = self.head_of(&stored);
        let before = check(&key, &bytes, head.as_ref(), state_dir);
        if matches!(stored.layout, Layout::Absent) {
            // No head yet: one is made before the reseal's line (see
            // `append_keyed`), so that a head that cannot be made leaves
            // nothing written. Until the reseal's own head replaces it,
            // it says that the reseal did not complete (or, for an empty
            // log, that the log is empty).
            let first = if bytes.is_empty() {
                Head {
                    lines: Some(0),
                    bytes: Some(0),
                    own: Some(0),
                    ..Head::default()
                }
            } else {
                Head {
                    broken: vec![format!(
                        "{}: a reseal began on a log with no head and did not complete; run `glovebox audit --reseal` again",
                        now()
                    )],
                    ..Head::default()
                }
            };
            stored = self.create_head(&first)?;
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let close = !text.is_empty() && !text.ends_with('\n');
        let mut lines = text.matches('\n').count() as u64 + u64::from(close);
        let walked = walk(&key, &key_id(&key), &text);
        let own = walked.ends.iter().filter(|(_, _, own)| *own).count() as u64;
        let chain = walked.problems;
        let chain_text: Vec<String> = chain.iter().map(|(_, p)| p.clone()).collect();
        let event = Event {
            kind: event::AUDIT_RESEALED,
            fields: vec![
                ("by", client_label(by)),
                ("problems", before.problems.len().to_string()),
                ("acknowledged", chain_text.len().to_string()),
                ("digest", digest(&chain_text)),
            ],
        };
        let prev = last_mac(&text);
        let (sealed, m) = chain::seal(&key, &prev, &event.render(&key_id(&key)));
        let out = format!("{}{sealed}", if close { "\n" } else { "" });
        let len = bytes.len() as u64;
        if let Err(e) = file.write_all(out.as_bytes()) {
            let _ = file.set_len(len);
            return Err(self.io(e));
        }
        file.sync_data().map_err(|e| self.not_durable(e))?;
        lines += 1;
        let head = Head {
            lines: Some(lines),
            bytes: Some(len + out.len() as u64),
            mac: m,
            own: Some(own + 1),
            broken: Vec::new(),
            acknowledged: Some(head::Acknowledged {
                line: lines,
                digest: digest(&chain_text),
                count: chain_text.len(),
            }),
            log: Some(self.path.clone()),
        };
        self.write_head(&stored, &head, true)
            .map_err(|e| self.not_durable(e))?;
        Ok(before)
    }
}

/// The end of `file`, from the start of its last complete line (or the
/// whole file when it is short): enough to chain to, without reading a log
/// that grows with every call.
fn tail(file: &mut std::fs::File) -> std::io::Result<String> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut window: u64 = 8 * 1024;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // Enough when the window holds a full line before the last one
        // (two newlines: the end of an earlier line and of the last one).
        if start == 0 || text.matches('\n').count() >= 2 {
            return Ok(if start == 0 {
                text
            } else {
                // Drop the partial first line of the window.
                text.split_once('\n')
                    .map_or(text.clone(), |(_, rest)| rest.to_string())
            });
        }
        window = window.saturating_mul(4);
    }
}

/// Complete lines in `file` signed with `key` (the whole log is read).
fn count_own(file: &mut std::fs::File, key: &[u8]) -> std::io::Result<u64> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    let chain = walk(key, &key_id(key), &String::from_utf8_lossy(&bytes));
    Ok(chain.ends.iter().filter(|(_, _, own)| *own).count() as u64)
}

/// Complete lines in `file`, read in blocks.
fn count_lines(file: &mut std::fs::File) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let got = file.read(&mut buf)?;
        if got == 0 {
            return Ok(n);
        }
        n += buf[..got].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
