//! OTLP over HTTPS: the exporter's HTTP client for an `https://`
//! collector. TLS is glovebox's own set-up for outbound requests (rustls
//! with the `ring` provider, the Mozilla roots compiled in, plus the CAs
//! of `--audit-otlp-ca`), certificates verified against the URL's host
//! with no switch to turn that off; HTTP/1.1 through hyper, one
//! connection per export, on a current-thread runtime of the client's
//! own (the SDK calls it from its batch thread, which is no tokio
//! thread).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;

/// A collector's answer is read up to this size.
const MAX_ANSWER: usize = 4 << 20;

/// The client: TLS configuration, deadline, and its runtime.
pub struct Https {
    tls: Arc<ClientConfig>,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
    /// A failed export was said on stderr (once: the SDK retries).
    said: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Https")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Https {
    /// A client verifying collectors with `tls`, each export bounded by
    /// `timeout`.
    pub fn new(tls: Arc<ClientConfig>, timeout: Duration) -> std::io::Result<Https> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        Ok(Https {
            tls,
            timeout,
            rt,
            said: Default::default(),
        })
    }

    /// One request over a fresh TLS connection; the answer, whole.
    async fn exchange(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let uri = request.uri().clone();
        let host = uri.host().ok_or("the OTLP URL has no host")?.to_string();
        let port = uri.port_u16().unwrap_or(443);
        // An IPv6 literal comes bracketed in the URI.
        let name = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let server = ServerName::try_from(name.clone())?;
        let tcp = tokio::net::TcpStream::connect((name.as_str(), port)).await?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(server, tcp)
            .await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            // Its end (or error) is the request's, reported below.
            let _ = conn.await;
        });
        let (mut parts, body) = request.into_parts();
        parts.uri = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse()?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(&host);
        parts
            .headers
            .insert(hyper::header::HOST, authority.parse()?);
        let answer = sender
            .send_request(Request::from_parts(parts, Full::new(body)))
            .await?;
        let (parts, body) = answer.into_parts();
        let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
        Ok(Response::from_parts(parts, body))
    }
}

#[async_trait::async_trait]
impl HttpClient for Https {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        // The deadline is made inside the runtime: its timer is the
        // runtime's.
        let sent = self
            .rt
            .block_on(async { tokio::time::timeout(self.timeout, self.exchange(request)).await })
            .unwrap_or_else(|_| {
                Err(format!("no answer within {} s", self.timeout.as_secs()).into())
            });
        if let Err(e) = &sent {
            if !self.said.swap(true, std::sync::atomic::Ordering::Relaxed) {
                eprintln!("glovebox: the OTLP audit export failed: {e} (the records are lost; the stdout export and the log keep every line; said once)");
            }
        }
        sent
    }
}
