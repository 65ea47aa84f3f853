//! Egress for `network: true` command and python tools: the internet
//! through glovebox, not the host's network.
//!
//! Such a call runs in its own network namespace with only loopback up
//! ([`crate::jail::spawn`]). Before it is confined, the child opens a
//! listening socket on `127.0.0.1:3128` inside that namespace and hands it
//! to the supervisor over a socketpair (`SCM_RIGHTS`); the supervisor
//! serves it ([`Gateway`], on a runtime shared by every call of the
//! process and started with the first) and connects out from the host
//! side. The tool finds the proxy
//! through `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` (and lowercase forms;
//! `NO_PROXY` empty): no extra process, no route out otherwise — a program
//! that ignores those variables gets "network unreachable" and a lookup of
//! a name fails at once (there is no DNS server in the namespace; the
//! proxy resolves names it is given by `CONNECT`).
//!
//! One concept per file:
//! - [`connect`]: the decision of [`crate::net`] (allowlist → resolve →
//!   SSRF guard on every address, the same as http tools → glovebox's own
//!   listeners) carried out: a connection to exactly a checked address;
//! - [`listeners`]: where `serve` records its addresses machine-wide, and
//!   the reading of them ([`crate::net::Registry`]);
//! - [`forward`]: HTTP `CONNECT`, absolute-form HTTP and SOCKS5;
//! - [`relay`]: the bytes of an open connection, both ways (`splice(2)`);
//! - [`log`]: each call's connections (host, port, allowed or refused and
//!   why, bytes each way), for the audit line and the Outcome's warnings.
//!
//! - [`placeholder`]: placeholder secrets (the tool holds a stand-in of
//!   the same shape, the supervisor the value) and the swapper that trades
//!   one for the other in a stream;
//! - [`intercept`]: the connections to a placeholder secret's hosts, read
//!   after [`crate::net::decide`] allowed them (HTTPS with a CA made for the call):
//!   the value goes to those hosts only, every other host is tunnelled
//!   untouched;
//! - [`reflect`]: a value in every form a server may write it back
//!   (escaped, case-changed, base64, hex), found (pure) and turned into
//!   the placeholder in responses, or the response refused;
//! - [`transparent`]: the call's TUN device, where one can be made: its
//!   DNS ([`dns`], names to fake addresses of [`fakedns`]) and the TCP
//!   connections of clients that ignore the proxy variables, decided by
//!   name like the proxy's, carried by [`stack`] (smoltcp's TCP);
//! - [`prewarm`]: one request through the whole path when the egress runtime
//!   starts, so that a tool's first connection does not pay the process's
//!   first page faults and allocations;
//! - [`budget`]: what a call's connections may hold — descriptors and
//!   transparent egress's buffers, per call and for the process —, each
//!   connection charged before it is opened and refused (logged) past a
//!   bound.

pub mod budget;
pub mod connect;
pub mod dns;
pub mod fakedns;
pub mod forward;
pub mod intercept;
pub mod listeners;
pub mod log;
pub mod placeholder;
pub mod prewarm;
pub mod reflect;
pub mod relay;
pub mod stack;
pub mod totals;
pub mod transparent;

use std::sync::{Arc, Mutex};

pub use connect::Rules;
pub use log::{Connection, Log};

use crate::jail;
use crate::jail::broker::Carried;

/// How long connections still open when the call ends may take to finish.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Connections served at once per call; more are closed at once (and
/// fewer where the call's descriptor budget ends first, [`budget`]).
pub const MAX_CONNECTIONS: usize = 256;

/// The proxy of one call: its rules, its log and its account (what its
/// connections hold, within [`budget::bounds`]).
#[derive(Debug, Clone)]
pub struct Gateway {
    rules: Arc<Rules>,
    log: Log,
    account: Arc<budget::Account>,
}

impl Gateway {
    /// A gateway enforcing `rules`, with an empty log and an account
    /// within the process's bounds.
    pub fn new(rules: Rules) -> Gateway {
        Gateway {
            rules: Arc::new(rules),
            log: Log::default(),
            account: Arc::new(budget::Account::default()),
        }
    }

    /// The call's egress log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// What the call's connections hold now.
    pub fn held(&self) -> budget::Held {
        self.account.held()
    }
}

/// How a connection to the proxy itself, refused before its request was
/// read (the call's egress budget), is shown in the egress log.
pub const VIA_PROXY: &str = "proxy";

/// Refuses a connection to the call's proxy over the call's budget: a
/// `503` naming the bound is written (an HTTP client shows it; nothing
/// was read), the connection closed, and the refusal logged as one to
/// the proxy's own address.
fn refuse_over_budget(stream: tokio::net::TcpStream, log: &Log, over: budget::Over) {
    let (ip, port) = jail::PROXY_ADDR;
    let ip = std::net::Ipv4Addr::from(ip);
    let why = over.reason();
    let body = format!("glovebox: refused: {why}\n");
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
    log.record(&ip.to_string(), port, VIA_PROXY, Some(why));
}

/// A running proxy; stopping it (on drop) closes the listener and every
/// connection, which is what lets the call's namespace go.
struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Disconnected once the proxy's task has ended and dropped
    /// everything it held.
    done: Option<std::sync::mpsc::Receiver<()>>,
}

impl jail::Attached for Running {}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(done) = self.done.take() {
            // Returns when the task's sender is dropped: after its
            // listener and connections were closed.
            let _ = done.recv();
        }
        // The first call to end: the process's warm-up too (long over by
        // now but for a call that ended at once).
        prewarm::wait();
    }
}

/// The runtime every call's proxy runs on, started with the first
/// networked call and kept for the life of the process: a call attaches
/// its listener to threads that are already running (no thread and no
/// runtime made per call). A few worker threads, so that one call's slow
/// step (a TLS handshake, a lookup) does not hold up the others.
fn runtime() -> std::io::Result<tokio::runtime::Handle> {
    static RUNTIME: Mutex<Option<tokio::runtime::Handle>> = Mutex::new(None);
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = slot.as_ref() {
        return Ok(h.clone());
    }
    // Connection buffers (256 KiB each way) are their own mappings,
    // unmapped when freed: a process whose calls once held many gives the
    // memory back when they end (see `jail::map_large_allocations`).
    jail::map_large_allocations(MAPPED_FROM);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get().clamp(1, MAX_WORKERS))
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("glovebox-egress")
        // `splice(2)` into a socket the peer closed raises SIGPIPE (it has
        // no MSG_NOSIGNAL): blocked on these threads, the call just fails
        // with EPIPE, even in a host program that does not ignore SIGPIPE.
        .on_thread_start(|| {
            let mut pipe = nix::sys::signal::SigSet::empty();
            pipe.add(nix::sys::signal::Signal::SIGPIPE);
            let _ = nix::sys::signal::pthread_sigmask(
                nix::sys::signal::SigmaskHow::SIG_BLOCK,
                Some(&pipe),
                None,
            );
        })
        .enable_all()
        .build()?;
    // Kept until the process exits (a failed start is tried again by the
    // next call).
    let handle = Box::leak(Box::new(runtime)).handle().clone();
    // In the background, while the first call's tool starts.
    prewarm::start(&handle);
    *slot = Some(handle.clone());
    Ok(handle)
}

/// Allocations of this size and up are mappings of their own (glibc's
/// default threshold, kept fixed).
const MAPPED_FROM: usize = 128 << 10;

/// Worker threads of the egress runtime, at most.
const MAX_WORKERS: usize = 4;

impl jail::Gateway for Gateway {
    fn attach(
        &self,
        listener: std::net::TcpListener,
        admission: Option<Arc<jail::broker::Admission>>,
    ) -> std::io::Result<Box<dyn jail::Attached>> {
        listener.set_nonblocking(true)?;
        let handle = runtime()?;
        let listener = {
            let _entered = handle.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (finished, done) = std::sync::mpsc::channel::<()>();
        let rules = self.rules.clone();
        let log = self.log.clone();
        let account = self.account.clone();
        handle.spawn(async move {
            let _finished = finished;
            // Read glovebox's own listeners now, while the tool starts, so
            // the first connection finds them cached (see
            // `listeners::current`).
            let _ = listeners::current();
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
            let mut tasks = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, peer)) = accepted else { continue };
                        // Behind the connect broker: only what it connected.
                        let carried = match &admission {
                            None => Carried::Proxy,
                            Some(a) => match a.admit(peer) {
                                Some(c) => c,
                                None => continue,
                            },
                        };
                        // Over the bound the connection is closed at once.
                        let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
                        // Its descriptors (this socket, the upstream one,
                        // the relay's pipes) are charged before any is
                        // opened; over the call's budget it is refused.
                        let charge = match account.charge(budget::PROXIED_FDS, 0) {
                            Ok(c) => c,
                            Err(over) => {
                                refuse_over_budget(stream, &log, over);
                                continue;
                            }
                        };
                        let (rules, log) = (rules.clone(), log.clone());
                        tasks.spawn(async move {
                            match carried {
                                Carried::Proxy => forward::serve(stream, &rules, &log).await,
                                Carried::To(addr) => {
                                    forward::direct(stream, &rules, &log, addr).await
                                }
                            }
                            drop((permit, charge));
                        });
                    }
                    Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                }
            }
            drop(listener);
            // The tool is gone, so its connections are closing: let them
            // finish what they are recording (a refused TLS handshake, the
            // last bytes) for a moment, then cut what is left.
            let _ = tokio::time::timeout(STOP_GRACE, async {
                while tasks.join_next().await.is_some() {}
            })
            .await;
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        });
        Ok(Box::new(Running {
            stop: Some(stop),
            done: Some(done),
        }))
    }

    fn carries_direct(&self, addr: std::net::SocketAddr) -> bool {
        connect::check_direct(&self.rules, addr).is_ok()
    }

    fn refused_direct(&self, addr: std::net::SocketAddr) {
        let why = match connect::check_direct(&self.rules, addr) {
            Err(r) => format!("a direct connection: {}", r.reason()),
            Ok(()) => "a direct connection the broker did not carry".into(),
        };
        self.log
            .record(&addr.ip().to_string(), addr.port(), "direct", Some(why));
    }

    fn attach_tun(
        &self,
        tun: std::os::fd::OwnedFd,
        dns: Vec<std::os::fd::OwnedFd>,
        tool: Option<Arc<dyn jail::ToolMemory>>,
    ) -> std::io::Result<Box<dyn jail::Attached>> {
        let handle = runtime()?;
        if let Some(tool) = tool {
            self.account.charge_tool(tool);
        }
        let running = transparent::start(
            &handle,
            tun,
            dns,
            self.rules.clone(),
            self.log.clone(),
            self.account.clone(),
        )?;
        Ok(Box::new(running))
    }
}
