//! `glovebox export`: each format's output for the examples/ project, the
//! report (exit 2, nothing written) for tools a format does not accept, and
//! a check of every format against the official SDKs' type definitions
//! (`openai`, `anthropic`, `mcp`, pinned in tests/mcp/setup.sh) by
//! tests/sdk/check_export.py, which also compares keys strictly — shown able
//! to fail on a mutated document.
//!
//! The SDK test sets the venv up itself (pip, from PyPI); where that fails
//! it fails with the reason: it never skips as a pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;
use runkit::*;
use serde_json::{json, Value};

const FORMATS: &[&str] = &["openai", "openai-responses", "anthropic", "mcp"];
const EXAMPLE_TOOLS: &[&str] = &["repo_scan", "repo_stats", "slack_notify", "web_search"];

/// The built-ins every Glee project lists besides its own tools.
const BUILTINS: &[&str] = &["list_files", "read_file", "write_file"];

/// The exported tools minus the built-ins.
fn own(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .filter(|t| {
            let name = t["function"]["name"]
                .as_str()
                .or(t["name"].as_str())
                .unwrap();
            !BUILTINS.contains(&name)
        })
        .cloned()
        .collect()
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn examples() -> PathBuf {
    manifest_dir().join("examples")
}

fn export(root: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("export")
        .args(args)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .output()
        .expect("run glovebox export")
}

fn exported(root: &Path, format: &str) -> Value {
    let out = export(root, &["--format", format]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("export prints JSON")
}

/// A tool's normalised manifest, as `glovebox show --json` prints it.
fn manifest(root: &Path, name: &str) -> Value {
    let out = Command::new(bin())
        .args(["show", name, "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn openai_chat_form_of_the_examples() {
    let doc = exported(&examples(), "openai");
    let tools = &own(doc.as_array().expect("an array"));
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, EXAMPLE_TOOLS);
    for t in tools {
        let name = t["function"]["name"].as_str().unwrap();
        let m = manifest(&examples(), name);
        assert_eq!(
            t,
            &json!({"type": "function", "function": {
                "name": name,
                "description": m["description"],
                "parameters": m["inputs"]["schema"],
            }})
        );
    }
}

#[test]
fn openai_responses_form_of_the_examples() {
    let doc = exported(&examples(), "openai-responses");
    let tools = &own(doc.as_array().expect("an array"));
    assert_eq!(tools.len(), EXAMPLE_TOOLS.len());
    for (t, name) in tools.iter().zip(EXAMPLE_TOOLS) {
        let m = manifest(&examples(), name);
        assert_eq!(
            t,
            &json!({
                "type": "function",
                "name": name,
                "description": m["description"],
                "parameters": m["inputs"]["schema"],
                "strict": false,
            })
        );
    }
}

#[test]
fn anthropic_form_carries_the_examples() {
    let doc = exported(&examples(), "anthropic");
    let tools = &own(doc.as_array().expect("an array"));
    assert_eq!(tools.len(), EXAMPLE_TOOLS.len());
    for (t, name) in tools.iter().zip(EXAMPLE_TOOLS) {
        let m = manifest(&examples(), name);
        let params: Vec<Value> = m["examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["params"].clone())
            .collect();
        assert!(!params.is_empty(), "{name} has examples");
        assert_eq!(
            t,
            &json!({
                "name": name,
                "description": m["description"],
                "input_schema": m["inputs"]["schema"],
                "input_examples": params,
            })
        );
    }
    // web_search's second example, as written in its tool.yml.
    assert_eq!(
        tools[3]["input_examples"][1],
        json!({"query": "artificial intelligence news", "count": 10, "freshness": "week"})
    );
}

#[test]
fn mcp_form_is_the_served_catalog() {
    let doc = exported(&examples(), "mcp");
    let tools = &own(doc["tools"].as_array().expect("{\"tools\": [...]}"));
    assert_eq!(doc.as_object().unwrap().len(), 1);
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, EXAMPLE_TOOLS);
    for t in tools {
        let m = manifest(&examples(), t["name"].as_str().unwrap());
        assert_eq!(t["inputSchema"], m["inputs"]["schema"]);
        assert_eq!(t["description"], m["description"]);
    }
    // Hints from the permissions, as tools/list serves them.
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(tools[3]["annotations"]["openWorldHint"], json!(true));
}

#[test]
fn output_is_deterministic_and_out_matches_stdout() {
    let dir = tempdir();
    for format in FORMATS {
        let a = export(&examples(), &["--format", format]);
        let b = export(&examples(), &["--format", format]);
        assert_eq!(a.stdout, b.stdout, "{format}");
        let file = dir.path().join(format!("{format}.json"));
        fs::write(&file, "old").unwrap();
        let out = export(
            &examples(),
            &["--format", format, "--out", file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0));
        assert!(out.stdout.is_empty(), "--out prints nothing");
        assert_eq!(fs::read(&file).unwrap(), a.stdout, "{format}");
    }
    // Only the outputs: no temporary file left beside them.
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "anthropic.json",
            "mcp.json",
            "openai-responses.json",
            "openai.json"
        ]
    );
}

fn text_tool(name: &str) -> Value {
    command_tool(
        name,
        schema(json!({"q": {"type": "string"}})),
        json!({"entrypoint": "echo", "args": ["${q}"]}),
        json!({}),
    )
}

#[test]
fn a_name_a_target_rejects_is_reported_and_nothing_is_written() {
    let f = Fixture::new();
    f.tool(&text_tool("good"));
    f.tool(&text_tool("bad.name"));
    let out_file = f.base.join("tools.json");
    for format in ["openai", "openai-responses", "anthropic"] {
        fs::write(&out_file, "previous").unwrap();
        let out = export(
            &f.root,
            &["--format", format, "--out", out_file.to_str().unwrap()],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{format}: {stderr}");
        assert!(stderr.contains("tool `bad.name`"), "{stderr}");
        assert!(stderr.contains("^[a-zA-Z0-9_-]{1,64}$"), "{stderr}");
        assert!(stderr.contains("has \".\""), "{stderr}");
        assert!(!stderr.contains("`good`"), "{stderr}");
        assert_eq!(fs::read_to_string(&out_file).unwrap(), "previous");
        let out = export(&f.root, &["--format", format]);
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty(), "nothing on stdout either");
    }
    // MCP names may hold dots: both tools, nothing renamed.
    let doc = exported(&f.root, "mcp");
    let tools = own(doc["tools"].as_array().unwrap());
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bad.name", "good"]);
}

#[test]
fn a_64_character_name_passes_and_invalid_manifests_are_reported() {
    let f = Fixture::new();
    let long = "a".repeat(64);
    f.tool(&text_tool(&long));
    let doc = exported(&f.root, "openai");
    assert_eq!(doc[0]["function"]["name"], json!(long));

    // A manifest with errors is not silently left out.
    let mut broken = text_tool("broken");
    broken["kind"] = json!("http");
    f.tool(&broken);
    let out = export(&f.root, &["--format", "mcp"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tool `broken`") && stderr.contains("glovebox lint"),
        "{stderr}"
    );
}

#[test]
fn anthropic_rejects_an_example_its_schema_rejects() {
    let f = Fixture::new();
    let mut t = text_tool("t");
    t["examples"] = json!([{"description": "bad", "params": {"q": 5}}]);
    f.tool(&t);
    let out = export(&f.root, &["--format", "anthropic"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("examples[0].params"), "{stderr}");
    // OpenAI has no examples: the same tool exports.
    exported(&f.root, "openai");
}

/// The venv's python (tests/mcp/setup.sh: the SDKs).
fn python() -> PathBuf {
    venv_program(
        "tests/mcp/setup.sh",
        "GLOVEBOX_MCP_VENV",
        "mcp-venv",
        "python",
    )
}

/// Runs the checker once over `(format, file)` pairs; each file's lines.
fn sdk_check(python: &Path, files: &[(&str, PathBuf)]) -> Vec<String> {
    let mut c = Command::new(python);
    c.arg(manifest_dir().join("tests/sdk/check_export.py"));
    for (format, file) in files {
        c.arg(format).arg(file);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "the checker crashed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    files
        .iter()
        .map(|(_, file)| {
            let prefix = format!("{}: ", file.display());
            stdout
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// `doc`'s first tool.
fn first<'a>(doc: &'a mut Value, format: &str) -> &'a mut Value {
    match format {
        "mcp" => &mut doc["tools"][0],
        _ => &mut doc[0],
    }
}

#[test]
fn every_format_matches_the_official_sdk_types() {
    let python = python();
    let dir = tempdir();
    // The examples, plus a tool with no examples.
    let f = Fixture::new();
    copy_tree(&examples().join(".glee"), &f.root.join(".glee"));
    copy_tree(&examples().join("scripts"), &f.root.join("scripts"));
    f.tool(&text_tool("plain"));
    let mut files: Vec<(&str, PathBuf)> = Vec::new();
    for format in FORMATS {
        let file = dir.path().join(format!("{format}.json"));
        let out = export(
            &f.root,
            &["--format", format, "--out", file.to_str().unwrap()],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let good: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        files.push((format, file));

        // The check can fail: one unknown key, one missing required key.
        let mut doc = good.clone();
        match *format {
            "openai" => first(&mut doc, format)["function"]["parametres"] = json!({}),
            _ => first(&mut doc, format)["paramz"] = json!({}),
        }
        let unknown = dir.path().join(format!("{format}-unknown.json"));
        fs::write(&unknown, doc.to_string()).unwrap();
        files.push((format, unknown));

        let mut doc = good;
        let required = match *format {
            "openai" => "type",
            "openai-responses" => "strict",
            "anthropic" => "input_schema",
            _ => "inputSchema",
        };
        first(&mut doc, format)
            .as_object_mut()
            .unwrap()
            .remove(required);
        let missing = dir.path().join(format!("{format}-missing.json"));
        fs::write(&missing, doc.to_string()).unwrap();
        files.push((format, missing));
    }
    let results = sdk_check(&python, &files);
    for (chunk, result) in files.chunks(3).zip(results.chunks(3)) {
        let format = chunk[0].0;
        assert_eq!(
            result[0], "ok 8",
            "{format} does not match the SDK types:\n{}",
            result[0]
        );
        assert!(
            result[1].contains("unknown key"),
            "{format}: an unknown key passed: {}",
            result[1]
        );
        assert!(
            !result[2].is_empty() && !result[2].starts_with("ok"),
            "{format}: a missing required key passed: {}",
            result[2]
        );
    }
}
