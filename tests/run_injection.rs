//! Invariant 7 through `glovebox run`: a parameter value is never expanded
//! again and never reaches a shell. Hostile values come back byte for byte
//! from a command tool (`printf %s`) and a python tool (returns its
//! argument), both allowed to write the project, and no file `x` appears
//! anywhere. An unset optional parameter drops its argument.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use runkit::*;
use serde_json::json;

const SECRET_VALUE: &str = "injection-secret-value-5d1c";

/// Values that would do something if expanded or given to a shell.
fn hostile() -> Vec<&'static str> {
    vec![
        "${SECRET}",
        "$(touch x)",
        "a; touch x",
        "`touch x`",
        "--help",
        "line one\nline two; touch x\n\n  $(touch x)\n",
        "${v}",
        "$SECRET $HOME ~ * ?",
        "' \" \\ | && touch x > x",
        "-",
        "",
    ]
}

fn secret_perms() -> serde_json::Value {
    let mut p = write_root();
    p["secrets"] = json!({"SECRET": {"type": "string", "required": true}});
    p
}

fn assert_no_x(f: &Fixture) {
    let found = f.find_named("x");
    assert!(found.is_empty(), "a file `x` was created: {found:?}");
}

#[test]
fn command_tool_echoes_hostile_values_literally() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&command_tool(
        "echo",
        schema(json!({"v": {"type": "string"}})),
        json!({"entrypoint": "printf", "args": ["%s", "${v}"]}),
        secret_perms(),
    ));
    f.tool(&command_tool(
        "wrapped",
        schema(json!({"v": {"type": "string"}})),
        json!({"entrypoint": "printf", "args": ["%s", "<${v}>"]}),
        secret_perms(),
    ));
    let env = [("SECRET", SECRET_VALUE)];
    for v in hostile() {
        // As key=value (the schema says string, so it stays text) …
        let r = f.run_env("echo", &[&format!("v={v}")], &env);
        r.assert_ok();
        assert_eq!(r.text(), v, "{r:#?}");
        // … as --params JSON, and inside a longer template.
        let params = json!({ "v": v }).to_string();
        let r = f.run_env("wrapped", &["--params", &params], &env);
        r.assert_ok();
        assert_eq!(r.text(), format!("<{v}>"), "{r:#?}");
        assert!(!r.mentions(SECRET_VALUE), "{r:#?}");
        assert!(!r.mentions("[REDACTED:"), "the value was expanded: {r:#?}");
    }
    assert_no_x(&f);
    // Control: the same permissions do let a tool create `x` on purpose,
    // so its absence above means nothing ran the payloads.
    f.tool(&command_tool(
        "toucher",
        schema(json!({})),
        json!({"entrypoint": "touch", "args": ["x"]}),
        secret_perms(),
    ));
    f.run_env("toucher", &[], &env).assert_ok();
    assert_eq!(f.find_named("x"), vec![f.root.join("x")]);
}

#[test]
fn python_tool_receives_hostile_values_literally() {
    require_jail!();
    let f = Fixture::new();
    f.file("echo_mod.py", "def echo(v):\n    return v\n");
    f.tool(&python_tool(
        "pyecho",
        schema(json!({"v": {"type": "string"}})),
        json!({"module": "echo_mod", "function": "echo", "args": ["${v}"]}),
        secret_perms(),
    ));
    f.tool(&python_tool(
        "pywrapped",
        schema(json!({"v": {"type": "string"}})),
        json!({"module": "echo_mod", "function": "echo", "args": ["<${v}>"]}),
        secret_perms(),
    ));
    let env = [("SECRET", SECRET_VALUE)];
    for v in hostile() {
        let params = json!({ "v": v }).to_string();
        let r = f.run_env("pyecho", &["--params", &params], &env);
        r.assert_ok();
        assert_eq!(r.output(), &json!(v), "{r:#?}");
        let r = f.run_env("pywrapped", &[&format!("v={v}")], &env);
        r.assert_ok();
        assert_eq!(r.output(), &json!(format!("<{v}>")), "{r:#?}");
        assert!(!r.mentions(SECRET_VALUE), "{r:#?}");
        assert!(!r.mentions("[REDACTED:"), "the value was expanded: {r:#?}");
    }
    assert_no_x(&f);
}

#[test]
fn a_value_naming_another_parameter_is_not_expanded() {
    require_jail!();
    let f = Fixture::new();
    f.tool(&command_tool(
        "two",
        schema(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
        json!({"entrypoint": "printf", "args": ["%s|%s", "${a}", "${b}"]}),
        read_root(),
    ));
    let r = f.run("two", &["a=${b}", "b=$(touch x)${a}"]);
    r.assert_ok();
    assert_eq!(r.text(), "${b}|$(touch x)${a}");
    assert_no_x(&f);
}

/// argv after the program, as JSON.
const ARGV_JSON: &str = "import json, sys; print(json.dumps(sys.argv[1:]), end='')";

#[test]
fn unset_optional_parameter_drops_its_argument() {
    require_jail!();
    let f = Fixture::new();
    let mut inputs = schema(json!({
        "a": {"type": "string"},
        "b": {"type": "string"},
        "opt": {"type": "string"},
        "num": {"type": "integer", "default": 3},
    }));
    inputs["required"] = json!(["a", "b"]);
    f.tool(&command_tool(
        "argv",
        inputs.clone(),
        json!({
            "entrypoint": "python3",
            "args": ["-c", ARGV_JSON, "${a}", "${opt}", "--flag=${opt}", "${b}", "${num}"],
        }),
        read_root(),
    ));
    f.file(
        "args_mod.py",
        "def collect(*args):\n    return list(args)\n",
    );
    f.tool(&python_tool(
        "pyargv",
        inputs,
        json!({
            "module": "args_mod",
            "function": "collect",
            "args": ["${a}", "${opt}", "--flag=${opt}", "${b}", "${num}"],
        }),
        read_root(),
    ));

    let r = f.run("argv", &["a=A", "b=B"]);
    r.assert_ok();
    let argv: serde_json::Value = serde_json::from_str(r.text()).unwrap();
    assert_eq!(argv, json!(["A", "B", "3"]), "{r:#?}");

    let r = f.run("argv", &["a=A", "b=B", "opt=O", "num=9"]);
    r.assert_ok();
    let argv: serde_json::Value = serde_json::from_str(r.text()).unwrap();
    assert_eq!(argv, json!(["A", "O", "--flag=O", "B", "9"]), "{r:#?}");

    // A whole-argument placeholder keeps its JSON type for python.
    let r = f.run("pyargv", &["a=A", "b=B"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!(["A", "B", 3]), "{r:#?}");
    let r = f.run("pyargv", &["a=A", "b=B", "opt=", "num=9"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!(["A", "", "--flag=", "B", 9]), "{r:#?}");
}
