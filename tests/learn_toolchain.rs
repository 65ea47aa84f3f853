//! Learn mode with a real toolchain: `cargo check --offline` of a small
//! crate under this machine's rustup toolchain (`~/.rustup`, `~/.cargo`,
//! as in tests/ci_action.rs; root's home, so this runs in the main stage
//! only). The proposal is the toolchain's two directories and the crate's
//! own writes, and it re-runs green in enforcing mode; the crate is
//! byte-identical after learning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

#[test]
fn cargo_check_under_rustup_is_learned_and_reruns_green() {
    require_jail!();
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    assert!(
        home.join(".rustup").is_dir() && home.join(".cargo/bin/cargo").is_file(),
        "learn is checked against a rustup toolchain in ~/.rustup and ~/.cargo: install one (https://rustup.rs)"
    );
    let dir = tempdir();
    let krate = tiny_crate(dir.path(), "pub fn two() -> u32 { 2 }\n");
    let path = format!("{}/.cargo/bin:/usr/local/bin:/usr/bin:/bin", home.display());
    let rustup_home = home.join(".rustup");
    let cargo_home = home.join(".cargo");
    let envs = [
        ("PATH", path.as_str()),
        ("RUSTUP_HOME", path_str(&rustup_home)),
        ("CARGO_HOME", path_str(&cargo_home)),
    ];
    let run = |args: &[String]| -> (Option<i32>, Value) {
        let mut c = Command::new(bin());
        c.current_dir(&krate)
            .args(args)
            .stdin(Stdio::null())
            .env_clear()
            .env("HOME", &home)
            .env("GLOVEBOX_STATE_DIR", dir.path().join("state"));
        for (k, v) in envs {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let json = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no json ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), json)
    };
    let cmd = ["cargo", "check", "--offline"];
    let mut args: Vec<String> = ["sandbox", "--learn", "--json"].map(String::from).to_vec();
    for (k, _) in envs {
        args.extend(["--env".to_string(), k.to_string()]);
    }
    args.push("--".into());
    args.extend(cmd.map(String::from));
    let (code, learned) = run(&args);
    assert_eq!(code, Some(0), "{learned:#}");
    // The crate is as it was: target/ and Cargo.lock went to the copy.
    assert!(!krate.join("target").exists() && !krate.join("Cargo.lock").exists());
    let grants: Vec<(String, PathBuf)> = learned["proposal"]["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["access"].as_str().unwrap().into(),
                g["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    // The toolchain as two directories, not its thousands of files.
    assert!(
        grants.contains(&("read".into(), rustup_home.clone())),
        "{grants:?}"
    );
    assert!(
        grants.contains(&("read".into(), cargo_home.clone())),
        "{grants:?}"
    );
    for (_, p) in &grants {
        assert!(
            p.starts_with(&krate) || *p == rustup_home || *p == cargo_home,
            "{p:?} beyond the crate and the toolchain: {grants:?}"
        );
    }
    assert!(grants.len() <= 5, "{grants:?}");
    // The variables the proposal must keep, each with the use that
    // shows it (cargo found on PATH, the toolchain under RUSTUP_HOME).
    for (name, _) in envs {
        let e = learned["proposal"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} not explained: {learned:#}"));
        assert_eq!(e["used"], true, "{e}");
    }
    let why = |name: &str| {
        learned["proposal"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["why"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        why("PATH").contains("~/.cargo/bin/cargo"),
        "{}",
        why("PATH")
    );
    assert!(
        why("RUSTUP_HOME").contains("~/.rustup/"),
        "{}",
        why("RUSTUP_HOME")
    );
    assert!(learned["proposal"]["hosts"].as_array().unwrap().is_empty());
    // The enforcing re-run with exactly the proposed arguments (after
    // creating what the proposal says to create).
    for g in learned["proposal"]["grants"].as_array().unwrap() {
        if g["create"] == Value::Bool(true) {
            std::fs::create_dir_all(g["path"].as_str().unwrap()).unwrap();
        }
    }
    let mut args: Vec<String> = ["sandbox", "--json"].map(String::from).to_vec();
    args.extend(
        learned["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    args.push("--".into());
    args.extend(cmd.map(String::from));
    let (code, rerun) = run(&args);
    assert_eq!(code, Some(0), "{rerun:#}");
    assert!(krate.join("target/debug").is_dir(), "{rerun:#}");
}

/// The README's example as typed on a default rustup install, where
/// `RUSTUP_HOME` and `CARGO_HOME` are unset: `--env` passes their
/// defaults (and says so), the run succeeds, and the proposal re-runs
/// green; the one-command line is pasteable as printed.
#[test]
fn the_readme_rustup_example_works_where_the_variables_are_unset() {
    require_jail!();
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    assert!(
        home.join(".rustup").is_dir() && home.join(".cargo/bin/cargo").is_file(),
        "learn is checked against a rustup toolchain in ~/.rustup and ~/.cargo: install one (https://rustup.rs)"
    );
    let dir = tempdir();
    let krate = tiny_crate(dir.path(), "pub fn three() -> u32 { 3 }\n");
    let path = format!("{}/.cargo/bin:/usr/local/bin:/usr/bin:/bin", home.display());
    let run = |args: &[&str]| {
        Command::new(bin())
            .current_dir(&krate)
            .args(args)
            .stdin(Stdio::null())
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .env("GLOVEBOX_STATE_DIR", dir.path().join("state"))
            .output()
            .unwrap()
    };
    let env = [
        "--env",
        "PATH",
        "--env",
        "RUSTUP_HOME",
        "--env",
        "CARGO_HOME",
    ];
    let mut args = vec!["sandbox", "--learn", "--json"];
    args.extend(env);
    args.extend(["--", "cargo", "check", "--offline"]);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let learned: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no json ({e}): {stderr}"));
    assert_eq!(out.status.code(), Some(0), "{learned:#} {stderr}");
    assert!(
        stderr.contains("RUSTUP_HOME is not set: passing its default"),
        "{stderr}"
    );
    let grants = learned["proposal"]["grants"].to_string();
    assert!(grants.contains(path_str(&home.join(".rustup"))), "{grants}");
    // The enforcing run with the proposed arguments, the variables still
    // unset.
    let mut rerun: Vec<String> = vec!["sandbox".into(), "--json".into()];
    rerun.extend(
        learned["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    rerun.extend(["--", "cargo", "check", "--offline"].map(String::from));
    let refs: Vec<&str> = rerun.iter().map(String::as_str).collect();
    let out = run(&refs);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The text: "glovebox learned", and the line to paste.
    let mut args = vec!["sandbox", "--learn"];
    args.extend(env);
    args.extend(["--", "cargo", "check", "--offline"]);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("glovebox learned"), "{stderr}");
    let line = stderr
        .lines()
        .skip_while(|l| !l.starts_with("as one command:"))
        .nth(1)
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("--env PATH --env RUSTUP_HOME --env CARGO_HOME"),
        "{line}"
    );
}
