//! The MCP server with a real client nobody here wrote: the official
//! Python `mcp` package (installed by tests/mcp/setup.sh into
//! target/mcp-venv) drives `glovebox mcp` over stdio and `glovebox serve`
//! over Streamable HTTP through the scenarios of tests/mcp/client.py:
//! paginated tools/list, calls of command and python tools
//! (structuredContent, isError for bad input, approval_required, unknown
//! tool), glee_tool_create and list_changed, cancellation that kills the
//! call's processes, progress. Over HTTP also: a cross-origin request is
//! refused, a token is required when set.
//!
//! Without the venv (no network) the tests skip with the reason, and fail
//! under `GLOVEBOX_REQUIRE_KERNEL=1` (CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use runkit::*;
use serde_json::{json, Value};

/// Filler tools, so tools/list needs more than one page of 50.
const FILLERS: usize = 60;
/// The tools of [`project`] that are not fillers, plus the three glee_*.
const NAMED: usize = 8 + 3;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python (the official MCP client), or `None` (skip).
fn python() -> Option<PathBuf> {
    venv_program(
        "tests/mcp/setup.sh",
        "GLOVEBOX_MCP_VENV",
        "mcp-venv",
        "python",
    )
}

fn json_tool(name: &str, inputs: Value, command: Value, output_schema: Value) -> Value {
    let mut m = command_tool(name, inputs, command, read_root());
    m["outputs"] = json!({"format": "json", "schema": output_schema});
    m["exec"]["command"]["stdout"] = json!({"format": "json"});
    m
}

/// A project with every kind of tool the scenarios call, and fillers.
fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&json_tool(
        "echo_json",
        json!({"type": "object", "additionalProperties": false, "required": ["msg"],
               "properties": {"msg": {"type": "string"}}}),
        json!({"entrypoint": "python3", "args": ["-c",
            "import json, sys; print(json.dumps({'msg': sys.argv[1], 'n': len(sys.argv[1])}))",
            "${msg}"]}),
        json!({"type": "object", "properties": {"msg": {"type": "string"}, "n": {"type": "integer"}}}),
    ));
    f.file(
        "greet.py",
        "def greet(name):\n    return {'greeting': 'hello ' + name}\n",
    );
    let mut greet = python_tool(
        "greet",
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
        json!({"module": "greet", "function": "greet", "args": ["${name}"]}),
        read_root(),
    );
    greet["description"] = json!("says hello");
    f.tool(&greet);
    f.tool(&command_tool(
        "shout",
        schema(json!({"word": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["-c", "import sys; print(sys.argv[1] + '!')", "${word}"]}),
        read_root(),
    ));
    f.tool(&command_tool(
        "writer",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        write_root(),
    ));
    f.tool(&command_tool(
        "failer",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c", "import sys; sys.exit('boom')"]}),
        read_root(),
    ));
    f.tool(&command_tool(
        "nap",
        schema(json!({})),
        json!({"entrypoint": "sleep", "args": ["1"]}),
        read_root(),
    ));
    // Two processes carrying the marker: the first and a child of it.
    f.tool(&command_tool(
        "slow",
        schema(json!({"marker": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["-c",
            "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]]); time.sleep(60)",
            "${marker}"], "timeout_ms": 60000}),
        read_root(),
    ));
    let mut gated = command_tool(
        "gated",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        read_root(),
    );
    gated["approval"] = json!({"required": true, "reason": "test"});
    f.tool(&gated);
    // Left invalid on purpose: listed nowhere, and it must not break the rest.
    f.file(
        ".glee/tools/broken/tool.yml",
        "name: broken\nkind: nonsense\n",
    );
    for i in 0..FILLERS {
        f.tool(&command_tool(
            &format!("filler_{i:02}"),
            schema(json!({})),
            json!({"entrypoint": "true", "args": []}),
            read_root(),
        ));
    }
    f
}

/// Runs one client scenario; panics with its output unless it passed.
fn scenario(py: &Path, transport: &[String], name: &str, arg: Option<&str>) {
    let mut c = Command::new(py);
    c.arg(manifest_dir().join("tests/mcp/client.py"))
        .args(transport)
        .arg(name);
    if let Some(a) = arg {
        c.arg(a);
    }
    let out = c.stdin(Stdio::null()).output().expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("SCENARIO-OK {name}")),
        "scenario {name} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

fn stdio(f: &Fixture) -> Vec<String> {
    vec![
        "--transport".into(),
        "stdio".into(),
        "--bin".into(),
        bin().to_str().unwrap().into(),
        "--root".into(),
        f.root.to_str().unwrap().into(),
    ]
}

/// A running `glovebox serve`, killed on drop.
struct Served {
    child: Child,
    addr: String,
    root: PathBuf,
}

impl Served {
    fn start(f: &Fixture, listen: &str, token: Option<&str>) -> Served {
        let mut c = Command::new(bin());
        c.args([
            "--root",
            f.root.to_str().unwrap(),
            "serve",
            "--listen",
            listen,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("GLOVEBOX_API_TOKEN");
        if let Some(t) = token {
            c.env("GLOVEBOX_API_TOKEN", t);
        }
        let mut child = c.spawn().expect("start glovebox serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("glovebox serve exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("glovebox: serving MCP at http://") {
                break rest.trim_end_matches("/mcp").to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Served {
            child,
            addr,
            root: f.root.clone(),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn transport(&self, token: Option<&str>) -> Vec<String> {
        let mut v = vec![
            "--transport".into(),
            "http".into(),
            "--url".into(),
            self.url(),
            "--root".into(),
            self.root.to_str().unwrap().into(),
        ];
        if let Some(t) = token {
            v.extend(["--token".into(), t.into()]);
        }
        v
    }

    /// The status line of a bare `initialize` POST with extra headers.
    fn post_status(&self, headers: &[(&str, &str)]) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = vec![0u8; 512];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn total_tools() -> String {
    // + the built-ins every Glee project has (read_file, write_file, list_files).
    (FILLERS + NAMED + 3).to_string()
}

#[test]
fn stdio_lists_tools_in_pages() {
    let Some(py) = python() else { return };
    let f = project();
    scenario(&py, &stdio(&f), "list", Some(&total_tools()));
}

#[test]
fn stdio_calls_tools() {
    if !jail_available() {
        return;
    }
    let Some(py) = python() else { return };
    let f = project();
    scenario(&py, &stdio(&f), "call", None);
}

#[test]
fn stdio_create_notifies_list_changed() {
    if !jail_available() {
        return;
    }
    let Some(py) = python() else { return };
    let f = project();
    scenario(&py, &stdio(&f), "create", None);
}

#[test]
fn stdio_cancel_kills_the_call() {
    if !jail_available() {
        return;
    }
    let Some(py) = python() else { return };
    let f = project();
    let m = marker("mcp-cancel");
    scenario(&py, &stdio(&f), "cancel", Some(&m));
    assert!(pids_with(&m).is_empty(), "survivors: {:?}", pids_with(&m));
}

#[test]
fn http_lists_and_calls_tools() {
    if !jail_available() {
        return;
    }
    let Some(py) = python() else { return };
    let f = project();
    let s = Served::start(&f, "127.0.0.1:0", None);
    scenario(&py, &s.transport(None), "list", Some(&total_tools()));
    scenario(&py, &s.transport(None), "call", None);
}

#[test]
fn http_create_and_cancel() {
    if !jail_available() {
        return;
    }
    let Some(py) = python() else { return };
    let f = project();
    let s = Served::start(&f, "127.0.0.1:0", None);
    scenario(&py, &s.transport(None), "create", None);
    let m = marker("mcp-http-cancel");
    scenario(&py, &s.transport(None), "cancel", Some(&m));
    assert!(pids_with(&m).is_empty(), "survivors: {:?}", pids_with(&m));
}

#[test]
fn http_refuses_cross_origin_requests() {
    let f = project();
    let s = Served::start(&f, "127.0.0.1:0", None);
    let refused = s.post_status(&[("Origin", "https://evil.example")]);
    assert!(refused.contains(" 403 "), "{refused}");
    let ok = s.post_status(&[("Origin", "http://localhost:5173")]);
    assert!(ok.contains(" 200 "), "{ok}");
    let ok = s.post_status(&[]);
    assert!(ok.contains(" 200 "), "{ok}");
}

#[test]
fn http_requires_the_token_when_set() {
    let f = project();
    let s = Served::start(&f, "127.0.0.1:0", Some("tok-123"));
    let missing = s.post_status(&[]);
    assert!(missing.contains(" 401 "), "{missing}");
    let wrong = s.post_status(&[("Authorization", "Bearer tok-124")]);
    assert!(wrong.contains(" 401 "), "{wrong}");
    let ok = s.post_status(&[("Authorization", "Bearer tok-123")]);
    assert!(ok.contains(" 200 "), "{ok}");
    if let Some(py) = python() {
        scenario(
            &py,
            &s.transport(Some("tok-123")),
            "list",
            Some(&total_tools()),
        );
    }
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let f = project();
    let out = Command::new(bin())
        .args([
            "--root",
            f.root.to_str().unwrap(),
            "serve",
            "--listen",
            "0.0.0.0:0",
        ])
        .env_remove("GLOVEBOX_API_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GLOVEBOX_API_TOKEN"), "{err}");
}
