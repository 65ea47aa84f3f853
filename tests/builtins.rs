//! The built-in tools (read_file, write_file, list_files) end to end: the
//! real binary, the seed's wording, and attacks on their confinement —
//! `..`, absolute paths, symbolic links (file and directory, at depth,
//! swapped in during a call) and `.glee/` — each judged by its effect: a
//! canary outside the root never comes back and is never written.
//!
//! Every attack test first proves the tool works in the same project (the
//! probe ran), so a refusal can only mean the confinement held.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{bin, namespace_free};
use runkit::*;
use serde_json::{json, Value};

const CANARY: &str = "CANARY-5e1f0c7d-outside-the-root";
const ALL: [&str; 3] = ["read_file", "write_file", "list_files"];

/// A project with every built-in enabled under `safety_mode`, a file
/// `src/a.txt` and a canary file and directory outside the root.
fn project(safety_mode: &str) -> Fixture {
    let f = Fixture::new();
    f.config(&json!({"builtins": ALL, "safety_mode": safety_mode}));
    f.file("src/a.txt", "hello\nworld\n");
    fs::write(f.outside.join("secret.txt"), CANARY).unwrap();
    fs::create_dir_all(f.outside.join("dir")).unwrap();
    fs::write(f.outside.join("dir/inner.txt"), CANARY).unwrap();
    f
}

/// The fixture's own state directory: every call is audited (and refused
/// without a writable state), whoever runs the tests (`nobody` in CI has
/// no home).
fn state(f: &Fixture) -> String {
    f.state().to_str().unwrap().to_string()
}

/// `glovebox run` with the fixture's state directory.
fn run(f: &Fixture, name: &str, args: &[&str]) -> Called {
    f.run_audited(name, args)
}

fn read(f: &Fixture, path: &str) -> Called {
    run(f, "read_file", &[&format!("path={path}")])
}

fn write(f: &Fixture, path: &str, content: &str, extra: &[&str]) -> Called {
    let params = json!({"path": path, "content": content}).to_string();
    let mut args = vec!["--params", params.as_str()];
    args.extend_from_slice(extra);
    // A state directory of the test's own, so the audit log is written
    // whoever runs the tests.
    f.run_audited("write_file", &args)
}

fn list(f: &Fixture, dir: &str, recursive: bool) -> Called {
    let params = json!({"directory": dir, "recursive": recursive}).to_string();
    run(f, "list_files", &["--params", &params])
}

/// The probe: the tools work in this project.
fn assert_tools_work(f: &Fixture) {
    let r = read(f, "src/a.txt");
    r.assert_ok();
    assert_eq!(
        r.text(),
        "Successfully read 2 lines from src/a.txt\nhello\nworld\n"
    );
}

/// Nothing outside the root holds new or changed content.
fn assert_outside_untouched(f: &Fixture) {
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        CANARY
    );
    assert_eq!(
        fs::read_to_string(f.outside.join("dir/inner.txt")).unwrap(),
        CANARY
    );
    let mut names: Vec<String> = fs::read_dir(&f.outside)
        .unwrap()
        .chain(fs::read_dir(f.outside.join("dir")).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["dir", "inner.txt", "secret.txt"],
        "new files outside the root"
    );
}

/// Files under `dir` whose name marks a write_file temporary.
fn temp_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains(".glovebox-") {
            found.push(name.clone());
        }
        if e.file_type().unwrap().is_dir() {
            found.extend(temp_files(&e.path()));
        }
    }
    found
}

#[test]
fn builtins_are_on_by_default_and_the_config_narrows_them() {
    let f = Fixture::new();
    f.file("a.txt", "x\n");
    let names = |f: &Fixture| -> Vec<String> {
        let out = Command::new(bin())
            .args(["list", "--json", "--root"])
            .arg(&f.root)
            .output()
            .unwrap();
        let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&f), ["list_files", "read_file", "write_file"]);
    f.config(&json!({"builtins": ["list_files"]}));
    run(&f, "read_file", &["path=a.txt"]).assert_failed("tool_not_found", 2);
    assert_eq!(names(&f), ["list_files"]);
    f.config(&json!({"builtins": []}));
    assert!(names(&f).is_empty());
}

#[test]
fn unknown_builtin_in_config_is_a_lint_error() {
    let f = Fixture::new();
    f.config(&json!({"builtins": ["read_files"]}));
    let out = Command::new(bin())
        .args(["lint", "--root"])
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(".glee/config.yml:"), "{text}");
}

#[test]
fn read_file_wording() {
    require_jail!();
    let f = project("ask");
    assert_tools_work(&f);
    let r = read(&f, "src/missing.groovy");
    r.assert_failed("input_invalid", 1);
    assert_eq!(r.message(), "Error: File not found at src/missing.groovy");
    read(&f, "src").assert_failed("input_invalid", 1);
    // An absolute path inside the root is accepted.
    let abs = f.root.join("src/a.txt");
    read(&f, abs.to_str().unwrap()).assert_ok();
}

#[test]
fn list_files_flat_and_recursive() {
    require_jail!();
    let f = project("ask");
    f.file("commands/GlmCli.groovy", "");
    f.file("commands/AgentCommand.groovy", "");
    f.file("core/nested/Deep.groovy", "");
    f.file("README.md", "");
    f.file("glm.groovy", "");
    let flat = list(&f, ".", false);
    flat.assert_ok();
    assert_eq!(
        flat.text(),
        ".glee/\ncommands/\ncore/\nsrc/\nglm.groovy\nREADME.md"
    );
    let deep = list(&f, "commands", true);
    assert_eq!(deep.text(), "AgentCommand.groovy\nGlmCli.groovy");
    let rec = list(&f, "core", true);
    assert_eq!(rec.text(), "nested/\n  Deep.groovy");
    let all = list(&f, ".", true);
    let text = all.text();
    assert!(
        text.contains("commands/\n  AgentCommand.groovy\n  GlmCli.groovy\ncore/\n  nested/\n    Deep.groovy\nsrc/\n  a.txt\nglm.groovy\nREADME.md"),
        "{text}"
    );
    // recursive defaults to false
    let r = run(&f, "list_files", &["directory=core"]);
    assert_eq!(r.text(), "nested/");
    let r = list(&f, "/invalid/path", false);
    r.assert_failed("permission_exceeds_ceiling", 1);
    let r = list(&f, "invalid/path", false);
    r.assert_failed("input_invalid", 1);
    assert_eq!(r.message(), "Error: Directory not found: invalid/path");
}

#[test]
fn always_allow_writes_atomically_and_keeps_the_mode() {
    require_jail!();
    let f = project("always_allow");
    let r = write(&f, "src/new.txt", "one\ntwo\nthree\n", &[]);
    r.assert_ok();
    assert_eq!(r.text(), "Successfully wrote 3 lines to src/new.txt");
    assert_eq!(
        fs::read_to_string(f.root.join("src/new.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let a = f.root.join("src/a.txt");
    fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
    write(&f, "src/a.txt", "changed\n", &[]).assert_ok();
    assert_eq!(fs::read_to_string(&a).unwrap(), "changed\n");
    let mode = fs::metadata(&a).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    // A root-level file, then failures: no temporary file is ever left.
    if namespace_free() {
        // Without a mount namespace the grant of the root is split around
        // its control surface (.glee/): no new entry at the root itself,
        // said as such, and nothing is written.
        let r = write(&f, "top.txt", "x", &[]);
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains("mount namespace"), "{r:#?}");
        assert!(!f.root.join("top.txt").exists());
    } else {
        write(&f, "top.txt", "x", &[]).assert_ok();
        assert_eq!(fs::read_to_string(f.root.join("top.txt")).unwrap(), "x");
    }
    write(&f, "src", "x", &[]).assert_failed("input_invalid", 1);
    write(&f, "nodir/x.txt", "x", &[]).assert_failed("input_invalid", 1);
    assert!(temp_files(&f.root).is_empty(), "{:?}", temp_files(&f.root));
    assert!(!f.root.join("nodir").exists());
}

#[test]
fn strict_denies_and_changes_nothing() {
    require_jail!();
    let f = project("strict");
    assert_tools_work(&f);
    let r = write(&f, "src/a.txt", "overwritten\n", &["--yes"]);
    r.assert_failed("permission_exceeds_ceiling", 1);
    assert!(r.message().starts_with("Action denied by user."), "{r:#?}");
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nworld\n"
    );
    write(&f, "src/b.txt", "new\n", &[]).assert_failed("permission_exceeds_ceiling", 1);
    assert!(!f.root.join("src/b.txt").exists());
}

#[test]
fn ask_without_a_terminal_denies_and_yes_consents() {
    require_jail!();
    let f = project("ask");
    let r = write(&f, "src/a.txt", "hello\nthere\n", &[]);
    r.assert_failed("approval_required", 1);
    assert!(r.message().starts_with("Action denied by user."), "{r:#?}");
    let diff = r.details()["diff"].as_str().unwrap();
    assert!(
        diff.starts_with("--- Proposed Changes for src/a.txt ---\n"),
        "{diff}"
    );
    assert!(diff.contains("-world\n+there\n"), "{diff}");
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nworld\n"
    );
    write(&f, "src/b.txt", "new\n", &[]).assert_failed("approval_required", 1);
    assert!(!f.root.join("src/b.txt").exists());
    // The audit log has the denial.
    let log = fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap();
    assert!(log.contains("TOOL_DENIED name=write_file"), "{log}");

    let r = write(&f, "src/a.txt", "hello\nthere\n", &["--yes"]);
    r.assert_ok();
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nthere\n"
    );
    let log = fs::read_to_string(f.root.join(".glee/audit/tools.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("TOOL_EXECUTED name=write_file") && l.contains("status=success")),
        "{log}"
    );
}

/// `glovebox run write_file …` on a pseudo-terminal: waits for the
/// prompt, runs `between` (the diff is on screen), answers `answer`;
/// returns everything the terminal showed.
fn on_terminal(f: &Fixture, params: &Value, answer: &str, between: impl FnOnce()) -> String {
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    let mut child = Command::new(bin())
        .env("GLOVEBOX_STATE_DIR", state(f))
        .args([
            "run",
            "write_file",
            "--params",
            &params.to_string(),
            "--root",
        ])
        .arg(&f.root)
        .current_dir(&f.cwd)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let prompt = "Allow write? [y/N]: ";
    while !String::from_utf8_lossy(&seen).contains(prompt) {
        let chunk = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no prompt: {}", String::from_utf8_lossy(&seen)));
        seen.extend(chunk);
    }
    between();
    master.write_all(format!("{answer}\n").as_bytes()).unwrap();
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(500)) {
        seen.extend(chunk);
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(status.code().is_some(), "{text}");
    text
}

#[test]
fn ask_on_a_terminal_writes_only_on_yes() {
    require_jail!();
    let f = project("ask");
    let shown = on_terminal(
        &f,
        &json!({"path": "src/a.txt", "content": "hello\nthere\n"}),
        "n",
        || {},
    );
    assert!(
        shown.contains("--- Proposed Changes for src/a.txt ---"),
        "{shown}"
    );
    assert!(shown.contains("-world"), "{shown}");
    assert!(shown.contains("+there"), "{shown}");
    assert!(shown.contains("Action denied by user."), "{shown}");
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nworld\n"
    );

    let shown = on_terminal(
        &f,
        &json!({"path": "src/a.txt", "content": "hello\nthere\n"}),
        "y",
        || {},
    );
    assert!(
        shown.contains("Successfully wrote 2 lines to src/a.txt"),
        "{shown}"
    );
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nthere\n"
    );

    // A new file shows its full content.
    let shown = on_terminal(
        &f,
        &json!({"path": "src/n.txt", "content": "alpha\nbeta\n"}),
        "yes",
        || {},
    );
    assert!(
        shown.contains("+alpha") && shown.contains("+beta"),
        "{shown}"
    );
    assert_eq!(
        fs::read_to_string(f.root.join("src/n.txt")).unwrap(),
        "alpha\nbeta\n"
    );
}

#[test]
fn directory_swapped_for_a_symlink_during_the_call_is_not_followed() {
    require_jail!();
    let f = project("ask");
    f.file("sub/x.txt", "old\n");
    let root = f.root.clone();
    let outside = f.outside.join("dir");
    let shown = on_terminal(
        &f,
        &json!({"path": "sub/x.txt", "content": "pwned\n"}),
        "y",
        || {
            // The diff was computed from the real sub/; now sub/ leads out.
            fs::rename(root.join("sub"), root.join("sub.orig")).unwrap();
            symlink(&outside, root.join("sub")).unwrap();
        },
    );
    // Refused either by the supervisor's check of the directory or by the
    // jail, where the link leads to nothing (its target is not in the
    // jail's tree).
    assert!(
        shown.contains("outside the project root")
            || shown.contains("a symbolic link cannot lead out"),
        "{shown}"
    );
    assert!(!f.outside.join("dir/x.txt").exists());
    assert_outside_untouched(&f);
    assert_eq!(
        fs::read_to_string(f.root.join("sub.orig/x.txt")).unwrap(),
        "old\n"
    );
}

#[test]
fn dotdot_and_absolute_paths_are_refused() {
    require_jail!();
    let f = project("always_allow");
    assert_tools_work(&f);
    let secret = f.outside.join("secret.txt");
    for path in [
        "../outside/secret.txt".to_owned(),
        "src/../../outside/secret.txt".to_owned(),
        secret.to_str().unwrap().to_owned(),
        format!("{}/../outside/secret.txt", f.root.display()),
    ] {
        let r = read(&f, &path);
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(!r.mentions(CANARY), "{r:#?}");
        assert!(r.message().contains("outside the project root"), "{r:#?}");
        write(&f, &path, "pwned", &[]).assert_failed("permission_exceeds_ceiling", 1);
    }
    list(&f, "..", false).assert_failed("permission_exceeds_ceiling", 1);
    let r = list(&f, f.outside.to_str().unwrap(), true);
    assert!(!r.mentions("secret.txt"), "{r:#?}");
    assert_outside_untouched(&f);
}

#[test]
fn symlinks_out_of_the_root_are_not_followed() {
    require_jail!();
    let f = project("always_allow");
    assert_tools_work(&f);
    fs::create_dir_all(f.root.join("a/b/c")).unwrap();
    symlink(f.outside.join("secret.txt"), f.root.join("leak.txt")).unwrap();
    symlink(f.outside.join("secret.txt"), f.root.join("a/b/c/leak.txt")).unwrap();
    symlink(f.outside.join("dir"), f.root.join("a/b/outdir")).unwrap();
    symlink(&f.outside, f.root.join("out")).unwrap();
    // A symlink inside the root that stays inside works.
    symlink(f.root.join("src/a.txt"), f.root.join("alias.txt")).unwrap();
    read(&f, "alias.txt").assert_ok();

    for path in [
        "leak.txt",
        "a/b/c/leak.txt",
        "a/b/outdir/inner.txt",
        "out/secret.txt",
    ] {
        let r = read(&f, path);
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(!r.mentions(CANARY), "{path}: {r:#?}");
    }
    for dir in ["out", "a/b/outdir"] {
        let r = list(&f, dir, true);
        assert!(!r.json["ok"].as_bool().unwrap(), "{dir}: {r:#?}");
        assert!(
            !r.mentions("secret.txt") && !r.mentions("inner.txt"),
            "{r:#?}"
        );
    }
    // Listing the root shows the links and does not descend into them.
    let r = list(&f, ".", true);
    r.assert_ok();
    assert!(r.text().contains("  outdir\n"), "{}", r.text());
    assert!(!r.mentions("inner.txt"), "{r:#?}");

    // Writes through a directory link, and onto a file link, change nothing
    // outside.
    for path in [
        "out/secret.txt",
        "a/b/outdir/inner.txt",
        "out/new.txt",
        "leak.txt",
        "a/b/c/leak.txt",
    ] {
        let r = write(&f, path, "pwned", &[]);
        assert!(!r.json["ok"].as_bool().unwrap(), "{path}: {r:#?}");
    }
    assert!(fs::symlink_metadata(f.root.join("leak.txt"))
        .unwrap()
        .is_symlink());
    assert_outside_untouched(&f);
}

#[test]
fn system_files_the_jail_baseline_can_read_are_out_of_reach_too() {
    require_jail!();
    let target = Path::new("/etc/ld.so.cache");
    if !target.exists() {
        eprintln!("SKIPPED: no /etc/ld.so.cache on this machine");
        return;
    }
    let f = project("ask");
    assert_tools_work(&f);
    symlink(target, f.root.join("ldcache")).unwrap();
    let r = read(&f, "ldcache");
    r.assert_failed("permission_exceeds_ceiling", 1);
}

#[test]
fn the_control_surface_is_never_written_in_always_allow() {
    require_jail!();
    let f = project("always_allow");
    f.script("scripts/run.sh", "#!/bin/sh\necho RUN-ORIGINAL\n");
    f.tool(&command_tool(
        "runner",
        schema(json!({})),
        json!({"entrypoint": "./scripts/run.sh"}),
        read_root(),
    ));
    // A tool run through a link: the link and the script it leads to.
    f.script("scripts/impl.sh", "#!/bin/sh\necho IMPL-ORIGINAL\n");
    std::os::unix::fs::symlink("impl.sh", f.root.join("scripts/linked.sh")).unwrap();
    f.tool(&command_tool(
        "linked",
        schema(json!({})),
        json!({"entrypoint": "./scripts/linked.sh"}),
        read_root(),
    ));
    f.file("mod.py", "def f():\n    return 1\n");
    f.file("pkg/__init__.py", "");
    f.file("pkg/inner.py", "def f():\n    return 1\n");
    for (name, module) in [("m", "mod"), ("p", "pkg.inner")] {
        f.tool(&python_tool(
            name,
            schema(json!({})),
            json!({"module": module, "function": "f"}),
            read_root(),
        ));
    }
    f.file(".git/config", "[core]\n");
    fs::create_dir_all(f.root.join(".git/hooks")).unwrap();
    // The probe: an ordinary write works in this mode (below the root
    // in the namespace-free jail, which refuses root-level writes).
    let notes = if namespace_free() {
        "src/notes.txt"
    } else {
        "notes.txt"
    };
    write(&f, notes, "ok\n", &[]).assert_ok();
    assert_eq!(fs::read_to_string(f.root.join(notes)).unwrap(), "ok\n");
    let before: Vec<(String, Option<String>)> = [
        "tools.json",
        ".git/config",
        ".git/hooks/pre-commit",
        "scripts/run.sh",
        "scripts/linked.sh",
        "scripts/impl.sh",
        "mod.py",
        "pkg/__init__.py",
        "pkg/inner.py",
        "pkg/new.py",
    ]
    .iter()
    .map(|p| (p.to_string(), fs::read_to_string(f.root.join(p)).ok()))
    .collect();
    for (path, _) in &before {
        let r = write(&f, path, "import os\nos.system('touch /tmp/pwned')\n", &[]);
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(
            r.message().contains("never changes what a tool runs"),
            "{path}: {r:#?}"
        );
    }
    for (path, content) in &before {
        assert_eq!(
            &fs::read_to_string(f.root.join(path)).ok(),
            content,
            "{path} changed"
        );
    }
}

#[test]
fn glee_is_never_written() {
    require_jail!();
    let f = project("always_allow");
    f.tool(&command_tool(
        "echo",
        schema(json!({})),
        json!({"entrypoint": "echo"}),
        json!({}),
    ));
    let config = fs::read_to_string(f.root.join(".glee/config.yml")).unwrap();
    let manifest = fs::read_to_string(f.root.join(".glee/tools/echo/tool.yml")).unwrap();
    // The probe: a write beside .glee/ works (below the root in the
    // namespace-free jail, which refuses root-level writes).
    let beside = if namespace_free() {
        "src/beside.txt"
    } else {
        "beside.txt"
    };
    write(&f, beside, "ok", &[]).assert_ok();
    symlink(f.root.join(".glee"), f.root.join("cfg")).unwrap();
    symlink(f.root.join(".glee/tools/echo"), f.root.join("src/tooldir")).unwrap();
    for path in [
        ".glee/config.yml",
        ".glee/tools/echo/tool.yml",
        ".glee/new.yml",
        "./.glee/config.yml",
        "src/../.glee/config.yml",
        ".glee",
        "cfg/config.yml",
        "src/tooldir/tool.yml",
    ] {
        let r = write(&f, path, "permissions: {network: true}\n", &[]);
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains(".glee"), "{path}: {r:#?}");
    }
    assert_eq!(
        fs::read_to_string(f.root.join(".glee/config.yml")).unwrap(),
        config
    );
    assert_eq!(
        fs::read_to_string(f.root.join(".glee/tools/echo/tool.yml")).unwrap(),
        manifest
    );
    assert!(!f.root.join(".glee/new.yml").exists());
}

/// The helper alone, without the supervisor's checks: started in a
/// sandbox that may write the whole root, it still cannot read or write
/// through a link out of what its request names.
#[test]
fn the_jailed_helper_holds_without_the_supervisor_checks() {
    require_jail!();
    let f = project("ask");
    fs::create_dir_all(f.root.join("real")).unwrap();
    symlink(&f.outside, f.root.join("out")).unwrap();
    symlink(f.outside.join("secret.txt"), f.root.join("leak.txt")).unwrap();
    let helper = |request: Value| -> Value {
        let mut child = Command::new(bin())
            .args(["sandbox", "--read"])
            .arg(&f.root)
            .arg("--write")
            .arg(&f.root)
            .arg("--exec")
            .arg(bin())
            .arg("--cwd")
            .arg(&f.root)
            .arg("--")
            .arg(bin())
            .arg("__builtin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let root = f.root.to_str().unwrap();
    // The probe: the helper answers.
    let ok = helper(json!({"op": "read", "root": root, "path": "src/a.txt", "max_bytes": 1000}));
    assert_eq!(ok, json!({"reply": "content", "text": "hello\nworld\n"}));
    let r = helper(json!({"op": "read", "root": root, "path": "leak.txt", "max_bytes": 1000}));
    assert_eq!(r["reply"], "denied", "{r}");
    assert!(!r.to_string().contains(CANARY));
    // Writing through a link the supervisor would have refused.
    let real = f.root.join("real");
    let r = helper(
        json!({"op": "write", "root": root, "write_dir": real, "dir": "out",
                          "name": "secret.txt", "content": "pwned"}),
    );
    assert_eq!(r["reply"], "denied", "{r}");
    // And into the root, outside the granted directory.
    let r = helper(
        json!({"op": "write", "root": root, "write_dir": real, "dir": ".",
                          "name": "x.txt", "content": "pwned"}),
    );
    assert_eq!(r["reply"], "denied", "{r}");
    assert!(!f.root.join("x.txt").exists());
    let r = helper(
        json!({"op": "write", "root": root, "write_dir": real, "dir": "real",
                          "name": "x.txt", "content": "fine"}),
    );
    assert_eq!(r["reply"], "written", "{r}");
    assert_outside_untouched(&f);
}

/// An MCP client (stdio, newline-delimited JSON-RPC) cannot consent: a
/// write under `ask` is denied with the diff, nothing is written; reads work.
#[test]
fn mcp_callers_never_consent_to_a_write() {
    use std::io::BufRead;
    require_jail!();
    let f = project("ask");
    let mut child = Command::new(bin())
        .env("GLOVEBOX_STATE_DIR", state(&f))
        .args(["mcp", "--root"])
        .arg(&f.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "builtins-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "src/a.txt", "content": "pwned\n"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "read_file", "arguments": {"path": "src/a.txt"}}}),
    ];
    for m in &messages {
        writeln!(stdin, "{m}").unwrap();
    }
    let mut replies = std::collections::HashMap::new();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while replies.len() < 3 {
        let line = lines.next().expect("mcp server closed stdout").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_i64() {
            replies.insert(id, v);
        }
    }
    drop(stdin);
    child.wait().unwrap();
    let denied = &replies[&2]["result"];
    assert_eq!(denied["isError"], json!(true), "{denied}");
    let text = denied["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Action denied by user."), "{text}");
    assert!(text.contains("approval_required"), "{text}");
    assert!(text.contains("+pwned"), "the diff is shown: {text}");
    let read = &replies[&3]["result"];
    assert_eq!(read["isError"], json!(false), "{read}");
    assert_eq!(
        read["content"][0]["text"],
        "Successfully read 2 lines from src/a.txt\nhello\nworld\n"
    );
    assert_eq!(
        fs::read_to_string(f.root.join("src/a.txt")).unwrap(),
        "hello\nworld\n"
    );
}

#[test]
fn builtins_are_shown_and_explained_like_any_tool() {
    let f = project("ask");
    let show = Command::new(bin())
        .args(["show", "write_file", "--json", "--root"])
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0));
    let m: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        m["inputs"]["schema"]["required"],
        json!(["path", "content"])
    );
    let explain = Command::new(bin())
        .args(["explain", "read_file", "--root"])
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(explain.status.code(), Some(0));
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(text.contains("network   denied"), "{text}");
}

#[test]
fn a_state_dir_inside_the_root_is_never_exposed() {
    require_jail!();
    let f = project("always_allow");
    let state = f.root.join("state");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("audit.key"), CANARY).unwrap();
    let env = [("GLOVEBOX_STATE_DIR", state.to_str().unwrap())];
    // The probe: with the state elsewhere the same read works.
    let elsewhere = f.base.join("state-elsewhere");
    f.run_env(
        "read_file",
        &["path=state/audit.key"],
        &[("GLOVEBOX_STATE_DIR", elsewhere.to_str().unwrap())],
    )
    .assert_ok();
    let r = f.run_env("read_file", &["path=state/audit.key"], &env);
    r.assert_failed("permission_exceeds_ceiling", 1);
    assert!(!r.mentions(CANARY), "{r:#?}");
    f.run_env("list_files", &["directory=state"], &env)
        .assert_failed("permission_exceeds_ceiling", 1);
}

#[test]
fn reads_beyond_the_output_limit_are_refused() {
    require_jail!();
    let f = project("ask");
    f.config(&json!({"builtins": ALL, "limits": {"output_bytes": 100}}));
    f.file("big.txt", &"x".repeat(101));
    f.file("small.txt", &"x".repeat(100));
    read(&f, "small.txt").assert_ok();
    let r = read(&f, "big.txt");
    r.assert_failed("resource_limit", 1);
    assert!(r.message().contains("limits.output_bytes"), "{r:#?}");
}
