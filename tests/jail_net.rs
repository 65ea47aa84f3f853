//! Invariant 4 (network: false means no channel out): every kind of socket
//! a tool could use, each against a real listener that must get nothing;
//! and with `--net` (the tool's own namespace behind glovebox's proxy,
//! see `jail_egress.rs`) a program that ignores the proxy reaches no host
//! listener either. `--net=direct` is the control that proves the probe.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixListener};

fn assert_no_connection(l: &TcpListener) {
    l.set_nonblocking(true).unwrap();
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((mut s, addr)) => {
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            panic!(
                "listener got a connection from {addr}: {:?}",
                String::from_utf8_lossy(&buf)
            );
        }
        Err(e) => panic!("accept failed oddly: {e}"),
    }
}

#[test]
fn tcp_ipv4_listener_receives_nothing() {
    require_jail!();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    attack(&[], &["tcp", "127.0.0.1", &port]).assert_blocked();
    assert_no_connection(&l);
}

#[test]
fn tcp_ipv6_listener_receives_nothing() {
    require_jail!();
    let l = TcpListener::bind("[::1]:0").expect("::1 loopback is needed for this test");
    let port = l.local_addr().unwrap().port().to_string();
    attack(&[], &["tcp", "::1", &port]).assert_blocked();
    assert_no_connection(&l);
}

#[test]
fn udp_listener_receives_nothing() {
    require_jail!();
    for host in ["127.0.0.1", "::1"] {
        let s = UdpSocket::bind((host, 0)).unwrap();
        let port = s.local_addr().unwrap().port().to_string();
        attack(&[], &["udp", host, &port]).assert_blocked();
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        match s.recv_from(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("udp listener on {host} got {other:?}"),
        }
    }
}

#[test]
fn pathname_unix_listener_receives_nothing() {
    require_jail!();
    let dir = tempdir();
    let path = dir.path().join("sock");
    let l = UnixListener::bind(&path).unwrap();
    // Even with the socket's directory writable, connect must fail: this
    // kernel's Landlock does not govern pathname unix connect.
    attack(
        &["--write", path_str(dir.path())],
        &["unix", path_str(&path)],
    )
    .assert_blocked();
    l.set_nonblocking(true).unwrap();
    assert!(matches!(l.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    // A datagram socket bound outside gets nothing through a socketpair.
    let dpath = dir.path().join("dgram");
    let d = UnixDatagram::bind(&dpath).unwrap();
    attack(
        &["--write", path_str(dir.path())],
        &["dgram_pair", path_str(&dpath)],
    )
    .assert_blocked();
    d.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(d.recv(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock));
}

#[test]
fn abstract_unix_listener_receives_nothing() {
    require_jail!();
    use std::os::linux::net::SocketAddrExt;
    let name = marker("abstract");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    attack(&[], &["abstract", &name]).assert_blocked();
    l.set_nonblocking(true).unwrap();
    assert!(matches!(l.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
}

#[test]
fn netlink_packet_and_io_uring_are_refused() {
    require_jail!();
    attack(&[], &["netlink"]).assert_blocked();
    attack(&[], &["packet"]).assert_blocked();
    attack(&[], &["io_uring"]).assert_blocked();
    attack(&["--net"], &["io_uring"]).assert_blocked();
}

#[test]
fn socketpairs_and_pipes_inside_the_jail_work() {
    require_jail!();
    let r = attack(&[], &["socketpair_ok"]);
    r.assert_probe_ran();
    assert!(
        r.stdout.contains("SOCKETPAIR-OK") && r.stdout.contains("PIPE-OK"),
        "{r:#?}"
    );
}

#[test]
fn with_the_direct_network_the_same_probe_connects() {
    require_jail!();
    // Proves the probe can reach a listener when it is allowed to, so the
    // blocked results above (and those of `--net`, its own namespace) mean
    // the jail, not a broken probe. `--net=direct` is the explicit way
    // back to the host network, and says so.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let r = attack(&["--net=direct"], &["tcp", "127.0.0.1", &port]);
    assert!(
        r.json["warnings"].to_string().contains("direct network"),
        "{r:#?}"
    );
    r.assert_probe_ran();
    assert!(r.stdout.contains("ESCAPED"), "{r:#?}");
    let (mut s, _) = l.accept().unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    assert_eq!(buf, b"GLOVEBOX-CANARY-PAYLOAD");
}

#[test]
fn with_network_through_glovebox_host_listeners_get_nothing() {
    require_jail!();
    // `--net`: its own namespace, nothing but the proxy on loopback (or,
    // without namespaces, the connect broker: only the proxy's address is
    // connected, by the supervisor); a program that ignores the proxy
    // reaches no host listener.
    for host in ["127.0.0.1", "::1"] {
        let l = TcpListener::bind((host, 0)).unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let r = attack(&["--net"], &["tcp", host, &port]);
        r.assert_blocked();
        r.assert_behind_the_proxy();
        assert_no_connection(&l);
        if namespace_free() {
            // The broker's refusal is in the call's egress log.
            let logged = r.json["egress"].as_array().into_iter().flatten().any(|c| {
                c["via"] == "direct"
                    && c["allowed"] == false
                    && c["port"].as_u64() == port.parse::<u64>().ok()
            });
            assert!(logged, "no direct refusal logged: {r:#?}");
        }
        // UDP to the same address lands on the namespace's own loopback
        // (the send itself may succeed), or is refused (the broker's jail
        // makes no UDP socket): the host's socket gets nothing.
        let u = UdpSocket::bind((host, 0)).unwrap();
        let uport = u.local_addr().unwrap().port().to_string();
        attack(&["--net"], &["udp", host, &uport]).assert_probe_ran();
        u.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        match u.recv_from(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("udp listener on {host} got {other:?}"),
        }
        // Control: the host network, explicitly, delivers the datagram.
        attack(&["--net=direct"], &["udp", host, &uport]).assert_probe_ran();
        u.set_nonblocking(false).unwrap();
        u.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let (n, _) = u
            .recv_from(&mut buf)
            .expect("the direct control's datagram");
        assert_eq!(&buf[..n], b"GLOVEBOX-CANARY-PAYLOAD");
    }
    // Unix sockets of the host, even in a directory the tool may write
    // (unix sockets are not per network namespace): no unix socket at all.
    let dir = tempdir();
    let path = dir.path().join("sock");
    let ul = UnixListener::bind(&path).unwrap();
    attack(
        &["--net", "--write", path_str(dir.path())],
        &["unix", path_str(&path)],
    )
    .assert_blocked();
    ul.set_nonblocking(true).unwrap();
    assert!(matches!(ul.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    let dpath = dir.path().join("dgram");
    let d = UnixDatagram::bind(&dpath).unwrap();
    attack(
        &["--net", "--write", path_str(dir.path())],
        &["dgram_pair", path_str(&dpath)],
    )
    .assert_blocked();
    d.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(d.recv(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock));
    // Control: the host network, explicitly, does reach it.
    attack(
        &["--net=direct", "--write", path_str(dir.path())],
        &["unix", path_str(&path)],
    )
    .assert_probe_ran();
    assert!(
        ul.accept().is_ok(),
        "the direct-network control did not connect"
    );
    let name = marker("abstract-net");
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    attack(&["--net"], &["abstract", &name]).assert_blocked();
    l.set_nonblocking(true).unwrap();
    assert!(matches!(l.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
}

/// This machine's first non-loopback IPv4 address (where the route to a
/// private address leaves from; no packet is sent).
fn host_address() -> std::net::Ipv4Addr {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("10.255.255.1:9").unwrap();
    match s.local_addr().unwrap().ip() {
        std::net::IpAddr::V4(a) if !a.is_loopback() => a,
        other => panic!("no non-loopback IPv4 address here: {other}"),
    }
}

/// UDP (QUIC included) leaves nothing on the host with the network through
/// glovebox, also where transparent egress gives the jail a default route
/// through its TUN device (so a datagram to a real address does leave the
/// namespace, unlike one to loopback above): a datagram to this machine's
/// own non-loopback address, as IPv4 and IPv4-mapped IPv6, with that
/// address in the allowlist (TCP to it would be carried) and private
/// addresses allowed, reaches no UDP listener there. Without the device
/// the send finds no route; behind the broker no UDP socket is made. The
/// datagram sent with `--net=direct` arrives (the control).
#[test]
fn with_network_through_glovebox_udp_to_the_hosts_own_address_gets_nothing() {
    require_jail!();
    let host = host_address().to_string();
    let u = UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = u.local_addr().unwrap().port().to_string();
    for target in [host.clone(), format!("::ffff:{host}")] {
        let r = attack(
            &["--net", "--allow-private", "--allow-host", &host],
            &["udp", &target, &port],
        );
        r.assert_probe_ran();
        r.assert_behind_the_proxy();
    }
    u.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 64];
    match u.recv_from(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("udp listener on {host} got {other:?}"),
    }
    attack(&["--net=direct"], &["udp", &host, &port]).assert_probe_ran();
    u.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let (n, _) = u
        .recv_from(&mut buf)
        .expect("the direct control's datagram");
    assert_eq!(&buf[..n], b"GLOVEBOX-CANARY-PAYLOAD");
}

#[test]
fn network_namespace_layer_also_blocks() {
    require_jail!();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let r = attack(&["--netns"], &["tcp", "127.0.0.1", &port]);
    r.assert_blocked();
    // The namespace-free jail has no network namespace to add: seccomp
    // (and Landlock's TCP rules) are the layers, and the effect is the same.
    assert_eq!(
        r.json["enforcement"]["net_namespace"],
        !namespace_free(),
        "{r:#?}"
    );
    assert_no_connection(&l);
}

/// Socket families a tool could use to get around its network namespace
/// (`AF_VSOCK` reaches the hypervisor and the host whatever the
/// namespace), or whose kernel code is attack surface with no use behind
/// the proxy, as FAMILY:TYPE:PROTOCOL.
const HOSTILE_FAMILIES: [&str; 14] = [
    "40:1:0",  // AF_VSOCK stream
    "40:2:0",  // AF_VSOCK datagram
    "31:5:0",  // AF_BLUETOOTH
    "30:5:0",  // AF_TIPC
    "29:3:1",  // AF_CAN raw
    "38:5:0",  // AF_ALG
    "44:3:0",  // AF_XDP
    "21:5:0",  // AF_RDS
    "42:2:0",  // AF_QIPCRTR
    "41:2:0",  // AF_KCM
    "17:3:0",  // AF_PACKET
    "1:1:0",   // AF_UNIX
    "16:3:9",  // netlink audit
    "16:2:15", // netlink uevents
];

/// Each FAMILY line of a `families` probe run, as (spec, outcome).
fn family_lines(r: &Run) -> Vec<(String, String)> {
    r.stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("FAMILY ")?.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

#[test]
fn behind_the_proxy_only_inet_and_route_netlink_sockets_can_be_made() {
    require_jail!();
    let mut args = vec!["families"];
    args.extend_from_slice(&HOSTILE_FAMILIES);
    // Off: every family is refused by the filter, inet included.
    let mut off = args.clone();
    off.extend_from_slice(&["2:1:0", "10:1:0"]);
    let r = attack(&[], &off);
    r.assert_blocked();
    let lines = family_lines(&r);
    assert_eq!(lines.len(), off.len() - 1, "{r:#?}");
    assert!(lines.iter().all(|(_, o)| o == "EPERM"), "{r:#?}");
    // Behind the proxy: refused by the filter (EPERM, not the kernel's
    // EAFNOSUPPORT: the refusal does not depend on what this kernel has).
    let r = attack(&["--net"], &args);
    r.assert_blocked();
    let lines = family_lines(&r);
    assert_eq!(lines.len(), HOSTILE_FAMILIES.len(), "{r:#?}");
    for (spec, outcome) in &lines {
        assert_eq!(outcome, "EPERM", "{spec}: {r:#?}");
    }
    // What a networked tool needs is there: inet both ways, and route
    // netlink for its own interfaces (libc's lookups read them). Behind
    // the connect broker (no namespace: the host's network) only TCP:
    // no UDP or raw socket, no SCTP or MPTCP, which would send to an
    // address without a `connect` the broker decides.
    let r = attack(
        &["--net"],
        &[
            "families", "2:1:0", "10:1:0", "2:1:6", "16:3:0", "2:2:0", "10:2:0", "2:3:255",
            "2:1:132", "2:1:262", "10:5:132",
        ],
    );
    let lines = family_lines(&r);
    assert_eq!(lines.len(), 10, "{r:#?}");
    for (spec, outcome) in &lines {
        let tcp_or_route = ["2:1:0", "10:1:0", "2:1:6", "16:3:0"].contains(&spec.as_str());
        let udp = ["2:2:0", "10:2:0"].contains(&spec.as_str());
        if tcp_or_route || (udp && !namespace_free()) {
            assert_eq!(outcome, "made", "{spec}: {r:#?}");
        } else if namespace_free() {
            assert_eq!(outcome, "EPERM", "{spec}: {r:#?}");
        }
    }
    // Control: with the host network, explicitly, the filter lets vsock
    // through (made, or the kernel's own refusal where it has none).
    let r = attack(&["--net=direct"], &["families", "40:1:0"]);
    let lines = family_lines(&r);
    assert_eq!(lines.len(), 1, "{r:#?}");
    assert_ne!(lines[0].1, "EPERM", "{r:#?}");
}

/// Behind the connect broker (no network namespace), the ways a TCP socket
/// could reach an address without a `connect` the supervisor makes: a
/// send with `MSG_FASTOPEN`, a server of its own (`listen`), and a
/// `connect` whose address a second process rewrites in shared memory
/// while the supervisor decides (300 rounds at least). The host listener
/// gets nothing in every case; in
/// the race, the connections that succeed went to the proxy. With a
/// network namespace the same attacks meet the namespace's own loopback.
#[test]
fn no_tcp_socket_reaches_an_address_past_the_proxy() {
    require_jail!();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    attack(&["--net"], &["fastopen", "127.0.0.1", &port]).assert_blocked();
    assert_no_connection(&l);
    let r = attack(&["--net"], &["connect_race", "127.0.0.1", &port]);
    r.assert_blocked();
    let race = r
        .stdout
        .lines()
        .find(|l| l.starts_with("RACE"))
        .unwrap_or_else(|| panic!("no RACE line: {r:#?}"))
        .to_string();
    // The race ran both ways: some connections made (to the proxy), some
    // refused (the other address was read).
    let n: Vec<u32> = race
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 2, "{race}");
    assert!(n[0] > 0, "no connection reached the proxy: {race}");
    assert!(n[1] > 0, "no connection was refused: {race}");
    assert_no_connection(&l);
    if namespace_free() {
        // No server on the host's network.
        let r = attack(&["--net"], &["listen"]);
        r.assert_blocked();
        assert!(!r.stdout.contains("LISTENING"), "{r:#?}");
    }
}
