//! A remote MCP server (`exec.mcp.url`): rmcp's Streamable HTTP client
//! transport, with every HTTP request sent by glovebox itself through the
//! one outbound client of http tools ([`crate::httpclient::send_async`]): the
//! network allowlist and the SSRF guard on every request, TLS verified,
//! no redirect to another origin, the answer bounded. [`Guarded`] is the
//! HTTP backend rmcp's transport is given ([`StreamableHttpClient`]);
//! rmcp does the rest (the session id, the protocol header, JSON or
//! event-stream answers). No stream is held open for the server's own
//! messages (glovebox's client reads whole answers): a tool list change
//! the server announces inside an answer is seen, others are not. A
//! session the server forgot (404) ends the connection, so the next call
//! starts a new one and reads its tool list again.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use hyper::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use super::client::ClientError;
use crate::httpclient::{self, Header, Options, Request};
use crate::kind::ErrorKind;

const SESSION: &str = "mcp-session-id";

/// A request glovebox refused to send, or that failed (the guard, the
/// network, an HTTP error status): its Outcome kind and what happened.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// The Outcome's kind.
    pub kind: ErrorKind,
    /// What happened.
    pub message: String,
}

/// The [`Failure`] inside `e`'s chain of sources, as a client error.
pub fn failure_in(e: &(dyn std::error::Error + 'static)) -> Option<ClientError> {
    let mut at = Some(e);
    while let Some(e) = at {
        if let Some(f) = e.downcast_ref::<Failure>() {
            return Some(ClientError::Http {
                kind: f.kind,
                message: f.message.clone(),
            });
        }
        if let Some(StreamableHttpError::Client(f)) =
            e.downcast_ref::<StreamableHttpError<Failure>>()
        {
            return failure_in(f);
        }
        at = e.source();
    }
    None
}

/// rmcp's HTTP backend for one remote server: glovebox's outbound client
/// under the server's manifest.
#[derive(Debug, Clone)]
pub struct Guarded {
    headers: Arc<Vec<Header>>,
    opts: Arc<Options>,
}

impl Guarded {
    /// The backend sending `headers` (name, value, whether the value holds
    /// a secret) with every request, under `opts`; `url` is checked to be
    /// an http(s) URL.
    pub fn new(
        url: &str,
        headers: &[(String, String, bool)],
        opts: Options,
    ) -> Result<Guarded, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("exec.mcp.url {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "exec.mcp.url {parsed}: only http and https servers can be reached"
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
        Ok(Guarded {
            headers: Arc::new(hs),
            opts: Arc::new(opts),
        })
    }

    async fn send(
        &self,
        method: hyper::Method,
        uri: &str,
        body: Option<Bytes>,
        session: Option<&str>,
        extra: HashMap<HeaderName, HeaderValue>,
    ) -> Result<httpclient::Response, StreamableHttpError<Failure>> {
        let url = url::Url::parse(uri).map_err(|e| {
            StreamableHttpError::Client(Failure {
                kind: ErrorKind::ManifestInvalid,
                message: format!("exec.mcp.url {uri:?}: {e}"),
            })
        })?;
        let mut headers: Vec<Header> = self.headers.as_ref().clone();
        let mut fixed = vec![
            (
                HeaderName::from_static("accept"),
                HeaderValue::from_static("application/json, text/event-stream"),
            ),
            (
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("application/json"),
            ),
        ];
        if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
            fixed.push((HeaderName::from_static(SESSION), s));
        }
        fixed.extend(extra);
        for (name, value) in fixed {
            headers.retain(|h| h.name != name);
            headers.push(Header {
                name,
                value,
                secret: false,
            });
        }
        let req = Request {
            method,
            url,
            headers,
            body,
            body_secret: false,
        };
        httpclient::send_async(req, &self.opts).await.map_err(|e| {
            StreamableHttpError::Client(Failure {
                kind: e.kind(),
                message: crate::run::error_chain(&e),
            })
        })
    }
}

fn refused(res: &httpclient::Response) -> StreamableHttpError<Failure> {
    let excerpt: String = String::from_utf8_lossy(&res.body)
        .chars()
        .take(512)
        .collect();
    StreamableHttpError::Client(Failure {
        kind: ErrorKind::HttpError,
        message: format!("the server answered {}: {excerpt}", res.status.as_u16()),
    })
}

fn events(body: Bytes) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(futures::stream::once(async move {
        Ok::<Bytes, std::io::Error>(body)
    }))
    .boxed()
}

impl StreamableHttpClient for Guarded {
    type Error = Failure;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Failure>> {
        let mut extra = custom_headers;
        if let Some(v) =
            auth_header.and_then(|a| HeaderValue::from_str(&format!("Bearer {a}")).ok())
        {
            extra.insert(hyper::header::AUTHORIZATION, v);
        }
        let body = Bytes::from(serde_json::to_vec(&message)?);
        let res = self
            .send(
                hyper::Method::POST,
                &uri,
                Some(body),
                session_id.as_deref(),
                extra,
            )
            .await?;
        let code = res.status.as_u16();
        if code == 404 && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !res.status.is_success() {
            return Err(refused(&res));
        }
        let session = res
            .headers
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        if code == 202 || res.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        match res.content_type.as_deref() {
            Some(c) if c.starts_with("text/event-stream") => {
                Ok(StreamableHttpPostResponse::Sse(events(res.body), session))
            }
            Some(c) if c.starts_with("application/json") => {
                let m: ServerJsonRpcMessage = serde_json::from_slice(&res.body)?;
                Ok(StreamableHttpPostResponse::Json(m, session))
            }
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(String::from),
            )),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Failure>> {
        let res = self
            .send(
                hyper::Method::DELETE,
                &uri,
                None,
                Some(&session_id),
                custom_headers,
            )
            .await?;
        if res.status.is_success() || res.status.as_u16() == 405 {
            Ok(())
        } else {
            Err(refused(&res))
        }
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Failure>> {
        // Whole answers only: no long-lived stream is held open.
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
