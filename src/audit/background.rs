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
//! thread before `in_background` returns.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use super::{AuditError, Pending};

/// The outcome of one background sync: `None` while it runs, then `Ok` or
/// why it failed.
#[derive(Debug, Default)]
pub struct Durable {
    decided: Mutex<Option<Result<(), Arc<AuditError>>>>,
    turn: Condvar,
}

impl Durable {
    fn decide(&self, result: Result<(), AuditError>) {
        let mut d = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        *d = Some(result.map_err(Arc::new));
        self.turn.notify_all();
    }

    /// Blocks until the line is durable (`Ok`) or its sync failed
    /// (`Err(why)`, [`AuditError::NotDurable`]); the same answer every time.
    pub fn wait(&self) -> Result<(), Arc<AuditError>> {
        let mut d = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(result) = d.as_ref() {
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
                    durable.decide(pending.wait());
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
