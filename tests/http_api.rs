//! The HTTP API of `glovebox serve`, against the real binary on a free
//! loopback port: every endpoint; the token guard on and off; the body
//! limit (413), the concurrency limit (503 while slow calls hold every
//! slot); graceful shutdown (a call in flight finishes within the grace
//! period; past it its jail is killed, no process of it survives, and the
//! server exits 0); an invoked tool that tries to escape is still jailed;
//! `X-Agent-ID` lands in the audit entry and cannot forge a line or a
//! field; and Schemathesis (tests/http_api/setup.sh) finds no server
//! error and no answer that breaks /openapi.json.
//!
//! Without a working jail the tests that need one skip with the reason,
//! and fail under `GLOVEBOX_REQUIRE_KERNEL=1`; Schemathesis is set up by
//! the test itself (pip, from PyPI), and a failed set-up fails it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::{raw_request, request, request_to, Served};

const TOKEN: &str = "s3cret-token";

fn echo_tool() -> Value {
    let mut m = command_tool(
        "echo_json",
        json!({"type": "object", "additionalProperties": false, "required": ["msg"],
               "properties": {"msg": {"type": "string", "maxLength": 64}}}),
        json!({"entrypoint": "python3", "args": ["-c",
            "import json, sys; print(json.dumps({'msg': sys.argv[1]}))", "${msg}"]}),
        read_root(),
    );
    m["outputs"] = json!({"format": "json", "schema": {"type": "object"}});
    m["exec"]["command"]["stdout"] = json!({"format": "json"});
    m
}

/// A tool that marks its start in `started/`, then sleeps `secs` with the
/// marker on its command line (and a child that does the same).
fn sleeper() -> Value {
    command_tool(
        "sleeper",
        schema(json!({"marker": {"type": "string"}, "secs": {"type": "integer"}})),
        json!({"entrypoint": "python3", "args": ["-c",
            "import os, subprocess, sys, time\nm, s = sys.argv[1], int(sys.argv[2])\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', m])\nopen(os.path.join('started', m), 'w').write(str(os.getpid()))\ntime.sleep(s)\nprint('slept', s)",
            "${marker}", "${secs}"], "timeout_ms": 120000}),
        write_root(),
    )
}

/// A tool that proves it ran, then tries to read a canary outside its
/// paths and to create a file there.
fn escaper(outside: &Path) -> Value {
    let canary = outside.join("canary.txt");
    let dropped = outside.join("dropped.txt");
    command_tool(
        "escaper",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c",
            format!("print('PROBE-RAN')\ntry:\n    print(open({canary:?}).read())\nexcept Exception as e:\n    print('read denied', type(e).__name__)\ntry:\n    open({dropped:?}, 'w').write('x')\n    print('wrote')\nexcept Exception as e:\n    print('write denied', type(e).__name__)")]}),
        read_root(),
    )
}

fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&echo_tool());
    f.tool(&sleeper());
    f.tool(&escaper(&f.outside));
    let mut gated = command_tool(
        "gated",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        read_root(),
    );
    gated["approval"] = json!({"required": true, "reason": "test"});
    f.tool(&gated);
    std::fs::create_dir_all(f.root.join("started")).unwrap();
    std::fs::write(f.outside.join("canary.txt"), "CANARY-7f3a").unwrap();
    f
}

fn audit_log(f: &Fixture) -> String {
    std::fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap_or_default()
}

fn audit_verifies(f: &Fixture) {
    let out = Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "audit", "--verify"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "audit --verify failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    assert!(
        wait_until(Duration::from_secs(60), cond),
        "timed out waiting for {what}"
    );
}

fn started(f: &Fixture, marker: &str) -> bool {
    f.root.join("started").join(marker).exists()
}

#[test]
fn every_endpoint_without_a_token() {
    require_jail!();
    let f = project();
    let s = Served::start(&f.root, &[], &[]);

    let h = s.get("/healthz");
    assert_eq!(h.status, 200, "{h:?}");
    assert_eq!(h.json["status"], "ok");
    // The fixture's four tools and the three built-ins.
    assert_eq!(h.json["tools"], 7);

    let doc = s.get("/openapi.json");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json["openapi"], "3.1.0");

    let list = s.get("/api/v1/tools");
    assert_eq!(list.status, 200, "{list:?}");
    let names: Vec<&str> = list
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo_json",
            "escaper",
            "gated",
            "list_files",
            "read_file",
            "sleeper",
            "write_file"
        ]
    );

    let one = s.get("/api/v1/tools/sleeper");
    assert_eq!(one.status, 200);
    assert_eq!(one.json["id"], "sleeper");
    assert_eq!(
        one.json["permissions"],
        json!(["fs:read", "fs:write", "proc:exec"])
    );
    assert_eq!(one.json["safety_level"], "medium");
    assert_eq!(one.json["created_by"], "system");
    assert_eq!(one.json["glovebox"]["kind"], "command");
    assert_eq!(s.get("/api/v1/tools/echo_json").json["safety_level"], "low");
    let missing = s.get("/api/v1/tools/nope");
    assert_eq!((missing.status, missing.kind()), (404, "tool_not_found"));

    // Invoke: the Outcome, as `glovebox run --json` prints it.
    let ok = s.post("/api/v1/tools/echo_json/invoke", &json!({"msg": "hi"}));
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(ok.json["ok"], true);
    assert_eq!(ok.json["tool"], "echo_json");
    assert_eq!(ok.json["output"], json!({"msg": "hi"}));
    let cli = Command::new(bin())
        .args([
            "--root",
            f.root.to_str().unwrap(),
            "run",
            "echo_json",
            "--json",
            "msg=hi",
        ])
        .output()
        .unwrap();
    let mut from_cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let mut from_api = ok.json.clone();
    from_cli["duration_ms"] = json!(0);
    from_api["duration_ms"] = json!(0);
    assert_eq!(from_api, from_cli);

    let bad = s.post("/api/v1/tools/echo_json/invoke", &json!({"msg": 3}));
    assert_eq!((bad.status, bad.kind()), (400, "input_invalid"), "{bad:?}");
    assert_eq!(bad.json["ok"], false);
    let unknown = s.post("/api/v1/tools/nope/invoke", &json!({}));
    assert_eq!((unknown.status, unknown.kind()), (404, "tool_not_found"));
    let gated = s.post("/api/v1/tools/gated/invoke", &json!({}));
    assert_eq!((gated.status, gated.kind()), (403, "approval_required"));
    let not_object = s.post("/api/v1/tools/echo_json/invoke", &json!([1]));
    assert_eq!(
        (not_object.status, not_object.kind()),
        (400, "input_invalid")
    );
    assert!(
        not_object.json.get("ok").is_none(),
        "an Error, not an Outcome"
    );
    let not_json = s.request("POST", "/api/v1/tools/echo_json/invoke", &[], b"{nope");
    assert_eq!((not_json.status, not_json.kind()), (400, "input_invalid"));

    // Create (the agent path, under the ceiling), show, delete.
    let def = json!({
        "description": "made by an agent", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object"}}, "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "true", "args": []}},
        "permissions": {"network": false, "fs": {"read": ["."], "write": []}}
    });
    let made = s.request(
        "POST",
        "/api/v1/tools",
        &[("X-Agent-ID", "agent-9")],
        json!({"name": "made", "definition": def})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(made.status, 201, "{made:?}");
    assert_eq!(made.json["approve_with"], "glovebox approve made");
    let shown = s.get("/api/v1/tools/made");
    assert_eq!(shown.status, 200, "{shown:?}");
    assert_eq!(shown.json["created_by"], "agent");
    assert_eq!(shown.json["glovebox"]["creator"], "http:agent-9");
    assert_eq!(shown.json["glovebox"]["approval_required"], true);
    let needs_approval = s.post("/api/v1/tools/made/invoke", &json!({}));
    assert_eq!(needs_approval.kind(), "approval_required");
    let mut greedy = def.clone();
    greedy["permissions"]["network"] = json!(true);
    let refused = s.post(
        "/api/v1/tools",
        &json!({"name": "greedy", "definition": greedy}),
    );
    assert_eq!(
        (refused.status, refused.kind()),
        (403, "permission_exceeds_ceiling"),
        "{refused:?}"
    );
    assert!(!f.root.join(".glee/tools/greedy").exists());
    let lint = s.post(
        "/api/v1/tools",
        &json!({"name": "broken", "kind": "nonsense"}),
    );
    assert_eq!(
        (lint.status, lint.kind()),
        (422, "manifest_invalid"),
        "{lint:?}"
    );
    // HDN's Tool JSON is taken as HDN clients send it, converted as
    // `glovebox import hdn` does, under the same ceiling.
    let hdn = s.post(
        "/api/v1/tools",
        &json!({"id": "hdn_echo", "name": "Echo", "description": "echoes",
                "input_schema": {"text": "string"}, "permissions": ["proc:exec"],
                "safety_level": "low", "created_by": "agent",
                "exec": {"type": "cmd", "cmd": "echo", "args": ["{text}"]}}),
    );
    assert_eq!(hdn.status, 201, "{hdn:?}");
    assert!(f.root.join(".glee/tools/hdn_echo/tool.yml").exists());
    let image = s.post(
        "/api/v1/tools",
        &json!({"id": "boxed", "name": "Boxed", "description": "d",
                "exec": {"type": "image", "image": "alpine"}}),
    );
    assert_eq!(
        (image.status, image.kind()),
        (400, "input_invalid"),
        "{image:?}"
    );
    assert!(!f.root.join(".glee/tools/boxed").exists());
    let hdn_net = s.post(
        "/api/v1/tools",
        &json!({"id": "hdn_net", "description": "d", "permissions": ["net:read"],
                "exec": {"type": "cmd", "cmd": "true"}}),
    );
    assert_eq!(
        (hdn_net.status, hdn_net.kind()),
        (403, "permission_exceeds_ceiling"),
        "{hdn_net:?}"
    );
    let clash = s.post(
        "/api/v1/tools",
        &json!({"name": "echo_json", "definition": def}),
    );
    assert_eq!(clash.status, 409, "{clash:?}");

    let system = s.request("DELETE", "/api/v1/tools/echo_json", &[], b"");
    assert_eq!(
        (system.status, system.kind()),
        (403, "permission_exceeds_ceiling"),
        "{system:?}"
    );
    assert!(f.root.join(".glee/tools/echo_json/tool.yml").exists());
    let gone = s.request(
        "DELETE",
        "/api/v1/tools/made",
        &[("X-Agent-ID", "agent-9")],
        b"",
    );
    assert_eq!(gone.status, 200, "{gone:?}");
    assert!(!f.root.join(".glee/tools/made").exists());
    assert_eq!(s.get("/api/v1/tools/made").status, 404);
    let again = s.request("DELETE", "/api/v1/tools/made", &[], b"");
    assert_eq!((again.status, again.kind()), (404, "tool_not_found"));
    let log = audit_log(&f);
    assert!(
        log.contains("TOOL_DELETED name=made caller=http:agent-9"),
        "{log}"
    );
    assert!(
        log.contains("TOOL_DENIED name=echo_json caller=http reason=delete_not_agent_created"),
        "{log}"
    );

    // Discover: a tool written to disk is served after a rescan.
    let mut extra = echo_tool();
    extra["name"] = json!("extra");
    f.tool(&extra);
    let found = s.request("POST", "/api/v1/tools/discover", &[], b"");
    assert_eq!(found.status, 200, "{found:?}");
    assert!(found.json["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("extra")));
    assert_eq!(s.get("/api/v1/tools/extra").status, 200);

    // Usage: the calls above, newest first, without their parameters.
    let usage = s.get("/api/v1/tools/usage?limit=3");
    assert_eq!(usage.status, 200, "{usage:?}");
    let recs = usage.json.as_array().unwrap();
    assert!(recs.len() <= 3 && !recs.is_empty());
    assert!(recs.iter().all(|r| r.get("params").is_none()));
    let echoes = s.get("/api/v1/tools/usage?tool=echo_json");
    let statuses: Vec<&str> = echoes
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap_or(""))
        .collect();
    // Newest first: the bad call, the CLI's, the API's.
    assert_eq!(statuses, ["error", "success", "success"], "{echoes:?}");
    assert_eq!(s.get("/api/v1/tools/usage?limit=0").status, 400);

    // Routes nobody serves, methods a route does not take: JSON errors.
    let nowhere = s.get("/api/v2/nothing");
    assert_eq!((nowhere.status, nowhere.kind()), (404, "input_invalid"));
    let wrong = s.request("PUT", "/healthz", &[], b"");
    assert_eq!((wrong.status, wrong.kind()), (405, "input_invalid"));
    // The Origin guard covers the API too.
    let cross = s.request(
        "GET",
        "/api/v1/tools",
        &[("Origin", "https://evil.example")],
        b"",
    );
    assert_eq!((cross.status, cross.kind()), (403, "input_invalid"));
    audit_verifies(&f);
}

#[test]
fn the_token_is_required_when_set() {
    let f = project();
    let s = Served::start(&f.root, &[("GLOVEBOX_API_TOKEN", TOKEN)], &[]);
    // A liveness probe needs no token.
    assert_eq!(s.get("/healthz").status, 200);
    for path in ["/api/v1/tools", "/openapi.json", "/api/v1/tools/usage"] {
        let none = s.get(path);
        assert_eq!((none.status, none.kind()), (401, "unauthorized"), "{path}");
        assert_eq!(none.header("www-authenticate").as_deref(), Some("Bearer"));
        let wrong = s.request("GET", path, &[("Authorization", "Bearer wrong")], b"");
        assert_eq!(wrong.status, 401, "{path}");
        let right = s.request(
            "GET",
            path,
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            b"",
        );
        assert_eq!(right.status, 200, "{path}: {right:?}");
    }
    // The guard runs before anything: no call without the token.
    let call = s.post("/api/v1/tools/echo_json/invoke", &json!({"msg": "x"}));
    assert_eq!(call.status, 401);
    assert!(!audit_log(&f).contains("echo_json"));
}

#[test]
fn a_body_over_the_limit_is_413() {
    let f = project();
    let s = Served::start(&f.root, &[], &["--max-body-bytes", "1000"]);
    // Refused on its Content-Length, before the body is read (none is
    // sent here, so the answer cannot be lost to a reset connection).
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        raw,
        "POST /api/v1/tools/echo_json/invoke HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
        s.addr
    )
    .unwrap();
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"kind\":\"resource_limit\""), "{answer}");
    // A chunked body (no Content-Length) is cut off as it is read.
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let chunk = "a".repeat(1500);
    write!(
        raw,
        "POST /api/v1/tools HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        s.addr,
        chunk.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("resource_limit"), "{answer}");
    // Under the limit, the same endpoint answers normally.
    assert_eq!(s.post("/api/v1/tools/nope/invoke", &json!({})).status, 404);
    assert!(!audit_log(&f).contains("aaaa"));
}

#[test]
fn the_concurrency_limit_answers_503() {
    require_jail!();
    let f = project();
    let mut s = Served::start(
        &f.root,
        &[],
        &["--max-concurrent", "2", "--max-queued", "0", "--grace", "0"],
    );
    let addr = s.addr.clone();
    let markers: Vec<String> = (0..2).map(|i| marker(&format!("busy{i}"))).collect();
    let holders: Vec<_> = markers
        .iter()
        .map(|m| {
            let (addr, body) = (addr.clone(), json!({"marker": m, "secs": 60}).to_string());
            std::thread::spawn(move || {
                request(
                    &addr,
                    "POST",
                    "/api/v1/tools/sleeper/invoke",
                    &[],
                    body.as_bytes(),
                )
            })
        })
        .collect();
    wait_for("both slow calls to start", || {
        markers.iter().all(|m| started(&f, m))
    });
    let busy = s.post("/api/v1/tools/echo_json/invoke", &json!({"msg": "x"}));
    assert_eq!(
        (busy.status, busy.kind()),
        (503, "resource_limit"),
        "{busy:?}"
    );
    assert_eq!(busy.header("retry-after").as_deref(), Some("1"));
    // Liveness stays outside the limit.
    assert_eq!(s.get("/healthz").json["calls_in_flight"], 2);
    // Shut down with grace 0: the slow calls are killed and answered.
    s.terminate();
    for h in holders {
        let a = h.join().unwrap();
        assert_eq!(a.json["ok"], false, "{a:?}");
    }
    assert_eq!(s.wait_exit(), Some(0));
    for m in &markers {
        assert!(pids_with(m).is_empty(), "processes of {m} survived");
    }
}

#[test]
fn shutdown_lets_a_call_finish_within_the_grace_period() {
    require_jail!();
    let f = project();
    let mut s = Served::start(&f.root, &[], &["--grace", "30"]);
    let m = marker("finish");
    let (addr, body) = (s.addr.clone(), json!({"marker": m, "secs": 2}).to_string());
    let call = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/api/v1/tools/sleeper/invoke",
            &[],
            body.as_bytes(),
        )
    });
    wait_for("the call to start", || started(&f, &m));
    s.terminate();
    let a = call.join().unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.json["ok"], true, "{a:?}");
    assert_eq!(a.json["output"], "slept 2\n");
    assert_eq!(s.wait_exit(), Some(0));
    assert!(pids_with(&m).is_empty(), "the call's child survived");
}

#[test]
fn shutdown_kills_a_call_past_the_grace_period() {
    require_jail!();
    let f = project();
    let mut s = Served::start(&f.root, &[], &["--grace", "1"]);
    let m = marker("killed");
    let (addr, body) = (
        s.addr.clone(),
        json!({"marker": m, "secs": 100}).to_string(),
    );
    let call = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/api/v1/tools/sleeper/invoke",
            &[],
            body.as_bytes(),
        )
    });
    wait_for("the call to start", || started(&f, &m));
    wait_for("both processes of the call", || pids_with(&m).len() >= 2);
    let host_pids = pids_with(&m);
    s.terminate();
    let a = call.join().unwrap();
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(a.json["ok"], false, "{a:?}");
    assert_eq!(a.json["error"]["details"]["shutdown"], true, "{a:?}");
    assert_eq!(s.wait_exit(), Some(0));
    for p in host_pids {
        assert!(
            !Path::new(&format!("/proc/{p}")).exists(),
            "pid {p} of the call survived the shutdown"
        );
    }
    assert!(pids_with(&m).is_empty());
    let log = s.log.lock().unwrap().join("\n");
    assert!(
        log.contains("grace period over: killing 1 running call"),
        "{log}"
    );
}

#[test]
fn a_request_past_its_timeout_is_504_and_its_call_is_killed() {
    require_jail!();
    let f = project();
    let s = Served::start(&f.root, &[], &["--request-timeout", "2"]);
    let m = marker("timeout");
    let (addr, body) = (
        s.addr.clone(),
        json!({"marker": m, "secs": 100}).to_string(),
    );
    let call = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/api/v1/tools/sleeper/invoke",
            &[],
            body.as_bytes(),
        )
    });
    wait_for("the call to start", || started(&f, &m));
    let a = call.join().unwrap();
    assert_eq!((a.status, a.kind()), (504, "timeout"), "{a:?}");
    wait_for("the call's processes to be gone", || {
        pids_with(&m).is_empty()
    });
    // The result line, not the intent line written before the call ran.
    wait_for("the call's result to be logged", || {
        audit_log(&f)
            .lines()
            .any(|l| l.contains("TOOL_EXECUTED") && l.contains("name=sleeper"))
    });
    wait_for("the call's slot to be free", || {
        s.get("/healthz").json["calls_in_flight"] == 0
    });
}

/// An MCP session holding an open event stream does not keep the server
/// from stopping.
#[test]
fn shutdown_ends_open_mcp_sessions() {
    let f = project();
    let mut s = Served::start(&f.root, &[], &["--grace", "1"]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let init = s.request(
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        body.as_bytes(),
    );
    assert_eq!(init.status, 200, "{init:?}");
    let session = init.header("mcp-session-id").expect("a session id");
    let mut stream = TcpStream::connect(&s.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let notified = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    s.request(
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", &session),
        ],
        notified.as_bytes(),
    );
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n",
        s.addr
    )
    .unwrap();
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200", "the event stream did not open");
    s.terminate();
    assert_eq!(s.wait_exit(), Some(0));
    // The stream was closed, not left hanging.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    // Ended by the kill at the end of the grace period, not abandoned.
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("connections still open"), "{log}");
}

#[test]
fn an_invoked_tool_is_still_jailed() {
    require_jail!();
    let f = project();
    let s = Served::start(&f.root, &[], &[]);
    let a = s.post("/api/v1/tools/escaper/invoke", &json!({}));
    assert_eq!(a.status, 200, "{a:?}");
    let out = a.json["output"].as_str().unwrap_or_default();
    assert!(out.contains("PROBE-RAN"), "the probe did not run: {a:?}");
    assert!(out.contains("read denied"), "{a:?}");
    assert!(out.contains("write denied"), "{a:?}");
    assert!(!a.body.contains("CANARY-7f3a"), "{a:?}");
    assert!(!f.outside.join("dropped.txt").exists());
}

#[test]
fn agent_headers_land_in_the_audit_log_and_forge_nothing() {
    let f = project();
    let s = Served::start(&f.root, &[], &[]);
    let a = s.request(
        "POST",
        "/api/v1/tools/nope/invoke",
        &[("X-Agent-ID", "agent-42"), ("X-Project-ID", "proj/a")],
        b"{}",
    );
    assert_eq!(a.status, 404);
    let log = audit_log(&f);
    assert!(
        log.contains("name=nope params={} status=error kind=tool_not_found")
            && log.contains("caller=http agent_id=agent-42 project_id=proj/a key_id="),
        "{log}"
    );
    // A value that tries to add a field: a tab, a space and `=` (all legal
    // in a header value) come out percent-encoded.
    s.request(
        "POST",
        "/api/v1/tools/nope/invoke",
        &[("X-Agent-ID", "x\tstatus=success kind=none")],
        b"{}",
    );
    // A raw CR/LF inside the value: the server refuses the request or
    // sees two headers; either way no line is forged.
    let forged = "[2026-01-01T00:00:00Z] TOOL_EXECUTED name=FORGED status=success";
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        raw,
        "POST /api/v1/tools/nope/invoke HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 2\r\nX-Agent-ID: a\r{forged}\r\n\r\n{{}}",
        s.addr
    )
    .unwrap();
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
    let log = audit_log(&f);
    assert!(
        log.contains("agent_id=x%09status%3Dsuccess%20kind%3Dnone key_id="),
        "{log}"
    );
    for line in log.lines() {
        assert!(
            line.starts_with('['),
            "a line not written by glovebox: {line}"
        );
        assert!(!line.starts_with("[2026-01-01"), "forged line: {line}");
        assert_eq!(line.matches(" status=").count(), 1, "{line}");
    }
    // Nor can the parameters, which the log keeps as JSON.
    s.post(
        "/api/v1/tools/nope/invoke",
        &json!({"q": "a agent_id=forged status=success"}),
    );
    let usage = s.get("/api/v1/tools/usage");
    let recs = usage.json.as_array().unwrap();
    assert_eq!(recs.len(), 3, "{usage:?}");
    assert!(recs[0].get("agent_id").is_none(), "{usage:?}");
    for r in recs {
        assert_eq!(r["status"], "error", "{r}");
    }
    audit_verifies(&f);
}

/// Schemathesis' `st`.
fn schemathesis() -> PathBuf {
    venv_program(
        "tests/http_api/setup.sh",
        "GLOVEBOX_SCHEMATHESIS_VENV",
        "schemathesis-venv",
        "st",
    )
}

#[test]
fn schemathesis_finds_no_server_error_and_no_answer_off_the_spec() {
    let st = schemathesis();
    require_jail!();
    // No sleeper: generated parameters must not hold the server for long.
    let f = Fixture::new();
    f.tool(&echo_tool());
    f.tool(&escaper(&f.outside));
    let s = Served::start(&f.root, &[], &[]);
    let out = Command::new(&st)
        .args([
            "run",
            &format!("http://{}/openapi.json", s.addr),
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--max-examples",
            "25",
            "--phases",
            "examples,coverage,fuzzing",
            "--seed",
            "7",
            "--request-timeout",
            "60",
            "--no-color",
        ])
        .current_dir(&f.base)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{stdout}\n{stderr}\nserver log:\n{}",
        s.log.lock().unwrap().join("\n")
    );
    assert!(stdout.contains("passed"), "{stdout}");
}

/// Attack 5: DNS rebinding. A page on `attacker.example` that resolves to
/// 127.0.0.1 sends `Host: attacker.example:PORT`: no route answers with
/// tool data, and `invoke` runs nothing. Loopback names still work.
#[test]
fn a_foreign_host_gets_no_route() {
    require_jail!();
    let f = project();
    f.tool(&command_tool(
        "marker",
        schema(json!({})),
        json!({"entrypoint": "touch", "args": ["started/host-marker"]}),
        write_root(),
    ));
    let s = Served::start(&f.root, &[], &[]);
    let port = s.addr.rsplit_once(':').unwrap().1.to_string();
    let mcp_init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "page", "version": "0"}}})
    .to_string();
    let routes: [(&str, &str, &[u8]); 9] = [
        ("GET", "/api/v1/tools", b""),
        ("GET", "/api/v1/tools/echo_json", b""),
        ("GET", "/api/v1/tools/usage", b""),
        ("POST", "/api/v1/tools/marker/invoke", b"{}"),
        ("POST", "/api/v1/tools/discover", b""),
        ("GET", "/openapi.json", b""),
        ("GET", "/healthz", b""),
        ("GET", "/no/such/route", b""),
        ("POST", "/mcp", mcp_init.as_bytes()),
    ];
    for host in [
        format!("attacker.example:{port}"),
        "attacker.example".to_string(),
        format!("localhost.attacker.example:{port}"),
        "localhost".to_string(),
    ] {
        for (method, path, body) in routes {
            let a = request_to(
                &s.addr,
                &host,
                method,
                path,
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                ],
                body,
            );
            assert_eq!(a.status, 421, "{host} {method} {path}: {a:?}");
            let text = &a.body;
            assert!(a.json["error"]["kind"].is_string(), "{host} {path}: {a:?}");
            for leak in ["echo_json", "marker", "sleeper", "serverInfo", "openapi"] {
                assert!(!text.contains(leak), "{host} {path} leaked {leak}: {text}");
            }
        }
    }
    assert!(!f.root.join("started/host-marker").exists(), "invoke ran");

    // A CORS preflight for another name gets no answer of its own.
    let a = request_to(
        &s.addr,
        &format!("attacker.example:{port}"),
        "OPTIONS",
        "/api/v1/tools",
        &[
            ("Origin", &format!("http://localhost:{port}")),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    );
    assert_eq!(a.status, 421, "{a:?}");
    assert!(
        !a.head.to_ascii_lowercase().contains("access-control-"),
        "{a:?}"
    );
    // An absolute-form target names the host HTTP/1.1 says counts, and
    // two Host headers are one too many: neither reaches a route.
    let lo = format!("localhost:{port}");
    let foreign = format!("attacker.example:{port}");
    for (host, target, extra) in [
        (&lo, format!("http://{foreign}/api/v1/tools"), None),
        (&foreign, format!("http://{lo}/api/v1/tools"), None),
        (&lo, "/api/v1/tools".to_string(), Some(&foreign)),
        (&foreign, "/api/v1/tools".to_string(), Some(&lo)),
    ] {
        let mut req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        if let Some(second) = extra {
            req.push_str(&format!("Host: {second}\r\n"));
        }
        req.push_str("\r\n");
        let a = raw_request(&s.addr, req.as_bytes());
        assert_ne!(a.status, 200, "{req:?}: {a:?}");
        assert!(
            !a.body.contains("echo_json"),
            "{req:?} leaked the tools: {a:?}"
        );
    }
    // Probe: the same absolute-form request for this server is served.
    let a = raw_request(
        &s.addr,
        format!("GET http://{lo}/api/v1/tools HTTP/1.1\r\nHost: {lo}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("echo_json"), "{a:?}");

    // Loopback names with the port are served.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let a = request_to(&s.addr, &host, "GET", "/api/v1/tools", &[], b"");
        assert_eq!(a.status, 200, "{host}: {a:?}");
    }
    let a = request_to(
        &s.addr,
        &format!("localhost:{port}"),
        "POST",
        "/api/v1/tools/marker/invoke",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(f.root.join("started/host-marker").exists());
}
