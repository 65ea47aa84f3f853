//! The audit trail fails closed and proves continuity (issue 23, break 2–4):
//! a cut, emptied or deleted log fails `--verify` even after further calls,
//! until a person reseals it; a call whose intent cannot be recorded does
//! not run; a call killed mid-way leaves its intent unfinished; an
//! interrupted write is reported as interrupted, not as tampering. Each
//! test keeps its own state directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::{tool_error, StdioMcp};

struct Project {
    f: Fixture,
    state: PathBuf,
}

impl Project {
    /// A project with `mark`: a tool that creates `out/<w>` and echoes it.
    fn new() -> Project {
        let f = Fixture::new();
        let state = f.state();
        f.script(
            "scripts/mark.sh",
            "#!/bin/sh\ntouch \"out/$1\"\necho \"$1\"\n",
        );
        std::fs::create_dir_all(f.root.join("out")).unwrap();
        f.tool(&command_tool(
            "mark",
            schema(json!({"w": {"type": "string"}})),
            json!({"entrypoint": "./scripts/mark.sh", "args": ["${w}"]}),
            json!({"fs": {"read": ["."], "write": ["out"]}}),
        ));
        f.tool(&command_tool(
            "sleepy",
            schema(json!({})),
            json!({"entrypoint": "sleep", "args": ["30"]}),
            read_root(),
        ));
        Project { f, state }
    }

    fn gb(&self, args: &[&str]) -> Output {
        self.f.glovebox(args)
    }

    fn mark(&self, w: &str) -> Called {
        self.f.run_audited("mark", &[&format!("w={w}")])
    }

    fn marked(&self, w: &str) -> bool {
        self.f.root.join("out").join(w).exists()
    }

    fn log_path(&self) -> PathBuf {
        self.f.root.join(".glee/audit/tools.log")
    }

    fn log(&self) -> String {
        self.f.audit_log()
    }

    /// `audit --verify --json`: (intact, the verification).
    fn verify(&self) -> (bool, Value) {
        let out = self.gb(&["audit", "--verify", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "verify printed no json ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(
            out.status.success(),
            v["problems"].as_array().unwrap().is_empty(),
            "{v}"
        );
        (out.status.success(), v)
    }

    fn head_path(&self) -> PathBuf {
        let dir = self.state.join("audit");
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "head"))
            .expect("a head")
    }
}

/// A log cut back to its first call, emptied, or deleted (alone or with
/// all of `.glee/`), stays detected after more calls, until a reseal.
#[test]
fn a_cut_log_fails_verify_even_after_further_calls_until_resealed() {
    require_jail!();
    type Damage = fn(&Project);
    let cases: [(&str, Damage); 4] = [
        ("trimmed", |p| {
            let first: String = p.log().lines().take(2).map(|l| format!("{l}\n")).collect();
            std::fs::write(p.log_path(), first).unwrap();
        }),
        ("emptied", |p| std::fs::write(p.log_path(), "").unwrap()),
        ("deleted", |p| std::fs::remove_file(p.log_path()).unwrap()),
        ("glee deleted", |p| {
            // .glee/ goes with its tools; put the tools back as a person would.
            let tools = p.f.base.join("tools-copy");
            copy_tree(&p.f.root.join(".glee/tools"), &tools);
            std::fs::remove_dir_all(p.f.root.join(".glee")).unwrap();
            copy_tree(&tools, &p.f.root.join(".glee/tools"));
        }),
    ];
    for (what, damage) in cases {
        let p = Project::new();
        for w in ["a", "b", "c", "d"] {
            p.mark(w).assert_ok();
        }
        assert!(p.verify().0, "{what}: a fresh log verifies");
        damage(&p);
        assert!(!p.verify().0, "{what}: the damage is seen at once");
        // The calls go on (and run: a break is recorded, not a refusal)...
        p.mark("e").assert_ok();
        assert!(p.marked("e"), "{what}");
        p.mark("f").assert_ok();
        // ...and the break is in the log and keeps --verify failing.
        assert!(p.log().contains("AUDIT_BREAK"), "{what}: {}", p.log());
        let (intact, v) = p.verify();
        assert!(!intact, "{what}: still fails after further calls: {v}");
        assert!(
            v["problems"].to_string().contains("continuity broken"),
            "{what}: {v}"
        );
        // A person looks, then reseals: logged, and verify passes.
        let out = p.gb(&["audit", "--reseal"]);
        assert!(out.status.success(), "{what}: {out:?}");
        assert!(p.log().contains("AUDIT_RESEALED"), "{what}");
        let (intact, v) = p.verify();
        assert!(intact, "{what}: resealed: {v}");
        p.mark("g").assert_ok();
        assert!(p.verify().0, "{what}: calls after the reseal verify");
        // A new cut after the reseal is caught again.
        std::fs::write(p.log_path(), "").unwrap();
        p.mark("h").assert_ok();
        assert!(!p.verify().0, "{what}: a second cut is caught");
    }
}

/// Damage in the middle of the log stays acknowledged after a reseal only
/// as long as those lines do not change again.
#[test]
fn a_reseal_acknowledges_only_the_damage_it_saw() {
    require_jail!();
    let p = Project::new();
    for w in ["a", "b", "c"] {
        p.mark(w).assert_ok();
    }
    let original = p.log();
    std::fs::write(
        p.log_path(),
        original.replacen("\"w\":\"b\"", "\"w\":\"z\"", 2),
    )
    .unwrap();
    assert!(!p.verify().0);
    p.mark("d").assert_ok();
    assert!(!p.verify().0, "an edit stays visible after further calls");
    assert!(p.gb(&["audit", "--reseal"]).status.success());
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    assert!(v["acknowledged"].as_u64().unwrap() > 0, "{v}");
    // Editing another old line after the reseal fails again.
    let now = p.log();
    std::fs::write(p.log_path(), now.replacen("\"w\":\"a\"", "\"w\":\"y\"", 1)).unwrap();
    assert!(!p.verify().0);
}

/// With the log unwritable (here: a directory where the file should be, so
/// that root cannot write it either), or the head unwritable, the call does
/// not run; `audit: best_effort` runs it with a warning.
#[test]
fn an_unwritable_log_or_head_refuses_the_call() {
    require_jail!();
    let p = Project::new();
    p.mark("first").assert_ok();
    // The log.
    std::fs::remove_file(p.log_path()).unwrap();
    std::fs::create_dir(p.log_path()).unwrap();
    let r = p.mark("blocked");
    r.assert_failed("audit_unavailable", 1);
    assert!(
        !p.marked("blocked"),
        "the tool ran without a record: {r:#?}"
    );
    assert!(r.message().contains("audit"), "{r:#?}");
    assert!(
        r.glovebox_stderr.contains("refused"),
        "the refusal is said on stderr: {r:#?}"
    );
    std::fs::remove_dir(p.log_path()).unwrap();

    // The head.
    let p = Project::new();
    p.mark("first").assert_ok();
    let head = p.head_path();
    std::fs::remove_file(&head).unwrap();
    std::fs::create_dir(&head).unwrap();
    let r = p.mark("blocked");
    r.assert_failed("audit_unavailable", 1);
    assert!(!p.marked("blocked"), "the tool ran without a head: {r:#?}");
    // The refusal names the state directory in use.
    let state = p.state.display().to_string();
    assert!(r.message().contains(&format!("state {state}")), "{r:#?}");
    assert_eq!(
        r.json["error"]["details"]["state_dir"],
        json!(state),
        "{r:#?}"
    );

    // best_effort: the call runs, with a warning.
    p.f.config(&json!({"audit": "best_effort"}));
    let r = p.mark("anyway");
    r.assert_ok();
    assert!(p.marked("anyway"));
    assert!(r.json["warnings"].to_string().contains("audit"), "{r:#?}");
}

/// SIGKILL of glovebox mid-call: the call's intent is in the log, and
/// `--verify` lists it as unfinished (not as tampering).
#[test]
fn a_call_killed_mid_way_leaves_its_intent_unfinished() {
    require_jail!();
    let p = Project::new();
    p.mark("before").assert_ok();
    let mut child = Command::new(bin())
        .args(["run", "sleepy", "--json", "--root"])
        .arg(&p.f.root)
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .current_dir(&p.f.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.log().contains("TOOL_STARTED name=sleepy") {
        assert!(Instant::now() < deadline, "no intent line: {}", p.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (intact, v) = p.verify();
    assert!(intact, "a crash is not tampering: {v}");
    let unfinished = v["unfinished"].as_array().unwrap();
    assert_eq!(unfinished.len(), 1, "{v}");
    assert!(unfinished[0].as_str().unwrap().contains("sleepy"), "{v}");
    // The next call works and the log still verifies.
    p.mark("after").assert_ok();
    assert!(p.verify().0);
    let text = String::from_utf8(p.gb(&["audit", "--verify"]).stdout).unwrap();
    assert!(text.contains("unfinished"), "{text}");
}

/// An interrupted write (an unterminated last line) or lines written
/// before the head was moved (a crash in between) are reported as
/// interrupted, never as tampering, and the next call repairs them.
#[test]
fn interrupted_writes_are_not_tampering() {
    require_jail!();
    let p = Project::new();
    p.mark("a").assert_ok();
    // A crash after the line was written, before the head moved.
    let head = p.head_path();
    let old_head = std::fs::read(&head).unwrap();
    p.mark("b").assert_ok();
    std::fs::write(&head, &old_head).unwrap();
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    assert!(!v["interrupted"].as_array().unwrap().is_empty(), "{v}");
    // A crash mid-write: half a line.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.log_path())
        .unwrap();
    std::io::Write::write_all(&mut f, b"[2026-11-23T00:00:00Z] TOOL_EXECUTED name=ma").unwrap();
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    assert!(v["interrupted"].to_string().contains("unterminated"), "{v}");
    p.mark("c").assert_ok();
    assert!(p.log().contains("AUDIT_INTERRUPTED"), "{}", p.log());
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    assert!(v["interrupted"].as_array().unwrap().is_empty(), "{v}");
    // Lines someone else appended are not taken in silently.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.log_path())
        .unwrap();
    std::io::Write::write_all(
        &mut f,
        b"[2026-11-23T00:00:00Z] TOOL_EXECUTED name=x mac=00\n",
    )
    .unwrap();
    assert!(!p.verify().0);
    p.mark("d").assert_ok();
    assert!(!p.verify().0);
}

/// `--verify` while calls are being logged never mistakes a write in
/// progress for tampering.
#[test]
fn verify_during_calls_sees_no_tampering() {
    require_jail!();
    let p = Project::new();
    p.mark("first").assert_ok();
    std::thread::scope(|s| {
        for t in 0..4 {
            let p = &p;
            s.spawn(move || {
                for i in 0..8 {
                    p.mark(&format!("t{t}-{i}")).assert_ok();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..60 {
                let (_, v) = p.verify();
                assert_eq!(v["problems"], json!([]), "{v}");
            }
        });
    });
    assert!(p.verify().0);
}

/// A full disk (simulated with RLIMIT_FSIZE just above the log's size,
/// SIGXFSZ ignored): the intent cannot be written, so the tool does not
/// run, and no half line is left behind; the log still verifies.
#[test]
fn a_full_disk_refuses_the_call_and_leaves_no_half_line() {
    require_jail!();
    let p = Project::new();
    p.mark("a").assert_ok();
    let before = std::fs::read(p.log_path()).unwrap();
    let limit = before.len() + 40;
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec prlimit --fsize=$LIMIT:$LIMIT \"$@\"")
        .arg("sh")
        .arg(bin())
        .args(["run", "mark", "w=full", "--json", "--root"])
        .arg(&p.f.root)
        .env("LIMIT", limit.to_string())
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .current_dir(&p.f.cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {out:?}");
    });
    assert_eq!(outcome["error"]["kind"], "audit_unavailable", "{outcome}");
    assert!(!p.marked("full"), "the tool ran without a record");
    assert_eq!(
        std::fs::read(p.log_path()).unwrap(),
        before,
        "the log changed (a half line?)"
    );
    assert!(p.verify().0);
    p.mark("after").assert_ok();
    assert!(p.verify().0);
}

/// After many calls (the head rewritten in place, its two slots taking
/// turns), cutting only the last line is still caught, and the next call
/// records the break. The head is the two-slot file, mode 0600.
#[test]
fn cutting_the_last_line_after_many_calls_is_caught() {
    require_jail!();
    let p = Project::new();
    std::thread::scope(|s| {
        for t in 0..3 {
            let p = &p;
            s.spawn(move || {
                for i in 0..8 {
                    p.mark(&format!("t{t}-{i}")).assert_ok();
                }
            });
        }
    });
    assert!(p.verify().0);
    let head = p.head_path();
    let bytes = std::fs::read(&head).unwrap();
    let half = bytes.len() / 2;
    assert!(
        bytes.starts_with(b"GBHEAD02") && bytes[half..].starts_with(b"GBHEAD02"),
        "both slots written"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&head).unwrap().mode() & 0o777, 0o600);
    let log = p.log();
    assert_eq!(log.lines().count(), 48);
    let cut: String = log.lines().take(47).map(|l| format!("{l}\n")).collect();
    std::fs::write(p.log_path(), cut).unwrap();
    let (intact, v) = p.verify();
    assert!(!intact, "{v}");
    assert!(v["problems"].to_string().contains("shorter"), "{v}");
    p.mark("after").assert_ok();
    assert!(p.log().contains("AUDIT_BREAK"), "{}", p.log());
    assert!(!p.verify().0);
}

/// `glovebox run mark w=W` with the file size limit `limit` (SIGXFSZ
/// ignored): every write past `limit` bytes of a file fails with EFBIG, as
/// on a full disk.
fn mark_with_fsize(p: &Project, w: &str, limit: usize) -> Value {
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec prlimit --fsize=$LIMIT:$LIMIT \"$@\"")
        .arg("sh")
        .arg(bin())
        .args(["run", "mark", &format!("w={w}"), "--json", "--root"])
        .arg(&p.f.root)
        .env("LIMIT", limit.to_string())
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .current_dir(&p.f.cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// A project's first call meets a full state directory (its head, a new
/// file of 8 KiB, cannot be made; the key and the log still can): the
/// call is refused and nothing is written, so once the disk is freed the
/// next calls work and `--verify` passes; not TAMPERED (the head used to
/// be made after the first line, which then stood in the log without a
/// head, an `AUDIT_BREAK` for every later call). A head move that fails
/// later (the line written) is reported as interrupted, never as an edit.
/// A real edit is still caught.
#[test]
fn a_full_state_directory_on_the_first_call_is_not_tampering() {
    require_jail!();
    let p = Project::new();
    // The state is in use already (its key made by another project).
    let other = Project::new();
    other.f.run_env(
        "mark",
        &["w=other"],
        &[("GLOVEBOX_STATE_DIR", p.state.to_str().unwrap())],
    );
    assert!(p.state.join("audit.key").exists());
    let outcome = mark_with_fsize(&p, "full", 4000);
    assert_eq!(outcome["error"]["kind"], "audit_unavailable", "{outcome}");
    assert!(!p.marked("full"), "the tool ran without a record");
    assert_eq!(p.log(), "", "nothing is written without a head");
    // The disk freed: calls work, and the log verifies.
    p.mark("after").assert_ok();
    assert!(p.marked("after"));
    p.mark("again").assert_ok();
    let (intact, v) = p.verify();
    assert!(intact, "a full disk is not tampering: {v}");
    assert!(!p.log().contains("AUDIT_BREAK"), "{}", p.log());

    // Full again: a head move past the limit fails after its line was
    // written (the head's second slot lies past 4000 bytes).
    let lines = p.log().lines().count();
    let outcome = mark_with_fsize(&p, "later", 4000);
    assert!(
        p.log().lines().count() > lines
            && outcome["error"]["message"]
                .to_string()
                .contains("not made durable"),
        "the probe wrote no line, or its head moved: {outcome}"
    );
    assert!(!p.marked("later"), "the tool ran without a durable record");
    let (intact, v) = p.verify();
    assert!(intact, "an unmoved head is not tampering: {outcome} {v}");
    assert!(
        v["interrupted"]
            .to_string()
            .contains("full state directory"),
        "{v}"
    );
    p.mark("freed").assert_ok();
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    assert_eq!(
        v["interrupted"],
        json!([]),
        "taken in by the next call: {v}"
    );
    assert!(!p.log().contains("AUDIT_BREAK"), "{}", p.log());

    // A real edit is still caught.
    let log = p.log();
    assert!(log.contains("\"w\":\"after\""), "{log}");
    std::fs::write(
        p.log_path(),
        log.replacen("\"w\":\"after\"", "\"w\":\"zzzzz\"", 1),
    )
    .unwrap();
    let (intact, v) = p.verify();
    assert!(!intact, "{v}");
    assert!(
        v["problems"].to_string().contains("mac does not match"),
        "{v}"
    );
}

/// The state directory deleted under a running server (`glovebox mcp`):
/// the key it signs with is gone, so its calls are refused
/// (`audit_unavailable`, naming the key file) and nothing is signed with
/// a key no longer on disk; `audit --verify` makes no key and says the key
/// is missing (exit 4), not that the log was edited. The state put back
/// (the same key, a new file): the server signs again and the log
/// verifies. The key file alone deleted: a new process makes no new key
/// either (the state's heads show one was in use).
#[test]
fn a_deleted_state_directory_stops_calls_and_verify_makes_no_key() {
    require_jail!();
    let p = Project::new();
    let key = p.state.join("audit.key");
    let state = p.state.to_str().unwrap().to_string();
    let mut mcp = StdioMcp::start(&p.f.root, &[("GLOVEBOX_STATE_DIR", &state)], &[]);
    let r = mcp.call(1, "mark", json!({"w": "a"}));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert!(p.marked("a"));
    assert!(p.verify().0);
    let backup = p.f.base.join("state-backup");
    copy_tree(&p.state, &backup);
    let lines = p.log().lines().count();

    std::fs::remove_dir_all(&p.state).unwrap();
    for i in 0..20 {
        let w = format!("gone{i}");
        let r = mcp.call(10 + i, "mark", json!({"w": w}));
        let e = tool_error(&r["result"]);
        assert_eq!(e["kind"], "audit_unavailable", "{r}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(key.to_str().unwrap()), "{message}");
        assert!(message.contains("is gone"), "{message}");
        assert_eq!(e["details"]["key"], json!(key), "{r}");
        assert!(!p.marked(&w), "the tool ran without a record");
    }
    assert_eq!(p.log().lines().count(), lines, "{}", p.log());
    assert!(!key.exists(), "the server made a new key");

    // --verify: no key made, the key said to be missing, nothing edited.
    let out = p.gb(&["audit", "--verify", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["key_missing"], json!(key), "{v}");
    assert_eq!(v["problems"], json!([]), "{v}");
    let out = p.gb(&["audit", "--verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        text.contains("is missing; lines cannot be verified"),
        "{text}"
    );
    assert!(
        !text.contains("TAMPERED") && !text.contains("edited"),
        "{text}"
    );
    assert!(!key.exists(), "verify made a new key");
    // Nor does a reseal: it has nothing to sign with.
    let out = p.gb(&["audit", "--reseal"]);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is missing"), "{said}");
    assert!(!key.exists(), "reseal made a new key");
    assert!(!p.log().contains("AUDIT_RESEALED"), "{}", p.log());

    // The state put back from the backup: the same key in a new file.
    copy_tree(&backup, &p.state);
    let r = mcp.call(40, "mark", json!({"w": "back"}));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert!(p.marked("back"));
    let (intact, v) = p.verify();
    assert!(intact, "{v}");
    drop(mcp);

    // The key alone deleted: a new process refuses too, and makes none.
    std::fs::remove_file(&key).unwrap();
    let r = p.mark("keyless");
    r.assert_failed("audit_unavailable", 1);
    assert!(r.message().contains(key.to_str().unwrap()), "{r:#?}");
    assert!(!p.marked("keyless"));
    assert!(!key.exists(), "a new key was made");
}

/// The state directory deleted by a racer while a server's calls go on in
/// a loop: every call sent after the deletion finished is refused
/// (`audit_unavailable`) and its tool does not run; the log holds an
/// intent only for calls sent before it; no key is made.
#[test]
fn a_state_directory_deleted_while_calls_run_stops_the_next_ones() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, OnceLock};
    require_jail!();
    let p = Project::new();
    let state = p.state.to_str().unwrap().to_string();
    let mut mcp = StdioMcp::start(&p.f.root, &[("GLOVEBOX_STATE_DIR", &state)], &[]);
    let done = Arc::new(AtomicUsize::new(0));
    let deleted: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let racer = {
        let (done, deleted, dir) = (done.clone(), deleted.clone(), p.state.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while done.load(Ordering::SeqCst) < 10 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            // As `rm -rf` would, again while a writer adds a file to it.
            for _ in 0..100 {
                if std::fs::remove_dir_all(&dir).is_ok() {
                    break;
                }
            }
            assert!(!dir.exists(), "the state directory could not be deleted");
            deleted.set(Instant::now()).unwrap();
        })
    };
    let mut calls = Vec::new();
    for i in 0..40u64 {
        let w = format!("c{i}");
        let sent = Instant::now();
        let r = mcp.call(100 + i, "mark", json!({"w": w}));
        calls.push((w, sent, r));
        done.fetch_add(1, Ordering::SeqCst);
    }
    racer.join().unwrap();
    let deleted = *deleted.get().expect("the racer deleted the state");
    let (mut before, mut after) = (0, 0);
    for (w, sent, r) in &calls {
        if *sent > deleted {
            after += 1;
            let e = tool_error(&r["result"]);
            assert_eq!(e["kind"], "audit_unavailable", "{w}: {r}");
            assert!(!p.marked(w), "{w} ran after its key was gone");
        } else if r["result"]["isError"] == json!(false) {
            before += 1;
        }
    }
    assert!(
        before >= 10 && after >= 10,
        "{before} before, {after} after"
    );
    let started = p.log().matches("TOOL_STARTED").count();
    assert!(
        started <= calls.len() - after,
        "{started} intents for {} calls sent before the deletion",
        calls.len() - after
    );
    assert!(!p.state.join("audit.key").exists(), "a new key was made");
    assert_eq!(p.gb(&["audit", "--verify"]).status.code(), Some(4));
}

/// Issue 32: a call's parameters are in the log once (its intent line);
/// its result line names the intent's call id instead, and `--verify`
/// still passes. A call refused before it started (no slot free) has
/// its own line, with its parameters.
#[test]
fn a_call_s_parameters_are_logged_once_and_a_busy_refusal_is_logged() {
    require_jail!();
    let p = Project::new();
    let unique = "p4r4m-once";
    let r = p.mark(unique);
    assert!(p.marked(unique), "{r:?}");
    let log = p.log();
    assert_eq!(log.matches(unique).count(), 1, "{log}");
    let started = log
        .lines()
        .find(|l| l.contains("TOOL_STARTED name=mark"))
        .unwrap_or_else(|| panic!("no intent: {log}"));
    assert!(started.contains(unique), "{started}");
    let call = started
        .split(' ')
        .find_map(|f| f.strip_prefix("call="))
        .unwrap();
    let result = log
        .lines()
        .find(|l| l.contains("TOOL_EXECUTED name=mark"))
        .unwrap_or_else(|| panic!("no result: {log}"));
    assert!(result.contains(&format!(" call={call} ")), "{result}");
    assert!(!result.contains("params="), "{result}");
    assert!(p.verify().0, "{log}");
    // Busy: one slot, no queue, the slot taken by `sleepy`.
    let state = p.state.to_str().unwrap().to_string();
    let mut m = StdioMcp::start(
        &p.f.root,
        &[("GLOVEBOX_STATE_DIR", &state)],
        &["--max-concurrent", "1", "--max-queued", "0"],
    );
    m.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleepy", "arguments": {}}}));
    assert!(
        wait_until(Duration::from_secs(20), || p
            .log()
            .contains("TOOL_STARTED name=sleepy")),
        "{}",
        p.log()
    );
    let r = m.call(2, "mark", json!({"w": "b4sy-refused"}));
    assert_eq!(
        tool_error(&r["result"])["details"]["busy"],
        json!(true),
        "{r}"
    );
    assert!(!p.marked("b4sy-refused"));
    // Written beside the answer: wait for it (bounded).
    wait_until(Duration::from_secs(10), || p.log().contains("b4sy-refused"));
    let log = p.log();
    let refused = log
        .lines()
        .find(|l| l.contains("b4sy-refused"))
        .unwrap_or_else(|| panic!("the busy refusal is not in the log: {log}"));
    assert!(
        refused.contains("TOOL_EXECUTED name=mark")
            && refused.contains("status=error kind=resource_limit")
            && !refused.contains(" call=")
            && refused.contains("caller=mcp:servekit"),
        "{refused}"
    );
    drop(m);
}
