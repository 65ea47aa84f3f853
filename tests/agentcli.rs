//! agentcli `tools.json` as a drop-in, through the real binary: the seed's
//! example loaded and run, its error messages byte for byte, stdin
//! delivered verbatim, JSON errors on stderr, `timeoutSec`,
//! `envPassthrough` (names only in the audit log, values redacted), the
//! default jail (read the tools.json directory, nothing else) attacked for
//! real, the `permissions` extension widening it, and `--tools-json` with
//! list / show / run / lint / mcp.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::{bin, tempdir};
use serde_json::{json, Value};

/// The seed's minimal example, verbatim.
const SEED_EXAMPLE: &str = r#"{
  "tools": [
    {
      "name": "get_time",
      "description": "Get current time for an IANA timezone",
      "schema": {
        "type": "object",
        "properties": {
          "timezone": {"type": "string", "description": "IANA timezone, e.g. Europe/Helsinki"},
          "tz": {"type": "string", "description": "Alias for timezone (deprecated)"}
        },
        "required": ["timezone"],
        "additionalProperties": false
      },
      "command": ["./tools/bin/get_time"],
      "timeoutSec": 5,
      "envPassthrough": ["TZ", "OAI_HTTP_TIMEOUT"]
    }
  ]
}"#;

/// A get_time that reads its arguments from stdin, as agentcli tools do.
const GET_TIME: &str = r#"#!/usr/bin/env python3
import datetime, json, sys, zoneinfo
args = json.loads(sys.stdin.read())
tz = args.get("timezone") or args.get("tz")
try:
    zone = zoneinfo.ZoneInfo(tz)
except Exception:
    sys.stderr.write(json.dumps({"error": "unknown timezone " + tz}) + "\n")
    sys.exit(2)
print(json.dumps({"timezone": tz, "year": datetime.datetime.now(zone).year}))
"#;

/// A probe: proves it ran, then does what the arguments ask and reports.
const PROBE: &str = r#"#!/usr/bin/env python3
import json, os, socket, sys
raw = sys.stdin.read()
args = json.loads(raw) if raw else {}
out = {"ran": True}
act = args.get("act")
try:
    if act == "stdin":
        out["stdin"] = raw
    elif act == "len":
        out["len"] = len(raw)
    elif act == "ignore":
        pass
    elif act == "read":
        with open(args["path"]) as f:
            out["data"] = f.read()
    elif act == "write":
        with open(args["path"], "w") as f:
            f.write("x")
        out["wrote"] = True
    elif act == "connect":
        s = socket.create_connection(("127.0.0.1", args["port"]), timeout=3)
        s.sendall(b"hello")
        s.close()
        out["connected"] = True
    elif act == "env":
        out["env"] = dict(os.environ)
        out["has_pass"] = os.environ.get("GBX_PASS") == args.get("expect")
    elif act == "fail":
        sys.stderr.write('{"error":"' + args["message"] + '"}\n')
        sys.exit(3)
    elif act == "sleep":
        import time
        time.sleep(60)
    elif act == "nothing":
        sys.exit(0)
    elif act == "text":
        print("not json")
        sys.exit(0)
except OSError as e:
    out["denied"] = "%s: %s" % (type(e).__name__, e.errno)
print(json.dumps(out))
"#;

/// A temp dir with `proj/` (tools.json and tools/bin/), `outside/` (a
/// canary no tool is granted), `cwd/` and a private state dir.
struct Project {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    dir: PathBuf,
    cwd: PathBuf,
    state: PathBuf,
}

impl Project {
    fn new(tools: &Value) -> Project {
        Project::with_text(&serde_json::to_string_pretty(tools).unwrap())
    }

    fn with_text(text: &str) -> Project {
        let tmp = tempdir();
        let base = tmp.path().to_path_buf();
        let dir = base.join("proj");
        let cwd = base.join("cwd");
        let state = base.join("state");
        for d in [&dir.join("tools/bin"), &cwd, &base.join("outside")] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(dir.join("tools.json"), text).unwrap();
        let p = Project {
            _tmp: tmp,
            base,
            dir,
            cwd,
            state,
        };
        p.script("tools/bin/get_time", GET_TIME);
        p.script("tools/bin/probe", PROBE);
        fs::write(p.canary(), "CANARY-7f3a9d").unwrap();
        p
    }

    fn canary(&self) -> PathBuf {
        self.base.join("outside/canary.txt")
    }

    fn script(&self, rel: &str, text: &str) {
        let p = self.dir.join(rel);
        fs::write(&p, text).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn tools_json(&self) -> PathBuf {
        self.dir.join("tools.json")
    }

    /// glovebox `ARGS` from `cwd/`, with `envs` set.
    fn gb(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.cwd)
            .env("GLOVEBOX_STATE_DIR", &self.state)
            .stdin(Stdio::null());
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().expect("run glovebox")
    }

    /// `glovebox --tools-json FILE run NAME --params-file F --json`.
    fn run_env(&self, name: &str, params: &Value, envs: &[(&str, &str)]) -> Value {
        let file = self.tools_json();
        // Through a file: a payload of megabytes does not fit in argv.
        let params_file = self.base.join("params.json");
        fs::write(&params_file, params.to_string()).unwrap();
        let out = self.gb(
            &[
                "--tools-json",
                file.to_str().unwrap(),
                "run",
                name,
                "--params-file",
                params_file.to_str().unwrap(),
                "--json",
            ],
            envs,
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no JSON outcome ({e}): {} / {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    fn run(&self, name: &str, params: &Value) -> Value {
        self.run_env(name, params, &[])
    }

    fn audit_log(&self) -> String {
        fs::read_to_string(self.dir.join(".glee/audit/tools.log")).unwrap_or_default()
    }
}

fn probe_tool(extra: Value) -> Value {
    let mut t =
        json!({"name": "probe", "description": "attack probe", "command": ["./tools/bin/probe"]});
    if let (Some(t), Some(extra)) = (t.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            t.insert(k.clone(), v.clone());
        }
    }
    json!({"tools": [t]})
}

fn lint_messages(p: &Project) -> (Option<i32>, Vec<(String, String)>) {
    let file = p.tools_json();
    let out = p.gb(
        &["--tools-json", file.to_str().unwrap(), "lint", "--json"],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap().to_string(),
                d["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (out.status.code(), found)
}

#[test]
fn the_seed_example_loads_and_runs() {
    require_jail!();
    let p = Project::with_text(SEED_EXAMPLE);
    let (code, found) = lint_messages(&p);
    assert_eq!(code, Some(0), "{found:?}");
    assert!(found.is_empty(), "{found:?}");
    let o = p.run("get_time", &json!({"timezone": "Europe/Helsinki"}));
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["output"]["timezone"], "Europe/Helsinki");
    assert!(o["output"]["year"].as_u64().unwrap() >= 2024);
    // The schema is enforced before anything runs.
    let o = p.run("get_time", &json!({"zone": "UTC"}));
    assert_eq!(o["error"]["kind"], "input_invalid", "{o}");
    // A JSON error on stderr with a non-zero exit is the call's error.
    let o = p.run("get_time", &json!({"timezone": "Nowhere/Atlantis"}));
    assert_eq!(o["error"]["kind"], "exit_code", "{o}");
    assert_eq!(o["error"]["message"], "unknown timezone Nowhere/Atlantis");
    assert_eq!(o["error"]["details"]["exit_code"], 2);
}

#[test]
fn every_documented_error_message_byte_for_byte() {
    let p = Project::new(&json!({"tools": [
        {"command": ["./tools/bin/x"]},
        {"name": "dup", "command": ["./tools/bin/x"]},
        {"name": "dup", "command": ["./tools/bin/x"]},
        {"name": "empty", "command": []},
        {"name": "nobin", "command": ["./bin/x"]},
        {"name": "escape", "command": ["./tools/bin/../hack"]},
        {"name": "env", "command": ["./tools/bin/x"], "envPassthrough": ["ok_name", "OAI-API-KEY", "1BAD"]},
        {"name": "fine", "command": ["/bin/true"]}
    ]}));
    let (code, found) = lint_messages(&p);
    assert_eq!(code, Some(1));
    let expected = [
        "tool[0]: name is required",
        "tool[2] \"dup\": duplicate name",
        "tool[3] \"empty\": command must have at least program name",
        "tool[4] \"nobin\": relative command[0] must start with ./tools/bin/",
        "tool[5] \"escape\": command[0] escapes ./tools/bin after normalization (got \"./tools/bin/../hack\" -> \"./tools/hack\")",
        "tool[6] \"env\": envPassthrough[1]: invalid name \"OAI-API-KEY\" (must match [A-Z_][A-Z0-9_]*)",
        "tool[6] \"env\": envPassthrough[2]: invalid name \"1BAD\" (must match [A-Z_][A-Z0-9_]*)",
    ];
    let messages: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(messages, expected);
    assert!(found.iter().all(|(r, _)| r == "agentcli-invalid"));
    // Only the valid entry is listed; a rejected one does not run.
    let file = p.tools_json();
    let out = p.gb(
        &["--tools-json", file.to_str().unwrap(), "list", "--json"],
        &[],
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fine"]);
    let o = p.run("dup", &json!({}));
    assert_eq!(o["error"]["kind"], "manifest_invalid", "{o}");
}

#[test]
fn lint_points_at_the_line_and_rejects_unusable_names() {
    let p = Project::with_text(
        "{\"tools\": [\n  {\"name\": \"a\",\n   \"command\": [\"./bin/a\"]},\n  {\"name\": \"no spaces\", \"command\": [\"/bin/true\"]}\n]}\n",
    );
    let file = p.tools_json();
    let out = p.gb(&["--tools-json", file.to_str().unwrap(), "lint"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "tools.json:3:16: error[agentcli-invalid] a: tool[0] \"a\": relative command[0] must start with ./tools/bin/",
        "{text}"
    );
    assert!(
        lines[1].starts_with("tools.json:4:12: error[agentcli-invalid] no spaces: tool[1] \"no spaces\": invalid name for glovebox"),
        "{text}"
    );
}

#[test]
fn unknown_keys_warn_and_bad_json_is_one_clear_error() {
    let p = Project::new(&probe_tool(json!({"timeout": 3})));
    let (code, found) = lint_messages(&p);
    assert_eq!(code, Some(0));
    assert_eq!(
        found,
        [(
            "agentcli-unknown-key".to_string(),
            "tool[0] \"probe\": unknown key \"timeout\" is ignored (agentcli ignores it too)"
                .to_string()
        )]
    );
    let p = Project::with_text("{\"tools\": [");
    let (code, found) = lint_messages(&p);
    assert_eq!(code, Some(1));
    assert_eq!(found.len(), 1);
    assert!(
        found[0].1.starts_with("tools.json is not valid JSON: "),
        "{found:?}"
    );
}

#[test]
fn stdin_is_the_arguments_verbatim_and_never_blocks() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({})));
    // Key order and text as sent (no defaults added, nothing re-encoded).
    let params = json!({"act": "stdin", "z": 1, "a": "x y \u{e9}", "n": [true, null]});
    let o = p.run("probe", &params);
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["output"]["stdin"], params.to_string());
    // A 4 MiB payload to a tool that never reads stdin: the call ends.
    let big = "A".repeat(4 << 20);
    let o = p.run("probe", &json!({"act": "ignore", "pad": big}));
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["output"], json!({"ran": true}));
    // ... and to one that reads it all.
    let params = json!({"act": "len", "pad": "B".repeat(4 << 20)});
    let o = p.run("probe", &params);
    assert_eq!(o["output"]["len"], params.to_string().len(), "{o}");
}

#[test]
fn output_must_be_one_json_value() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({})));
    let o = p.run("probe", &json!({"act": "nothing"}));
    assert_eq!(o["ok"], false, "{o}");
    assert!(
        o["error"]["message"]
            .as_str()
            .unwrap()
            .contains("printed nothing on stdout"),
        "{o}"
    );
    let o = p.run("probe", &json!({"act": "text"}));
    assert!(
        o["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{o}"
    );
    let o = p.run(
        "probe",
        &json!({"act": "fail", "message": "quota exceeded"}),
    );
    assert_eq!(o["error"]["kind"], "exit_code", "{o}");
    assert_eq!(o["error"]["message"], "quota exceeded");
    assert_eq!(o["exit_code"], 3);
}

#[test]
fn timeout_sec_is_enforced() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({"timeoutSec": 1})));
    let o = p.run("probe", &json!({"act": "sleep"}));
    assert_eq!(o["error"]["kind"], "timeout", "{o}");
    assert_eq!(o["error"]["details"]["timeout_ms"], 1000);
}

#[test]
fn env_passthrough_passes_only_listed_names_and_logs_no_values() {
    require_jail!();
    let p = Project::new(&probe_tool(
        json!({"envPassthrough": ["gbx_pass", "GBX_ABSENT"]}),
    ));
    let envs = [
        ("GBX_PASS", "pass-value-4c1e"),
        ("GBX_UNLISTED", "unlisted-canary-9b2d"),
    ];
    let o = p.run_env(
        "probe",
        &json!({"act": "env", "expect": "pass-value-4c1e"}),
        &envs,
    );
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["output"]["ran"], true);
    // It arrived (the tool compared it), and its value is redacted.
    assert_eq!(o["output"]["has_pass"], true, "{o}");
    assert_eq!(o["output"]["env"]["GBX_PASS"], "[REDACTED:GBX_PASS]");
    let env = o["output"]["env"].as_object().unwrap();
    assert!(!env.contains_key("GBX_UNLISTED"), "{o}");
    assert!(!env.contains_key("GBX_ABSENT"), "{o}");
    let text = o.to_string();
    assert!(!text.contains("pass-value-4c1e"), "{text}");
    assert!(!text.contains("unlisted-canary-9b2d"), "{text}");
    // The audit log names the keys passed, never a value.
    let log = p.audit_log();
    assert!(log.contains("envKeys=[\"GBX_PASS\"]"), "{log}");
    assert!(!log.contains("pass-value-4c1e"), "{log}");
    assert!(!log.contains("unlisted-canary"), "{log}");
}

/// A loopback listener and whether anything connected to it.
fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn got_connection(l: &TcpListener) -> bool {
    l.accept().is_ok()
}

#[test]
fn the_default_jail_reads_only_its_directory() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({})));
    let canary = p.canary();
    // Control: its own directory is readable.
    let own = p.dir.join("tools.json");
    let o = p.run("probe", &json!({"act": "read", "path": own}));
    assert!(
        o["output"]["data"].as_str().unwrap().contains("probe"),
        "{o}"
    );
    // A canary outside it is not.
    let o = p.run("probe", &json!({"act": "read", "path": canary}));
    assert_eq!(o["output"]["ran"], true, "{o}");
    assert!(o["output"]["denied"].is_string(), "{o}");
    assert!(!o.to_string().contains("CANARY-7f3a9d"), "{o}");
    // No writes, not even in its own directory.
    for target in [p.dir.join("made.txt"), p.base.join("outside/made.txt")] {
        let o = p.run("probe", &json!({"act": "write", "path": target}));
        assert_eq!(o["output"]["ran"], true, "{o}");
        assert!(o["output"]["denied"].is_string(), "{o}");
        assert!(!target.exists(), "{target:?} was created");
    }
    // No network: a loopback listener gets no connection.
    let (l, port) = listener();
    let o = p.run("probe", &json!({"act": "connect", "port": port}));
    assert_eq!(o["output"]["ran"], true, "{o}");
    assert!(o["output"]["denied"].is_string(), "{o}");
    assert!(!got_connection(&l), "the jailed tool reached the listener");
}

#[test]
fn permissions_widen_the_jail() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({"permissions": {
        "network": true,
        "fs": {"read": ["../outside"], "write": ["out"]}
    }})));
    fs::create_dir_all(p.dir.join("out")).unwrap();
    let o = p.run("probe", &json!({"act": "read", "path": p.canary()}));
    assert_eq!(o["output"]["data"], "CANARY-7f3a9d", "{o}");
    let target = p.dir.join("out/made.txt");
    let o = p.run("probe", &json!({"act": "write", "path": target}));
    assert_eq!(o["output"]["wrote"], true, "{o}");
    assert!(target.exists());
    // network: true is its own namespace behind the egress proxy: a direct
    // connect to a host listener reaches nothing...
    let (l, port) = listener();
    let o = p.run("probe", &json!({"act": "connect", "port": port}));
    assert_ne!(o["output"]["connected"], true, "{o}");
    assert!(!got_connection(&l));
    // ...and the host network, opted into explicitly, does.
    fs::create_dir_all(p.dir.join(".glee")).unwrap();
    fs::write(
        p.dir.join(".glee/config.yml"),
        "sandbox:\n  direct_network: true\n",
    )
    .unwrap();
    let o = p.run("probe", &json!({"act": "connect", "port": port}));
    assert_eq!(o["output"]["connected"], true, "{o}");
    assert!(got_connection(&l));
    // explain shows the widened policy.
    let file = p.tools_json();
    let out = p.gb(
        &["--tools-json", file.to_str().unwrap(), "explain", "probe"],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("network   DIRECT"), "{text}");
    assert!(
        text.contains(&p.base.join("outside").display().to_string()),
        "{text}"
    );
    assert!(
        text.contains(&p.dir.join("out").display().to_string()),
        "{text}"
    );
}

#[test]
fn permissions_stay_under_the_configured_ceiling() {
    let p = Project::new(&probe_tool(json!({"permissions": {"network": true}})));
    fs::create_dir_all(p.dir.join(".glee")).unwrap();
    fs::write(
        p.dir.join(".glee/config.yml"),
        "security:\n  max_permissions:\n    network: false\n    fs:\n      read: [\".\"]\n",
    )
    .unwrap();
    let (code, found) = lint_messages(&p);
    assert_eq!(code, Some(1));
    assert_eq!(found[0].0, "exceeds-ceiling", "{found:?}");
    assert!(found[0].1.contains("network"), "{found:?}");
    let o = p.run("probe", &json!({"act": "stdin"}));
    assert_eq!(o["error"]["kind"], "manifest_invalid", "{o}");
}

#[test]
fn a_name_in_both_formats_is_an_error() {
    let p = Project::new(&probe_tool(json!({})));
    let dir = p.dir.join(".glee/tools/probe");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("tool.yml"),
        "name: probe\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema: {type: object}\noutputs:\n  format: text\nexec:\n  command:\n    entrypoint: echo\n",
    )
    .unwrap();
    let out = p.gb(&["--root", p.dir.to_str().unwrap(), "lint"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("error[name-clash]"), "{text}");
    let out = p.gb(
        &["--root", p.dir.to_str().unwrap(), "run", "probe", "--json"],
        &[],
    );
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["error"]["kind"], "manifest_invalid", "{o}");
}

#[test]
fn tools_json_is_found_in_the_root_and_the_working_directory() {
    require_jail!();
    let p = Project::new(&probe_tool(json!({})));
    // --root DIR without .glee/: its tools.json is the project, and its
    // entries wait for a person's approval (anything that may write the
    // root may have written the file).
    let run = || {
        let out = p.gb(
            &[
                "--root",
                p.dir.to_str().unwrap(),
                "run",
                "probe",
                "act=ignore",
                "--json",
            ],
            &[],
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let o = run();
    assert_eq!(o["error"]["kind"], "approval_required", "{o}");
    let out = p.gb(
        &[
            "--root",
            p.dir.to_str().unwrap(),
            "approve",
            "probe",
            "--yes",
        ],
        &[],
    );
    assert!(out.status.success(), "{out:?}");
    let o = run();
    assert_eq!(o["output"]["ran"], true, "{o}");
    // The working directory holding tools.json.
    let out = Command::new(bin())
        .args(["list"])
        .current_dir(&p.dir)
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("probe"),
        "{out:?}"
    );
    // The audit log is beside tools.json and verifies.
    assert!(p.audit_log().contains("TOOL_EXECUTED name=probe"));
    let out = p.gb(
        &["--root", p.dir.to_str().unwrap(), "audit", "--verify"],
        &[],
    );
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn show_prints_the_mapped_manifest() {
    let p = Project::with_text(SEED_EXAMPLE);
    let file = p.tools_json();
    let out = p.gb(
        &[
            "--tools-json",
            file.to_str().unwrap(),
            "show",
            "get_time",
            "--json",
        ],
        &[],
    );
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["kind"], "command");
    let program = p.dir.join("tools/bin/get_time");
    assert_eq!(m["exec"]["agentcli"]["command"], json!([program]));
    assert_eq!(m["exec"]["agentcli"]["timeout_ms"], 5000);
    assert_eq!(m["permissions"]["network"], false);
    assert_eq!(m["permissions"]["fs"]["read"], json!([p.dir]));
    assert_eq!(m["permissions"]["fs"]["write"], json!([]));
    let secrets: Vec<&String> = m["permissions"]["secrets"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(secrets, ["TZ", "OAI_HTTP_TIMEOUT"]);
}

#[test]
fn mcp_serves_a_tools_json() {
    require_jail!();
    let p = Project::with_text(SEED_EXAMPLE);
    let file = p.tools_json();
    let mut child = Command::new(bin())
        .args(["--tools-json", file.to_str().unwrap(), "mcp"])
        .current_dir(&p.cwd)
        .env("GLOVEBOX_STATE_DIR", &p.state)
        .env_remove("TZ")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = |id: u64| -> Value {
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "mcp closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    recv(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = recv(2);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"get_time"), "{list}");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "get_time", "arguments": {"timezone": "UTC"}}}),
    );
    let call = recv(3);
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert_eq!(
        call["result"]["structuredContent"]["timezone"], "UTC",
        "{call}"
    );
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}
