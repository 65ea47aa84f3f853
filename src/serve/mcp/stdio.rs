//! The stdio transport of `glovebox mcp`, screened: every line from the
//! client passes through [`Screen`] before `rmcp` sees it, so that no
//! message goes unanswered and no reply is lost.
//!
//! - A line that is not JSON (malformed, nested deeper than serde's 128
//!   levels) is answered with a JSON-RPC parse error (-32700, `id: null`).
//! - A line longer than [`MAX_LINE_BYTES`] is read to its end and dropped,
//!   answered with an invalid-request error (-32600, `id: null`): memory
//!   stays bounded whatever the client sends.
//! - A batch (a JSON array) is answered with one invalid-request error per
//!   element that has an id, each keeping its id (MCP has no batches).
//! - A request whose `params` is not an object (MCP has no positional
//!   params) gets an invalid-params error (-32602) with its id.
//! - A message whose envelope `rmcp` would refuse without saying which
//!   request it was (`jsonrpc` not `"2.0"`, `method` not a string, an id
//!   neither a string nor an integer) gets an invalid-request error
//!   (-32600) with its id when the id is valid, `null` otherwise; such a
//!   notification is dropped (a notification is never answered). So no
//!   error reply lacks the id it answers, and no id is left marked in
//!   flight by a reply that could not name it.
//! - A request reusing the id of a request still in flight is refused
//!   (-32600, with that id); the first one's reply is not lost.
//!
//! - Requests in flight are bounded, so a client that sends faster than
//!   it reads costs bounded memory: past [`Screen::bound`] calls (tool
//!   calls) or other requests awaiting their answers, one more of that
//!   kind is answered at once as busy — a tool call with the `busy`
//!   `resource_limit` result the call bound gives, any other request with
//!   a JSON-RPC error (-32000, `data.busy`). The answers go out in order
//!   and the client's lines are read only as fast as they are written.
//!
//! Everything else goes to `rmcp` unchanged; its replies come back through
//! [`Screen::replied`], which frees their ids.

use std::collections::HashMap;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::serve::call::{self, CallLimits};

/// Longest line read from the client: 16 MiB.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What to do with one line from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Pass it to the server.
    Forward,
    /// Answer these errors instead.
    Answer(Vec<Value>),
    /// Nothing to do (a blank line).
    Skip,
}

/// The ids of the client's requests in flight (each marked whether it is
/// a tool call), under the bound of [`Screen::bound`].
#[derive(Debug, Default)]
pub struct Screen {
    in_flight: HashMap<String, bool>,
    calls: usize,
    limits: CallLimits,
    /// The client's name, from `initialize` (for the audit `caller`).
    client: Option<String>,
    /// Tool calls answered busy here, not yet audited.
    refused: Vec<Refused>,
}

/// A tool call the screen answered busy (it never reached the server):
/// what its audit line needs.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The tool's name (the one `glee_tool` names, for a call through it).
    pub name: String,
    /// Its parameters.
    pub params: Value,
    /// The client's name, when it gave one.
    pub client: Option<String>,
}

/// What audits a [`Refused`] call (called off the pump's task).
pub type OnRefused = std::sync::Arc<dyn Fn(Refused) + Send + Sync>;

/// The fewest requests other than tool calls let in flight at once,
/// whatever the call bound (clients send a few at once after
/// `initialize`).
pub const MIN_OTHER_REQUESTS: usize = call::DEFAULT_MAX_CONCURRENT + call::DEFAULT_MAX_QUEUED;

fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

impl Screen {
    /// A screen for a server whose calls are bounded by `limits`.
    pub fn new(limits: CallLimits) -> Self {
        Screen {
            limits,
            ..Screen::default()
        }
    }

    /// How many requests of a kind (`calls`: tool calls, else any other
    /// request) may await their answers at once: as many calls as may run
    /// and wait ([`CallLimits`]); other requests as many, but never fewer
    /// than [`MIN_OTHER_REQUESTS`].
    pub fn bound(&self, calls: bool) -> usize {
        let n = self.limits.max_concurrent + self.limits.max_queued;
        if calls {
            n.max(1)
        } else {
            n.max(MIN_OTHER_REQUESTS)
        }
    }

    fn free(&mut self, id: &str) {
        if self.in_flight.remove(id) == Some(true) {
            self.calls -= 1;
        }
    }

    /// The answer to request `id` (`m`) past the bound of its kind.
    fn busy(&mut self, id: Value, m: &serde_json::Map<String, Value>, is_call: bool) -> Value {
        if is_call {
            let params = m.get("params");
            let name = params
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let args = params
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(Value::Null);
            let client = params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
                .and_then(|c| c.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| self.client.clone());
            self.refused.push(match (name, args.get("name")) {
                (super::catalog::GLEE_TOOL, Some(Value::String(inner))) => Refused {
                    name: inner.clone(),
                    params: args.get("params").cloned().unwrap_or(Value::Null),
                    client,
                },
                _ => Refused {
                    name: name.to_string(),
                    params: args,
                    client,
                },
            });
            let result = super::reply::outcome(&call::busy(name, self.limits));
            return json!({"jsonrpc": "2.0", "id": id, "result": result});
        }
        let bound = self.bound(false);
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32000,
            "message": format!("the server is busy: {bound} requests are awaiting their answers; read the answers before sending more"),
            "data": {"busy": true, "in_flight": bound},
        }})
    }

    /// The calls answered busy since the last time, for their audit lines.
    pub fn take_refused(&mut self) -> Vec<Refused> {
        std::mem::take(&mut self.refused)
    }

    /// Decides about one line (without its newline).
    pub fn screen(&mut self, line: &[u8]) -> Verdict {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Verdict::Skip;
        }
        let msg: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return Verdict::Answer(vec![error(
                    Value::Null,
                    -32700,
                    format!("parse error: the line is not valid JSON ({e})"),
                )])
            }
        };
        match msg {
            Value::Array(items) => {
                let mut out: Vec<Value> = items
                    .iter()
                    .filter_map(|m| m.get("id").cloned())
                    .map(|id| {
                        error(
                            id,
                            -32600,
                            "batches are not supported: send one message per line",
                        )
                    })
                    .collect();
                if out.is_empty() {
                    out.push(error(
                        Value::Null,
                        -32600,
                        "batches are not supported: send one message per line",
                    ));
                }
                Verdict::Answer(out)
            }
            Value::Object(m) => {
                let id = m.get("id").cloned();
                let is_request = m.get("method").is_some();
                if let Some(answer) = refusal(&m) {
                    return match (id, is_request) {
                        // A notification is never answered.
                        (None, true) => Verdict::Skip,
                        _ => Verdict::Answer(vec![answer]),
                    };
                }
                match (id, is_request) {
                    (Some(id), true) => {
                        let key = id.to_string();
                        if self.in_flight.contains_key(&key) {
                            return Verdict::Answer(vec![error(
                                id,
                                -32600,
                                "invalid request: this id is already used by a request in flight; use a new id",
                            )]);
                        }
                        let method = m.get("method").and_then(Value::as_str);
                        if method == Some("initialize") {
                            self.client = m
                                .get("params")
                                .and_then(|p| p.get("clientInfo"))
                                .and_then(|c| c.get("name"))
                                .and_then(Value::as_str)
                                .map(str::to_string);
                        }
                        let is_call = method == Some("tools/call");
                        let others = self.in_flight.len() - self.calls;
                        let taken = if is_call { self.calls } else { others };
                        if taken >= self.bound(is_call) {
                            return Verdict::Answer(vec![self.busy(id, &m, is_call)]);
                        }
                        self.in_flight.insert(key, is_call);
                        if is_call {
                            self.calls += 1;
                        }
                        Verdict::Forward
                    }
                    (None, true) => {
                        // A cancelled request may get no reply: its id is
                        // free again.
                        if m.get("method").and_then(Value::as_str)
                            == Some("notifications/cancelled")
                        {
                            if let Some(id) = m.get("params").and_then(|p| p.get("requestId")) {
                                self.free(&id.to_string());
                            }
                        }
                        Verdict::Forward
                    }
                    // A response to one of the server's requests.
                    (Some(_), false) => Verdict::Forward,
                    (None, false) => Verdict::Answer(vec![error(
                        Value::Null,
                        -32600,
                        "invalid request: neither a request, a notification nor a response",
                    )]),
                }
            }
            _ => Verdict::Answer(vec![error(
                Value::Null,
                -32600,
                "invalid request: a message is a JSON object",
            )]),
        }
    }

    /// Notes a line the server wrote: a reply frees its id.
    pub fn replied(&mut self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if v.get("method").is_none() {
            if let Some(id) = v.get("id") {
                self.free(&id.to_string());
            }
        }
    }
}

/// Whether `id` is one `rmcp` reads back (a string or an integer that fits
/// an `i64`): only such an id can name the request in a reply.
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some()
}

/// What is wrong with a message's JSON-RPC envelope, if anything: the
/// version, the method's type, the id's type.
fn envelope_problem(m: &serde_json::Map<String, Value>) -> Option<&'static str> {
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some("`jsonrpc` must be \"2.0\"");
    }
    if m.get("method").is_some_and(|v| !v.is_string()) {
        return Some("`method` must be a string");
    }
    if m.get("id").is_some_and(|id| !valid_id(id)) {
        return Some("`id` must be a string or an integer");
    }
    if !m.contains_key("method") && !m.contains_key("id") {
        return Some("neither a request, a notification nor a response");
    }
    if !m.contains_key("method") && !m.contains_key("result") && !m.contains_key("error") {
        return Some("a message with an `id` needs a `method` (a request) or a `result` or `error` (a response)");
    }
    None
}

/// The error answering a message (a JSON object) that `rmcp` would refuse
/// without naming the request — a bad envelope (`jsonrpc`, `method` or
/// `id` of the wrong kind: -32600) or `params` that is not an object
/// (-32602) — or `None` for a message to pass on. The answer carries the request's id when it has a
/// valid one (a response's id is the server's: `null`). Shared by stdio
/// and `POST /mcp`.
pub fn refusal(m: &serde_json::Map<String, Value>) -> Option<Value> {
    let is_request = m.get("method").is_some();
    // A message with an id and neither a method nor a result is a request
    // missing its method: its id is the client's.
    let is_response = m.contains_key("result") || m.contains_key("error");
    let id = m
        .get("id")
        .filter(|id| (is_request || !is_response) && valid_id(id))
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(problem) = envelope_problem(m) {
        return Some(error(id, -32600, format!("invalid request: {problem}")));
    }
    if is_request
        && m.get("params")
            .is_some_and(|p| !p.is_null() && !p.is_object())
    {
        return Some(error(
            id,
            -32602,
            "invalid params: `params` must be an object",
        ));
    }
    None
}

/// Reads one line of at most [`MAX_LINE_BYTES`] into `buf` (without the
/// newline). `Ok(None)` at the end of input; `Ok(Some(false))` for a line
/// that was too long (read to its end and dropped).
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                None
            } else {
                Some(!too_long)
            });
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(take + usize::from(done));
        if done {
            return Ok(Some(!too_long));
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(w: &mut W, line: &[u8]) -> std::io::Result<()> {
    w.write_all(line).await?;
    w.write_all(b"\n").await?;
    w.flush().await
}

/// Carries messages between the client (`input`, `output`) and the server
/// (`to_server`, `from_server`) through a [`Screen`] for calls bounded by
/// `limits`, until the client closes its input and the server its output.
/// `input_closed` is cancelled as soon as the client's input ends.
pub async fn pump<I, O, TS, FS>(
    input: I,
    output: O,
    to_server: TS,
    from_server: FS,
    limits: CallLimits,
    input_closed: CancellationToken,
    on_refused: Option<OnRefused>,
) where
    I: tokio::io::AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    TS: AsyncWrite + Unpin + Send + 'static,
    FS: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let screen = std::sync::Arc::new(std::sync::Mutex::new(Screen::new(limits)));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    // One writer to the client.
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = rx.recv().await {
            if write_line(&mut output, &line).await.is_err() {
                break;
            }
        }
    });
    // The server's lines.
    let from = {
        let screen = screen.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(from_server);
            let mut buf = Vec::new();
            while let Ok(Some(_)) = read_line(&mut r, &mut buf).await {
                screen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .replied(&buf);
                if tx.send(std::mem::take(&mut buf)).await.is_err() {
                    break;
                }
            }
        })
    };
    // The client's lines.
    let mut to_server = to_server;
    let mut r = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut r, &mut buf).await {
            Ok(None) | Err(_) => break,
            Ok(Some(false)) => {
                let e = error(
                    Value::Null,
                    -32600,
                    format!("invalid request: the message is longer than {MAX_LINE_BYTES} bytes"),
                );
                if tx.send(e.to_string().into_bytes()).await.is_err() {
                    break;
                }
            }
            Ok(Some(true)) => {
                let (verdict, refused) = {
                    let mut screen = screen.lock().unwrap_or_else(|p| p.into_inner());
                    (screen.screen(&buf), screen.take_refused())
                };
                if let Some(audit) = &on_refused {
                    for r in refused {
                        audit(r);
                    }
                }
                match verdict {
                    Verdict::Skip => {}
                    Verdict::Forward => {
                        if write_line(&mut to_server, &buf).await.is_err() {
                            break;
                        }
                    }
                    Verdict::Answer(errors) => {
                        for e in errors {
                            if tx.send(e.to_string().into_bytes()).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
    // End of input: the server sees it, finishes, closes its output.
    input_closed.cancel();
    let _ = to_server.shutdown().await;
    drop(to_server);
    drop(tx);
    let _ = from.await;
    let _ = writer.await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn answer(v: Verdict) -> Vec<Value> {
        match v {
            Verdict::Answer(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_lines_are_answered() {
        let mut s = Screen::default();
        let a = answer(s.screen(b"{not json"));
        assert_eq!(a[0]["error"]["code"], -32700);
        assert_eq!(a[0]["id"], Value::Null);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let a = answer(s.screen(deep.as_bytes()));
        assert_eq!(a[0]["error"]["code"], -32700);
        let a = answer(s.screen(br#"[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":"x","method":"ping"}]"#));
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0]["id"].clone(), a[1]["id"].clone()),
            (json!(7), json!("x"))
        );
        let a = answer(s.screen(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":3}"#));
        assert_eq!(
            (a[0]["id"].clone(), a[0]["error"]["code"].clone()),
            (json!(9), json!(-32602))
        );
        assert_eq!(s.screen(b"  "), Verdict::Skip);
    }

    #[test]
    fn a_bad_envelope_is_answered_with_its_id_and_frees_nothing() {
        let mut s = Screen::default();
        for (line, id, code) in [
            (
                &br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}"#[..],
                json!(7),
                -32602,
            ),
            (
                br#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":[]}"#,
                json!("a"),
                -32602,
            ),
            (
                br#"{"jsonrpc":"1.0","id":8,"method":"ping"}"#,
                json!(8),
                -32600,
            ),
            (br#"{"id":9,"method":"ping"}"#, json!(9), -32600),
            (
                br#"{"jsonrpc":"2.0","id":10,"method":5}"#,
                json!(10),
                -32600,
            ),
            (
                br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
                Value::Null,
                -32600,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                Value::Null,
                -32600,
            ),
            (
                br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                Value::Null,
                -32600,
            ),
            (
                br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
                Value::Null,
                -32600,
            ),
        ] {
            let a = answer(s.screen(line));
            assert_eq!(
                (a.len(), a[0]["id"].clone(), a[0]["error"]["code"].clone()),
                (1, id, json!(code)),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // None of those ids is left in flight: each can be used at once.
        for id in ["7", "\"a\"", "8", "9", "10"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert_eq!(s.screen(line.as_bytes()), Verdict::Forward, "{line}");
        }
        // A notification with a bad envelope gets no answer.
        assert_eq!(
            s.screen(br#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#),
            Verdict::Skip
        );
        assert_eq!(
            s.screen(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[]}"#),
            Verdict::Skip
        );
    }

    #[test]
    fn an_id_without_a_method_or_result_is_an_invalid_request_with_its_id() {
        let mut s = Screen::default();
        let a = answer(s.screen(br#"{"jsonrpc":"2.0","id":4}"#));
        assert_eq!(
            (a[0]["id"].clone(), a[0]["error"]["code"].clone()),
            (json!(4), json!(-32600))
        );
        // A response keeps going to the server.
        assert_eq!(
            s.screen(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#),
            Verdict::Forward
        );
    }

    #[test]
    fn requests_in_flight_are_bounded_per_kind() {
        let limits = CallLimits {
            max_concurrent: 1,
            max_queued: 1,
        };
        let mut s = Screen::new(limits);
        let call = |id: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo"}}}}"#
            )
        };
        let ping = |id: usize| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        assert_eq!(s.screen(call(1).as_bytes()), Verdict::Forward);
        assert_eq!(s.screen(call(2).as_bytes()), Verdict::Forward);
        // A third call: the busy result of the call bound, with its id.
        let a = answer(s.screen(call(3).as_bytes()));
        assert_eq!(a[0]["id"], 3);
        assert_eq!(a[0]["result"]["isError"], true, "{}", a[0]);
        assert!(a[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("busy"));
        // Other requests have their own bound, never below the minimum.
        let bound = s.bound(false);
        assert_eq!(bound, MIN_OTHER_REQUESTS);
        for id in 100..100 + bound {
            assert_eq!(s.screen(ping(id).as_bytes()), Verdict::Forward, "{id}");
        }
        let a = answer(s.screen(ping(1000).as_bytes()));
        assert_eq!(
            (
                a[0]["id"].clone(),
                a[0]["error"]["code"].clone(),
                a[0]["error"]["data"]["busy"].clone()
            ),
            (json!(1000), json!(-32000), json!(true))
        );
        // An answer frees a place of its kind.
        s.replied(br#"{"jsonrpc":"2.0","id":100,"result":{}}"#);
        assert_eq!(s.screen(ping(1001).as_bytes()), Verdict::Forward);
        s.replied(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(s.screen(call(4).as_bytes()), Verdict::Forward);
    }

    #[test]
    fn an_id_in_flight_cannot_be_reused_until_answered() {
        let mut s = Screen::default();
        let req = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#;
        assert_eq!(s.screen(req), Verdict::Forward);
        let a = answer(s.screen(req));
        assert_eq!(a[0]["id"], 1);
        s.replied(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(s.screen(req), Verdict::Forward);
        // A server request with the same id does not free it.
        s.replied(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(matches!(s.screen(req), Verdict::Answer(_)));
        // Cancelling it does (a cancelled request may get no reply).
        assert_eq!(
            s.screen(
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#
            ),
            Verdict::Forward
        );
        assert_eq!(s.screen(req), Verdict::Forward);
    }
}
