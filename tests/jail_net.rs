//! Invariant 2 (network: false means no channel out): every kind of socket
//! a tool could use, each against a real listener that must get nothing.

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
    if !jail_available() {
        return;
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    attack(&[], &["tcp", "127.0.0.1", &port]).assert_blocked();
    assert_no_connection(&l);
}

#[test]
fn tcp_ipv6_listener_receives_nothing() {
    if !jail_available() {
        return;
    }
    let l = TcpListener::bind("[::1]:0").expect("::1 loopback is needed for this test");
    let port = l.local_addr().unwrap().port().to_string();
    attack(&[], &["tcp", "::1", &port]).assert_blocked();
    assert_no_connection(&l);
}

#[test]
fn udp_listener_receives_nothing() {
    if !jail_available() {
        return;
    }
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
    if !jail_available() {
        return;
    }
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
    if !jail_available() {
        return;
    }
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
    if !jail_available() {
        return;
    }
    attack(&[], &["netlink"]).assert_blocked();
    attack(&[], &["packet"]).assert_blocked();
    attack(&[], &["io_uring"]).assert_blocked();
    attack(&["--net"], &["io_uring"]).assert_blocked();
}

#[test]
fn socketpairs_and_pipes_inside_the_jail_work() {
    if !jail_available() {
        return;
    }
    let r = attack(&[], &["socketpair_ok"]);
    r.assert_probe_ran();
    assert!(
        r.stdout.contains("SOCKETPAIR-OK") && r.stdout.contains("PIPE-OK"),
        "{r:#?}"
    );
}

#[test]
fn with_network_allowed_the_same_probe_connects() {
    if !jail_available() {
        return;
    }
    // Proves the probe can reach a listener when it is allowed to, so the
    // blocked results above mean the jail, not a broken probe.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let r = attack(&["--net"], &["tcp", "127.0.0.1", &port]);
    r.assert_probe_ran();
    assert!(r.stdout.contains("ESCAPED"), "{r:#?}");
    let (mut s, _) = l.accept().unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    assert_eq!(buf, b"GLOVEBOX-CANARY-PAYLOAD");
}

#[test]
fn network_namespace_layer_also_blocks() {
    if !jail_available() {
        return;
    }
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
