//! The example project (examples/) run for real from a temp copy:
//! repo_scan (command) and repo_stats (python in a venv the test creates).
//! Nothing is ever written inside the repository's examples/.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use runkit::*;
use serde_json::Value;

/// A fresh copy of examples/ (without any venv the repo might hold).
fn examples_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempdir();
    let dest = tmp.path().join("examples");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        &dest,
    );
    let _ = std::fs::remove_dir_all(dest.join(".venv"));
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    (tmp, dest)
}

fn make_venv(root: &Path) {
    let out = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(root.join(".venv"))
        .output()
        .expect("run python3 -m venv");
    assert!(out.status.success(), "python3 -m venv failed: {out:?}");
}

/// What repo_stats should count: regular files (not symlinks) outside
/// .git/.glee/.venv/__pycache__/node_modules/target, and their lines
/// unless binary.
fn expected_stats(dir: &Path, files: &mut u64, loc: &mut u64) {
    const SKIP: &[&str] = &[
        ".git",
        ".glee",
        ".venv",
        "__pycache__",
        "node_modules",
        "target",
    ];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let t = e.file_type().unwrap();
        let name = e.file_name().into_string().unwrap();
        if t.is_dir() {
            if !SKIP.contains(&name.as_str()) {
                expected_stats(&e.path(), files, loc);
            }
        } else if t.is_file() {
            *files += 1;
            let data = std::fs::read(e.path()).unwrap();
            if !data.contains(&0) {
                *loc += data.iter().filter(|b| **b == b'\n').count() as u64;
                if !data.is_empty() && !data.ends_with(b"\n") {
                    *loc += 1;
                }
            }
        }
    }
}

#[test]
fn repo_scan_reports_the_two_matches() {
    require_jail!();
    let (tmp, root) = examples_copy();
    let r = call_glovebox(&root, &tmp.path().join("cwd"), "repo_scan", &[], &[]);
    r.assert_ok();
    let text = r.text();
    assert!(text.contains("Scan complete."), "{r:#?}");
    assert!(text.contains("Matches found: 2"), "{r:#?}");
}

#[test]
fn repo_scan_skips_the_venv_the_readme_creates() {
    require_jail!();
    let (tmp, root) = examples_copy();
    make_venv(&root);
    // What a venv with pip holds: packages full of to-do markers.
    let site = root.join(".venv/lib/site-packages-test");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("pkg.py"),
        "# TO".to_owned() + "DO one\n# TO" + "DO two\n",
    )
    .unwrap();
    let r = call_glovebox(&root, &tmp.path().join("cwd"), "repo_scan", &[], &[]);
    r.assert_ok();
    assert!(r.text().contains("Matches found: 2"), "{r:#?}");
}

#[test]
fn repo_stats_runs_in_a_real_venv() {
    require_jail!();
    let (tmp, root) = examples_copy();
    make_venv(&root);
    let cwd = tmp.path().join("cwd");
    let r = call_glovebox(&root, &cwd, "repo_stats", &[], &[]);
    r.assert_ok();
    let out = r.output();
    let files = out["files"].as_u64().expect("files is a number");
    let loc = out["loc"].as_u64().expect("loc is a number");
    assert!(files > 0 && loc > 0, "{r:#?}");
    let (mut want_files, mut want_loc) = (0, 0);
    expected_stats(&root, &mut want_files, &mut want_loc);
    assert_eq!((files, loc), (want_files, want_loc), "{r:#?}");
    assert_eq!(r.json["warnings"], serde_json::json!([]), "{r:#?}");

    // explain lists the venv as a runtime path.
    let venv = root.join(".venv");
    let out = Command::new(bin())
        .args(["explain", "repo_stats", "--json", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let policy: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runtime: Vec<PathBuf> = policy["runtime"]
        .as_array()
        .expect("runtime is a list")
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    assert!(runtime.contains(&venv), "{policy:#}");
    let out = Command::new(bin())
        .args(["explain", "repo_stats", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("runtime"))
        .unwrap_or_else(|| panic!("no runtime line: {text}"));
    assert!(line.contains(path_str(&venv)), "{text}");
}

#[test]
fn repo_stats_without_its_venv_is_manifest_invalid_with_a_hint() {
    let (tmp, root) = examples_copy();
    let r = call_glovebox(&root, &tmp.path().join("cwd"), "repo_stats", &[], &[]);
    r.assert_failed("manifest_invalid", 2);
    assert!(r.message().contains("python3 -m venv"), "{r:#?}");
}
