//! The jail's gate (`Spec::gate`): asked right before the call's code
//! starts, after the jail is prepared — by the supervisor before its clone
//! (`Gate::pass`), or by the child right before `execve` (`Gate::signal`,
//! a pipe). The engine's gate is "the call's intent line is on disk" (its
//! sync runs while the jail is prepared): a shut gate must mean that
//! nothing of the call ran, and an open one that the code started only
//! after it opened.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use glovebox::jail::{self, Gate, JailError, Spec};

/// A gate that waits `delay`, notes when it opened, then answers `answer`.
#[derive(Debug)]
struct Fixed {
    answer: Result<(), String>,
    delay: Duration,
    asked: AtomicUsize,
    opened_ns: Mutex<Option<u128>>,
}

impl Fixed {
    fn new(answer: Result<(), String>, delay: Duration) -> Arc<Fixed> {
        Arc::new(Fixed {
            answer,
            delay,
            asked: AtomicUsize::new(0),
            opened_ns: Mutex::new(None),
        })
    }
}

impl Gate for Fixed {
    fn pass(&self) -> Result<(), String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        *self.opened_ns.lock().unwrap() = Some(now_ns());
        self.answer.clone()
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A spec whose program writes the time it started into `canary`, in a
/// directory granted for writing.
fn canary_spec(dir: &std::path::Path, canary: &std::path::Path) -> Spec {
    let mut spec = Spec::new([
        "/bin/sh",
        "-c",
        "date +%s%N > \"$1\"",
        "sh",
        canary.to_str().unwrap(),
    ]);
    spec.fs.write.push(dir.to_path_buf());
    spec
}

/// Runs `spec`, which must succeed, and returns the time its program
/// wrote into `canary` (when it started).
fn run_and_read_start(spec: &Spec, canary: &std::path::Path) -> u128 {
    let result = jail::run(spec).unwrap();
    assert_eq!(result.status, jail::Status::Exited(0), "{result:?}");
    std::fs::read_to_string(canary)
        .expect("the program ran")
        .trim()
        .parse()
        .unwrap()
}

/// Runs `spec`, which its gate must refuse with `message`, and checks
/// that nothing of the call ran (`dir` stays empty; the same spec with an
/// open gate writes its canary there).
fn run_refused(spec: &Spec, dir: &std::path::Path, message: &str) {
    let err = jail::run(spec).unwrap_err();
    assert!(
        matches!(&err, JailError::Gate { message: m } if m == message),
        "{err:?}"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        0,
        "the call's code ran behind a shut gate"
    );
}

#[test]
fn an_open_gate_lets_the_code_start_only_after_it_opened() {
    require_jail!();
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("ran");
    let gate = Fixed::new(Ok(()), Duration::from_millis(300));
    let mut spec = canary_spec(dir.path(), &canary);
    spec.gate = Some(gate.clone());
    // The probe ran: the program wrote its start time…
    let started = run_and_read_start(&spec, &canary);
    // …after the gate opened, and the gate was asked once.
    let opened = gate.opened_ns.lock().unwrap().unwrap();
    assert!(
        started >= opened,
        "the code started {} µs before the gate opened",
        (opened - started) / 1000
    );
    assert_eq!(gate.asked.load(Ordering::SeqCst), 1);
}

#[test]
fn a_shut_gate_means_nothing_of_the_call_ran() {
    require_jail!();
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("ran");
    let gate = Fixed::new(Err("the intent is not on disk".into()), Duration::ZERO);
    let mut spec = canary_spec(dir.path(), &canary);
    spec.gate = Some(gate.clone());
    run_refused(&spec, dir.path(), "the intent is not on disk");
    assert_eq!(gate.asked.load(Ordering::SeqCst), 1);
}

/// A gate that signals through a pipe: a thread writes `byte` after
/// `delay` and notes when. Each ask gets a pipe of its own (a jail that
/// planned with assumed facts and had to probe asks again); the child
/// reads the last one.
#[derive(Debug)]
struct Piped {
    byte: u8,
    delay: Duration,
    signals: AtomicUsize,
    /// (ask number, when its byte was sent).
    sent_ns: Arc<Mutex<Vec<(usize, u128)>>>,
}

impl Piped {
    fn new(byte: u8, delay: Duration) -> Arc<Piped> {
        Arc::new(Piped {
            byte,
            delay,
            signals: AtomicUsize::new(0),
            sent_ns: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// When the byte of the last ask was sent.
    fn last_sent(&self) -> u128 {
        let sent = self.sent_ns.lock().unwrap();
        sent.iter().max_by_key(|(n, _)| *n).unwrap().1
    }
}

impl Gate for Piped {
    fn pass(&self) -> Result<(), String> {
        if self.byte == jail::GATE_OPEN {
            Ok(())
        } else {
            Err("the pipe said no".into())
        }
    }

    fn signal(&self) -> Option<OwnedFd> {
        let n = self.signals.fetch_add(1, Ordering::SeqCst);
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (byte, delay, sent) = (self.byte, self.delay, self.sent_ns.clone());
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            sent.lock().unwrap().push((n, now_ns()));
            // The reader of an earlier ask is gone by now.
            let _ = std::fs::File::from(write).write_all(&[byte]);
        });
        Some(read)
    }
}

#[test]
fn a_signalled_go_ahead_starts_the_code_only_once_it_arrives() {
    require_jail!();
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("ran");
    let gate = Piped::new(jail::GATE_OPEN, Duration::from_millis(300));
    let mut spec = canary_spec(dir.path(), &canary);
    spec.gate = Some(gate.clone());
    let started = run_and_read_start(&spec, &canary);
    let opened = gate.last_sent();
    assert!(
        started >= opened,
        "the code started {} µs before the go-ahead was sent",
        (opened - started) / 1000
    );
    assert!(gate.signals.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_signalled_refusal_means_nothing_of_the_call_ran() {
    require_jail!();
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("ran");
    let gate = Piped::new(0, Duration::from_millis(100));
    let mut spec = canary_spec(dir.path(), &canary);
    spec.gate = Some(gate.clone());
    run_refused(&spec, dir.path(), "the pipe said no");
}

/// A python call of `gated.f` in `dir` as the engine gives it to a warm
/// worker (its request on stdin), writing its start time into `canary`.
fn python_spec(dir: &std::path::Path, canary: &std::path::Path, gate: Arc<dyn Gate>) -> Spec {
    let mut spec = Spec::new([
        "/usr/bin/python3",
        "-I",
        "-B",
        "-c",
        glovebox::run::python::SHIM,
    ]);
    spec.cwd = dir.to_path_buf();
    spec.fs.write.push(dir.to_path_buf());
    spec.output = jail::Output::Capture;
    spec.stdin = jail::Stdin::Bytes(
        serde_json::json!({
            "cwd": dir, "chain": [["gated", "module", dir.join("gated.py")]],
            "module": "gated", "function": "f",
            "args": [], "kwargs": {"canary": canary}, "return": "json",
        })
        .to_string()
        .into_bytes(),
    );
    spec.gate = Some(gate);
    spec
}

#[test]
fn a_warm_worker_asks_the_gate_before_the_import_and_before_each_call() {
    use glovebox::run::{warm, StartError};
    require_jail!();
    let dir = tempfile::tempdir().unwrap();
    let imported = dir.path().join("imported");
    std::fs::write(
        dir.path().join("gated.py"),
        format!(
            "import time\nopen({imported:?}, 'a').write('import\\n')\n\
             def f(canary):\n    open(canary, 'w').write(str(time.time_ns()))\n    return {{}}\n"
        ),
    )
    .unwrap();
    let canary = |n: u32| dir.path().join(format!("ran-{n}"));
    let open = || Fixed::new(Ok(()), Duration::from_millis(300));
    let shut = || Fixed::new(Err("the intent is not on disk".into()), Duration::ZERO);
    let init =
        // As the engine gives it: the module glovebox resolved in cwd, by
        // its file (a module not in cwd is imported without cwd).
        serde_json::json!({"cwd": dir.path(), "chain": [["gated", "module", dir.path().join("gated.py")]],
                           "module": "gated", "idle_s": 60});
    let probe = python_spec(dir.path(), &canary(0), open());
    let Some(plan) = warm::Plan::new(&probe, "fingerprint", &init, Vec::new()) else {
        // No PID namespace with its own /proc here: nothing runs warm
        // (the jail's own gate, above, is what a cold call asks).
        assert!(!warm::eligible(&probe));
        return;
    };
    let pool = warm::Pool::new(2);
    let refused = |r: Option<Result<jail::JailResult, StartError>>| {
        assert!(
            matches!(&r, Some(Err(StartError::Jail(JailError::Gate { message })))
                if message == "the intent is not on disk"),
            "{r:?}"
        );
    };
    let ran_after = |n: u32, gate: &Fixed, r: Option<Result<jail::JailResult, StartError>>| {
        let r = r.expect("the call ran warm").unwrap();
        assert_eq!(r.status, jail::Status::Exited(0), "{r:?}");
        let started: u128 = std::fs::read_to_string(canary(n))
            .expect("the call's code ran")
            .parse()
            .unwrap();
        let opened = gate.opened_ns.lock().unwrap().unwrap();
        assert!(
            started >= opened,
            "call {n} started {} µs before its gate opened",
            (opened - started) / 1000
        );
    };
    // A shut gate before any worker: none starts, the module's code (its
    // import) never runs.
    refused(pool.run(&plan, &python_spec(dir.path(), &canary(1), shut())));
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !imported.exists(),
        "the module was imported behind a shut gate"
    );
    assert_eq!(pool.live(), 0);
    // An open gate: the worker starts, the call runs after it opened.
    let gate = open();
    ran_after(
        2,
        &gate,
        pool.run(&plan, &python_spec(dir.path(), &canary(2), gate.clone())),
    );
    // The worker is reused: a shut gate refuses the call after the worker
    // prepared it, and nothing of it ran; the worker still serves.
    refused(pool.run(&plan, &python_spec(dir.path(), &canary(3), shut())));
    std::thread::sleep(Duration::from_millis(100));
    assert!(!canary(3).exists(), "the call ran behind a shut gate");
    let gate = open();
    ran_after(
        4,
        &gate,
        pool.run(&plan, &python_spec(dir.path(), &canary(4), gate.clone())),
    );
    assert_eq!(
        std::fs::read_to_string(&imported).unwrap().lines().count(),
        1,
        "both calls ran in the one worker"
    );
}
