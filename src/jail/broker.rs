//! The namespace-free jail's connect broker: egress without a network
//! namespace.
//!
//! With namespaces, a `network: true` call has its own network namespace
//! whose only way out is the egress proxy. Without them (a container's
//! default profile, user namespaces disabled) the call shares the host's
//! network, so the jail's seccomp filter refuses every way a socket could
//! reach an address by itself (`socket` only for inet stream and route
//! netlink, no `listen`, no `MSG_FASTOPEN`, no unix sockets; see
//! [`super::seccomp::Sockets::Brokered`]) and hands `connect` to the
//! supervisor (`SECCOMP_RET_USER_NOTIF`), which for each one:
//! 1. reads the address from the caller's memory (once) and takes the
//!    caller's socket itself (`pidfd_getfd`: the very socket object, which
//!    no later `dup2` of the caller can swap), then checks the notification
//!    is still valid (the pid still names the caller);
//! 2. asks [`decide`] — pure — where the connection may go: the proxy's
//!    published address ([`super::spec::PROXY_ADDR`], what `HTTP_PROXY`
//!    names) is carried to the call's own proxy listener; an address the
//!    gateway carries as it is (an IP the allowlist names, past the SSRF
//!    guard: a raw TCP client's, [`Broker::carries`]) is carried there
//!    too, marked with its destination, and the proxy connects it there
//!    after deciding again; every other address is refused
//!    (`ECONNREFUSED`) and reported to the gateway's log;
//! 3. clears `SO_REUSEADDR`/`SO_REUSEPORT`, binds the socket to a fresh
//!    loopback port (exclusive: no other socket can share it), records
//!    that source address in the call's [`Admission`], and only then
//!    connects it, on the supervisor's side (never
//!    `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, which would let the caller swap
//!    the address or the descriptor between the check and the call).
//!
//! The call's proxy listens on a loopback port of the host, where any
//! local process could reach it: it serves only connections whose source
//! address the broker recorded, each once ([`Admission::admit`]); anything
//! else is closed unread. With Landlock ABI 4 or later the tool also holds
//! no TCP `connect`/`bind` right of its own (a second layer; the broker
//! runs outside the tool's Landlock domain).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use super::sys;

/// What the broker asked of the proxy for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carried {
    /// The tool connected to the proxy: it speaks a proxy protocol.
    Proxy,
    /// The tool connected to this address itself: the proxy decides it
    /// again and relays the connection's bytes there untouched.
    To(SocketAddr),
}

/// The source addresses of the connections the broker made to one call's
/// proxy listener, each admitted once, with what each asked for.
#[derive(Debug, Default)]
pub struct Admission {
    expected: Mutex<HashMap<SocketAddr, Carried>>,
}

impl Admission {
    /// A new, empty admission list.
    pub fn new() -> Arc<Admission> {
        Arc::new(Admission::default())
    }

    /// Records `source` (and what it asks for) before the broker connects
    /// from it.
    pub fn expect(&self, source: SocketAddr, carried: Carried) {
        if let Ok(mut map) = self.expected.lock() {
            map.insert(canonical(source), carried);
        }
    }

    /// Forgets `source` (its connect failed).
    pub fn forget(&self, source: SocketAddr) {
        if let Ok(mut set) = self.expected.lock() {
            set.remove(&canonical(source));
        }
    }

    /// What a connection accepted from `peer` asks for, when it is one the
    /// broker made; once per recorded source (`None` after that).
    pub fn admit(&self, peer: SocketAddr) -> Option<Carried> {
        self.expected
            .lock()
            .ok()
            .and_then(|mut map| map.remove(&canonical(peer)))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (an inet6
/// socket connected to an inet listener is seen there as inet).
fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, v6.port())),
            None => a,
        },
        v4 => v4,
    }
}

/// Where the broker sends one call's connections, and whom it tells of
/// the connections it refuses.
pub struct Broker {
    /// The address the tool is told (`PROXY_ADDR`).
    pub published: SocketAddr,
    /// The call's own proxy listener (a loopback port of the host).
    pub listener: SocketAddr,
    /// The sources the proxy admits.
    pub admission: Arc<Admission>,
    /// Whether the gateway carries a connection to this address as it is
    /// (asked only of addresses other than the published one).
    pub carries: Box<dyn Fn(SocketAddr) -> bool + Send + Sync>,
    /// Told of each refused destination (the egress log).
    pub refused: Box<dyn Fn(SocketAddr) + Send + Sync>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("published", &self.published)
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

/// What a `connect` asked for, decoded from the caller's `sockaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// An inet or inet6 address.
    Inet(SocketAddr),
    /// Another family (`AF_UNSPEC`, netlink, …).
    Other(u16),
}

/// Decodes a `sockaddr` of `bytes` (as long as the caller said).
pub fn decode_sockaddr(bytes: &[u8]) -> Result<Dest, i32> {
    if bytes.len() < 2 {
        return Err(libc::EINVAL);
    }
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    match i32::from(family) {
        libc::AF_INET => {
            if bytes.len() < 16 {
                return Err(libc::EINVAL);
            }
            let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
            Ok(Dest::Inet(SocketAddr::V4(SocketAddrV4::new(
                ip,
                port(bytes),
            ))))
        }
        libc::AF_INET6 => {
            if bytes.len() < 28 {
                return Err(libc::EINVAL);
            }
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&bytes[8..24]);
            let flow = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            let scope = u32::from_ne_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
            Ok(Dest::Inet(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(octets),
                port(bytes),
                flow,
                scope,
            ))))
        }
        _ => Ok(Dest::Other(family)),
    }
}

/// The kind of socket the caller connects, as the supervisor read it from
/// the socket itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketKind {
    /// `SO_DOMAIN`.
    pub domain: i32,
    /// `SO_TYPE`.
    pub ty: i32,
    /// Already bound to a local port or connected.
    pub bound: bool,
    /// Connected (has a peer).
    pub connected: bool,
}

/// The broker's decision for one `connect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Carry it to the call's proxy listener.
    Proxy,
    /// Carry it to the call's proxy listener, for the proxy to connect to
    /// this address.
    Direct(SocketAddr),
    /// Refuse with this errno; `log` says whether the destination goes to
    /// the egress log (a refused destination, not a malformed call).
    Refuse { errno: i32, log: bool },
}

/// Decides one `connect` of `kind` to `dest` (pure): only an inet stream
/// socket, not yet bound or connected, to the published proxy address or
/// to an address the gateway `carries`.
pub fn decide(
    published: SocketAddr,
    kind: SocketKind,
    dest: Dest,
    carries: &dyn Fn(SocketAddr) -> bool,
) -> Route {
    let refuse = |errno| Route::Refuse { errno, log: false };
    if kind.domain != libc::AF_INET && kind.domain != libc::AF_INET6 {
        // Route netlink, the only other family the filter lets a call
        // create: nothing to connect to.
        return refuse(libc::EPERM);
    }
    if kind.ty != libc::SOCK_STREAM {
        return refuse(libc::EPERM);
    }
    if kind.connected {
        return refuse(libc::EISCONN);
    }
    if kind.bound {
        // Bound earlier by the caller (only possible without Landlock's
        // network rights): a port the broker did not choose could be
        // shared with another socket, so it is never connected.
        return refuse(libc::EALREADY);
    }
    let Dest::Inet(addr) = dest else {
        return refuse(libc::EAFNOSUPPORT);
    };
    let addr = canonical(addr);
    if addr == published {
        Route::Proxy
    } else if carries(addr) {
        Route::Direct(addr)
    } else {
        Route::Refuse {
            errno: libc::ECONNREFUSED,
            log: true,
        }
    }
}

/// The loopback address a socket of `domain` binds to before connecting
/// to an inet loopback listener.
fn loopback_source(domain: i32) -> SocketAddr {
    if domain == libc::AF_INET6 {
        SocketAddr::new(IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
    }
}

/// The listener's address as a socket of `domain` connects to it.
fn as_domain(addr: SocketAddr, domain: i32) -> SocketAddr {
    match (addr, domain) {
        (SocketAddr::V4(v4), libc::AF_INET6) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => addr,
    }
}

/// Answers one `connect` notification: `Ok(())` when the connection was
/// made (or is in progress on a non-blocking socket: `EINPROGRESS` is
/// returned as the errno it is), else the errno for the caller.
///
/// The caller's own socket is taken with `pidfd_getfd` and connected.
/// Where a profile refuses `pidfd_getfd` (Docker's default without
/// `CAP_SYS_PTRACE`), the supervisor connects a socket of its own instead
/// and puts it in place of the caller's descriptor
/// (`SECCOMP_IOCTL_NOTIF_ADDFD`, as `dup2` would): the same connection to
/// the proxy, without the options the caller had set on the old socket
/// but its non-blocking mode.
pub fn answer(listener: RawFd, n: &sys::Notice, broker: &Broker) -> Result<(), i32> {
    let fd = i32::try_from(n.args[0] as i64).map_err(|_| libc::EBADF)?;
    let len = usize::try_from(n.args[2] as u32).map_err(|_| libc::EINVAL)?;
    if len > 128 {
        return Err(libc::EINVAL);
    }
    let mut raw = vec![0u8; len];
    if len > 0 {
        let got = sys::read_process(n.pid, n.args[1], &mut raw).map_err(|_| libc::EFAULT)?;
        if got != len {
            return Err(libc::EFAULT);
        }
    }
    let dest = decode_sockaddr(&raw)?;
    let taken = match sys::take_callers_fd(n.pid, fd) {
        Ok(s) => Some(s),
        Err(libc::EPERM | libc::EACCES | libc::ENOSYS) => None,
        Err(e) => return Err(e),
    };
    // The socket and the address were the caller's only if it is still
    // waiting on this notification.
    if !sys::notif_id_valid(listener, n.id) {
        return Err(libc::ESRCH);
    }
    match taken {
        Some(socket) => connect_callers(socket2::Socket::from(socket), dest, broker),
        None => connect_in_place(listener, n, fd, dest, broker),
    }
}

fn errno_of(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Refuses `dest` (reported to the egress log when `log`).
fn refuse(broker: &Broker, dest: Dest, errno: i32, log: bool) -> Result<(), i32> {
    if let (true, Dest::Inet(addr)) = (log, dest) {
        (broker.refused)(addr);
    }
    Err(errno)
}

/// Binds `socket` to a fresh loopback port (no address reuse: no other
/// socket can share it), records that source with what it asks for, and
/// connects it to the call's proxy listener.
fn connect_to_proxy(
    socket: &socket2::Socket,
    domain: i32,
    carried: Carried,
    broker: &Broker,
) -> Result<(), i32> {
    socket.set_reuse_address(false).map_err(errno_of)?;
    socket.set_reuse_port(false).map_err(errno_of)?;
    socket
        .bind(&loopback_source(domain).into())
        .map_err(errno_of)?;
    let source = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or(libc::EADDRNOTAVAIL)?;
    broker.admission.expect(source, carried);
    match socket.connect(&as_domain(broker.listener, domain).into()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let code = errno_of(e);
            if code != libc::EINPROGRESS {
                broker.admission.forget(source);
            }
            Err(code)
        }
    }
}

/// Connects the caller's own socket (taken with `pidfd_getfd`).
fn connect_callers(socket: socket2::Socket, dest: Dest, broker: &Broker) -> Result<(), i32> {
    let domain: i32 = socket.domain().map_err(errno_of)?.into();
    let kind = SocketKind {
        domain,
        ty: socket.r#type().map_err(errno_of)?.into(),
        bound: socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.port() != 0),
        connected: socket.peer_addr().is_ok(),
    };
    match carried(decide(broker.published, kind, dest, &broker.carries)) {
        Err((errno, log)) => refuse(broker, dest, errno, log),
        Ok(carried) => connect_to_proxy(&socket, domain, carried, broker),
    }
}

/// What the proxy is asked for on a route, or the refusal's errno and
/// whether it is logged.
fn carried(route: Route) -> Result<Carried, (i32, bool)> {
    match route {
        Route::Proxy => Ok(Carried::Proxy),
        Route::Direct(addr) => Ok(Carried::To(addr)),
        Route::Refuse { errno, log } => Err((errno, log)),
    }
}

/// Connects a socket of the supervisor's and puts it in place of the
/// caller's descriptor `fd` (which must be a socket).
fn connect_in_place(
    listener: RawFd,
    n: &sys::Notice,
    fd: i32,
    dest: Dest,
    broker: &Broker,
) -> Result<(), i32> {
    let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", n.pid)).map_err(|_| libc::EBADF)?;
    if !link.as_os_str().as_encoded_bytes().starts_with(b"socket:") {
        return Err(libc::ENOTSOCK);
    }
    let flags = std::fs::read_to_string(format!("/proc/{}/fdinfo/{fd}", n.pid))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| i64::from_str_radix(v.trim(), 8).ok())
        })
        .ok_or(libc::EBADF)?;
    if !sys::notif_id_valid(listener, n.id) {
        return Err(libc::ESRCH);
    }
    // The filter lets a brokered call make inet stream sockets only (and
    // route netlink): the family the caller names is its socket's, else
    // its own `connect` would have failed.
    let domain = match dest {
        Dest::Inet(SocketAddr::V4(_)) => libc::AF_INET,
        Dest::Inet(SocketAddr::V6(_)) => libc::AF_INET6,
        Dest::Other(_) => return refuse(broker, dest, libc::EAFNOSUPPORT, false),
    };
    let kind = SocketKind {
        domain,
        ty: libc::SOCK_STREAM,
        bound: false,
        connected: false,
    };
    match carried(decide(broker.published, kind, dest, &broker.carries)) {
        Err((errno, log)) => refuse(broker, dest, errno, log),
        Ok(carried) => {
            let socket =
                socket2::Socket::new(socket2::Domain::from(domain), socket2::Type::STREAM, None)
                    .map_err(errno_of)?;
            connect_to_proxy(&socket, domain, carried, broker)?;
            if flags & i64::from(libc::O_NONBLOCK) != 0 {
                socket.set_nonblocking(true).map_err(errno_of)?;
            }
            let cloexec = flags & i64::from(libc::O_CLOEXEC) != 0;
            sys::notif_replace_fd(listener, n.id, socket.as_raw_fd(), fd, cloexec)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PUBLISHED: SocketAddr =
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 3128));

    fn stream(domain: i32) -> SocketKind {
        SocketKind {
            domain,
            ty: libc::SOCK_STREAM,
            bound: false,
            connected: false,
        }
    }

    fn v4(a: [u8; 4], port: u16) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[4..8].copy_from_slice(&a);
        b
    }

    fn v6(a: Ipv6Addr, port: u16) -> Vec<u8> {
        let mut b = vec![0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[8..24].copy_from_slice(&a.octets());
        b
    }

    /// Gateways carrying no address, or every address, as it is.
    fn none(_: SocketAddr) -> bool {
        false
    }
    fn all(_: SocketAddr) -> bool {
        true
    }

    #[test]
    fn only_the_published_proxy_address_is_carried() {
        let d = |b: &[u8]| decode_sockaddr(b).unwrap();
        assert_eq!(
            decide(
                PUBLISHED,
                stream(libc::AF_INET),
                d(&v4([127, 0, 0, 1], 3128)),
                &none
            ),
            Route::Proxy
        );
        // An inet6 socket naming the proxy by its mapped address.
        let mapped = Ipv4Addr::LOCALHOST.to_ipv6_mapped();
        assert_eq!(
            decide(
                PUBLISHED,
                stream(libc::AF_INET6),
                d(&v6(mapped, 3128)),
                &all
            ),
            Route::Proxy
        );
        let refused = Route::Refuse {
            errno: libc::ECONNREFUSED,
            log: true,
        };
        for dest in [
            v4([127, 0, 0, 1], 3129),
            v4([127, 0, 0, 2], 3128),
            v4([169, 254, 169, 254], 80),
            v4([0, 0, 0, 0], 3128),
            v4([10, 0, 0, 1], 443),
            v6(Ipv6Addr::LOCALHOST, 3128),
            v6(Ipv6Addr::UNSPECIFIED, 3128),
        ] {
            assert_eq!(
                decide(PUBLISHED, stream(libc::AF_INET6), d(&dest), &none),
                refused,
                "{dest:?}"
            );
        }
    }

    #[test]
    fn an_address_the_gateway_carries_goes_to_the_proxy_marked_with_it() {
        let d = |b: &[u8]| decode_sockaddr(b).unwrap();
        let db: SocketAddr = "10.0.0.5:5432".parse().unwrap();
        let only_db = move |a: SocketAddr| a == db;
        assert_eq!(
            decide(
                PUBLISHED,
                stream(libc::AF_INET),
                d(&v4([10, 0, 0, 5], 5432)),
                &only_db
            ),
            Route::Direct(db)
        );
        // Named by an inet6 socket through its mapped form: the same.
        let mapped = Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped();
        assert_eq!(
            decide(
                PUBLISHED,
                stream(libc::AF_INET6),
                d(&v6(mapped, 5432)),
                &only_db
            ),
            Route::Direct(db)
        );
        // Another port, another address: refused and logged.
        for dest in [v4([10, 0, 0, 5], 5433), v4([10, 0, 0, 6], 5432)] {
            assert_eq!(
                decide(PUBLISHED, stream(libc::AF_INET), d(&dest), &only_db),
                Route::Refuse {
                    errno: libc::ECONNREFUSED,
                    log: true
                }
            );
        }
        // The socket's state is checked first, whatever the gateway says.
        let mut k = stream(libc::AF_INET);
        k.bound = true;
        assert!(matches!(
            decide(PUBLISHED, k, d(&v4([10, 0, 0, 5], 5432)), &all),
            Route::Refuse { log: false, .. }
        ));
    }

    #[test]
    fn other_sockets_and_states_are_refused_without_a_log_line() {
        let proxy = decode_sockaddr(&v4([127, 0, 0, 1], 3128)).unwrap();
        let mut k = stream(libc::AF_INET);
        k.ty = libc::SOCK_DGRAM;
        assert!(matches!(
            decide(PUBLISHED, k, proxy, &none),
            Route::Refuse { log: false, .. }
        ));
        let mut k = stream(libc::AF_NETLINK);
        k.ty = libc::SOCK_RAW;
        assert!(matches!(
            decide(PUBLISHED, k, proxy, &none),
            Route::Refuse { log: false, .. }
        ));
        let mut k = stream(libc::AF_INET);
        k.bound = true;
        assert_eq!(
            decide(PUBLISHED, k, proxy, &none),
            Route::Refuse {
                errno: libc::EALREADY,
                log: false
            }
        );
        k.connected = true;
        assert_eq!(
            decide(PUBLISHED, k, proxy, &none),
            Route::Refuse {
                errno: libc::EISCONN,
                log: false
            }
        );
        let unspec = decode_sockaddr(&[0, 0]).unwrap();
        assert!(matches!(
            decide(PUBLISHED, stream(libc::AF_INET), unspec, &all),
            Route::Refuse { log: false, .. }
        ));
    }

    #[test]
    fn short_addresses_are_invalid() {
        assert_eq!(decode_sockaddr(&[]), Err(libc::EINVAL));
        assert_eq!(
            decode_sockaddr(&v4([1, 2, 3, 4], 1)[..8]),
            Err(libc::EINVAL)
        );
        assert_eq!(
            decode_sockaddr(&v6(Ipv6Addr::LOCALHOST, 1)[..20]),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn each_recorded_source_is_admitted_once() {
        let a = Admission::new();
        let src: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let db: SocketAddr = "10.0.0.5:5432".parse().unwrap();
        assert_eq!(a.admit(src), None);
        a.expect(src, Carried::To(db));
        assert_eq!(a.admit("127.0.0.1:40001".parse().unwrap()), None);
        assert_eq!(a.admit(src), Some(Carried::To(db)));
        assert_eq!(a.admit(src), None);
        // Recorded from an inet6 socket, seen by the inet listener.
        a.expect("[::ffff:127.0.0.1]:40002".parse().unwrap(), Carried::Proxy);
        assert_eq!(
            a.admit("127.0.0.1:40002".parse().unwrap()),
            Some(Carried::Proxy)
        );
        a.expect(src, Carried::Proxy);
        a.forget(src);
        assert_eq!(a.admit(src), None);
    }
}
