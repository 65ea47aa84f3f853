//! Every error kind of `glovebox run`, produced for real by the binary and
//! judged by its effect: a marker file the tool would write proves whether
//! it ran, a process list proves a timed-out tree is gone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use common::*;
use runkit::*;
use serde_json::json;

/// A tool that writes `ran.marker` in the root, then prints its first
/// argument.
fn marking_tool(f: &Fixture, name: &str, inputs: serde_json::Value) -> serde_json::Value {
    f.script(
        "mark.sh",
        "#!/bin/sh\necho ran > ran.marker\nprintf 'arg=%s' \"$1\"\n",
    );
    command_tool(
        name,
        inputs,
        json!({"entrypoint": "./mark.sh", "args": ["${count}"]}),
        write_root(),
    )
}

#[test]
fn invalid_input_names_each_pointer_and_runs_nothing() {
    require_jail!();
    let f = Fixture::new();
    let mut inputs = schema(json!({
        "count": {"type": "integer", "minimum": 1},
        "opts": {"type": "object", "properties": {"level": {"type": "integer"}}},
    }));
    inputs["required"] = json!(["count"]);
    f.tool(&marking_tool(&f, "mark", inputs));
    let marker = f.root.join("ran.marker");

    let r = f.run(
        "mark",
        &[
            "--params",
            r#"{"count": "five", "opts": {"level": "high"}}"#,
        ],
    );
    r.assert_failed("input_invalid", 1);
    let pointers: Vec<&str> = r.details()["violations"]
        .as_array()
        .expect("details.violations is an array")
        .iter()
        .map(|v| v["pointer"].as_str().unwrap())
        .collect();
    assert!(pointers.contains(&"/count"), "{r:#?}");
    assert!(pointers.contains(&"/opts/level"), "{r:#?}");
    for v in r.details()["violations"].as_array().unwrap() {
        assert!(!v["message"].as_str().unwrap().is_empty(), "{r:#?}");
    }
    // A missing required key and an unknown key are violations too.
    let r = f.run("mark", &["--params", r#"{"bogus": 1}"#]);
    r.assert_failed("input_invalid", 1);
    assert!(!marker.exists(), "the tool ran despite invalid input");

    // The same tool with valid input does run (so the marker can appear).
    let ok = f.run("mark", &["count=3"]);
    ok.assert_ok();
    assert_eq!(ok.text(), "arg=3");
    assert!(marker.exists(), "{ok:#?}");
}

#[test]
fn unknown_tool_is_tool_not_found_with_exit_2() {
    let f = Fixture::new();
    let r = f.run("no_such_tool", &[]);
    r.assert_failed("tool_not_found", 2);
    assert!(r.message().contains("no_such_tool"), "{r:#?}");
}

#[test]
fn missing_project_root_is_one_outcome_with_exit_2() {
    let f = Fixture::new();
    let r = call_glovebox(&f.base.join("nowhere"), &f.cwd, "any", &[], &[]);
    r.assert_failed("manifest_invalid", 2);
    assert!(r.message().contains("nowhere"), "{r:#?}");
}

#[test]
fn missing_required_secret_runs_nothing() {
    require_jail!();
    let f = Fixture::new();
    let mut m = marking_tool(
        &f,
        "needs_secret",
        schema(json!({"count": {"type": "integer"}})),
    );
    m["permissions"]["secrets"] =
        json!({"GBX_TEST_MISSING_TOKEN": {"type": "string", "required": true}});
    f.tool(&m);
    let marker = f.root.join("ran.marker");

    let r = f.run("needs_secret", &["count=1"]);
    r.assert_failed("secret_missing", 1);
    assert_eq!(r.details()["missing"], json!(["GBX_TEST_MISSING_TOKEN"]));
    assert!(r.message().contains("GBX_TEST_MISSING_TOKEN"), "{r:#?}");
    assert!(!marker.exists(), "the tool ran without its secret");

    let ok = f.run_env(
        "needs_secret",
        &["count=1"],
        &[("GBX_TEST_MISSING_TOKEN", "value-1")],
    );
    ok.assert_ok();
    assert!(marker.exists(), "{ok:#?}");
}

#[test]
fn approval_required_blocks_without_yes_and_runs_with_it() {
    require_jail!();
    let f = Fixture::new();
    let mut m = marking_tool(&f, "guarded", schema(json!({"count": {"type": "integer"}})));
    m["approval"] = json!({"required": true, "reason": "writes a marker"});
    f.tool(&m);
    let marker = f.root.join("ran.marker");

    // stdin is not a terminal here, so nobody can be asked.
    let r = f.run("guarded", &["count=2"]);
    r.assert_failed("approval_required", 1);
    assert!(r.message().contains("writes a marker"), "{r:#?}");
    assert!(!marker.exists(), "the tool ran without approval");

    let ok = f.run("guarded", &["count=2", "--yes"]);
    ok.assert_ok();
    assert_eq!(ok.text(), "arg=2");
    assert!(marker.exists(), "{ok:#?}");
}

#[test]
fn timeout_kills_the_whole_tree() {
    require_jail!();
    let f = Fixture::new();
    let m = marker("run-timeout");
    // The tool starts a setsid'd grandchild, says it started, then both
    // sleep far past the limit with the marker in their argv.
    let code = "import os, sys, time\n\
                if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n\
                open('started', 'w').close()\n\
                time.sleep(60)\n";
    f.tool(&command_tool(
        "sleeper",
        schema(json!({"m": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["-c", code, "${m}"], "timeout_ms": 700}),
        write_root(),
    ));
    let r = f.run("sleeper", &[&format!("m={m}")]);
    r.assert_failed("timeout", 1);
    assert!(
        f.root.join("started").exists(),
        "the tool never started: {r:#?}"
    );
    assert_eq!(r.details()["timeout_ms"], json!(700), "{r:#?}");
    assert!(r.message().contains("700 ms limit"), "{r:#?}");
    let ms = r.json["duration_ms"].as_u64().unwrap();
    assert!((700..10_000).contains(&ms), "duration {ms} ms: {r:#?}");
    let left = pids_with(&m);
    assert!(left.is_empty(), "processes survived the timeout: {left:?}");
}

#[test]
fn exit_code_outside_exit_codes_ok_is_an_error_with_the_code() {
    require_jail!();
    let f = Fixture::new();
    f.script(
        "exit.sh",
        "#!/bin/sh\necho \"failing-with-$1\" >&2\nexit \"$1\"\n",
    );
    f.tool(&command_tool(
        "exiter",
        schema(json!({"code": {"type": "integer"}})),
        json!({"entrypoint": "./exit.sh", "args": ["${code}"], "exit_codes_ok": [0, 3]}),
        read_root(),
    ));
    // 3 is allowed.
    let ok = f.run("exiter", &["code=3"]);
    ok.assert_ok();
    assert_eq!(ok.json["exit_code"], json!(3));

    let r = f.run("exiter", &["code=4"]);
    r.assert_failed("exit_code", 1);
    assert_eq!(r.details()["exit_code"], json!(4), "{r:#?}");
    assert_eq!(r.json["exit_code"], json!(4), "{r:#?}");
    assert!(r.stderr().contains("failing-with-4"), "{r:#?}");
}

#[test]
fn python_exception_returns_type_message_and_traceback() {
    require_jail!();
    let f = Fixture::new();
    f.file(
        "pkg/failing.py",
        "def run(n):\n    print('printed-before-raise')\n    return helper(n)\n\n\
         def helper(n):\n    raise ValueError(f'bad value {n}')\n",
    );
    f.file("pkg/__init__.py", "");
    f.tool(&python_tool(
        "failing",
        schema(json!({"n": {"type": "integer"}})),
        json!({"module": "pkg.failing", "function": "run", "args": ["${n}"]}),
        read_root(),
    ));
    let r = f.run("failing", &["n=7"]);
    r.assert_failed("python_exception", 1);
    let d = r.details();
    assert_eq!(d["type"], json!("ValueError"), "{r:#?}");
    assert_eq!(d["message"], json!("bad value 7"), "{r:#?}");
    let tb = d["traceback"].as_str().unwrap();
    assert!(tb.contains("Traceback"), "{tb}");
    assert!(tb.contains("failing.py"), "{tb}");
    assert!(tb.contains("in helper"), "{tb}");
    assert!(tb.contains("ValueError: bad value 7"), "{tb}");
    // The function's prints went to stderr, not into the result.
    assert!(r.stderr().contains("printed-before-raise"), "{r:#?}");
}

#[test]
fn python_prints_go_to_stderr_not_output() {
    require_jail!();
    let f = Fixture::new();
    f.file(
        "noisy.py",
        "import os\n\ndef run():\n    print('noise-from-print')\n    os.system('echo noise-from-child')\n    return {'v': 1}\n",
    );
    f.tool(&python_tool(
        "noisy",
        schema(json!({})),
        json!({"module": "noisy", "function": "run"}),
        read_root(),
    ));
    let r = f.run("noisy", &[]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"v": 1}));
    assert!(r.stderr().contains("noise-from-print"), "{r:#?}");
    assert!(r.stderr().contains("noise-from-child"), "{r:#?}");
}

#[test]
fn output_schema_violation_is_a_warning_and_ok_stays_true() {
    require_jail!();
    let f = Fixture::new();
    f.file("out.json", "{\"n\": \"seven\"}\n");
    let mut m = command_tool(
        "shaped",
        schema(json!({})),
        json!({"entrypoint": "cat", "args": ["out.json"], "stdout": {"format": "json"}}),
        read_root(),
    );
    m["outputs"] = json!({
        "format": "json",
        "schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
    });
    f.tool(&m);
    let r = f.run("shaped", &[]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"n": "seven"}));
    let warnings = r.json["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{r:#?}");
    assert!(warnings[0].as_str().unwrap().contains("/n"), "{r:#?}");
}

#[test]
fn invalid_json_output_is_an_error_naming_the_byte() {
    require_jail!();
    let f = Fixture::new();
    // A missing comma: the first bad byte is the `"` opening "b".
    let bad = "{\n  \"a\": 1\n  \"b\": 2\n}\n";
    f.file("bad.json", bad);
    f.tool(&command_tool(
        "badjson",
        schema(json!({})),
        json!({"entrypoint": "cat", "args": ["bad.json"], "stdout": {"format": "json"}}),
        read_root(),
    ));
    let r = f.run("badjson", &[]);
    r.assert_failed("internal", 1);
    let byte = r.details()["byte"].as_u64().expect("details.byte") as usize;
    assert_eq!(byte, bad.find("\"b\"").unwrap(), "{r:#?}");
    assert!(
        r.message().contains(&format!("offset {byte}")),
        "the message names the byte: {r:#?}"
    );
}

/// A project whose config caps memory at 64 MiB and processes at 16.
fn limited() -> Fixture {
    let f = Fixture::new();
    f.config(&json!({"limits": {"memory_mb": 64, "pids": 16, "output_bytes": 65536}}));
    f
}

#[test]
fn memory_bomb_is_resource_limit() {
    require_jail!();
    let f = limited();
    // Touches up to 1 GiB, 8 MiB at a time; says how far it got.
    let code = "import sys\nchunks = []\n\
                for i in range(128):\n    chunks.append(b'\\x01' * (8 << 20))\n    \
                print('MiB', (i + 1) * 8, file=sys.stderr, flush=True)\n\
                print('ALLOCATED-ALL')\n";
    f.tool(&command_tool(
        "membomb",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c", code], "timeout_ms": 20000}),
        read_root(),
    ));
    let r = f.run("membomb", &[]);
    r.assert_failed("resource_limit", 1);
    assert_eq!(r.details()["limit"], json!("memory"), "{r:#?}");
    assert!(r.stderr().contains("MiB 8"), "the bomb never ran: {r:#?}");
    assert!(!r.mentions("ALLOCATED-ALL"), "{r:#?}");
}

#[test]
fn fork_bomb_is_resource_limit_and_leaves_nothing() {
    require_jail!();
    let f = limited();
    let m = marker("run-forkbomb");
    // Forks sleeping children until a fork is refused, then fails.
    let code = "import os, sys, time\nn = 0\n\
                while n < 200:\n    try:\n        pid = os.fork()\n    except OSError as e:\n        \
                print('REFUSED-AFTER', n, e, file=sys.stderr, flush=True)\n        sys.exit(1)\n    \
                if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\n\
                print('FORKED-ALL', n)\n";
    f.tool(&command_tool(
        "forkbomb",
        schema(json!({"m": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["-c", code, "${m}"], "timeout_ms": 20000}),
        read_root(),
    ));
    let r = f.run("forkbomb", &[&format!("m={m}")]);
    r.assert_failed("resource_limit", 1);
    assert!(r.stderr().contains("REFUSED-AFTER"), "{r:#?}");
    assert!(!r.mentions("FORKED-ALL"), "{r:#?}");
    let n: u32 = r
        .stderr()
        .split_whitespace()
        .skip_while(|w| *w != "REFUSED-AFTER")
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(n < 16, "{n} forks got through a limit of 16");
    assert!(
        r.json["duration_ms"].as_u64().unwrap() < 15_000,
        "the children were waited for: {r:#?}"
    );
    let left = pids_with(&m);
    assert!(left.is_empty(), "fork bomb children survived: {left:?}");
}

#[test]
fn a_refused_fork_fails_the_call_even_when_the_tool_copes() {
    require_jail!();
    let f = limited();
    // Swallows the refused fork and exits 0: still resource_limit.
    let code = "import os, time\nfor _ in range(40):\n    try:\n        \
                if os.fork() == 0:\n            time.sleep(5)\n            os._exit(0)\n    \
                except OSError:\n        pass\nprint('COPED')\n";
    f.tool(&command_tool(
        "coping",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c", code], "timeout_ms": 20000}),
        read_root(),
    ));
    let r = f.run("coping", &[]);
    r.assert_failed("resource_limit", 1);
    assert_eq!(r.json["error"]["details"]["limit"], "pids", "{r:#?}");
}

#[test]
fn output_flood_is_resource_limit() {
    require_jail!();
    let f = limited();
    let code = "import sys\nsys.stdout.write('y' * (4 << 20))\n";
    f.tool(&command_tool(
        "flood",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-c", code]}),
        read_root(),
    ));
    let r = f.run("flood", &[]);
    r.assert_failed("resource_limit", 1);
    assert_eq!(r.details()["limit"], json!("output"), "{r:#?}");
    assert!(
        r.json.to_string().len() < 1 << 20,
        "the flood came back whole"
    );
}

/// Issue 32, item 9: `sandbox --write PATH` of a path that does not exist
/// is refused, saying to create it, and nothing runs (a grant on a
/// missing path would grant nothing).
#[test]
fn sandbox_write_of_a_missing_path_is_refused_naming_the_fix() {
    let f = Fixture::new();
    let missing = f.base.join("missing/out");
    let marker = f.outside.join("ran.marker");
    let out = std::process::Command::new(bin())
        .args(["sandbox", "--write"])
        .arg(&missing)
        .arg("--write")
        .arg(&f.outside)
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}", marker.display()))
        .env("GLOVEBOX_STATE_DIR", f.state())
        .current_dir(&f.cwd)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("--write {}", missing.display())) && err.contains("create it first"),
        "{err}"
    );
    assert!(!marker.exists(), "the command ran");
    assert!(!missing.exists(), "the path was created");
}

/// Issue 32, item 9: a script that exists but whose `#!` interpreter is
/// outside the jail's grants is not just "command not found": the error
/// names the interpreter and says to grant it (and one whose interpreter
/// does not exist says that).
#[test]
fn a_script_whose_interpreter_is_outside_the_grants_says_which() {
    require_jail!();
    let f = Fixture::new();
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("python3");
    let interp_dir = f.outside.join("pyenv/bin");
    std::fs::create_dir_all(&interp_dir).unwrap();
    let interp = interp_dir.join("python3");
    std::os::unix::fs::symlink(python, &interp).unwrap();
    f.script(
        ".venv/bin/pytest",
        &format!(
            "#!{}\nopen('ran.marker', 'w').write('x')\n",
            interp.display()
        ),
    );
    f.script(".venv/bin/gone", "#!/nonexistent/python3\nprint(1)\n");
    let run = |program: &str| {
        let out = std::process::Command::new(bin())
            .args(["sandbox", "--write", "."])
            .args(["--", program])
            .env("GLOVEBOX_STATE_DIR", f.state())
            .current_dir(&f.root)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(".venv/bin/pytest");
    assert!(
        err.contains(&interp.display().to_string())
            && err.contains("outside the paths the jail grants")
            && err.contains("--read"),
        "{err}"
    );
    // A manifest's key as it is spelled (issue 44: it said
    // `permissions.filesystem.read`).
    assert!(
        err.contains("permissions.fs.read") && !err.contains("filesystem"),
        "{err}"
    );
    assert!(!f.root.join("ran.marker").exists());
    let err = run(".venv/bin/gone");
    assert!(
        err.contains("/nonexistent/python3") && err.contains("does not exist"),
        "{err}"
    );
}

/// A python tool whose value is not JSON (NaN, an infinity) fails as the
/// tool's own error, naming what was wrong, rather than as glovebox's
/// (`internal`: the shim wrote a reply glovebox could not read).
#[test]
fn a_python_value_that_is_not_json_is_the_tools_error() {
    require_jail!();
    let f = Fixture::new();
    f.file(
        "nan.py",
        "def run(which):\n    return {'v': float(which)}\n",
    );
    f.tool(&python_tool(
        "nan",
        schema(json!({"which": {"type": "string"}})),
        json!({"module": "nan", "function": "run", "args": ["${which}"]}),
        read_root(),
    ));
    for which in ["nan", "inf", "-inf"] {
        let r = f.run("nan", &[&format!("which={which}")]);
        r.assert_failed("python_exception", 1);
        let d = r.details();
        assert_eq!(d["type"], json!("ValueError"), "{which}: {r:#?}");
        assert!(
            d["message"].as_str().unwrap_or_default().contains("JSON"),
            "{which}: {r:#?}"
        );
    }
    let r = f.run("nan", &["which=1.5"]);
    r.assert_ok();
    assert_eq!(r.json["output"]["v"], json!(1.5), "{r:#?}");
}
