//! The threads that run served calls: a pool of worker threads reused from
//! call to call, instead of a thread created and torn down per call
//! (`clone3`, a stack mapped and unmapped, every call).
//!
//! A call is handed to an idle worker when there is one; otherwise a new
//! worker is started for it. So the pool grows on demand up to the number
//! of calls running at once, which [`super::call::Calls`] bounds by its
//! admission limit (plus, for a moment, a worker that has sent its answer
//! and not yet gone back to waiting); a worker idle for [`KEEP_IDLE`] ends.
//!
//! The jail's `PR_SET_PDEATHSIG` fires when the *thread* that started the
//! child exits: a worker only ever ends between calls, idle, when every
//! process it started has been waited for, so a call's tree never outlives
//! or dies with the wrong thread (a pooled blocking thread of tokio could
//! be reaped mid-call and take the child with it: these are not).
//!
//! A job that panics ends that job only: the worker catches it and goes
//! back to waiting (the call's own panic is turned into its Outcome by the
//! caller, see [`super::call`]). Workers are named `call` between calls and
//! `call-TOOL` while they run one ([`name_this_thread`], `PR_SET_NAME`), so
//! `ps -L` and `top -H` still show which tool a thread is running.

use std::collections::VecDeque;
use std::ffi::CString;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// How long a worker waits for another call before it ends.
pub const KEEP_IDLE: Duration = Duration::from_secs(30);

/// A worker's name between calls.
const IDLE_NAME: &str = "call";

/// One call to run on a worker.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct State {
    /// Jobs handed to idle workers, not yet taken.
    jobs: VecDeque<Job>,
    /// Workers waiting for a job (or about to check for one).
    idle: usize,
    /// Workers alive.
    workers: usize,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    keep_idle: Duration,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A pool of call threads.
#[derive(Clone)]
pub struct Workers {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (idle, workers) = self.counts();
        f.debug_struct("Workers")
            .field("idle", &idle)
            .field("workers", &workers)
            .finish()
    }
}

impl Workers {
    /// An empty pool whose idle workers end after `keep_idle`.
    pub fn new(keep_idle: Duration) -> Workers {
        Workers {
            shared: Arc::new(Shared {
                state: Mutex::default(),
                wake: Condvar::new(),
                keep_idle,
            }),
        }
    }

    /// The pool of this process's served calls.
    pub fn global() -> &'static Workers {
        static POOL: OnceLock<Workers> = OnceLock::new();
        POOL.get_or_init(|| Workers::new(KEEP_IDLE))
    }

    /// Runs `job` on an idle worker, or on a new one when none is idle.
    /// An error means no worker could be started; `job` was then dropped
    /// without running.
    pub fn run(&self, job: Job) -> std::io::Result<()> {
        let mut s = self.shared.lock();
        // Every queued job is already promised to an idle worker.
        if s.idle > s.jobs.len() {
            s.jobs.push_back(job);
            drop(s);
            self.shared.wake.notify_one();
            return Ok(());
        }
        s.workers += 1;
        drop(s);
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name(IDLE_NAME.into())
            .spawn(move || work(&shared, job))
            .map(drop)
            .inspect_err(|_| self.shared.lock().workers -= 1)
    }

    /// (idle workers, workers alive).
    pub fn counts(&self) -> (usize, usize) {
        let s = self.shared.lock();
        (s.idle, s.workers)
    }
}

/// A worker: runs `job`, then the jobs handed to it, until it has been
/// idle for the pool's `keep_idle`.
fn work(shared: &Shared, mut job: Job) {
    loop {
        // A panic ends the job, not the worker.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        name_this_thread(IDLE_NAME);
        let mut s = shared.lock();
        s.idle += 1;
        job = loop {
            if let Some(next) = s.jobs.pop_front() {
                s.idle -= 1;
                break next;
            }
            let (guard, wait) = shared
                .wake
                .wait_timeout(s, shared.keep_idle)
                .unwrap_or_else(PoisonError::into_inner);
            s = guard;
            if wait.timed_out() && s.jobs.is_empty() {
                s.idle -= 1;
                s.workers -= 1;
                return;
            }
        };
    }
}

/// Names the calling thread `name` (cut to the kernel's 15 bytes) as `ps`
/// and `/proc/self/task/*/comm` show it. A name with a NUL byte is left
/// out: the thread keeps its name.
pub fn name_this_thread(name: &str) {
    if let Ok(name) = CString::new(name) {
        let _ = nix::sys::prctl::set_name(&name);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Instant;

    /// The name of the calling thread as the kernel has it.
    fn comm() -> String {
        std::fs::read_to_string("/proc/thread-self/comm")
            .unwrap()
            .trim()
            .to_string()
    }

    fn tid() -> i32 {
        nix::unistd::gettid().as_raw()
    }

    #[test]
    fn workers_are_reused_and_named_per_job() {
        let pool = Workers::new(Duration::from_secs(60));
        let (tx, rx) = mpsc::channel();
        let mut tids = Vec::new();
        for i in 0..20 {
            let tx = tx.clone();
            pool.run(Box::new(move || {
                name_this_thread(&format!("call-tool{i}"));
                tx.send((tid(), comm())).unwrap();
            }))
            .unwrap();
            let (t, name) = rx.recv().unwrap();
            assert_eq!(name, format!("call-tool{i}"));
            tids.push(t);
            // Back to waiting before the next one is handed out.
            while pool.counts().0 != 1 {
                std::thread::yield_now();
            }
        }
        tids.dedup();
        assert_eq!(tids.len(), 1, "one call at a time: one worker, reused");
        assert_eq!(pool.counts(), (1, 1));
        // Idle again, it is named for no tool.
        let tid = tids[0];
        let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap();
        assert_eq!(name.trim(), IDLE_NAME);
    }

    #[test]
    fn the_pool_grows_to_the_calls_running_at_once_and_shrinks_when_idle() {
        let pool = Workers::new(Duration::from_millis(200));
        let (started_tx, started_rx) = mpsc::channel();
        let release = Arc::new((Mutex::new(false), Condvar::new()));
        for _ in 0..5 {
            let (started_tx, release) = (started_tx.clone(), release.clone());
            pool.run(Box::new(move || {
                started_tx.send(tid()).unwrap();
                let (lock, cv) = &*release;
                let mut go = lock.lock().unwrap();
                while !*go {
                    go = cv.wait(go).unwrap();
                }
            }))
            .unwrap();
        }
        // Five calls at once: five workers, all running.
        let mut tids: Vec<i32> = (0..5).map(|_| started_rx.recv().unwrap()).collect();
        tids.sort();
        tids.dedup();
        assert_eq!(tids.len(), 5);
        assert_eq!(pool.counts(), (0, 5));
        *release.0.lock().unwrap() = true;
        release.1.notify_all();
        // Idle past keep_idle: every worker ends.
        let until = Instant::now() + Duration::from_secs(20);
        while pool.counts() != (0, 0) {
            assert!(Instant::now() < until, "{:?}", pool.counts());
            std::thread::sleep(Duration::from_millis(20));
        }
        // And a new call still gets one.
        let (tx, rx) = mpsc::channel();
        pool.run(Box::new(move || tx.send(()).unwrap())).unwrap();
        rx.recv().unwrap();
    }

    #[test]
    fn a_panicking_job_does_not_lose_its_worker() {
        let pool = Workers::new(Duration::from_secs(60));
        let (tx, rx) = mpsc::channel();
        {
            let tx = tx.clone();
            pool.run(Box::new(move || {
                tx.send(tid()).unwrap();
                panic!("a bug in one call");
            }))
            .unwrap();
        }
        let first = rx.recv().unwrap();
        while pool.counts() != (1, 1) {
            std::thread::yield_now();
        }
        pool.run(Box::new(move || tx.send(tid()).unwrap())).unwrap();
        assert_eq!(
            rx.recv().unwrap(),
            first,
            "the same worker runs the next call"
        );
        assert_eq!(pool.counts().1, 1);
    }
}
