//! One bad request cannot stop the server (issue 23): every entry point
//! (the HTTP API, MCP over stdio, MCP over HTTP) refuses tool names with a
//! NUL byte, control characters, non-UTF-8 bytes or too many characters
//! with a clean error, never lets them reach a log line as extra fields,
//! and answers the next request. Also: the one bound on calls (queue,
//! then busy) is the same over stdio and HTTP, and MCP sessions are
//! capped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::time::Duration;

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::*;

fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    f.tool(&command_tool(
        "nap",
        schema(json!({"secs": {"type": "string"}})),
        json!({"entrypoint": "sleep", "args": ["${secs}"]}),
        read_root(),
    ));
    f
}

fn state_env(f: &Fixture) -> Vec<(String, String)> {
    vec![(
        "GLOVEBOX_STATE_DIR".into(),
        f.base.join("state").to_str().unwrap().to_string(),
    )]
}

fn envs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn audit_log(f: &Fixture) -> String {
    std::fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap_or_default()
}

/// How many `nap` calls have written their intent (each holds a slot).
fn naps_started(f: &Fixture) -> usize {
    audit_log(f).matches("TOOL_STARTED name=nap").count()
}

/// Names no tool can have, as JSON strings (for MCP).
fn bad_names() -> Vec<String> {
    vec![
        "a\u{0}b".into(),
        "ec\u{0}ho".into(),
        "echo\u{1}".into(),
        "echo\n[2026-01-01T00:00:00Z] TOOL_EXECUTED name=x".into(),
        "\u{1b}[2Jecho".into(),
        "x".repeat(100_000),
        "echo agent_id=alice status=success".into(),
        "é".into(),
        String::new(),
    ]
}

/// No log line gained a field from a name: every line parses to the
/// fields glovebox writes, and no `agent_id=alice` appears.
fn assert_no_forged_fields(f: &Fixture) {
    let log = audit_log(f);
    assert!(!log.contains("agent_id=alice"), "{log}");
    assert!(!log.contains("status=success status"), "{log}");
    for line in log.lines() {
        assert!(line.starts_with('['), "a line was split: {line:?}\n{log}");
    }
}

#[test]
fn http_bad_tool_names_are_refused_and_the_server_goes_on() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let long = "x".repeat(5000);
    let paths = [
        "/api/v1/tools/ec%00ho/invoke".to_string(),
        "/api/v1/tools/a%00b/invoke".to_string(),
        "/api/v1/tools/echo%01/invoke".to_string(),
        "/api/v1/tools/echo%0A%5Bx%5D%20TOOL_EXECUTED/invoke".to_string(),
        "/api/v1/tools/%FF%FE/invoke".to_string(),
        "/api/v1/tools/%C3%A9/invoke".to_string(),
        format!("/api/v1/tools/{long}/invoke"),
        "/api/v1/tools/repo_scan%20agent_id=alice/invoke".to_string(),
    ];
    for path in &paths {
        let a = s.request("POST", path, &[("Content-Type", "application/json")], b"{}");
        assert_eq!(
            (a.status, a.kind()),
            (404, "tool_not_found"),
            "{path}: {a:?}"
        );
        assert!(a.json.is_object(), "{path}: a JSON answer: {a:?}");
        s.assert_alive();
        // GET and DELETE of the same names too.
        let g = s.request("GET", path.trim_end_matches("/invoke"), &[], b"");
        assert!(g.json.is_object() && g.status == 404, "{path}: {g:?}");
        let d = s.request("DELETE", path.trim_end_matches("/invoke"), &[], b"");
        assert!(d.json.is_object() && d.status >= 400, "{path}: {d:?}");
        s.assert_alive();
    }
    // The next call works.
    let ok = s.post("/api/v1/tools/echo/invoke", &json!({"w": "after"}));
    if jail_available() {
        assert_eq!(ok.status, 200, "{ok:?}");
        assert_eq!(ok.json["output"], "after\n", "{ok:?}");
    }
    assert_no_forged_fields(&f);
}

#[test]
fn stdio_bad_tool_names_are_refused_and_the_server_goes_on() {
    let f = project();
    let st = state_env(&f);
    let mut m = StdioMcp::start(&f.root, &envs(&st), &[]);
    let mut id = 10;
    for name in bad_names() {
        // Through glee_tool…
        id += 1;
        let r = m.call(id, "glee_tool", json!({"name": name, "params": {}}));
        let e = tool_error(&r["result"]);
        assert_eq!(e["kind"], "tool_not_found", "{r}");
        assert!(m.alive(), "the server died on {name:?}");
        // …and as the tool's own name.
        id += 1;
        let r = m.call(id, &name, json!({}));
        assert!(
            r.get("error").is_some() || r["result"]["isError"] == json!(true),
            "{r}"
        );
        assert!(m.alive(), "the server died on {name:?}");
    }
    // A name with bytes that are not UTF-8 cannot even be JSON: a parse
    // error, and the server goes on.
    m.write_raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{\"name\":\"glee_tool\",\"arguments\":{\"name\":\"a\xff\xfeb\"}}}\n");
    let r = m.reply();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(m.alive());
    if jail_available() {
        let r = m.call(999, "echo", json!({"w": "after"}));
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
    }
    assert_no_forged_fields(&f);
}

#[test]
fn mcp_http_bad_tool_names_are_refused_and_the_server_goes_on() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    for protocol in ["2025-06-18", "2025-11-25"] {
        let session = s.mcp_session(protocol);
        for (i, name) in bad_names().into_iter().enumerate() {
            let a = s.mcp(
                Some(&session),
                &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                    "params": {"name": "glee_tool", "arguments": {"name": name, "params": {}}}}),
            );
            assert_eq!(a.status, 200, "{a:?}");
            let e = tool_error(&a.rpc()["result"]);
            assert_eq!(e["kind"], "tool_not_found", "{a:?}");
            let a = s.mcp(
                Some(&session),
                &json!({"jsonrpc": "2.0", "id": 200 + i, "method": "tools/call",
                    "params": {"name": name, "arguments": {}}}),
            );
            assert!(a.status < 500, "{a:?}");
            s.assert_alive();
        }
    }
    // Bytes that are not UTF-8 in the name: a JSON-RPC parse error.
    let session = s.mcp_session("2025-11-25");
    let a = s.mcp_raw(
        Some(&session),
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"a\xffb\",\"arguments\":{}}}",
    );
    assert_eq!(a.status, 400, "{a:?}");
    assert_eq!(a.json["error"]["code"], -32700, "{a:?}");
    s.assert_alive();
    assert_no_forged_fields(&f);
}

/// `--max-concurrent 1 --max-queued 1` over stdio: a second call waits
/// for the first and runs; a third, with the queue full, is refused at
/// once as busy. The same flags over HTTP give the same answers.
#[test]
fn one_call_bound_queues_then_refuses_on_stdio_and_http() {
    require_jail!();
    let f = project();
    let st = state_env(&f);
    let limits = ["--max-concurrent", "1", "--max-queued", "1"];
    let mut m = StdioMcp::start(&f.root, &envs(&st), &limits);
    // In order: the slow call takes the slot, then one waits in the queue.
    for (id, secs) in [(1, "3"), (2, "0")] {
        let naps_before = naps_started(&f);
        m.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "nap", "arguments": {"secs": secs}}}));
        if id == 1 {
            // The intent is written once the call holds its slot.
            assert!(wait_until(Duration::from_secs(20), || naps_started(&f) > naps_before));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let busy = m.call(3, "echo", json!({"w": "x"}));
    let e = tool_error(&busy["result"]);
    assert_eq!(e["kind"], "resource_limit", "{busy}");
    assert_eq!(e["details"]["busy"], true, "{busy}");
    let mut done: Vec<Value> = vec![m.reply(), m.reply()];
    done.sort_by_key(|r| r["id"].as_u64());
    for r in &done {
        assert_eq!(
            r["result"]["isError"],
            json!(false),
            "queued calls run: {r}"
        );
    }
    // HTTP (the API and /mcp share the bound).
    let s = Served::start(&f.root, &envs(&st), &limits);
    let addr = s.addr.clone();
    let naps_before = naps_started(&f);
    let slow = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/api/v1/tools/nap/invoke",
            &[],
            br#"{"secs":"3"}"#,
        )
    });
    // The intent is written once the call holds its slot.
    assert!(wait_until(Duration::from_secs(20), || naps_started(&f) > naps_before));
    let addr = s.addr.clone();
    let queued = std::thread::spawn(move || {
        request(
            &addr,
            "POST",
            "/api/v1/tools/nap/invoke",
            &[],
            br#"{"secs":"0"}"#,
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let session = s.mcp_session("2025-11-25");
    let a = s.mcp(
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"w": "x"}}}),
    );
    let e = tool_error(&a.rpc()["result"]);
    assert_eq!(
        (e["kind"].as_str(), &e["details"]["busy"]),
        (Some("resource_limit"), &json!(true)),
        "{a:?}"
    );
    let b = s.post("/api/v1/tools/echo/invoke", &json!({"w": "x"}));
    assert_eq!((b.status, b.kind()), (503, "resource_limit"), "{b:?}");
    assert_eq!(b.header("retry-after").as_deref(), Some("1"));
    assert_eq!(slow.join().unwrap().status, 200);
    assert_eq!(queued.join().unwrap().status, 200);
}

/// `--max-sessions 2`: a third session closes the oldest; the newest work.
/// A client that sends its next call as soon as the last one is answered
/// never meets the slot of the call that answered: with one slot and no
/// queue, none of these back-to-back calls is refused as busy.
#[test]
fn back_to_back_calls_never_find_the_last_one_holding_its_slot() {
    let f = project();
    let st = state_env(&f);
    let limits = ["--max-concurrent", "1", "--max-queued", "0"];
    let mut m = StdioMcp::start(&f.root, &envs(&st), &limits);
    let mut busy = 0;
    for id in 1..=300 {
        // A call refused by the engine (not a tool name) ends at once.
        let r = m.call(id, "glee_tool", json!({"name": "a\u{0}b", "params": {}}));
        let e = tool_error(&r["result"]);
        if e["details"]["busy"] == json!(true) {
            busy += 1;
        } else {
            assert_eq!(e["kind"], "tool_not_found", "{r}");
        }
    }
    assert_eq!(busy, 0, "{busy} of 300 back-to-back calls were told busy");
}

#[test]
fn mcp_sessions_are_capped_oldest_first() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &["--max-sessions", "2"]);
    let first = s.mcp_session("2025-11-25");
    let second = s.mcp_session("2025-11-25");
    let third = s.mcp_session("2025-11-25");
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}});
    let old = s.mcp(Some(&first), &list);
    assert_eq!(old.status, 404, "the oldest session was closed: {old:?}");
    for session in [&second, &third] {
        let a = s.mcp(Some(session), &list);
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.rpc()["result"]["tools"].is_array(), "{a:?}");
    }
    s.assert_alive();
}

/// Issue 23, item 6: a 140 KB parameter is a 400 `input_invalid` with a
/// message said once; the output limit's message states the limit.
#[test]
fn an_overlong_argument_is_input_invalid_and_the_output_limit_is_stated() {
    require_jail!();
    let f = project();
    f.tool(&command_tool(
        "loud",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c", "print('y' * 50000)"]}),
        read_root(),
    ));
    f.config(&json!({"limits": {"output_bytes": 4096}}));
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let big = "x".repeat(140 * 1024);
    let a = s.post("/api/v1/tools/echo/invoke", &json!({"w": big}));
    assert_eq!((a.status, a.kind()), (400, "input_invalid"), "{:?}", a.json);
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.len() < 400, "{message}");
    let words: Vec<&str> = message.split(": ").collect();
    let mut unique = words.clone();
    unique.dedup();
    assert_eq!(
        words, unique,
        "a part of the message is repeated: {message}"
    );
    s.assert_alive();
    let a = s.post("/api/v1/tools/loud/invoke", &json!({}));
    assert_eq!(
        (a.status, a.kind()),
        (200, "resource_limit"),
        "{:?}",
        a.json
    );
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("output limit of 4096 bytes"), "{message}");
    assert_eq!(a.json["error"]["details"]["output_bytes"], 4096);
}

/// A call killed because its request timed out is logged as `timeout`;
/// one whose client went away as `cancelled`; neither as `internal`.
#[test]
fn calls_ended_by_a_timeout_or_a_disconnect_are_logged_with_their_kind() {
    require_jail!();
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &["--request-timeout", "1"]);
    let a = s.post("/api/v1/tools/nap/invoke", &json!({"secs": "20"}));
    assert_eq!((a.status, a.kind()), (504, "timeout"), "{a:?}");
    // The result line names its intent's call id (the intent holds the
    // parameters).
    let result_line = |f: &Fixture, secs: &str| {
        let log = audit_log(f);
        let call = log
            .lines()
            .find(|l| {
                l.contains("TOOL_STARTED name=nap") && l.contains(&format!("\"secs\":\"{secs}\""))
            })?
            .split(' ')
            .find_map(|w| w.strip_prefix("call="))?
            .to_string();
        log.lines()
            .find(|l| l.contains("TOOL_EXECUTED name=nap") && l.contains(&format!(" call={call} ")))
            .map(String::from)
    };
    let mut line = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            line = result_line(&f, "20");
            line.is_some()
        }),
        "{}",
        audit_log(&f)
    );
    let line = line.unwrap();
    assert!(line.contains("kind=timeout"), "{line}");
    // A client that goes away mid-call.
    let s = Served::start(&f.root, &envs(&st), &[]);
    {
        use std::io::Write;
        let body = br#"{"secs":"21"}"#;
        let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
        write!(
            c,
            "POST /api/v1/tools/nap/invoke HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            s.addr,
            body.len()
        )
        .unwrap();
        c.write_all(body).unwrap();
        assert!(wait_until(Duration::from_secs(30), || audit_log(&f)
            .contains("\"secs\":\"21\"")));
    }
    let mut line = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            line = result_line(&f, "21");
            line.is_some()
        }),
        "{}",
        audit_log(&f)
    );
    let line = line.unwrap();
    assert!(line.contains("kind=cancelled"), "{line}");
    s.assert_alive();
}

/// stdio: malformed JSON, 100k-deep JSON and a line over 16 MiB each get
/// a JSON-RPC error; errors for non-object params and batches keep the
/// request's id; a reused in-flight id is refused without losing the
/// first reply; the server answers the next request.
#[test]
fn stdio_answers_every_bad_line_and_keeps_ids() {
    let f = project();
    let st = state_env(&f);
    let mut m = StdioMcp::start(&f.root, &envs(&st), &[]);
    m.write_raw(b"{not json\n");
    let r = m.reply();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{r}"
    );
    let deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    m.write_raw(deep.as_bytes());
    let r = m.reply();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    let mut huge = vec![b'"'];
    huge.extend(std::iter::repeat_n(b'a', 17 * 1024 * 1024));
    huge.extend_from_slice(b"\"\n");
    m.write_raw(&huge);
    let r = m.reply();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    m.write_raw(br#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":"x"}"#);
    m.write_raw(b"\n");
    let r = m.reply();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(41), json!(-32602)),
        "{r}"
    );
    // Envelopes rmcp would refuse without the id, and params of the wrong
    // shape: each answered with its id, and the id is free again at once.
    for (line, id, code) in [
        (&br#"{"jsonrpc":"2.0","id":43,"method":"tools/call","params":[1]}"#[..], json!(43), -32602),
        (br#"{"jsonrpc":"1.0","id":44,"method":"ping"}"#, json!(44), -32600),
        (br#"{"id":"c","method":"ping"}"#, json!("c"), -32600),
        (br#"{"jsonrpc":"2.0","id":45,"method":7}"#, json!(45), -32600),
        (br#"{"jsonrpc":"2.0","id":46,"method":"tools/call","params":{"name":5}}"#, json!(46), -32602),
        (br#"{"jsonrpc":"2.0","id":47,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#, json!(47), -32602),
        (br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, Value::Null, -32600),
    ] {
        m.write_raw(line);
        m.write_raw(b"\n");
        let r = m.reply();
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (id.clone(), json!(code)),
            "{}: {r}",
            String::from_utf8_lossy(line)
        );
        if !id.is_null() {
            m.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
            let again = m.reply();
            assert_eq!(
                (again["id"].clone(), again.get("error")),
                (id, None),
                "{again}"
            );
        }
    }
    m.write_raw(br#"[{"jsonrpc":"2.0","id":42,"method":"ping"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#);
    m.write_raw(b"\n");
    let mut ids = vec![m.reply()["id"].clone(), m.reply()["id"].clone()];
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, vec![json!("b"), json!(42)]);
    if jail_available() {
        // The same id twice while the first call runs.
        for secs in ["2", "0"] {
            m.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
                "params": {"name": "nap", "arguments": {"secs": secs}}}));
        }
        let refused = m.reply();
        assert_eq!(
            (refused["id"].clone(), refused["error"]["code"].clone()),
            (json!(50), json!(-32600)),
            "{refused}"
        );
        let first = m.reply();
        assert_eq!(first["id"], 50);
        assert_eq!(
            first["result"]["isError"],
            json!(false),
            "the first reply: {first}"
        );
    }
    m.send(&json!({"jsonrpc": "2.0", "id": 60, "method": "ping"}));
    assert_eq!(m.reply()["id"], 60);
    assert!(m.alive());
}

/// `/mcp` answers a body that is not JSON with a JSON-RPC parse error
/// (400), not 415; a wrong Content-Type gets a JSON body too.
#[test]
fn mcp_http_answers_bad_json_with_a_parse_error() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let session = s.mcp_session("2025-11-25");
    for body in [
        &b"{not json"[..],
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).as_bytes(),
    ] {
        let a = s.mcp_raw(Some(&session), body);
        assert_eq!(a.status, 400, "{a:?}");
        assert_eq!(a.json["error"]["code"], -32700, "{a:?}");
        s.assert_alive();
    }
    // Envelopes rmcp refuses with a bare 415: JSON, with the id.
    for (body, id, code) in [
        (
            &br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}"#[..],
            json!(7),
            -32602,
        ),
        (
            br#"{"jsonrpc":"1.0","id":"r","method":"ping"}"#,
            json!("r"),
            -32600,
        ),
        (
            br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            Value::Null,
            -32600,
        ),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            Value::Null,
            -32600,
        ),
        (b"5", Value::Null, -32600),
        (b"{}", Value::Null, -32600),
    ] {
        let a = s.mcp_raw(Some(&session), body);
        assert_eq!(
            (
                a.status,
                a.json["id"].clone(),
                a.json["error"]["code"].clone()
            ),
            (400, id, json!(code)),
            "{}: {a:?}",
            String::from_utf8_lossy(body)
        );
    }
    // Known methods with params of the wrong shape are invalid params,
    // not unknown methods.
    let bad = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}});
    let a = s.mcp(Some(&session), &bad).rpc();
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (json!(8), json!(-32602)),
        "{a:?}"
    );
    let a = s.request("POST", "/mcp", &[("Content-Type", "text/plain")], b"{}");
    assert_eq!(a.status, 415, "{a:?}");
    assert_eq!(a.json["error"]["code"], -32600, "{a:?}");
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}});
    assert_eq!(s.mcp(Some(&session), &list).status, 200);
}

/// Deleting `.glee/` and making it again is noticed by the watcher: the
/// tools go, then come back, without a restart.
#[test]
fn deleting_and_restoring_glee_is_noticed() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let has_echo = |s: &Served| {
        let a = s.request("GET", "/api/v1/tools", &[], b"");
        a.json
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "echo"))
    };
    assert!(has_echo(&s));
    let saved = f.base.join("tools-saved");
    copy_tree(&f.root.join(".glee/tools"), &saved);
    let wait = |want: bool, what: &str| {
        assert!(
            wait_until(Duration::from_secs(30), || has_echo(&s) == want),
            "{what}: {}",
            s.stderr()
        );
    };
    std::fs::remove_dir_all(f.root.join(".glee")).unwrap();
    wait(false, "the deletion was not noticed");
    copy_tree(&saved, &f.root.join(".glee/tools"));
    wait(true, "the restored tools were not noticed");
    // And a change after the restore too.
    std::fs::remove_dir_all(f.root.join(".glee/tools/echo")).unwrap();
    wait(false, "a change after the restore was not noticed");
}

/// The answers hyper writes itself (unparsable request 400, URI over
/// 64 KiB 414, headers too large 431) carry a JSON error body like every
/// other refusal, and the server answers the next request.
#[test]
fn hypers_own_refusals_are_json() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let big_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(600_000)
    );
    for (raw, status) in [
        (long_uri.into_bytes(), 414),
        (big_header.into_bytes(), 431),
        (b"GARBAGE\r\n\r\n".to_vec(), 400),
    ] {
        let a = raw_request(&s.addr, &raw);
        assert_eq!(a.status, status, "{a:?}");
        assert_eq!(a.kind(), "input_invalid", "{a:?}");
        assert!(
            a.header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{a:?}"
        );
        s.assert_alive();
    }
    // rmcp's own plain-text refusals on /mcp are JSON too, status and
    // headers kept.
    let mcp_json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let no_session = [("Mcp-Session-Id", "no-such-session")];
    let only_json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    for (method, headers, body, status) in [
        ("DELETE", &[][..], &b""[..], 400),
        ("GET", &[("Accept", "text/event-stream")][..], &b""[..], 400),
        ("POST", &mcp_json[..], &list[..], 400),
        (
            "POST",
            &[mcp_json[0], mcp_json[1], no_session[0]][..],
            &list[..],
            404,
        ),
        ("POST", &only_json[..], &list[..], 406),
        ("PUT", &[][..], &b""[..], 405),
    ] {
        let a = s.request(method, "/mcp", headers, body);
        assert_eq!(a.status, status, "{method} {headers:?}: {a:?}");
        assert_eq!(a.kind(), "input_invalid", "{method} {headers:?}: {a:?}");
        assert!(
            a.header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{a:?}"
        );
    }
    s.assert_alive();
}

/// MCP 2026-07-28 (no `initialize`; each request carries its revision in
/// `_meta`) over stdio: bad names are refused and the one call bound
/// answers busy exactly as on the older revisions.
#[test]
fn the_2026_revision_gets_the_same_checks_and_bound() {
    use std::io::{BufRead, BufReader, Write};
    let f = project();
    let st = state_env(&f);
    let mut child = std::process::Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "mcp"])
        .args(["--max-concurrent", "1", "--max-queued", "0"])
        .envs(envs(&st))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut send = |id: u64, name: &str, args: Value| {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta}});
        writeln!(stdin, "{m}").unwrap();
    };
    let reply = |id: u64| -> Value {
        loop {
            let v = rx.recv_timeout(Duration::from_secs(60)).expect("a reply");
            if v["id"] == json!(id) {
                return v;
            }
        }
    };
    send(1, "glee_tool", json!({"name": "a\u{0}b", "params": {}}));
    let r = reply(1);
    assert_eq!(tool_error(&r["result"])["kind"], "tool_not_found", "{r}");
    if jail_available() {
        send(2, "nap", json!({"secs": "3"}));
        // The intent is written once the call holds its slot.
        if !wait_until(Duration::from_secs(20), || {
            audit_log(&f).contains("TOOL_STARTED name=nap")
        }) {
            let early: Vec<Value> = rx.try_iter().collect();
            panic!("nap never started: {early:?}\n{}", audit_log(&f));
        }
        send(3, "echo", json!({"w": "x"}));
        let r = reply(3);
        let e = tool_error(&r["result"]);
        assert_eq!(
            (e["kind"].as_str(), &e["details"]["busy"]),
            (Some("resource_limit"), &json!(true)),
            "{r}"
        );
        let r = reply(2);
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The SSE events of an event-stream body: each event's `data:` lines
/// joined (`None` for an event without one) and whether it has an `id:`.
fn sse_events(body: &str) -> Vec<(Option<String>, bool)> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let data: Vec<&str> = e
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let has_id = e.lines().any(|l| l.starts_with("id:"));
            ((!data.is_empty()).then(|| data.join("\n")), has_id)
        })
        .collect()
}

/// What arrives on `GET /mcp` (the session's standalone stream) within
/// `for_`: the raw bytes, head and all.
fn standalone_stream(s: &Served, session: &str, protocol: &str, for_: Duration) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
    write!(
        c,
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: {protocol}\r\n\r\n",
        s.addr
    )
    .unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let until = std::time::Instant::now() + for_;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while std::time::Instant::now() < until {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// Issue 32, item 7: Gemini CLI's client (MCP 2025-06-18) parses every SSE
/// event's data as JSON and drops a server that sends an empty one. A
/// session on 2025-06-18 (or 2025-03-26) gets no event with empty data — on `initialize`,
/// on a request's stream, on the standalone `GET` stream — and every
/// event's data is a JSON-RPC message; a session on 2025-11-25 still gets
/// the priming event its revision specifies (an id, empty data) first.
#[test]
fn sse_priming_events_go_only_to_sessions_that_know_them() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    for protocol in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let primed = protocol == "2025-11-25";
        let init = s.mcp(
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": protocol, "capabilities": {},
                "clientInfo": {"name": "gemini-cli-mcp-client", "version": "0"}}}),
        );
        assert_eq!(init.status, 200, "{init:?}");
        assert_eq!(
            init.rpc()["result"]["protocolVersion"],
            protocol,
            "{init:?}"
        );
        let session = init.header("mcp-session-id").expect("a session id");
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
            ("Mcp-Protocol-Version", protocol),
        ];
        s.request(
            "POST",
            "/mcp",
            &headers,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                .to_string()
                .as_bytes(),
        );
        let list = s.request(
            "POST",
            "/mcp",
            &headers,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(list.status, 200, "{list:?}");
        assert!(
            list.rpc()["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "echo")),
            "{list:?}"
        );
        let standalone = standalone_stream(&s, &session, protocol, Duration::from_millis(1500));
        assert!(standalone.starts_with("HTTP/1.1 200"), "{standalone}");
        let standalone_body = standalone.split_once("\r\n\r\n").unwrap().1.to_string();
        for (what, body) in [
            ("initialize", init.body.clone()),
            ("tools/list", list.body.clone()),
        ] {
            let events = sse_events(&body);
            assert!(!events.is_empty(), "{protocol} {what}: {body:?}");
            if primed {
                let (data, has_id) = &events[0];
                assert!(
                    data.as_deref() == Some("") && *has_id,
                    "{protocol} {what}: the stream starts with a priming event: {body:?}"
                );
            } else {
                for (data, _) in &events {
                    let data = data.as_deref().unwrap_or_default();
                    assert!(
                        serde_json::from_str::<Value>(data).is_ok(),
                        "{protocol} {what}: an event whose data is not JSON ({data:?}): {body:?}"
                    );
                }
            }
        }
        // The standalone stream: chunked, so look for the event's lines.
        let empty_data = standalone_body
            .replace("\r\n", "\n")
            .lines()
            .any(|l| l == "data:" || l == "data: ");
        assert_eq!(
            empty_data,
            primed,
            "{protocol}: GET /mcp {}: {standalone_body:?}",
            if primed {
                "is primed"
            } else {
                "has no event with empty data"
            }
        );
    }
    s.assert_alive();
}

/// Issue 32, item 6: `/mcp` answers a message with an id but no method
/// (and no result) with 400 and a JSON-RPC invalid request carrying the
/// id, as stdio does; not 415.
#[test]
fn an_id_without_a_method_is_a_bad_request_on_http_and_stdio() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let session = s.mcp_session("2025-06-18");
    let a = s.mcp(Some(&session), &json!({"jsonrpc": "2.0", "id": 5}));
    assert_eq!(a.status, 400, "{a:?}");
    assert_eq!(
        (a.json["id"].clone(), a.json["error"]["code"].clone()),
        (json!(5), json!(-32600)),
        "{a:?}"
    );
    let mut m = StdioMcp::start(&f.root, &envs(&st), &[]);
    m.send(&json!({"jsonrpc": "2.0", "id": 6}));
    let r = m.reply();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(6), json!(-32600)),
        "{r}"
    );
    s.assert_alive();
}

/// Issue 32, item 6: a 1 MB unknown tool name is not echoed whole: the
/// error names at most its first 128 bytes, over stdio and over HTTP.
#[test]
fn a_huge_unknown_tool_name_is_cut_in_the_error() {
    let f = project();
    let st = state_env(&f);
    let name = "q".repeat(1_000_000);
    let mut m = StdioMcp::start(&f.root, &envs(&st), &[]);
    let r = m.call(3, &name, json!({}));
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("unknown tool"),
        "{}",
        &r.to_string()[..300.min(r.to_string().len())]
    );
    assert!(
        r.to_string().len() < 2_000,
        "the reply is {} bytes",
        r.to_string().len()
    );
    assert!(
        message.contains(&format!("{}…", "q".repeat(128))),
        "{message}"
    );
    let s = Served::start(&f.root, &envs(&st), &[]);
    let session = s.mcp_session("2025-06-18");
    let a = s.mcp(
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": name, "arguments": {}}}),
    );
    assert_eq!(a.status, 200, "{}", &a.body[..300.min(a.body.len())]);
    assert!(a.body.len() < 2_000, "the answer is {} bytes", a.body.len());
    assert!(a.rpc()["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("unknown tool")));
}

/// The peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Issue 32, item 4: a client that pipelines 20,000 pings without reading
/// a single answer costs `glovebox mcp` bounded memory (requests in
/// flight share the bound calls have; past it the server stops reading),
/// every ping is answered once the client reads, and the server answers
/// the next request.
#[test]
fn pipelined_pings_keep_stdio_memory_bounded_and_are_all_answered() {
    use std::io::{BufRead, BufReader, Write};
    const PINGS: u64 = 20_000;
    let f = project();
    let st = state_env(&f);
    let mut child = std::process::Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "mcp"])
        .envs(envs(&st))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"}}})
    )
    .unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("serverInfo"), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // Settled: a first ping answered.
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":"warm","method":"ping"}}"#).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let before = peak_rss_kib(pid);
    let writer = std::thread::spawn(move || {
        let mut batch = String::new();
        for id in 1..=PINGS {
            batch.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
            batch.push('\n');
            if id % 500 == 0 {
                if stdin.write_all(batch.as_bytes()).is_err() {
                    return None;
                }
                batch.clear();
            }
        }
        Some(stdin)
    });
    // Nothing is read for a while: the server either reads on (and must
    // hold everything) or stops reading.
    let until = std::time::Instant::now() + Duration::from_secs(8);
    while !writer.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let flooded = peak_rss_kib(pid);
    // Now read every answer.
    let mut answered = std::collections::HashSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while (answered.len() as u64) < PINGS && std::time::Instant::now() < deadline {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_u64() {
            assert!(
                v.get("result").is_some() || v["error"]["data"]["busy"] == json!(true),
                "{v}"
            );
            assert!(answered.insert(id), "answered twice: {v}");
        }
    }
    assert_eq!(answered.len() as u64, PINGS, "every ping is answered");
    let mut stdin = writer.join().unwrap().expect("all pings were written");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":"last","method":"tools/list","params":{{}}}}"#
    )
    .unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"last\"") && line.contains("echo"), "{line}");
    let after = peak_rss_kib(pid);
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("peak RSS: {before} KiB before, {flooded} KiB flooded, {after} KiB after");
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "{PINGS} pipelined pings grew the server from {before} KiB to {after} KiB (flooded: {flooded} KiB)"
    );
}

/// Issue 32, item 6: calls still waiting for a slot when the client closes
/// stdin are never started, and the call running is killed and logged
/// `cancelled` before the server exits.
#[test]
fn calls_queued_when_stdin_closes_are_not_started() {
    use std::io::Write;
    require_jail!();
    let f = project();
    let st = state_env(&f);
    let mut child = std::process::Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "mcp"])
        .args(["--max-concurrent", "1", "--max-queued", "8"])
        .envs(envs(&st))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |m: Value| writeln!(stdin, "{m}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "leaver", "version": "0"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nap", "arguments": {"secs": "2"}}}));
    assert!(
        wait_until(Duration::from_secs(20), || naps_started(&f) == 1),
        "{}",
        audit_log(&f)
    );
    for id in 2..5 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"w": format!("queued-{id}")}}}));
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "glovebox mcp did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Were any queued call to start late, it would be within the 2 s of
    // the nap's end.
    std::thread::sleep(Duration::from_secs(3));
    let log = audit_log(&f);
    assert!(
        !log.lines()
            .any(|l| l.contains("TOOL_STARTED") && l.contains("queued-")),
        "a queued call ran after the client left:\n{log}"
    );
    // Each is in the log, as a call that never started.
    let queued: Vec<&str> = log.lines().filter(|l| l.contains("queued-")).collect();
    assert_eq!(queued.len(), 3, "{log}");
    for l in queued {
        assert!(
            l.contains("TOOL_EXECUTED name=echo") && l.contains("kind=cancelled"),
            "{l}"
        );
    }
    let nap = log
        .lines()
        .find(|l| l.contains("TOOL_EXECUTED name=nap"))
        .unwrap_or_else(|| panic!("the running call has no result line:\n{log}"));
    assert!(nap.contains("kind=cancelled"), "{nap}");
}

/// Raises this process's soft open-file limit to the hard one; the hard
/// limit.
fn raise_open_files() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    hard
}

/// What came back on a connection.
enum Heard {
    /// The head of an answer.
    Head(String),
    /// The server closed it without an answer.
    Closed,
    /// Nothing within the time given.
    Nothing,
}

/// The head of the answer on `s`, read within `within`.
fn answer_head(s: &mut std::net::TcpStream, within: Duration) -> Heard {
    use std::io::Read;
    s.set_read_timeout(Some(within)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Heard::Nothing
            }
            _ => return Heard::Closed,
        }
    }
    Heard::Head(String::from_utf8_lossy(&head).into_owned())
}

/// A request on a new connection answered within `within` (connect
/// included); `None` when none came.
fn answered_within(addr: &str, within: Duration, req: &[u8]) -> Option<Answer> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), within).ok()?;
    s.set_read_timeout(Some(within)).unwrap();
    s.write_all(req).ok()?;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    (!raw.is_empty()).then(|| parse_answer(&raw))
}

/// Issue 32, item 1: one local client holding 600 `subscriptions/listen`
/// streams, then 512 idle connections (more than the server's 512
/// connections) cannot keep a second client out: streams have their own
/// bound (one more is a 503 with `Retry-After`), idle connections make
/// room, and the second client's requests and calls are answered.
#[test]
fn one_client_with_listen_streams_and_idle_connections_locks_no_one_out() {
    use std::io::Write;
    let hard = raise_open_files();
    // The issue's numbers need ~1,200 descriptors here; with fewer, the
    // same attack scaled to a smaller server.
    let (extra, listens, idle): (Vec<&str>, usize, usize) = if hard >= 2048 {
        (vec![], 600, 512)
    } else {
        (vec!["--max-connections", "64"], 80, 70)
    };
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &extra);
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "flood", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let listen_req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{listen}",
        s.addr,
        listen.len()
    );
    let mut held = Vec::new();
    for _ in 0..listens {
        let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
        c.write_all(listen_req.as_bytes()).unwrap();
        held.push(c);
    }
    // Every listen request is answered (a stream, or 503 past the
    // bound), or its connection closed to make room for a newer one of
    // the same client: none is left hanging. Read for at most 60 s.
    let (mut streams, mut refused, mut closed, mut hanging) = (0, 0, 0, 0);
    let reading = std::time::Instant::now();
    for c in held.iter_mut() {
        let left = Duration::from_secs(60).saturating_sub(reading.elapsed());
        match answer_head(c, left.max(Duration::from_millis(1))) {
            Heard::Head(h) if h.starts_with("HTTP/1.1 200") && h.contains("text/event-stream") => {
                streams += 1
            }
            Heard::Head(h) if h.starts_with("HTTP/1.1 503") => {
                assert!(h.to_ascii_lowercase().contains("retry-after:"), "{h}");
                refused += 1
            }
            Heard::Head(h) => panic!("a listen request got {h}"),
            Heard::Closed => closed += 1,
            Heard::Nothing => hanging += 1,
        }
    }
    let tally = format!("{streams} streams, {refused} refused, {closed} closed, {hanging} hanging");
    // The probe: the flood did open streams (the attack is real).
    assert!(
        streams >= 1,
        "no listen stream opened ({tally}): {}",
        s.stderr()
    );
    assert_eq!(hanging, 0, "listen requests were left hanging: {tally}");
    assert!(
        refused >= 1,
        "{listens} streams were all kept open: {tally}"
    );
    // Then connections that send nothing, more than the server's cap.
    let quiet: Vec<_> = (0..idle)
        .filter_map(|_| std::net::TcpStream::connect(&s.addr).ok())
        .collect();
    assert!(quiet.len() > idle / 2, "the idle connections were not made");
    // A second client: its requests and a call are answered.
    let list = format!(
        "GET /api/v1/tools HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        s.addr
    );
    let a = answered_within(&s.addr, Duration::from_secs(20), list.as_bytes())
        .unwrap_or_else(|| panic!("the second client got no answer: {}", s.stderr()));
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("\"echo\""), "{a:?}");
    let body = json!({"w": "through"}).to_string();
    let call = format!(
        "POST /api/v1/tools/echo/invoke HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    let a = answered_within(&s.addr, Duration::from_secs(60), call.as_bytes())
        .unwrap_or_else(|| panic!("the second client's call got no answer: {}", s.stderr()));
    if jail_available() {
        assert_eq!(
            (a.status, &a.json["output"]),
            (200, &json!("through\n")),
            "{a:?}"
        );
    } else {
        assert!(a.json.is_object(), "{a:?}");
    }
    // And an MCP session of its own.
    let init = s.mcp(
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "second", "version": "0"}}}),
    );
    assert_eq!(init.status, 200, "{init:?}");
    drop(quiet);
    drop(held);
    s.assert_alive();
}

/// Issue 32, item 3: a flood of new MCP sessions past `--max-sessions`
/// closes idle sessions only: the session with a call running keeps it,
/// and the call's result reaches its client. When every session has a
/// call running, a new session is refused (503, `Retry-After`).
#[test]
fn a_session_flood_never_drops_a_running_call_s_result() {
    require_jail!();
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &["--max-sessions", "2"]);
    let nap_on = |session: String, secs: &str| {
        let addr = s.addr.clone();
        let secs = secs.to_string();
        std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "nap", "arguments": {"secs": secs}}})
            .to_string();
            request(
                &addr,
                "POST",
                "/mcp",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("Mcp-Session-Id", &session),
                ],
                body.as_bytes(),
            )
        })
    };
    let first = s.mcp_session("2025-11-25");
    let running = nap_on(first.clone(), "3");
    assert!(
        wait_until(Duration::from_secs(30), || naps_started(&f) == 1),
        "the call never started: {}",
        audit_log(&f)
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"}}});
    let mut opened = 0;
    for _ in 0..200 {
        let a = s.mcp(None, &init);
        match a.status {
            200 => opened += 1,
            503 => assert!(a.header("retry-after").is_some(), "{a:?}"),
            _ => panic!("{a:?}"),
        }
    }
    // The probe: the flood did pass the cap (sessions were closed).
    assert!(opened > 2, "only {opened} sessions opened");
    let r = running.join().unwrap();
    assert_eq!(
        r.status, 200,
        "the running call's session was closed: {r:?}"
    );
    assert_eq!(r.rpc()["result"]["isError"], json!(false), "{r:?}");
    // Every session with a call running: a new one is refused.
    let (a, b) = (s.mcp_session("2025-11-25"), s.mcp_session("2025-11-25"));
    // Long enough that both still run when the next session is asked for,
    // however slowly the second one starts.
    let calls = [nap_on(a, "10"), nap_on(b, "10")];
    assert!(
        wait_until(Duration::from_secs(30), || naps_started(&f) == 3),
        "the calls never started: {}",
        audit_log(&f)
    );
    let refused = s.mcp(None, &init);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.kind(), "resource_limit", "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    for c in calls {
        let r = c.join().unwrap();
        assert_eq!(r.rpc()["result"]["isError"], json!(false), "{r:?}");
    }
    // Once they are done, sessions open again.
    assert_eq!(s.mcp(None, &init).status, 200);
}

/// Issue 32, item 5: `.glee/tools/` deleted and restored (or `.glee/`
/// deleted, made again empty, then given its tools) is followed by
/// reloads, and so is every edit after it: the watcher re-arms on the
/// directories as they now are.
#[test]
fn edits_after_glee_or_its_tools_is_deleted_and_restored_are_noticed() {
    let f = project();
    let st = state_env(&f);
    let s = Served::start(&f.root, &envs(&st), &[]);
    let echo = command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    );
    let description = |s: &Served| {
        s.get("/api/v1/tools/echo").json["description"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let edit = |n: u32, after: &str| {
        let mut m = echo.clone();
        m["description"] = json!(format!("edited {n}"));
        f.tool(&m);
        let want = format!("edited {n}");
        assert!(
            wait_until(Duration::from_secs(20), || description(&s) == want),
            "after {after}, an edit was not noticed: {:?}\n{}",
            description(&s),
            s.stderr()
        );
    };
    let pause = || std::thread::sleep(Duration::from_millis(800));
    edit(1, "nothing");
    // `.glee/tools/` deleted, then restored.
    let saved = f.base.join("tools-saved");
    copy_tree(&f.root.join(".glee/tools"), &saved);
    std::fs::remove_dir_all(f.root.join(".glee/tools")).unwrap();
    pause();
    copy_tree(&saved, &f.root.join(".glee/tools"));
    pause();
    edit(2, "tools/ deleted and restored");
    // `.glee/` deleted, made again empty, then given its tools.
    std::fs::remove_dir_all(f.root.join(".glee")).unwrap();
    pause();
    std::fs::create_dir(f.root.join(".glee")).unwrap();
    pause();
    copy_tree(&saved, &f.root.join(".glee/tools"));
    pause();
    edit(3, ".glee/ deleted, made empty, then given tools/");
    // `.glee/` renamed away and back.
    std::fs::rename(f.root.join(".glee"), f.base.join("glee-away")).unwrap();
    pause();
    std::fs::rename(f.base.join("glee-away"), f.root.join(".glee")).unwrap();
    pause();
    edit(4, ".glee/ renamed away and back");
}

/// Issue 32, item 9: a `tools.json` that is not JSON is said by every
/// command that loads the project (naming the file, the error and `lint`),
/// not only by `lint`: `list`, `run`, `mcp` (in `initialize`'s
/// instructions and on stderr) and `serve`.
#[test]
fn a_malformed_tools_json_is_said_everywhere() {
    let f = project();
    let st = state_env(&f);
    std::fs::write(
        f.root.join("tools.json"),
        "{\"tools\": [ {\"name\": \"x\",\n",
    )
    .unwrap();
    let says = |text: &str| {
        text.contains("tools.json could not be read")
            && text.contains("not valid JSON")
            && text.contains("glovebox lint")
    };
    let list = f.glovebox(&["list"]);
    let err = String::from_utf8_lossy(&list.stderr);
    assert!(says(&err), "list: {err}");
    let run = f.glovebox(&["run", "x"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        says(&err) && err.contains("no tool named `x`"),
        "run: {err}"
    );
    // MCP over stdio: the instructions say it.
    let mut child = std::process::Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "mcp"])
        .envs(envs(&st))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}})
        )
        .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let init: Value = serde_json::from_str(stdout.lines().next().unwrap_or("null")).unwrap();
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(says(instructions), "mcp: {init}");
    assert!(says(&String::from_utf8_lossy(&out.stderr)), "mcp stderr");
    // serve: on stderr when it starts (before the lines Served keeps) and
    // when a reload still finds it unreadable.
    let s = Served::start(&f.root, &envs(&st), &[]);
    std::fs::write(f.root.join("tools.json"), "{\"tools\": [\n").unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || says(&s.stderr())),
        "serve: {}",
        s.stderr()
    );
    // The HTTP API's unknown-tool error names its route, not the CLI.
    let a = s.post("/api/v1/tools/x/invoke", &json!({}));
    let message = a.json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("GET /api/v1/tools") && !message.contains("glovebox list"),
        "{a:?}"
    );
}

/// Issue 32, item 9: `glovebox mcp` without `--root` outside a project
/// answers `initialize` (and every request) with an error that says why
/// and what to pass, instead of exiting before the client hears anything.
#[test]
fn mcp_outside_a_project_answers_initialize_with_the_fix() {
    use std::io::Write;
    let dir = tempdir();
    let mut child = std::process::Command::new(bin())
        .arg("mcp")
        .current_dir(dir.path())
        .env("GLOVEBOX_STATE_DIR", dir.path().join("state"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for m in [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ] {
            writeln!(stdin, "{m}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let replies: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    for (r, id) in replies.iter().zip([0, 1]) {
        assert_eq!(r["id"], json!(id), "{r}");
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("no .glee/ directory") && m.contains("--root"),
            "{r}"
        );
    }
}

/// A server killed while calls are being set up stops accepting
/// connections as soon as it is reaped. No jail child still being set up
/// (nor a probe) holds on to its listening socket: a child killed before
/// it execs releases what it holds only after its namespaces are torn
/// down, tens of milliseconds during which a dead server's port would
/// still complete handshakes, and a balancer would send requests into
/// that backlog instead of retrying another replica. Racy by nature, so
/// many kills, each with calls in flight (counted: the probe that the
/// race was on).
#[test]
fn a_killed_server_refuses_connections_once_reaped() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    require_jail!();
    let f = project();
    let st = state_env(&f);
    let mut late = Vec::new();
    for round in 0..20 {
        let mut s = Served::start(&f.root, &envs(&st), &["--max-concurrent", "16"]);
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..24)
            .map(|_| {
                let (addr, stop, answered) = (s.addr.clone(), stop.clone(), answered.clone());
                std::thread::spawn(move || {
                    let body = r#"{"w":"x"}"#;
                    let req = format!(
                        "POST /api/v1/tools/echo/invoke HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    while !stop.load(Ordering::SeqCst) {
                        let Ok(mut c) = TcpStream::connect(&addr) else {
                            std::thread::sleep(Duration::from_millis(1));
                            continue;
                        };
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let _ = c.write_all(req.as_bytes());
                        let mut raw = Vec::new();
                        let _ = c.read_to_end(&mut raw);
                        if raw.starts_with(b"HTTP/1.1 200") {
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        // Calls in flight (some being set up) when the server dies.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while answered.load(Ordering::SeqCst) < 24 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            answered.load(Ordering::SeqCst) >= 24,
            "round {round}: the calls did not run: {}",
            s.stderr()
        );
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        if TcpStream::connect(&s.addr).is_ok() {
            late.push(round);
        }
        stop.store(true, Ordering::SeqCst);
        for c in clients {
            c.join().unwrap();
        }
    }
    // A child cloned just before the kill and not yet scheduled still
    // holds the table until its first step runs (on a loaded machine,
    // rarely, a round); without the step about half the rounds are late.
    assert!(
        late.len() <= 2,
        "the killed server's port still accepted a connection after it was reaped, in rounds {late:?} of 20"
    );
}
