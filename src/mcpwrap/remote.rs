//! A remote MCP server (`exec.mcp.url`): MCP's Streamable HTTP transport,
//! each message a `POST` that glovebox sends itself through the one
//! outbound client of http tools ([`crate::proxy::send`]): the network
//! allowlist and the SSRF guard on every request, TLS verified, no
//! redirect to another origin, the answer bounded. An answer is JSON or
//! an event stream holding it; the session id the server gives at
//! `initialize` goes with every later request, and a session the server
//! forgot (404) ends the connection, so the next call starts a new one.
//! No stream is held open for the server's own messages: a tool list
//! change it announces inside an answer is seen, others are not.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use super::client::ClientError;
use crate::jail::Cancel;
use crate::kind::ErrorKind;
use crate::proxy::{self, Header, Options, Request};

const SESSION: &str = "mcp-session-id";
const TICK: Duration = Duration::from_millis(25);

/// One remote server.
#[derive(Debug)]
pub struct Remote {
    url: url::Url,
    headers: Vec<Header>,
    opts: Options,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    list_changed: AtomicBool,
    closed: Mutex<Option<String>>,
    next: AtomicU64,
}

impl Remote {
    /// A server at `url`, sent `headers` (name, value, whether the value
    /// holds a secret) with every request, under `opts`.
    pub fn new(
        url: &str,
        headers: &[(String, String, bool)],
        opts: Options,
    ) -> Result<Remote, String> {
        let url = url::Url::parse(url).map_err(|e| format!("exec.mcp.url {url:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "exec.mcp.url {url}: only http and https servers can be reached"
            ));
        }
        let mut hs = Vec::new();
        for (name, value, secret) in headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("exec.mcp.headers: `{name}` is not a header name"))?;
            let v = HeaderValue::from_str(value)
                .map_err(|_| format!("exec.mcp.headers.{name}: not a header value"))?;
            hs.push(Header {
                name: n,
                value: v,
                secret: *secret,
            });
        }
        Ok(Remote {
            url,
            headers: hs,
            opts,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            list_changed: AtomicBool::new(false),
            closed: Mutex::new(None),
            next: AtomicU64::new(1),
        })
    }

    /// Why it is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the server announced a tool list change (clears it).
    pub fn take_list_changed(&self) -> bool {
        self.list_changed.swap(false, Ordering::SeqCst)
    }

    /// Marks it closed.
    pub fn shutdown(&self) {
        let mut c = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        if c.is_none() {
            *c = Some("glovebox closed it".into());
        }
    }

    fn request_of(&self, message: &Value) -> Request {
        let mut headers = self.headers.clone();
        let fixed = [
            ("content-type", Some("application/json".to_string())),
            (
                "accept",
                Some("application/json, text/event-stream".to_string()),
            ),
            (
                SESSION,
                self.session
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
            (
                "mcp-protocol-version",
                self.protocol
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
        ];
        for (name, value) in fixed {
            let Some(value) = value else { continue };
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.push(Header {
                    name: HeaderName::from_static(name),
                    value: v,
                    secret: false,
                });
            }
        }
        Request {
            method: hyper::Method::POST,
            url: self.url.clone(),
            headers,
            body: Some(Bytes::from(serde_json::to_vec(message).unwrap_or_default())),
            body_secret: false,
        }
    }

    /// Sends `message`, waiting at most `limit` or until `cancel` fires.
    fn exchange(
        &self,
        message: &Value,
        limit: Duration,
        cancel: Option<&Cancel>,
    ) -> Result<proxy::Response, ClientError> {
        if let Some(why) = self.closed() {
            return Err(ClientError::Closed { why });
        }
        let req = self.request_of(message);
        let mut opts = self.opts.clone();
        opts.timeout = limit;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("glovebox-mcp-http".into())
            .spawn(move || {
                let _ = tx.send(proxy::send(req, &opts));
            })
            .map_err(|e| ClientError::Closed {
                why: format!("starting its request: {e}"),
            })?;
        let deadline = Instant::now() + limit + Duration::from_secs(1);
        loop {
            if cancel.is_some_and(Cancel::is_cancelled) {
                return Err(ClientError::Cancelled);
            }
            match rx.recv_timeout(TICK) {
                Ok(Ok(res)) => return Ok(res),
                Ok(Err(proxy::ProxyError::Timeout { ms })) => {
                    return Err(ClientError::Timeout { ms })
                }
                Ok(Err(e)) => {
                    return Err(ClientError::Http {
                        kind: e.kind(),
                        message: crate::run::error_chain(&e),
                    })
                }
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => continue,
                Err(_) => {
                    return Err(ClientError::Timeout {
                        ms: limit.as_millis() as u64,
                    })
                }
            }
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let res = self.exchange(&msg, Duration::from_secs(30), None)?;
        self.status(&res).map(|_| ())
    }

    fn status(&self, res: &proxy::Response) -> Result<(), ClientError> {
        let code = res.status.as_u16();
        if res.status.is_success() {
            return Ok(());
        }
        if code == 404
            && self
                .session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        {
            let why = "the server ended its session (404)".to_string();
            *self.closed.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
            return Err(ClientError::Closed { why });
        }
        let excerpt: String = String::from_utf8_lossy(&res.body)
            .chars()
            .take(512)
            .collect();
        Err(ClientError::Http {
            kind: ErrorKind::HttpError,
            message: format!("the server answered {code}: {excerpt}"),
        })
    }

    /// Sends a request and returns its result.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
        cancel: Option<&Cancel>,
    ) -> Result<Value, ClientError> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let res = self.exchange(&msg, limit, cancel)?;
        self.status(&res)?;
        if method == "initialize" {
            if let Some(s) = res.headers.get(SESSION).and_then(|v| v.to_str().ok()) {
                *self.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(s.into());
            }
        }
        let messages = messages(res.content_type.as_deref(), &res.body);
        let mut answer = None;
        for m in messages {
            if m.get("method").and_then(Value::as_str) == Some("notifications/tools/list_changed") {
                self.list_changed.store(true, Ordering::SeqCst);
            }
            if m.get("id").and_then(Value::as_u64) == Some(id) && m.get("method").is_none() {
                answer = Some(m);
            }
        }
        let Some(m) = answer else {
            return Err(ClientError::Http {
                kind: ErrorKind::HttpError,
                message: "the server's answer holds no response to the request".into(),
            });
        };
        if let Some(e) = m.get("error") {
            return Err(ClientError::Rpc {
                code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .chars()
                    .take(4096)
                    .collect(),
            });
        }
        let result = m.get("result").cloned().unwrap_or(Value::Null);
        if method == "initialize" {
            if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                *self.protocol.lock().unwrap_or_else(PoisonError::into_inner) = Some(v.into());
            }
        }
        Ok(result)
    }
}

/// The JSON-RPC messages of an answer: its JSON (one message or a batch),
/// or the `data` of each event of an event stream.
fn messages(content_type: Option<&str>, body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    let flatten = |v: Value| match v {
        Value::Array(items) => items,
        other => vec![other],
    };
    if content_type.is_some_and(|c| c.starts_with("text/event-stream")) {
        let mut out = Vec::new();
        for event in text.split("\n\n").flat_map(|e| e.split("\r\n\r\n")) {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
                out.extend(flatten(v));
            }
        }
        return out;
    }
    serde_json::from_str::<Value>(&text)
        .map(flatten)
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_json_or_an_event_stream() {
        let one = messages(Some("application/json"), br#"{"id":1,"result":{}}"#);
        assert_eq!(one, vec![json!({"id": 1, "result": {}})]);
        let sse = b"event: message\ndata: {\"method\":\"notifications/tools/list_changed\"}\n\nid: 7\ndata: {\"id\":2,\ndata: \"result\":{\"x\":1}}\n\n";
        let got = messages(Some("text/event-stream"), sse);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1]["result"]["x"], 1);
        assert!(messages(Some("application/json"), b"not json").is_empty());
    }
}
