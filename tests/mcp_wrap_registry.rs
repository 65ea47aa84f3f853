//! A real MCP server from a package registry, jailed as `kind: mcp`: the
//! reference `mcp-server-time` (PyPI, pinned; tests/mcp/setup-time.sh
//! installs it in target/mcp-time-venv with the system python, which the
//! jail's baseline holds). Listed and called through `glovebox mcp`, with
//! its own schemas; granted nothing but its venv.
//!
//! The tests set their venvs up themselves (pip, from PyPI); where that
//! fails they fail with the reason: they never skip as a pass.
//!
//! And `npx -y` of a pinned npm server, as clients' configs name it:
//! installed by glovebox through the egress proxy (the registry allowed),
//! run from its cache directory, which the server cannot write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use common::*;
use runkit::*;
use serde_json::json;
use servekit::StdioMcp;
use std::path::{Path, PathBuf};

/// The reference time server (tests/mcp/setup-time.sh).
fn time_server() -> PathBuf {
    venv_program(
        "tests/mcp/setup-time.sh",
        "GLOVEBOX_MCP_TIME_VENV",
        "mcp-time-venv",
        "mcp-server-time",
    )
}

/// Runs the python `client` with glovebox and `args` as its arguments in
/// `dir` (its state in `dir/state`); it must end well, printing `ok`.
fn drive(python: &Path, client: &str, args: &[&Path], dir: &Path, ok: &str) {
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(client)
        .arg(bin())
        .args(args)
        .current_dir(dir)
        .env("GLOVEBOX_STATE_DIR", dir.join("state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(ok),
        "{args:?}: stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_reference_time_server_runs_jailed_through_glovebox_mcp() {
    require_jail!();
    let program = time_server();
    let venv = program.parent().unwrap().parent().unwrap();
    let f = Fixture::new();
    f.tool(&json!({
        "name": "time",
        "description": "the reference time server",
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": {"entrypoint": program, "args": ["--local-timezone", "UTC"]}},
        "permissions": {"fs": {"read": [venv]}},
    }));
    let state = f.state();
    let mut s = StdioMcp::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &[],
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}));
    let list = s.reply();
    let tools = list["result"]["tools"].as_array().unwrap();
    let current = tools
        .iter()
        .find(|t| t["name"] == "time__get_current_time")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        current["inputSchema"]["required"],
        json!(["timezone"]),
        "{current}"
    );
    assert!(tools.iter().any(|t| t["name"] == "time__convert_time"));

    let now = s.call(
        2,
        "time__get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    );
    let out = &now["result"];
    assert_ne!(out["isError"], json!(true), "{now}");
    let text = out.to_string();
    assert!(
        text.contains("Asia/Tokyo") && text.contains("+09:00"),
        "{now}"
    );

    let converted = s.call(
        3,
        "time__convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}),
    );
    assert_ne!(converted["result"]["isError"], json!(true), "{converted}");
    assert!(
        converted.to_string().contains("Europe/Paris"),
        "{converted}"
    );

    // Its schema is enforced by glovebox; its own errors come back as one.
    let missing = s.call(4, "time__get_current_time", json!({}));
    assert_eq!(
        servekit::tool_error(&missing["result"])["kind"],
        "input_invalid",
        "{missing}"
    );
    let bad = s.call(
        5,
        "time__get_current_time",
        json!({"timezone": "Not/AZone"}),
    );
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let log = f.audit_log();
    assert!(
        log.contains("mcp_server=time") && log.contains("mcp_tool=convert_time"),
        "{log}"
    );
}

/// What an agent's `.mcp.json` runs: `glovebox wrap -- mcp-server-time`,
/// driven by the official MCP Python client (tests/mcp/setup.sh).
const SDK_CLIENT: &str = r#"
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    gb, venv, prog = sys.argv[1], sys.argv[2], sys.argv[3]
    # No grant named: the venv of the script is granted from it.
    params = StdioServerParameters(command=gb, args=[
        "wrap", "--", prog, "--local-timezone", "UTC"],
        env=dict(os.environ))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            if not tools:
                # Still starting (a loaded machine): offered when ready.
                for _ in range(600):
                    await asyncio.sleep(0.1)
                    tools = (await s.list_tools()).tools
                    if tools:
                        break
            names = sorted(t.name for t in tools)
            # The server's own names: a client adds its prefix once.
            assert names == ["convert_time", "get_current_time"], names
            res = await s.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
            assert not res.isError, res
            text = json.dumps([c.model_dump() for c in res.content])
            assert "+09:00" in text, text
            bad = await s.call_tool("get_current_time", {})
            assert bad.isError, bad
            print("SDK-OK", names)

asyncio.run(main())
"#;

#[test]
fn the_official_client_drives_glovebox_wrap_of_a_real_server() {
    require_jail!();
    let program = time_server();
    let python = venv_program(
        "tests/mcp/setup.sh",
        "GLOVEBOX_MCP_VENV",
        "mcp-venv",
        "python",
    );
    let venv = program.parent().unwrap().parent().unwrap();
    let work = tempdir();
    drive(
        &python,
        SDK_CLIENT,
        &[venv, &program],
        work.path(),
        "SDK-OK",
    );
    // Nothing written where the client ran it but the state directory.
    let left: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("state")], "{left:?}");
}

/// The reference filesystem server (npm; tests/mcp/setup-node.sh),
/// granted only to read `data/`, though it is told `data/` is its own to
/// change: it reads there, and its writes fail by the jail, whatever the
/// server itself allows.
#[test]
fn the_reference_filesystem_server_reads_its_grant_and_writes_nothing() {
    require_jail!();
    let node_dir = venv_program(
        "tests/mcp/setup-node.sh",
        "GLOVEBOX_MCP_NODE",
        "mcp-node",
        "",
    );
    // venv_program names DIR/bin/; the install is DIR.
    let install = node_dir.parent().unwrap().to_path_buf();
    let main = install.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(main.is_file(), "{main:?}");
    let f = Fixture::new();
    let data = f
        .file("data/a.txt", "hello from data")
        .parent()
        .unwrap()
        .to_path_buf();
    f.tool(&json!({
        "name": "fs",
        "description": "the reference filesystem server",
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": {"entrypoint": "node", "args": [main, data]}},
        "permissions": {"fs": {"read": [install, "data"]}},
    }));
    let state = f.state();
    let mut s = StdioMcp::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &[],
    );
    let read = s.call(1, "fs__read_text_file", json!({"path": data.join("a.txt")}));
    assert_ne!(read["result"]["isError"], json!(true), "{read}");
    assert!(read.to_string().contains("hello from data"), "{read}");
    // The server believes data/ is writable; the jail says otherwise.
    let wrote = s.call(
        2,
        "fs__write_file",
        json!({"path": data.join("new.txt"), "content": "pwned"}),
    );
    assert_eq!(wrote["result"]["isError"], json!(true), "{wrote}");
    let said = wrote.to_string();
    assert!(
        said.contains("EROFS") || said.contains("EACCES") || said.contains("EPERM"),
        "refused by the server, not the jail: {wrote}"
    );
    assert!(
        !data.join("new.txt").exists(),
        "the server wrote past its grant"
    );
    let edit = s.call(
        3,
        "fs__edit_file",
        json!({"path": data.join("a.txt"), "edits": [{"oldText": "hello", "newText": "pwned"}]}),
    );
    assert_eq!(edit["result"]["isError"], json!(true), "{edit}");
    assert_eq!(
        std::fs::read_to_string(data.join("a.txt")).unwrap(),
        "hello from data"
    );
}

/// The same with the official 2.x client (tests/mcp/setup2.sh), on both
/// MCP revisions it speaks: 2026-07-28 (`auto`) and 2025-11-25 (`legacy`).
const SDK2_CLIENT: &str = r#"
import asyncio, json, os, sys, warnings
warnings.simplefilter("ignore")
import mcp_types as types
from mcp import Client, StdioServerParameters

async def main():
    gb, venv, prog, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    server = StdioServerParameters(command=gb, args=[
        "wrap", "--read", venv, "--name", "time", "--", prog, "--local-timezone", "UTC"],
        env=dict(os.environ))
    async with Client(server, mode=mode,
                      client_info=types.Implementation(name="mcp-wrap-test", version="1")) as c:
        want = "2026-07-28" if mode == "auto" else "2025-11-25"
        assert c.protocol_version == want, c.protocol_version
        names = []
        for _ in range(600):
            names = sorted(t.name for t in (await c.list_tools()).tools)
            if names:
                break
            await asyncio.sleep(0.1)
        assert "convert_time" in names, names
        r = await c.call_tool("convert_time", {
            "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert not r.is_error, r
        assert "+09:00" in json.dumps([x.model_dump() for x in r.content]), r
        bad = await c.call_tool("convert_time", {"time": "12:00"})
        assert bad.is_error, bad
        print("SDK2-OK", mode)

asyncio.run(main())
"#;

#[test]
fn the_official_2x_client_drives_glovebox_wrap_on_both_revisions() {
    require_jail!();
    let program = time_server();
    let python = venv_program(
        "tests/mcp/setup2.sh",
        "GLOVEBOX_MCP2_VENV",
        "mcp2-venv",
        "python",
    );
    let venv = program.parent().unwrap().parent().unwrap();
    for mode in ["auto", "legacy"] {
        let work = tempdir();
        let args = [venv, &program, Path::new(mode)];
        drive(&python, SDK2_CLIENT, &args, work.path(), "SDK2-OK");
    }
}

/// The npm server `npx -y` fetches in the test below.
const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";

/// That the npm registry answers (`npm view`): where it does not, the test
/// fails with the reason (it never skips as a pass).
fn require_npm_registry() {
    let out = std::process::Command::new("timeout")
        .args(["60", "npm", "view", MEMORY, "version"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run npm: {e}"),
    };
    panic!("the npm registry is unreachable (the test fetches {MEMORY} with npx): {why}");
}

fn memory_server(f: &Fixture, name: &str, allow: serde_json::Value, memory_file: Option<&Path>) {
    let mut exec = json!({"entrypoint": "npx", "args": ["-y", MEMORY]});
    if let Some(m) = memory_file {
        exec["env"] = json!({"MEMORY_FILE_PATH": m});
    }
    f.tool(&json!({
        "name": name,
        "description": "the reference memory server, by npx -y",
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": exec},
        "permissions": {"network": {"allow": allow}, "fs": {"write": ["state"]}},
    }));
}

#[test]
fn an_npx_y_server_is_installed_through_the_proxy_and_cannot_change_its_code() {
    if !jail_available() {
        return;
    }
    require_npm_registry();
    let f = Fixture::new();
    f.file("state/.keep", "");
    let memory_file = f.root.join("state/memory.jsonl");
    memory_server(
        &f,
        "memory",
        json!(["registry.npmjs.org"]),
        Some(&memory_file),
    );
    // Its default memory file lies beside its code, in the cache.
    memory_server(&f, "nomem", json!(["registry.npmjs.org"]), None);
    // Without the registry in the allowlist nothing is installed.
    memory_server(&f, "closed", json!(["example.com"]), None);
    let state = f.state();
    // Installed first by a load no client waits on (`glovebox list`, as
    // `approve` would): `glovebox mcp` loads its project before it
    // answers, so its client would wait for both installs, one after the
    // other, which took more than the client's 60 s on a loaded machine.
    let listed = f.glovebox(&["list", "--json"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains("memory__read_graph") && text.contains("nomem__read_graph"),
        "{text}\n{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let env = [("GLOVEBOX_STATE_DIR", state.to_str().unwrap())];
    let mut s = StdioMcp::start(&f.root, &env, &[]);
    let made = s.call(
        1,
        "memory__create_entities",
        json!({"entities": [{"name": "glovebox", "entityType": "tool",
                             "observations": ["jails MCP servers"]}]}),
    );
    assert_ne!(made["result"]["isError"], json!(true), "{made}");
    let graph = s.call(2, "memory__read_graph", json!({}));
    assert!(graph.to_string().contains("jails MCP servers"), "{graph}");
    assert!(
        memory_file.is_file(),
        "the server wrote nothing to its grant"
    );
    // Installed under glovebox's state, once per server.
    let cache = std::fs::read_dir(state.join("cache/mcp"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let code = cache.join("memory/package/node_modules/@modelcontextprotocol/server-memory/dist");
    assert!(code.join("index.js").is_file(), "{code:?}");
    // The server cannot write beside its code: its default memory file
    // is refused by the jail, and nothing is created there.
    let refused = s.call(
        3,
        "nomem__create_entities",
        json!({"entities": [{"name": "x", "entityType": "y", "observations": ["pwned"]}]}),
    );
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("EROFS") || said.contains("EACCES") || said.contains("EPERM"),
        "refused by the server, not the jail: {refused}"
    );
    let nomem = cache.join("nomem/package/node_modules/@modelcontextprotocol/server-memory/dist");
    assert!(nomem.join("index.js").is_file(), "{nomem:?}");
    assert!(
        !nomem.join("memory.jsonl").exists(),
        "the server wrote into its code"
    );
    // The registry only through the proxy, under the allowlist: a server
    // whose manifest does not allow it installs nothing, and says why
    // (in the manifest's words), to the client that calls its tool.
    let closed = s.call(4, "closed__read_graph", json!({}));
    let e = servekit::tool_error(&closed["result"]);
    assert_eq!(e["kind"], "manifest_invalid", "{closed}");
    let why = e["message"].as_str().unwrap();
    assert!(
        why.contains("npx -y")
            && why.contains("add registry.npmjs.org to permissions.network.allow"),
        "{closed}"
    );
    assert!(
        !cache.join("closed/package/node_modules").exists(),
        "installed past the allowlist"
    );
    // Said by glovebox run too.
    let out = f.glovebox(&["run", "closed__read_graph", "--json"]);
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("registry.npmjs.org") && said.contains("npx -y"),
        "{said}"
    );
}

/// The official client (1.x) starts `glovebox wrap ARGS…` and reports
/// what it saw: `REFUSED <message>` when the handshake failed, else
/// `LISTED <names>` (once the tools are there, within 120 s), `LOGGED
/// <message>` for each log message, `INIT <seconds>` for the handshake's
/// time, and `CALLED <name> <error?> <text>` for a call of `CALL` (JSON
/// `[name, arguments]`) when given.
const SDK_PROBE: &str = r#"
import asyncio, json, os, sys, time
from mcp import ClientSession, StdioServerParameters, types
from mcp.shared.exceptions import McpError
from mcp.client.stdio import stdio_client

async def main():
    gb, args = sys.argv[1], sys.argv[2:]
    params = StdioServerParameters(command=gb, args=["wrap"] + args, env=dict(os.environ))
    changed = asyncio.Event()
    logged = []
    async def on_message(m):
        if isinstance(m, types.ServerNotification) and isinstance(m.root, types.ToolListChangedNotification):
            changed.set()
    async def on_log(p):
        logged.append(p.data)
        print("LOGGED", json.dumps(p.data), flush=True)
    began = time.monotonic()
    try:
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, message_handler=on_message, logging_callback=on_log) as s:
                await s.initialize()
                print("INIT %.2f" % (time.monotonic() - began), flush=True)
                deadline = time.monotonic() + 120
                names = []
                while time.monotonic() < deadline:
                    names = sorted(t.name for t in (await s.list_tools()).tools)
                    if names or logged:
                        break
                    changed.clear()
                    try:
                        await asyncio.wait_for(changed.wait(), deadline - time.monotonic())
                    except asyncio.TimeoutError:
                        break
                print("LISTED", json.dumps(names), "%.2f" % (time.monotonic() - began), flush=True)
                if os.environ.get("CALL"):
                    name, arguments = json.loads(os.environ["CALL"])
                    res = await s.call_tool(name, arguments)
                    text = " ".join(c.text for c in res.content if c.type == "text")
                    print("CALLED", name, bool(res.isError), json.dumps(text), flush=True)
    except McpError as e:
        print("REFUSED", json.dumps(str(e)), flush=True)
    except BaseException as e:
        errors = getattr(e, "exceptions", [e])
        while errors and hasattr(errors[0], "exceptions"):
            errors = errors[0].exceptions
        if errors and isinstance(errors[0], McpError):
            print("REFUSED", json.dumps(str(errors[0])), flush=True)
        else:
            raise

asyncio.run(main())
"#;

/// What [`SDK_PROBE`] printed for `glovebox wrap ARGS…` run in `dir`
/// (glovebox's state in `state`), with `call` made when given.
fn probe(
    python: &Path,
    dir: &Path,
    state: &Path,
    args: &[&str],
    call: Option<serde_json::Value>,
) -> String {
    let mut c = std::process::Command::new(python);
    c.arg("-c")
        .arg(SDK_PROBE)
        .arg(bin())
        .args(args)
        .current_dir(dir)
        .env("GLOVEBOX_STATE_DIR", state);
    if let Some(call) = call {
        c.env("CALL", call.to_string());
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The official client's venv (tests/mcp/setup.sh).
fn sdk_python() -> PathBuf {
    venv_program(
        "tests/mcp/setup.sh",
        "GLOVEBOX_MCP_VENV",
        "mcp-venv",
        "python",
    )
}

#[test]
fn the_official_client_is_told_why_a_wrapped_server_cannot_start() {
    require_jail!();
    require_npm_registry();
    let python = sdk_python();
    let work = tempdir();
    let state = work.path().join("state");
    // The registry not allowed: the handshake fails, naming the flag.
    let said = probe(
        &python,
        work.path(),
        &state,
        &["--", "npx", "-y", MEMORY],
        None,
    );
    assert!(
        said.starts_with("REFUSED") && said.contains("pass --allow-host registry.npmjs.org"),
        "{said}"
    );
    let said = probe(
        &python,
        work.path(),
        &state,
        &["--", "uvx", "mcp-server-time"],
        None,
    );
    assert!(
        said.starts_with("REFUSED")
            && said.contains("--allow-host pypi.org --allow-host files.pythonhosted.org"),
        "{said}"
    );
    // A package that is not there: npm's 404, in the handshake's error
    // or (when the registry answers after the handshake) as a log message
    // with the tool list, whose tools are absent.
    let typo = format!(
        "@modelcontextprotocol/server-filesysstem-{}",
        std::process::id()
    );
    let said = probe(
        &python,
        work.path(),
        &state,
        &[
            "--allow-host",
            "registry.npmjs.org",
            "--",
            "npx",
            "-y",
            &typo,
        ],
        Some(json!(["read_text_file", {"path": "/etc/passwd"}])),
    );
    assert!(said.contains("404"), "{said}");
    assert!(
        said.starts_with("REFUSED")
            || (said.contains("LOGGED")
                && said.contains("LISTED []")
                && said.contains("CALLED read_text_file True")),
        "{said}"
    );
}

#[test]
fn a_first_npx_start_answers_at_once_and_later_starts_need_no_network() {
    require_jail!();
    require_npm_registry();
    let python = sdk_python();
    let work = tempdir();
    std::fs::create_dir_all(work.path().join("data")).unwrap();
    let memory = work.path().join("data/memory.jsonl");
    let setting = format!("MEMORY_FILE_PATH={}", memory.display());
    let call = json!(["create_entities", {"entities": [
        {"name": "glovebox", "entityType": "tool", "observations": ["wrapped"]}]}]);
    // First start, the install under way: the handshake is answered
    // within the clients' waits, the tools offered when they are there.
    let first = probe(
        &python,
        work.path(),
        &work.path().join("state-a"),
        &[
            "--allow-host",
            "registry.npmjs.org",
            "--write",
            "data",
            "--env",
            &setting,
            "--",
            "npx",
            "-y",
            MEMORY,
        ],
        Some(call.clone()),
    );
    let init: f64 = first
        .lines()
        .find_map(|l| l.strip_prefix("INIT "))
        .unwrap_or_else(|| panic!("{first}"))
        .parse()
        .unwrap();
    assert!(init < 5.0, "the handshake took {init} s: {first}");
    assert!(first.contains("\"read_graph\""), "{first}");
    assert!(first.contains("CALLED create_entities False"), "{first}");
    assert!(memory.is_file(), "--env MEMORY_FILE_PATH did not reach it");
    // Prepared once with the registry, then served without any network.
    let state = work.path().join("state-b");
    let out = std::process::Command::new(bin())
        .args([
            "wrap",
            "--prepare",
            "--allow-host",
            "registry.npmjs.org",
            "--",
            "npx",
            "-y",
            MEMORY,
        ])
        .current_dir(work.path())
        .env("GLOVEBOX_STATE_DIR", &state)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("installing @modelcontextprotocol/server-memory")
            && said.contains("(first start only)"),
        "{said}"
    );
    assert!(
        said.contains("is ready") && said.contains("read_graph"),
        "{said}"
    );
    let later = probe(
        &python,
        work.path(),
        &state,
        &[
            "--write", "data", "--env", &setting, "--", "npx", "-y", MEMORY,
        ],
        Some(json!(["read_graph", {}])),
    );
    assert!(later.contains("\"read_graph\""), "{later}");
    assert!(
        later.contains("CALLED read_graph False") && later.contains("wrapped"),
        "{later}"
    );
}

/// The reference time server, pinned, as `uvx` names it.
const TIME: &str = "mcp-server-time@2026.10.19";

/// That PyPI answers (pip, as tests/mcp/setup-time.sh reaches it): where
/// it does not, the test fails with the reason (it never skips as a pass).
fn require_pypi() {
    let out = std::process::Command::new("timeout")
        .args([
            "60",
            "python3",
            "-c",
            "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/mcp-server-time/', timeout=50)",
        ])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run python3: {e}"),
    };
    panic!("PyPI is unreachable (the test installs {TIME} with uvx): {why}");
}

/// `uvx PACKAGE` as clients' configs name it, with no uv on the machine
/// needed: glovebox installs the package from PyPI's wheels in the jail
/// (through the proxy, the two PyPI hosts allowed), answers the handshake
/// within the clients' waits, serves the package's tools under their own
/// names and runs them; a later start reuses the install with no network
/// at all. Without the hosts, the handshake fails naming the flags.
#[test]
fn a_uvx_server_is_installed_from_pypi_in_the_jail_and_reused_without_network() {
    require_jail!();
    require_pypi();
    let python = sdk_python();
    let work = tempdir();
    let state = work.path().join("state");
    let call = json!(["get_current_time", {"timezone": "UTC"}]);
    let first = probe(
        &python,
        work.path(),
        &state,
        &[
            "--allow-host",
            "pypi.org",
            "--allow-host",
            "files.pythonhosted.org",
            "--",
            "uvx",
            TIME,
            "--local-timezone",
            "UTC",
        ],
        Some(call.clone()),
    );
    let init: f64 = first
        .lines()
        .find_map(|l| l.strip_prefix("INIT "))
        .unwrap_or_else(|| panic!("{first}"))
        .parse()
        .unwrap();
    assert!(init < 5.0, "the handshake took {init} s: {first}");
    assert!(
        first.contains("LISTED [\"convert_time\", \"get_current_time\"]"),
        "{first}"
    );
    assert!(
        first.contains("CALLED get_current_time False") && first.contains("datetime"),
        "{first}"
    );
    // Later: the same state, no network granted.
    let later = probe(
        &python,
        work.path(),
        &state,
        &["--", "uvx", TIME, "--local-timezone", "UTC"],
        Some(call),
    );
    assert!(later.contains("CALLED get_current_time False"), "{later}");
    let init: f64 = later
        .lines()
        .find_map(|l| l.strip_prefix("INIT "))
        .unwrap_or_else(|| panic!("{later}"))
        .parse()
        .unwrap();
    assert!(init < 5.0, "a later start took {init} s: {later}");
}

/// A page on loopback (every request answered with it) until the test
/// ends: what the fetch server is pointed at.
fn serve_page(page: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

/// Three more of the reference servers, each started as a client's
/// config would name it, in one line with `glovebox wrap` in front
/// (issue 44's six: filesystem, memory and time are above): `uvx
/// mcp-server-git` reads a repository it is granted, `uvx
/// mcp-server-fetch` a page on loopback (`--allow-private`), `npx -y
/// server-everything` echoes. Listed and called by the official client.
#[test]
fn the_git_fetch_and_everything_reference_servers_work_wrapped() {
    require_jail!();
    require_pypi();
    require_npm_registry();
    let python = sdk_python();
    let git = system_program("git", "git");
    let work = tempdir();
    let pypi = [
        "--allow-host",
        "pypi.org",
        "--allow-host",
        "files.pythonhosted.org",
    ];

    let commit = marker("wrapped-git");
    let repo = work.path().join("repo");
    for args in [
        vec!["init", "-q", repo.to_str().unwrap()],
        vec![
            "-C",
            repo.to_str().unwrap(),
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            &commit,
        ],
    ] {
        let out = std::process::Command::new(&git)
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut args = pypi.to_vec();
    args.extend([
        "--read",
        "repo",
        "--",
        "uvx",
        "mcp-server-git@2026.10.19",
        "--repository",
        repo.to_str().unwrap(),
    ]);
    let said = probe(
        &python,
        work.path(),
        &work.path().join("state-git"),
        &args,
        Some(json!(["git_log", {"repo_path": repo}])),
    );
    assert!(said.contains("\"git_status\""), "{said}");
    assert!(
        said.contains("CALLED git_log False") && said.contains(&commit),
        "{said}"
    );

    let port = serve_page("<html><body><h1>a page for the wrapped fetch</h1></body></html>");
    let host = format!("127.0.0.1:{port}");
    let mut args = pypi.to_vec();
    args.extend([
        "--allow-host",
        &host,
        "--allow-private",
        "--",
        "uvx",
        "mcp-server-fetch@2026.10.24",
        "--allow-private-ips",
        "--ignore-robots-txt",
    ]);
    let said = probe(
        &python,
        work.path(),
        &work.path().join("state-fetch"),
        &args,
        Some(json!(["fetch", {"url": format!("http://{host}/"), "raw": true}])),
    );
    assert!(
        said.contains("CALLED fetch False") && said.contains("a page for the wrapped fetch"),
        "{said}"
    );

    let said = probe(
        &python,
        work.path(),
        &work.path().join("state-everything"),
        &[
            "--allow-host",
            "registry.npmjs.org",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
        ],
        Some(json!(["echo", {"message": "through glovebox"}])),
    );
    assert!(
        said.contains("CALLED echo False") && said.contains("Echo: through glovebox"),
        "{said}"
    );
}
