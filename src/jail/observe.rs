//! Learn mode's observer: every path the call's process tree opens,
//! executes, creates, removes or renames, seen by the supervisor.
//!
//! The jail's seccomp notify program hands these calls ([`observed_calls`])
//! to the supervisor (`SECCOMP_RET_USER_NOTIF`, inherited by every process
//! and thread of the call and impossible to remove), which reads the path
//! from the caller's memory, makes it absolute against the caller's working
//! directory or directory descriptor (`/proc/TID/cwd`, `/proc/TID/fd/N`),
//! records it, and lets the call go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
//! The observer decides nothing: the jail's grants (mount tree, Landlock,
//! the deny filter) still decide every call. The other ways to name a file
//! are closed by the deny filter in every jail (`openat2` and `io_uring`
//! answer `ENOSYS`, `open_by_handle_at` is refused), so a tool cannot open
//! a file without the observer seeing the call.
//!
//! What the supervisor reads can be raced: the caller (or another of its
//! threads) may change the path in memory after the supervisor read it and
//! before the kernel does (TOCTOU). That can only make the record *miss*
//! what was really opened or name something that was not; a proposal built
//! from it then grants less than the tool used, or a path the tool did not
//! need but that was readable in the learning run anyway, and the enforcing
//! re-run fails closed on the missing grant. It never widens what any
//! enforcing call may do: learn mode only proposes, a person applies.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::sys;

/// At most this many accesses are kept per learning run (a tool that opens
/// more is still observed: the rest are counted, and the proposal says so).
const MAX_RECORDS: usize = 200_000;

/// What a call did with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Opened for reading.
    Read,
    /// Executed.
    Exec,
    /// Opened for writing (or truncated).
    Write,
    /// Created (a file, directory, link or node).
    Create,
    /// Removed or renamed away.
    Remove,
}

/// One observed access.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Access {
    /// What was done.
    pub op: Op,
    /// The absolute path as the caller named it (lexically normalised,
    /// links not followed).
    pub path: PathBuf,
    /// The calling process's name (`/proc/TID/comm`).
    pub program: String,
}

/// The accesses of one learning run, filled by the supervisor's thread.
#[derive(Debug, Default)]
pub struct Observer {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    accesses: Vec<Access>,
    dropped: u64,
    hosts: Vec<(String, u16)>,
    secrets: Vec<SecretSent>,
}

/// A declared secret the call sent (its placeholder, through the egress
/// proxy), per host: names and counts, never a value. Filled by the
/// caller from the proxy's log (the jail knows no secrets).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecretSent {
    /// The secret's name.
    pub secret: String,
    /// The host it was sent to, as the tool named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Requests that got the real value (swapped in or injected): the
    /// secret's own hosts.
    pub delivered: u64,
    /// Requests that carried only the placeholder (a host the secret is
    /// not for).
    pub refused: u64,
}

impl Observer {
    /// An empty observer.
    pub fn new() -> Observer {
        Observer::default()
    }

    /// The accesses so far, and how many more were not kept.
    pub fn accesses(&self) -> (Vec<Access>, u64) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (inner.accesses.clone(), inner.dropped)
    }

    /// Records a host the call reached through the egress proxy.
    pub fn record_host(&self, host: &str, port: u16) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !inner.hosts.iter().any(|(h, p)| h == host && *p == port) {
            inner.hosts.push((host.to_string(), port));
        }
    }

    /// Records a use of a secret on a host (counts add up).
    pub fn record_secret(&self, sent: SecretSent) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let at = inner
            .secrets
            .iter()
            .position(|s| s.secret == sent.secret && s.host == sent.host && s.port == sent.port);
        match at {
            Some(i) => {
                let s = &mut inner.secrets[i];
                s.delivered = s.delivered.saturating_add(sent.delivered);
                s.refused = s.refused.saturating_add(sent.refused);
            }
            None if inner.secrets.len() < MAX_RECORDS => inner.secrets.push(sent),
            None => inner.dropped += 1,
        }
    }

    /// The secrets sent, per host, in the order first seen.
    pub fn secrets(&self) -> Vec<SecretSent> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.secrets.clone()
    }

    /// The hosts reached, in the order first seen.
    pub fn hosts(&self) -> Vec<(String, u16)> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.hosts.clone()
    }

    fn push(&self, access: Access) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.accesses.len() < MAX_RECORDS {
            inner.accesses.push(access);
        } else {
            inner.dropped += 1;
        }
    }

    /// Records the call of notification `n` (one of [`observed_calls`]).
    /// Never fails: what cannot be read is not recorded (see the module's
    /// note on races: a miss only narrows).
    pub(super) fn record(&self, n: &sys::Notice) {
        let nr = i64::from(n.nr);
        for (dirfd, addr, op) in decode(nr, n.args) {
            let Ok(name) = super::metadata::read_cstr(n.pid, addr, libc::PATH_MAX as usize) else {
                continue;
            };
            let name = Path::new(std::ffi::OsStr::from_bytes(name.as_bytes()));
            let Some(path) = absolute(n.pid, dirfd, name) else {
                continue;
            };
            let program = std::fs::read_to_string(format!("/proc/{}/comm", n.pid))
                .map(|s| s.trim_end().to_string())
                .unwrap_or_default();
            self.push(Access { op, path, program });
        }
    }
}

/// The refusal of a learning run where the jail cannot observe every
/// access (no seccomp user notification: gVisor, a degraded run without
/// seccomp).
pub fn unavailable() -> super::JailError {
    super::JailError::Unavailable {
        feature: "learn mode: seccomp user notification, which learn mode needs to see every file the tool opens (without it the observation would be incomplete, so nothing is learned here); run `glovebox learn` on a kernel with seccomp user notification (Linux 5.5+, not gVisor)".into(),
    }
}

/// The refusal of a learning run whose child could not install the
/// observing filter with its listener (`errno`: the kernel or a
/// container's seccomp profile refuses notification listeners).
pub fn refused(errno: i32) -> super::JailError {
    super::JailError::Unavailable {
        feature: format!(
            "learn mode: seccomp user notification, which learn mode needs to see every file the tool opens, was refused here ({}); nothing is learned where the observation would be incomplete: run `glovebox learn` on a host or container that allows seccomp notification listeners (not gVisor)",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// The calls handed to the observer.
pub fn observed_calls() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_openat,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_unlinkat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_truncate,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_mkdir,
        libc::SYS_mknod,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_link,
        libc::SYS_symlink,
    ]);
    v
}

/// Whether `nr` is one of [`observed_calls`].
pub fn is_observed(nr: libc::c_long) -> bool {
    observed_calls().contains(&nr)
}

const CWD: i64 = libc::AT_FDCWD as i64;

/// The op of an `open` with `flags`.
fn open_op(flags: u64) -> Op {
    let f = flags as i32;
    if f & libc::O_CREAT != 0 {
        Op::Create
    } else if f & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) != 0 {
        Op::Write
    } else {
        Op::Read
    }
}

/// The paths a call names: (directory fd or `AT_FDCWD`, the path's
/// address, what is done to it). Pure.
pub fn decode(nr: i64, a: [u64; 6]) -> Vec<(i64, u64, Op)> {
    let fd = |x: u64| x as i32 as i64;
    #[cfg(target_arch = "x86_64")]
    {
        let legacy = match nr {
            libc::SYS_open => Some(vec![(CWD, a[0], open_op(a[1]))]),
            libc::SYS_creat => Some(vec![(CWD, a[0], Op::Create)]),
            libc::SYS_mkdir | libc::SYS_mknod => Some(vec![(CWD, a[0], Op::Create)]),
            libc::SYS_rmdir | libc::SYS_unlink => Some(vec![(CWD, a[0], Op::Remove)]),
            libc::SYS_rename => Some(vec![(CWD, a[0], Op::Remove), (CWD, a[1], Op::Create)]),
            libc::SYS_link => Some(vec![(CWD, a[0], Op::Read), (CWD, a[1], Op::Create)]),
            libc::SYS_symlink => Some(vec![(CWD, a[1], Op::Create)]),
            _ => None,
        };
        if let Some(v) = legacy {
            return v;
        }
    }
    match nr {
        libc::SYS_openat => vec![(fd(a[0]), a[1], open_op(a[2]))],
        libc::SYS_execve => vec![(CWD, a[0], Op::Exec)],
        libc::SYS_execveat => vec![(fd(a[0]), a[1], Op::Exec)],
        libc::SYS_mkdirat | libc::SYS_mknodat => vec![(fd(a[0]), a[1], Op::Create)],
        libc::SYS_unlinkat => vec![(fd(a[0]), a[1], Op::Remove)],
        libc::SYS_renameat | libc::SYS_renameat2 => {
            vec![(fd(a[0]), a[1], Op::Remove), (fd(a[2]), a[3], Op::Create)]
        }
        libc::SYS_linkat => vec![(fd(a[0]), a[1], Op::Read), (fd(a[2]), a[3], Op::Create)],
        libc::SYS_symlinkat => vec![(fd(a[1]), a[2], Op::Create)],
        libc::SYS_truncate => vec![(CWD, a[0], Op::Write)],
        _ => Vec::new(),
    }
}

/// `name` made absolute against the caller's working directory or its
/// descriptor `dirfd`, normalised lexically; `None` when the base cannot
/// be read (the caller is gone) or names no path (an anonymous file).
fn absolute(tid: u32, dirfd: i64, name: &Path) -> Option<PathBuf> {
    let joined = if name.is_absolute() {
        name.to_path_buf()
    } else {
        let base = if dirfd == CWD {
            std::fs::read_link(format!("/proc/{tid}/cwd")).ok()?
        } else {
            std::fs::read_link(format!("/proc/{tid}/fd/{dirfd}")).ok()?
        };
        if !base.is_absolute() {
            return None;
        }
        if name.as_os_str().is_empty() {
            base
        } else {
            base.join(name)
        }
    };
    super::hold::clean(&joined)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_open_for_writing_or_creating_is_not_a_read() {
        let rd = decode(libc::SYS_openat, [0, 1, libc::O_RDONLY as u64, 0, 0, 0]);
        assert_eq!(rd[0].2, Op::Read);
        let wr = decode(libc::SYS_openat, [0, 1, libc::O_WRONLY as u64, 0, 0, 0]);
        assert_eq!(wr[0].2, Op::Write);
        let cr = decode(
            libc::SYS_openat,
            [0, 1, (libc::O_RDWR | libc::O_CREAT) as u64, 0, 0, 0],
        );
        assert_eq!(cr[0].2, Op::Create);
        let tr = decode(libc::SYS_openat, [0, 1, libc::O_TRUNC as u64, 0, 0, 0]);
        assert_eq!(tr[0].2, Op::Write);
    }

    #[test]
    fn a_rename_names_both_ends_and_every_observed_call_decodes() {
        let r = decode(libc::SYS_renameat2, [3, 10, 4, 20, 0, 0]);
        assert_eq!(r, vec![(3, 10, Op::Remove), (4, 20, Op::Create)]);
        for nr in observed_calls() {
            assert!(!decode(nr, [0; 6]).is_empty(), "{nr} decodes to nothing");
            assert!(is_observed(nr));
        }
        assert!(!is_observed(libc::SYS_connect));
        // AT_FDCWD survives the register's width.
        let at = decode(libc::SYS_openat, [libc::AT_FDCWD as u64, 1, 0, 0, 0, 0]);
        assert_eq!(at[0].0, CWD);
    }

    #[test]
    fn observed_calls_are_none_of_the_other_notified_calls() {
        for nr in observed_calls() {
            assert!(!super::super::metadata::notified_calls().contains(&nr));
            assert!(!super::super::forks::is_counted(nr));
            assert_ne!(nr, libc::SYS_connect);
        }
    }

    #[test]
    fn the_observing_filter_keeps_the_deny_program_and_always_notifies() {
        use super::super::seccomp::{self, Sockets};
        for (sockets, metadata) in [
            (Sockets::None, false),
            (Sockets::None, true),
            (Sockets::Brokered, true),
        ] {
            let base = seccomp::filter_for(sockets, metadata).unwrap();
            let f = seccomp::observing(base, sockets, metadata, false).unwrap();
            assert_eq!(f.deny, base.deny, "the deny list is the call's own");
            assert!(f.notify.is_some(), "learn mode always has a listener");
            // Compiled once per combination.
            assert!(std::ptr::eq(
                f,
                seccomp::observing(base, sockets, metadata, false).unwrap()
            ));
        }
    }

    #[test]
    fn a_relative_name_is_made_absolute_against_the_callers_cwd() {
        let me = std::process::id();
        let cwd = std::env::current_dir().unwrap();
        let p = absolute(me, CWD, Path::new("a/../b")).unwrap();
        assert_eq!(p, cwd.join("b"));
        assert_eq!(
            absolute(me, CWD, Path::new("/x/./y")).unwrap(),
            PathBuf::from("/x/y")
        );
    }
}
