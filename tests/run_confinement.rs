//! Invariants 1, 4 and 7 through `glovebox run`: a command tool and a
//! python tool try to read outside their `fs.read`, reach a local listener
//! with `network: false`, and read a secret they did not declare. The
//! effect is what is judged: the canary never comes back, the listener
//! accepts nothing. A declared secret does reach its tool, and comes back
//! only as `[REDACTED:NAME]`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::io::ErrorKind;
use std::net::TcpListener;

use common::*;
use runkit::*;
use serde_json::{json, Value};

const CANARY: &str = "RUN-CONFINEMENT-CANARY-0b7e";
const OTHER: &str = "undeclared-secret-canary-93af";
const TOKEN: &str = "declared-token-value-c41d";

/// Reads the root and the probe directory; nothing else.
fn probe_perms(network: bool) -> Value {
    json!({
        "network": network,
        "fs": {"read": [".", path_str(&probes())], "write": []},
        "secrets": {},
    })
}

/// A command tool running the attack probe with `args` (templated).
fn probe_tool(name: &str, args: &[&str], network: bool) -> Value {
    let probe = probe();
    let mut all = vec![path_str(&probe)];
    all.extend_from_slice(args);
    command_tool(
        name,
        schema(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": all}),
        probe_perms(network),
    )
}

/// The python side: one module with a function per attempt. Each prints
/// PROBE-START (to stderr, through the shim) so a block is not a crash.
const PY_PROBES: &str = r#"
import os
import socket


def read(path):
    print("PROBE-START")
    try:
        with open(path) as f:
            return "ESCAPED " + f.read()
    except OSError as e:
        return f"BLOCKED {e.errno}"


def tcp(port):
    print("PROBE-START")
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("127.0.0.1", int(port)))
        s.sendall(b"PY-PAYLOAD")
        s.close()
        return "ESCAPED tcp"
    except OSError as e:
        return f"BLOCKED {e.errno}"


def environ():
    print("PROBE-START")
    return dict(os.environ)


def token():
    v = os.environ["MY_TOKEN"]
    print("stderr sees", v)
    return {"token": v, "len": len(v), "sum": sum(v.encode()), "env": dict(os.environ)}


def leak_in_exception():
    raise RuntimeError("the token is " + os.environ["MY_TOKEN"])
"#;

fn py_tool(name: &str, function: &str, args: Value, permissions: Value) -> Value {
    python_tool(
        name,
        schema(json!({"a": {"type": "string"}})),
        json!({"module": "probes_mod", "function": function, "args": args}),
        permissions,
    )
}

/// A fixture with the canary outside the root and the python probes in it.
fn fixture() -> (Fixture, std::path::PathBuf) {
    let f = Fixture::new();
    let canary = f.outside.join("canary.txt");
    std::fs::write(&canary, CANARY).unwrap();
    f.file("probes_mod.py", PY_PROBES);
    f.file("inside.txt", "inside content");
    (f, canary)
}

#[test]
fn file_outside_fs_read_is_not_returned() {
    require_jail!();
    let (f, canary) = fixture();
    let canary = path_str(&canary).to_string();
    f.tool(&probe_tool("cmd_read", &["read", "${a}"], false));
    f.tool(&command_tool(
        "cat_read",
        schema(json!({"a": {"type": "string"}})),
        json!({"entrypoint": "cat", "args": ["${a}"]}),
        read_root(),
    ));
    f.tool(&py_tool("py_read", "read", json!(["${a}"]), read_root()));

    let r = f.run("cmd_read", &[&format!("a={canary}")]);
    r.assert_ok();
    assert!(r.text().contains("PROBE-START"), "{r:#?}");
    assert!(r.text().contains("BLOCKED"), "{r:#?}");
    assert!(!r.mentions(CANARY), "canary leaked: {r:#?}");

    let r = f.run("cat_read", &[&format!("a={canary}")]);
    r.assert_failed("exit_code", 1);
    assert!(!r.mentions(CANARY), "canary leaked: {r:#?}");

    let r = f.run("py_read", &[&format!("a={canary}")]);
    r.assert_ok();
    assert!(r.stderr().contains("PROBE-START"), "{r:#?}");
    assert!(r.text().starts_with("BLOCKED"), "{r:#?}");
    assert!(!r.mentions(CANARY), "canary leaked: {r:#?}");

    // The same tools read a file inside their fs.read.
    let r = f.run("cat_read", &["a=inside.txt"]);
    r.assert_ok();
    assert_eq!(r.text(), "inside content");
    let r = f.run("py_read", &["a=inside.txt"]);
    r.assert_ok();
    assert_eq!(r.text(), "ESCAPED inside content");
}

/// Asserts nobody connected to `l` (which is non-blocking).
fn assert_no_connection(l: &TcpListener) {
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, addr)) => panic!("the listener got a connection from {addr}"),
        Err(e) => panic!("accept failed: {e}"),
    }
}

fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    (l, port)
}

#[test]
fn local_listener_gets_nothing_with_network_false() {
    require_jail!();
    let (f, _) = fixture();
    let (l, port) = listener();
    f.tool(&probe_tool("cmd_tcp", &["tcp", "127.0.0.1", "${a}"], false));
    f.tool(&py_tool("py_tcp", "tcp", json!(["${a}"]), read_root()));

    let r = f.run("cmd_tcp", &[&format!("a={port}")]);
    r.assert_ok();
    assert!(r.text().contains("PROBE-START"), "{r:#?}");
    assert!(
        r.text().contains("BLOCKED") && !r.text().contains("ESCAPED"),
        "{r:#?}"
    );
    assert_no_connection(&l);

    let r = f.run("py_tcp", &[&format!("a={port}")]);
    r.assert_ok();
    assert!(r.stderr().contains("PROBE-START"), "{r:#?}");
    assert!(r.text().starts_with("BLOCKED"), "{r:#?}");
    assert_no_connection(&l);

    // With network: true the tool has its own namespace: a direct connect
    // to a host listener still reaches nothing (egress goes through the
    // proxy, which refuses loopback; see tests/jail_egress.rs).
    f.tool(&probe_tool(
        "cmd_tcp_net",
        &["tcp", "127.0.0.1", "${a}"],
        true,
    ));
    let r = f.run("cmd_tcp_net", &[&format!("a={port}")]);
    r.assert_ok();
    assert!(
        r.text().contains("BLOCKED") && !r.text().contains("ESCAPED"),
        "{r:#?}"
    );
    assert_no_connection(&l);

    // Control: with the host network opted into (sandbox.direct_network)
    // the same probe does connect, so the listener and the probe work.
    f.config(&json!({"sandbox": {"direct_network": true}}));
    let r = f.run("cmd_tcp_net", &[&format!("a={port}")]);
    r.assert_ok();
    assert!(r.text().contains("ESCAPED"), "{r:#?}");
    assert!(
        r.json["warnings"].to_string().contains("direct network"),
        "{r:#?}"
    );
    l.set_nonblocking(false).unwrap();
    l.accept().expect("the allowed tool connected");
}

/// The environment a command tool sees, from `env`.
fn env_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect()
}

/// The base environment, and `PYTHONSAFEPATH` (glovebox's own, for
/// python: safe import paths).
const ALLOWED_ENV: &[&str] = &["PATH", "HOME", "TMPDIR", "LANG", "TZ", "PYTHONSAFEPATH"];

#[test]
fn undeclared_secret_is_not_in_the_environment() {
    require_jail!();
    let (f, _) = fixture();
    f.tool(&command_tool(
        "cmd_env",
        schema(json!({})),
        json!({"entrypoint": "env"}),
        read_root(),
    ));
    f.tool(&py_tool("py_env", "environ", json!([]), read_root()));
    f.tool(&probe_tool("cmd_scan", &["find_canary_env", OTHER], false));
    let env = [("OTHER_SECRET", OTHER), ("GBX_TEST_NOISE", "noise")];

    let r = f.run_env("cmd_env", &[], &env);
    r.assert_ok();
    assert!(r.text().contains("PATH="), "{r:#?}");
    assert!(!r.mentions(OTHER) && !r.mentions("OTHER_SECRET"), "{r:#?}");
    for k in env_keys(r.text()) {
        assert!(ALLOWED_ENV.contains(&k.as_str()), "unexpected {k}: {r:#?}");
    }

    let r = f.run_env("py_env", &[], &env);
    r.assert_ok();
    let keys: Vec<&String> = r.output().as_object().unwrap().keys().collect();
    assert!(keys.iter().any(|k| *k == "PATH"), "{r:#?}");
    assert!(!r.mentions(OTHER) && !r.mentions("OTHER_SECRET"), "{r:#?}");
    for k in keys {
        assert!(ALLOWED_ENV.contains(&k.as_str()), "unexpected {k}: {r:#?}");
    }

    // Nor in any process the tool can see (the supervisor's environ).
    let r = f.run_env("cmd_scan", &[], &env);
    r.assert_ok();
    assert!(r.text().contains("PROBE-START"), "{r:#?}");
    assert!(
        r.text().contains("BLOCKED") && !r.text().contains("ESCAPED"),
        "{r:#?}"
    );
}

fn token_perms() -> Value {
    let mut p = read_root();
    p["secrets"] = json!({"MY_TOKEN": {"type": "string", "required": true}});
    p
}

#[test]
fn declared_secret_reaches_its_tool_but_comes_back_redacted() {
    require_jail!();
    let (f, _) = fixture();
    f.tool(&command_tool(
        "cmd_token",
        schema(json!({})),
        json!({"entrypoint": "env"}),
        token_perms(),
    ));
    f.tool(&py_tool("py_token", "token", json!([]), token_perms()));
    f.tool(&py_tool(
        "py_leak",
        "leak_in_exception",
        json!([]),
        token_perms(),
    ));
    let env = [("MY_TOKEN", TOKEN), ("OTHER_SECRET", OTHER)];

    let r = f.run_env("cmd_token", &[], &env);
    r.assert_ok();
    assert!(
        r.text()
            .lines()
            .any(|l| l == "MY_TOKEN=[REDACTED:MY_TOKEN]"),
        "{r:#?}"
    );
    assert!(!r.mentions(TOKEN), "the token came back: {r:#?}");
    assert!(!r.mentions(OTHER), "{r:#?}");

    // The tool saw the real value: its length and byte sum match.
    let r = f.run_env("py_token", &[], &env);
    r.assert_ok();
    let out = r.output();
    assert_eq!(out["token"], json!("[REDACTED:MY_TOKEN]"), "{r:#?}");
    assert_eq!(out["len"], json!(TOKEN.len()), "{r:#?}");
    let sum: u64 = TOKEN.bytes().map(u64::from).sum();
    assert_eq!(out["sum"], json!(sum), "{r:#?}");
    assert!(out["env"].get("OTHER_SECRET").is_none(), "{r:#?}");
    assert!(
        r.stderr().contains("stderr sees [REDACTED:MY_TOKEN]"),
        "{r:#?}"
    );
    assert!(!r.mentions(TOKEN), "the token came back: {r:#?}");

    // An error message carrying it is redacted too.
    let r = f.run_env("py_leak", &[], &env);
    r.assert_failed("python_exception", 1);
    assert!(
        r.message().contains("the token is [REDACTED:MY_TOKEN]"),
        "{r:#?}"
    );
    assert!(!r.mentions(TOKEN), "the token came back: {r:#?}");
}

/// A venv whose `bin/python3` links to the system interpreter.
fn venv(f: &Fixture, home: &str) {
    let bin = f.root.join("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::fs::remove_file(bin.join("python3"));
    std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python3")).unwrap();
    f.file(
        "venv/pyvenv.cfg",
        &format!("home = {home}\ninclude-system-site-packages = false\n"),
    );
}

/// Attack 2: `pyvenv.cfg` is an ordinary project file; pointing its `home`
/// next to the canary must not make the canary readable. The grant comes
/// from the interpreter the venv's link resolves to.
#[test]
fn an_edited_pyvenv_cfg_does_not_widen_the_jail() {
    require_jail!();
    let (f, canary) = fixture();
    let canary = path_str(&canary).to_string();
    venv(&f, "/usr/bin");
    let mut tool = py_tool("py_venv", "read", json!(["${a}"]), read_root());
    tool["exec"]["python"]["venv"] = json!("venv");
    f.tool(&tool);
    let r = f.run("py_venv", &["a=inside.txt"]);
    r.assert_ok();
    assert_eq!(r.text(), "ESCAPED inside content");

    // `home` now names a bin directory beside the canary.
    std::fs::create_dir_all(f.outside.join("bin")).unwrap();
    venv(&f, path_str(&f.outside.join("bin")));
    let r = f.run("py_venv", &[&format!("a={canary}")]);
    assert!(!r.mentions(CANARY), "canary leaked: {r:#?}");
    r.assert_ok();
    assert!(r.stderr().contains("PROBE-START"), "{r:#?}");
    assert!(r.text().starts_with("BLOCKED"), "{r:#?}");
    let explain = std::process::Command::new(bin())
        .args(["--root", path_str(&f.root), "explain", "py_venv"])
        .output()
        .unwrap();
    let explain = String::from_utf8_lossy(&explain.stdout);
    assert!(
        !explain.contains(path_str(&f.outside)),
        "the outside dir is granted: {explain}"
    );
}

/// A venv whose interpreter is not part of a Python installation is
/// refused, and the fake interpreter never runs.
#[test]
fn a_venv_whose_interpreter_is_not_python_is_refused() {
    require_jail!();
    let (f, _) = fixture();
    let fake = f.outside.join("fake/bin/python3");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(&fake, "#!/bin/sh\necho FAKE-INTERPRETER-RAN\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = f.root.join("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&fake, bin.join("python3")).unwrap();
    f.file("venv/pyvenv.cfg", "home = /usr/bin\n");
    let mut tool = py_tool("py_fake", "read", json!(["${a}"]), read_root());
    tool["exec"]["python"]["venv"] = json!("venv");
    f.tool(&tool);
    let r = f.run("py_fake", &["a=inside.txt"]);
    r.assert_failed("manifest_invalid", 2);
    assert!(
        r.message().contains("not part of a Python installation"),
        "{r:#?}"
    );
    assert!(!r.mentions("FAKE-INTERPRETER-RAN"), "{r:#?}");
}

/// Attack 6 at the output caps: a tool prints padding then its token on
/// stdout and stderr, so the capture cap cuts at every position around the
/// token. No 8-character run of it comes back.
#[test]
fn an_output_cap_never_cuts_a_secret_into_a_readable_piece() {
    require_jail!();
    let (f, _) = fixture();
    const CAP: usize = 256;
    f.config(&json!({"limits": {"output_bytes": CAP}}));
    f.tool(&command_tool(
        "cut_token",
        schema(json!({"pad": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["-c",
            "import os, sys\ns = 'p' * int(sys.argv[1]) + os.environ['MY_TOKEN'] + ' end'\nsys.stdout.write(s)\nsys.stderr.write(s)",
            "${pad}"]}),
        token_perms(),
    ));
    let mut cut_inside = 0;
    for at in -2..=(TOKEN.len() as i64 + 2) {
        let pad = (CAP as i64 + at - TOKEN.len() as i64).to_string();
        let r = f.run_env(
            "cut_token",
            &[&format!("pad={pad}")],
            &[("MY_TOKEN", TOKEN)],
        );
        let stderr = r.stderr().to_string();
        assert!(stderr.starts_with("ppp"), "the tool did not run: {r:#?}");
        assert!(
            r.piece_of(TOKEN).is_none(),
            "pad {pad}: {:?} in {r:#?}",
            r.piece_of(TOKEN)
        );
        cut_inside += usize::from(r.kind() == "resource_limit" && !stderr.ends_with("end"));
    }
    assert!(cut_inside > 10, "the cap never cut inside the token");
}
