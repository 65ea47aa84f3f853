//! `glovebox import hdn`: HDN's Tool JSON (the hdn-tools.md catalog) turned
//! into v2 tool directories that lint clean; the cmd tools run jailed end
//! to end with `{param}` substitution and HDN's last-JSON-line output rule;
//! unsupported entries (docker, images, built-ins without exec, unknown
//! permissions) reported and not written while the rest is; an injection
//! value stays one literal argv entry; `--force`; nothing written outside
//! `.glee/tools/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::*;
use runkit::*;
use serde_json::{json, Value};

fn import(root: &Path, file: &Path, extra: &[&str]) -> Output {
    Command::new(bin())
        .args(["import", "hdn"])
        .arg(file)
        .args(extra)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .output()
        .expect("run glovebox import")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn lint(root: &Path) -> Output {
    Command::new(bin())
        .args(["lint", "--root"])
        .arg(root)
        .output()
        .unwrap()
}

fn shown(root: &Path, name: &str) -> Value {
    let out = Command::new(bin())
        .args(["show", name, "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn tool_dirs(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join(".glee/tools"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The seed's example Tool (hdn-tools.md, "Registry Schema") verbatim.
fn seed_http_get() -> Value {
    json!({
        "id": "tool_http_get",
        "name": "HTTP GET",
        "description": "Fetches a URL and returns response body",
        "input_schema": { "url": "string" },
        "output_schema": { "status": "int", "body": "string" },
        "permissions": ["net:read"],
        "safety_level": "low",
        "created_by": "system",
        "created_at": "2025-09-23T12:00:00Z"
    })
}

/// A catalog in HDN's bootstrap form: the seed's tools with the binaries
/// the catalog names (`tools/<name>`), plus what glovebox cannot import.
fn catalog() -> Value {
    let mut http_get = seed_http_get();
    http_get["exec"] = json!({"type": "cmd", "cmd": "tools/http_get", "args": ["{url}"]});
    json!([
        http_get,
        {
            "id": "tool_echo", "name": "Echo", "description": "Prints its argument among noise",
            "input_schema": {"text": "string", "times": "int"},
            "permissions": ["fs:write", "proc:exec"], "safety_level": "medium",
            "exec": {"type": "cmd", "cmd": "tools/echo", "args": ["--text={text}", "{times}", "{literal}"]}
        },
        {
            "id": "tool_plain", "description": "Output without JSON",
            "input_schema": {"word": "string"},
            "permissions": [],
            "exec": {"type": "cmd", "cmd": "/bin/echo", "args": ["hello", "{word}"]}
        },
        {
            "id": "tool_file_read", "name": "File Read", "description": "Reads a file",
            "input_schema": {"path": "string"}, "output_schema": {"content": "string"},
            "permissions": ["fs:read"], "safety_level": "high", "created_by": "system",
            "exec": {"type": "cmd", "cmd": "tools/file_read", "args": ["{path}"]}
        },
        {
            "id": "tool_docker_list", "description": "Lists containers",
            "input_schema": {"type": "\"containers\"|\"images\""},
            "permissions": ["docker"],
            "exec": {"type": "cmd", "cmd": "tools/docker_list", "args": ["{type}"]}
        },
        {
            "id": "tool_codegen", "description": "Generates code", "input_schema": {"spec": "string"},
            "permissions": ["llm"], "exec": {"type": "cmd", "cmd": "tools/codegen"}
        },
        {"id": "tool_image", "description": "A container", "exec": {"type": "image", "image": "alpine:3"}},
        seed_http_get(),
    ])
}

const ECHO: &str = r#"#!/usr/bin/env python3
import json, sys
print("starting up")
print(json.dumps({"argv": sys.argv[1:], "step": 1}))
print("noise after")
print(json.dumps({"argv": sys.argv[1:]}))
print("done, bye")
"#;

fn project() -> Fixture {
    let f = Fixture::new();
    f.script("tools/echo", ECHO);
    f.script("tools/http_get", "#!/bin/sh\nexit 0\n");
    f.script("tools/file_read", "#!/bin/sh\ncat \"$1\"\n");
    f
}

#[test]
fn the_catalog_imports_lints_clean_and_reports_what_it_cannot() {
    let f = project();
    let file = f.base.join("tools_bootstrap.json");
    fs::write(&file, catalog().to_string()).unwrap();
    let out = import(&f.root, &file, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for (tool, why) in [
        ("tool_docker_list", "permission `docker` is unsupported"),
        ("tool_codegen", "permission `llm` is unsupported"),
        ("tool_image", "`exec.type: image` (alpine:3) is unsupported"),
        ("tool_http_get", "has no `exec`"),
    ] {
        assert!(
            err.contains(&format!("{tool}: not imported: {why}")),
            "{tool}: {err}"
        );
    }
    assert!(err.contains("4 imported, 4 not imported"), "{err}");
    assert_eq!(
        tool_dirs(&f.root),
        ["tool_echo", "tool_file_read", "tool_http_get", "tool_plain"]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("proc:exec"), "the note is shown: {stdout}");

    let lint = lint(&f.root);
    let text = format!("{}{}", String::from_utf8_lossy(&lint.stdout), stderr(&lint));
    assert_eq!(lint.status.code(), Some(0), "{text}");
    assert!(
        text.contains("4 tool(s) checked: 0 error(s), 0 warning(s)"),
        "{text}"
    );

    // The seed's tool, field by field.
    let m = shown(&f.root, "tool_http_get");
    assert_eq!(m["description"], "Fetches a URL and returns response body");
    assert_eq!(
        m["inputs"]["schema"],
        json!({"type": "object", "additionalProperties": false,
               "properties": {"url": {"type": "string"}}, "required": ["url"]})
    );
    assert_eq!(
        m["outputs"],
        json!({"format": "json", "schema": {"type": "object", "properties": {
            "status": {"type": "integer"}, "body": {"type": "string"}}}})
    );
    assert_eq!(m["exec"]["command"]["entrypoint"], "tools/http_get");
    assert_eq!(m["exec"]["command"]["args"], json!(["${url}"]));
    assert_eq!(
        m["exec"]["command"]["stdout"],
        json!({"format": "json", "select": "last_json_line"})
    );
    assert_eq!(m["permissions"]["network"], json!(true));
    assert_eq!(m["approval"]["required"], json!(false));
    // No fs permission: its own directory and its program, nothing else.
    assert_eq!(
        m["permissions"]["fs"],
        json!({"read": [".glee/tools/tool_http_get", "tools/http_get"], "write": []})
    );

    let m = shown(&f.root, "tool_file_read");
    assert_eq!(m["permissions"]["fs"]["read"], json!(["."]));
    assert_eq!(m["permissions"]["network"], json!(false));
    assert_eq!(
        m["approval"],
        json!({"required": true, "reason": "HDN safety_level: high"})
    );
    let m = shown(&f.root, "tool_echo");
    assert_eq!(
        m["permissions"]["fs"],
        json!({"read": ["."], "write": ["."]})
    );
    // `{literal}` is not a parameter: it stays as HDN leaves it.
    assert_eq!(
        m["exec"]["command"]["args"],
        json!(["--text=${text}", "${times}", "{literal}"])
    );
    assert_eq!(
        m["inputs"]["schema"]["properties"]["times"],
        json!({"type": "integer"})
    );

    // A tool needing approval is not run without it.
    let called = f.run("tool_file_read", &["path=x"]);
    called.assert_failed("approval_required", 1);
}

#[test]
fn an_imported_cmd_tool_runs_jailed_with_the_last_json_line() {
    require_jail!();
    let f = project();
    let file = f.base.join("tools_bootstrap.json");
    fs::write(&file, json!({"tools": catalog()}).to_string()).unwrap();
    import(&f.root, &file, &[]);

    // An injection attempt: with a shell it would create `pwned` files in
    // the (writable) root. It must arrive as one literal argv entry.
    let evil = "x\"; touch pwned; echo \"$(touch pwned2)`touch pwned3` && touch pwned4 #";
    let params = json!({"text": evil, "times": 3}).to_string();
    let called = f.run("tool_echo", &["--params", &params]);
    called.assert_ok();
    assert_eq!(
        called.output(),
        &json!({"argv": [format!("--text={evil}"), "3", "{literal}"]}),
        "the last JSON line, argv as given: {called:#?}"
    );
    for p in ["pwned", "pwned2", "pwned3", "pwned4"] {
        assert!(f.find_named(p).is_empty(), "{p} was created");
    }

    // No JSON on stdout: HDN's `{"output": ...}`.
    let called = f.run("tool_plain", &["word=$(id) ; ls"]);
    called.assert_ok();
    assert_eq!(
        called.output(),
        &json!({"output": "hello $(id) ; ls\n"}),
        "{called:#?}"
    );

    // A parameter the HDN schema does not declare is refused before anything runs.
    let called = f.run("tool_plain", &["--params", r#"{"word": "a", "extra": 1}"#]);
    called.assert_failed("input_invalid", 1);
}

#[test]
fn existing_tools_are_kept_unless_forced() {
    let f = project();
    let file = f.base.join("boot.json");
    fs::write(&file, json!([catalog()[1].clone()]).to_string()).unwrap();
    let out = import(&f.root, &file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let yml = f.root.join(".glee/tools/tool_echo/tool.yml");
    let imported = fs::read_to_string(&yml).unwrap();
    assert!(imported.starts_with("# Imported from an HDN"), "{imported}");
    fs::write(&yml, "edited by hand\n").unwrap();
    f.file(".glee/tools/tool_echo/notes.txt", "mine");

    let out = import(&f.root, &file, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tool_echo: not imported: .glee/tools/tool_echo already exists; pass --force to replace it"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&yml).unwrap(), "edited by hand\n");

    let out = import(&f.root, &file, &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("replaced tool_echo"));
    assert_eq!(fs::read_to_string(&yml).unwrap(), imported);
    assert!(
        !f.root.join(".glee/tools/tool_echo/notes.txt").exists(),
        "the directory is replaced whole"
    );
    // No temporary or replaced directory left behind.
    assert_eq!(tool_dirs(&f.root), ["tool_echo"]);
}

#[test]
fn nothing_is_written_outside_the_tools_directory() {
    let f = project();
    let cmd = json!({"type": "cmd", "cmd": "/bin/echo"});
    let entries = json!([
        {"id": "../escaped", "description": "d", "exec": cmd},
        {"id": "a/b", "description": "d", "exec": cmd},
        {"id": ".hidden", "description": "d", "exec": cmd},
        {"name": "HTTP GET", "description": "no id, a name with a space", "exec": cmd},
        {"id": "dollar", "description": "d", "exec": {"type": "cmd", "cmd": "/bin/echo", "args": ["${HOME}"]}},
        {"id": "unsure", "description": "d", "safety_level": "extreme", "exec": cmd},
        {"id": "ok_tool", "description": "d", "exec": cmd},
        {"id": "ok_tool", "description": "again", "exec": cmd},
    ]);
    let file = f.base.join("boot.json");
    fs::write(&file, entries.to_string()).unwrap();
    let out = import(&f.root, &file, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for (tool, why) in [
        ("../escaped", "is not a valid tool name"),
        ("a/b", "is not a valid tool name"),
        (".hidden", "is not a valid tool name"),
        ("HTTP GET", "is not a valid tool name"),
        ("dollar", "`${`"),
        ("unsure", "safety_level `extreme` is unknown"),
        ("ok_tool", "repeats a name"),
    ] {
        assert!(
            err.contains(&format!("{tool}: not imported:")) && err.contains(why),
            "{tool}: {err}"
        );
    }
    assert_eq!(tool_dirs(&f.root), ["ok_tool"]);
    assert!(!f.root.join(".glee/escaped").exists());
    assert!(f.find_named("escaped").is_empty());
    assert!(f.find_named("b").is_empty());

    // A `.glee/tools` that is a symlink out of the root is refused whole.
    let g = Fixture::new();
    fs::remove_dir(g.root.join(".glee/tools")).unwrap();
    std::os::unix::fs::symlink(&g.outside, g.root.join(".glee/tools")).unwrap();
    let out = import(&g.root, &file, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("outside the project root"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_dir(&g.outside).unwrap().count(), 0);
}

#[test]
fn malformed_files_are_reported() {
    let f = Fixture::new();
    for (text, want) in [
        ("not json", "is not an HDN tool file"),
        ("{\"tools\": 3}", "has no `tools` array"),
        ("7", "neither an array nor an object"),
    ] {
        let file = f.base.join("bad.json");
        fs::write(&file, text).unwrap();
        let out = import(&f.root, &file, &[]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains(want), "{}", stderr(&out));
    }
    let out = import(&f.root, &f.base.join("missing.json"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
fn select_needs_json_format() {
    let f = Fixture::new();
    let mut t = command_tool(
        "t",
        schema(json!({})),
        json!({"entrypoint": "echo", "stdout": {"format": "text", "select": "last_json_line"}}),
        json!({}),
    );
    f.tool(&t);
    let out = lint(&f.root);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("`exec.command.stdout.format`: \"json\" was expected"),
        "{text}"
    );
    t["exec"]["command"]["stdout"] = json!({"select": "first_line"});
    f.tool(&t);
    let text = String::from_utf8_lossy(&lint(&f.root).stdout).into_owned();
    assert!(text.contains("use one of: last_json_line"), "{text}");
    t["exec"]["command"]["stdout"] = json!({"format": "json", "select": "last_json_line"});
    f.tool(&t);
    assert_eq!(lint(&f.root).status.code(), Some(0));
}
