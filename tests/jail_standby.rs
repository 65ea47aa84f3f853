//! Standby jails (`glovebox::jail::standby`): in a server, a call's jail
//! is made ready at its gate before the call arrives and revalidated when
//! it does. Judged by effect through `glovebox serve`'s HTTP API:
//! - a granted directory swapped, removed or created between the
//!   standby's making and the call is seen as it is at the call, never as
//!   it was (the canary of the old object never comes back), also with a
//!   racer exchanging the grant with a link outside in a loop;
//! - every call in a standby gets its own arguments and stdin;
//! - no tool runs in another tool's standby;
//! - the standbys end with the server, their processes gone.
//!
//! `glovebox_standby_calls_total` (`/metrics`) proves which path each
//! step took. Where the jail has no mount tree (the namespace-free
//! stage), no standby is made: the calls run fresh and the tests check
//! that instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::fs;
use std::time::Duration;

use common::swap::Swapper;
use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::*;

const CANARY: &str = "STANDBY-CANARY-81c4";

/// Whether this machine's jail gets standbys (a mount tree).
fn standbys_here() -> bool {
    !namespace_free()
}

fn state_env(f: &Fixture) -> Vec<(String, String)> {
    vec![(
        "GLOVEBOX_STATE_DIR".into(),
        f.base.join("state").to_str().unwrap().to_string(),
    )]
}

fn serve(f: &Fixture) -> Served {
    let env = state_env(f);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Served::start(&f.root, &env, &["--standby"])
}

/// `used`, `changed`, `not_run` and `ready` from `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Standbys {
    used: u64,
    changed: u64,
    not_run: u64,
    ready: u64,
}

fn standbys(s: &Served) -> Standbys {
    let m = s.get("/metrics").body;
    let value = |prefix: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{prefix} missing from /metrics:\n{m}"))
    };
    Standbys {
        used: value("glovebox_standby_calls_total{outcome=\"used\"}"),
        changed: value("glovebox_standby_calls_total{outcome=\"changed\"}"),
        not_run: value("glovebox_standby_calls_total{outcome=\"not_run\"}"),
        ready: value("glovebox_standby_ready"),
    }
}

/// Waits until at least `n` standbys are ready (where standbys are made).
fn wait_ready(s: &Served, n: u64) {
    if standbys_here() {
        assert!(
            wait_until(Duration::from_secs(20), || standbys(s).ready >= n),
            "no standby was made: {:?}\n{}",
            standbys(s),
            s.stderr()
        );
    }
}

fn invoke(s: &Served, tool: &str, args: &Value) -> Answer {
    s.post(&format!("/api/v1/tools/{tool}/invoke"), args)
}

fn output(a: &Answer) -> String {
    a.json["output"].as_str().unwrap_or_default().to_string()
}

/// A tool that runs `sh -c SCRIPT` in the root with `permissions`.
fn shell_tool(name: &str, script: &str, permissions: Value) -> Value {
    command_tool(
        name,
        schema(json!({})),
        json!({"entrypoint": "sh", "args": ["-c", script], "cwd": "."}),
        permissions,
    )
}

/// The project with `data/inside.txt` (its text given) and the canary
/// outside it (mode 0600).
fn project(inside: &str) -> Fixture {
    let f = Fixture::new();
    fs::create_dir_all(f.root.join("data")).unwrap();
    fs::write(f.root.join("data/inside.txt"), inside).unwrap();
    let canary = f.outside.join("inside.txt");
    fs::write(&canary, CANARY).unwrap();
    fs::set_permissions(&canary, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    f.tool(&shell_tool(
        "victim",
        "echo PROBE-START; cat data/inside.txt; echo; ls data",
        json!({"network": false, "fs": {"read": ["data"]}}),
    ));
    f
}

#[test]
fn a_grant_changed_after_the_standby_was_made_is_seen_as_it_is_at_the_call() {
    require_jail!();
    let f = project("OLD-OBJECT-7e2");
    let s = serve(&f);
    // The first call runs fresh and leaves a standby for the next.
    let a = invoke(&s, "victim", &json!({}));
    assert!(output(&a).contains("PROBE-START"), "{a:?}");
    assert!(output(&a).contains("OLD-OBJECT-7e2"), "{a:?}");
    wait_ready(&s, 1);
    let a = invoke(&s, "victim", &json!({}));
    assert!(output(&a).contains("OLD-OBJECT-7e2"), "{a:?}");
    let used = standbys(&s).used;
    if standbys_here() {
        assert_eq!(used, 1, "the second call ran in the standby");
    } else {
        assert_eq!(
            standbys(&s),
            Standbys {
                used: 0,
                changed: 0,
                not_run: 0,
                ready: 0
            }
        );
    }

    // Swapped for another directory: the call sees the new one.
    wait_ready(&s, 1);
    let before = standbys(&s);
    fs::rename(f.root.join("data"), f.base.join("data.old")).unwrap();
    fs::create_dir(f.root.join("data")).unwrap();
    fs::write(f.root.join("data/inside.txt"), "NEW-OBJECT-5b9").unwrap();
    let a = invoke(&s, "victim", &json!({}));
    discarded(&s, before, "swapped");
    assert!(output(&a).contains("NEW-OBJECT-5b9"), "{a:?}");
    assert!(
        !a.body.contains("OLD-OBJECT-7e2"),
        "the old object came back: {a:?}"
    );

    // Removed: nothing of it is shown.
    wait_ready(&s, 1);
    let before = standbys(&s);
    fs::rename(f.root.join("data"), f.base.join("data.new")).unwrap();
    let a = invoke(&s, "victim", &json!({}));
    discarded(&s, before, "removed");
    assert!(a.body.contains("data/inside.txt: No such file"), "{a:?}");
    assert!(
        !a.body.contains("NEW-OBJECT-5b9") && !a.body.contains("OLD-OBJECT-7e2"),
        "a removed grant was shown: {a:?}"
    );

    // Created again (missing when the last standby was made): shown.
    wait_ready(&s, 1);
    let before = standbys(&s);
    fs::create_dir(f.root.join("data")).unwrap();
    fs::write(f.root.join("data/inside.txt"), "THIRD-OBJECT-c3d").unwrap();
    let a = invoke(&s, "victim", &json!({}));
    discarded(&s, before, "created");
    assert!(output(&a).contains("THIRD-OBJECT-c3d"), "{a:?}");

    // Swapped for a link to a place outside every grant: refused or
    // shown without it, never the canary.
    wait_ready(&s, 1);
    fs::rename(f.root.join("data"), f.base.join("data.third")).unwrap();
    std::os::unix::fs::symlink(&f.outside, f.root.join("data")).unwrap();
    let a = invoke(&s, "victim", &json!({}));
    assert!(!a.body.contains(CANARY), "the canary came back: {a:?}");

    eprintln!("{:?}", standbys(&s));
    assert_eq!(
        fs::read_to_string(f.outside.join("inside.txt")).unwrap(),
        CANARY
    );
}

/// The call after a change found the standby made before it and
/// discarded it (where standbys are made).
fn discarded(s: &Served, before: Standbys, change: &str) {
    if standbys_here() {
        let after = standbys(s);
        assert_eq!(
            (after.used, after.changed),
            (before.used, before.changed + 1),
            "{change}: the standby made before was discarded, not used: {before:?} -> {after:?}\n{}",
            s.stderr()
        );
    }
}

/// A second tool (played by a thread) exchanges the victim's granted
/// directory with a link to a place outside every grant, in a loop, while
/// the victim is called again and again: standbys are made from either
/// state and taken in either. No call reads the canary outside.
#[test]
fn a_grant_exchanged_with_a_link_in_a_loop_never_reads_outside_through_a_standby() {
    require_jail!();
    let f = project("INSIDE-OK");
    std::os::unix::fs::symlink(&f.outside, f.root.join("swap")).unwrap();
    let s = serve(&f);
    let a = invoke(&s, "victim", &json!({}));
    assert!(output(&a).contains("INSIDE-OK"), "{a:?}");
    // Calls in between, standbys made from either state.
    let swapper = Swapper::start_pausing(
        &f.root.join("data"),
        &f.root.join("swap"),
        Duration::from_millis(2),
    );
    let calls = std::env::var("GLOVEBOX_RACE_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200u32);
    let (mut worked, mut refused) = (0u32, 0u32);
    for _ in 0..calls {
        let a = invoke(&s, "victim", &json!({}));
        assert!(!a.body.contains(CANARY), "the canary came back: {a:?}");
        if a.json["ok"] == true {
            assert!(output(&a).contains("PROBE-START"), "{a:?}");
            worked += 1;
        } else {
            refused += 1;
        }
    }
    let swaps = swapper.finish();
    let t = standbys(&s);
    eprintln!("{swaps} exchanges; worked {worked}, refused {refused}; {t:?}");
    assert!(swaps > 50, "the racer ran throughout ({swaps} exchanges)");
    assert!(worked > 0, "some calls ran on the real grant");
    if standbys_here() {
        assert!(t.used + t.changed > 0, "standbys met the race: {t:?}");
    }
    assert_eq!(
        fs::read_to_string(f.outside.join("inside.txt")).unwrap(),
        CANARY
    );
}

#[test]
fn each_call_in_a_standby_gets_its_own_arguments_and_stdin() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    // A cold python call reads its request on stdin.
    f.file("mod.py", "def f(w):\n    return {'got': w}\n");
    f.tool(&python_tool(
        "py",
        schema(json!({"w": {"type": "string"}})),
        json!({"module": "mod", "function": "f", "warm": false}),
        read_root(),
    ));
    let s = serve(&f);
    for i in 0..12 {
        wait_ready(&s, if i == 0 { 0 } else { 1 });
        let word = format!("word-{i}-{}", i * 7919);
        let a = invoke(&s, "echo", &json!({"w": word}));
        assert_eq!(output(&a).trim(), word, "{a:?}");
    }
    let after_echo = standbys(&s).used;
    for i in 0..6 {
        let word = format!("py-{i}-{}", i * 104_729);
        let a = invoke(&s, "py", &json!({"w": word}));
        assert_eq!(a.json["output"]["got"], json!(word), "{a:?}");
        // The next call finds its standby ready.
        wait_ready(&s, 2);
    }
    let t = standbys(&s);
    eprintln!("{t:?}");
    if standbys_here() {
        assert!(after_echo >= 10, "the echo calls ran in standbys: {t:?}");
        assert!(t.used >= after_echo + 4, "the python calls too: {t:?}");
    }
}

#[test]
fn no_tool_runs_in_another_tools_standby() {
    require_jail!();
    let f = Fixture::new();
    for (name, dir) in [("a", "only-a"), ("b", "only-b")] {
        fs::create_dir_all(f.root.join(dir)).unwrap();
        fs::write(f.root.join(dir).join("mark"), format!("MARK-{name}")).unwrap();
        f.tool(&shell_tool(
            name,
            "echo PROBE; cat only-a/mark only-b/mark 2>&1; true",
            json!({"network": false, "fs": {"read": [dir]}}),
        ));
    }
    let s = serve(&f);
    for i in 0..16 {
        let (me, other) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
        let a = invoke(&s, me, &json!({}));
        let out = output(&a);
        assert!(
            out.contains("PROBE") && out.contains(&format!("MARK-{me}")),
            "{a:?}"
        );
        assert!(
            !out.contains(&format!("MARK-{other}")),
            "{me} saw {other}'s grant: {a:?}"
        );
        wait_ready(&s, if i == 0 { 1 } else { 2 });
    }
    if standbys_here() {
        assert!(standbys(&s).used >= 12, "{:?}", standbys(&s));
    }
}

/// The server's children (by pid) from `/proc`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let text = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

#[test]
fn standby_jails_end_with_the_server() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&shell_tool("t", "echo PROBE", read_root()));
    let mut s = serve(&f);
    let a = invoke(&s, "t", &json!({}));
    assert!(output(&a).contains("PROBE"), "{a:?}");
    wait_ready(&s, 1);
    let waiting = children(s.child.id());
    if standbys_here() {
        assert!(!waiting.is_empty(), "a standby's child waits at its gate");
    }
    s.terminate();
    assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    for pid in waiting {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty(),
            "a standby's child outlived the server: {stat}"
        );
    }
    assert!(
        !s.stderr().contains("standby jail had not ended"),
        "{}",
        s.stderr()
    );
}

/// `GLOVEBOX_STANDBY` turns standbys on and off as the README says, with
/// the spellings environment variables use (`1`, `yes`, `on`; `0`, `no`,
/// `off`), and a value that is neither is refused by name.
#[test]
fn the_environment_twin_turns_standbys_on_and_off() {
    require_jail!();
    let f = project("TWIN-8d1");
    let mut env = state_env(&f);
    for (value, on) in [("1", true), ("yes", true), ("0", false), ("off", false)] {
        env.retain(|(k, _)| k != "GLOVEBOX_STANDBY");
        env.push(("GLOVEBOX_STANDBY".into(), value.into()));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let s = Served::start(&f.root, &pairs, &[]);
        let a = invoke(&s, "victim", &json!({}));
        assert!(output(&a).contains("TWIN-8d1"), "{a:?}");
        if on {
            wait_ready(&s, 1);
        }
        let a = invoke(&s, "victim", &json!({}));
        assert!(output(&a).contains("TWIN-8d1"), "{a:?}");
        let used = standbys(&s).used;
        assert_eq!(
            used,
            u64::from(on && standbys_here()),
            "GLOVEBOX_STANDBY={value}: {:?}",
            standbys(&s)
        );
    }
    let out = std::process::Command::new(bin())
        .args([
            "--root",
            f.root.to_str().unwrap(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("GLOVEBOX_STANDBY", "maybe")
        .envs(state_env(&f))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'maybe'") && err.contains("--standby"),
        "{err}"
    );
}
