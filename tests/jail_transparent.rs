//! Transparent egress (invariant 4, `network: true`, for clients that
//! ignore the proxy variables): with namespaces and a usable
//! `/dev/net/tun`, a raw TCP client reaches an allowed `host:port` by
//! name — glovebox's DNS answers an allowed name with a fake address and
//! the supervisor carries the connection to the name under the proxy's
//! decision — or an IP literal the allowlist names, also without
//! namespaces (the connect broker), and nothing else: other names fail
//! DNS, a connect to any other real address (metadata's) or to a fake
//! address never handed out is reset, the SSRF guard holds on the name's real
//! addresses, and the egress log records each. Every refusal is judged by
//! a live listener that records nothing, next to a control that reaches
//! it.
//!
//! Modes, each asserted (none skipped): namespace-free, `network: true`
//! is refused before anything runs; where this user cannot open
//! `/dev/net/tun` (mode 0600, a container without the device), the call
//! runs behind the proxy alone, says so (`transparent_egress: false`),
//! and the raw client reaches nothing — as before transparent egress.
//!
//! The allowed name is `localhost.`: the jail's `/etc/hosts` answers
//! `localhost` itself (its own loopback), while the absolute form goes to
//! DNS — glovebox's — and the supervisor resolves it to the host's
//! loopback, where the test listens (`--allow-private` lets the guard
//! pass loopback, as in jail_egress.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::Value;

const CANARY: &str = "TRANSPARENT-SERVER-CANARY-8c2e";

/// A loopback server that answers one line with [`CANARY`] and the line,
/// counting the connections it accepted.
struct Server {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Server {
    fn start() -> Server {
        Server::start_on("127.0.0.1:0")
    }

    fn start_on(addr: &str) -> Server {
        let l = TcpListener::bind(addr).unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let a = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || answer(s));
            }
        });
        Server { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn answer(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut line = String::new();
    if BufReader::new(s.try_clone().unwrap())
        .read_line(&mut line)
        .is_err()
    {
        return;
    }
    let _ = write!(s, "{CANARY} {}", line.trim());
}

/// The raw client: for each `host:port` argument, a plain
/// `socket.create_connection` (the name resolved by libc, as any program
/// does), one line sent, everything read back; one outcome line each.
const CLIENT: &str = r#"
import socket, sys, time
print('PROBE-START', flush=True)
for target in sys.argv[1:]:
    host, port = target.rsplit(':', 1)
    t = time.time()
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b'PING\n')
        data = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        print(target, 'GOT', data.decode() or '(nothing)', flush=True)
    except OSError as e:
        print(target, 'FAILED', type(e).__name__, round(time.time() - t, 2), flush=True)
"#;

/// What the client printed for `target`.
fn outcome<'a>(r: &'a Run, target: &str) -> &'a str {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix(target).map(str::trim))
        .unwrap_or_else(|| panic!("no line for {target}: {r:#?}"))
}

fn client(extra: &[&str], targets: &[&str]) -> Run {
    let mut args = vec!["--net", "--timeout", "60"];
    args.extend_from_slice(extra);
    let mut cmd = vec!["python3", "-c", CLIENT];
    cmd.extend_from_slice(targets);
    sandbox(&args, &cmd)
}

fn egress(r: &Run) -> Vec<Value> {
    r.json["egress"].as_array().cloned().unwrap_or_default()
}

/// The log entry for `host`:`port` made through `via`.
fn entry(r: &Run, host: &str, port: u64, via: &str) -> Value {
    egress(r)
        .into_iter()
        .find(|c| c["host"] == host && c["port"] == port && c["via"] == via)
        .unwrap_or_else(|| panic!("no {via} entry for {host}:{port}: {r:#?}"))
}

/// How this run's networked calls are expected to behave.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    /// The proxy alone: namespaces, but this user cannot open
    /// `/dev/net/tun`; or no network namespace (the connect broker carries
    /// only connections to the proxy).
    ProxyOnly,
    /// Transparent egress.
    Transparent,
}

fn expect() -> Expect {
    if namespace_free() {
        return Expect::ProxyOnly;
    }
    // Judged here, with this process's own credentials (those glovebox
    // runs with): a usable device must give transparent egress.
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        Ok(_) => Expect::Transparent,
        Err(e) => {
            eprintln!("/dev/net/tun unusable here ({e}): asserting the proxy-only behaviour");
            Expect::ProxyOnly
        }
    }
}

/// The modes without transparent egress: the raw client reaches nothing,
/// by name or by address, and the listener records nothing.
fn reaches_nothing(srv: &Server) {
    let by_name = format!("localhost.:{}", srv.port);
    let direct = format!("127.0.0.1:{}", srv.port);
    let allow = format!("localhost:{}", srv.port);
    let r = client(
        &["--allow-private", "--allow-host", &allow],
        &[&by_name, &direct],
    );
    r.assert_probe_ran();
    assert_eq!(r.json["enforcement"]["egress_proxy"], true, "{r:#?}");
    assert_eq!(r.json["enforcement"]["transparent_egress"], false, "{r:#?}");
    assert!(
        outcome(&r, &by_name).starts_with("FAILED gaierror"),
        "{r:#?}"
    );
    assert!(outcome(&r, &direct).starts_with("FAILED"), "{r:#?}");
    assert_eq!(srv.accepted(), 0);
}

#[test]
fn a_raw_socket_reaches_an_allowed_host_by_name_and_nothing_else() {
    require_jail!();
    let srv = Server::start();
    let mode = expect();
    if mode != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let other = Server::start();
    let allow = format!("localhost:{}", srv.port);
    let by_name = format!("localhost.:{}", srv.port);
    // The same allowed name on a port the allowlist does not name.
    let other_port = format!("localhost.:{}", other.port);
    // The listener's real address; metadata's; a fake address glovebox
    // never handed out.
    let direct = format!("127.0.0.1:{}", srv.port);
    let metadata = "169.254.169.254:80";
    let unissued = format!("198.18.0.200:{}", srv.port);
    let r = client(
        &["--allow-private", "--allow-host", &allow],
        &[&by_name, &other_port, &direct, metadata, &unissued],
    );
    r.assert_probe_ran();
    assert_eq!(r.json["enforcement"]["transparent_egress"], true, "{r:#?}");
    // The control: by name, both ways.
    assert_eq!(
        outcome(&r, &by_name),
        format!("GOT {CANARY} PING"),
        "{r:#?}"
    );
    assert_eq!(srv.accepted(), 1, "{r:#?}");
    let ok = entry(&r, "localhost", srv.port.into(), "tcp");
    assert_eq!(ok["allowed"], true, "{r:#?}");
    assert_eq!(ok["sent"], 5, "{r:#?}");
    assert_eq!(ok["received"], (CANARY.len() + 5) as u64, "{r:#?}");
    // Everything else: refused at once, nothing reached, each logged.
    for t in [&other_port, &direct, metadata, &unissued] {
        assert!(
            outcome(&r, t).starts_with("FAILED ConnectionRefusedError"),
            "{t}: {r:#?}"
        );
    }
    assert_eq!(other.accepted(), 0, "{r:#?}");
    assert_eq!(srv.accepted(), 1, "{r:#?}");
    let e = entry(&r, "localhost", other.port.into(), "tcp");
    assert_eq!(e["allowed"], false);
    assert!(
        e["reason"].as_str().unwrap().contains("allowlist"),
        "{r:#?}"
    );
    // A real address is decided as that IP (the allowlist names none); a
    // fake one never handed out, as no address at all.
    for (host, port, why) in [
        ("169.254.169.254", 80, "allowlist"),
        ("198.18.0.200", srv.port, "by host name"),
    ] {
        let e = entry(&r, host, port.into(), "tcp");
        assert_eq!(e["allowed"], false);
        assert!(e["reason"].as_str().unwrap().contains(why), "{r:#?}");
    }
    // The listener's real address is the jail's own loopback: it never
    // left the namespace (no route, no log), and the host's got nothing.
    assert!(
        !egress(&r).iter().any(|c| c["host"] == "127.0.0.1"),
        "{r:#?}"
    );
}

#[test]
fn other_names_fail_dns_at_once_and_are_logged() {
    require_jail!();
    let srv = Server::start();
    let mode = expect();
    if mode != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let allow = format!("localhost:{}", srv.port);
    let denied = format!("not-allowed.example:{}", srv.port);
    let r = client(&["--allow-private", "--allow-host", &allow], &[&denied]);
    r.assert_probe_ran();
    let line = outcome(&r, &denied);
    assert!(line.starts_with("FAILED gaierror"), "{r:#?}");
    let secs: f64 = line.split_whitespace().last().unwrap().parse().unwrap();
    assert!(secs < 5.0, "the lookup took {secs} s: {r:#?}");
    let e = entry(&r, "not-allowed.example", 0, "dns");
    assert_eq!(e["allowed"], false);
    assert!(
        e["reason"].as_str().unwrap().contains("allowlist"),
        "{r:#?}"
    );
    // Asked for A and AAAA, maybe more than once: one line.
    let lines = egress(&r)
        .iter()
        .filter(|c| c["host"] == "not-allowed.example")
        .count();
    assert_eq!(lines, 1, "{r:#?}");
    assert_eq!(srv.accepted(), 0);
}

/// An allowed name whose real address the SSRF guard refuses (loopback,
/// without `--allow-private`): the fake address resolves, the connection
/// to it is closed without a byte, the listener gets nothing and the log
/// says why — the guard judged the name's real address, never one the
/// tool chose.
#[test]
fn the_ssrf_guard_judges_the_names_real_address() {
    require_jail!();
    let srv = Server::start();
    let mode = expect();
    if mode != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let allow = format!("localhost:{}", srv.port);
    let by_name = format!("localhost.:{}", srv.port);
    let r = client(&["--allow-host", &allow], &[&by_name]);
    r.assert_probe_ran();
    let line = outcome(&r, &by_name);
    // Closed or reset at once: a refused connection is never left
    // hanging until the client gives up.
    assert!(
        line == "GOT (nothing)"
            || line.starts_with("FAILED ConnectionResetError")
            || line.starts_with("FAILED ConnectionRefusedError"),
        "{r:#?}"
    );
    assert!(!line.contains(CANARY), "{r:#?}");
    let e = entry(&r, "localhost", srv.port.into(), "tcp");
    assert_eq!(e["allowed"], false, "{r:#?}");
    assert!(e["reason"].as_str().unwrap().contains("loopback"), "{r:#?}");
    assert_eq!(srv.accepted(), 0);
}

/// A loopback server that reads everything until the client's end of
/// stream, then answers the SHA-256 of it (hex) and closes.
fn digest_server() -> (u16, Arc<AtomicUsize>) {
    use std::io::Read;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            a.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(20))).ok();
                let mut body = Vec::new();
                if s.read_to_end(&mut body).is_ok() {
                    use sha2::Digest;
                    let _ = write!(s, "{}", hex::encode(sha2::Sha256::digest(&body)));
                }
            });
        }
    });
    (port, accepted)
}

/// Half-close and volume: the tool sends 8 MiB, shuts its sending half
/// (as `nc -N`, uploads and many protocols do), and still reads the
/// server's answer — the digest of exactly what it sent.
#[test]
fn a_half_closed_upload_arrives_whole_and_gets_its_answer() {
    require_jail!();
    let srv = Server::start();
    let mode = expect();
    if mode != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let (port, accepted) = digest_server();
    let code = r#"
import hashlib, socket, sys
port = int(sys.argv[1])
print('PROBE-START', flush=True)
data = bytes(i % 251 for i in range(8 << 20))
s = socket.create_connection(('localhost.', port), timeout=20)
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b''
while True:
    c = s.recv(65536)
    if not c:
        break
    got += c
print('DIGEST', got.decode(), hashlib.sha256(data).hexdigest())
"#;
    let allow = format!("localhost:{port}");
    let r = sandbox(
        &[
            "--net",
            "--allow-private",
            "--allow-host",
            &allow,
            "--timeout",
            "60",
        ],
        &["python3", "-c", code, &port.to_string()],
    );
    r.assert_probe_ran();
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("DIGEST"))
        .unwrap_or("");
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts.len(), 3, "{r:#?}");
    assert_eq!(parts[1], parts[2], "the server got other bytes: {r:#?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    let e = entry(&r, "localhost", port.into(), "tcp");
    assert_eq!(e["sent"], 8 << 20, "{r:#?}");
    assert_eq!(e["received"], 64, "{r:#?}");
}

/// Forty connections at once through one call's stack, each with its
/// own exchange: every one gets its answer (no connection starves or
/// waits on another), each is logged, and the server saw exactly those.
#[test]
fn forty_connections_at_once_all_get_their_answer() {
    require_jail!();
    let srv = Server::start();
    let mode = expect();
    if mode != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let code = r#"
import socket, sys, threading
port = int(sys.argv[1])
print('PROBE-START', flush=True)
got = {}
def one(i):
    try:
        s = socket.create_connection(('localhost.', port), timeout=20)
        s.sendall(b'N%d\n' % i)
        data = b''
        while True:
            c = s.recv(4096)
            if not c:
                break
            data += c
        got[i] = data.decode()
    except OSError as e:
        got[i] = 'FAILED %s' % e
ts = [threading.Thread(target=one, args=(i,)) for i in range(40)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(40):
    print(i, got.get(i))
"#;
    let allow = format!("localhost:{}", srv.port);
    let r = sandbox(
        &[
            "--net",
            "--allow-private",
            "--allow-host",
            &allow,
            "--timeout",
            "60",
        ],
        &["python3", "-c", code, &srv.port.to_string()],
    );
    r.assert_probe_ran();
    for i in 0..40 {
        let want = format!("{i} {CANARY} N{i}");
        assert!(r.stdout.lines().any(|l| l == want), "{i}: {r:#?}");
    }
    assert_eq!(srv.accepted(), 40, "{r:#?}");
    let logged = egress(&r)
        .iter()
        .filter(|c| c["via"] == "tcp" && c["allowed"] == true)
        .count();
    assert_eq!(logged, 40, "{r:#?}");
}

/// A DNS client that asks a loopback server itself (as a resolver does
/// when `resolv.conf` names systemd-resolved's `127.0.0.53`, or when the
/// jail has no usable `resolv.conf` and resolvers fall back to
/// `127.0.0.1`): for each `SERVER NAME PORT` triple, the A answer and the
/// address it came from, then a connection to that answer.
const LOOPBACK_RESOLVER: &str = r#"
import socket, struct, sys
print('PROBE-START', flush=True)
def query(server, name):
    labels = b''.join(bytes([len(p)]) + p.encode() for p in name.split('.'))
    q = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0) + labels + b'\0' + struct.pack('>HH', 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    data, frm = s.recvfrom(4096)
    rcode, answers = data[3] & 15, struct.unpack('>H', data[6:8])[0]
    if rcode or not answers:
        return frm, None, 'RCODE%d' % rcode
    return frm, socket.inet_ntoa(data[-4:]), 'A'
args = sys.argv[1:]
for server, name, port in zip(args[0::3], args[1::3], args[2::3]):
    try:
        frm, addr, kind = query(server, name)
    except OSError as e:
        print(server, name, 'DNS-FAILED', type(e).__name__, flush=True)
        continue
    print(server, name, 'FROM', '%s:%d' % frm, kind, addr, flush=True)
    if addr:
        try:
            c = socket.create_connection((addr, int(port)), timeout=5)
            c.sendall(b'PING\n')
            data = b''
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
            print(server, name, 'GOT', data.decode() or '(nothing)', flush=True)
        except OSError as e:
            print(server, name, 'FAILED', type(e).__name__, flush=True)
"#;

/// A resolver that asks a loopback address (systemd-resolved's stub, or
/// the fallback when the jail has no usable `resolv.conf`) gets
/// glovebox's answers from that very address — resolvers drop an answer
/// from any other — and the answer reaches the allowed host; another
/// name gets "no such name" there too and is logged.
#[test]
fn a_resolver_asking_loopback_gets_glovebox_s_answers() {
    require_jail!();
    let srv = Server::start();
    if expect() != Expect::Transparent {
        return reaches_nothing(&srv);
    }
    let port = srv.port.to_string();
    let allow = format!("localhost:{}", srv.port);
    let r = sandbox(
        &[
            "--net",
            "--timeout",
            "60",
            "--allow-private",
            "--allow-host",
            &allow,
        ],
        &[
            "python3",
            "-c",
            LOOPBACK_RESOLVER,
            "127.0.0.1",
            "localhost",
            &port,
            "127.0.0.1",
            "not-allowed.example",
            &port,
        ],
    );
    r.assert_probe_ran();
    let line = |name: &str, what: &str| -> String {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("127.0.0.1 {name} {what}")))
            .unwrap_or_else(|| panic!("no {what} line for {name}: {r:#?}"))
            .trim()
            .to_string()
    };
    let answer = line("localhost", "FROM");
    assert!(
        answer.starts_with("127.0.0.1:53 A 198.18."),
        "{answer}: {r:#?}"
    );
    assert_eq!(line("localhost", "GOT"), format!("{CANARY} PING"), "{r:#?}");
    assert_eq!(srv.accepted(), 1, "{r:#?}");
    assert_eq!(
        line("not-allowed.example", "FROM"),
        "127.0.0.1:53 RCODE3 None",
        "{r:#?}"
    );
    let e = entry(&r, "not-allowed.example", 0, "dns");
    assert_eq!(e["allowed"], false, "{r:#?}");
}

/// This machine's first non-loopback IPv4 address (where the route to a
/// private address leaves from; no packet is sent).
fn host_address() -> std::net::Ipv4Addr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("10.255.255.1:9").unwrap();
    match s.local_addr().unwrap().ip() {
        std::net::IpAddr::V4(a) if !a.is_loopback() => a,
        other => panic!("no non-loopback IPv4 address here: {other}"),
    }
}

/// A raw client connecting to an IP literal the allowlist names (a
/// database at a private address) reaches it — through transparent
/// egress with namespaces, through the connect broker without them — and
/// the same address on a port the allowlist does not name, or metadata's,
/// reaches nothing; each is logged (`via: tcp` when carried).
#[test]
fn a_raw_client_reaches_an_ip_literal_the_allowlist_names() {
    require_jail!();
    // Listening on every address: reached at this machine's own address.
    let srv = Server::start_on("0.0.0.0:0");
    let other = Server::start_on("0.0.0.0:0");
    let ip = host_address();
    let allowed = format!("{ip}:{}", srv.port);
    let other_port = format!("{ip}:{}", other.port);
    let metadata = "169.254.169.254:80";
    let r = client(
        &["--allow-private", "--allow-host", &allowed],
        &[&allowed, &other_port, metadata],
    );
    r.assert_probe_ran();
    if !namespace_free() && expect() == Expect::ProxyOnly {
        // No TUN device, a namespace of its own: no route out but the
        // proxy.
        assert!(outcome(&r, &allowed).starts_with("FAILED"), "{r:#?}");
        assert_eq!(srv.accepted(), 0);
        return;
    }
    assert_eq!(
        outcome(&r, &allowed),
        format!("GOT {CANARY} PING"),
        "{r:#?}"
    );
    assert_eq!(srv.accepted(), 1, "{r:#?}");
    let ok = entry(&r, &ip.to_string(), srv.port.into(), "tcp");
    assert_eq!(ok["allowed"], true, "{r:#?}");
    assert_eq!(ok["sent"], 5, "{r:#?}");
    for t in [&other_port, metadata] {
        assert!(
            outcome(&r, t).starts_with("FAILED ConnectionRefusedError"),
            "{t}: {r:#?}"
        );
    }
    assert_eq!(other.accepted(), 0, "{r:#?}");
    assert_eq!(srv.accepted(), 1, "{r:#?}");
    let via = if namespace_free() { "direct" } else { "tcp" };
    for (host, port) in [
        (ip.to_string(), u64::from(other.port)),
        ("169.254.169.254".into(), 80),
    ] {
        let e = entry(&r, &host, port, via);
        assert_eq!(e["allowed"], false, "{r:#?}");
    }
}
