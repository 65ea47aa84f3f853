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
//! Everything else goes to `rmcp` unchanged; its replies come back through
//! [`Screen::replied`], which frees their ids.

use std::collections::HashSet;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};

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

/// The ids of the client's requests in flight.
#[derive(Debug, Default)]
pub struct Screen {
    in_flight: HashSet<String>,
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

impl Screen {
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
                        if !self.in_flight.insert(id.to_string()) {
                            return Verdict::Answer(vec![error(
                                id,
                                -32600,
                                "invalid request: this id is already used by a request in flight; use a new id",
                            )]);
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
                                self.in_flight.remove(&id.to_string());
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
                self.in_flight.remove(&id.to_string());
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
    let id = m
        .get("id")
        .filter(|id| is_request && valid_id(id))
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
/// (`to_server`, `from_server`) through a [`Screen`], until the client
/// closes its input and the server its output.
pub async fn pump<I, O, TS, FS>(input: I, output: O, to_server: TS, from_server: FS)
where
    I: tokio::io::AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    TS: AsyncWrite + Unpin + Send + 'static,
    FS: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let screen = std::sync::Arc::new(std::sync::Mutex::new(Screen::default()));
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
                let verdict = screen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .screen(&buf);
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
