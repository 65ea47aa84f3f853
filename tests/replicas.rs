//! `glovebox serve` as one replica of many (README, "Running replicas"):
//! signed approvals honoured from a read-only directory and refused when
//! forged, edited, renamed or stale; tool creation refused in replicated
//! mode; `/metrics`, `/readyz` and the SIGTERM drain; the audit exported
//! on stdout with signed checkpoints that `glovebox audit --verify
//! --exported` checks across replicas (a cut or a missing tail found).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod httpkit;
mod runkit;
mod servekit;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::Served;

/// A tool that needs approval and, when it runs, creates `out/ran`.
fn marker_tool(f: &Fixture) -> PathBuf {
    f.script("scripts/mark.sh", "#!/bin/sh\ntouch out/ran\necho ran\n");
    std::fs::create_dir_all(f.root.join("out")).unwrap();
    let mut tool = command_tool(
        "marked",
        schema(json!({})),
        json!({"entrypoint": "./scripts/mark.sh", "args": []}),
        json!({"fs": {"read": ["."], "write": ["out"]}}),
    );
    tool["approval"] = json!({"required": true, "reason": "writes a marker"});
    f.tool(&tool);
    f.root.join("out/ran")
}

fn glovebox_in(root: &Path, state: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.arg("--root")
        .arg(root)
        .args(args)
        .env("GLOVEBOX_STATE_DIR", state)
        .env_remove("GLOVEBOX_APPROVALS_DIR")
        .env_remove("GLOVEBOX_APPROVAL_KEY")
        .stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `glovebox approve --generate-key BASE/keys/NAME`: the secret's path.
fn new_key(f: &Fixture, name: &str) -> PathBuf {
    let dir = f.base.join("keys");
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join(name);
    let o = glovebox_in(
        &f.root,
        &f.state(),
        &["approve", "--generate-key", key.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    key
}

fn public(key: &Path) -> String {
    format!("{}.pub", key.display())
}

/// Signs an approval of `tool` with `key` into `dir`.
fn sign(f: &Fixture, tool: &str, key: &Path, dir: &Path) {
    let o = glovebox_in(
        &f.root,
        &f.state(),
        &[
            "approve",
            tool,
            "--yes",
            "--sign-with",
            key.to_str().unwrap(),
            "--approvals-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
}

/// `glovebox run NAME --json` on a replica: its own (empty) state
/// directory, the signed approvals of `dir` verified with `public`.
fn run_on_replica(f: &Fixture, name: &str, dir: &Path, public: &str) -> Called {
    let state = f.base.join("replica-state");
    call_glovebox(
        &f.root,
        &f.cwd,
        name,
        &[],
        &[
            ("GLOVEBOX_STATE_DIR", state.to_str().unwrap()),
            ("GLOVEBOX_APPROVALS_DIR", dir.to_str().unwrap()),
            ("GLOVEBOX_APPROVAL_KEY", public),
        ],
    )
}

#[test]
fn a_signed_approval_is_honoured_read_only_and_refused_when_forged_edited_renamed_or_stale() {
    require_jail!();
    let f = Fixture::new();
    let ran = marker_tool(&f);
    let key = new_key(&f, "approval");
    let approvals = f.base.join("approvals");
    sign(&f, "marked", &key, &approvals);
    let record = approvals.join("marked.json");
    assert!(record.is_file());
    // Only the signed record approves: the approver's state directory
    // holds no approval of its own.
    assert!(!f.state().join("approvals").exists());

    // Without the signed approvals, a replica refuses (and runs nothing).
    let bare = f.base.join("bare-state");
    let r = call_glovebox(
        &f.root,
        &f.cwd,
        "marked",
        &[],
        &[("GLOVEBOX_STATE_DIR", bare.to_str().unwrap())],
    );
    r.assert_failed("approval_required", 1);
    assert!(!ran.exists());

    // A read-only approvals directory, another state directory: honoured.
    let ro = |mode| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&approvals, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    ro(0o555);
    let r = run_on_replica(&f, "marked", &approvals, &public(&key));
    r.assert_ok();
    assert!(ran.exists(), "the approved tool did not run: {r:#?}");
    std::fs::remove_file(&ran).unwrap();
    // The replica wrote no approval of its own either.
    assert!(!f.base.join("replica-state/approvals").exists());
    ro(0o755);

    let refused = |why: &str| {
        let r = run_on_replica(&f, "marked", &approvals, &public(&key));
        r.assert_failed("approval_required", 1);
        assert!(r.message().contains(why), "want {why:?}: {r:#?}");
        assert!(!ran.exists(), "a refused approval let the tool run");
    };
    let good = std::fs::read_to_string(&record).unwrap();

    // Edited: one hash in the signed payload changed.
    let v: Value = serde_json::from_str(&good).unwrap();
    let payload = v["payload"].as_str().unwrap();
    let hash = payload
        .split('"')
        .find(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap();
    let flipped = format!(
        "{}{}",
        if &hash[..1] == "0" { "1" } else { "0" },
        &hash[1..]
    );
    let mut edited = v.clone();
    edited["payload"] = json!(payload.replace(hash, &flipped));
    std::fs::write(&record, edited.to_string()).unwrap();
    refused("signature does not verify");

    // Signed with another key (a forger's).
    let other = new_key(&f, "forger");
    std::fs::remove_file(&record).unwrap();
    sign(&f, "marked", &other, &approvals);
    refused("signature does not verify");

    // A good record of another tool, renamed to approve this one.
    let mut twin = command_tool(
        "twin",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        read_root(),
    );
    twin["approval"] = json!({"required": true, "reason": "a twin"});
    f.tool(&twin);
    sign(&f, "twin", &key, &approvals);
    std::fs::rename(approvals.join("twin.json"), &record).unwrap();
    refused("approves tool `twin`, not `marked`");

    // The good record again, but the script changed since: void.
    std::fs::write(&record, &good).unwrap();
    let r = run_on_replica(&f, "marked", &approvals, &public(&key));
    r.assert_ok();
    std::fs::remove_file(&ran).unwrap();
    f.script(
        "scripts/mark.sh",
        "#!/bin/sh\ntouch out/ran\necho changed\n",
    );
    refused("scripts/mark.sh changed");

    // A key that is not a key: refused at start, nothing runs.
    let o = glovebox_in(
        &f.root,
        &f.base.join("replica-state"),
        &["run", "marked", "--json"],
        &[
            ("GLOVEBOX_APPROVALS_DIR", approvals.to_str().unwrap()),
            ("GLOVEBOX_APPROVAL_KEY", record.to_str().unwrap()),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not an ed25519 public key"),
        "{}",
        text(&o)
    );
    assert!(!ran.exists());
}

#[test]
fn a_signed_approval_holds_where_the_project_is_mounted_elsewhere() {
    require_jail!();
    let f = Fixture::new();
    marker_tool(&f);
    let key = new_key(&f, "approval");
    let approvals = f.base.join("approvals");
    sign(&f, "marked", &key, &approvals);
    // The image's copy of the project, at another path.
    let mounted = f.base.join("mounted");
    copy_tree(&f.root, &mounted);
    let r = call_glovebox(
        &mounted,
        &f.cwd,
        "marked",
        &[],
        &[
            (
                "GLOVEBOX_STATE_DIR",
                f.base.join("pod-state").to_str().unwrap(),
            ),
            ("GLOVEBOX_APPROVALS_DIR", approvals.to_str().unwrap()),
            ("GLOVEBOX_APPROVAL_KEY", &public(&key)),
        ],
    );
    r.assert_ok();
    assert!(mounted.join("out/ran").exists());
    assert!(!f.root.join("out/ran").exists());
}

fn quick_tool() -> Value {
    command_tool(
        "quick",
        schema(json!({"n": {"type": "integer"}})),
        json!({"entrypoint": "echo", "args": ["quick", "${n}"]}),
        read_root(),
    )
}

fn slow_tool() -> Value {
    command_tool(
        "slow",
        schema(json!({})),
        json!({"entrypoint": "sleep", "args": ["2"]}),
        read_root(),
    )
}

#[test]
fn a_replica_refuses_to_create_tools_and_says_where_tools_come_from() {
    let f = Fixture::new();
    f.tool(&quick_tool());
    let state = f.state();
    let s = Served::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &["--replicated", "--replica-id", "web-0"],
    );
    let def = json!({"name": "made", "definition": {
        "description": "x", "kind": "command", "version": "1.0.0",
        "inputs": {"schema": {"type": "object"}},
        "exec": {"command": {"entrypoint": "true", "args": []}},
        "permissions": {"network": false, "fs": {"read": ["."], "write": []}}}});
    let a = s.post("/api/v1/tools", &def);
    assert_eq!(a.status, 403, "{a:?}");
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools come from the image or the mounted project"),
        "{a:?}"
    );
    assert!(!f.root.join(".glee/tools/made").exists());
    // MCP's glee_tool_create takes the same refusal.
    let session = s.mcp_session("2025-06-18");
    let r = s.mcp(
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "glee_tool_create", "arguments": def}}),
    );
    let reply = r.rpc().to_string();
    assert!(reply.contains("tools come from the image"), "{reply}");
    assert!(!f.root.join(".glee/tools/made").exists());
}

fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    assert!(
        wait_until(Duration::from_secs(60), cond),
        "timed out waiting for {what}"
    );
}

#[test]
fn metrics_readiness_and_the_drain_on_sigterm() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    f.tool(&slow_tool());
    // A networked tool whose one connection (to loopback) is refused.
    f.tool(&command_tool(
        "fetch",
        schema(json!({})),
        json!({"entrypoint": "curl", "args": ["-sS", "--max-time", "10", "http://127.0.0.1:9/"]}),
        json!({"network": true, "fs": {"read": ["."]}}),
    ));
    let state = f.state();
    let mut s = Served::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &["--drain-delay", "3", "--grace", "20"],
    );
    assert_eq!(s.get("/healthz").status, 200);
    // Ready once the readiness probe built a jail.
    wait_for("/readyz 200", || s.get("/readyz").status == 200);
    let ready = s.get("/readyz");
    assert_eq!(ready.json["jail"]["mode"], jail_mode(), "{ready:?}");

    let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": 1}));
    assert_eq!(ok.json["ok"], true, "{ok:?}");
    let missing = s.post("/api/v1/tools/nope/invoke", &json!({}));
    assert_eq!(missing.status, 404);
    let fetched = s.post("/api/v1/tools/fetch/invoke", &json!({}));
    assert!(
        fetched.json["warnings"]
            .to_string()
            .contains("refused connect to 127.0.0.1:9"),
        "{fetched:?}"
    );
    let m = s.get("/metrics");
    assert_eq!(m.status, 200);
    for want in [
        r#"glovebox_calls_total{tool="quick",outcome="ok"} 1"#,
        r#"glovebox_calls_total{tool="unknown",outcome="tool_not_found"} 1"#,
        r#"glovebox_refusals_total{kind="tool_not_found"} 1"#,
        r#"glovebox_call_duration_seconds_count{tool="quick",outcome="ok"} 1"#,
        "glovebox_jail_posture_ok 1",
        "glovebox_draining 0",
        "\nglovebox_egress_connections_total{decision=\"refused\"} 1",
        r#"glovebox_calls_total{tool="fetch",outcome="ok"} 1"#,
        &format!(r#"glovebox_jail_info{{mode="{}""#, jail_mode()),
    ] {
        assert!(m.body.contains(want), "{want} not in:\n{}", m.body);
    }

    // A call in flight, then SIGTERM.
    let addr = s.addr.clone();
    let slow = std::thread::spawn(move || {
        servekit::request(
            &addr,
            "POST",
            "/api/v1/tools/slow/invoke",
            &[("Content-Type", "application/json")],
            b"{}",
        )
    });
    wait_for("the slow call in flight", || {
        s.get("/metrics")
            .body
            .contains("glovebox_calls_in_flight 1")
    });
    s.terminate();
    wait_for("/readyz 503", || s.get("/readyz").status == 503);
    let r = s.get("/readyz");
    assert_eq!(r.json["draining"], true, "{r:?}");
    let refused = s.post("/api/v1/tools/quick/invoke", &json!({"n": 2}));
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    assert!(refused.json["error"]["details"]["draining"] == true);
    // The call in flight finishes whole.
    let done = slow.join().unwrap();
    assert_eq!(done.json["ok"], true, "{done:?}");
    let m = s.get("/metrics").body;
    assert!(
        m.contains(r#"glovebox_refusals_total{kind="draining"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"glovebox_calls_total{tool="slow",outcome="ok"} 1"#),
        "{m}"
    );
    assert!(m.contains("glovebox_draining 1"), "{m}");
    assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
}

/// Every file under `dir` with its content.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

fn verify_exported(files: &[&Path], public: &str) -> Output {
    let mut args = vec!["audit", "--verify", "--checkpoint-key", public];
    for f in files {
        args.push("--exported");
        args.push(f.to_str().unwrap());
    }
    Command::new(bin()).args(&args).output().unwrap()
}

#[test]
fn exported_audit_streams_of_two_replicas_verify_together_and_a_cut_or_missing_tail_fails() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    let key = new_key(&f, "checkpoints");
    let before = snapshot(&f.root);
    let mut exported = Vec::new();
    let mut servers = Vec::new();
    for id in ["web-0", "web-1"] {
        let out = f.base.join(format!("{id}.jsonl"));
        let state = f.base.join(format!("{id}-state"));
        let audit = f.base.join(format!("{id}-audit"));
        let s = Served::start_to(
            &f.root,
            &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
            &[
                "--replicated",
                "--replica-id",
                id,
                "--audit-dir",
                audit.to_str().unwrap(),
                "--audit-export",
                "stdout",
                "--checkpoint-key",
                key.to_str().unwrap(),
                "--checkpoint-every",
                "3",
            ],
            Stdio::from(std::fs::File::create(&out).unwrap()),
        );
        exported.push(out);
        servers.push(s);
    }
    for n in 0..5 {
        for s in &servers {
            let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": n}));
            assert_eq!(ok.json["ok"], true, "{ok:?}");
        }
    }
    for s in &mut servers {
        s.terminate();
        assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    }
    // The project was only read.
    assert_eq!(
        snapshot(&f.root),
        before,
        "a replica wrote into the project"
    );

    // Each exported line carries its replica, in the JSON and in the line.
    let web0 = std::fs::read_to_string(&exported[0]).unwrap();
    let lines: Vec<Value> = web0
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<&Value> = lines.iter().filter(|v| v.get("line").is_some()).collect();
    assert_eq!(calls.len(), 10, "an intent and a result per call: {web0}");
    for v in &calls {
        assert_eq!(v["replica"], "web-0");
        assert!(
            v["line"].as_str().unwrap().contains(" replica=web-0 "),
            "{v}"
        );
    }
    assert!(lines.iter().any(|v| v["checkpoint"]["final"] == true));

    let public = public(&key);
    let paths: Vec<&Path> = exported.iter().map(PathBuf::as_path).collect();
    let o = verify_exported(&paths, &public);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        text(&o).matches("intact and sealed").count(),
        2,
        "{}",
        text(&o)
    );

    // One replica's stream with a line cut out: that stream fails.
    let cut: Vec<&str> = web0
        .lines()
        .filter(|l| !l.contains(r#""seq":4,"event""#))
        .collect();
    assert_eq!(cut.len() + 1, web0.lines().count());
    let cut_file = f.base.join("cut.jsonl");
    std::fs::write(&cut_file, cut.join("\n")).unwrap();
    let o = verify_exported(&[&cut_file, &exported[1]], &public);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("missing (cut): 4"), "{}", text(&o));

    // Its tail gone (the last line and the final checkpoint): what a
    // killed replica leaves too, so reported as an unsealed tail (exit 6),
    // not sealed, not intact.
    let n = web0.lines().count();
    let tail: Vec<&str> = web0.lines().take(n - 2).collect();
    std::fs::write(&cut_file, tail.join("\n")).unwrap();
    let o = verify_exported(&[&cut_file, &exported[1]], &public);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    assert!(text(&o).contains("UNSEALED TAIL"), "{}", text(&o));

    // Verified with another key: nothing is sealed.
    let other = new_key(&f, "other");
    let o = verify_exported(&paths, &format!("{}.pub", other.display()));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// The exported record is the signed unit (item 6 of issue 42): a
/// replica refused a call (`TOOL_DENIED`, no approval); that record
/// relabelled `"event":"TOOL_EXECUTED"` with `"status":"success"` added
/// — its `line` untouched — fails `audit --verify --exported`, as do a
/// record given a field and a record whose fields are reordered, while
/// the stream as exported verifies. On main the relabelled record
/// verified as intact and sealed, and a collector indexing `event`
/// recorded a success.
#[test]
fn an_exported_record_relabelled_extended_or_reordered_fails_verification() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    let mut gated = quick_tool();
    gated["name"] = json!("gated");
    gated["approval"] = json!({"required": true, "reason": "asks a person"});
    f.tool(&gated);
    let key = new_key(&f, "checkpoints");
    let out = f.base.join("web-0.jsonl");
    let mut s = Served::start_to(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", f.state().to_str().unwrap())],
        &[
            "--replicated",
            "--replica-id",
            "web-0",
            "--audit-dir",
            f.base.join("audit").to_str().unwrap(),
            "--audit-export",
            "stdout",
            "--checkpoint-key",
            key.to_str().unwrap(),
        ],
        Stdio::from(std::fs::File::create(&out).unwrap()),
    );
    let denied = s.post("/api/v1/tools/gated/invoke", &json!({"n": 1}));
    assert_eq!(
        denied.json["error"]["kind"], "approval_required",
        "{denied:?}"
    );
    let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": 2}));
    assert_eq!(ok.json["ok"], true, "{ok:?}");
    s.terminate();
    assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    let public = public(&key);
    // The probe: the stream as exported verifies, and holds the refusal.
    let o = verify_exported(&[&out], &public);
    assert!(o.status.success(), "{}", text(&o));
    let exported = std::fs::read_to_string(&out).unwrap();
    let records: Vec<&str> = exported.lines().collect();
    let at = records
        .iter()
        .position(|r| r.contains(r#""event":"TOOL_DENIED""#))
        .unwrap_or_else(|| panic!("no refusal exported: {exported}"));
    let record: Value = serde_json::from_str(records[at]).unwrap();
    let mut relabelled = record.clone();
    relabelled["event"] = json!("TOOL_EXECUTED");
    relabelled["status"] = json!("success");
    let mut added = record.clone();
    added["verified_by"] = json!("collector");
    let mut reordered = serde_json::Map::new();
    for k in ["event", "line", "replica", "seq", "stream"] {
        reordered.insert(k.into(), record[k].clone());
    }
    let edited = f.base.join("edited.jsonl");
    for (what, text_of) in [
        ("relabelled", relabelled.to_string()),
        ("a field added", added.to_string()),
        ("reordered", Value::Object(reordered).to_string()),
    ] {
        let mut copy: Vec<String> = records.iter().map(|r| r.to_string()).collect();
        copy[at] = text_of;
        std::fs::write(&edited, copy.join("\n") + "\n").unwrap();
        let o = verify_exported(&[&edited], &public);
        assert_eq!(o.status.code(), Some(1), "{what} verified: {}", text(&o));
        assert!(
            text(&o).contains("is not the record glovebox exported"),
            "{what}: {}",
            text(&o)
        );
    }
}

/// A stand-in OTLP/HTTP collector on loopback: every request body it got.
fn collector() -> (String, Arc<Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            loop {
                let mut len = None;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse::<usize>().ok();
                    }
                }
                let Some(len) = len else { break };
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).into_owned());
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                );
            }
        }
    });
    (addr, got)
}

/// A log record as the collector got it: (attributes with the
/// resource's, body, event name).
type Record = (Vec<(String, String)>, String, String);

/// Every log record the collector got, with its resource's attributes.
fn raw_records(bodies: &[String]) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for b in bodies {
        let v: Value = serde_json::from_str(b).unwrap();
        for rl in v["resourceLogs"].as_array().unwrap() {
            for sl in rl["scopeLogs"].as_array().unwrap() {
                for r in sl["logRecords"].as_array().unwrap() {
                    out.push((rl["resource"]["attributes"].clone(), r.clone()));
                }
            }
        }
    }
    out
}

/// Every log record the collector got.
fn records(bodies: &[String]) -> Vec<Record> {
    let pairs = |attrs: &Value| -> Vec<(String, String)> {
        attrs
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["key"].as_str().unwrap().to_string(),
                    a["value"]["stringValue"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    raw_records(bodies)
        .into_iter()
        .map(|(resource, r)| {
            let mut attrs = pairs(&resource);
            attrs.extend(pairs(&r["attributes"]));
            (
                attrs,
                r["body"]["stringValue"].as_str().unwrap_or("").to_string(),
                r["eventName"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A project with `quick_tool`, served as `replica` exporting its audit
/// to a stand-in collector: the fixture, the server, and what the
/// collector got.
fn served_to_a_collector(replica: &str) -> (Fixture, Served, Arc<Mutex<Vec<String>>>) {
    let f = Fixture::new();
    f.tool(&quick_tool());
    let (addr, got) = collector();
    let state = f.state();
    let url = format!("http://{addr}/v1/logs");
    let s = Served::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &["--replica-id", replica, "--audit-otlp", &url],
    );
    (f, s, got)
}

#[test]
fn audit_lines_reach_an_otlp_collector_with_the_genai_attributes() {
    require_jail!();
    let (f, mut s, got) = served_to_a_collector("web-7");
    let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": 5}));
    assert_eq!(ok.json["ok"], true, "{ok:?}");
    s.terminate();
    assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    let bodies = got.lock().unwrap().clone();
    let recs = records(&bodies);
    let attr = |r: &Record, k: &str| r.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let executed: Vec<_> = recs.iter().filter(|r| r.2 == "TOOL_EXECUTED").collect();
    assert_eq!(executed.len(), 1, "{bodies:?}");
    let r = executed[0];
    assert_eq!(attr(r, "gen_ai.tool.name").as_deref(), Some("quick"));
    assert_eq!(
        attr(r, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(r, "service.instance.id").as_deref(), Some("web-7"));
    assert_eq!(attr(r, "service.name").as_deref(), Some("glovebox"));
    assert!(attr(r, "gen_ai.tool.call.id").is_some_and(|c| !c.is_empty()));
    // The body is the line as the log has it, its mac included.
    assert!(
        r.1.contains(" replica=web-7 ") && r.1.contains(" mac="),
        "{}",
        r.1
    );
    let log = std::fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap();
    assert!(
        log.lines().any(|l| l == r.1),
        "the body is not a line of the log"
    );
    assert!(recs.iter().any(|r| r.2 == "TOOL_STARTED"));
}

/// Every log record's (body, traceId, spanId) as the collector got them
/// (OTLP/JSON writes the ids in hex; empty when the record has none).
fn trace_ids(bodies: &[String]) -> Vec<(String, String, String)> {
    raw_records(bodies)
        .into_iter()
        .map(|(_, r)| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (
                r["body"]["stringValue"].as_str().unwrap_or("").to_string(),
                s("traceId"),
                s("spanId"),
            )
        })
        .collect()
}

/// The caller's W3C trace context is continued: a REST call's
/// `traceparent` header and an MCP call's `_meta.traceparent` are logged
/// on the call's lines (`traceparent=`) and the OTLP records of those
/// lines carry the trace id, with the caller's span as their span id; a
/// malformed one is ignored (W3C: never an error), and a call without one
/// has none.
#[test]
fn a_callers_traceparent_is_logged_and_continued_in_the_otlp_records() {
    require_jail!();
    let (f, mut s, got) = served_to_a_collector("web-9");
    let rest_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let rest_span = "00f067aa0ba902b7";
    let rest = s.request(
        "POST",
        "/api/v1/tools/quick/invoke",
        &[
            ("Content-Type", "application/json"),
            ("traceparent", &format!("00-{rest_trace}-{rest_span}-01")),
        ],
        json!({"n": 1}).to_string().as_bytes(),
    );
    assert_eq!(rest.json["ok"], true, "{rest:?}");
    let bad = s.request(
        "POST",
        "/api/v1/tools/quick/invoke",
        &[
            ("Content-Type", "application/json"),
            (
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            ),
        ],
        json!({"n": 2}).to_string().as_bytes(),
    );
    assert_eq!(
        bad.json["ok"], true,
        "a malformed traceparent refused the call: {bad:?}"
    );
    let mcp_trace = "0af7651916cd43dd8448eb211c80319c";
    let mcp_span = "b7ad6b7169203331";
    let session = s.mcp_session("2025-11-25");
    let call = s.mcp(
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "quick", "arguments": {"n": 3},
            "_meta": {"traceparent": format!("00-{mcp_trace}-{mcp_span}-01")}}}),
    );
    assert_eq!(call.rpc()["result"]["isError"], false, "{call:?}");
    s.terminate();
    assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());

    // The log: each call's lines name its trace context, or none.
    let log = std::fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap();
    let lines_of = |n: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("name=quick") && l.contains(&format!("\"n\":{n}")))
            .map(String::from)
            .collect()
    };
    for (n, want) in [
        (
            "1",
            Some(format!("traceparent=00-{rest_trace}-{rest_span}-01 ")),
        ),
        ("2", None),
        (
            "3",
            Some(format!("traceparent=00-{mcp_trace}-{mcp_span}-01 ")),
        ),
    ] {
        let started = lines_of(n);
        assert_eq!(started.len(), 1, "call {n}'s intent line: {log}");
        match &want {
            Some(w) => assert!(started[0].contains(w.as_str()), "{}", started[0]),
            None => assert!(!started[0].contains("traceparent="), "{}", started[0]),
        }
    }

    // The collector: the calls' records carry the callers' ids.
    let recs = trace_ids(&got.lock().unwrap().clone());
    let executed_with = |trace: &str, span: &str| {
        recs.iter()
            .filter(|(body, t, sp)| body.contains("TOOL_EXECUTED") && t == trace && sp == span)
            .count()
    };
    assert_eq!(executed_with(rest_trace, rest_span), 1, "{recs:?}");
    assert_eq!(executed_with(mcp_trace, mcp_span), 1, "{recs:?}");
    let with_any = recs.iter().filter(|(_, t, _)| !t.is_empty()).count();
    // Two calls × (intent + result).
    assert_eq!(
        with_any, 4,
        "only the two traced calls' lines carry a trace: {recs:?}"
    );
}

/// An `https://` collector: with its private CA given (`--audit-otlp-ca`)
/// the records reach it over TLS; without it the collector's certificate
/// is not trusted, nothing reaches it (connections are made, no request
/// is read), and calls are not held back. An `https` CA for an `http://`
/// URL, or a URL of another scheme, is refused at start, by name.
#[test]
fn audit_lines_reach_an_https_collector_verified_with_its_ca() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    let ca = httpkit::TestCa::new();
    let ca_file = f.base.join("collector-ca.pem");
    ca.write_pem(&ca_file);
    let state = f.state();
    let envs = [("GLOVEBOX_STATE_DIR", state.to_str().unwrap())];
    for trusted in [true, false] {
        let collector = httpkit::Server::start_tls(&ca, |_| httpkit::Reply::json(json!({})));
        let url = format!("{}/v1/logs", collector.origin());
        let mut args = vec!["--replica-id", "web-tls", "--audit-otlp", &url];
        if trusted {
            args.extend(["--audit-otlp-ca", ca_file.to_str().unwrap()]);
        }
        let mut s = Served::start(&f.root, &envs, &args);
        let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": 7}));
        assert_eq!(ok.json["ok"], true, "{ok:?}");
        s.terminate();
        assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
        let said = s.stderr();
        let bodies: Vec<String> = collector
            .requests()
            .iter()
            .filter(|r| r.path == "/v1/logs")
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        if trusted {
            let recs = records(&bodies);
            assert!(
                recs.iter()
                    .any(|r| r.2 == "TOOL_EXECUTED" && r.1.contains("replica=web-tls")),
                "no record over TLS: {bodies:?} {:?} {said}",
                collector.requests()
            );
        } else {
            assert!(collector.connections() > 0, "the export never tried");
            assert!(
                bodies.is_empty(),
                "an untrusted collector got records: {bodies:?}"
            );
        }
    }
    for (url, ca_arg, says) in [
        (
            "http://127.0.0.1:9/v1/logs",
            true,
            "--audit-otlp-ca is for an https:// collector",
        ),
        (
            "ftp://127.0.0.1/v1/logs",
            false,
            "not an http:// or https:// URL",
        ),
    ] {
        let mut args = vec![
            "--root",
            f.root.to_str().unwrap(),
            "serve",
            "--audit-otlp",
            url,
        ];
        if ca_arg {
            args.extend(["--audit-otlp-ca", ca_file.to_str().unwrap()]);
        }
        let out = Command::new(bin()).args(&args).envs(envs).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

/// A replica SIGKILLed while calls run: its exported stream verifies up
/// to its last checkpoint, and the lines after it are reported apart as
/// its unsealed tail, with exit status 6, not as tampering (1); beside an
/// intact replica's stream the set says the same. A line edited before
/// the checkpoint still fails it (1).
#[test]
fn a_killed_replicas_export_verifies_to_its_last_checkpoint() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    let key = new_key(&f, "checkpoints");
    let out = f.base.join("killed.jsonl");
    let state = f.state();
    let audit = f.base.join("audit");
    let mut s = Served::start_to(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &[
            "--replica-id",
            "web-0",
            "--audit-dir",
            audit.to_str().unwrap(),
            "--audit-export",
            "stdout",
            "--checkpoint-key",
            key.to_str().unwrap(),
            "--checkpoint-every",
            "4",
        ],
        Stdio::from(std::fs::File::create(&out).unwrap()),
    );
    // Callers keep calling while the replica is killed.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|c| {
            let addr = s.addr.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && n < 500 {
                    n += 1;
                    let _ = std::panic::catch_unwind(|| {
                        servekit::request(
                            &addr,
                            "POST",
                            "/api/v1/tools/quick/invoke",
                            &[("Content-Type", "application/json")],
                            json!({"n": c * 1000 + n}).to_string().as_bytes(),
                        )
                    });
                }
            })
        })
        .collect();
    wait_for("a dozen exported lines", || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .matches(r#""checkpoint""#)
            .count()
            >= 3
    });
    s.child.kill().unwrap();
    let _ = s.child.wait();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for c in callers {
        let _ = c.join();
    }
    let public = public(&key);
    let o = verify_exported(&[&out], &public);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    assert!(text(&o).contains("UNSEALED TAIL"), "{}", text(&o));
    assert!(!text(&o).contains("NOT INTACT"), "{}", text(&o));
    let json = Command::new(bin())
        .args([
            "audit",
            "--verify",
            "--json",
            "--checkpoint-key",
            &public,
            "--exported",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["intact"], false, "{report}");
    assert_eq!(report["intact_to_checkpoints"], true, "{report}");
    let stream = &report["streams"][0];
    assert_eq!(stream["problems"], json!([]), "{report}");
    assert_eq!(stream["sealed"], false, "{report}");
    let (lines, to, tail) = (
        stream["lines"].as_u64().unwrap(),
        stream["verified_to"].as_u64().unwrap(),
        stream["unsealed"].as_u64().unwrap(),
    );
    assert!(to >= 12 && to % 4 == 0 && lines == to + tail, "{report}");

    // Beside an intact, sealed replica: still only an unsealed tail.
    let other = f.base.join("web-1.jsonl");
    let mut s1 = Served::start_to(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", f.base.join("s1").to_str().unwrap())],
        &[
            "--replica-id",
            "web-1",
            "--audit-dir",
            f.base.join("audit1").to_str().unwrap(),
            "--audit-export",
            "stdout",
            "--checkpoint-key",
            key.to_str().unwrap(),
        ],
        Stdio::from(std::fs::File::create(&other).unwrap()),
    );
    let ok = s1.post("/api/v1/tools/quick/invoke", &json!({"n": 1}));
    assert_eq!(ok.json["ok"], true, "{ok:?}");
    s1.terminate();
    assert_eq!(s1.wait_exit(), Some(0));
    let o = verify_exported(&[&out, &other], &public);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    assert!(text(&o).contains("intact and sealed"), "{}", text(&o));

    // A line before the last checkpoint edited: tampering (1).
    let text_of = std::fs::read_to_string(&out).unwrap();
    let edited: Vec<String> = text_of
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["seq"] == 2 && v.get("line").is_some() {
                let was = v["line"].as_str().unwrap();
                let line = was.replacen("name=quick", "name=other", 1);
                assert_ne!(line, was, "{was}");
                v["line"] = json!(line);
            }
            v.to_string()
        })
        .collect();
    let edited = edited.join("\n");
    let edited_file = f.base.join("edited.jsonl");
    std::fs::write(&edited_file, edited).unwrap();
    let o = verify_exported(&[&edited_file], &public);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// `glovebox audit --verify` on a replica finds the log where `serve`
/// wrote it, by `GLOVEBOX_AUDIT_DIR` and by `--audit-dir`; asked about
/// the project's own path it says that is not the log its state's head
/// describes (exit 5), never "tampered" nor `--reseal`, and `--reseal`
/// there is refused: the real log still verifies, and the next call adds
/// no break to it.
#[test]
fn audit_verify_finds_a_replicas_log_by_its_flag_and_variable_and_never_advises_a_reseal_elsewhere()
{
    require_jail!();
    let f = Fixture::new();
    f.tool(&quick_tool());
    let state = f.state();
    let audit = f.base.join("audit");
    let serve = |calls: i64| {
        let mut s = Served::start(
            &f.root,
            &[
                ("GLOVEBOX_STATE_DIR", state.to_str().unwrap()),
                ("GLOVEBOX_AUDIT_DIR", audit.to_str().unwrap()),
            ],
            &[],
        );
        for n in 0..calls {
            let ok = s.post("/api/v1/tools/quick/invoke", &json!({"n": n}));
            assert_eq!(ok.json["ok"], true, "{ok:?}");
        }
        s.terminate();
        assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    };
    serve(2);
    assert!(audit.join("tools.log").is_file());
    assert!(!f.root.join(".glee/audit/tools.log").exists());
    let audit_env = [("GLOVEBOX_AUDIT_DIR", audit.to_str().unwrap())];
    let verify = |args: &[&str], envs: &[(&str, &str)]| {
        let mut a = vec!["audit", "--verify"];
        a.extend_from_slice(args);
        glovebox_in(&f.root, &state, &a, envs)
    };
    let o = verify(&[], &audit_env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("intact (4 lines"), "{}", text(&o));
    let o = verify(&["--audit-dir", audit.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Without them: the project's path, where nothing was written.
    let o = verify(&[], &[]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let said = text(&o);
    assert!(
        !said.contains("reseal") && !said.contains("TAMPERED"),
        "{said}"
    );
    assert!(said.contains(audit.to_str().unwrap()), "{said}");
    let o = verify(&["--json"], &[]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["log_missing"], true, "{v}");
    assert_eq!(v["head_describes"], json!(audit.join("tools.log")), "{v}");

    // The advice main gave, followed: refused, and nothing changes.
    let o = glovebox_in(&f.root, &state, &["audit", "--reseal"], &[]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("refusing to reseal"), "{}", text(&o));
    assert!(!f.root.join(".glee/audit/tools.log").exists());
    let o = verify(&[], &audit_env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    serve(1);
    let log = std::fs::read_to_string(audit.join("tools.log")).unwrap();
    assert!(!log.contains("AUDIT_BREAK"), "{log}");
    let o = verify(&[], &audit_env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `--metrics-listen`: `/metrics` without the API token on its own
/// address (the API's own `/metrics` still needs it), with nothing else
/// there; an MCP call of a tool the project does not have is counted.
#[test]
fn metrics_are_served_without_the_token_on_their_own_address_and_count_unknown_tools() {
    let f = Fixture::new();
    f.tool(&quick_tool());
    let state = f.state();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let s = Served::start(
        &f.root,
        &[
            ("GLOVEBOX_STATE_DIR", state.to_str().unwrap()),
            ("GLOVEBOX_API_TOKEN", "s3cret"),
        ],
        &["--metrics-listen", &metrics],
    );
    assert_eq!(s.get("/metrics").status, 401);
    let m = servekit::request(&metrics, "GET", "/metrics", &[], b"");
    assert_eq!(m.status, 200, "{m:?}");
    assert!(m.body.contains("glovebox_calls_in_flight"), "{}", m.body);
    // The probes answer there too (ready or not, never a refusal).
    let r = servekit::request(&metrics, "GET", "/readyz", &[], b"");
    assert!(r.status == 200 || r.status == 503, "{r:?}");
    assert_eq!(
        servekit::request(&metrics, "GET", "/healthz", &[], b"").status,
        200
    );
    // Nothing that acts or reads is there.
    for (method, path) in [
        ("POST", "/api/v1/tools/quick/invoke"),
        ("GET", "/api/v1/tools"),
        ("GET", "/api/v1/tools/usage"),
        ("POST", "/mcp"),
    ] {
        let a = servekit::request(
            &metrics,
            method,
            path,
            &[("Content-Type", "application/json")],
            b"{}",
        );
        assert!(a.status == 404 || a.status == 405, "{method} {path}: {a:?}");
    }
    // A call of an unknown tool over MCP, with the token.
    let auth = [
        ("Authorization", "Bearer s3cret"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let init = s.request(
        "POST",
        "/mcp",
        &auth,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(init.status, 200, "{init:?}");
    let session = init.header("mcp-session-id").unwrap();
    let mut with = auth.to_vec();
    with.push(("Mcp-Session-Id", &session));
    s.request(
        "POST",
        "/mcp",
        &with,
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    let r = s.request(
        "POST",
        "/mcp",
        &with,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "no_such_tool", "arguments": {}}})
        .to_string()
        .as_bytes(),
    );
    assert!(r.body.contains("unknown tool"), "{r:?}");
    let m = servekit::request(&metrics, "GET", "/metrics", &[], b"").body;
    for want in [
        r#"glovebox_calls_total{tool="unknown",outcome="tool_not_found"} 1"#,
        r#"glovebox_refusals_total{kind="tool_not_found"} 1"#,
    ] {
        assert!(m.contains(want), "{want} not in:\n{m}");
    }
}
