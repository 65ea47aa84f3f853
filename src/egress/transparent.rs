//! Transparent egress: a client that ignores the proxy variables (a raw
//! socket, a database driver, `ssh`, Node's `fetch`) reaches the hosts
//! its allowlist names, by name, and nothing else.
//!
//! The call's network namespace has a TUN device ([`crate::jail::TUN`],
//! made by the child, its descriptor handed to the supervisor like the
//! proxy's listener) and every route but loopback's goes through it. The
//! supervisor reads its packets:
//!
//! - a DNS question (UDP port 53, to any address: the host's
//!   `resolv.conf` names a server the route sends here; or to a loopback
//!   address of [`crate::jail::network::LoopbackDns`], on a socket the
//!   child bound there) for a name the
//!   allowlist names on some port gets an address of [`super::fakedns`]
//!   (`AAAA` and other types: no record, so clients use that address);
//!   any other name gets "no such name", logged as a refusal;
//! - a TCP connection (SYN) to a fake address is mapped back to its
//!   name and decided exactly as the proxy decides a `CONNECT`:
//!   [`decide::check_host`] at once (a refusal is a reset, logged), then
//!   [`connect::open`] (resolve, SSRF guard on every address, glovebox's
//!   own listeners, connect to exactly a checked address) once the
//!   user-space stack ([`super::stack`], smoltcp's TCP) has accepted it; its bytes are then
//!   relayed and counted in the egress log like a proxied connection's;
//! - a SYN to any other address (a real one the tool knows) is decided
//!   as that IP, exactly as the proxy decides a `CONNECT` to it: the
//!   allowlist must name the IP literal (and port), the SSRF guard judges
//!   it (metadata's 169.254.169.254 never passes); refused, it is reset
//!   and logged. A name is only ever decided by name: the tool's own DNS
//!   answer never selects one;
//! - a SYN to a fake address never handed out is reset and logged;
//! - other UDP, IPv6 and anything else are dropped (UDP logged once per
//!   destination).
//!
//! Placeholder secrets are swapped on the proxy path only: a transparent
//! connection to one of their hosts is relayed untouched (the value is
//! never added to it).

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

use super::stack::{Ingress, Stack};

use super::budget::{self, Account, Charge};
use super::connect::{self, Rules};
use super::dns::{self, Answer};
use super::fakedns::FakeDns;
use super::log::{Entry, Log};
use crate::net::decide::{self, Refusal};
use crate::net::Host;

/// How a transparent connection is shown in the egress log.
pub const VIA_TCP: &str = "tcp";
/// How a refused DNS question is shown (port 0).
pub const VIA_DNS: &str = "dns";
/// How dropped UDP is shown.
pub const VIA_UDP: &str = "udp";

/// Why a connection to an address glovebox's DNS did not give is reset.
pub const NOT_BY_NAME: &str =
    "not an address from glovebox's DNS: connect by host name (transparent egress decides by name)";

/// Refused names and UDP destinations logged per call (each once); more
/// are refused without a line of their own.
const MAX_NOTED: usize = 256;

/// What the TUN service of one call shares between its packets and its
/// connections.
struct Shared {
    rules: Arc<Rules>,
    log: Log,
    dns: Mutex<FakeDns>,
    noted: Mutex<HashSet<String>>,
    /// The SYNs already passed to the stack (source port, destination,
    /// initial sequence number): a resent one is dropped, as the stack
    /// would make a second connection of it (the first one's SYN-ACK
    /// answers the client).
    syns: Mutex<HashSet<(u16, Ipv4Addr, u16, u32)>>,
    /// The call's account: each connection's upstream socket and buffers
    /// are charged to it before the stack makes its socket.
    account: Arc<Account>,
}

/// SYNs remembered for [`Shared::syns`]; the set starts over when full.
const MAX_SYNS: usize = 4096;

impl Shared {
    /// True the first time `key` is seen (up to [`MAX_NOTED`] keys).
    fn first_time(&self, key: String) -> bool {
        let mut noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
        noted.len() < MAX_NOTED && noted.insert(key)
    }

    /// True when the allowlist names `host` on some port (or there is no
    /// allowlist).
    fn names(&self, host: &Host) -> bool {
        match &self.rules.allow {
            Some(list) => list.names(host),
            None => true,
        }
    }

    fn name_of(&self, addr: Ipv4Addr) -> Option<String> {
        let dns = self.dns.lock().unwrap_or_else(|p| p.into_inner());
        dns.name_of(addr).map(str::to_string)
    }
}

/// What becomes of one packet from the jail.
#[derive(Debug)]
enum Verdict {
    /// To the TCP stack.
    Pass,
    /// To the TCP stack, opening a connection to this destination (its
    /// charge held for as long as it lives).
    Open(SocketAddrV4, Charge),
    /// Answered at once with this packet.
    Reply(Vec<u8>),
    /// Dropped.
    Drop,
}

/// Decides one packet from the jail.
fn classify(shared: &Shared, packet: &[u8]) -> Verdict {
    let Ok(p) = SlicedPacket::from_ip(packet) else {
        return Verdict::Drop;
    };
    let Some(NetSlice::Ipv4(ip)) = &p.net else {
        return Verdict::Drop;
    };
    let (src, dst) = (ip.header().source_addr(), ip.header().destination_addr());
    match &p.transport {
        Some(TransportSlice::Tcp(tcp)) => {
            // Only a new connection is decided here; the stack answers
            // the rest (a segment of no connection of its own: a reset).
            if !tcp.syn() || tcp.ack() {
                return Verdict::Pass;
            }
            let port = tcp.destination_port();
            let refusal = match destination(shared, dst) {
                None => Some((dst.to_string(), NOT_BY_NAME.to_string())),
                Some((shown, host)) => decide::check_host(&shared.rules, &host, port)
                    .err()
                    .map(|r| (shown, r.reason())),
            };
            match refusal {
                None => {
                    let key = (tcp.source_port(), dst, port, tcp.sequence_number());
                    let mut syns = shared.syns.lock().unwrap_or_else(|p| p.into_inner());
                    if syns.contains(&key) {
                        return Verdict::Drop;
                    }
                    // Its upstream socket and its buffers, charged before
                    // the stack makes the socket: over the call's budget
                    // the connection is reset and logged.
                    let charge = match shared
                        .account
                        .charge(budget::TRANSPARENT_FDS, super::stack::CONNECTION_BYTES)
                    {
                        Ok(c) => c,
                        Err(over) => {
                            let shown = destination(shared, dst)
                                .map_or_else(|| dst.to_string(), |(shown, _)| shown);
                            shared
                                .log
                                .record(&shown, port, VIA_TCP, Some(over.reason()));
                            return reset(dst, src, port, tcp.source_port(), tcp.sequence_number())
                                .map_or(Verdict::Drop, Verdict::Reply);
                        }
                    };
                    if syns.len() >= MAX_SYNS {
                        syns.clear();
                    }
                    syns.insert(key);
                    Verdict::Open(SocketAddrV4::new(dst, port), charge)
                }
                Some((host, why)) => {
                    shared.log.record(&host, port, VIA_TCP, Some(why));
                    reset(dst, src, port, tcp.source_port(), tcp.sequence_number())
                        .map_or(Verdict::Drop, Verdict::Reply)
                }
            }
        }
        Some(TransportSlice::Udp(udp)) if udp.destination_port() == 53 => {
            match answer_dns(shared, udp.payload()) {
                Some(reply) => udp_reply(dst, src, udp.source_port(), &reply)
                    .map_or(Verdict::Drop, Verdict::Reply),
                None => Verdict::Drop,
            }
        }
        Some(TransportSlice::Udp(udp)) => {
            let port = udp.destination_port();
            if shared.first_time(format!("udp {dst}:{port}")) {
                shared.log.record(
                    &dst.to_string(),
                    port,
                    VIA_UDP,
                    Some("udp other than dns is not carried".into()),
                );
            }
            Verdict::Drop
        }
        _ => Verdict::Drop,
    }
}

/// Where a connection to `dst` goes, as shown in the log and as decided:
/// the name of a fake address glovebox's DNS gave; any other address as
/// the IP it is (decided like a `CONNECT` to that IP: the allowlist must
/// name it as a literal, and the SSRF guard judges it); `None` for a
/// fake address never handed out.
fn destination(shared: &Shared, dst: Ipv4Addr) -> Option<(String, Host)> {
    match shared.name_of(dst) {
        Some(name) => Some((name.clone(), Host::Name(name))),
        None if super::fakedns::in_range(dst) => None,
        None => Some((dst.to_string(), Host::Ip(dst.into()))),
    }
}

/// The answer to a DNS question, or `None` for no answer at all.
fn answer_dns(shared: &Shared, payload: &[u8]) -> Option<Vec<u8>> {
    let q = dns::parse(payload)?;
    let answer = match Host::parse(&q.name) {
        Some(Host::Name(name)) if shared.names(&Host::Name(name.clone())) => {
            let mut table = shared.dns.lock().unwrap_or_else(|p| p.into_inner());
            match table.address_for(&name) {
                Some(a) if q.wants_address() => Answer::Address(a),
                Some(_) => Answer::NoData,
                None => Answer::Refused,
            }
        }
        _ => {
            // Reverse lookups are no destination: answered, not logged.
            if !q.name.ends_with(".arpa") && shared.first_time(format!("dns {}", q.name)) {
                shared
                    .log
                    .record(&q.name, 0, VIA_DNS, Some(Refusal::NotAllowed.reason()));
            }
            Answer::NoSuchName
        }
    };
    Some(dns::respond(&q, answer))
}

/// A reset answering a SYN from `to`:`to_port` (sequence `seq`) sent to
/// `from`:`from_port`.
fn reset(from: Ipv4Addr, to: Ipv4Addr, from_port: u16, to_port: u16, seq: u32) -> Option<Vec<u8>> {
    let b = PacketBuilder::ipv4(from.octets(), to.octets(), 64)
        .tcp(from_port, to_port, 0, 0)
        .rst()
        .ack(seq.wrapping_add(1));
    let mut out = Vec::with_capacity(b.size(0));
    b.write(&mut out, &[]).ok()?;
    Some(out)
}

/// A UDP datagram from `from`:53 to `to`:`to_port` carrying `payload`.
fn udp_reply(from: Ipv4Addr, to: Ipv4Addr, to_port: u16, payload: &[u8]) -> Option<Vec<u8>> {
    let b = PacketBuilder::ipv4(from.octets(), to.octets(), 64).udp(53, to_port);
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).ok()?;
    Some(out)
}

/// Serves the call's TUN device on `handle` until the returned value is
/// dropped (which closes the device; it goes with the namespace).
pub(super) fn start(
    handle: &tokio::runtime::Handle,
    tun: OwnedFd,
    dns: Vec<OwnedFd>,
    rules: Arc<Rules>,
    log: Log,
    account: Arc<Account>,
) -> io::Result<super::Running> {
    nix::fcntl::fcntl(
        &tun,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )?;
    let mtu = usize::try_from(crate::jail::TUN.mtu).map_err(io::Error::other)?;
    let shared = Arc::new(Shared {
        rules,
        log,
        dns: Mutex::new(FakeDns::new()),
        noted: Mutex::new(HashSet::new()),
        syns: Mutex::new(HashSet::new()),
        account,
    });
    // The device's registration and the stack's timer belong to the
    // egress runtime.
    let _entered = handle.enter();
    let tun = Arc::new(crate::jail::sys_async_fd(tun)?);
    let dns = dns
        .into_iter()
        .map(|fd| {
            let sock = std::net::UdpSocket::from(fd);
            sock.set_nonblocking(true)?;
            tokio::net::UdpSocket::from_std(sock)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let (opened_tx, mut opened) = tokio::sync::mpsc::unbounded_channel();
    let (decided_tx, decided) = tokio::sync::mpsc::unbounded_channel();
    let judge = shared.clone();
    let decide = Box::new(move |packet: &[u8]| match classify(&judge, packet) {
        Verdict::Pass => Ingress::Pass,
        Verdict::Open(dst, charge) => Ingress::Open(dst, charge),
        Verdict::Reply(p) => Ingress::Reply(p),
        Verdict::Drop => Ingress::Drop,
    });
    let mut stack = Box::pin(Stack::new(tun, mtu, decide, opened_tx, decided));
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let (finished, done) = std::sync::mpsc::channel::<()>();
    handle.spawn(async move {
        let _finished = finished;
        let mut tasks = tokio::task::JoinSet::new();
        let mut servers = tokio::task::JoinSet::new();
        for sock in dns {
            servers.spawn(serve_loopback_dns(sock, shared.clone()));
        }
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                // The device failed: no more packets.
                _ = &mut stack => break,
                Some((id, dst)) = opened.recv() => {
                    let (shared, decided) = (shared.clone(), decided_tx.clone());
                    tasks.spawn(async move {
                        let _ = decided.send((id, decide_one(dst, &shared).await));
                    });
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        let _ = tokio::time::timeout(super::STOP_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
        servers.abort_all();
        while tasks.join_next().await.is_some() {}
        while servers.join_next().await.is_some() {}
        // Its sockets' buffers are freed here: given back to the kernel,
        // not kept by the allocator for the process's life.
        let held_buffers = stack.held_buffers();
        drop(stack);
        if held_buffers {
            crate::jail::return_freed_memory();
        }
    });
    Ok(super::Running {
        stop: Some(stop),
        done: Some(done),
    })
}

/// Answers the DNS questions sent to one loopback address of the call's
/// namespace (its socket bound there by the child) as those through the
/// device are answered, until the call ends.
async fn serve_loopback_dns(sock: tokio::net::UdpSocket, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 4096];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf).await else {
            return;
        };
        if let Some(reply) = answer_dns(&shared, &buf[..n]) {
            let _ = sock.send_to(&reply, from).await;
        }
    }
}

/// The decision on one connection the stack accepted, by the name of
/// its fake address: the connected host socket and its log entry, or
/// `None` (refused, logged).
async fn decide_one(
    dst: SocketAddrV4,
    shared: &Shared,
) -> Option<(tokio::net::TcpStream, Arc<Entry>)> {
    let port = dst.port();
    let Some((shown, host)) = destination(shared, *dst.ip()) else {
        // `classify` resets these; refused here too.
        shared.log.record(
            &dst.ip().to_string(),
            port,
            VIA_TCP,
            Some(NOT_BY_NAME.into()),
        );
        return None;
    };
    match connect::open(&shared.rules, &host, port).await {
        Ok(upstream) => Some((upstream, shared.log.record(&shown, port, VIA_TCP, None))),
        Err(r) => {
            shared.log.record(&shown, port, VIA_TCP, Some(r.reason()));
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::net::allow::Allowlist;

    fn shared(allow: &[&str]) -> Shared {
        Shared {
            rules: Arc::new(Rules {
                allow: Some(Allowlist::parse(allow).unwrap()),
                ..Rules::default()
            }),
            log: Log::default(),
            dns: Mutex::new(FakeDns::new()),
            noted: Mutex::new(HashSet::new()),
            syns: Mutex::new(HashSet::new()),
            account: Arc::new(Account::new(budget::Bounds {
                fds_per_call: 1000,
                fds_total: 1 << 20,
                bytes_per_call: 1 << 40,
                bytes_total: 1 << 50,
            })),
        }
    }

    /// The destination of an opened connection.
    fn opened(v: &Verdict) -> Option<SocketAddrV4> {
        match v {
            Verdict::Open(dst, _) => Some(*dst),
            _ => None,
        }
    }

    fn dropped(v: &Verdict) -> bool {
        matches!(v, Verdict::Drop)
    }

    const JAIL: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    fn syn(dst: Ipv4Addr, port: u16) -> Vec<u8> {
        syn_from(40000, dst, port)
    }

    fn syn_from(source_port: u16, dst: Ipv4Addr, port: u16) -> Vec<u8> {
        let b = PacketBuilder::ipv4(JAIL.octets(), dst.octets(), 64)
            .tcp(source_port, port, 1000, 65535)
            .syn();
        let mut out = Vec::new();
        b.write(&mut out, &[]).unwrap();
        out
    }

    fn dns_query(name: &str, qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        let b = PacketBuilder::ipv4(JAIL.octets(), [10, 255, 255, 53], 64).udp(5353, 53);
        let mut out = Vec::new();
        b.write(&mut out, &m).unwrap();
        out
    }

    /// The DNS answer's address (the last four bytes of an A answer).
    fn answered(v: &Verdict) -> (u8, Option<Ipv4Addr>) {
        let Verdict::Reply(p) = v else {
            panic!("no reply: {v:?}")
        };
        let s = SlicedPacket::from_ip(p).unwrap();
        let Some(TransportSlice::Udp(u)) = s.transport else {
            panic!("not udp")
        };
        assert_eq!(u.source_port(), 53);
        assert_eq!(u.destination_port(), 5353);
        let m = u.payload();
        let rcode = m[3] & 0x0f;
        let addr = (m[7] == 1).then(|| {
            let a = &m[m.len() - 4..];
            Ipv4Addr::new(a[0], a[1], a[2], a[3])
        });
        (rcode, addr)
    }

    fn is_reset(v: &Verdict) -> bool {
        let Verdict::Reply(p) = v else { return false };
        let s = SlicedPacket::from_ip(p).unwrap();
        matches!(s.transport, Some(TransportSlice::Tcp(t)) if t.rst() && t.acknowledgment_number() == 1001)
    }

    #[test]
    fn allowed_names_get_a_fake_address_and_connect_by_it() {
        let s = shared(&["pypi.org:443"]);
        let (rcode, addr) = answered(&classify(&s, &dns_query("pypi.org", 1)));
        assert_eq!(rcode, 0);
        let addr = addr.unwrap();
        assert!(super::super::fakedns::in_range(addr));
        // AAAA: the name exists, no record.
        assert_eq!(
            answered(&classify(&s, &dns_query("pypi.org", 28))),
            (0, None)
        );
        let first = classify(&s, &syn(addr, 443));
        assert_eq!(opened(&first), Some(SocketAddrV4::new(addr, 443)));
        // The same SYN again (resent): not a second connection.
        assert!(dropped(&classify(&s, &syn(addr, 443))));
        // Another port of the same name: reset and logged.
        assert!(is_reset(&classify(&s, &syn(addr, 22))));
        let log = s.log.connections().0;
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(log[0].host, "pypi.org");
        assert_eq!(log[0].port, 22);
        assert!(!log[0].allowed);
    }

    #[test]
    fn a_connection_past_the_calls_budget_is_reset_and_logged() {
        let mut s = shared(&["pypi.org:443"]);
        s.account = Arc::new(Account::new(budget::Bounds {
            fds_per_call: budget::TRANSPARENT_FDS,
            fds_total: 1 << 20,
            bytes_per_call: 1 << 40,
            bytes_total: 1 << 50,
        }));
        let addr = answered(&classify(&s, &dns_query("pypi.org", 1)))
            .1
            .unwrap();
        let first = classify(&s, &syn_from(40001, addr, 443));
        assert!(opened(&first).is_some());
        assert_eq!(s.account.held().fds, budget::TRANSPARENT_FDS);
        // A second one at once: over the call's descriptors, reset.
        assert!(is_reset_of(
            &classify(&s, &syn_from(40002, addr, 443)),
            40002
        ));
        let log = s.log.connections().0;
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!((log[0].host.as_str(), log[0].port), ("pypi.org", 443));
        assert!(!log[0].allowed);
        assert!(log[0].reason.as_deref().unwrap().contains("descriptors"));
        // The first one over: its charge is back, and another gets in.
        drop(first);
        assert_eq!(s.account.held().fds, 0);
        assert!(opened(&classify(&s, &syn_from(40003, addr, 443))).is_some());
    }

    fn is_reset_of(v: &Verdict, port: u16) -> bool {
        let Verdict::Reply(p) = v else { return false };
        let s = SlicedPacket::from_ip(p).unwrap();
        matches!(s.transport, Some(TransportSlice::Tcp(t)) if t.rst() && t.destination_port() == port)
    }

    #[test]
    fn other_names_and_addresses_are_refused_and_logged() {
        let s = shared(&["pypi.org:443"]);
        assert_eq!(
            answered(&classify(&s, &dns_query("evil.example", 1))),
            (3, None)
        );
        // Asked again (A and AAAA, retries): logged once.
        assert_eq!(
            answered(&classify(&s, &dns_query("evil.example", 28))),
            (3, None)
        );
        // A real address, metadata's, a fake one never handed out.
        for dst in [
            Ipv4Addr::new(127, 0, 0, 1),
            Ipv4Addr::new(169, 254, 169, 254),
            Ipv4Addr::new(198, 18, 0, 99),
        ] {
            assert!(is_reset(&classify(&s, &syn(dst, 443))), "{dst}");
        }
        let log = s.log.connections().0;
        let hosts: Vec<_> = log
            .iter()
            .map(|c| (c.host.as_str(), c.via, c.allowed))
            .collect();
        assert_eq!(
            hosts,
            [
                ("evil.example", VIA_DNS, false),
                ("127.0.0.1", VIA_TCP, false),
                ("169.254.169.254", VIA_TCP, false),
                ("198.18.0.99", VIA_TCP, false),
            ]
        );
        // Real addresses: the allowlist names no IP literal.
        assert!(log[1].reason.as_deref().unwrap().contains("allowlist"));
        assert!(log[2].reason.as_deref().unwrap().contains("allowlist"));
        assert!(log[3].reason.as_deref().unwrap().contains("by host name"));
    }

    #[test]
    fn an_ip_literal_the_allowlist_names_is_opened_as_that_ip() {
        let s = shared(&["10.0.0.5:5432", "pypi.org:443"]);
        let db = Ipv4Addr::new(10, 0, 0, 5);
        assert_eq!(
            opened(&classify(&s, &syn(db, 5432))),
            Some(SocketAddrV4::new(db, 5432))
        );
        // Another port of it, and a fake address it was never given.
        assert!(is_reset(&classify(&s, &syn(db, 22))));
        assert!(is_reset(&classify(
            &s,
            &syn(Ipv4Addr::new(198, 18, 0, 16), 5432)
        )));
        let log = s.log.connections().0;
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!((log[0].host.as_str(), log[0].port), ("10.0.0.5", 22));
        assert!(log[1].reason.as_deref().unwrap().contains("by host name"));
    }

    #[test]
    fn other_udp_and_ipv6_are_dropped() {
        let s = shared(&["pypi.org:443"]);
        let b = PacketBuilder::ipv4(JAIL.octets(), [1, 1, 1, 1], 64).udp(5000, 443);
        let mut quic = Vec::new();
        b.write(&mut quic, b"hello").unwrap();
        assert!(dropped(&classify(&s, &quic)));
        assert!(dropped(&classify(&s, &quic)));
        assert_eq!(s.log.connections().0.len(), 1);
        let b = PacketBuilder::ipv6([0; 16], [1; 16], 64)
            .tcp(1, 443, 0, 100)
            .syn();
        let mut v6 = Vec::new();
        b.write(&mut v6, &[]).unwrap();
        assert!(dropped(&classify(&s, &v6)));
        assert!(dropped(&classify(&s, b"junk")));
    }
}
