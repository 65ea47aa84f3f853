//! Legitimate workloads glovebox once refused or mangled, run as a new
//! user would write them (no false refusals): a tool that needs no files
//! starts in its cwd and runs (and still cannot read it); a command tool
//! declaring JSON output has its stdout read as JSON without
//! `exec.command.stdout.format`; a python tool without `args` gets its
//! parameters as keyword arguments; `lint` warns about an input no
//! template uses; a closed stdout ends glovebox quietly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::process::{Command, Stdio};

use common::*;
use runkit::*;
use serde_json::{json, Value};

fn no_files() -> Value {
    json!({"network": false, "fs": {"read": [], "write": []}, "secrets": {}})
}

#[test]
fn a_tool_without_fs_read_starts_in_its_cwd_and_runs() {
    require_jail!();
    let f = Fixture::new();
    f.file("secret.txt", "do not read me\n");
    f.tool(&command_tool(
        "echo_only",
        schema(json!({})),
        json!({"entrypoint": "/bin/echo", "args": ["hello"]}),
        no_files(),
    ));
    // The probe proves it ran, then shows the cwd it started in stays
    // unreadable: no listing, no content.
    f.tool(&command_tool(
        "peek",
        schema(json!({})),
        json!({"entrypoint": "/bin/sh", "args": ["-c",
            "echo started in $(pwd); ls . >/dev/null 2>&1 && echo LISTED; cat secret.txt 2>/dev/null; echo done"]}),
        no_files(),
    ));
    let r = f.run("echo_only", &[]);
    r.assert_ok();
    assert_eq!(r.text(), "hello\n");
    let r = f.run("peek", &[]);
    r.assert_ok();
    let root = std::fs::canonicalize(&f.root).unwrap();
    assert!(
        r.text()
            .starts_with(&format!("started in {}\n", root.display())),
        "{r:#?}"
    );
    assert!(r.text().ends_with("done\n"), "{r:#?}");
    assert!(!r.text().contains("LISTED"), "the cwd was listable: {r:#?}");
    assert!(!r.text().contains("do not read me"), "read the cwd: {r:#?}");
    // lint agrees with run.
    let out = Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "lint"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn stdout_format_defaults_to_outputs_format() {
    require_jail!();
    let f = Fixture::new();
    let mut tool = command_tool(
        "emit",
        schema(json!({})),
        json!({"entrypoint": "/bin/echo", "args": ["{\"n\": 3}"]}),
        no_files(),
    );
    tool["outputs"] = json!({"format": "json", "schema": {"type": "object",
        "properties": {"n": {"type": "integer"}}, "required": ["n"]}});
    f.tool(&tool);
    let r = f.run("emit", &[]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"n": 3}), "{r:#?}");
    assert_eq!(r.json["warnings"], json!([]), "{r:#?}");
}

#[test]
fn a_python_tool_without_args_gets_keyword_arguments() {
    require_jail!();
    let f = Fixture::new();
    f.file(
        "calc.py",
        "def add(a=100, b=200):\n    return {'sum': a + b}\n",
    );
    f.tool(&python_tool(
        "add",
        schema(json!({"a": {"type": "integer"}, "b": {"type": "integer"}})),
        json!({"module": "calc", "function": "add"}),
        read_root(),
    ));
    let r = f.run("add", &["a=3", "b=1"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"sum": 4}), "{r:#?}");
    // An unset optional parameter keeps the function's default.
    let r = f.run("add", &["a=3"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"sum": 203}), "{r:#?}");
}

#[test]
fn lint_warns_about_an_input_no_template_uses() {
    let f = Fixture::new();
    f.tool(&command_tool(
        "forgetful",
        schema(json!({"used": {"type": "string"}, "dropped": {"type": "string"}})),
        json!({"entrypoint": "/bin/echo", "args": ["${used}"]}),
        no_files(),
    ));
    f.file("k.py", "def k(**kw):\n    return kw\n");
    f.tool(&python_tool(
        "kwargs",
        schema(json!({"x": {"type": "string"}})),
        json!({"module": "k", "function": "k"}),
        read_root(),
    ));
    let out = Command::new(bin())
        .args(["--root", f.root.to_str().unwrap(), "lint"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "a warning is not an error: {text}");
    assert!(text.contains("unused-input"), "{text}");
    assert!(text.contains("`dropped`"), "{text}");
    assert!(!text.contains("`used`"), "{text}");
    assert!(
        !text.contains("`x`"),
        "python without args uses every input: {text}"
    );
}

#[test]
fn a_closed_stdout_ends_glovebox_quietly() {
    let f = Fixture::new();
    f.tool(&command_tool(
        "echo_only",
        schema(json!({})),
        json!({"entrypoint": "/bin/echo", "args": ["hello"]}),
        no_files(),
    ));
    let root = f.root.to_str().unwrap();
    for args in [
        &["doctor"][..],
        &["doctor", "--json"],
        &["--root", root, "list"],
        &["--root", root, "show", "echo_only"],
        &["--root", root, "export", "--format", "openai"],
        &["--root", root, "export", "--format", "anthropic"],
        &["--root", root, "export", "--format", "mcp"],
    ] {
        let mut child = Command::new(bin())
            .args(args)
            .env("GLOVEBOX_STATE_DIR", f.state())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before glovebox writes anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
    }
}

#[test]
fn a_missing_cwd_is_named_as_missing_not_as_ungranted() {
    require_jail!();
    let f = Fixture::new();
    for (name, perms) in [("bare", no_files()), ("granted", read_root())] {
        f.tool(&command_tool(
            name,
            schema(json!({})),
            json!({"entrypoint": "/bin/echo", "args": ["hello"], "cwd": "build"}),
            perms,
        ));
        let r = f.run(name, &[]);
        r.assert_failed("manifest_invalid", 2);
        assert!(r.message().contains("is not a directory"), "{r:#?}");
    }
    // Once it exists, both run.
    f.file("build/.keep", "");
    for name in ["bare", "granted"] {
        let r = f.run(name, &[]);
        r.assert_ok();
        assert_eq!(r.text(), "hello\n");
    }
}
