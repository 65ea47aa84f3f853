//! Invariant 12 (fail closed, and say so): `glovebox doctor` reports what
//! this process can really do — found by creating namespaces, not by
//! reading sysctls — the jail mode it chose, and for each invariant the
//! mechanism of that mode. Runs in every CI stage: as root, as nobody with
//! user namespaces, and in a process that cannot create them (`.ci/nouserns`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;

fn doctor() -> (Option<i32>, Value) {
    let out = Command::new(bin())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

/// Whether this process can create a user namespace, asked of the kernel
/// by another program (util-linux `unshare`).
fn can_unshare_user() -> bool {
    Command::new("unshare")
        .args(["--user", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn doctor_tells_the_truth_about_namespaces() {
    require_jail!();
    let (code, v) = doctor();
    assert_eq!(code, Some(0), "{v:#}");
    let k = &v["kernel"];
    assert_eq!(k["user_ns"], can_unshare_user(), "{v:#}");
    let mode = jail_mode();
    assert_eq!(k["mode"], mode, "{v:#}");
    let how = |name: &str| {
        v["invariants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("no invariant {name}: {v:#}"))["how"]
            .as_str()
            .unwrap()
            .to_string()
    };
    if namespace_free() {
        // No namespaces, or namespaces without a /proc of their own (a
        // container masking its /proc): no tree either way.
        assert_eq!(k["mount_proc"], false, "{v:#}");
        if k["pid_ns"] == true {
            let why = k["namespaces_error"].as_str().unwrap();
            assert!(why.contains("/proc cannot be mounted"), "{v:#}");
        }
        // Why, with the errno and a cause.
        let why = k["namespaces_error"].as_str().unwrap();
        assert!(why.starts_with('E') && why.contains(": "), "{why}");
        assert!(how("a call ends whole").contains("subreaper"), "{v:#}");
        assert!(
            how("no reach into other processes").contains("landlock"),
            "{v:#}"
        );
        assert_eq!(v["enforcement"]["Ok"]["subreaper"], true, "{v:#}");
    } else {
        assert_eq!(mode, "namespaces");
        assert_eq!(k["pid_ns"], true, "{v:#}");
        assert!(k["namespaces_error"].is_null(), "{v:#}");
        assert!(how("a call ends whole").contains("pid namespace"), "{v:#}");
        assert_eq!(v["enforcement"]["Ok"]["pid_namespace"], true, "{v:#}");
    }
    // Every invariant is enforced here, by one mechanism or the other.
    for i in v["invariants"].as_array().unwrap() {
        assert_eq!(i["enforced"], true, "{i:#}");
    }
}

#[test]
fn a_run_reports_the_mode_it_ran_in() {
    require_jail!();
    let r = sandbox(&[], &["sh", "-c", "echo RAN"]);
    assert!(r.stdout.contains("RAN"), "{r:#?}");
    assert_eq!(r.json["enforcement"]["mode"], jail_mode(), "{r:#?}");
    assert_eq!(
        r.json["enforcement"]["subreaper"],
        namespace_free(),
        "{r:#?}"
    );
}

#[test]
fn a_timed_out_call_leaves_no_process() {
    require_jail!();
    // A setsid daemon started before the timeout must not outlive the call
    // (in the namespace-free jail the reaper kills it on SIGTERM).
    let m = marker("timeout-daemon");
    let dir = tempdir();
    let d = path_str(dir.path());
    let script = format!(
        "setsid sh -c 'touch {d}/started; sleep 300; : {m}' </dev/null >/dev/null 2>&1 & sleep 100"
    );
    let r = sandbox(&["--write", d, "--timeout", "2"], &["sh", "-c", &script]);
    assert_eq!(r.json["ok"], false, "{r:#?}");
    assert!(
        dir.path().join("started").exists(),
        "the daemon never started: {r:#?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(pids_with(&m).is_empty(), "survivors: {:?}", pids_with(&m));
}

#[test]
fn network_true_runs_behind_the_proxy_in_every_mode() {
    require_jail!();
    let r = sandbox(&["--net"], &["sh", "-c", "echo RAN"]);
    assert!(r.stdout.contains("RAN"), "{r:#?}");
    // Its own network namespace, or without namespaces the connect
    // broker (each connect made by the supervisor, only to the proxy).
    r.assert_behind_the_proxy();
    // The explicit opt-in runs it on the host's network, said as a warning.
    let d = sandbox(&["--net=direct"], &["sh", "-c", "echo RAN"]);
    assert!(d.stdout.contains("RAN"), "{d:#?}");
    assert!(d.json.to_string().contains("direct network"), "{d:#?}");
}
