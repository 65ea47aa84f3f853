//! Group commit: making appended lines durable without holding the
//! writers' lock across the disk's answer.
//!
//! A durable append writes its line and moves the head under the lock,
//! takes a ticket, releases the lock, then waits here until a sync that
//! began after its line was written has finished: the log synced, then the
//! head. The first waiter with nothing in flight leads one sync for every
//! line written so far; the others wait for it (or lead the next one when
//! theirs came too late for it). So concurrent calls of one process share
//! syncs instead of queueing one `fsync` each behind the lock, and no call
//! returns before its own line is on disk. Every log file (device, inode)
//! has its own commit: a sync of one never stands for another.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// Where the syncs of one log file stand in this process.
#[derive(Debug, Default)]
struct State {
    /// Tickets handed out (lines written and their head moved).
    written: u64,
    /// Every ticket up to this one is durable.
    synced: u64,
    /// Every ticket up to this one (and above `synced`) failed to sync.
    failed: u64,
    /// Why the last failed sync failed.
    error: Option<String>,
    /// A sync is in flight.
    leading: bool,
}

/// The group commit of one log file.
#[derive(Debug, Default)]
pub(super) struct Commit {
    state: Mutex<State>,
    turn: Condvar,
}

/// The commits of this process, by log file (device, inode).
type Commits = Mutex<HashMap<(u64, u64), Arc<Commit>>>;

/// The commit of the log file `(dev, ino)` in this process.
pub(super) fn of(dev: u64, ino: u64) -> Arc<Commit> {
    static ALL: OnceLock<Commits> = OnceLock::new();
    let mut all = ALL
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    all.entry((dev, ino)).or_default().clone()
}

impl Commit {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ticket for a line just written, its head moved (the writers' lock
    /// still held, so tickets follow the order of the lines).
    pub(super) fn ticket(&self) -> u64 {
        let mut s = self.lock();
        s.written += 1;
        s.written
    }

    /// Returns once the line of `ticket` is durable: `sync` (log, then
    /// head) has run to the end, started after that line was written, by
    /// this caller or another. An error means the sync that covered it
    /// failed.
    pub(super) fn wait(
        &self,
        ticket: u64,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut s = self.lock();
        loop {
            if s.synced >= ticket {
                return Ok(());
            }
            if s.failed >= ticket {
                return Err(io::Error::other(
                    s.error.clone().unwrap_or_else(|| "sync failed".into()),
                ));
            }
            if !s.leading {
                s.leading = true;
                // Every ticket up to `target` was written before this sync
                // starts, so it covers them all.
                let target = s.written;
                drop(s);
                let r = sync();
                let mut s = self.lock();
                s.leading = false;
                match &r {
                    Ok(()) => s.synced = s.synced.max(target),
                    Err(e) => {
                        s.failed = s.failed.max(target);
                        s.error = Some(e.to_string());
                    }
                }
                self.turn.notify_all();
                return r;
            }
            s = self.turn.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    #[test]
    fn lines_written_during_a_sync_share_the_next_one() {
        let c = Arc::new(Commit::default());
        let syncs = Arc::new(AtomicU64::new(0));
        let first = c.ticket();
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let leader = {
            let (c, syncs) = (c.clone(), syncs.clone());
            std::thread::spawn(move || {
                c.wait(first, || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    syncs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
        };
        started_rx.recv().unwrap();
        // Written while the first sync is in flight: it cannot cover them.
        let tickets: Vec<u64> = (0..4).map(|_| c.ticket()).collect();
        let waiters: Vec<_> = tickets
            .into_iter()
            .map(|t| {
                let (c, syncs) = (c.clone(), syncs.clone());
                std::thread::spawn(move || {
                    c.wait(t, || {
                        syncs.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                })
            })
            .collect();
        release_tx.send(()).unwrap();
        leader.join().unwrap().unwrap();
        for w in waiters {
            w.join().unwrap().unwrap();
        }
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            2,
            "one sync for the four late lines"
        );
        assert_eq!(c.lock().synced, 5);
        // Nothing new written: no sync needed.
        c.wait(5, || panic!("synced already")).unwrap();
    }

    #[test]
    fn a_failed_sync_fails_every_line_it_covered_and_the_next_one_retries() {
        let c = Commit::default();
        let a = c.ticket();
        let b = c.ticket();
        let e = c
            .wait(b, || Err(io::Error::other("disk gone")))
            .unwrap_err();
        assert!(e.to_string().contains("disk gone"));
        let e = c.wait(a, || Ok(())).unwrap_err();
        assert!(
            e.to_string().contains("disk gone"),
            "covered by the failed sync"
        );
        let d = c.ticket();
        c.wait(d, || Ok(())).unwrap();
    }
}
