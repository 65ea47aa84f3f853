//! The metadata family in the namespace-free jail: chmod, chown, utimes
//! and extended attributes, decided call by call by the supervisor.
//!
//! Without a mount namespace there is no read-only tree to refuse them, and
//! Landlock does not govern them: left alone, a tool could chmod any host
//! file its uid owns. Refusing them outright would break `chmod +x`,
//! `touch -d`, `cp -p`, `tar x` and `git commit` inside write grants (a
//! false refusal). So the jail's seccomp filter hands these calls
//! ([`notified_calls`]) to the supervisor (`SECCOMP_RET_USER_NOTIF`), which
//! for each one:
//! 1. decodes the call ([`decode`]) and reads its path and values from the
//!    caller's memory (once: the caller cannot change what was decided);
//! 2. opens the target itself with `O_PATH` (no following of a final link
//!    where the call says so), relative to the caller's working directory
//!    or directory fd (`/proc/PID/cwd`, `/proc/PID/fd/N`; the path itself
//!    resolved with `RESOLVE_NO_MAGICLINKS`, so no `/proc` link takes the
//!    supervisor's walk where the caller's could not go), then checks the
//!    notification is still valid (`SECCOMP_IOCTL_NOTIF_ID_VALID`: the pid
//!    still names the caller);
//! 3. finds where that very file lies (its path through
//!    `/proc/self/fd/N`, confirmed by comparing device and inode with an
//!    `lstat` of that path: a file unlinked or replaced meanwhile is
//!    refused) and asks [`decide`] — a pure function — whether the change
//!    is allowed: inside a write grant, outside the protected paths, owned
//!    by the caller's uid, no setuid/setgid bit, no chown to another uid,
//!    no device node, only `user.` extended attributes (others are
//!    `EOPNOTSUPP`, so `cp -p` falls back to the mode);
//! 4. performs the change itself on its handle (never
//!    `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, which would let the caller's
//!    path be swapped between the check and the call) and answers with
//!    the result, or `EPERM`.
//!
//! A file cannot be moved into a write grant from outside, nor out of it,
//! by the jailed process (Landlock refuses such renames and links), so a
//! file found inside a grant stays there while it is changed. Watches
//! (`inotify`, `fanotify`), `setxattrat`/`removexattrat`, `file_setattr`
//! and the inode-flag `ioctl`s (`chattr`) stay refused by the filter
//! itself.
//!
//! The supervisor side is one thread per call ([`Watch`]), which ends
//! when the call's processes are gone or the call ends; every answer is
//! given without waiting on anything the jail controls.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::sys;

mod decode;
pub use decode::{decode, notified_calls, Call, Request, Target, TimesAt};

/// Errors starting the supervisor's side.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The thread that answers the notifications could not start.
    #[error("failed to start the metadata supervisor (chmod, chown, utimes inside write grants); retry, or end some processes")]
    Start {
        #[source]
        source: std::io::Error,
    },
    /// The kernel's notification structures differ from this build's.
    #[error("the kernel's seccomp notification structures have unexpected sizes; use a kernel from the same generation as the libc headers")]
    Sizes,
}

/// What a call may change: the write grants and protected paths (both as
/// real paths, no links), and the caller's identity (the supervisor's: a
/// namespace-free jail runs with the supervisor's uid and groups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Real paths the call may write.
    pub write: Vec<PathBuf>,
    /// Real paths it may never change, inside write grants too.
    pub protected: Vec<PathBuf>,
    /// The caller's effective uid.
    pub uid: u32,
    /// The caller's groups (effective gid first).
    pub groups: Vec<u32>,
}

impl Grants {
    /// The grants for `write` and `protected` as given (links resolved
    /// where they exist) and the supervisor's own identity.
    pub fn new(write: &[PathBuf], protected: &[PathBuf]) -> Grants {
        let real = |list: &[PathBuf]| -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = list
                .iter()
                .flat_map(|p| [std::fs::canonicalize(p).ok(), Some(p.clone())])
                .flatten()
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let (uid, gid) = sys::ids();
        let mut groups = vec![gid];
        groups.extend(sys::groups());
        Grants {
            // A write grant is only ever taken in its real form (the file
            // found is always named by its real path).
            write: write
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect(),
            protected: real(protected),
            uid,
            groups,
        }
    }
}

/// What kind of file the target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Link,
    /// A character or block device.
    Device,
    /// A FIFO or socket.
    Other,
}

impl Kind {
    /// The kind of a file with `st_mode` `mode`.
    pub fn of(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Link,
            libc::S_IFCHR | libc::S_IFBLK => Kind::Device,
            _ => Kind::Other,
        }
    }
}

/// The file a call was found to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    /// Its real path.
    pub path: &'a Path,
    /// Its owner.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
    /// Its kind.
    pub kind: Kind,
}

/// What a decided change looks like to [`decide`] (the values read from
/// the caller's memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    /// New mode bits.
    Mode(u32),
    /// New owner/group (`None`: unchanged).
    Owner { uid: Option<u32>, gid: Option<u32> },
    /// New times; `explicit` when a time other than "now" or "omit" is set.
    Times { explicit: bool },
    /// Set or remove the extended attribute `name`.
    Xattr { name: &'a [u8] },
}

/// Whether `change` to `file` is allowed under `grants`: `Ok(())`, or the
/// errno to answer.
pub fn decide(grants: &Grants, file: &Found<'_>, change: &Change<'_>) -> Result<(), i32> {
    let p = file.path;
    if !p.is_absolute()
        || p.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::RootDir
            )
        })
    {
        return Err(libc::EPERM);
    }
    if !grants.write.iter().any(|w| p.starts_with(w)) {
        return Err(libc::EPERM);
    }
    if grants.protected.iter().any(|x| p.starts_with(x)) {
        return Err(libc::EPERM);
    }
    if file.kind == Kind::Device {
        return Err(libc::EPERM);
    }
    let owner = file.uid == grants.uid;
    match change {
        Change::Mode(mode) => {
            if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                return Err(libc::EPERM);
            }
            if file.kind == Kind::Link {
                return Err(libc::EOPNOTSUPP);
            }
            if !owner {
                return Err(libc::EPERM);
            }
        }
        Change::Owner { uid, gid } => {
            if !owner {
                // Without CAP_CHOWN only the owner may change the group,
                // and nobody the owner; a no-op is refused the same way.
                return Err(libc::EPERM);
            }
            if uid.is_some_and(|u| u != file.uid) {
                return Err(libc::EPERM);
            }
            if gid.is_some_and(|g| g != file.gid && !grants.groups.contains(&g)) {
                return Err(libc::EPERM);
            }
        }
        Change::Times { explicit } => {
            // "Now" needs only write access, which the kernel checks for a
            // non-root supervisor (the caller's own uid); explicit times,
            // or any time for a root supervisor, need the owner.
            if (*explicit || grants.uid == 0) && !owner {
                return Err(libc::EPERM);
            }
        }
        Change::Xattr { name } => {
            // ACLs, capabilities, security labels: "not supported here",
            // which copying tools take as a cue to fall back to the mode.
            if !name.starts_with(b"user.") {
                return Err(libc::EOPNOTSUPP);
            }
            if file.kind == Kind::Link || !owner {
                return Err(libc::EPERM);
            }
        }
    }
    Ok(())
}

/// The supervisor's thread for one call: answers the call's
/// notifications until its processes are gone; dropping it stops and joins
/// the thread.
pub struct Watch {
    stop: Option<OwnedFd>,
    /// Closed (disconnected) when the thread ends.
    ended: Option<std::sync::mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long the end of a call waits for the thread to finish an answer in
/// progress before leaving it behind (an answer waits on nothing the jail
/// controls, but a hung filesystem could hold an `open`).
const JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Watch {
    /// Starts answering the notifications of `listener` under `grants`.
    ///
    /// With `broker`, `connect` is answered by [`super::broker::answer`].
    /// With `forks`, the calls that make processes are counted against
    /// the call's limit ([`super::forks`]). Learn mode's watch is
    /// [`Watch::start_early`].
    pub fn start(
        listener: OwnedFd,
        grants: Grants,
        broker: Option<super::broker::Broker>,
        forks: Option<super::forks::ForkLimit>,
    ) -> Result<Watch, MetadataError> {
        if !sys::notif_sizes_match() {
            return Err(MetadataError::Sizes);
        }
        let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| MetadataError::Start { source: e.into() })?;
        let (done, ended) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("glovebox-metadata".into())
            .spawn(move || {
                serve(
                    &listener,
                    &stop_r,
                    &grants,
                    broker.as_ref(),
                    forks.as_ref(),
                    None,
                );
                drop(done);
            })
            .map_err(|source| MetadataError::Start { source })?;
        Ok(Watch {
            stop: Some(stop_w),
            ended: Some(ended),
            thread: Some(thread),
        })
    }
}

/// What the supervisor's thread needs besides the listener, known only
/// once the child has exec'd (its pid, its broker).
pub struct Context {
    /// The metadata decisions' grants.
    pub grants: Grants,
    /// The connect broker, behind it.
    pub broker: Option<super::broker::Broker>,
    /// The process limit counted here.
    pub forks: Option<super::forks::ForkLimit>,
}

/// Learn mode's watch, started before the child execs: its own `execve`
/// is an observed call, which must be answered while the supervisor
/// still waits for the exec ([`Watch::start_early`]).
pub struct EarlyWatch {
    watch: Watch,
    context: std::sync::mpsc::Sender<Context>,
}

impl EarlyWatch {
    /// Hands the thread its context: from now on it answers every call.
    pub fn provide(self, context: Context) -> Watch {
        // A thread already gone (its call ended) needs none.
        let _ = self.context.send(context);
        self.watch
    }
}

impl Watch {
    /// Learn mode: a thread that receives the listener from `handoff`
    /// (the child sends it right before it execs), records and lets go
    /// on the observed calls at once, and answers the others with the
    /// context given later ([`EarlyWatch::provide`]), waiting for it
    /// (they come only after the exec, when it is on its way).
    pub fn start_early(
        handoff: OwnedFd,
        observer: std::sync::Arc<super::observe::Observer>,
    ) -> Result<EarlyWatch, MetadataError> {
        if !sys::notif_sizes_match() {
            return Err(MetadataError::Sizes);
        }
        let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| MetadataError::Start { source: e.into() })?;
        let (done, ended) = std::sync::mpsc::channel::<()>();
        let (context, given) = std::sync::mpsc::channel::<Context>();
        let thread = std::thread::Builder::new()
            .name("glovebox-observe".into())
            .spawn(move || {
                serve_early(&handoff, &stop_r, &observer, &given);
                drop(done);
            })
            .map_err(|source| MetadataError::Start { source })?;
        Ok(EarlyWatch {
            watch: Watch {
                stop: Some(stop_w),
                ended: Some(ended),
                thread: Some(thread),
            },
            context,
        })
    }
}

fn serve_early(
    handoff: &OwnedFd,
    stop: &OwnedFd,
    observer: &super::observe::Observer,
    given: &std::sync::mpsc::Receiver<Context>,
) {
    // The listener, or the end: every end of the hand-off closed (the
    // child failed before sending it), or the call stopped.
    let Ok((_, stopped)) = sys::poll_two(handoff.as_raw_fd(), stop.as_raw_fd()) else {
        return;
    };
    if stopped {
        return;
    }
    let Ok(listener) = sys::recv_fd(handoff.as_raw_fd()) else {
        return;
    };
    let l = listener.as_raw_fd();
    while let Some(notice) = next_notice(l, stop) {
        if super::observe::is_observed(i64::from(notice.nr)) {
            observer.record(&notice);
            let _ = sys::notif_continue(l, notice.id);
            continue;
        }
        // Another notified call: the child has exec'd, its context is
        // coming. Without it (the call failed) nothing is let through.
        let Ok(ctx) = given.recv() else {
            let _ = sys::notif_send(l, notice.id, libc::EPERM);
            return;
        };
        respond(
            l,
            &notice,
            &ctx.grants,
            ctx.broker.as_ref(),
            ctx.forks.as_ref(),
            None,
        );
        serve(
            &listener,
            stop,
            &ctx.grants,
            ctx.broker.as_ref(),
            ctx.forks.as_ref(),
            Some(observer),
        );
        return;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Closing the write end wakes the thread's poll.
        drop(self.stop.take());
        let finished = self.ended.take().is_none_or(|rx| {
            matches!(
                rx.recv_timeout(JOIN_WAIT),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) | Ok(())
            )
        });
        if let Some(t) = self.thread.take() {
            if finished {
                let _ = t.join();
            }
            // Otherwise the thread is left to finish on its own: the call
            // never waits on it for ever.
        }
    }
}

fn serve(
    listener: &OwnedFd,
    stop: &OwnedFd,
    grants: &Grants,
    broker: Option<&super::broker::Broker>,
    forks: Option<&super::forks::ForkLimit>,
    observer: Option<&super::observe::Observer>,
) {
    let l = listener.as_raw_fd();
    while let Some(notice) = next_notice(l, stop) {
        respond(l, &notice, grants, broker, forks, observer);
    }
}

/// The next notification on the listener `l`, or `None` once the call is
/// over: stopped, or hung up (every process of the call is gone, so a
/// receive would wait for a notification that can never come).
fn next_notice(l: RawFd, stop: &OwnedFd) -> Option<sys::Notice> {
    loop {
        let (events, stopped) = sys::poll_two(l, stop.as_raw_fd()).ok()?;
        if stopped || events & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return None;
        }
        if events & libc::POLLIN == 0 {
            continue;
        }
        match sys::notif_recv(l) {
            Ok(Some(n)) => return Some(n),
            Ok(None) => continue,
            // POLLHUP with nothing pending: every process of the call is
            // gone (the filter was freed).
            Err(_) => return None,
        }
    }
}

/// Answers one notification: learn mode's observed calls recorded and let
/// go on (the jail's grants decide them; the observer decides nothing),
/// forks counted, `connect` to the broker, the metadata family decided.
fn respond(
    l: RawFd,
    notice: &sys::Notice,
    grants: &Grants,
    broker: Option<&super::broker::Broker>,
    forks: Option<&super::forks::ForkLimit>,
    observer: Option<&super::observe::Observer>,
) {
    let nr = i64::from(notice.nr);
    if let Some(o) = observer.filter(|_| super::observe::is_observed(nr)) {
        o.record(notice);
        let _ = sys::notif_continue(l, notice.id);
        return;
    }
    if let Some(f) = forks.filter(|_| super::forks::is_counted(nr)) {
        if f.admit() {
            let _ = sys::notif_continue(l, notice.id);
        } else {
            let _ = sys::notif_send(l, notice.id, libc::EAGAIN);
        }
        return;
    }
    let answered = match broker {
        Some(b) if nr == libc::SYS_connect => super::broker::answer(l, notice, b),
        _ => answer(l, notice, grants),
    };
    let _ = sys::notif_send(l, notice.id, answered.err().unwrap_or(0));
}

/// Reads a NUL-terminated string of at most `PATH_MAX` bytes at `addr` in
/// `pid`, page by page (a string may end just before an unmapped page).
pub(super) fn read_cstr(pid: u32, addr: u64, max: usize) -> Result<CString, i32> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let to_page = 4096 - (at % 4096) as usize;
        let mut buf = vec![0u8; to_page.min(max - out.len())];
        let n = sys::read_process(pid, at, &mut buf).map_err(|_| libc::EFAULT)?;
        if n == 0 {
            return Err(libc::EFAULT);
        }
        if let Some(end) = buf[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..end]);
            return CString::new(out).map_err(|_| libc::EINVAL);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Err(libc::ENAMETOOLONG)
}

fn read_bytes(pid: u32, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let n = sys::read_process(pid, addr, &mut buf).map_err(|_| libc::EFAULT)?;
    if n != len {
        return Err(libc::EFAULT);
    }
    Ok(buf)
}

fn read_i64s<const N: usize>(pid: u32, addr: u64) -> Result<[i64; N], i32> {
    let raw = read_bytes(pid, addr, N * 8)?;
    let mut out = [0i64; N];
    for (i, chunk) in raw.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        out[i] = i64::from_ne_bytes(b);
    }
    Ok(out)
}

/// The descriptor a path names when it is one of the caller's own
/// `/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/dev/fd/N` or
/// `/proc/PID/fd/N` (its pid): those are the caller's, not the
/// supervisor's, and are opened as that descriptor. Any other magic link
/// (another `/proc` entry's `fd`, `cwd`, `root`) is refused when the path
/// is resolved.
fn callers_fd(pid: u32, path: &[u8]) -> Option<i32> {
    let own = format!("/proc/{pid}/fd/");
    let rest = [
        &b"/proc/self/fd/"[..],
        b"/proc/thread-self/fd/",
        b"/dev/fd/",
        own.as_bytes(),
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(*prefix))?;
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// Opens a handle on the file `call` names, from the supervisor's side.
fn open_target(pid: u32, target: &Target) -> Result<OwnedFd, i32> {
    let proc_fd = |n: i32| -> Result<OwnedFd, i32> {
        if n < 0 {
            return Err(libc::EBADF);
        }
        let p = CString::new(format!("/proc/{pid}/fd/{n}")).map_err(|_| libc::EINVAL)?;
        sys::open_path(libc::AT_FDCWD, &p, 0).map_err(|e| {
            if e == libc::ENOENT {
                libc::EBADF
            } else {
                e
            }
        })
    };
    match target {
        Target::Fd(n) => proc_fd(*n),
        Target::Path {
            dir,
            addr,
            follow,
            empty_ok,
        } => {
            let raw = read_cstr(pid, *addr, libc::PATH_MAX as usize)?;
            let base = if *dir == libc::AT_FDCWD {
                let p = CString::new(format!("/proc/{pid}/cwd")).map_err(|_| libc::EINVAL)?;
                sys::open_path(libc::AT_FDCWD, &p, libc::O_DIRECTORY)?
            } else {
                proc_fd(*dir)?
            };
            if raw.as_bytes().is_empty() {
                return if *empty_ok {
                    Ok(base)
                } else {
                    Err(libc::ENOENT)
                };
            }
            if let Some(n) = callers_fd(pid, raw.as_bytes()) {
                return proc_fd(n);
            }
            // The supervisor resolves the path with its own view: no magic
            // link (another process's /proc entries, its own /proc/self)
            // may take it anywhere the caller's own walk could not.
            use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
            let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
            if !*follow {
                flags |= OFlag::O_NOFOLLOW;
            }
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
            nix::fcntl::openat2(&base, raw.as_c_str(), how).map_err(|e| e as i32)
        }
    }
}

/// Where the file behind `handle` lies now, confirmed: the path the
/// kernel gives for it names the same device and inode.
fn locate(handle: RawFd) -> Result<(PathBuf, libc::stat), i32> {
    let link = std::fs::read_link(format!("/proc/self/fd/{handle}")).map_err(|_| libc::EPERM)?;
    let st = sys::fstat(handle)?;
    let c = CString::new(link.as_os_str().as_bytes()).map_err(|_| libc::EPERM)?;
    let again = sys::lstat(&c).map_err(|_| libc::EPERM)?;
    if again.st_dev != st.st_dev || again.st_ino != st.st_ino {
        return Err(libc::EPERM);
    }
    Ok((link, st))
}

fn times_of(pid: u32, at: TimesAt) -> Result<Option<[libc::timespec; 2]>, i32> {
    let ts = |sec: i64, nsec: i64| libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    Ok(match at {
        TimesAt::Now => None,
        TimesAt::Timespec(a) => {
            let v = read_i64s::<4>(pid, a)?;
            Some([ts(v[0], v[1]), ts(v[2], v[3])])
        }
        TimesAt::Timeval(a) => {
            let v = read_i64s::<4>(pid, a)?;
            for usec in [v[1], v[3]] {
                if !(0..1_000_000).contains(&usec) {
                    return Err(libc::EINVAL);
                }
            }
            Some([ts(v[0], v[1] * 1000), ts(v[2], v[3] * 1000)])
        }
        TimesAt::Utimbuf(a) => {
            let v = read_i64s::<2>(pid, a)?;
            Some([ts(v[0], 0), ts(v[1], 0)])
        }
    })
}

/// Handles one notification: `Ok(())` when the change was made, else the
/// errno for the caller.
fn answer(listener: RawFd, n: &sys::Notice, grants: &Grants) -> Result<(), i32> {
    let call = decode(i64::from(n.nr), n.args).ok_or(libc::EPERM)?;
    let handle = open_target(n.pid, &call.target)?;
    // Everything read from /proc/PID was the caller's only if the caller
    // is still waiting on this notification.
    if !sys::notif_id_valid(listener, n.id) {
        return Err(libc::ESRCH);
    }
    let (path, st) = locate(handle.as_raw_fd())?;
    let found = Found {
        path: &path,
        uid: st.st_uid,
        gid: st.st_gid,
        kind: Kind::of(st.st_mode),
    };
    // Values read from the caller's memory after the check above were
    // the caller's only if it is still waiting: checked again before
    // acting.
    let still = || {
        if sys::notif_id_valid(listener, n.id) {
            Ok(())
        } else {
            Err(libc::ESRCH)
        }
    };
    let proc_path =
        || CString::new(format!("/proc/self/fd/{}", handle.as_raw_fd())).map_err(|_| libc::EINVAL);
    match call.request {
        Request::Mode(mode) => {
            decide(grants, &found, &Change::Mode(mode))?;
            sys::chmod(&proc_path()?, mode)
        }
        Request::Owner { uid, gid } => {
            decide(grants, &found, &Change::Owner { uid, gid })?;
            sys::fchown_handle(
                handle.as_raw_fd(),
                uid.unwrap_or(u32::MAX),
                gid.unwrap_or(u32::MAX),
            )
        }
        Request::Times(at) => {
            let times = times_of(n.pid, at)?;
            let explicit = times.is_some_and(|t| {
                t.iter()
                    .any(|x| x.tv_nsec != libc::UTIME_NOW && x.tv_nsec != libc::UTIME_OMIT)
            });
            decide(grants, &found, &Change::Times { explicit })?;
            still()?;
            sys::utimens_handle(handle.as_raw_fd(), times.as_ref())
        }
        Request::SetXattr {
            name,
            value,
            size,
            flags,
        } => {
            let name = read_cstr(n.pid, name, 256)?;
            decide(
                grants,
                &found,
                &Change::Xattr {
                    name: name.as_bytes(),
                },
            )?;
            let size = usize::try_from(size).map_err(|_| libc::E2BIG)?;
            if size > 65536 {
                return Err(libc::E2BIG);
            }
            let value = read_bytes(n.pid, value, size)?;
            still()?;
            sys::setxattr(&proc_path()?, &name, &value, flags)
        }
        Request::RemoveXattr { name } => {
            let name = read_cstr(n.pid, name, 256)?;
            decide(
                grants,
                &found,
                &Change::Xattr {
                    name: name.as_bytes(),
                },
            )?;
            still()?;
            sys::removexattr(&proc_path()?, &name)
        }
    }
}

#[cfg(test)]
#[path = "metadata_tests.rs"]
mod tests;
