//! The process limit of a root call where no pids cgroup can be made (a
//! container's root: its cgroup file system is read-only), counted by the
//! supervisor.
//!
//! `RLIMIT_NPROC` does not bind uid 0, so without a pids cgroup a root
//! call had no process limit at all and was refused. A refused fork is
//! recorded ([`ForkLimit::refused`]): the call fails as `resource_limit`,
//! as under a pids cgroup. In the namespace-free
//! jail (whose supervisor answers seccomp notifications anyway) the calls
//! that make a process or a thread ([`counted_calls`]) are handed to the
//! supervisor, which counts the call's tasks — every thread of every
//! process below the call's reaper (a subreaper: orphans come back to it,
//! so nothing of the call is outside that tree) — and lets the call go on
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: its arguments are registers, which
//! the deny filter has checked already; nothing can change between the
//! decision and the call) only below the limit, else answers `EAGAIN`, as
//! a pids cgroup would. The notifications are answered one at a time, so
//! the count can run ahead of the decision only by the forks already let
//! through and not yet visible in `/proc`: at most one per task, so a
//! call never holds more than twice its limit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The calls that make a process or a thread.
pub fn counted_calls() -> Vec<libc::c_long> {
    let mut v = vec![libc::SYS_clone];
    #[cfg(target_arch = "x86_64")]
    v.extend([libc::SYS_fork, libc::SYS_vfork]);
    v
}

/// Whether `nr` is one of [`counted_calls`] (asked for every notification:
/// no list is built for it).
pub fn is_counted(nr: libc::c_long) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_fork || nr == libc::SYS_vfork {
        return true;
    }
    nr == libc::SYS_clone
}

/// Whether a new task may be made when the call has `count` (pure).
pub fn allows(count: u64, limit: u64) -> bool {
    count < limit
}

/// One call's process limit: its reaper (a host pid) and the limit.
#[derive(Debug, Clone)]
pub struct ForkLimit {
    /// The call's reaper, whose descendants are the call.
    pub reaper: u32,
    /// At most this many tasks (threads included).
    pub limit: u64,
    /// The reaper is itself the call's (a PID namespace's first process:
    /// the tool), so its threads count too; the namespace-free jail's
    /// subreaper is glovebox's and does not.
    pub with_reaper: bool,
    /// Set once a fork was refused (shared with whoever reports the
    /// call's result).
    pub hit: Arc<AtomicBool>,
}

impl ForkLimit {
    /// The call's tasks now: every thread of every process below the
    /// reaper (read from `/proc/PID/task/TID/children`), and the reaper's
    /// own with [`ForkLimit::with_reaper`].
    pub fn count(&self) -> u64 {
        let mut count = if self.with_reaper {
            tasks_of(self.reaper)
        } else {
            0
        };
        let mut queue: VecDeque<u32> = children_of(self.reaper).into();
        // Bounded: a tree far past any limit is counted only so far.
        let bound = self.limit.saturating_mul(4).max(64);
        while let Some(pid) = queue.pop_front() {
            count += tasks_of(pid);
            if count >= bound {
                break;
            }
            queue.extend(children_of(pid));
        }
        count
    }

    /// Answers one notification of a counted call: `true` to let it go
    /// on, `false` for `EAGAIN` (recorded: [`ForkLimit::refused`]).
    pub fn admit(&self) -> bool {
        let ok = allows(self.count(), self.limit);
        if !ok {
            self.hit.store(true, Ordering::SeqCst);
        }
        ok
    }

    /// Whether a fork of the call was refused.
    pub fn refused(&self) -> bool {
        self.hit.load(Ordering::SeqCst)
    }
}

/// How many tasks (threads) `pid` has: at least one while it exists,
/// none once it is gone.
fn tasks_of(pid: u32) -> u64 {
    match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(rd) => (rd.filter_map(Result::ok).count() as u64).max(1),
        Err(_) => 0,
    }
}

/// The children of every thread of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.filter_map(Result::ok) {
        let path = t.path().join("children");
        if let Ok(text) = std::fs::read_to_string(path) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn is_counted_names_exactly_the_counted_calls() {
        for nr in counted_calls() {
            assert!(is_counted(nr));
        }
        assert!(!is_counted(libc::SYS_connect));
        assert!(!is_counted(libc::SYS_fchmod));
    }

    #[test]
    fn the_limit_is_a_count_of_tasks() {
        assert!(allows(0, 1));
        assert!(allows(31, 32));
        assert!(!allows(32, 32));
        assert!(!allows(40, 32));
    }

    #[test]
    fn the_tasks_below_a_process_are_counted() {
        // Three sleeping children of a shell, counted below it.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5 & sleep 5 & wait"])
            .spawn()
            .unwrap();
        let mut limit = ForkLimit {
            reaper: child.id(),
            limit: 100,
            with_reaper: false,
            hit: Arc::default(),
        };
        let mut seen = 0;
        for _ in 0..100 {
            seen = limit.count();
            if seen >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // A PID namespace's first process is the call's own: it counts.
        limit.with_reaper = true;
        let with = limit.count();
        // Below the limit: let through, nothing recorded; at it: refused
        // and recorded, for whoever reports the call.
        let admitted = limit.admit();
        let reported = limit.clone();
        limit.limit = 2;
        let refused = !limit.admit();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, 3);
        assert_eq!(with, 4);
        assert!(admitted && refused);
        assert!(
            reported.refused(),
            "the refusal is seen through every clone"
        );
    }
}
