//! No call can starve the others (issue 43, items 2–5), judged on a real
//! `glovebox serve` by effect:
//!
//! - one client's calls flood their egress with connections to a local
//!   test host (through the proxy and transparent egress) under a known
//!   open-file limit: another client's calls keep succeeding, `/readyz`
//!   stays 200, the server's descriptors stay inside its limit, and each
//!   flooding call's connection past its share is refused and shows in
//!   its egress log, its warnings and the audit line;
//! - zero-window streams from calls that neither read nor let the host
//!   read: the server's RSS stays within the egress memory bound, comes
//!   back when the calls end, and a tool's memory limit holds its
//!   connections' buffers too;
//! - one peer holding and reopening many idle connections: another peer's
//!   probes (and the same peer's) are accepted and answered;
//! - `ldconfig` replacing `/etc/ld.so.cache` in a loop during 2,000
//!   calls (in a mount namespace the test makes, where `/etc` is a copy:
//!   the real one is never touched): no call fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::*;

/// The flooding tool: opens `count` connections to `host:port` (`proxy`:
/// `CONNECT` through the call's proxy; `direct`: a plain connect, which
/// transparent egress carries), `send` fills each one's way out too,
/// holds them `secs`, and says how many it got and why the first refused
/// one was refused.
const HOG: &str = r#"
import socket, sys, time
mode, host, port, count, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
send = sys.argv[6] == 'send'
print('PROBE-START', flush=True)
held, failed, why = [], 0, ''
for i in range(count):
    try:
        if mode == 'proxy':
            s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
            s.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n' % (host.encode(), port, host.encode(), port))
            head = s.recv(4096)
            if not head.startswith(b'HTTP/1.1 200'):
                failed += 1
                why = why or head.decode(errors='replace').replace('\r\n', ' ')[:400]
                s.close()
                continue
        else:
            s = socket.create_connection((host, port), timeout=10)
        if send:
            s.setblocking(False)
            try:
                while True:
                    s.send(b'x' * 65536)
            except BlockingIOError:
                pass
        held.append(s)
    except OSError as e:
        failed += 1
        why = why or repr(e)
print('OPENED', len(held), 'FAILED', failed, 'WHY', why, flush=True)
time.sleep(secs)
"#;

/// A local test host: accepts every connection and keeps it; `firehose`
/// writes to each until the way is full, and it never reads.
struct Host {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Host {
    fn start(firehose: bool) -> Host {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                if firehose {
                    let mut w = s.try_clone().unwrap();
                    std::thread::spawn(move || {
                        let chunk = vec![b'y'; 65536];
                        while w.write_all(&chunk).is_ok() {}
                    });
                }
                kept.push(s);
            }
        });
        Host { port, accepted }
    }
}

/// A project whose `echo` has no network and whose `hog` runs [`HOG`]
/// with the network to `localhost` on the given ports (loopback allowed
/// by the config).
fn project(ports: &[u16], memory_mb: Option<u64>) -> Fixture {
    let f = Fixture::new();
    f.file("hog.py", HOG);
    let mut config = json!({"security": {"http": {"allow_private": true}}});
    if let Some(mb) = memory_mb {
        config["limits"] = json!({"memory_mb": mb});
    }
    f.config(&config);
    f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    let allow: Vec<String> = ports.iter().map(|p| format!("localhost:{p}")).collect();
    f.tool(&command_tool(
        "hog",
        schema(json!({
            "mode": {"type": "string"}, "host": {"type": "string"},
            "port": {"type": "string"}, "count": {"type": "string"},
            "secs": {"type": "string"}, "send": {"type": "string"}
        })),
        json!({"entrypoint": "python3",
               "args": ["hog.py", "${mode}", "${host}", "${port}", "${count}", "${secs}", "${send}"],
               "cwd": ".", "timeout_ms": 120000}),
        json!({"network": {"allow": allow}, "fs": {"read": ["."]}}),
    ));
    f
}

fn state_env(f: &Fixture) -> Vec<(String, String)> {
    vec![(
        "GLOVEBOX_STATE_DIR".into(),
        f.base.join("state").to_str().unwrap().to_string(),
    )]
}

fn envs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn invoke(addr: &str, tool: &str, params: &Value) -> Answer {
    request(
        addr,
        "POST",
        &format!("/api/v1/tools/{tool}/invoke"),
        &[("Content-Type", "application/json")],
        params.to_string().as_bytes(),
    )
}

fn hog(addr: &str, mode: &str, host: &str, port: u16, count: u32, secs: u32, send: bool) -> Answer {
    invoke(
        addr,
        "hog",
        &json!({"mode": mode, "host": host, "port": port.to_string(),
                "count": count.to_string(), "secs": secs.to_string(),
                "send": if send { "send" } else { "hold" }}),
    )
}

/// What [`HOG`] printed: connections opened, refused, the first refusal.
fn opened(a: &Answer) -> (u64, u64, String) {
    let out = a.json["output"].as_str().unwrap_or_default();
    assert!(out.contains("PROBE-START"), "the hog did not run: {a:?}");
    let line = out
        .lines()
        .find(|l| l.starts_with("OPENED"))
        .unwrap_or_else(|| panic!("no count: {a:?}"));
    let w: Vec<&str> = line.splitn(6, ' ').collect();
    (
        w[1].parse().unwrap(),
        w[3].parse().unwrap(),
        w.get(5).unwrap_or(&"").to_string(),
    )
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Samples `f` every 50 ms on a thread until the returned flag is set;
/// the largest value seen.
fn sample_max(
    f: impl Fn() -> u64 + Send + 'static,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        let mut max = 0;
        while !s.load(Ordering::SeqCst) {
            max = max.max(f());
            std::thread::sleep(Duration::from_millis(50));
        }
        max
    });
    (stop, h)
}

/// Skips (loudly; a failure under GLOVEBOX_REQUIRE_KERNEL=1) where the
/// jail cannot run a networked call here.
macro_rules! require_network_jail {
    () => {
        require_jail!();
        if namespace_free() {
            let why = "networked calls need the namespaces jail (transparent egress, the proxy in the call's namespace)";
            if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1")
                && nix::unistd::geteuid().is_root()
            {
                panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
            }
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

/// Item 2: three calls of one client flood their proxies with
/// connections held open under a 4,096-descriptor limit (four call
/// slots): each call gets its share and no more — its next connection is
/// refused with a 503 the tool sees, and logged — while another client's
/// calls and `/readyz` keep working and the server's descriptors stay
/// inside its limit. Fails on main: the three calls take the server to
/// its limit (256 connections of six descriptors each), and the other
/// client's calls fail `internal` (EMFILE) or hang.
#[test]
fn one_clients_egress_flood_leaves_other_calls_running() {
    require_network_jail!();
    let host = Host::start(false);
    let f = project(&[host.port], None);
    let env = state_env(&f);
    let served = Served::start_with_open_files(
        &f.root,
        &envs(&env),
        &["--max-concurrent", "4", "--max-queued", "64"],
        4096,
    );
    let pid = served.child.id();
    let addr = served.addr.clone();
    // The probe: an echo runs, and the hog runs once, unflooded.
    let a = invoke(&addr, "echo", &json!({"w": "before"}));
    assert_eq!(a.json["output"], "before\n", "{a:?}");
    let a = hog(&addr, "proxy", "localhost", host.port, 3, 0, false);
    assert_eq!(opened(&a).0, 3, "{a:?}");
    let (stop, peak) = sample_max(move || fd_count(pid) as u64);
    let floods: Vec<_> = (0..3)
        .map(|_| {
            let addr = addr.clone();
            let port = host.port;
            std::thread::spawn(move || hog(&addr, "proxy", "localhost", port, 300, 15, false))
        })
        .collect();
    // Another client's calls while the floods hold their connections.
    let got = wait_until(Duration::from_secs(60), || {
        host.accepted.load(Ordering::SeqCst) >= 3 + 3 * 100
    });
    assert!(
        got,
        "the floods opened {} connections",
        host.accepted.load(Ordering::SeqCst)
    );
    let mut failed = Vec::new();
    for i in 0..10 {
        let w = format!("other-{i}");
        let a = invoke(&addr, "echo", &json!({"w": w}));
        if a.status != 200 || a.json["output"] != format!("{w}\n") {
            failed.push(format!("{} {}", a.status, a.body));
        }
        let r = served.get("/readyz");
        if r.status != 200 {
            failed.push(format!("/readyz {} {}", r.status, r.body));
        }
    }
    let results: Vec<Answer> = floods.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    let peak = peak.join().unwrap();
    let counts: Vec<String> = results
        .iter()
        .map(|a| {
            let out = a.json["output"].as_str().unwrap_or_default();
            out.lines()
                .find(|l| l.starts_with("OPENED"))
                .unwrap_or_default()
                .chars()
                .take(40)
                .collect()
        })
        .collect();
    eprintln!(
        "descriptors: peak {peak} of 4096; another client's calls and /readyz: {} of 20 failed; the floods: {counts:?}",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "another client's calls failed during the flood: {failed:?}\n{}",
        served.stderr()
    );
    let share = 4096u64.saturating_sub(128 + 64 + 4 * 64 + 512 + 32) / 4;
    for a in &results {
        assert_eq!(a.status, 200, "{a:?}");
        let (n, refused, why) = opened(a);
        // Each flood got its share of descriptors, six per connection,
        // and no more: its next connection was refused and said why.
        assert!(
            n * 6 <= share && n >= share / 6 - 1,
            "opened {n} (share {share}): {a:?}"
        );
        assert!(refused > 0, "{a:?}");
        assert!(why.contains("503") && why.contains("descriptors"), "{why}");
        let warnings = a.json["warnings"].to_string();
        assert!(
            warnings.contains("refused connect to 127.0.0.1:3128 (the call's connections hold"),
            "{warnings}"
        );
    }
    assert!(
        peak < 4096 - 128,
        "the server's descriptors reached {peak} of 4096"
    );
    assert!(
        !served.stderr().contains("cannot accept"),
        "{}",
        served.stderr()
    );
    // Audited: each flood's line names the refusals.
    let log = std::fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TOOL_EXECUTED name=hog") && l.contains("descriptors"))
        .collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(lines[0].contains("\"via\":\"proxy\""), "{}", lines[0]);
    // After the floods, descriptors come back: a fourth flood gets a
    // whole share again.
    let a = hog(&addr, "proxy", "localhost", host.port, 20, 0, false);
    assert_eq!(opened(&a).0, 20, "{a:?}");
}

/// Item 2, transparent egress: a raw client's connections count one
/// descriptor each against the same share, and past it are reset and
/// logged by name.
#[test]
fn transparent_connections_count_against_the_calls_share() {
    require_network_jail!();
    let host = Host::start(false);
    let f = project(&[host.port], None);
    let env = state_env(&f);
    // 1,800 descriptors, four slots: a share of 202 each (under the 256
    // connections the stack takes per call); memory is not what binds.
    let served = Served::start_with_open_files(
        &f.root,
        &envs(&env),
        &[
            "--max-concurrent",
            "4",
            "--egress-memory-per-call",
            "1024",
            "--egress-memory",
            "4096",
        ],
        1800,
    );
    let a = hog(&served.addr, "direct", "localhost.", host.port, 5, 0, false);
    let (n, _, why) = opened(&a);
    if n == 0 && why.contains("gaierror") {
        let why = "no transparent egress here (no /dev/net/tun for this user)";
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    assert_eq!(n, 5, "{a:?}");
    let share: u64 = (1800 - (128 + 64 + 4 * 64 + 512 + 32)) / 4;
    assert_eq!(share, 202);
    let a = hog(
        &served.addr,
        "direct",
        "localhost.",
        host.port,
        240,
        0,
        false,
    );
    let (n, refused, _) = opened(&a);
    assert!(n <= share && n >= share - 5, "opened {n}: {a:?}");
    assert!(refused > 0, "{a:?}");
    let warnings = a.json["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "refused connect to localhost.:{} (the call's connections hold",
            host.port
        )) || warnings.contains(&format!(
            "refused connect to localhost:{} (the call's connections hold",
            host.port
        )),
        "{warnings}"
    );
}

/// Item 3: four calls each open 200 transparent connections and fill
/// both ways of every one (the tool never reads, the host never reads):
/// the server's RSS grows by at most the egress memory bound (256 MiB by
/// default) and some slack, each call's connections past its 64 MiB are
/// refused (logged), and when the calls end the memory goes back to the
/// kernel. Fails on main: 400 MiB and more, kept after the calls.
#[test]
fn transparent_egress_memory_is_bounded_and_given_back() {
    require_network_jail!();
    let host = Host::start(true);
    let f = project(&[host.port], None);
    let env = state_env(&f);
    let served = Served::start(&f.root, &envs(&env), &["--max-concurrent", "4"]);
    let pid = served.child.id();
    let addr = served.addr.clone();
    // Warm: the egress runtime started, one connection made and gone.
    let a = hog(&addr, "direct", "localhost.", host.port, 1, 0, true);
    let (n, _, why) = opened(&a);
    if n == 0 && why.contains("gaierror") {
        let why = "no transparent egress here (no /dev/net/tun for this user)";
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    assert_eq!(n, 1, "{a:?}");
    std::thread::sleep(Duration::from_millis(500));
    let base = rss_kib(pid);
    let (stop, peak) = sample_max(move || rss_kib(pid));
    let floods: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.clone();
            let port = host.port;
            std::thread::spawn(move || hog(&addr, "direct", "localhost.", port, 200, 10, true))
        })
        .collect();
    let results: Vec<Answer> = floods.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    let peak = peak.join().unwrap();
    // The calls are over: the buffers go back.
    let back = wait_until(Duration::from_secs(10), || {
        rss_kib(pid).saturating_sub(base) < 48 * 1024
    });
    let after = rss_kib(pid);
    let grew = peak.saturating_sub(base) / 1024;
    let counts: Vec<u64> = results.iter().map(|a| opened(a).0).collect();
    eprintln!(
        "RSS: {} MiB before, {} MiB at the peak, {} MiB after; the calls opened {counts:?}",
        base / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(grew <= 256 + 64, "the server grew by {grew} MiB");
    assert!(
        back,
        "RSS {} MiB after the calls, {} MiB before",
        after / 1024,
        base / 1024
    );
    for a in &results {
        assert_eq!(a.status, 200, "{a:?}");
        let (n, refused, _) = opened(a);
        assert!((100..=127).contains(&n), "opened {n}: {a:?}");
        assert!(refused > 0, "{a:?}");
        assert!(
            a.json["warnings"].to_string().contains("MiB of buffers"),
            "{a:?}"
        );
    }
}

/// Item 3: a tool whose memory limit is 48 MiB holds its own memory and
/// its connections' buffers: past what is left, its next connection is
/// refused and the reason names the limit; the tool itself is not killed.
#[test]
fn a_tools_memory_limit_holds_its_connections_buffers() {
    require_network_jail!();
    let host = Host::start(true);
    let f = project(&[host.port], Some(48));
    let env = state_env(&f);
    let served = Served::start(&f.root, &envs(&env), &[]);
    let a = hog(&served.addr, "direct", "localhost.", host.port, 90, 0, true);
    let (n, refused, why) = opened(&a);
    if n == 0 && why.contains("gaierror") {
        let why = "no transparent egress here (no /dev/net/tun for this user)";
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    assert_eq!(a.json["ok"], true, "the tool itself was not killed: {a:?}");
    // Only a memory cgroup can be charged (without one the limit is
    // RLIMIT_DATA, the tool's own address space).
    let by = sandbox(&[], &["true"]).json["enforcement"]["memory_limit"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !by.starts_with("cgroup") {
        eprintln!("SKIPPED: the memory limit is {by:?} here, not a cgroup's");
        return;
    }
    let warnings = a.json["warnings"].to_string();
    assert!(
        warnings.contains("the tool's memory limit (48 MiB)"),
        "{warnings}"
    );
    assert!(n < 90 && refused > 0, "{a:?}");
}

/// Item 4: one client keeps 1,200 connections open and idle from three
/// loopback addresses (400 each, past the 512 cap together), reopening
/// each one the server closes at once; every probe from another peer
/// (127.0.0.2) is accepted and answered, each within a generous 5 s.
/// Fails on main: at the cap each admission waits for the connection
/// evicted for it on a 20 ms timer (about 50 a second), and the probes
/// wait behind the flood in the backlog for tens of seconds.
#[test]
fn idle_connections_of_one_peer_never_keep_another_peer_out() {
    raise_open_files();
    let f = Fixture::new();
    let env = state_env(&f);
    let served = Served::start(&f.root, &envs(&env), &[]);
    let port: u16 = served.addr.rsplit(':').next().unwrap().parse().unwrap();
    // The probe: unflooded, a probe from the other peer gets in.
    assert!(probe_from("127.0.0.2", port).starts_with("HTTP/1.1 200"));
    let stop = Arc::new(AtomicBool::new(false));
    let reopened = Arc::new(AtomicUsize::new(0));
    let floods: Vec<_> = ["127.0.0.1", "127.0.0.3", "127.0.0.4"]
        .into_iter()
        .map(|from| {
            let (stop, reopened) = (stop.clone(), reopened.clone());
            std::thread::spawn(move || flood_idle(from, port, 400, &stop, &reopened))
        })
        .collect();
    // The flood is past the cap: connections are being closed on it.
    assert!(
        wait_until(Duration::from_secs(30), || reopened.load(Ordering::SeqCst)
            > 500),
        "the flood did not reach the cap"
    );
    let mut took = Vec::new();
    let mut unanswered = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        let answer = probe_from("127.0.0.2", port);
        let elapsed = t.elapsed();
        if !answer.starts_with("HTTP/1.1 200") {
            unanswered.push(format!("probe {i} got {answer:?} after {elapsed:?}"));
        }
        took.push(elapsed);
        std::thread::sleep(Duration::from_millis(100));
    }
    let during = reopened.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for t in floods {
        t.join().unwrap();
    }
    took.sort();
    eprintln!(
        "probes: median {:?}, slowest {:?}, {} unanswered; the flood reopened {during} connections",
        took[took.len() / 2],
        took[took.len() - 1],
        unanswered.len()
    );
    assert!(unanswered.is_empty(), "{unanswered:?}");
    // The flood over, its own address gets in again too.
    assert!(
        wait_until(Duration::from_secs(30), || probe_from("127.0.0.1", port)
            .starts_with("HTTP/1.1 200")),
        "{}",
        served.stderr()
    );
    assert!(
        took[took.len() - 1] < Duration::from_secs(5),
        "probes waited {took:?}"
    );
}

/// The test process may hold the flood's connections.
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
}

/// Keeps `n` idle connections open to `port` from `from`, opening a new
/// one for each the server closes, until `stop`.
fn flood_idle(from: &str, port: u16, n: usize, stop: &AtomicBool, reopened: &AtomicUsize) {
    let open = || {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
        sock.bind(&SocketAddr::new(from.parse().ok()?, 0).into())
            .ok()?;
        let to: SocketAddr = ([127, 0, 0, 1], port).into();
        sock.connect(&to.into()).ok()?;
        let s: TcpStream = sock.into();
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut conns: Vec<TcpStream> = (0..n).filter_map(|_| open()).collect();
    let mut buf = [0u8; 256];
    while !stop.load(Ordering::SeqCst) {
        // Woken only by the connections the server closed (or wrote to).
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let ready: Vec<usize> = {
            let mut fds: Vec<PollFd> = conns
                .iter()
                .map(|c| PollFd::new(c.as_fd(), PollFlags::POLLIN))
                .collect();
            if poll(&mut fds, PollTimeout::from(50u16)).unwrap_or(0) <= 0 {
                continue;
            }
            fds.iter()
                .enumerate()
                .filter(|(_, f)| f.revents().is_some_and(|r| !r.is_empty()))
                .map(|(i, _)| i)
                .collect()
        };
        for i in ready.into_iter().rev() {
            let closed = match conns[i].read(&mut buf) {
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                Ok(n) => n == 0,
            };
            if !closed {
                continue;
            }
            // Closed by the server: another one at once.
            conns.swap_remove(i);
            if let Some(s) = open() {
                conns.push(s);
                reopened.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// `GET /healthz` on a new connection from `from`; the answer's first
/// bytes (empty when none came within 10 s).
fn probe_from(from: &str, port: u16) -> String {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::new(from.parse().unwrap(), 0).into())
        .unwrap();
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    if sock
        .connect_timeout(&to.into(), Duration::from_secs(10))
        .is_err()
    {
        return String::new();
    }
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req =
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut got = vec![0u8; 64];
    let n = s.read(&mut got).unwrap_or(0);
    String::from_utf8_lossy(&got[..n]).into_owned()
}

/// Item 5: `ldconfig` replaces `/etc/ld.so.cache` (a new file renamed
/// over it) in a loop while 2,000 calls run: none fails. The server runs in a mount namespace the test makes, where
/// `/etc` is a copy (the racer replaces the copy's file; the real one is
/// never touched). The racer's count proves it ran throughout. Fails on
/// main: a few percent of the calls fail 500 `manifest_invalid`.
#[test]
fn a_package_install_replacing_the_loader_cache_fails_no_call() {
    require_jail!();
    if !mount_tree_jail() {
        eprintln!("SKIPPED: without a mount tree the jail binds no file (nothing to race)");
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        let why = "the test's own mount namespace (where /etc is a copy) needs root";
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
        }
        eprintln!("SKIPPED: {why}");
        return;
    }
    let f = Fixture::new();
    f.tool(&command_tool(
        "echo",
        schema(json!({"w": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${w}"]}),
        read_root(),
    ));
    let etc = f.base.join("etc");
    let copied = std::process::Command::new("cp")
        .args(["-a", "/etc"])
        .arg(&etc)
        .status()
        .unwrap();
    assert!(copied.success());
    let count = f.base.join("renames");
    let real_cache = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/etc/ld.so.cache")
            .map(|m| (m.ino(), m.mtime()))
            .ok()
    };
    let real_before = real_cache();
    // In the namespace: /etc is the copy; the racer runs ldconfig (`-X`:
    // the cache only, no library links), which renames a new cache over
    // it, and counts.
    let script = format!(
        "mount --bind '{etc}' /etc || exit 97\n\
         parent=$$\n\
         (n=0; while kill -0 $parent 2>/dev/null; do ldconfig -X || exit 98; n=$((n+1)); echo $n > '{count}'; done) &\n\
         exec \"$0\" \"$@\"",
        etc = etc.display(),
        count = count.display()
    );
    let mut c = std::process::Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        &script,
    ])
    .arg(bin());
    let env = state_env(&f);
    let served = Served::start_command(c, &f.root, &envs(&env), &[], std::process::Stdio::null());
    let renames = || {
        std::fs::read_to_string(&count)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(30), || renames() > 5),
        "the racer runs"
    );
    let before = renames();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let addr = served.addr.clone();
            let failures = failures.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    let w = format!("c{c}-{i}");
                    let a = invoke(&addr, "echo", &json!({"w": w}));
                    if a.status != 200 || a.json["output"] != format!("{w}\n") {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{} {}", a.status, a.body));
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let during = renames() - before;
    let failures = failures.lock().unwrap();
    eprintln!(
        "2,000 calls, {during} replacements of the cache, {} failed",
        failures.len()
    );
    assert!(
        during > 100,
        "the racer ran throughout ({during} replacements)"
    );
    assert!(
        failures.is_empty(),
        "{} of 2,000 calls failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    // The real cache was never the racer's.
    assert_eq!(
        real_cache(),
        real_before,
        "the real /etc/ld.so.cache was replaced"
    );
}

/// Whether this machine's jail has its own mount tree (the namespaces
/// mode with a mount namespace), where files are bound.
fn mount_tree_jail() -> bool {
    !namespace_free()
}
