//! `glovebox doctor --prove`: on this host, in this CI stage's mode (root,
//! nobody, no user namespaces, no Landlock), the battery attacks each
//! tool's real jail and every applicable invariant holds — the example
//! project's tools, and a networked tool with a placeholder secret and a
//! write grant over the whole project. Every proven invariant was attacked
//! at least once, every control (what shows a probe ran) worked, and the
//! proof changed nothing of the project and left none of its canaries.
//!
//! That the prover can fail (a jail with one layer switched off reported
//! broken, with the evidence, and a non-zero exit) is shown by the
//! library's unit test `prove::weakened_tests`: the switch exists only in
//! that test binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// The example project (`GLOVEBOX_EXAMPLES` overrides, for the CI
/// stages that run copies from a world-readable directory).
fn examples() -> PathBuf {
    std::env::var_os("GLOVEBOX_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"))
}

/// Copies the tree `from` to `to` (no `.venv`).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_name() == ".venv" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every entry under `dir`: its kind, size, mode and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (bool, u64, u32, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.insert(
                p,
                (m.is_dir(), m.len(), m.mode(), m.mtime(), m.mtime_nsec()),
            );
        }
    }
    out
}

/// The state directory the CI stage names (`GLOVEBOX_STATE_DIR`), made
/// as glovebox's first call would: a stage that starts without one (the
/// container's) still has its state attacked.
fn with_state_dir() {
    if let Some(dir) = std::env::var_os("GLOVEBOX_STATE_DIR") {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .unwrap();
    }
}

/// `glovebox --root ROOT doctor --prove --json [TOOL…]`.
fn prove(root: &Path, tools: &[&str]) -> (Option<i32>, Value) {
    with_state_dir();
    let out = Command::new(bin())
        .arg("--root")
        .arg(root)
        .args(["doctor", "--prove", "--json"])
        .args(tools)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no json ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

fn tool<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == name)
        .unwrap_or_else(|| panic!("no tool {name}: {report:#}"))
}

fn invariant<'a>(tool: &'a Value, id: &str) -> &'a Value {
    tool["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["invariant"] == id)
        .unwrap_or_else(|| panic!("no invariant {id}: {tool:#}"))
}

/// A proven tool: every invariant held but those `not_applicable`, each
/// held one attacked at least once and every control worked.
fn assert_held(tool: &Value, not_applicable: &[&str]) {
    assert!(tool["not_run"].is_null(), "{tool:#}");
    for i in tool["invariants"].as_array().unwrap() {
        let id = i["invariant"].as_str().unwrap();
        let checks = i["checks"].as_array().unwrap();
        if not_applicable.contains(&id) {
            assert_eq!(i["status"], "not_applicable", "{id}: {i:#}");
            continue;
        }
        assert_eq!(i["status"], "held", "{id}: {i:#}");
        let attacks = checks.iter().filter(|c| c["control"].is_null()).count();
        assert!(attacks > 0, "{id} was never attacked: {i:#}");
        for c in checks {
            assert!(
                c["status"] == "held" || c["status"] == "not_applicable",
                "{id}: {c:#}"
            );
        }
        assert!(i["how"].as_str().unwrap().contains("refused"), "{i:#}");
    }
}

/// The scratch directories the report names (`…/glovebox-prove-XXXXXX`).
fn scratch_dirs(report: &Value) -> Vec<PathBuf> {
    let text = report.to_string();
    let mut out = Vec::new();
    for (i, _) in text.match_indices("/glovebox-prove-") {
        let start = text[..i].rfind([' ', '"']).map_or(0, |s| s + 1);
        let rest = &text[i + "/glovebox-prove-".len()..];
        let end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        if end == 6 {
            out.push(PathBuf::from(
                &text[start..i + "/glovebox-prove-".len() + end],
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Where the host's python3 really is, if it has one.
fn host_python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

#[test]
fn the_example_project_holds() {
    require_jail!();
    let tmp = tempdir();
    let root = tmp.path().join("examples");
    copy_tree(&examples(), &root);
    // repo_stats names `venv: .venv`: the host's python3 stands for it.
    let python = host_python();
    if let Some(py) = &python {
        std::fs::create_dir_all(root.join(".venv/bin")).unwrap();
        std::os::unix::fs::symlink(py, root.join(".venv/bin/python3")).unwrap();
    } else {
        eprintln!("no python3 on this host: repo_stats is not proven");
    }
    let before = snapshot(tmp.path());
    let (code, report) = prove(&root, &[]);
    assert_eq!(code, Some(0), "{report:#}");
    let s = &report["summary"];
    assert_eq!(s["broken"], 0, "{report:#}");
    assert_eq!(s["inconclusive"], 0, "{report:#}");
    // Network off, no secret: those two have nothing to attack.
    let na = ["egress-proxy", "secrets"];
    assert_held(tool(&report, "repo_scan"), &na);
    if python.is_some() {
        assert_held(tool(&report, "repo_stats"), &na);
    }
    for name in [
        "web_search",
        "slack_notify",
        "read_file",
        "write_file",
        "list_files",
    ] {
        assert_eq!(tool(&report, name)["not_run"], "no_jail", "{report:#}");
    }
    // The canary file was read (and refused) from outside every grant;
    // the state directory was attacked where there is one.
    let scan = tool(&report, "repo_scan");
    let dd = invariant(scan, "deny-by-default").to_string();
    assert!(dd.contains("read the canary file"), "{dd}");
    // Nothing of the project changed, no canary name is left beside it,
    // and the canaries are gone.
    assert_eq!(
        snapshot(tmp.path()),
        before,
        "the proof changed the project"
    );
    let dirs = scratch_dirs(&report);
    assert!(!dirs.is_empty(), "{report:#}");
    for d in dirs {
        assert!(!d.exists(), "{} was left behind", d.display());
    }
}

/// glovebox beside the project (`./glovebox --root project …`): the
/// battery's own program, which its jail holds, is no file "next to the
/// grant" that must be unreadable. It was reported broken.
#[test]
fn the_provers_own_binary_beside_the_project_is_not_an_attack() {
    require_jail!();
    let tmp = tempdir();
    let root = tmp.path().join("examples");
    copy_tree(&examples(), &root);
    with_state_dir();
    let exe = tmp.path().join("glovebox");
    if std::fs::hard_link(bin(), &exe).is_err() {
        std::fs::copy(bin(), &exe).unwrap();
    }
    let out = Command::new(&exe)
        .arg("--root")
        .arg(&root)
        .args(["doctor", "--prove", "--json", "repo_scan"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no json ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_held(tool(&report, "repo_scan"), &["egress-proxy", "secrets"]);
    assert!(
        !report
            .to_string()
            .contains(&format!("read {} (next to the grant", exe.display())),
        "{report:#}"
    );
}

#[test]
fn the_report_is_printed_for_people_too() {
    require_jail!();
    let tmp = tempdir();
    let root = tmp.path().join("examples");
    copy_tree(&examples(), &root);
    let out = Command::new(bin())
        .arg("--root")
        .arg(&root)
        .args(["doctor", "--prove", "repo_scan"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("repo_scan (command)"), "{text}");
    assert!(
        text.contains("[held    ] deny-by-default filesystem"),
        "{text}"
    );
    let summary = text
        .lines()
        .find(|l| l.starts_with("summary"))
        .unwrap_or("");
    assert!(summary.starts_with("summary  1 tool proven: "), "{text}");
    assert!(summary.contains(" held, 0 broken, 0 unproven, "), "{text}");
    // An unknown tool is a usage error, not a proof.
    let out = Command::new(bin())
        .arg("--root")
        .arg(&root)
        .args(["doctor", "--prove", "no_such_tool"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_tool"));
}

#[test]
fn a_networked_tool_with_a_placeholder_secret_and_a_project_write_grant_holds() {
    require_jail!();
    let tmp = tempdir();
    let root = tmp.path().join("project");
    for d in [
        ".glee/tools/fetch",
        ".glee/tools/other",
        ".git/hooks",
        "src",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("src/main.txt"), "main\n").unwrap();
    let manifest = |name: &str, permissions: &str| {
        format!(
            "name: {name}\ndescription: a target for the prover\nkind: command\nversion: 1\n\
             inputs:\n  schema:\n    type: object\n    properties: {{}}\n\
             outputs:\n  format: text\n\
             exec:\n  command:\n    entrypoint: cat\n    args: [src/main.txt]\n\
             permissions:\n{permissions}"
        )
    };
    std::fs::write(
        root.join(".glee/tools/fetch/tool.yml"),
        manifest(
            "fetch",
            "  network:\n    allow: [api.example.com]\n  fs:\n    read: []\n    write: [\".\"]\n  secrets:\n    API_TOKEN:\n      type: string\n      hosts: [api.example.com]\n",
        ),
    )
    .unwrap();
    std::fs::write(
        root.join(".glee/tools/other/tool.yml"),
        manifest(
            "other",
            "  network: false\n  fs:\n    read: [src]\n    write: []\n  secrets: {}\n",
        ),
    )
    .unwrap();
    let before = snapshot(tmp.path());
    let (code, report) = prove(&root, &["fetch"]);
    assert_eq!(code, Some(0), "{report:#}");
    let fetch = tool(&report, "fetch");
    assert_held(fetch, &["no-network"]);
    let egress = invariant(fetch, "egress-proxy").to_string();
    for attack in [
        "cloud metadata",
        "outside the allowlist",
        "tcp connect to the canary",
    ] {
        assert!(egress.contains(attack), "{attack}: {egress}");
    }
    let secrets = invariant(fetch, "secrets").to_string();
    assert!(secrets.contains("holds its placeholder"), "{secrets}");
    let surface = invariant(fetch, "control-surface");
    let attacks = surface["checks"].as_array().unwrap().len();
    assert!(attacks >= 3, "{surface:#}");
    assert!(surface.to_string().contains(".git/hooks"), "{surface:#}");
    assert_eq!(
        snapshot(tmp.path()),
        before,
        "the proof changed the project"
    );
}
