//! Agent-created tools under the permission ceiling: a creation inside it
//! works and is logged, each kind of excess is refused with nothing
//! written, and a symlink made after approval does not widen a grant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/project.rs"]
mod project;
mod runkit;

use common::*;
use project::Project;
use runkit::*;
use serde_json::{json, Value};

#[test]
fn creation_inside_the_ceiling_works_and_is_logged() {
    let p = Project::new();
    p.f.config(&json!({"security": {"max_permissions": {
        "network": false, "fs": {"read": ["."], "write": ["out"]}, "secrets": ["OK_TOKEN"]}}}));
    let def = p.f.base.join("def.json");
    std::fs::write(
        &def,
        json!({
            "description": "counts lines", "kind": "command", "version": 1,
            "inputs": {"schema": {"type": "object", "properties": {"f": {"type": "string"}}}},
            "outputs": {"format": "text"},
            "exec": {"command": {"entrypoint": "wc", "args": ["-l", "${f}"]}},
            "permissions": {"fs": {"read": ["."], "write": ["out"]},
                            "secrets": {"OK_TOKEN": {"type": "string", "required": false}}},
            "approval": {"required": false}
        })
        .to_string(),
    )
    .unwrap();
    let out = p.gb(&[
        "create",
        "counter",
        "--definition",
        def.to_str().unwrap(),
        "--creator",
        "claude",
    ]);
    assert!(out.status.success(), "{out:?}");
    let file = p.f.root.join(".glee/tools/counter/tool.yml");
    let text = std::fs::read_to_string(&file).unwrap();
    let lint = p.gb(&["lint"]);
    assert!(
        lint.status.success(),
        "created tool must lint clean: {lint:?}"
    );
    let shown = p.gb(&["show", "counter", "--json"]);
    let m: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        m["approval"]["required"], true,
        "approval forced on: {text}"
    );
    let log = p.log();
    assert!(
        log.contains("TOOL_CREATED name=counter creator=claude"),
        "{log}"
    );
    // It needs approval before it runs.
    if jail_available() {
        p.run("counter", &["f=.glee/config.yml"])
            .assert_failed("approval_required", 1);
    }
    // A tool not created by an agent is never overwritten.
    p.f.tool(&command_tool(
        "handmade",
        schema(json!({})),
        json!({"entrypoint": "true"}),
        read_root(),
    ));
    let before = std::fs::read_to_string(p.f.root.join(".glee/tools/handmade/tool.yml")).unwrap();
    let out = p.gb(&["create", "handmade", "--definition", def.to_str().unwrap()]);
    assert!(!out.status.success());
    assert_eq!(
        std::fs::read_to_string(p.f.root.join(".glee/tools/handmade/tool.yml")).unwrap(),
        before
    );
    // An agent-created one may be replaced by an agent.
    let out = p.gb(&[
        "create",
        "counter",
        "--definition",
        def.to_str().unwrap(),
        "--creator",
        "claude",
    ]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn each_kind_of_excess_is_refused_and_nothing_is_written() {
    let p = Project::new();
    p.f.config(&json!({"security": {"max_permissions": {
        "network": false, "fs": {"read": ["src"], "write": []}, "secrets": []}}}));
    std::fs::create_dir_all(p.f.root.join("src")).unwrap();
    // A symlink inside the allowed dir pointing outside it.
    std::os::unix::fs::symlink(&p.f.outside, p.f.root.join("src/escape")).unwrap();
    let base = json!({
        "description": "x", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object", "properties": {}}},
        "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "true", "cwd": "src"}},
    });
    let cases = [
        (
            "net",
            json!({"network": true, "fs": {"read": ["src"]}}),
            "network",
        ),
        ("rd", json!({"fs": {"read": ["."]}}), "fs.read"),
        ("abs", json!({"fs": {"read": ["/etc"]}}), "fs.read"),
        ("link", json!({"fs": {"read": ["src/escape"]}}), "fs.read"),
        (
            "wr",
            json!({"fs": {"read": ["src"], "write": ["src"]}}),
            "fs.write",
        ),
        (
            "sec",
            json!({"fs": {"read": ["src"]}, "secrets": {"API_KEY": {"type": "string"}}}),
            "secret",
        ),
    ];
    let outside = p.f.outside.to_str().unwrap().to_string();
    let execs = [
        (
            "cwd",
            json!({"command": {"entrypoint": "true", "cwd": "src/escape"}}),
            "exec.command.cwd",
        ),
        (
            "venv",
            json!({"python": {"module": "m", "function": "f", "cwd": "src", "venv": outside}}),
            "exec.python.venv",
        ),
        (
            "pycwd",
            json!({"python": {"module": "m", "function": "f", "cwd": "src/escape"}}),
            "exec.python.cwd",
        ),
    ];
    let cases = cases.into_iter().map(|(n, p, w)| (n, p, w, None)).chain(
        execs
            .into_iter()
            .map(|(n, e, w)| (n, json!({"fs": {"read": ["src"]}}), w, Some(e))),
    );
    for (name, perms, word, exec) in cases {
        let mut def = base.clone();
        def["permissions"] = perms;
        if let Some(exec) = exec {
            def["kind"] = json!(if exec.get("python").is_some() {
                "python"
            } else {
                "command"
            });
            def["exec"] = exec;
        }
        let file = p.f.base.join(format!("{name}.json"));
        std::fs::write(&file, def.to_string()).unwrap();
        let out = p.gb(&[
            "create",
            name,
            "--definition",
            file.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}: {out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["error"]["kind"], "permission_exceeds_ceiling",
            "{name}: {v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains(word),
            "{name}: {v}"
        );
        assert!(
            !p.f.root.join(".glee/tools").join(name).exists(),
            "{name} was written"
        );
    }
    let log = p.log();
    assert_eq!(log.matches("TOOL_DENIED").count(), 9, "{log}");
    assert_eq!(log.matches("is outside the ceiling").count(), 7, "{log}");
    assert!(log.contains("reason=ceiling"));
    assert!(!log.contains("TOOL_CREATED"));
}

const LINK_CANARY: &str = "LINKED-GRANT-CANARY-5e1f";

/// Attack 3: an agent-created, approved tool reads `data/cache` (not yet
/// there); a link `data/cache -> <outside>` made afterwards must not let it
/// read outside the root: not after approval, not with the call approved
/// by hand (`--yes`), and not for a hand-written tool either.
#[test]
fn a_symlink_made_after_approval_does_not_widen_a_grant() {
    require_jail!();
    let p = Project::new();
    std::fs::write(p.f.outside.join("canary.txt"), LINK_CANARY).unwrap();
    std::fs::create_dir_all(p.f.root.join("data")).unwrap();
    let def = json!({
        "description": "reads the cache", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object", "properties": {"f": {"type": "string"}}}},
        "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "cat", "args": ["${f}"], "cwd": "data/cache"}},
        "permissions": {"fs": {"read": ["data/cache"]}},
    });
    let file = p.f.base.join("def.json");
    std::fs::write(&file, def.to_string()).unwrap();
    let out = p.gb(&["create", "cache", "--definition", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(p.gb(&["approve", "cache", "--yes"]).status.success());
    // Legitimate: the cache is made inside the root and read.
    p.f.file("data/cache/canary.txt", "inside cache");
    let r = p.run("cache", &["f=canary.txt"]);
    r.assert_ok();
    assert_eq!(r.text(), "inside cache");

    // The attacker replaces the cache by a link to the outside.
    std::fs::remove_dir_all(p.f.root.join("data/cache")).unwrap();
    std::os::unix::fs::symlink(&p.f.outside, p.f.root.join("data/cache")).unwrap();
    let r = p.run("cache", &["f=canary.txt"]);
    r.assert_failed("approval_required", 1);
    assert!(
        r.message().contains("fs.read data/cache now resolves to"),
        "{r:#?}"
    );
    assert!(!r.mentions(LINK_CANARY), "canary leaked: {r:#?}");
    let r = p.run("cache", &["f=canary.txt", "--yes"]);
    assert_eq!(r.kind(), "permission_exceeds_ceiling", "{r:#?}");
    assert!(!r.mentions(LINK_CANARY), "canary leaked: {r:#?}");

    // A hand-written tool with the same grant is refused at run time.
    p.f.tool(&command_tool(
        "hand",
        schema(json!({"f": {"type": "string"}})),
        json!({"entrypoint": "cat", "args": ["${f}"], "cwd": "data/cache"}),
        json!({"fs": {"read": ["data/cache"]}}),
    ));
    let r = p.run("hand", &["f=canary.txt"]);
    r.assert_failed("manifest_invalid", 2);
    assert!(r.message().contains("resolves through a symlink"), "{r:#?}");
    assert!(!r.mentions(LINK_CANARY), "canary leaked: {r:#?}");
    // Naming the target itself is the owner's explicit choice: allowed.
    p.f.tool(&command_tool(
        "named",
        schema(json!({"f": {"type": "string"}})),
        json!({"entrypoint": "cat", "args": ["${f}"], "cwd": "data/cache"}),
        json!({"fs": {"read": ["data/cache", p.f.outside.to_str().unwrap()]}}),
    ));
    let r = p.run("named", &["f=canary.txt"]);
    r.assert_ok();
    assert_eq!(r.text(), LINK_CANARY);
}
