//! The HTTP server of `glovebox serve`: an axum [`Router`] with MCP's
//! Streamable HTTP transport mounted at `/mcp` and the HTTP API
//! ([`super::api`]) beside it, every route behind the [`super::limits`]
//! and one guard:
//!
//! - it binds `127.0.0.1:7878` by default, and refuses to bind a
//!   non-loopback address unless a bearer token is set
//!   (`GLOVEBOX_API_TOKEN`);
//! - a request whose `Host` is not a name this server answers to is
//!   refused with 421, on every route (MCP and the API alike, CORS
//!   preflights too: this check is the outermost layer); the authority of
//!   an absolute-form target must pass as well, and two `Host` headers are
//!   refused; so a DNS
//!   name an attacker rebinds to this address reaches nothing: on a
//!   loopback bind only `localhost`, `127.0.0.1` and `[::1]` with the
//!   bound port; otherwise also the bound address itself (any address of
//!   the machine for an unspecified bind) and the names given with
//!   `--allow-host`;
//! - a request whose `Origin` is present and not one configured with
//!   `--allow-origin` is refused with 403 (none is by default, loopback
//!   origins neither), and a `POST`/`PUT`/`PATCH` that is not
//!   `Content-Type: application/json` with 415, so a web page the user
//!   visits cannot drive the tools ([`super::browsers`]; and `rmcp`
//!   checks `Host` against DNS rebinding on loopback);
//! - with a token set, every request needs `Authorization: Bearer TOKEN`
//!   (compared in constant time), else 401 `unauthorized` with
//!   `WWW-Authenticate: Bearer`; without one (loopback only), every
//!   request's connection must come from the account that runs the
//!   server or one given with `--allow-uid`, else 403 `unauthorized`
//!   ([`super::owner`]); except `/healthz` and `/readyz` (probes tell
//!   nothing), and the OAuth discovery paths (`/.well-known/…`,
//!   `/register`), which answer 404 so that OAuth-aware MCP clients learn
//!   at once that there is no authorization server and send the token
//!   they were given;
//! - [`super::mcp::compat`] adds what clients expect of the transport beyond
//!   `rmcp`: CORS for the configured origins, `ping` on 2026-07-28,
//!   `DELETE` answers.
//!
//! Refusals are JSON [`Problem`]s. [`serve`] stops as
//! [`super::shutdown`] describes.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};

use super::browsers::Origins;
use super::conns::{Admission, Conns};
use super::limits::{self, Limits};
use super::live::Live;
use super::mcp::compat;
use super::mcp::sessions::BoundedSessions;
use super::mcp::Server;
use super::owner::{Callers, Connection, Verdict};
use super::problem::Problem;
use super::{api, shutdown};
use crate::run::ErrorKind;

/// Where `glovebox serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// The environment variable holding the bearer token.
pub const TOKEN_ENV: &str = "GLOVEBOX_API_TOKEN";

/// Errors starting or running the HTTP server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback address without a token would expose every tool.
    #[error("refusing to listen on {addr} (not a loopback address) without a bearer token: set {TOKEN_ENV}, or listen on 127.0.0.1")]
    ExposedWithoutToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The address could not be recorded as glovebox's own (network tools
    /// would otherwise reach it through the egress proxy).
    #[error(transparent)]
    Record(#[from] crate::egress::listeners::ListenersError),
    /// `--metrics-listen` names the server's own address.
    #[error("--metrics-listen {addr} is the server's own address: give the metrics another port")]
    MetricsOnServerAddress {
        /// The address.
        addr: SocketAddr,
    },
    /// Without a token, the callers' accounts cannot be told apart.
    #[error(transparent)]
    Unidentifiable(#[from] super::owner::Unidentifiable),
    /// The server failed while running.
    #[error("the HTTP server failed")]
    Serve {
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How the server is exposed.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address to bind.
    pub listen: SocketAddr,
    /// The bearer token every request must carry; `None`: loopback only,
    /// no token.
    pub token: Option<String>,
    /// Body size, concurrency and time limits.
    pub limits: Limits,
    /// How long running calls may go on after SIGTERM/SIGINT before they
    /// are killed.
    pub grace: Duration,
    /// Host names (`name` or `name:port`) a non-loopback server answers
    /// to besides its own address (`--allow-host`); ignored on loopback.
    pub hosts: Vec<String>,
    /// The address actually bound, once [`serve`] bound it (port 0 picks
    /// one): the port every `Host` must carry.
    pub bound: Arc<std::sync::OnceLock<SocketAddr>>,
    /// After SIGTERM, how long new calls get 503 with `Retry-After` (and
    /// `/readyz` 503) before the server stops accepting connections
    /// ([`super::ready`]): time for a balancer to take it out.
    pub drain_delay: Duration,
    /// Accounts besides the server's own that may call without a token
    /// (`--allow-uid`); ignored with a token.
    pub allow_uids: Vec<u32>,
    /// Browser origins that may call (`--allow-origin`).
    pub origins: Origins,
    /// A second address serving `/metrics`, `/healthz` and `/readyz`
    /// only, without the token (`--metrics-listen`), for scrapers.
    pub metrics_listen: Option<SocketAddr>,
}

/// Connections the kernel queues for the accept loop, at most (and at
/// most `net.core.somaxconn`).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Default grace period on shutdown.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

impl Options {
    /// Refuses a non-loopback address without a token, and a metrics
    /// address that is the server's own.
    pub fn check(&self) -> Result<(), HttpError> {
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(HttpError::ExposedWithoutToken { addr: self.listen });
        }
        if let Some(m) = self.metrics_listen {
            if m.port() != 0 && m == self.listen {
                return Err(HttpError::MetricsOnServerAddress { addr: m });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct Guard {
    token_digest: Option<[u8; 32]>,
    hosts: Hosts,
    origins: Origins,
    /// Without a token: the accounts that may call.
    callers: Option<Callers>,
}

/// Which `Host` values the server answers to.
#[derive(Debug, Clone)]
struct Hosts {
    listen: SocketAddr,
    bound: Arc<std::sync::OnceLock<SocketAddr>>,
    names: Vec<String>,
}

impl Hosts {
    /// Whether a request with this `Host` is for this server.
    fn allows(&self, host: &str) -> bool {
        let addr = self.bound.get().copied().unwrap_or(self.listen);
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        let port_ok = match port {
            Some(p) => p == addr.port(),
            None => addr.port() == 80,
        };
        let loopback_name =
            name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "::1";
        if port_ok && loopback_name {
            return true;
        }
        if addr.ip().is_loopback() {
            // A balancer on this machine in front (`--allow-host
            // 127.0.0.1:8080`): a loopback name with the port named.
            return loopback_name
                && port.is_some()
                && self.names.iter().any(|allowed| {
                    split_host(allowed).is_some_and(|(n, p)| {
                        p.is_some() && p == port && n.eq_ignore_ascii_case(name)
                    })
                });
        }
        // An address literal cannot be a rebound DNS name.
        if let Ok(ip) = name.parse::<std::net::IpAddr>() {
            return port_ok && (addr.ip().is_unspecified() || ip == addr.ip());
        }
        self.names.iter().any(|allowed| match split_host(allowed) {
            Some((n, None)) => port_ok && n.eq_ignore_ascii_case(name),
            Some((n, Some(p))) => port == Some(p) && n.eq_ignore_ascii_case(name),
            None => false,
        })
    }
}

/// `name[:port]` or `[v6][:port]` → (name without brackets, port).
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let (name, rest) = v6.split_once(']')?;
        match rest {
            "" => (name, None),
            r => (name, Some(r.strip_prefix(':')?)),
        }
    } else {
        match host.rsplit_once(':') {
            Some((n, p)) if !n.contains(':') => (n, Some(p)),
            Some(_) => return None,
            None => (host, None),
        }
    };
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if !ok {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name, port))
}

/// The router: MCP at `/mcp`, the API at `/api/v1/…`, `/healthz` and
/// `/openapi.json`, everything behind the Origin and token guard and the
/// body limit; MCP and the API also behind the concurrency limit and the
/// request timeout.
pub fn router(live: Arc<Live>, options: &Options) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    // Past the grace period of a shutdown, the MCP sessions end too.
    config.cancellation_token = live.calls().killed().child_token();
    if !options.listen.ip().is_loopback() {
        // Reached by other names than localhost; the token protects it.
        config = config.disable_allowed_hosts();
    }
    let for_mcp = live.clone();
    let sessions = Arc::new(BoundedSessions::new(
        options.limits.max_sessions,
        options.limits.session_idle_timeout,
    ));
    let mcp = StreamableHttpService::new(
        move || Ok(Server::new(for_mcp.clone())),
        sessions.clone(),
        config,
    );
    // One bound on calls for /mcp, the API and (in `glovebox mcp`) stdio.
    live.calls().set_limits(options.limits.calls);
    let mcp = Router::new()
        .route_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(sessions, compat::mcp))
        .layer(middleware::from_fn(check_mcp_message))
        .layer(middleware::from_fn(compat::json_refusals));
    let guard = Guard {
        hosts: Hosts {
            listen: options.listen,
            bound: options.bound.clone(),
            names: options.hosts.clone(),
        },
        token_digest: options
            .token
            .as_ref()
            .map(|t| Sha256::digest(t.as_bytes()).into()),
        origins: options.origins.clone(),
        callers: options
            .token
            .is_none()
            .then(|| Callers::own_and(&options.allow_uids)),
    };
    let limited = Router::new()
        .merge(mcp)
        .merge(api::routes(live.clone(), options.limits.usage_scan_bytes))
        .layer(middleware::from_fn_with_state(
            options.limits.clone(),
            limits::limit_time,
        ))
        .layer(middleware::from_fn(super::ready::refuse_while_draining));
    Router::new()
        .merge(limited)
        .merge(api::open_routes(live))
        .route("/readyz", axum::routing::get(super::ready::readyz))
        .route("/metrics", axum::routing::get(super::ready::metrics_text))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::wrong_method)
        // Inside the body limit: a connection still sending its body is
        // idle (it may be closed to make room), one being served busy.
        .layer(middleware::from_fn(super::conns::track))
        .layer(middleware::from_fn_with_state(
            options.limits.clone(),
            limits::limit_body,
        ))
        .layer(middleware::from_fn_with_state(guard.clone(), check_request))
        .layer(middleware::from_fn_with_state(
            options.origins.clone(),
            compat::cors,
        ))
        // Outermost: a request for another name gets nothing, not even a
        // CORS preflight answer.
        .layer(middleware::from_fn_with_state(guard, check_host))
}

/// Binds `options.listen` and serves `router` until `stop` resolves, then
/// shuts down gracefully ([`shutdown::drain`]): no new connection, the
/// running calls of `live` get `options.grace`, then are killed. `bound`
/// is told the address actually bound (port 0 picks a free one).
pub async fn serve(
    router: Router,
    live: Arc<Live>,
    options: &Options,
    bound: impl FnOnce(SocketAddr),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    options.check()?;
    let bind_err = |source| HttpError::Bind {
        addr: options.listen,
        source,
    };
    // Bound, recorded, and only then listening: a connection can only
    // ever reach a server whose record is already there (a proxy that
    // checked before the record re-checks after its connect, see
    // `egress::connect::open`), so no tool's proxy gets in while the
    // server starts.
    let socket = if options.listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(bind_err)?;
    socket.set_reuseaddr(true).map_err(bind_err)?;
    socket.bind(options.listen).map_err(bind_err)?;
    let addr = socket.local_addr().map_err(bind_err)?;
    let _ = options.bound.set(addr);
    // Recorded machine-wide until the server stops: no tool's egress
    // proxy connects here, whoever runs it.
    let _recorded = crate::egress::listeners::register(addr)?;
    // A deep backlog (the kernel caps it at net.core.somaxconn): a
    // client that opens connections in bursts fills it with connections
    // the accept loop sheds at once, and a full one would drop everyone
    // else's SYNs (each retried only after a second or more).
    let listener = socket.listen(LISTEN_BACKLOG).map_err(bind_err)?;
    if options.token.is_none() {
        // Without a token, the callers' accounts must be told apart.
        super::owner::check_works(addr)?;
    }
    let metrics = match options.metrics_listen {
        Some(at) => Some(bind_metrics(at, options, live.clone()).await?),
        None => None,
    };
    bound(addr);
    let stopping = tokio_util::sync::CancellationToken::new();
    if let Some((listener, router, _recorded)) = metrics {
        let stop = stopping.clone();
        tokio::spawn(async move {
            let _recorded = _recorded;
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                eprintln!("glovebox: the metrics listener failed: {e}");
            }
        });
    }
    let server = accept(listener, router, options.limits.clone(), stopping.clone());
    let ending = live.clone();
    let drain_delay = options.drain_delay;
    let stop = async move {
        stop.await;
        // Not ready, and new calls refused with 503 + Retry-After, while
        // the balancer takes this server out; then stop accepting.
        super::ready::start_draining();
        if !drain_delay.is_zero() {
            eprintln!(
                "glovebox: draining: new calls get 503 for {} s",
                drain_delay.as_secs_f64()
            );
            tokio::time::sleep(drain_delay).await;
        }
        // Listen streams would otherwise hold their connections open
        // through the whole grace period.
        ending.end_subscriptions();
    };
    shutdown::drain(server, stop, stopping, live.calls(), options.grace)
        .await
        .map_err(|source| HttpError::Serve { source })
}

/// Binds `--metrics-listen`: `/metrics`, `/healthz`, `/readyz` (and
/// `/openapi.json`), no
/// token (Prometheus scrapes, the HPA's adapter), behind the `Host` check
/// (a rebound DNS name reads nothing); recorded as glovebox's own like
/// the server's address, so no tool's egress reaches it.
async fn bind_metrics(
    at: SocketAddr,
    options: &Options,
    live: Arc<Live>,
) -> Result<
    (
        tokio::net::TcpListener,
        Router,
        crate::egress::listeners::Registration,
    ),
    HttpError,
> {
    let bind_err = |source| HttpError::Bind { addr: at, source };
    let listener = tokio::net::TcpListener::bind(at).await.map_err(bind_err)?;
    let addr = listener.local_addr().map_err(bind_err)?;
    let recorded = crate::egress::listeners::register(addr)?;
    eprintln!("glovebox: serving metrics at http://{addr}/metrics (no token)");
    let guard = Guard {
        token_digest: None,
        hosts: Hosts {
            listen: addr,
            bound: Arc::new(std::sync::OnceLock::from(addr)),
            names: options.hosts.clone(),
        },
        origins: Origins::default(),
        callers: None,
    };
    let router = Router::new()
        .route("/metrics", axum::routing::get(super::ready::metrics_text))
        .route("/readyz", axum::routing::get(super::ready::readyz))
        .merge(api::open_routes(live))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::wrong_method)
        .layer(middleware::from_fn_with_state(guard, check_host));
    Ok((listener, router, recorded))
}

/// The connection cap for this process, and every call's egress bounds
/// set ([`crate::egress::budget::set`]): the open-file limit shared out
/// by [`limits::plan_fds`] (the soft limit first raised to the hard one),
/// the cap lowered (and said on stderr) where `--max-connections` would
/// not fit beside the calls.
fn share_descriptors(limits: &Limits) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let open_files = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(_) => soft,
        },
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    };
    let slots = limits.calls.max_concurrent;
    let plan = limits::plan_fds(limits.max_connections, open_files, slots);
    if plan.connections < limits.max_connections {
        eprintln!(
            "glovebox: at most {} connections at once, not {} (--max-connections): the open-file limit is {open_files} and {slots} calls need theirs; raise it (ulimit -n) for more",
            plan.connections, limits.max_connections
        );
    }
    if (plan.egress_per_call as u64) < limits::FD_EGRESS_MIN {
        eprintln!(
            "glovebox: each call's network connections may hold only {} descriptors ({} proxied connections): the open-file limit is {open_files}; raise it (ulimit -n), or lower --max-concurrent ({slots})",
            plan.egress_per_call,
            plan.egress_per_call / crate::egress::budget::PROXIED_FDS
        );
    }
    crate::egress::budget::set(crate::egress::budget::Bounds {
        fds_per_call: plan.egress_per_call,
        fds_total: plan.egress_total,
        bytes_per_call: limits.egress_memory_per_call,
        bytes_total: limits.egress_memory,
    });
    plan.connections
}

/// Accepts connections until `stopping`, shared as [`super::conns`]
/// says (at most `limits.max_connections` open, per peer, idle per peer
/// and for event streams too, idle ones shed to make room, the heaviest
/// peer's first), each closed
/// when its headers take longer than `limits.header_timeout` or it sits
/// idle that long; then waits for the open connections to finish.
async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
    stopping: tokio_util::sync::CancellationToken,
) -> Result<(), std::io::Error> {
    let max_connections = share_descriptors(&limits);
    let conns = Conns::new(limits.connection_limits(max_connections));
    // Accepted as plain sockets: one that is shed at once is closed
    // without ever being registered with the runtime (an accept and a
    // close, nothing more), so a flood is drained as fast as it comes.
    let listener = crate::jail::sys_async_fd(std::os::fd::OwnedFd::from(listener.into_std()?))?;
    let tasks = tokio_util::task::TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut said: Option<std::time::Instant> = None;
    let mut said_accept: Option<std::time::Instant> = None;
    let mut said_peer: Option<std::time::Instant> = None;
    let mut said_shed: Option<std::time::Instant> = None;
    let once_a_minute = |t: &mut Option<std::time::Instant>| {
        let due = t.is_none_or(|t| t.elapsed() > Duration::from_secs(60));
        if due {
            *t = Some(std::time::Instant::now());
        }
        due
    };
    'accepting: loop {
        // Every slot busy (no idle one to close): wait for one to free
        // before taking the next connection from the kernel's backlog.
        while conns.open() >= conns.limits().max && conns.full_of_busy() {
            if once_a_minute(&mut said) {
                eprintln!(
                    "glovebox: {max_connections} connections are open and busy (glovebox serve --max-connections): new ones wait until one is done"
                );
            }
            tokio::select! {
                _ = conns.changed() => {}
                _ = stopping.cancelled() => break 'accepting,
            }
        }
        let (tcp, peer) = tokio::select! {
            r = accept_plain(&listener) => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of fds, or a connection reset before it was
                    // accepted: say so (once a minute at most), breathe,
                    // go on.
                    if once_a_minute(&mut said_accept) {
                        eprintln!("glovebox: cannot accept a connection: {e} (said once a minute at most)");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stopping.cancelled() => break,
        };
        let conn = match conns.admit_behind(peer.ip().to_canonical(), || backlog(&listener)) {
            Admission::Open(conn) => conn,
            Admission::PeerFull => {
                if once_a_minute(&mut said_peer) {
                    eprintln!(
                        "glovebox: {} holds {} connections, each busy (glovebox serve --max-connections-per-peer): its new ones are refused (said once a minute at most)",
                        peer.ip(),
                        conns.limits().per_peer
                    );
                }
                // Non-blocking: what fits in the socket's buffer (all of
                // it, on a fresh connection), never a wait.
                let _ = tcp.set_nonblocking(true);
                let _ = std::io::Write::write(
                    &mut &tcp,
                    &super::conns::peer_full_answer(conns.limits().per_peer),
                );
                continue;
            }
            Admission::Shed => {
                if once_a_minute(&mut said_shed) {
                    eprintln!(
                        "glovebox: {} opens connections faster than it uses them (it holds {} idle, each idle under a second; glovebox serve --max-idle-per-peer): its new ones are closed at once (said once a minute at most)",
                        peer.ip(),
                        conns.limits().idle_per_peer
                    );
                }
                // A reset: no time-wait state is kept for it.
                let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
                continue;
            }
            Admission::Wait => {
                // Every slot taken between the check above and this
                // accept, or the connections closed to make room not yet
                // closed (a few µs): the connection waits its turn here.
                if conns.full_of_busy() && once_a_minute(&mut said) {
                    eprintln!(
                        "glovebox: {max_connections} connections are open and busy (glovebox serve --max-connections): new ones wait until one is done"
                    );
                }
                let admitted = loop {
                    // The moment a connection closes or turns idle.
                    tokio::select! {
                        _ = conns.changed() => {}
                        _ = stopping.cancelled() => break 'accepting,
                    }
                    // It waited its turn: not shed now.
                    match conns.admit_behind(peer.ip().to_canonical(), || false) {
                        Admission::Open(c) => break Some(c),
                        Admission::Wait => {}
                        Admission::PeerFull | Admission::Shed => break None,
                    }
                };
                match admitted {
                    Some(c) => c,
                    None => continue,
                }
            }
        };
        // Replies are small and written in pieces: without TCP_NODELAY,
        // Nagle and the client's delayed ACK add ~40 ms to a call.
        if let Err(e) = tcp.set_nodelay(true) {
            eprintln!("glovebox: cannot set TCP_NODELAY on a connection: {e}");
        }
        let tcp = match tcp
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(tcp))
        {
            Ok(tcp) => tcp,
            Err(e) => {
                if once_a_minute(&mut said_accept) {
                    eprintln!(
                        "glovebox: cannot serve a connection: {e} (said once a minute at most)"
                    );
                }
                continue;
            }
        };
        let tagged = conn.clone();
        // Who is calling ([`super::owner`]): looked up on the first request.
        let caller = Arc::new(Connection::new(tcp.local_addr().unwrap_or(peer), peer));
        let service = tower::ServiceExt::map_request(
            router.clone(),
            move |mut r: Request<hyper::body::Incoming>| {
                r.extensions_mut().insert(tagged.clone());
                r.extensions_mut().insert(caller.clone());
                r
            },
        );
        let service = hyper_util::service::TowerToHyperService::new(service);
        let io = hyper_util::rt::TokioIo::new(super::wire::JsonRefusals::new(tcp));
        let served = http.serve_connection(io, service);
        let stopping = stopping.clone();
        tasks.spawn(async move {
            tokio::pin!(served);
            let mut draining = false;
            loop {
                tokio::select! {
                    _ = served.as_mut() => break,
                    // Idle (no request in flight): closed at once.
                    _ = conn.evicted() => break,
                    _ = stopping.cancelled(), if !draining => {
                        draining = true;
                        served.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(conn);
        });
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// Whether more connections wait in `listener`'s backlog.
fn backlog(listener: &impl std::os::fd::AsFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// The next connection from `listener` (a listening TCP socket), as a
/// plain (blocking) socket.
async fn accept_plain(
    listener: &tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    loop {
        let mut ready = listener.readable().await?;
        if let Ok(accepted) = ready.try_io(|l| socket2::SockRef::from(l.get_ref()).accept()) {
            let (socket, peer) = accepted?;
            let peer = peer
                .as_socket()
                .ok_or_else(|| std::io::Error::other("a connection from no IP address"))?;
            return Ok((socket.into(), peer));
        }
    }
}

/// A JSON-RPC error answer (the body of a refused `/mcp` message).
fn rpc_error(status: StatusCode, code: i64, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A `POST /mcp` must be JSON: a body that does not parse is answered
/// with a JSON-RPC parse error (-32700, 400), a wrong `Content-Type` with
/// an invalid-request error (-32600, 415), a batch, a non-object or a
/// message [`super::mcp::stdio::refusal`] refuses (bad envelope,
/// non-object `params`) with its JSON-RPC error (400): all as JSON, with
/// the request's id where it has one.
async fn check_mcp_message(request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let json_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json_type {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32600,
            "an MCP message must be sent with Content-Type: application/json".into(),
        );
    }
    let (parts, body) = request.into_parts();
    // The body was read whole (and bounded) by the body limit already.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                format!("cannot read the message: {e}"),
            )
        }
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                format!("parse error: the message is not valid JSON ({e})"),
            )
        }
        // An envelope rmcp would refuse with a bare 415 and no id.
        Ok(serde_json::Value::Object(m)) => {
            if let Some(answer) = super::mcp::stdio::refusal(&m) {
                return (
                    StatusCode::BAD_REQUEST,
                    [(header::CONTENT_TYPE, "application/json")],
                    answer.to_string(),
                )
                    .into_response();
            }
        }
        Ok(serde_json::Value::Array(_)) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "batches are not supported: send one message per request".into(),
            )
        }
        Ok(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "invalid request: a message is a JSON object".into(),
            )
        }
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// The names a request is for: every `Host` header and the authority of
/// an absolute-form target (or HTTP/2's `:authority`). Empty when there is
/// none.
fn request_hosts<'a>(headers: &'a HeaderMap, uri: &'a axum::http::Uri) -> Vec<Option<&'a str>> {
    headers
        .get_all(header::HOST)
        .iter()
        .map(|h| h.to_str().ok())
        .chain(uri.authority().map(|a| Some(a.as_str())))
        .collect()
}

/// Whether every name the request is for is one this server answers to
/// (one at least; two `Host` headers are refused, as HTTP/1.1 requires).
fn for_this_server(hosts: &Hosts, headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let names = request_hosts(headers, uri);
    headers.get_all(header::HOST).iter().count() <= 1
        && !names.is_empty()
        && names.iter().all(|h| h.is_some_and(|h| hosts.allows(h)))
}

async fn check_host(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    if !for_this_server(&guard.hosts, request.headers(), request.uri()) {
        return Refusal::Misdirected.into_response();
    }
    next.run(request).await
}

async fn check_request(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let caller = request.extensions().get::<Arc<Connection>>();
    match admit(
        &guard,
        request.method(),
        request.uri().path(),
        request.headers(),
        caller,
    ) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// Why the guard turned a request away.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// `Origin` present and not one configured with `--allow-origin`.
    CrossOrigin,
    /// No token, and the connection comes from another account.
    OtherUser {
        /// Its uid.
        uid: u32,
    },
    /// No token, and the connection's account cannot be told.
    UnknownCaller {
        /// Why.
        why: String,
    },
    /// A `POST`/`PUT`/`PATCH` that is not `application/json`.
    NotJson,
    /// A token is set and the request did not carry one.
    Unauthorized,
    /// A token is set and the request carried another one.
    WrongToken,
    /// An OAuth discovery, registration or authorization path: there is
    /// no authorization server to find (token mode is a static bearer
    /// token), so 404, with or without a token.
    NoOAuth,
    /// `Host` names another server (DNS rebinding) or is missing.
    Misdirected,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::CrossOrigin => Problem::new(
                StatusCode::FORBIDDEN,
                ErrorKind::InputInvalid,
                "requests from a web page are refused unless its origin is allowed: start glovebox serve with --allow-origin ORIGIN for a browser client you trust",
            ),
            Refusal::OtherUser { uid } => Problem::new(
                StatusCode::FORBIDDEN,
                ErrorKind::Unauthorized,
                format!("this glovebox serve answers only the account that runs it: the connection comes from uid {uid}; run the client as that account, or start the server with --allow-uid {uid}, or with GLOVEBOX_API_TOKEN and send the token"),
            )
            .details(serde_json::json!({"uid": uid})),
            Refusal::UnknownCaller { why } => Problem::new(
                StatusCode::FORBIDDEN,
                ErrorKind::Unauthorized,
                format!("this glovebox serve answers only the account that runs it, and the account of this connection cannot be told ({why}); send the request again on a new connection"),
            ),
            Refusal::NotJson => Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorKind::InputInvalid,
                "a request that acts must be JSON: send it with Content-Type: application/json (curl --json)",
            )
            .details(serde_json::json!({"header": "Content-Type", "expected": "application/json"})),
            Refusal::Misdirected => Problem::new(
                StatusCode::MISDIRECTED_REQUEST,
                ErrorKind::InputInvalid,
                "the Host header names another server: on loopback glovebox answers to localhost, 127.0.0.1 and [::1] with its port; add other names with --allow-host",
            ),
            Refusal::Unauthorized => Problem::new(
                StatusCode::UNAUTHORIZED,
                ErrorKind::Unauthorized,
                "a bearer token is required: send the header `Authorization: Bearer <token>` with the token glovebox serve was given in GLOVEBOX_API_TOKEN",
            )
            .details(serde_json::json!({"header": "Authorization", "scheme": "Bearer"}))
            .header(header::WWW_AUTHENTICATE, "Bearer"),
            Refusal::WrongToken => Problem::new(
                StatusCode::UNAUTHORIZED,
                ErrorKind::Unauthorized,
                "the bearer token is not the one glovebox serve was given: send the header `Authorization: Bearer <token>` with the value of its GLOVEBOX_API_TOKEN",
            )
            .details(serde_json::json!({"header": "Authorization", "scheme": "Bearer"}))
            .header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\""),
            Refusal::NoOAuth => Problem::new(
                StatusCode::NOT_FOUND,
                ErrorKind::InputInvalid,
                "glovebox has no OAuth authorization server: when it was started with GLOVEBOX_API_TOKEN, send the header `Authorization: Bearer <token>` instead",
            ),
        }
        .into_response()
    }
}

/// The paths an OAuth-aware client probes: discovery documents
/// (`/.well-known/…`, also appended to a path as OpenID Connect
/// discovery does) and the default registration, authorization and token
/// endpoints. The guard answers them 404 itself, before the token check,
/// so a client configured with the token never starts an OAuth flow.
fn is_oauth_path(path: &str) -> bool {
    path.starts_with("/.well-known/")
        || path.contains("/.well-known/")
        || matches!(path, "/register" | "/authorize" | "/token")
}

/// The token of an `Authorization` header of the Bearer scheme (the
/// scheme's name is case-insensitive, RFC 7235), if it is one.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn admit(
    guard: &Guard,
    method: &axum::http::Method,
    path: &str,
    headers: &HeaderMap,
    caller: Option<&Arc<Connection>>,
) -> Result<(), Refusal> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !origin.to_str().is_ok_and(|o| guard.origins.allows(o)) {
            return Err(Refusal::CrossOrigin);
        }
    }
    if is_oauth_path(path) {
        return Err(Refusal::NoOAuth);
    }
    // The liveness and readiness probes are open.
    if path == "/healthz" || path == "/readyz" {
        return Ok(());
    }
    if let Some(want) = &guard.token_digest {
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
        else {
            return Err(Refusal::Unauthorized);
        };
        if !same_digest(Sha256::digest(given.as_bytes()).as_slice(), want) {
            return Err(Refusal::WrongToken);
        }
    }
    if let Some(callers) = &guard.callers {
        // A request that did not come over a connection this server
        // accepted has no caller to look up: refused.
        let Some(caller) = caller else {
            return Err(Refusal::UnknownCaller {
                why: "it came over no connection this server accepted".into(),
            });
        };
        match caller.verdict(callers) {
            Verdict::Allowed { .. } => {}
            Verdict::OtherUser { uid } => return Err(Refusal::OtherUser { uid: *uid }),
            Verdict::Unknown { why } => return Err(Refusal::UnknownCaller { why: why.clone() }),
        }
    }
    // `/mcp` answers its own JSON-RPC error (`check_mcp_message`).
    if path != "/mcp" && super::browsers::acts_without_json(method, headers) {
        return Err(Refusal::NotJson);
    }
    Ok(())
}

/// Compares two digests in time independent of where they differ.
fn same_digest(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
