//! Interception of the connections that carry a placeholder secret: the
//! proxy reads each HTTP request to one of a secret's hosts, swaps the
//! placeholder for the real value ([`super::placeholder`]), sends it on,
//! and turns the real value back into the placeholder in the response.
//!
//! - HTTPS (a `CONNECT` or SOCKS5 tunnel whose first byte opens a TLS
//!   handshake) is answered with a certificate for the host the tool
//!   asked for, signed by a CA made for the call in memory with `rcgen`
//!   ([`Interception::new`]); its key never leaves the supervisor. The
//!   tool trusts that CA through a bundle (the system roots, the
//!   project's `security.http.extra_ca_file` and the CA,
//!   [`Interception::bundle`]) the jail writes to its private TMPDIR and
//!   names in [`CA_VARIABLES`]. The proxy's own TLS to the host is
//!   verified against the system roots (the Mozilla roots where the
//!   system has no bundle) and `security.http.extra_ca_file`.
//! - Plain HTTP (an absolute URL, or a tunnel that does not start with
//!   TLS) goes through the same exchange without TLS.
//! - A client that refuses the call's CA (a pinned certificate, its own
//!   CA bundle) fails its handshake: nothing reaches the host and the
//!   call's warnings say why ([`super::log::Log::note`]).
//!
//! Each request and response runs through hyper (HTTP/1.1, keep-alive;
//! HTTP/2 is not offered), bodies streamed. Requests ask for an
//! uncompressed answer (`Accept-Encoding: identity`, no `TE`) and a
//! whole one (no `Range`), so that a response reflecting the real value
//! cannot carry it to the tool compressed or in pieces, out of the
//! swapper's sight. Responses go through a [`Hider`]
//! ([`super::reflect`]): the reason phrase, header names and values,
//! body and trailers get the placeholder wherever the value appears in a
//! form the hider knows, and a response it cannot rewrite exactly becomes
//! a `502` ([`REFUSED`]) — or, for a body already streaming, is cut.
//! Connections to every other host never come here: they are tunnelled
//! untouched ([`super::forward`]).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::log::{Entry, Log, Use};
use super::placeholder::{Action, Placeholders, Swapper};
use super::reflect::{Hider, Refused};
use crate::net::Host;

mod body;

pub use body::{HideBody, SwapBody};

/// The bundle's file name in the jail's private TMPDIR.
pub const CA_FILE: &str = "glovebox-ca-bundle.pem";

/// The variables that name the bundle for the tool's clients (OpenSSL,
/// python `requests`, curl, node, git, pip).
pub const CA_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
];

/// Where the system's CA bundle is looked for, in order.
pub const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most bytes of a response body read before its head goes to the tool:
/// a body read whole is checked whole, and one that carries a value that
/// cannot be swapped is refused with a `502` saying so (a longer one is
/// streamed, and cut where such a value appears).
pub const MAX_WHOLE: usize = 256 * 1024;

/// How long a body of unknown length (chunked, or read to the close) is
/// waited for before it is streamed instead; a body with a
/// `Content-Length` of at most [`MAX_WHOLE`] is read whole.
pub const WHOLE_WAIT: Duration = Duration::from_millis(250);

/// What a refused response says to the tool.
pub const REFUSED: &str = "glovebox refused a response that carried a secret's value";

/// Errors setting up a call's interception.
#[derive(Debug, thiserror::Error)]
pub enum InterceptError {
    /// rcgen could not make the call's CA.
    #[error("cannot make the call's certificate authority for placeholder secrets: {0}; report this as a bug")]
    Ca(#[from] rcgen::Error),
}

impl InterceptError {
    /// The Outcome's error kind: glovebox's own failure.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::Internal
    }
}

/// The placeholder secrets of a call and the CA that lets the proxy read
/// the HTTPS requests to their hosts.
pub struct Interception {
    secrets: Placeholders,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    leaf_key: rcgen::KeyPair,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    extra_ca: Option<PathBuf>,
    upstream: OnceLock<Result<Arc<ClientConfig>, String>>,
}

impl fmt::Debug for Interception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interception")
            .field("secrets", &self.secrets)
            .field("extra_ca", &self.extra_ca)
            .finish_non_exhaustive()
    }
}

/// The system's CA bundle (PEM) and its roots, read once per process.
fn system_roots() -> &'static (Vec<u8>, Arc<RootCertStore>) {
    static ROOTS: OnceLock<(Vec<u8>, Arc<RootCertStore>)> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let pem = SYSTEM_BUNDLES
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .unwrap_or_default();
        let mut store = RootCertStore::empty();
        store
            .add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
        if store.is_empty() {
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        (pem, Arc::new(store))
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Interception {
    /// A fresh CA for a call with `secrets`; upstream TLS will also trust
    /// the CAs of `extra_ca` (`security.http.extra_ca_file`).
    pub fn new(
        secrets: Placeholders,
        extra_ca: Option<PathBuf>,
    ) -> Result<Interception, InterceptError> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let ca_key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let mut id = [0u8; 6];
        let _ = getrandom::fill(&mut id);
        params.distinguished_name.push(
            DnType::CommonName,
            format!("glovebox call CA {}", hex::encode(id)),
        );
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key)?;
        Ok(Interception {
            secrets,
            ca,
            ca_key,
            leaf_key: KeyPair::generate()?,
            leaves: Mutex::new(HashMap::new()),
            extra_ca,
            upstream: OnceLock::new(),
        })
    }

    /// The call's placeholder secrets.
    pub fn placeholders(&self) -> &Placeholders {
        &self.secrets
    }

    /// The call's CA certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// What the tool trusts: the system's roots, the project's
    /// `security.http.extra_ca_file` (when it can be read) and the call's
    /// CA (PEM); `false` when no system bundle was found.
    pub fn bundle(&self) -> (Vec<u8>, bool) {
        let (system, _) = system_roots();
        let mut out = system.clone();
        let extra = self
            .extra_ca
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .unwrap_or_default();
        for part in [&extra[..], self.ca.pem().as_bytes()] {
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(part);
        }
        (out, !system.is_empty())
    }

    /// The server side for `host`: a leaf certificate for it, made once.
    fn leaf(&self, host: &Host) -> Result<Arc<ServerConfig>, String> {
        let name = match host {
            Host::Name(n) => n.clone(),
            Host::Ip(ip) => ip.to_string(),
        };
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = leaves.get(&name) {
            return Ok(c.clone());
        }
        let made = (|| -> Result<ServerConfig, String> {
            let mut params =
                rcgen::CertificateParams::new(vec![name.clone()]).map_err(|e| e.to_string())?;
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name.clone());
            params.use_authority_key_identifier_extension = true;
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
            params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
            let leaf = params
                .signed_by(&self.leaf_key, &self.ca, &self.ca_key)
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::Pkcs8(self.leaf_key.serialize_der().into());
            let mut config = ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone(), self.ca.der().clone()], key)
                .map_err(|e| e.to_string())?;
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(config)
        })()?;
        let made = Arc::new(made);
        leaves.insert(name, made.clone());
        Ok(made)
    }

    /// The proxy's own TLS to the hosts: system roots plus the extra CAs.
    fn upstream(&self) -> Result<Arc<ClientConfig>, String> {
        self.upstream
            .get_or_init(|| {
                let mut roots = RootCertStore::clone(&system_roots().1);
                if let Some(path) = &self.extra_ca {
                    let pem = std::fs::read(path).map_err(|e| {
                        format!("cannot read security.http.extra_ca_file {path:?}: {e}")
                    })?;
                    for cert in CertificateDer::pem_slice_iter(&pem) {
                        let cert =
                            cert.map_err(|e| format!("security.http.extra_ca_file {path:?}: {e}"))?;
                        roots
                            .add(cert)
                            .map_err(|e| format!("security.http.extra_ca_file {path:?}: {e}"))?;
                    }
                }
                let mut config = ClientConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(Arc::new(config))
            })
            .clone()
    }
}

/// One intercepted connection: where it goes and where its counts go.
struct Exchange {
    i: Arc<Interception>,
    log: Log,
    host: Host,
    shown: String,
    port: u16,
}

impl Exchange {
    fn tally(&self, sw: &Swapper) {
        for (secret, action, n) in sw.counts() {
            let what = match action {
                Action::Swapped => Use::Swapped,
                Action::Refused => Use::Refused,
            };
            self.log
                .secret_use(self.i.secrets.name(secret), &self.shown, self.port, what, n);
        }
    }

    /// Logs the values a [`Hider`] turned into placeholders, and forgets
    /// them.
    fn hidden(&self, h: &mut Hider) {
        for (secret, n) in h.counts().iter().enumerate() {
            self.log.secret_use(
                self.i.secrets.name(secret),
                &self.shown,
                self.port,
                Use::Hidden,
                *n,
            );
        }
        h.reset_counts();
    }

    /// Logs a response refused for carrying a value (a count in the audit
    /// line, a warning) and returns what the tool is told.
    fn refused(&self, r: Refused) -> String {
        let name = self.i.secrets.name(r.secret);
        self.log
            .secret_use(name, &self.shown, self.port, Use::Withheld, 1);
        let reason = r.reason();
        self.log.note(format!(
            "refused a response from {}:{}: it carried the value of secret {name}, {reason}; the tool got an error instead of the response",
            self.shown, self.port
        ));
        format!(
            "{REFUSED} ({}:{}, secret {name}: {reason}); the tool gets a secret's placeholder, never its value\n",
            self.shown, self.port
        )
    }

    /// The `502` a refused response becomes.
    fn refusal(&self, r: Refused) -> Answer {
        let text = self.refused(r);
        let mut resp = Response::new(Either::Right(Full::new(Bytes::from(text))));
        *resp.status_mut() = hyper::StatusCode::BAD_GATEWAY;
        resp.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
    }
}

/// The placeholders seen in a request to a host none of their secrets
/// is meant for (plain HTTP the proxy reads anyway): sent on unchanged,
/// logged as refused uses.
pub fn watch(i: &Interception, bytes: &[&[u8]], shown: &str, port: u16, log: &Log) {
    for b in bytes {
        for (name, n) in i.secrets.seen(b) {
            log.secret_use(name, shown, port, Use::Refused, n);
        }
    }
}

/// A tunnel (`CONNECT`, SOCKS5) to one of a secret's hosts, after the
/// decision: TLS is terminated with the call's CA and re-made to the
/// host; anything else is read as plain HTTP. `prefix` holds bytes the
/// client already sent.
#[allow(clippy::too_many_arguments)]
pub async fn tunnel(
    i: Arc<Interception>,
    mut client: TcpStream,
    mut prefix: Vec<u8>,
    upstream: TcpStream,
    host: Host,
    shown: String,
    port: u16,
    log: Log,
    entry: Arc<Entry>,
) {
    if prefix.is_empty() {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, client.read(&mut first)).await {
            Ok(Ok(1)) => prefix.push(first[0]),
            _ => return,
        }
    }
    let tls = prefix[0] == 0x16;
    let client = Prefixed::new(prefix, client);
    let upstream = Counted {
        inner: upstream,
        entry,
    };
    let x = Exchange {
        i,
        log,
        host,
        shown,
        port,
    };
    if !tls {
        return exchange(client, upstream, x).await;
    }
    let where_ = format!("{}:{}", x.shown, x.port);
    let names = names_for(&x);
    let config = match x.i.leaf(&x.host) {
        Ok(c) => c,
        Err(e) => {
            x.log.note(format!(
                "TLS interception of {where_} could not start: {e}; {names} not sent"
            ));
            return;
        }
    };
    let accepted = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_rustls::TlsAcceptor::from(config).accept(client),
    )
    .await;
    let mut client = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            x.log.note(format!(
                "TLS interception of {where_} failed: {e}; the client does not trust glovebox's per-call CA (a pinned certificate, or its own CA bundle instead of $SSL_CERT_FILE), so {names} was not sent: let the client use the bundle named by SSL_CERT_FILE, or remove `hosts` from the secret"
            ));
            return;
        }
        Err(_) => return,
    };
    let Ok(upstream_config) = x.i.upstream().map_err(|e| {
        x.log.note(format!(
            "TLS to {where_} cannot be set up: {e}; {names} not sent"
        ))
    }) else {
        return bad_gateway(&mut client, "glovebox: upstream TLS cannot be set up\n").await;
    };
    let server_name = match &x.host {
        Host::Name(n) => ServerName::try_from(n.clone()).ok(),
        Host::Ip(ip) => Some(ServerName::IpAddress((*ip).into())),
    };
    let Some(server_name) = server_name else {
        return bad_gateway(&mut client, "glovebox: not a valid TLS server name\n").await;
    };
    let connected = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_rustls::TlsConnector::from(upstream_config).connect(server_name, upstream),
    )
    .await;
    match connected {
        Ok(Ok(up)) => exchange(client, up, x).await,
        Ok(Err(e)) => {
            x.log.note(format!(
                "the certificate of {where_} was not verified: {e}; {names} not sent (add its CA to security.http.extra_ca_file if it is yours)"
            ));
            let body = format!("glovebox: TLS to {where_} failed: {e}\n");
            bad_gateway(&mut client, &body).await
        }
        Err(_) => bad_gateway(&mut client, "glovebox: TLS to the host timed out\n").await,
    }
}

/// Plain HTTP to one of a secret's hosts, from an absolute-URL request:
/// `head` is the request the proxy rewrote (origin form, `Connection:
/// close`) followed by whatever body bytes came with it.
#[allow(clippy::too_many_arguments)]
pub async fn forward_plain(
    i: Arc<Interception>,
    client: TcpStream,
    head: Vec<u8>,
    upstream: TcpStream,
    host: Host,
    shown: String,
    port: u16,
    log: Log,
    entry: Arc<Entry>,
) {
    let x = Exchange {
        i,
        log,
        host,
        shown,
        port,
    };
    exchange(
        Prefixed::new(head, client),
        Counted {
            inner: upstream,
            entry,
        },
        x,
    )
    .await;
}

fn names_for(x: &Exchange) -> String {
    let names: Vec<&str> =
        x.i.secrets
            .iter()
            .filter(|s| s.for_host(&x.host, x.port))
            .map(|s| s.name())
            .collect();
    format!("secret {}", names.join(", "))
}

async fn bad_gateway<S: AsyncWrite + Unpin>(client: &mut S, body: &str) {
    let msg = format!(
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(msg.as_bytes()).await;
    let _ = client.shutdown().await;
}

type Sender = hyper::client::conn::http1::SendRequest<SwapBody<Incoming>>;
type Answer = Response<Either<HideBody<Incoming>, Full<Bytes>>>;

/// A boxed error of a body.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves the client's requests, each sent on over `upstream`.
async fn exchange<C, U>(client: C, upstream: U, x: Exchange)
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok((sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await
    else {
        return;
    };
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let x = Arc::new(x);
    let service = hyper::service::service_fn(move |req| one(x.clone(), sender.clone(), req));
    let server =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(client), service);
    let mut server = std::pin::pin!(server);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        // The client is done: the upstream connection goes with it.
        _ = server.as_mut() => {}
        // The host closed: the request in flight finishes, then the
        // client's connection closes too, so its next request opens a
        // new one instead of meeting a dead host.
        _ = conn.as_mut() => {
            server.as_mut().graceful_shutdown();
            let _ = server.await;
        }
    }
}

/// Swaps inside every header value (and the request target).
fn swap_headers(headers: &mut hyper::HeaderMap, sw: &mut Swapper) {
    for v in headers.values_mut() {
        let mut b = v.as_bytes().to_vec();
        sw.apply(&mut b);
        if b != v.as_bytes() {
            if let Ok(nv) = HeaderValue::from_bytes(&b) {
                *v = nv;
            }
        }
    }
}

/// One request: the head swapped, headers injected, the body streamed
/// through its own swapper; the response's head and body hide the real
/// values.
async fn one(
    x: Arc<Exchange>,
    sender: Arc<tokio::sync::Mutex<Sender>>,
    req: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let (mut parts, body) = req.into_parts();
    let secrets = &x.i.secrets;
    let mut head = secrets.outbound(&x.host, x.port, false);
    let mut target = parts.uri.to_string().into_bytes();
    head.apply(&mut target);
    if let Ok(uri) = hyper::Uri::try_from(target) {
        parts.uri = uri;
    }
    swap_headers(&mut parts.headers, &mut head);
    x.tally(&head);
    for (name, header, value) in secrets.injections(&x.host, x.port) {
        if let (Ok(h), Ok(v)) = (
            HeaderName::from_bytes(header.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            parts.headers.insert(h, v);
            x.log.secret_use(name, &x.shown, x.port, Use::Injected, 1);
        }
    }
    // The answer must come back readable: a compressed one that reflects
    // the value (an error page quoting the token) would carry it past
    // the swapper to the tool.
    parts.headers.remove(hyper::header::TE);
    // Nor in pieces: a range of a reflection holding only part of the
    // value would not be recognised either (the host answers whole).
    parts.headers.remove(hyper::header::RANGE);
    parts.headers.remove(hyper::header::IF_RANGE);
    parts.headers.insert(
        hyper::header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let body = SwapBody::new(body, secrets.outbound(&x.host, x.port, true), x.clone());
    let req = Request::from_parts(parts, body);
    let sent = {
        let mut s = sender.lock().await;
        match s.ready().await {
            Ok(()) => Ok(s.send_request(req)),
            Err(e) => Err(e),
        }
    };
    let result = match sent {
        Ok(fut) => fut.await,
        Err(e) => Err(e),
    };
    match result {
        Ok(resp) => Ok(answer(&x, resp).await),
        Err(e) => {
            let text = format!("glovebox: {}:{} failed: {e}\n", x.shown, x.port);
            let mut resp = Response::new(Either::Right(Full::new(Bytes::from(text))));
            *resp.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            Ok(resp)
        }
    }
}

/// The host's response as the tool gets it: every form of a real value
/// in the reason phrase, the header names and values, the body and the
/// trailers turned into the placeholder ([`super::reflect`]), or a `502`
/// when one cannot be (a body read whole first, up to [`MAX_WHOLE`]
/// bytes; a longer one is streamed and cut at such a value).
async fn answer(x: &Arc<Exchange>, resp: Response<Incoming>) -> Answer {
    let (mut parts, mut body) = resp.into_parts();
    let mut hider = x.i.secrets.hider();
    if let Err(r) = hide_head(&mut parts, &mut hider) {
        return x.refusal(r);
    }
    let length = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut data = Vec::new();
    let mut trailers = None;
    let mut ended = false;
    if length.is_none_or(|n| n <= MAX_WHOLE) {
        let deadline = tokio::time::Instant::now() + WHOLE_WAIT;
        loop {
            let next = if length.is_some() {
                Some(body.frame().await)
            } else {
                tokio::time::timeout_at(deadline, body.frame()).await.ok()
            };
            match next {
                // Still coming: streamed from here.
                None => break,
                Some(None) => {
                    ended = true;
                    break;
                }
                Some(Some(Err(e))) => {
                    let text = format!("glovebox: {}:{} failed: {e}\n", x.shown, x.port);
                    let mut resp = Response::new(Either::Right(Full::new(Bytes::from(text))));
                    *resp.status_mut() = hyper::StatusCode::BAD_GATEWAY;
                    return resp;
                }
                Some(Some(Ok(frame))) => match frame.into_data() {
                    Ok(d) => {
                        data.extend_from_slice(&d);
                        if data.len() > MAX_WHOLE {
                            break;
                        }
                    }
                    Err(frame) => {
                        trailers = frame.into_trailers().ok();
                        ended = true;
                        break;
                    }
                },
            }
        }
    }
    let mut queue = VecDeque::new();
    let exact;
    if ended {
        match hider.whole(&data) {
            Ok(None) => {}
            Ok(Some(new)) => {
                data = new;
                if length.is_some() {
                    parts
                        .headers
                        .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(data.len()));
                }
            }
            Err(r) => return x.refusal(r),
        }
        exact = length.map(|_| data.len() as u64);
        if !data.is_empty() {
            queue.push_back(Frame::data(Bytes::from(data)));
        }
        if let Some(mut t) = trailers {
            if let Err(r) = hide_headers(&mut t, &mut hider) {
                return x.refusal(r);
            }
            queue.push_back(Frame::trailers(t));
        }
    } else {
        // The length is fixed when the head says it.
        hider = hider.fixed(length.is_some());
        match hider.push(&data) {
            Ok(out) if !out.is_empty() => queue.push_back(Frame::data(Bytes::from(out))),
            Ok(_) => {}
            Err(r) => return x.refusal(r),
        }
        exact = None;
    }
    x.hidden(&mut hider);
    let body = HideBody {
        inner: body,
        hider,
        queue,
        done: ended,
        fixed: length.is_some(),
        exact,
        x: x.clone(),
    };
    Response::from_parts(parts, Either::Left(body))
}

/// The reason phrase and headers of a response with every value hidden.
fn hide_head(parts: &mut hyper::http::response::Parts, h: &mut Hider) -> Result<(), Refused> {
    if let Some(reason) = parts.extensions.get::<hyper::ext::ReasonPhrase>() {
        if let Some(new) = h.whole(reason.as_bytes())? {
            match hyper::ext::ReasonPhrase::try_from(new) {
                Ok(r) => {
                    parts.extensions.insert(r);
                }
                // The standard phrase instead.
                Err(_) => {
                    parts.extensions.remove::<hyper::ext::ReasonPhrase>();
                }
            }
        }
    }
    hide_headers(&mut parts.headers, h)
}

/// Header (or trailer) names and values with every value hidden; a field
/// whose rewrite HTTP refuses is dropped.
fn hide_headers(headers: &mut hyper::HeaderMap, h: &mut Hider) -> Result<(), Refused> {
    let mut out = hyper::HeaderMap::with_capacity(headers.len());
    let mut changed = false;
    for (name, value) in headers.iter() {
        let n = h.whole(name.as_str().as_bytes())?;
        let v = h.whole(value.as_bytes())?;
        changed |= n.is_some() || v.is_some();
        let name = match n {
            Some(b) => match HeaderName::from_bytes(&b) {
                Ok(n) => n,
                Err(_) => continue,
            },
            None => name.clone(),
        };
        let value = match v {
            Some(b) => match HeaderValue::from_bytes(&b) {
                Ok(v) => v,
                Err(_) => continue,
            },
            None => value.clone(),
        };
        out.append(name, value);
    }
    if changed {
        *headers = out;
    }
    Ok(())
}

/// A stream that yields `prefix` before reading from `inner`.
struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.at);
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The connection to the host, its bytes counted in the egress log.
struct Counted {
    inner: TcpStream,
    entry: Arc<Entry>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.entry.add_received(n as u64);
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.entry.add_sent(*n as u64);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "intercept_tests.rs"]
mod tests;
