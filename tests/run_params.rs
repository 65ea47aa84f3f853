//! How `glovebox run` reads parameters: `key=value` typed by the input
//! schema, `--params JSON`, `--params-file F` (and `-` for stdin). A python
//! tool returns its arguments, so their JSON types come back as received.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use runkit::*;
use serde_json::{json, Value};

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.file("show.py", "def show(*args):\n    return list(args)\n");
    f.tool(&python_tool(
        "show",
        schema(json!({
            "count": {"type": "integer"},
            "name": {"type": "string"},
            "label": {"type": ["string", "null"]},
            "tags": {"type": "array"},
            "any": {},
        })),
        json!({
            "module": "show",
            "function": "show",
            "args": ["${count}", "${name}", "${label}", "${tags}", "${any}"],
        }),
        read_root(),
    ));
    f
}

#[test]
fn key_value_pairs_are_typed_by_the_schema() {
    require_jail!();
    let f = fixture();
    let r = f.run("show", &["count=5", "name=123"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!([5, "123"]), "{r:#?}");

    // A string stays text whatever it looks like; `=` after the first is
    // part of the value.
    for v in [
        "true",
        "null",
        "[1]",
        "{\"a\":1}",
        "\"q\"",
        "a=b",
        "",
        " 7 ",
    ] {
        let r = f.run("show", &[&format!("name={v}")]);
        r.assert_ok();
        assert_eq!(r.output(), &json!([v]), "{r:#?}");
    }
    // Untyped values are parsed as JSON when they are JSON, else text.
    let r = f.run("show", &["any=true", "tags=[\"x\",1]"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!([["x", 1], true]), "{r:#?}");
    let r = f.run("show", &["any=not json"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!(["not json"]), "{r:#?}");
    let r = f.run("show", &["any={\"k\": [1, 2]}"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!([{"k": [1, 2]}]), "{r:#?}");
}

#[test]
fn a_nullable_string_stays_a_string() {
    require_jail!();
    let f = fixture();
    let r = f.run("show", &["label=123"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!(["123"]), "{r:#?}");
}

#[test]
fn a_non_integer_for_an_integer_is_input_invalid() {
    let f = fixture();
    let r = f.run("show", &["count=five"]);
    r.assert_failed("input_invalid", 1);
    assert_eq!(r.details()["violations"][0]["pointer"], json!("/count"));
    let r = f.run("show", &["count=\"5\""]);
    r.assert_failed("input_invalid", 1);
}

#[test]
fn params_json_file_and_stdin_agree_with_key_value() {
    require_jail!();
    let f = fixture();
    let want = json!([5, "123", ["a"]]);
    let body = r#"{"count": 5, "name": "123", "tags": ["a"]}"#;

    let r = f.run("show", &["count=5", "name=123", "tags=[\"a\"]"]);
    r.assert_ok();
    assert_eq!(r.output(), &want, "{r:#?}");

    let r = f.run("show", &["--params", body]);
    r.assert_ok();
    assert_eq!(r.output(), &want, "{r:#?}");

    let file = f.base.join("params.json");
    std::fs::write(&file, body).unwrap();
    let r = f.run("show", &["--params-file", path_str(&file)]);
    r.assert_ok();
    assert_eq!(r.output(), &want, "{r:#?}");

    let mut child = Command::new(bin())
        .args(["run", "show", "--json", "--params-file", "-", "--root"])
        .arg(&f.root)
        .current_dir(&f.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["output"], want, "{v:#}");
}

#[test]
fn unreadable_params_are_a_usage_error_with_one_outcome() {
    let f = fixture();
    let missing = f.base.join("no-such.json");
    let bad = f.base.join("bad.json");
    std::fs::write(&bad, "{\"count\": ").unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--params", "{not json"],
        vec!["--params-file", path_str(&missing)],
        vec!["--params-file", path_str(&bad)],
        vec!["no-equals-sign"],
    ];
    for args in cases {
        // call_glovebox asserts exactly one JSON line on stdout.
        let r = f.run("show", &args);
        r.assert_failed("input_invalid", 2);
        assert!(!r.message().is_empty(), "{r:#?}");
    }
}
