//! glovebox's side of an MCP server's stdio: JSON-RPC 2.0, one message a
//! line (the MCP stdio transport), over the socket that is the jailed
//! server's stdin and stdout.
//!
//! Bounded everywhere the server decides: a line longer than
//! [`MAX_LINE`] ends the connection, requests wait at most their deadline,
//! and the server's own requests get a fixed answer (`ping` an empty
//! result, anything else "method not found": glovebox offers the server
//! no sampling, roots or elicitation). Requests are multiplexed by id, so
//! calls from many threads share one connection.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::jail::Cancel;

/// Longest message the server may send, in bytes (a tool list with its
/// schemas, a result): past it the connection is closed.
pub const MAX_LINE: usize = 16 << 20;

/// How often a waiting request looks at its cancel token.
const TICK: Duration = Duration::from_millis(25);

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The connection is gone (the server ended, or broke the protocol).
    #[error("the connection to the server is closed ({why})")]
    Closed { why: String },
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {code}: {message}")]
    Rpc { code: i64, message: String },
    /// No answer before the deadline (the request was cancelled).
    #[error("no answer within {ms} ms")]
    Timeout { ms: u64 },
    /// The caller cancelled the request.
    #[error("the request was cancelled")]
    Cancelled,
    /// A remote server's request failed (refused by the guard, an HTTP
    /// error status, an unreadable answer).
    #[error("{message}")]
    Http {
        kind: crate::kind::ErrorKind,
        message: String,
    },
}

type Reply = Result<Value, ClientError>;

struct Shared {
    pending: Mutex<HashMap<u64, mpsc::Sender<Reply>>>,
    closed: Mutex<Option<String>>,
    list_changed: AtomicBool,
    on_change: Box<dyn Fn() + Send + Sync>,
}

impl Shared {
    fn close(&self, why: String) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        if closed.is_none() {
            *closed = Some(why.clone());
        }
        drop(closed);
        let pending: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(ClientError::Closed { why: why.clone() }));
        }
    }
}

/// One connection to a server.
pub struct Connection {
    writer: Arc<Mutex<UnixStream>>,
    shared: Arc<Shared>,
    next: AtomicU64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Speaks over `stream`; `on_change` runs (on the reader thread) when
    /// the server says its tool list changed.
    pub fn new(
        stream: UnixStream,
        on_change: Box<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Connection> {
        let reader = stream.try_clone()?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            list_changed: AtomicBool::new(false),
            on_change,
        });
        let writer = Arc::new(Mutex::new(stream));
        let answer = writer.clone();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("glovebox-mcp-rd".into())
            .spawn(move || read_loop(reader, &answer, &s))?;
        Ok(Connection {
            writer,
            shared,
            next: AtomicU64::new(1),
        })
    }

    /// Why the connection is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        self.shared
            .closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the server said its tool list changed since the last call
    /// of this (which clears it).
    pub fn take_list_changed(&self) -> bool {
        self.shared.list_changed.swap(false, Ordering::SeqCst)
    }

    /// Ends the connection (the server sees end of file).
    pub fn shutdown(&self) {
        let w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = w.shutdown(std::net::Shutdown::Both);
        drop(w);
        self.shared.close("glovebox closed it".into());
    }

    fn send(&self, message: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        let mut w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        w.write_all(&line).map_err(|e| {
            let why = format!("writing to it failed: {e}");
            self.shared.close(why.clone());
            ClientError::Closed { why }
        })
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request and waits for its result, at most `limit`, or until
    /// `cancel` fires; either sends `notifications/cancelled`.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
        cancel: Option<&Cancel>,
    ) -> Result<Value, ClientError> {
        if let Some(why) = self.closed() {
            return Err(ClientError::Closed { why });
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        // Closed between the check and the insert: nobody would answer.
        if let Some(why) = self.closed() {
            self.forget(id);
            return Err(ClientError::Closed { why });
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + limit;
        loop {
            let now = Instant::now();
            if now >= deadline {
                self.abandon(id, "timeout");
                return Err(ClientError::Timeout {
                    ms: limit.as_millis() as u64,
                });
            }
            if cancel.is_some_and(Cancel::is_cancelled) {
                self.abandon(id, "cancelled by the client");
                return Err(ClientError::Cancelled);
            }
            match rx.recv_timeout(TICK.min(deadline - now)) {
                Ok(reply) => return reply,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ClientError::Closed {
                        why: self.closed().unwrap_or_else(|| "it ended".into()),
                    })
                }
            }
        }
    }

    fn forget(&self, id: u64) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    fn abandon(&self, id: u64, reason: &str) {
        self.forget(id);
        let _ = self.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": reason}),
        );
    }
}

/// A server's connection: its stdio in the jail, or a remote server.
#[derive(Debug)]
pub enum Link {
    /// A jailed server's stdin and stdout.
    Stdio(Connection),
    /// A remote server over Streamable HTTP.
    Remote(Box<super::remote::Remote>),
}

impl Link {
    /// Why the link is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        match self {
            Link::Stdio(c) => c.closed(),
            Link::Remote(r) => r.closed(),
        }
    }

    /// Whether the server said its tool list changed (clears it).
    pub fn take_list_changed(&self) -> bool {
        match self {
            Link::Stdio(c) => c.take_list_changed(),
            Link::Remote(r) => r.take_list_changed(),
        }
    }

    /// Ends the link.
    pub fn shutdown(&self) {
        match self {
            Link::Stdio(c) => c.shutdown(),
            Link::Remote(r) => r.shutdown(),
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        match self {
            Link::Stdio(c) => c.notify(method, params),
            Link::Remote(r) => r.notify(method, params),
        }
    }

    /// Sends a request and waits for its result (see
    /// [`Connection::request`]).
    pub fn request(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
        cancel: Option<&Cancel>,
    ) -> Result<Value, ClientError> {
        match self {
            Link::Stdio(c) => c.request(method, params, limit, cancel),
            Link::Remote(r) => r.request(method, params, limit, cancel),
        }
    }
}

/// Reads messages until end of file, an error or an overlong line.
fn read_loop(stream: UnixStream, answer: &Mutex<UnixStream>, shared: &Shared) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let why = loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_LINE as u64 + 1);
        match limited.read_until(b'\n', &mut line) {
            Ok(0) => break "the server ended (end of file on its stdout)".to_string(),
            Ok(_) if line.len() > MAX_LINE => {
                break format!("the server sent a message longer than {MAX_LINE} bytes")
            }
            Ok(_) => {}
            Err(e) => break format!("reading from it failed: {e}"),
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(text) else {
            // Servers print stray lines; MCP says stdout is messages only,
            // so a line that is not one is dropped.
            continue;
        };
        dispatch(message, answer, shared);
    };
    shared.close(why);
}

fn dispatch(message: Value, answer: &Mutex<UnixStream>, shared: &Shared) {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").cloned();
    match (method, id) {
        // A response to one of ours.
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else { return };
            let tx = shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            let Some(tx) = tx else { return };
            let reply = match (message.get("result"), message.get("error")) {
                (Some(r), _) => Ok(r.clone()),
                (None, Some(e)) => Err(ClientError::Rpc {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .chars()
                        .take(4096)
                        .collect(),
                }),
                (None, None) => Err(ClientError::Rpc {
                    code: 0,
                    message: "a response with neither result nor error".into(),
                }),
            };
            let _ = tx.send(reply);
        }
        // A request of the server's.
        (Some(method), Some(id)) => {
            let reply = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "glovebox offers MCP servers no client features"}})
            };
            let mut line = serde_json::to_vec(&reply).unwrap_or_default();
            line.push(b'\n');
            // Through the writer's lock: a line is never cut by another.
            let mut w = answer.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = w.write_all(&line);
        }
        (Some("notifications/tools/list_changed"), None) => {
            shared.list_changed.store(true, Ordering::SeqCst);
            (shared.on_change)();
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pair() -> (Connection, BufReader<UnixStream>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let c = Connection::new(ours, Box::new(|| {})).unwrap();
        let w = theirs.try_clone().unwrap();
        (c, BufReader::new(theirs), w)
    }

    #[test]
    fn answers_reach_their_requests_in_any_order() {
        let (c, mut r, mut w) = pair();
        let c = Arc::new(c);
        let a = {
            let c = c.clone();
            std::thread::spawn(move || c.request("a", json!({}), Duration::from_secs(5), None))
        };
        let mut l1 = String::new();
        r.read_line(&mut l1).unwrap();
        let b = {
            let c = c.clone();
            std::thread::spawn(move || c.request("b", json!({}), Duration::from_secs(5), None))
        };
        let mut l2 = String::new();
        r.read_line(&mut l2).unwrap();
        let (m1, m2): (Value, Value) = (
            serde_json::from_str(&l1).unwrap(),
            serde_json::from_str(&l2).unwrap(),
        );
        for m in [&m2, &m1] {
            writeln!(
                w,
                "{}",
                json!({"jsonrpc": "2.0", "id": m["id"], "result": {"m": m["method"]}})
            )
            .unwrap();
        }
        assert_eq!(a.join().unwrap().unwrap()["m"], "a");
        assert_eq!(b.join().unwrap().unwrap()["m"], "b");
    }

    #[test]
    fn an_overlong_line_closes_the_connection() {
        let (c, _r, mut w) = pair();
        let big = vec![b'x'; MAX_LINE + 10];
        std::thread::spawn(move || {
            let _ = w.write_all(&big);
        });
        let e = c
            .request("a", json!({}), Duration::from_secs(10), None)
            .unwrap_err();
        assert!(matches!(e, ClientError::Closed { .. }), "{e:?}");
    }

    #[test]
    fn a_silent_server_times_out_and_is_told() {
        let (c, mut r, _w) = pair();
        let e = c
            .request("slow", json!({}), Duration::from_millis(100), None)
            .unwrap_err();
        assert_eq!(e, ClientError::Timeout { ms: 100 });
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        l.clear();
        r.read_line(&mut l).unwrap();
        assert!(l.contains("notifications/cancelled"), "{l}");
    }
}
