//! Waiting for a durable append's sync off the caller's thread.
//!
//! A call's intent line must be on disk before the call's code starts, not
//! before glovebox prepares the call. [`Pending::in_background`] hands the
//! sync to this process's syncer thread and returns at once; the caller
//! prepares the call (the jail's plan, its cgroups, its home, its
//! descriptors) while the disk answers, and asks [`Durable::wait`] at the
//! last moment. One thread serves the whole process: the group commit
//! (`super::commit`) makes one sync cover every line written before it
//! began, so a second waiting line is covered by the next sync at the
//! latest. Where the thread cannot be had, the sync runs on the caller's
//! thread before `in_background` returns. A process that cannot wait on a
//! condition variable of this one (the jail's child, between its `clone`
//! and its `execve`) is told through a pipe ([`Durable::signal`]).

use std::os::fd::OwnedFd;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use super::{AuditError, Pending};

/// The byte a [`Durable::signal`] pipe receives when the line is on disk
/// (or its failure is to be tolerated); any other byte: it is not.
pub const SIGNAL_DURABLE: u8 = 1;

/// The outcome of one background sync: `None` while it runs, then `Ok` or
/// why it failed.
#[derive(Debug, Default)]
pub struct Durable {
    decided: Mutex<Decided>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct Decided {
    result: Option<Result<(), Arc<AuditError>>>,
    /// Pipes to tell once decided, and whether a failure still says
    /// [`SIGNAL_DURABLE`].
    signals: Vec<(OwnedFd, bool)>,
}

/// Writes the answer into a [`Durable::signal`] pipe (a reader that is
/// gone, its call over, is no error).
fn tell(fd: OwnedFd, durable: bool, tolerate_failure: bool) {
    let byte = if durable || tolerate_failure {
        SIGNAL_DURABLE
    } else {
        0
    };
    let _ = nix::unistd::write(&fd, &[byte]);
}

impl Durable {
    fn decide(&self, result: Result<(), AuditError>) {
        let mut d = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        for (fd, tolerate) in d.signals.drain(..) {
            tell(fd, result.is_ok(), tolerate);
        }
        d.result = Some(result.map_err(Arc::new));
        self.turn.notify_all();
    }

    /// The read end of a pipe that receives one byte once decided:
    /// [`SIGNAL_DURABLE`] when the line is on disk (or, with
    /// `tolerate_failure`, whatever the sync said), else another. For a
    /// process that cannot wait on this one's condition variable: the
    /// jail's child, right before `execve` (`jail::Gate::signal`).
    pub fn signal(&self, tolerate_failure: bool) -> std::io::Result<OwnedFd> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let mut d = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        match &d.result {
            Some(result) => tell(write, result.is_ok(), tolerate_failure),
            None => d.signals.push((write, tolerate_failure)),
        }
        Ok(read)
    }

    /// Blocks until the line is durable (`Ok`) or its sync failed
    /// (`Err(why)`, [`AuditError::NotDurable`]); the same answer every time.
    pub fn wait(&self) -> Result<(), Arc<AuditError>> {
        let mut d = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(result) = d.result.as_ref() {
                return result.clone();
            }
            d = self.turn.wait(d).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The answer, if the sync has finished.
    pub fn decided(&self) -> Option<Result<(), Arc<AuditError>>> {
        self.decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .result
            .clone()
    }
}

type Job = (Pending, Arc<Durable>);

/// The process's syncer thread, started on first use (`None` when it
/// could not be started).
fn syncer() -> Option<&'static Mutex<Sender<Job>>> {
    static TX: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("audit-sync".into())
            .spawn(move || {
                for (pending, durable) in rx {
                    // Always decided: a child of the jail waits for the
                    // answer and nothing else ends its wait.
                    let head = pending.log.head.clone();
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pending.wait()))
                            .unwrap_or_else(|_| {
                                Err(AuditError::NotDurable {
                                    path: head,
                                    source: std::io::Error::other("the sync failed unexpectedly"),
                                })
                            });
                    durable.decide(result);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    })
    .as_ref()
}

impl Pending {
    /// Starts this line's sync on the syncer thread; [`Durable::wait`]
    /// says when it is on disk.
    pub fn in_background(self) -> Arc<Durable> {
        let durable = Arc::new(Durable::default());
        let job = (self, durable.clone());
        let unsent = match syncer() {
            Some(tx) => tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .send(job)
                .err()
                .map(|e| e.0),
            None => Some(job),
        };
        if let Some((pending, durable)) = unsent {
            durable.decide(pending.wait());
        }
        durable
    }
}
