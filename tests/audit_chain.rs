//! The tamper-evident audit log (invariant 11): an edited or cut log
//! fails `--verify`, concurrent writers keep one chain, secrets never
//! reach it, a line of another state's key is told from tampering, and
//! no caller-supplied string forges a field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/project.rs"]
mod project;
mod runkit;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use project::Project;
use runkit::*;
use serde_json::{json, Value};

#[test]
fn edited_or_truncated_audit_log_fails_verify() {
    require_jail!();
    let p = Project::new();
    p.f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    for w in ["a", "b", "c"] {
        p.run("echo", &[&format!("w={w}")]).assert_ok();
    }
    assert!(p.verify(), "a fresh log verifies");
    let path = p.f.root.join(".glee/audit/tools.log");
    let original = p.log();
    // Each call: its intent (TOOL_STARTED) and its result (TOOL_EXECUTED).
    assert_eq!(original.lines().count(), 6);

    // Edit one value.
    std::fs::write(&path, original.replacen("\"w\":\"b\"", "\"w\":\"z\"", 1)).unwrap();
    assert!(!p.verify(), "an edited line must fail");
    // Drop a middle line.
    let lines: Vec<&str> = original.lines().collect();
    std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).unwrap();
    assert!(!p.verify(), "a removed line must fail");
    // Truncate the tail.
    std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[1])).unwrap();
    assert!(!p.verify(), "a truncated log must fail");
    // Empty it.
    std::fs::write(&path, "").unwrap();
    assert!(!p.verify(), "an emptied log must fail");
    // Restored, it verifies again.
    std::fs::write(&path, &original).unwrap();
    assert!(p.verify());
}

#[test]
fn concurrent_runs_leave_a_well_formed_log_with_every_line() {
    require_jail!();
    let p = Project::new();
    p.f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    const PROCS: usize = 8;
    const EACH: usize = 5;
    std::thread::scope(|s| {
        for i in 0..PROCS {
            let p = &p;
            s.spawn(move || {
                for j in 0..EACH {
                    p.run("echo", &[&format!("w=p{i}-{j}")]).assert_ok();
                }
            });
        }
    });
    let log = p.log();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2 * PROCS * EACH, "{log}");
    for i in 0..PROCS {
        for j in 0..EACH {
            let needle = format!("\"w\":\"p{i}-{j}\"");
            // The intent holds the parameters, once; the result names its
            // call id.
            assert_eq!(log.matches(&needle).count(), 1, "{needle} in {log}");
            let intent = lines.iter().find(|l| l.contains(&needle)).unwrap();
            let call = intent
                .split(' ')
                .find_map(|w| w.strip_prefix("call="))
                .unwrap_or_else(|| panic!("{intent}"));
            let results = lines
                .iter()
                .filter(|l| l.contains("TOOL_EXECUTED") && l.contains(&format!(" call={call} ")))
                .count();
            assert_eq!(results, 1, "{needle} in {log}");
        }
    }
    assert!(p.verify(), "the concurrent log must verify");
}

#[test]
fn secret_values_never_reach_the_log() {
    require_jail!();
    let p = Project::new();
    let secret = "sk-live-0123456789abcdef";
    p.f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "sh", "args": ["-c", "echo $API_TOKEN $1; exit 3", "sh", "${w}"]}),
        json!({"fs": {"read": ["."]}, "secrets": {"API_TOKEN": {"type": "string", "required": true}}}),
    ));
    let env = [
        ("API_TOKEN", secret),
        ("GLOVEBOX_STATE_DIR", p.state.to_str().unwrap()),
    ];
    // The caller even passes the secret as a parameter value.
    let r = p.f.run_env("echo", &[&format!("w={secret}")], &env);
    r.assert_failed("exit_code", 1);
    assert!(!r.json.to_string().contains(secret), "{r:#?}");
    let log = p.log();
    assert!(log.contains("TOOL_EXECUTED name=echo"), "{log}");
    assert!(log.contains("[REDACTED:API_TOKEN]"), "{log}");
    assert!(!log.contains(secret), "secret in the log: {log}");
    assert!(!dir_contains(&p.state, secret));
}

fn dir_contains(dir: &Path, needle: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            if p.is_dir() {
                dir_contains(&p, needle)
            } else {
                std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            }
        })
}

#[test]
fn a_long_log_still_chains_when_appends_read_only_its_tail() {
    require_jail!();
    let p = Project::new();
    // The log keeps strings up to 1 KiB verbatim: many such parameters make
    // long lines.
    let names: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let props: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.clone(), json!({"type": "string"})))
        .collect();
    p.f.tool(&command_tool(
        "echo",
        schema(Value::Object(props)),
        json!({"entrypoint": "true"}),
        read_root(),
    ));
    let args = |count: usize, tag: &str| -> Vec<String> {
        names[..count]
            .iter()
            .map(|n| format!("{n}={tag}-{}", "x".repeat(1000)))
            .collect()
    };
    // Lines of ~3 KiB: the log soon exceeds the 8 KiB tail window, and one
    // line of 40 KiB exceeds it on its own.
    for i in 0..12 {
        let a = args(3, &i.to_string());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        p.run("echo", &a).assert_ok();
    }
    let a = args(40, "big");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    p.run("echo", &a).assert_ok();
    p.run("echo", &["w0=last"]).assert_ok();
    assert!(p.log().len() > 60_000, "{}", p.log().len());
    assert_eq!(p.log().lines().count(), 28);
    assert!(p.verify(), "the chain must hold across the window");
}

#[test]
fn verify_tells_another_state_key_from_tampering() {
    let p = Project::new();
    p.f.tool(&command_tool(
        "hi",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        json!({"fs": {"read": ["."]}}),
    ));
    let other = p.f.base.join("other-state");
    let with = |state: &Path, args: &[&str]| {
        Command::new(bin())
            .arg("--root")
            .arg(&p.f.root)
            .arg("--state-dir")
            .arg(state)
            .args(args)
            .env_remove("GLOVEBOX_STATE_DIR")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // Lines 1, 2 and 4 by this state, line 3 by another (approvals need
    // no jail: the tool is approved, not run).
    with(&p.state, &["approve", "hi", "--yes"]);
    with(&p.state, &["approve", "hi", "--yes"]);
    with(&other, &["approve", "hi", "--yes"]);
    with(&p.state, &["approve", "hi", "--yes"]);
    assert_eq!(p.log().lines().count(), 4, "{}", p.log());
    for (state, mine, theirs) in [(&p.state, 3, "3"), (&other, 1, "1-2, 4")] {
        let out = with(state, &["audit", "--verify"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{text}");
        assert!(!text.contains("TAMPERED"), "{text}");
        assert!(text.contains(&format!("{mine} lines intact")), "{text}");
        assert!(text.contains("signed with a different key"), "{text}");
        assert!(
            text.contains(&format!("state {}", state.display())),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "line{} {theirs}",
                if theirs.len() > 1 { "s" } else { "" }
            )),
            "{text}"
        );
        let json = with(state, &["audit", "--verify", "--json"]);
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v["problems"], json!([]), "{v}");
    }
    // A real edit is still tampering, whichever key checks it.
    let log = p.f.root.join(".glee/audit/tools.log");
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, text.replacen("approver=", "approver=x", 1)).unwrap();
    let out = with(&p.state, &["audit", "--verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("TAMPERED"), "{text}");
    assert!(text.contains("line 1: mac does not match"), "{text}");
}

/// The `key_id` a log line claims.
fn key_id_of(line: &str) -> &str {
    line.split(" key_id=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
}

/// A line this state's key signed, edited and made to claim the other
/// state's key, must not pass for a foreign line: `--verify` calls it
/// tampering (the head counts the lines each key signed), whichever line
/// it is and whichever state checks.
#[test]
fn a_line_made_to_claim_another_key_is_tampering() {
    let p = Project::new();
    let other = p.f.base.join("other-state");
    let with = |state: &Path, args: &[&str]| {
        Command::new(bin())
            .arg("--root")
            .arg(&p.f.root)
            .arg("--state-dir")
            .arg(state)
            .args(args)
            .env_remove("GLOVEBOX_STATE_DIR")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    p.f.tool(&command_tool(
        "hi",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        json!({"fs": {"read": ["."]}}),
    ));
    // Lines 1, 2 and 4 by this state, line 3 by the other.
    for state in [&p.state, &p.state, &other, &p.state] {
        let out = with(state, &["approve", "hi", "--yes"]);
        assert!(out.status.success(), "{out:?}");
    }
    let log = p.f.root.join(".glee/audit/tools.log");
    let pristine = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = pristine.lines().collect();
    assert_eq!(lines.len(), 4, "{pristine}");
    let (mine, theirs) = (key_id_of(lines[0]), key_id_of(lines[2]));
    assert_ne!(mine, theirs);
    let verify = |state: &Path| {
        let out = with(state, &["audit", "--verify", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.success(), v)
    };
    // The probe: untouched, neither state sees tampering.
    for state in [&p.state, &other] {
        let (_, v) = verify(state);
        assert_eq!(v["problems"], json!([]), "{v}");
    }
    // (line, from, to, the state whose line it is)
    for (n, from, to, state) in [
        (1, mine, theirs, &p.state),
        (3, theirs, mine, &other),
        (3, theirs, "0123456789abcdef", &other),
        (4, mine, "0123456789abcdef", &p.state),
    ] {
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        edited[n - 1] = edited[n - 1]
            // Same length: the head's byte count cannot tell.
            .replacen("[20", "[19", 1)
            .replacen(&format!("key_id={from}"), &format!("key_id={to}"), 1);
        assert_ne!(edited[n - 1], lines[n - 1]);
        std::fs::write(&log, edited.join("\n") + "\n").unwrap();
        let (ok, v) = verify(state);
        assert!(!ok, "line {n}: {v}");
        let problems = v["problems"].to_string();
        assert!(
            problems.contains("claim another key"),
            "line {n} relabelled {from} -> {to}: {v}"
        );
        let out = with(state, &["audit", "--verify"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("TAMPERED"), "{text}");
    }
    // Restored, it verifies again, and calls go on chaining.
    std::fs::write(&log, &pristine).unwrap();
    let (_, v) = verify(&p.state);
    assert_eq!(v["problems"], json!([]), "{v}");
    assert!(with(&p.state, &["approve", "hi", "--yes"]).status.success());
    let (_, v) = verify(&p.state);
    assert_eq!(v["problems"], json!([]), "{v}");
}

/// Runs `glovebox mcp` as a client named `name`/`version` and makes the
/// `calls` (tool, arguments) one after the other; the replies, in order.
fn mcp_calls(p: &Project, name: &str, version: &str, calls: &[(&str, Value)]) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(bin())
        .arg("--root")
        .arg(&p.f.root)
        .arg("mcp")
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .current_dir(&p.f.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": name, "version": version}}}),
    );
    let mut next = |id: usize| loop {
        let line = lines.next().expect("a reply").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == json!(id) {
            return v;
        }
    };
    next(0);
    let mut replies = Vec::new();
    let mut sent = vec![json!({"jsonrpc": "2.0", "method": "notifications/initialized"})];
    for (i, (tool, args)) in calls.iter().enumerate() {
        sent.push(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
        );
    }
    let mut sent = sent.into_iter();
    send(sent.next().unwrap());
    for (i, msg) in sent.enumerate() {
        send(msg);
        replies.push(next(i + 1));
    }
    drop(stdin);
    let _ = child.wait();
    replies
}

/// Attack 4: an MCP client's name and version, and a tool name, carry
/// field-like text and ANSI escapes. The log keeps one true field each, no
/// raw control byte reaches the log, `audit` or its JSON, and `--verify`
/// stays intact; a record with a duplicated field fails `--verify`.
#[test]
fn caller_supplied_strings_cannot_forge_audit_fields() {
    require_jail!();
    let p = Project::new();
    p.f.tool(&command_tool(
        "failing",
        schema(json!({})),
        json!({"entrypoint": "false"}),
        read_root(),
    ));
    let mut denied = command_tool(
        "guarded",
        schema(json!({})),
        json!({"entrypoint": "true"}),
        read_root(),
    );
    denied["approval"] = json!({"required": true, "reason": "r"});
    p.f.tool(&denied);
    let name = "x status=success agent_id=alice reason=ok\u{1b}[2K\u{1b}[1A\r\n[t] TOOL_EXECUTED name=failing status=success";
    let version = "1 status=success\u{1b}]0;title\u{7}\u{9b}31m";
    let replies = mcp_calls(
        &p,
        name,
        version,
        &[("failing", json!({})), ("guarded", json!({}))],
    );
    // A tool name from a request that names no tool is logged too.
    p.run("nope status=success\u{1b}[0m", &[])
        .assert_failed("tool_not_found", 2);
    assert_eq!(replies[0]["result"]["isError"], json!(true), "{replies:?}");
    assert_eq!(replies[1]["result"]["isError"], json!(true), "{replies:?}");

    let log = std::fs::read(p.f.root.join(".glee/audit/tools.log")).unwrap();
    assert!(
        !log.iter().any(|&b| b == 0x1b || b == 0x07 || b == b'\r'),
        "a raw control byte reached the log: {}",
        String::from_utf8_lossy(&log)
    );
    let text = String::from_utf8(log).unwrap();
    assert!(!text.contains('\u{9b}'), "{text}");
    // One result line per call (each ran call also has its intent line).
    let results = text
        .lines()
        .filter(|l| !l.contains("] TOOL_STARTED "))
        .count();
    assert_eq!(results, 3, "one result line per call: {text}");
    for line in text.lines().filter(|l| l.contains("] TOOL_STARTED ")) {
        assert!(!line.contains(" status="), "{line}");
        assert!(line.contains(" caller=mcp:x%20status%3Dsuccess"), "{line}");
    }

    let out = p.gb(&["audit", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{9b}'),
        "{stdout}"
    );
    let entries: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] != "TOOL_STARTED")
        .collect();
    assert_eq!(entries.len(), 3, "{stdout}");
    let failing = &entries[0]["fields"];
    assert_eq!(entries[0]["event"], "TOOL_EXECUTED", "{stdout}");
    assert_eq!(failing["name"], "failing");
    assert_eq!(failing["status"], "error", "{stdout}");
    assert_eq!(failing["kind"], "exit_code", "{stdout}");
    assert!(failing.get("agent_id").is_none(), "{stdout}");
    assert!(failing.get("reason").is_none(), "{stdout}");
    assert!(failing["caller"]
        .as_str()
        .unwrap()
        .starts_with("mcp:x%20status%3Dsuccess"));
    assert_eq!(entries[1]["event"], "TOOL_DENIED", "{stdout}");
    assert_eq!(
        entries[1]["fields"]["reason"], "approval_required",
        "{stdout}"
    );
    assert_eq!(entries[2]["fields"]["status"], "error", "{stdout}");
    assert_eq!(entries[2]["fields"]["kind"], "tool_not_found", "{stdout}");
    let human = p.gb(&["audit"]);
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(
        !human.contains('\u{1b}') && !human.contains('\u{9b}'),
        "{human}"
    );
    assert_eq!(human.lines().count(), text.lines().count(), "{human}");
    assert!(p.verify(), "{:?}", p.gb(&["audit", "--verify"]));

    // A record with a duplicated field, chained with the real key (as a
    // forger with the key, or an old glovebox, would write it).
    use hmac::{Hmac, Mac};
    let key = std::fs::read(p.state.join("audit.key")).unwrap();
    let prev = text
        .lines()
        .last()
        .unwrap()
        .rsplit_once(" mac=")
        .unwrap()
        .1
        .to_string();
    let body =
        "[2026-01-01T00:00:00Z] TOOL_EXECUTED name=failing status=error status=success caller=cli";
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).unwrap();
    m.update(prev.as_bytes());
    m.update(b"\n");
    m.update(body.as_bytes());
    let mac = hex::encode(m.finalize().into_bytes());
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.f.root.join(".glee/audit/tools.log"))
        .unwrap();
    std::io::Write::write_all(&mut f, format!("{body} mac={mac}\n").as_bytes()).unwrap();
    for head in std::fs::read_dir(p.state.join("audit")).unwrap() {
        std::fs::write(head.unwrap().path(), format!("{mac}\n")).unwrap();
    }
    let out = p.gb(&["audit", "--verify", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{v}");
    assert!(
        problems[0]
            .as_str()
            .unwrap()
            .contains("`status` appears twice"),
        "{v}"
    );
}
