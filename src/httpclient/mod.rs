//! The http tools' client: outbound HTTP, the one place glovebox itself
//! opens a connection on a tool's behalf (the egress proxy of
//! `network: true` is [`crate::egress`]; both ask [`crate::net`]).
//!
//! [`send`] runs one [`Request`] (already expanded from the manifest by
//! [`crate::run::http`]) on a small current-thread tokio runtime created
//! for this call only — the command, python and `sandbox` paths never
//! start one. The client is hyper 1 (HTTP/1.1) over rustls ([`tls`]).
//!
//! Each hop, in order:
//!
//! 1. resolve the URL's host (an IP literal is taken as it is);
//! 2. pass every address through the SSRF guard ([`crate::net::guard`]) and connect to
//!    an address that passed — the `SocketAddr` that was checked, never a
//!    name resolved a second time;
//! 3. TLS for `https` (certificate checked against the URL's host);
//! 4. send the request, read the response head.
//!
//! Redirects (301, 302, 303, 307, 308): at most [`MAX_REDIRECTS`] are
//! followed. A redirect to the origin (scheme, host, port) of the first
//! request is followed as it is. A redirect to another origin fails with
//! [`ClientError::CrossOriginRedirect`] naming the Location, unless the
//! manifest set `follow_cross_origin_redirects`; then every header marked
//! secret-bearing (its template mentions a secret) is dropped for the rest
//! of the exchange, so are Location query entries with a secret-bearing
//! key, a body whose template mentions a secret refuses the hop, and a
//! Location still holding a secret value is refused. 301/302 after a
//! non-GET and 303 become a GET without body.
//!
//! Bounds: one deadline covers every hop from DNS to the last body byte
//! ([`ClientError::Timeout`]); the body is read in frames and reading stops
//! as soon as it passes the cap ([`ClientError::TooLarge`]).

pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST, LOCATION, USER_AGENT};
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::{Host, Url};

use crate::net::guard;
pub use crate::net::guard::GuardError;
pub use tls::TlsError;

/// Redirects followed at most per call.
pub const MAX_REDIRECTS: usize = 5;

/// One request header.
#[derive(Debug, Clone)]
pub struct Header {
    /// Its name.
    pub name: HeaderName,
    /// Its value.
    pub value: HeaderValue,
    /// Its template mentions a secret: never sent to another origin.
    pub secret: bool,
}

/// A fully expanded request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The URL (query included).
    pub url: Url,
    /// Headers, in manifest order.
    pub headers: Vec<Header>,
    /// The body, if any.
    pub body: Option<Bytes>,
    /// The body's template mentions a secret.
    pub body_secret: bool,
}

/// How to send it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Let the guard pass private addresses.
    pub allow_private: bool,
    /// Only these hosts (`permissions.network.allow`), checked on every
    /// hop, redirects included; `None`: any host.
    pub allow: Option<crate::net::Allowlist>,
    /// TLS client configuration.
    pub tls: Arc<rustls::ClientConfig>,
    /// Deadline of the whole exchange.
    pub timeout: Duration,
    /// Largest body read, in bytes.
    pub max_body: u64,
    /// Follow redirects to other origins without the secret-bearing parts.
    pub follow_cross_origin: bool,
    /// Query keys whose templates mention a secret.
    pub secret_query_keys: Vec<String>,
    /// The secret values of this call (a Location holding one is refused
    /// when crossing origins).
    pub secret_values: Vec<String>,
}

/// The final response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Its status.
    pub status: StatusCode,
    /// The URL that answered (after redirects).
    pub url: Url,
    /// Its `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body, at most `max_body` bytes.
    pub body: Bytes,
    /// Its headers.
    pub headers: hyper::HeaderMap,
}

/// Errors of one exchange.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The runtime could not be created.
    #[error("cannot start the http runtime")]
    Runtime(#[source] std::io::Error),
    /// The deadline passed.
    #[error(
        "the request did not complete within {ms} ms (connect, redirects and the whole response)"
    )]
    Timeout {
        /// The deadline.
        ms: u64,
    },
    /// Only http and https are supported.
    #[error("unsupported URL scheme `{scheme}`; use http or https")]
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// The URL has no host.
    #[error("the URL {url} has no host")]
    NoHost {
        /// The URL.
        url: String,
    },
    /// DNS failed.
    #[error("cannot resolve {host}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// The tool's network allowlist does not name the host.
    #[error("{host}:{port} is not in the tool's network allowlist (permissions.network.allow); add it there")]
    NotAllowed {
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// A glovebox server listens at every address of the host.
    #[error("{host}: {addr} is glovebox's own server; tools never reach it")]
    Own {
        /// The host.
        host: String,
        /// The refused address.
        addr: SocketAddr,
    },
    /// The guard refused every address of the host.
    #[error("{host}")]
    Guard {
        /// The host.
        host: String,
        /// The first refusal.
        source: GuardError,
    },
    /// No address of the host accepted a connection.
    #[error("cannot connect to {host} ({addr})")]
    Connect {
        /// The host.
        host: String,
        /// The last address tried.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake with {host} failed")]
    Tls {
        /// The host.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// The host is not a valid TLS server name.
    #[error("`{host}` is not a valid TLS server name")]
    ServerName {
        /// The host.
        host: String,
    },
    /// The HTTP exchange failed.
    #[error("HTTP exchange with {host} failed")]
    Http {
        /// The host.
        host: String,
        /// Why.
        source: hyper::Error,
    },
    /// The request could not be built.
    #[error("cannot build the request")]
    Build(#[source] hyper::http::Error),
    /// The body passed the cap.
    #[error("the response body is larger than the limit of {limit} bytes; reading stopped there (raise exec.http.max_response_bytes if this is expected)")]
    TooLarge {
        /// The cap.
        limit: u64,
    },
    /// A redirect to another origin, not followed.
    #[error("the server redirected ({status}) to another origin, {location}; not followed, so the tool's secrets stay with {origin} (set exec.http.follow_cross_origin_redirects: true to follow such redirects without the secret-bearing headers and query entries)")]
    CrossOriginRedirect {
        /// The redirect status.
        status: u16,
        /// The resolved Location.
        location: String,
        /// The origin of the first request.
        origin: String,
    },
    /// A cross-origin redirect that would still carry a secret.
    #[error("the server redirected ({status}) to another origin, {location}, in a way that would carry a secret there ({why}); not followed")]
    SecretRedirect {
        /// The redirect status.
        status: u16,
        /// The resolved Location.
        location: String,
        /// What would carry it.
        why: &'static str,
    },
    /// A redirect without a usable Location.
    #[error("the server redirected ({status}) without a valid Location header")]
    BadRedirect {
        /// The redirect status.
        status: u16,
    },
    /// Too many redirects.
    #[error("more than {MAX_REDIRECTS} redirects; last Location {location}")]
    TooManyRedirects {
        /// The last Location.
        location: String,
    },
}

impl ClientError {
    /// The Outcome's error kind: a limit, glovebox itself, or the request.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        match self {
            ClientError::Timeout { .. } => crate::kind::ErrorKind::Timeout,
            ClientError::TooLarge { .. } => crate::kind::ErrorKind::ResourceLimit,
            ClientError::Runtime(_) => crate::kind::ErrorKind::Internal,
            _ => crate::kind::ErrorKind::HttpError,
        }
    }
}

/// Sends `req` and reads the final response (see the module doc).
pub fn send(req: Request, opts: &Options) -> Result<Response, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(ClientError::Runtime)?;
    let result = rt.block_on(send_async(req, opts));
    // A DNS lookup still blocking in the pool must not hold the call past
    // its deadline.
    rt.shutdown_background();
    result
}

/// [`send`] on the caller's runtime (the MCP client's remote transport).
pub async fn send_async(req: Request, opts: &Options) -> Result<Response, ClientError> {
    let ms = u64::try_from(opts.timeout.as_millis()).unwrap_or(u64::MAX);
    tokio::time::timeout(opts.timeout, exchange(req, opts))
        .await
        .unwrap_or(Err(ClientError::Timeout { ms }))
}

fn origin_text(url: &Url) -> String {
    url.origin().ascii_serialization()
}

async fn exchange(mut req: Request, opts: &Options) -> Result<Response, ClientError> {
    let first_origin = req.url.origin();
    let mut redirects = 0;
    loop {
        let res = hop(&req, opts).await?;
        let status = res.status();
        let is_redirect = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
        if !is_redirect {
            let content_type = res
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let headers = res.headers().clone();
            let body = read_body(res.into_body(), opts.max_body, &req.url).await?;
            return Ok(Response {
                status,
                url: req.url,
                content_type,
                body,
                headers,
            });
        }
        let location = res
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| req.url.join(l).ok())
            .ok_or(ClientError::BadRedirect {
                status: status.as_u16(),
            })?;
        drop(res);
        if redirects == MAX_REDIRECTS {
            return Err(ClientError::TooManyRedirects {
                location: location.to_string(),
            });
        }
        redirects += 1;
        let code = status.as_u16();
        let keeps_method = matches!(code, 307 | 308)
            || (matches!(code, 301 | 302) && req.method == Method::GET)
            || req.method == Method::HEAD;
        if !keeps_method {
            req.method = Method::GET;
            req.body = None;
            req.body_secret = false;
        }
        if location.origin() != first_origin {
            if !opts.follow_cross_origin {
                return Err(ClientError::CrossOriginRedirect {
                    status: code,
                    location: location.to_string(),
                    origin: origin_text(&req.url),
                });
            }
            req.url = strip_for_other_origin(location, &mut req, opts, code)?;
        } else {
            req.url = location;
        }
    }
}

/// The Location to follow to another origin, with the request's
/// secret-bearing parts removed (see the module doc).
fn strip_for_other_origin(
    mut location: Url,
    req: &mut Request,
    opts: &Options,
    status: u16,
) -> Result<Url, ClientError> {
    req.headers.retain(|h| !h.secret);
    if req.body.is_some() && req.body_secret {
        return Err(ClientError::SecretRedirect {
            status,
            location: location.to_string(),
            why: "the request body's template mentions a secret",
        });
    }
    let holds_secret = |s: &str| {
        opts.secret_values
            .iter()
            .any(|v| !v.is_empty() && s.contains(v.as_str()))
    };
    if location.query().is_some() {
        let kept: Vec<(String, String)> = location
            .query_pairs()
            .filter(|(k, v)| !opts.secret_query_keys.iter().any(|s| s == k) && !holds_secret(v))
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if kept.is_empty() {
            location.set_query(None);
        } else {
            location.query_pairs_mut().clear().extend_pairs(kept);
        }
    }
    let decoded = percent_encoding::percent_decode_str(location.as_str()).decode_utf8_lossy();
    if holds_secret(location.as_str()) || holds_secret(&decoded) {
        return Err(ClientError::SecretRedirect {
            status,
            location: location.to_string(),
            why: "the Location holds a secret value",
        });
    }
    Ok(location)
}

/// Resolves `url`'s host and returns the addresses the guard passed, or
/// the guard's first refusal when none did.
async fn addresses(url: &Url, opts: &Options) -> Result<Vec<SocketAddr>, ClientError> {
    let host_text = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    if let Some(list) = &opts.allow {
        let host = match url.host() {
            Some(Host::Ipv4(ip)) => Some(crate::net::allow::Host::Ip(IpAddr::V4(ip))),
            Some(Host::Ipv6(ip)) => Some(crate::net::allow::Host::Ip(IpAddr::V6(ip))),
            Some(Host::Domain(d)) => crate::net::allow::Host::parse(d),
            None => None,
        };
        if !host.is_some_and(|h| list.permits(&h, port)) {
            return Err(ClientError::NotAllowed {
                host: host_text,
                port,
            });
        }
    }
    let found: Vec<SocketAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(Host::Domain(d)) => tokio::net::lookup_host((d, port))
            .await
            .map_err(|source| ClientError::Resolve {
                host: host_text.clone(),
                source,
            })?
            .collect(),
        None => {
            return Err(ClientError::NoHost {
                url: url.to_string(),
            })
        }
    };
    let mut refused = None;
    let mut own = None;
    let mut allowed = Vec::with_capacity(found.len());
    let registry = crate::egress::listeners::current();
    for addr in found {
        if registry.is_own(addr) {
            own.get_or_insert(addr);
            continue;
        }
        match guard::check(addr.ip(), opts.allow_private) {
            // The host's own address (a public one on its interface) is
            // the host, as loopback is.
            Ok(()) if !opts.allow_private && registry.is_this_host(addr.ip()) => {
                refused.get_or_insert(guard::GuardError::Private {
                    addr: addr.ip(),
                    what: "this host",
                });
            }
            Ok(()) => allowed.push(addr),
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    if let (true, Some(addr)) = (allowed.is_empty(), own) {
        return Err(ClientError::Own {
            host: host_text,
            addr,
        });
    }
    match (allowed.is_empty(), refused) {
        (true, Some(source)) => Err(ClientError::Guard {
            host: host_text,
            source,
        }),
        (true, None) => Err(ClientError::Resolve {
            host: host_text,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address found"),
        }),
        (false, _) => Ok(allowed),
    }
}

/// One request/response on a fresh connection to a checked address.
async fn hop(
    req: &Request,
    opts: &Options,
) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
    let url = &req.url;
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        other => {
            return Err(ClientError::Scheme {
                scheme: other.to_string(),
            })
        }
    };
    let host = url.host_str().unwrap_or_default().to_string();
    let addrs = addresses(url, opts).await?;
    let mut last = None;
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            // A glovebox server that started listening since the check
            // recorded itself before it listened: seen now, before any
            // byte is sent.
            Ok(_) if crate::egress::listeners::current().is_own(addr) => {
                return Err(ClientError::Own { host, addr });
            }
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let tcp = match (stream, last) {
        (Some(s), _) => s,
        (None, Some((addr, source))) => return Err(ClientError::Connect { host, addr, source }),
        (None, None) => {
            return Err(ClientError::NoHost {
                url: url.to_string(),
            })
        }
    };
    let _ = tcp.set_nodelay(true);
    let request = build(req)?;
    if https {
        let name = match url.host() {
            Some(Host::Ipv4(ip)) => rustls::pki_types::ServerName::IpAddress(IpAddr::V4(ip).into()),
            Some(Host::Ipv6(ip)) => rustls::pki_types::ServerName::IpAddress(IpAddr::V6(ip).into()),
            _ => rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| ClientError::ServerName { host: host.clone() })?,
        };
        let tls = tokio_rustls::TlsConnector::from(opts.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|source| ClientError::Tls {
                host: host.clone(),
                source,
            })?;
        round_trip(tls, request, &host).await
    } else {
        round_trip(tcp, request, &host).await
    }
}

fn build(req: &Request) -> Result<hyper::Request<Full<Bytes>>, ClientError> {
    let url = &req.url;
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let host = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let mut b = hyper::Request::builder()
        .method(req.method.clone())
        .uri(target)
        .header(HOST, host)
        .header(USER_AGENT, concat!("glovebox/", env!("CARGO_PKG_VERSION")));
    for h in &req.headers {
        b = b.header(h.name.clone(), h.value.clone());
    }
    let body = req.body.clone().unwrap_or_default();
    if req.body.is_some() || matches!(req.method, Method::POST | Method::PUT | Method::PATCH) {
        b = b.header(CONTENT_LENGTH, body.len());
    }
    b.body(Full::new(body)).map_err(ClientError::Build)
}

async fn round_trip<I>(
    io: I,
    request: hyper::Request<Full<Bytes>>,
    host: &str,
) -> Result<hyper::Response<hyper::body::Incoming>, ClientError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http = |source| ClientError::Http {
        host: host.to_string(),
        source,
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(http)?;
    tokio::spawn(async move {
        // Errors surface through `send_request` and the body.
        let _ = conn.await;
    });
    sender.send_request(request).await.map_err(http)
}

async fn read_body(
    mut body: hyper::body::Incoming,
    max: u64,
    url: &Url,
) -> Result<Bytes, ClientError> {
    use hyper::body::Body;
    if body.size_hint().lower() > max {
        return Err(ClientError::TooLarge { limit: max });
    }
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|source| ClientError::Http {
            host: url.host_str().unwrap_or_default().to_string(),
            source,
        })?;
        if let Ok(data) = frame.into_data() {
            if (out.len() + data.len()) as u64 > max {
                return Err(ClientError::TooLarge { limit: max });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}
