//! glovebox as an MCP client of a wrapped server: rmcp's client side,
//! over the jailed server's stdio (one end of a socket pair, one message a
//! line) or over Streamable HTTP to a remote server ([`super::remote`]
//! carries rmcp's HTTP requests through glovebox's own outbound client).
//!
//! Bounded everywhere the server decides: a line longer than
//! [`MAX_LINE`] ends the connection (`LineCap`: the call fails at once
//! and the next one gets a new server, rather than waiting on an answer
//! that was dropped), requests wait at most their deadline (the server is
//! then told `notifications/cancelled`), and the server's own requests get
//! a fixed answer (`ping` an empty result, elicitation declined, anything
//! else "method not found": glovebox offers the server no sampling, roots
//! or elicitation).
//! rmcp's response cache is off: a tool list is always the one the server
//! serves now (the approval's tool-list hash is checked against it). The
//! server's `notifications/progress` for a call go to that call's
//! [`Relay`]; a caller's cancellation is sent on as `notifications/cancelled`.
//!
//! The connections of a process share one small tokio runtime; the
//! callers (jail threads, call workers) block on their answer.

use std::collections::HashMap;
use std::future::Future;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, ErrorData, Implementation, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, ServiceError,
};
use rmcp::{ClientCacheConfig, ClientHandler};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::jail::Cancel;

/// Longest message the server may send, in bytes (a tool list with its
/// schemas, a result): past it the connection is closed.
pub const MAX_LINE: usize = 16 << 20;

/// How often a waiting call looks at its cancel token.
const TICK: Duration = Duration::from_millis(25);

/// The MCP revision glovebox asks for.
pub const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_06_18;

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

/// One progress report of a server for a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The progress so far.
    pub progress: f64,
    /// The total, if the server knows it.
    pub total: Option<f64>,
    /// What the server says it is doing.
    pub message: Option<String>,
}

/// Where a call's progress reports go (the client of the call, with its
/// own progress token).
#[derive(Clone)]
pub struct Relay(Arc<dyn Fn(Reported) + Send + Sync>);

impl Relay {
    /// A relay calling `f` for each report.
    pub fn new(f: impl Fn(Reported) + Send + Sync + 'static) -> Relay {
        Relay(Arc::new(f))
    }

    /// Passes one report on.
    pub fn send(&self, r: Reported) {
        (self.0)(r)
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relay")
    }
}

/// The runtime every client connection of this process runs on.
fn runtime() -> Result<&'static tokio::runtime::Runtime, ClientError> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("glovebox-mcp-io")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| ClientError::Closed {
        why: format!("starting the MCP client's runtime failed: {e}"),
    })
}

/// Runs `f` on the clients' runtime and waits for it (from any thread,
/// a runtime's own included).
fn block<F>(f: F) -> Result<F::Output, ClientError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let rt = runtime()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv().map_err(|_| ClientError::Closed {
        why: "the MCP client's runtime stopped".into(),
    })
}

struct Shared {
    closed: Mutex<Option<String>>,
    list_changed: AtomicBool,
    on_change: Box<dyn Fn() + Send + Sync>,
    relays: Mutex<HashMap<ProgressToken, Relay>>,
}

impl Shared {
    fn close(&self, why: String) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        if closed.is_none() {
            *closed = Some(why);
        }
    }

    fn closed(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// glovebox's side of the MCP session: what it does with the server's
/// notifications and requests.
struct Handler(Arc<Shared>);

fn no_client_features<T>() -> Result<T, ErrorData> {
    Err(ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        "glovebox offers MCP servers no client features",
        None,
    ))
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.0.list_changed.store(true, Ordering::SeqCst);
        (self.0.on_change)();
    }

    async fn on_progress(&self, p: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let relay = self
            .0
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&p.progress_token)
            .cloned();
        if let Some(relay) = relay {
            relay.send(Reported {
                progress: p.progress,
                total: p.total,
                message: p.message.map(|m| m.chars().take(1024).collect()),
            });
        }
    }

    // glovebox declares no roots (the server's grants are its roots).
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        no_client_features()
    }

    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("glovebox", env!("CARGO_PKG_VERSION")),
        );
        c.protocol_version = PROTOCOL;
        c
    }
}

/// Removes a call's relay when the call ends.
struct Route(Arc<Shared>, ProgressToken);

impl Drop for Route {
    fn drop(&mut self) {
        self.0
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}

/// The server's stdout as read by rmcp, ended (an error) by a line longer
/// than [`MAX_LINE`]: rmcp alone would drop the line and keep waiting.
struct LineCap<R> {
    inner: R,
    line: usize,
    shared: Arc<Shared>,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let me = &mut *self;
        match Pin::new(&mut me.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                for b in &buf.filled()[before..] {
                    me.line = if *b == b'\n' { 0 } else { me.line + 1 };
                    if me.line > MAX_LINE {
                        let why = format!("the server sent a message longer than {MAX_LINE} bytes");
                        me.shared.close(why.clone());
                        return Poll::Ready(Err(std::io::Error::other(why)));
                    }
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

/// One connection to a server.
pub struct Connection {
    peer: Peer<RoleClient>,
    stop: CancellationToken,
    shared: Arc<Shared>,
    /// Turns a transport failure into the remote request's own error.
    remote: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

fn shared(on_change: Box<dyn Fn() + Send + Sync>) -> Arc<Shared> {
    Arc::new(Shared {
        closed: Mutex::new(None),
        list_changed: AtomicBool::new(false),
        on_change,
        relays: Mutex::new(HashMap::new()),
    })
}

impl Connection {
    /// Speaks MCP over `stream` (the server's stdin and stdout): the
    /// `initialize` handshake, within `limit`. `on_change` runs when the
    /// server says its tool list changed.
    pub fn stdio(
        stream: UnixStream,
        on_change: Box<dyn Fn() + Send + Sync>,
        limit: Duration,
    ) -> Result<Connection, ClientError> {
        let rt = runtime()?;
        let shared = shared(on_change);
        stream
            .set_nonblocking(true)
            .map_err(|e| ClientError::Closed {
                why: format!("preparing the server's channel: {e}"),
            })?;
        let stream = {
            let _in = rt.enter();
            tokio::net::UnixStream::from_std(stream).map_err(|e| ClientError::Closed {
                why: format!("preparing the server's channel: {e}"),
            })?
        };
        let (read, write) = stream.into_split();
        let read = LineCap {
            inner: read,
            line: 0,
            shared: shared.clone(),
        };
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write)
            .with_max_line_length(usize::MAX);
        Self::start(transport, shared, limit, false)
    }

    /// Speaks MCP to a remote server through `client` at `url`.
    pub fn remote(
        client: super::remote::Guarded,
        url: &str,
        on_change: Box<dyn Fn() + Send + Sync>,
        limit: Duration,
    ) -> Result<Connection, ClientError> {
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        let rt = runtime()?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        // A forgotten session ends the connection: the next call starts a
        // new one and reads its tool list again.
        config.reinit_on_expired_session = false;
        config.max_json_response_size = MAX_LINE;
        config.max_sse_event_size = MAX_LINE;
        let transport = {
            let _in = rt.enter();
            StreamableHttpClientTransport::with_client(client, config)
        };
        Self::start(transport, shared(on_change), limit, true)
    }

    fn start<T, E, A>(
        transport: T,
        shared: Arc<Shared>,
        limit: Duration,
        remote: bool,
    ) -> Result<Connection, ClientError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        A: 'static,
    {
        let stop = CancellationToken::new();
        let handler = Handler(shared.clone());
        let (s, ct) = (shared.clone(), stop.clone());
        let started = block(async move {
            let serving = rmcp::service::serve_client_with_ct(handler, transport, ct.clone());
            let service = match tokio::time::timeout(limit, serving).await {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => {
                    ct.cancel();
                    return Err(init_error(&e, &s, remote));
                }
                Err(_) => {
                    ct.cancel();
                    return Err(ClientError::Timeout {
                        ms: limit.as_millis() as u64,
                    });
                }
            };
            let peer = service.peer().clone();
            peer.set_response_cache_config(ClientCacheConfig::disabled())
                .await;
            tokio::spawn(async move {
                let why = match service.waiting().await {
                    Ok(reason) => format!("the server ended the session ({reason:?})"),
                    Err(e) => format!("its session ended: {e}"),
                };
                s.close(why);
            });
            Ok(peer)
        })?;
        let peer = started?;
        Ok(Connection {
            peer,
            stop,
            shared,
            remote,
        })
    }

    /// Why the connection is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        self.shared.closed().or_else(|| {
            self.peer
                .is_transport_closed()
                .then(|| "the server ended (end of its output)".to_string())
        })
    }

    /// Whether the server said its tool list changed since the last call
    /// of this (which clears it).
    pub fn take_list_changed(&self) -> bool {
        self.shared.list_changed.swap(false, Ordering::SeqCst)
    }

    /// Marks the tool list as changed again (its reading failed).
    pub fn list_changed_again(&self) {
        self.shared.list_changed.store(true, Ordering::SeqCst);
    }

    /// Ends the connection (the server sees end of file).
    pub fn shutdown(&self) {
        self.shared.close("glovebox closed it".into());
        self.stop.cancel();
    }

    fn error(&self, e: ServiceError, limit: Duration) -> ClientError {
        service_error(&e, &self.shared, limit, self.remote)
    }

    /// One page of the server's tool list (each tool as the server
    /// describes it) and the cursor of the next.
    pub fn list_tools(
        &self,
        cursor: Option<String>,
        limit: Duration,
    ) -> Result<(Vec<Value>, Option<String>), ClientError> {
        if let Some(why) = self.shared.closed() {
            return Err(ClientError::Closed { why });
        }
        let peer = self.peer.clone();
        let request = ClientRequest::ListToolsRequest(rmcp::model::ListToolsRequest::with_param(
            PaginatedRequestParams::default().with_cursor(cursor),
        ));
        let result = block(ask_cancellable(peer, request, limit, None, None))?;
        match result {
            Ok(ServerResult::ListToolsResult(page)) => {
                let tools = page
                    .tools
                    .iter()
                    .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                    .collect();
                Ok((tools, page.next_cursor))
            }
            Ok(_) => Err(ClientError::Rpc {
                code: 0,
                message: "the server answered tools/list with another result".into(),
            }),
            Err(Failed::Cancelled) => Err(ClientError::Cancelled),
            Err(Failed::Service(e)) => Err(self.error(e, limit)),
        }
    }

    /// Calls the server's tool `name` with `arguments` and returns its
    /// result (`content`, `structuredContent`, `isError`), waiting at most
    /// `limit` or until `cancel` fires (either tells the server
    /// `notifications/cancelled`); its progress reports go to `relay`.
    pub fn call_tool(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        limit: Duration,
        cancel: Option<&Cancel>,
        relay: Option<&Relay>,
    ) -> Result<Value, ClientError> {
        if let Some(why) = self.shared.closed() {
            return Err(ClientError::Closed { why });
        }
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let route = relay.map(|r| (self.shared.clone(), r.clone()));
        let result = block(ask_cancellable(
            self.peer.clone(),
            request,
            limit,
            cancel.cloned(),
            route,
        ))?;
        match result {
            Ok(ServerResult::CallToolResult(r)) => Ok(serde_json::to_value(r).unwrap_or_default()),
            Ok(_) => Err(ClientError::Rpc {
                code: 0,
                message: "the server answered tools/call with another result".into(),
            }),
            Err(Failed::Cancelled) => Err(ClientError::Cancelled),
            Err(Failed::Service(e)) => Err(self.error(e, limit)),
        }
    }
}

enum Failed {
    Cancelled,
    Service(ServiceError),
}

async fn ask_cancellable(
    peer: Peer<RoleClient>,
    request: ClientRequest,
    limit: Duration,
    cancel: Option<Cancel>,
    relay: Option<(Arc<Shared>, Relay)>,
) -> Result<ServerResult, Failed> {
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(limit))
        .await
        .map_err(Failed::Service)?;
    let id = handle.id.clone();
    let _route = relay.map(|(shared, r)| {
        let token = handle.progress_token.clone();
        shared
            .relays
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), r);
        Route(shared, token)
    });
    let answer = handle.await_response();
    tokio::pin!(answer);
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            r = &mut answer => return r.map_err(Failed::Service),
            _ = tick.tick(), if cancel.is_some() => {
                if cancel.as_ref().is_some_and(Cancel::is_cancelled) {
                    let note = CancelledNotificationParam::new(
                        Some(id),
                        Some("cancelled by the client".into()),
                    );
                    let _ = peer.notify_cancelled(note).await;
                    return Err(Failed::Cancelled);
                }
            }
        }
    }
}

/// The glovebox error of an rmcp one.
fn service_error(e: &ServiceError, shared: &Shared, limit: Duration, remote: bool) -> ClientError {
    match e {
        ServiceError::McpError(e) => ClientError::Rpc {
            code: i64::from(e.code.0),
            message: e.message.chars().take(4096).collect(),
        },
        ServiceError::Timeout { .. } => ClientError::Timeout {
            ms: limit.as_millis() as u64,
        },
        ServiceError::Cancelled { .. } => ClientError::Cancelled,
        ServiceError::TransportSend(t) => {
            if remote {
                if let Some(h) = super::remote::failure_in(t) {
                    return h;
                }
            }
            ClientError::Closed {
                why: shared.closed().unwrap_or_else(|| t.to_string()),
            }
        }
        ServiceError::TransportClosed => ClientError::Closed {
            why: shared
                .closed()
                .unwrap_or_else(|| "the server ended (end of its output)".into()),
        },
        other => ClientError::Rpc {
            code: 0,
            message: other.to_string(),
        },
    }
}

fn init_error(
    e: &rmcp::service::ClientInitializeError,
    shared: &Shared,
    remote: bool,
) -> ClientError {
    if remote {
        if let Some(h) = super::remote::failure_in(e) {
            return h;
        }
    }
    if let Some(why) = shared.closed() {
        return ClientError::Closed { why };
    }
    match e {
        rmcp::service::ClientInitializeError::ConnectionClosed(_) => ClientError::Closed {
            why: "the server ended (end of its output)".into(),
        },
        other => ClientError::Closed {
            why: format!("the MCP handshake failed: {other}"),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "client_tests.rs"]
mod tests;
