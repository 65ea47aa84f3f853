//! The jail's cancellation hook (`Spec::cancel`): cancelling a running call
//! from another thread kills its whole tree promptly (invariant 8 holds for
//! a cancelled call too), and the result says it was cancelled.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use glovebox::jail::{self, Cancel, Spec};

const TREE: &str = "import subprocess, sys, time\n\
subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)', sys.argv[1]])\n\
time.sleep(60)\n";

#[test]
fn cancel_kills_the_whole_tree() {
    require_jail!();
    let m = marker("jail-cancel");
    let mut spec = Spec::new(["python3", "-c", TREE, m.as_str()]);
    let cancel = Cancel::new();
    spec.cancel = Some(cancel.clone());
    let watcher = {
        let m = m.clone();
        std::thread::spawn(move || {
            assert!(
                wait_until(Duration::from_secs(20), || pids_with(&m).len() >= 2),
                "the tree never started"
            );
            cancel.cancel();
            Instant::now()
        })
    };
    let result = jail::run(&spec).unwrap();
    let cancelled_at = watcher.join().unwrap();
    assert!(result.cancelled, "{result:?}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "the call outlived its cancel by {:?}",
        cancelled_at.elapsed()
    );
    assert!(pids_with(&m).is_empty(), "survivors: {:?}", pids_with(&m));
    assert!(!result.timed_out());
}

#[test]
fn a_token_cancelled_before_the_start_stops_the_call_at_once() {
    require_jail!();
    let mut spec = Spec::new(["sleep", "30"]);
    let cancel = Cancel::new();
    cancel.cancel();
    spec.cancel = Some(cancel);
    let started = Instant::now();
    let result = jail::run(&spec).unwrap();
    assert!(result.cancelled, "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_uncancelled_token_changes_nothing() {
    require_jail!();
    let mut spec = Spec::new(["true"]);
    spec.cancel = Some(Cancel::new());
    let result = jail::run(&spec).unwrap();
    assert!(!result.cancelled);
    assert_eq!(result.status, jail::Status::Exited(0));
}
