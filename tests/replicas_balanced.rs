//! A real balancer: three `glovebox serve` replicas behind HAProxy
//! (Debian's package, which the test installs when it is missing) on loopback. 32 REST
//! clients call a tool whose approval was signed once; every replica
//! honours it, and no call fails while all three run. One replica is
//! SIGKILLed mid-run: only calls in flight on it at that instant fail
//! (each failure began before the kill and ended after it), every call
//! begun after it succeeds, HAProxy's check of `/readyz` marks it down,
//! and a restarted replica rejoins and takes calls. The exported audit
//! streams then verify together: the survivors' and the restarted one's
//! intact and sealed, the killed one's checkpoints all verified and only
//! its unsealed tail reported (exit 6). A rolling restart (SIGTERM,
//! drain, restart, one replica at a time) fails no call, HAProxy set up
//! as README's balancer section says.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::Served;

const CLIENTS: usize = 32;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request with `Host: host` to `addr`: (status, body), or
/// what went wrong (the connection dropped, no answer).
fn call(addr: &str, host: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no answer: {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn get(addr: &str, host: &str, path: &str) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new(); // not listening yet
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

struct Replica {
    id: String,
    port: u16,
    served: Option<Served>,
    streams: Vec<PathBuf>,
}

struct Cluster {
    f: Fixture,
    key: PathBuf,
    approvals: PathBuf,
    public: String,
    front: u16,
    replicas: Vec<Replica>,
}

impl Cluster {
    fn start_replica(&mut self, i: usize) {
        self.start_replica_with(i, true);
    }

    fn start_replica_with(&mut self, i: usize, export: bool) {
        let front = self.front;
        let r = &mut self.replicas[i];
        let base = &self.f.base;
        let out = base.join(format!("{}-{}.jsonl", r.id, r.streams.len()));
        let state = base.join(format!("{}-state", r.id));
        let audit = base.join(format!("{}-audit", r.id));
        let listen = format!("127.0.0.1:{}", r.port);
        let allow = format!("127.0.0.1:{front}");
        let mut args = vec![
            "--approvals-dir",
            self.approvals.to_str().unwrap(),
            "--approval-key",
            &self.public,
            "--replica-id",
            &r.id,
            "--audit-dir",
            audit.to_str().unwrap(),
            "--audit-export",
            "stdout",
            "--checkpoint-key",
            self.key.to_str().unwrap(),
            "--checkpoint-every",
            "16",
            "--max-concurrent",
            "16",
            "--max-queued",
            "64",
            "--ready-interval",
            "1",
            "--drain-delay",
            "1",
            "--allow-host",
            &allow,
            "--listen",
            &listen,
        ];
        if !export {
            // Drop the export's flags and their values.
            let at = args.iter().position(|a| *a == "--audit-export").unwrap();
            args.drain(at..at + 6);
        }
        let served = Served::start_to(
            &self.f.root,
            &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
            &args,
            Stdio::from(std::fs::File::create(&out).unwrap()),
        );
        r.served = Some(served);
        r.streams.push(out);
    }
}

fn haproxy_config(front: u16, stats: u16, replicas: &[Replica]) -> String {
    let mut c = format!(
        "global\n  maxconn 512\n  log stdout format raw local0\n\
defaults\n  mode http\n  log global\n  option httplog\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n  retries 3\n  option redispatch 1\n  retry-on conn-failure 503\n\
frontend front\n  bind 127.0.0.1:{front}\n  default_backend glovebox\n\
listen stats\n  bind 127.0.0.1:{stats}\n  stats enable\n  stats uri /stats\n\
backend glovebox\n  balance roundrobin\n  option httpchk\n  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1:{front}\n  http-check expect status 200\n"
    );
    for r in replicas {
        c.push_str(&format!(
            "  server {} 127.0.0.1:{} check inter 200ms fall 2 rise 2\n",
            r.id, r.port
        ));
    }
    c
}

/// The lines of HAProxy's request log that are not a 200: which server
/// answered, and how the session ended.
fn failed_requests(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("/api/") && !l.contains(" 200 "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The servers' states in HAProxy's CSV stats: id → UP/DOWN/….
fn states(stats: u16) -> Vec<(String, String)> {
    let text = get(&format!("127.0.0.1:{stats}"), "127.0.0.1", "/stats;csv");
    text.lines()
        .filter(|l| l.starts_with("glovebox,"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1] != "BACKEND").then(|| (f[1].to_string(), f[17].to_string()))
        })
        .collect()
}

fn state_of(stats: u16, id: &str) -> String {
    states(stats)
        .into_iter()
        .find(|(n, _)| n == id)
        .map(|(_, s)| s)
        .unwrap_or_default()
}

struct HaProxy(Child);
impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Debug, Clone)]
struct Done {
    began: Instant,
    ended: Instant,
    result: Result<(), String>,
}

/// `CLIENTS` clients calling through `front` until `stop`.
fn clients(front: u16, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<Vec<Done>>> {
    (0..CLIENTS)
        .map(|c| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let addr = format!("127.0.0.1:{front}");
                let mut done = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) && n < 10_000 {
                    n += 1;
                    let began = Instant::now();
                    let r = call(
                        &addr,
                        &addr,
                        "/api/v1/tools/signed_echo/invoke",
                        &json!({"n": c * 100_000 + n}).to_string(),
                    );
                    let result = match r {
                        Ok((200, body)) => {
                            let v: Value = serde_json::from_str(&body).unwrap_or_default();
                            if v["ok"] == true {
                                Ok(())
                            } else {
                                Err(format!("200 but not ok: {body}"))
                            }
                        }
                        Ok((status, body)) => Err(format!("{status}: {body}")),
                        Err(e) => Err(e),
                    };
                    done.push(Done {
                        began,
                        ended: Instant::now(),
                        result,
                    });
                }
                done
            })
        })
        .collect()
}

/// Three replicas of `f`'s project, each serving `signed_echo` (its
/// approval signed once and shipped read-only to all), and HAProxy in
/// front: returned once HAProxy's checks see all three UP, with
/// HAProxy's stats port.
fn balanced_cluster(f: Fixture) -> (Cluster, HaProxy, u16) {
    let haproxy = system_program("haproxy", "haproxy");
    let mut tool = command_tool(
        "signed_echo",
        schema(json!({"n": {"type": "integer"}})),
        json!({"entrypoint": "echo", "args": ["call", "${n}"]}),
        read_root(),
    );
    tool["approval"] = json!({"required": true, "reason": "approved once for every replica"});
    f.tool(&tool);
    // One approval, signed once, shipped read-only to every replica.
    std::fs::create_dir_all(f.base.join("keys")).unwrap();
    let key = f.base.join("keys/approval");
    let approvals = f.base.join("approvals");
    for args in [
        vec!["approve", "--generate-key", key.to_str().unwrap()],
        vec![
            "approve",
            "signed_echo",
            "--yes",
            "--sign-with",
            key.to_str().unwrap(),
            "--approvals-dir",
            approvals.to_str().unwrap(),
        ],
    ] {
        let o = f.glovebox(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let public = format!("{}.pub", key.display());
    let front = free_port();
    let stats = free_port();
    let replicas = (0..3)
        .map(|i| Replica {
            id: format!("r{i}"),
            port: free_port(),
            served: None,
            streams: Vec::new(),
        })
        .collect();
    let mut cluster = Cluster {
        f,
        key,
        approvals,
        public,
        front,
        replicas,
    };
    for i in 0..3 {
        cluster.start_replica(i);
    }
    let cfg = cluster.f.base.join("haproxy.cfg");
    std::fs::write(&cfg, haproxy_config(front, stats, &cluster.replicas)).unwrap();
    let check = Command::new(&haproxy)
        .args(["-c", "-f", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout) + String::from_utf8_lossy(&check.stderr)
    );
    let log = std::fs::File::create(cluster.f.base.join("haproxy.log")).unwrap();
    let lb = HaProxy(
        Command::new(&haproxy)
            .args(["-db", "-f", cfg.to_str().unwrap()])
            .stdout(Stdio::from(log))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(60), || {
            let s = states(stats);
            s.len() == 3 && s.iter().all(|(_, st)| st == "UP")
        }),
        "the replicas did not all come up in haproxy: {:?}",
        states(stats)
    );
    (cluster, lb, stats)
}

#[test]
fn three_replicas_behind_haproxy_survive_a_sigkill_and_their_audit_verifies_together() {
    require_jail!();
    let (mut cluster, _lb, stats) = balanced_cluster(Fixture::new());
    let front = cluster.front;

    // Phase 1: all three up, 32 clients, no error at all.
    let stop = Arc::new(AtomicBool::new(false));
    let running = clients(front, stop.clone());
    std::thread::sleep(Duration::from_secs(3));
    // SIGKILL r1 mid-run.
    let killed_at = Instant::now();
    let dead_at = {
        let r1 = cluster.replicas[1].served.as_mut().unwrap();
        r1.child.kill().unwrap();
        r1.child.wait().unwrap();
        Instant::now()
    };
    assert!(
        wait_until(Duration::from_secs(10), || state_of(stats, "r1")
            .starts_with("DOWN")),
        "haproxy's health check did not take r1 out: {:?}",
        states(stats)
    );
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let done: Vec<Done> = running
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let failed: Vec<&Done> = done.iter().filter(|d| d.result.is_err()).collect();
    let before = done.iter().filter(|d| d.ended < killed_at).count();
    assert!(before > 0, "no call ended before the kill");
    let ms = |t: Instant| {
        if t >= killed_at {
            (t - killed_at).as_millis() as i64
        } else {
            -((killed_at - t).as_millis() as i64)
        }
    };
    for d in &failed {
        assert!(
            d.began <= dead_at && d.ended >= killed_at,
            "a call not in flight at the kill failed (began {} ms, ended {} ms after the kill, which took {} ms): {:?}\nHAProxy's log of failed requests:\n{}",
            ms(d.began),
            ms(d.ended),
            ms(dead_at),
            d.result,
            failed_requests(&cluster.f.base.join("haproxy.log"))
        );
    }
    assert!(
        failed.len() <= CLIENTS,
        "more calls failed than were in flight"
    );
    let after = done.iter().filter(|d| d.began > dead_at).count();
    assert!(after > 0, "no call began after the kill");
    eprintln!(
        "{} calls, {} failed (in flight on the killed replica), {} begun after the kill, all ok",
        done.len(),
        failed.len(),
        after
    );

    // The killed replica restarts and rejoins.
    let r1 = cluster.replicas[1].served.take().unwrap();
    drop(r1);
    cluster.start_replica(1);
    assert!(
        wait_until(Duration::from_secs(60), || state_of(stats, "r1") == "UP"),
        "the restarted r1 did not rejoin: {:?}",
        states(stats)
    );
    let addr = format!("127.0.0.1:{front}");
    for n in 0..30 {
        let (status, body) = call(
            &addr,
            &addr,
            "/api/v1/tools/signed_echo/invoke",
            &json!({"n": n}).to_string(),
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
    }

    for r in &mut cluster.replicas {
        let s = r.served.as_mut().unwrap();
        s.terminate();
        assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    }

    // Every replica (and the restarted one) ran calls: the one signed
    // approval was honoured by each.
    let mut files = Vec::new();
    for r in &cluster.replicas {
        for s in &r.streams {
            let text = std::fs::read_to_string(s).unwrap();
            assert!(
                text.contains(r#""event":"TOOL_EXECUTED""#),
                "{} ran no call ({})",
                r.id,
                s.display()
            );
            files.push(s.clone());
        }
    }
    assert_eq!(files.len(), 4);
    let mut args = vec![
        "audit".to_string(),
        "--verify".into(),
        "--json".into(),
        "--checkpoint-key".into(),
        cluster.public.clone(),
    ];
    for f in &files {
        args.push("--exported".into());
        args.push(f.display().to_string());
    }
    let out = Command::new(bin()).args(&args).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let streams = report["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4, "{report}");
    let unsealed: Vec<&Value> = streams.iter().filter(|s| s["sealed"] != true).collect();
    assert_eq!(
        unsealed.len(),
        1,
        "only the killed stream is unsealed: {report}"
    );
    let killed = unsealed[0];
    assert_eq!(killed["replica"], "r1");
    assert!(killed["checkpoints"].as_u64().unwrap() >= 1, "{killed}");
    // Verified to its last checkpoint, the rest its unsealed tail: no
    // problem.
    assert_eq!(
        killed["problems"],
        json!([]),
        "the killed stream has another problem than its tail: {killed}"
    );
    assert_eq!(
        killed["lines"].as_u64().unwrap(),
        killed["verified_to"].as_u64().unwrap() + killed["unsealed"].as_u64().unwrap(),
        "{killed}"
    );
    for s in streams.iter().filter(|s| s["sealed"] == true) {
        assert_eq!(s["problems"], json!([]), "{s}");
    }
    // The set is not sealed (one tail is unsealed), and says it is that
    // alone: exit 6, not "tampered" (1).
    assert_eq!(report["intact_to_checkpoints"], true, "{report}");
    assert_eq!(out.status.code(), Some(6), "{report}");
}

/// A rolling restart under load, with HAProxy set up as README's balancer
/// section says (`retry-on conn-failure 503`, `option redispatch`, the
/// `/readyz` check): each replica in turn gets SIGTERM (for
/// `--drain-delay` it answers new calls 503 and `/readyz` 503, then stops
/// accepting), finishes its calls, exits 0 and is started again. Every
/// refusal is retried on another replica: the 32 clients see no error.
/// (Without `retry-on`, 29 of 511 calls failed with the draining
/// replica's 503.)
#[test]
fn a_rolling_restart_behind_haproxy_fails_no_call() {
    require_jail!();
    let (mut cluster, _lb, stats) = balanced_cluster(Fixture::new());
    let stop = Arc::new(AtomicBool::new(false));
    let running = clients(cluster.front, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    let restarts_began = Instant::now();
    for i in 0..3 {
        let id = cluster.replicas[i].id.clone();
        let mut old = cluster.replicas[i].served.take().unwrap();
        old.terminate();
        assert_eq!(old.wait_exit(), Some(0), "{id} did not stop cleanly");
        drop(old);
        cluster.start_replica(i);
        assert!(
            wait_until(Duration::from_secs(60), || state_of(stats, &id) == "UP"),
            "the restarted {id} did not rejoin: {:?}",
            states(stats)
        );
    }
    let restarts_took = restarts_began.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let done: Vec<Done> = running
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let during = done
        .iter()
        .filter(|d| d.began >= restarts_began && d.began <= restarts_began + restarts_took)
        .count();
    assert!(during > 0, "no call ran during the restarts");
    let failed: Vec<&Done> = done.iter().filter(|d| d.result.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed during a rolling restart: {:?}\nHAProxy's log of failed requests:\n{}",
        failed.len(),
        done.len(),
        failed.iter().take(5).collect::<Vec<_>>(),
        failed_requests(&cluster.f.base.join("haproxy.log"))
    );
    eprintln!(
        "{} calls, {during} begun during the restarts ({restarts_took:?}), none failed",
        done.len()
    );
}

/// Runs `tests/mcp/client2.py` (the MCP Python SDK 2.x, MCP 2026-07-28)
/// against `url` with `scenario` and `arg`, piping its output.
fn mcp2_client(py: &Path, url: &str, root: &Path, scenario: &str, arg: &str) -> Child {
    Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client2.py"))
        .args(["--mode", "auto", "--transport", "http", "--url", url])
        .arg("--root")
        .arg(root)
        .args([scenario, arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The MCP Python SDK 2.x through the balancer: 32 clients of their own
/// (MCP 2026-07-28 is stateless, so HAProxy spreads their requests
/// without stickiness) call the tool whose approval was signed once,
/// with no error, and every replica ran some of the calls. Then each
/// replica's own `subscriptions/listen` stream (one client per replica,
/// connected to it directly) is told of a tool written to the shared
/// project on disk, and lists it.
#[test]
fn the_python_mcp_sdk_calls_through_the_balancer_and_each_replica_relays_list_changed() {
    require_jail!();
    let py = venv_program(
        "tests/mcp/setup2.sh",
        "GLOVEBOX_MCP2_VENV",
        "mcp2-venv",
        "python",
    );
    let (mut cluster, _lb, _stats) = balanced_cluster(Fixture::new());
    let front = format!("http://127.0.0.1:{}/mcp", cluster.front);
    let root = cluster.f.root.clone();
    let out = mcp2_client(
        &py,
        &front,
        &root,
        "balanced",
        &format!("signed_echo:{CLIENTS}:5"),
    )
    .wait_with_output()
    .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let want = format!("BALANCED ok={} of={} ", CLIENTS * 5, CLIENTS * 5);
    assert!(text.lines().any(|l| l.starts_with(&want)), "{text}");
    // Every replica ran calls of the run (its stream names the tool).
    for r in &cluster.replicas {
        let stream = std::fs::read_to_string(r.streams.last().unwrap()).unwrap();
        let ran = stream
            .lines()
            .filter(|l| l.contains(r#""event":"TOOL_EXECUTED""#) && l.contains("signed_echo"))
            .count();
        assert!(
            ran > 0,
            "{} ran none of the calls: the balancer did not spread them",
            r.id
        );
    }

    // One listening client per replica, each on its replica directly.
    let mut listeners: Vec<(String, Child)> = cluster
        .replicas
        .iter()
        .map(|r| {
            let url = format!("http://127.0.0.1:{}/mcp", r.port);
            (
                r.id.clone(),
                mcp2_client(&py, &url, &root, "listen_for", "written_later"),
            )
        })
        .collect();
    let mut readers = Vec::new();
    for (id, child) in &mut listeners {
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        readers.push((id.clone(), rx));
    }
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); readers.len()];
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, (id, rx)) in readers.iter().enumerate() {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l == "LISTENING" => break,
                Ok(l) => seen[i].push(l),
                Err(_) => panic!("{id}'s client never listened: {:?}", seen[i]),
            }
        }
    }
    let mut tool = command_tool(
        "written_later",
        schema(json!({})),
        json!({"entrypoint": "true", "args": []}),
        read_root(),
    );
    tool["description"] = json!("written to the shared project while the replicas serve");
    cluster.f.tool(&tool);
    for (i, (id, rx)) in readers.iter().enumerate() {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l == "CHANGED written_later" => break,
                Ok(l) => seen[i].push(l),
                Err(_) => panic!("{id} did not relay list_changed: {:?}", seen[i]),
            }
        }
    }
    for (id, mut child) in listeners {
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "{id}'s client: {err}");
    }
    for r in &mut cluster.replicas {
        let s = r.served.as_mut().unwrap();
        s.terminate();
        assert_eq!(s.wait_exit(), Some(0), "{}", s.stderr());
    }
}

/// CPU seconds (user + system) `pid` and its reaped children used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // Fields 14–17 (utime, stime, cutime, cstime), counted after the
    // name: indexes 11–14 here.
    let ticks: f64 = f.get(11..15).map(|s| s.iter().sum()).unwrap_or(0.0);
    ticks / 100.0
}

/// Starts `n` replicas (exporting or not) and, unless `direct`, HAProxy
/// in front; runs `CLIENTS` clients for `secs`; prints calls/s, p50 and
/// CPU per call.
fn measure(n: usize, direct: bool, export: bool, secs: u64) -> (f64, f64, f64) {
    let f = Fixture::new();
    f.tool(&command_tool(
        "signed_echo",
        schema(json!({"n": {"type": "integer"}})),
        json!({"entrypoint": "echo", "args": ["call", "${n}"]}),
        read_root(),
    ));
    std::fs::create_dir_all(f.base.join("keys")).unwrap();
    let key = f.base.join("keys/approval");
    let approvals = f.base.join("approvals");
    std::fs::create_dir_all(&approvals).unwrap();
    let o = f.glovebox(&["approve", "--generate-key", key.to_str().unwrap()]);
    assert!(o.status.success());
    let public = format!("{}.pub", key.display());
    let front = free_port();
    let stats = free_port();
    let replicas = (0..n)
        .map(|i| Replica {
            id: format!("r{i}"),
            port: free_port(),
            served: None,
            streams: Vec::new(),
        })
        .collect();
    let mut c = Cluster {
        f,
        key,
        approvals,
        public,
        front,
        replicas,
    };
    for i in 0..n {
        c.start_replica_with(i, export);
    }
    let _lb = (!direct).then(|| {
        let cfg = c.f.base.join("haproxy.cfg");
        std::fs::write(&cfg, haproxy_config(front, stats, &c.replicas)).unwrap();
        let lb = HaProxy(
            Command::new("/usr/sbin/haproxy")
                .args(["-db", "-f", cfg.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        assert!(wait_until(Duration::from_secs(60), || {
            let s = states(stats);
            s.len() == n && s.iter().all(|(_, st)| st == "UP")
        }));
        lb
    });
    let port = if direct { c.replicas[0].port } else { front };
    let pids: Vec<u32> = c
        .replicas
        .iter()
        .map(|r| r.served.as_ref().unwrap().child.id())
        .collect();
    let cpu0: f64 = pids.iter().map(|p| cpu_seconds(*p)).sum();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let running = clients(port, stop.clone());
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::SeqCst);
    let done: Vec<Done> = running
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let took = started.elapsed().as_secs_f64();
    let cpu1: f64 = pids.iter().map(|p| cpu_seconds(*p)).sum();
    assert!(done.iter().all(|d| d.result.is_ok()), "errors in the bench");
    let mut lat: Vec<f64> = done
        .iter()
        .map(|d| (d.ended - d.began).as_secs_f64() * 1000.0)
        .collect();
    lat.sort_by(f64::total_cmp);
    let p50 = lat[lat.len() / 2];
    let rate = done.len() as f64 / took;
    let cpu_ms = (cpu1 - cpu0) * 1000.0 / done.len() as f64;
    for r in &mut c.replicas {
        let s = r.served.as_mut().unwrap();
        s.terminate();
        s.wait_exit();
    }
    eprintln!(
        "replicas={n} {} export={export}: {} calls in {took:.1} s = {rate:.0} calls/s, p50 {p50:.1} ms, {cpu_ms:.1} ms supervisor CPU per call",
        if direct { "direct" } else { "haproxy" },
        done.len()
    );
    (rate, p50, cpu_ms)
}

/// `cargo test --test replicas_balanced -- --ignored --nocapture`: the
/// rows of bench/RESULTS.md's replicas table.
#[test]
#[ignore = "a benchmark: run it by name"]
fn bench_calls_per_second_at_1_2_3_replicas() {
    require_jail!();
    measure(1, true, false, 8);
    measure(1, true, true, 8);
    for n in 1..=3 {
        measure(n, false, true, 8);
    }
}
