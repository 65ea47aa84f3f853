//! A racer for the tests of invariant 13: exchanges two paths with
//! `renameat2(RENAME_EXCHANGE)` in a loop on a thread of its own, as a
//! second tool with a write grant over their parent could, and counts the
//! exchanges (the proof that the race ran).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Exchanges `a` and `b` in a loop until stopped; counts the exchanges.
pub struct Swapper {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    /// Starts exchanging `a` and `b`, back to back.
    pub fn start(a: &Path, b: &Path) -> Swapper {
        Swapper::start_pausing(a, b, Duration::ZERO)
    }

    /// Starts exchanging `a` and `b`, waiting `pause` after each exchange.
    pub fn start_pausing(a: &Path, b: &Path, pause: Duration) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let (a, b) = (
            CString::new(a.as_os_str().as_bytes()).expect("no NUL in a test path"),
            CString::new(b.as_os_str().as_bytes()).expect("no NUL in a test path"),
        );
        let thread = {
            let (stop, count) = (stop.clone(), count.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: two valid NUL-terminated paths, alive for the
                    // loop.
                    let rc = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            a.as_ptr(),
                            libc::AT_FDCWD,
                            b.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    if rc == 0 {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
            })
        };
        Swapper {
            stop,
            count,
            thread: Some(thread),
        }
    }

    /// Stops the loop and returns how many exchanges it made.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("the racer thread ended cleanly");
        }
        self.count.load(Ordering::Relaxed)
    }
}
