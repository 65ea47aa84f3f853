//! Drives the real servers for robustness tests: `glovebox serve` over raw
//! HTTP/1.1 (so malformed and slow requests can be sent as they are) and
//! `glovebox mcp` over stdio (raw lines in, JSON-RPC replies out).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::bin;

/// How long any single answer may take before a test calls it a hang.
pub const WAIT: Duration = Duration::from_secs(60);

/// `glovebox serve --listen 127.0.0.1:0 EXTRA…` with its stderr collected.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Served {
    pub fn start(root: &Path, envs: &[(&str, &str)], extra: &[&str]) -> Served {
        Served::start_to(root, envs, extra, Stdio::null())
    }

    /// [`Served::start`] with its stdout sent to `stdout`.
    pub fn start_to(root: &Path, envs: &[(&str, &str)], extra: &[&str], stdout: Stdio) -> Served {
        Served::start_command(Command::new(bin()), root, envs, extra, stdout)
    }

    /// [`Served::start`] under an open-file limit of `open_files` (soft
    /// and hard, `prlimit`), which binds the server itself (same pid).
    pub fn start_with_open_files(
        root: &Path,
        envs: &[(&str, &str)],
        extra: &[&str],
        open_files: u64,
    ) -> Served {
        let mut c = Command::new("prlimit");
        c.arg(format!("--nofile={open_files}:{open_files}"))
            .arg("--")
            .arg(bin());
        Served::start_command(c, root, envs, extra, Stdio::null())
    }

    /// `c` (the server's binary, or a program that execs it with the
    /// arguments that follow) with the serve arguments.
    pub fn start_command(
        mut c: Command,
        root: &Path,
        envs: &[(&str, &str)],
        extra: &[&str],
        stdout: Stdio,
    ) -> Served {
        c.args(["--root", root.to_str().unwrap(), "serve"]);
        if !extra.contains(&"--listen") {
            c.args(["--listen", "127.0.0.1:0"]);
        }
        c.args(extra)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .env_remove("GLOVEBOX_API_TOKEN");
        for (k, v) in envs {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("start glovebox serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("glovebox serve exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("glovebox: serving the HTTP API at http://") {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Served { child, addr, log }
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        request(&self.addr, method, path, headers, body)
    }

    pub fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &[], b"")
    }

    pub fn post(&self, path: &str, body: &Value) -> Answer {
        self.request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
    }

    /// Asserts the server still answers: `GET /healthz` is 200.
    pub fn assert_alive(&self) {
        let h = self.request("GET", "/healthz", &[], b"");
        assert_eq!(h.status, 200, "the server stopped answering: {h:?}");
        assert!(
            self.child_alive(),
            "the server exited: {:?}",
            self.log.lock().unwrap()
        );
    }

    /// Sends SIGTERM (a graceful stop).
    pub fn terminate(&mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Waits (bounded) for the server to exit; its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "glovebox serve did not exit: {:?}",
                self.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn child_alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.child.id())).exists()
    }

    pub fn stderr(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// An MCP session over `/mcp`: initialize + initialized; the session id.
    pub fn mcp_session(&self, protocol: &str) -> String {
        let init = self.mcp(
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": protocol, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        assert_eq!(init.status, 200, "{init:?}");
        let session = init.header("mcp-session-id").expect("a session id");
        self.mcp(
            Some(&session),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        session
    }

    /// One JSON-RPC message to `/mcp`.
    pub fn mcp(&self, session: Option<&str>, msg: &Value) -> Answer {
        self.mcp_raw(session, msg.to_string().as_bytes())
    }

    pub fn mcp_raw(&self, session: Option<&str>, body: &[u8]) -> Answer {
        let mut h = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = session {
            h.push(("Mcp-Session-Id", s));
        }
        self.request("POST", "/mcp", &h, body)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
    pub json: Value,
}

impl Answer {
    pub fn kind(&self) -> &str {
        self.json["error"]["kind"].as_str().unwrap_or("")
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    /// The JSON-RPC message of an SSE or JSON answer that has an `id`.
    pub fn rpc(&self) -> Value {
        if self.json.is_object() {
            return self.json.clone();
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC reply in {self:?}"))
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_line = String::from_utf8_lossy(&body[..end]);
        let Ok(size) = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16)
        else {
            return out;
        };
        if size == 0 || body.len() < end + 2 + size {
            return out;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[(end + 2 + size + 2).min(body.len())..];
    }
}

/// Parses a raw HTTP/1.1 answer.
pub fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Answer {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
        json,
    }
}

/// A raw HTTP/1.1 request (Connection: close) to `addr`.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    request_to(addr, addr, method, path, headers, body)
}

/// [`request`] with `Host: host`. A `POST` without a `Content-Type` in
/// `headers` is sent as `application/json`, as every client of the API
/// sends it (the server refuses a `POST` that is not JSON); give one to
/// send another.
pub fn request_to(
    addr: &str,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if method == "POST"
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut raw_req = req.into_bytes();
    raw_req.extend_from_slice(body);
    raw_request(addr, &raw_req)
}

/// Sends `bytes` as they are and reads the answer to the end.
pub fn raw_request(addr: &str, bytes: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    // The server may answer before reading all of a large body.
    let _ = s.write_all(bytes);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_answer(&raw)
}

/// `glovebox mcp` (or `glovebox wrap`) over stdio, raw lines in, JSON
/// replies out; the notifications read while waiting are kept in `notes`.
pub struct StdioMcp {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The server's notifications seen so far.
    pub notes: Vec<Value>,
    next: u64,
}

impl StdioMcp {
    pub fn start(root: &Path, envs: &[(&str, &str)], extra: &[&str]) -> StdioMcp {
        StdioMcp::start_in(root, Path::new("."), envs, extra)
    }

    /// [`StdioMcp::start`] with the server's working directory `cwd`.
    pub fn start_in(root: &Path, cwd: &Path, envs: &[(&str, &str)], extra: &[&str]) -> StdioMcp {
        let mut c = Command::new(bin());
        c.current_dir(cwd)
            .arg("--root")
            .arg(root)
            .arg("mcp")
            .args(extra);
        for (k, v) in envs {
            c.env(k, v);
        }
        StdioMcp::over(c)
    }

    /// Runs `c` (a glovebox command speaking MCP on stdio) and initializes.
    pub fn over(mut c: Command) -> StdioMcp {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().expect("start glovebox");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = StdioMcp {
            child,
            stdin: Some(stdin),
            lines,
            notes: Vec::new(),
            // Ids of [`StdioMcp::request`], apart from a test's own.
            next: 1 << 32,
        };
        s.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "servekit", "version": "0"}}}),
        );
        let reply = s.reply();
        assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to server");
        stdin.flush().expect("flush to server");
    }

    pub fn send(&mut self, msg: &Value) {
        let mut line = msg.to_string();
        line.push('\n');
        self.write_raw(line.as_bytes());
    }

    /// The next message within `limit`; a notification is also kept.
    fn message(&mut self, limit: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(limit).ok()?;
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("server wrote a non-JSON line ({e}): {line:?}"));
        if v.get("method").is_some() && v.get("id").is_none() {
            self.notes.push(v.clone());
        }
        Some(v)
    }

    /// The next message with an `id` and no `method` (a reply).
    pub fn reply(&mut self) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .message(left)
                .unwrap_or_else(|| panic!("no reply from the server within {WAIT:?}"));
            if v.get("id").is_some() && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// A `tools/call` with id `id`, waited for.
    pub fn call(&mut self, id: u64, name: &str, args: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
        let r = self.reply();
        assert_eq!(r["id"], json!(id), "{r}");
        r
    }

    /// A request with an id of its own, waited for (replies to others are
    /// passed over).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let r = self.reply();
            if r["id"] == json!(id) {
                return r;
            }
        }
    }

    /// Sends a `tools/call` of `name` without waiting; returns its id.
    pub fn post(&mut self, name: &str, args: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
        id
    }

    /// The replies to `ids` (sent by [`StdioMcp::post`]), in that order,
    /// waited for together (replies to others are passed over).
    pub fn replies(&mut self, ids: &[u64]) -> Vec<Value> {
        let mut got: Vec<Option<Value>> = vec![None; ids.len()];
        while got.iter().any(Option::is_none) {
            let r = self.reply();
            if let Some(i) = ids.iter().position(|id| r["id"] == json!(id)) {
                got[i] = Some(r);
            }
        }
        got.into_iter().map(Option::unwrap).collect()
    }

    /// The `result` of a `tools/call` of `name`.
    pub fn call_tool(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))["result"].clone()
    }

    /// The tools listed.
    pub fn tools(&mut self) -> Vec<Value> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"].as_array().unwrap().clone()
    }

    /// Waits up to `limit` for a notification of `method`.
    pub fn wait_note(&mut self, method: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.notes.iter().any(|n| n["method"] == method) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.message(left.min(Duration::from_millis(100)));
        }
        true
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_none()
    }

    /// Closes stdin and waits (30 s at most) for the process to end.
    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "glovebox did not end when its client closed stdin"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `error` object of a failed tool result (`isError: true`), read from
/// its structured content or its text.
pub fn tool_error(result: &Value) -> Value {
    assert_eq!(result["isError"], json!(true), "{result}");
    if let Some(e) = result["structuredContent"].get("error") {
        return e.clone();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    v.get("error").cloned().unwrap_or(v)
}
