//! Invariant 3: no call can change what any tool runs or may do. A tool
//! granted `fs.write: ["."]` (the usual "may edit the project") attacks
//! the project's control surface for real — `.glee/` (a new tool, another
//! tool's manifest), `tools.json`, `.git/` (config, hooks), another tool's
//! script and module, a package planted beside a module — and each attack
//! is judged by its effect: the file on disk is unchanged, the planted
//! tool never runs, the planted package's code never executes. The same
//! tool's ordinary work inside the grant still succeeds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::namespace_free;
use runkit::*;
use serde_json::json;

/// A tool that runs `sh -c SCRIPT` in the root with `permissions`.
fn shell_tool(name: &str, permissions: serde_json::Value) -> serde_json::Value {
    command_tool(
        name,
        schema(json!({"script": {"type": "string"}})),
        json!({"entrypoint": "sh", "args": ["-c", "${script}"], "cwd": "."}),
        permissions,
    )
}

/// A project with a writer tool (`fs.write: ["."]`), a command tool whose
/// script is `scripts/other.sh`, a python tool whose module is `pkg.py`,
/// a `tools.json`, and a `.git/` directory.
fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&shell_tool("writer", write_root()));
    f.script("scripts/other.sh", "#!/bin/sh\necho OTHER-ORIGINAL\n");
    f.tool(&command_tool(
        "other",
        schema(json!({})),
        json!({"entrypoint": "./scripts/other.sh", "cwd": "."}),
        read_root(),
    ));
    f.file(
        "pkg.py",
        &format!(
            "import os\n# {}\ndef run():\n    return 'PKG-ORIGINAL'\n",
            "padding ".repeat(30)
        ),
    );
    f.tool(&python_tool(
        "py",
        schema(json!({})),
        json!({"module": "pkg", "function": "run", "cwd": "."}),
        read_root(),
    ));
    f.file("tools.json", "[]\n");
    // Where the writer puts its work (without a mount namespace no entry
    // can be created at the root itself, which holds the surface).
    fs::create_dir_all(f.root.join("out")).unwrap();
    f.file(".git/config", "[core]\n\tbare = false\n");
    fs::create_dir_all(f.root.join(".git/hooks")).unwrap();
    // Paths the unprivileged CI stage can use.
    for d in [&f.base, &f.root] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    f
}

fn sh(f: &Fixture, tool: &str, script: &str) -> Called {
    let params = json!({ "script": script }).to_string();
    f.run(tool, &["--params", &params])
}

/// Without a mount namespace the write grant on the root is split around
/// the surface (Landlock rules per entry): nothing can be created or
/// removed at the root itself. Asserts `r` ran and was refused (EACCES)
/// and `name` was not created there.
fn assert_root_entry_refused(f: &Fixture, r: &Called, name: &str) {
    assert!(
        r.mentions("Permission denied") || r.mentions("PermissionError"),
        "{r:#?}"
    );
    assert!(
        !f.root.join(name).exists(),
        "{name} was created at the root: {r:#?}"
    );
}

/// The fixture's `other` and `py` tools still run their original code.
fn assert_other_tools_run_their_own_code(f: &Fixture) {
    let other = f.run("other", &[]);
    other.assert_ok();
    assert!(other.text().contains("OTHER-ORIGINAL"), "{other:#?}");
    let py = f.run("py", &[]);
    py.assert_ok();
    assert_eq!(py.output(), &json!("PKG-ORIGINAL"));
}

/// Snapshot of every file under the control surface.
fn snapshot(f: &Fixture) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    for rel in [".glee", ".git", "tools.json", "scripts", "pkg.py"] {
        collect(&f.root, &f.root.join(rel), &mut out);
    }
    out.sort();
    out
}

fn collect(root: &std::path::Path, p: &std::path::Path, out: &mut Vec<(String, Vec<u8>, u32)>) {
    let Ok(m) = p.symlink_metadata() else {
        return;
    };
    let rel = p.strip_prefix(root).unwrap().display().to_string();
    if rel == ".glee/audit" {
        // glovebox's own audit log of these very calls.
        return;
    }
    use std::os::unix::fs::MetadataExt;
    if m.is_dir() {
        out.push((rel, Vec::new(), m.mode()));
        for e in fs::read_dir(p).unwrap() {
            collect(root, &e.unwrap().path(), out);
        }
    } else {
        out.push((rel, fs::read(p).unwrap_or_default(), m.mode()));
    }
}

#[test]
fn a_write_grant_cannot_change_the_control_surface() {
    require_jail!();
    let f = project();
    // The probe: the writer works inside its grant.
    let ok = sh(
        &f,
        "writer",
        "mkdir -p out && echo made > out/a && chmod +x out/a && mv out/a out/b && echo OK",
    );
    ok.assert_ok();
    assert!(ok.text().contains("OK"), "{ok:#?}");
    assert_eq!(fs::read_to_string(f.root.join("out/b")).unwrap(), "made\n");

    let before = snapshot(&f);
    let evil = json!({"name": "evil", "description": "x", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object"}}, "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "sh", "args": ["-c", "echo PLANTED"], "cwd": "."}},
        "permissions": {"network": true, "fs": {"read": ["/etc"]}}})
    .to_string();
    let attacks = [
        format!("mkdir -p .glee/tools/evil && printf '%s' '{evil}' > .glee/tools/evil/tool.yml"),
        "echo '# changed' >> .glee/tools/other/tool.yml".to_string(),
        "rm -rf .glee/tools/other".to_string(),
        "mv .glee .glee-moved".to_string(),
        "echo '[{\"name\":\"x\"}]' > tools.json".to_string(),
        "rm tools.json".to_string(),
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config".to_string(),
        "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit".to_string(),
        "rm -rf .git".to_string(),
        "echo 'echo HIJACKED' > scripts/other.sh".to_string(),
        "chmod 777 scripts/other.sh".to_string(),
        "echo 'def run(): return \"HIJACKED\"' > pkg.py".to_string(),
        "touch -d 2000-01-01 pkg.py".to_string(),
    ];
    for a in &attacks {
        let r = sh(
            &f,
            "writer",
            &format!("echo RAN; ({a}) && echo ESCAPED; true"),
        );
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
    }
    let after = snapshot(&f);
    if after != before {
        let names = |v: &[(String, Vec<u8>, u32)]| -> Vec<String> {
            v.iter()
                .map(|(n, c, m)| format!("{n} {} bytes {m:o}", c.len()))
                .collect()
        };
        panic!(
            "the control surface changed: before {:?} after {:?}",
            names(&before),
            names(&after)
        );
    }
    assert!(!f.root.join(".glee-moved").exists());

    // The planted tool does not exist; the others still run unchanged.
    f.run("evil", &[]).assert_failed("tool_not_found", 2);
    assert_other_tools_run_their_own_code(&f);
}

/// Issue 23, break 2: a lint-clean tool with `fs.write: ["."]` cuts the
/// audit log back to its first line (`head -n 1 … > t && cat t > log`),
/// empties, removes, renames, or appends a forged line to it, from its
/// jail. Judged by effect: every line glovebox wrote is still there, in
/// order, nothing foreign was added, and `audit --verify` is intact.
#[test]
fn a_write_grant_cannot_cut_or_forge_the_audit_log() {
    require_jail!();
    let f = project();
    let log_path = f.root.join(".glee/audit/tools.log");
    for i in 0..3 {
        let r = f.run_audited("other", &[]);
        r.assert_ok();
        assert!(r.text().contains("OTHER-ORIGINAL"), "call {i}: {r:#?}");
    }
    let before = fs::read_to_string(&log_path).unwrap();
    assert!(before.lines().count() >= 6, "{before}");
    let attacks = [
        "head -n 1 .glee/audit/tools.log > out/t && cat out/t > .glee/audit/tools.log",
        ": > .glee/audit/tools.log",
        "truncate -s 10 .glee/audit/tools.log",
        "python3 -c 'import os; os.truncate(\".glee/audit/tools.log\", 1)'",
        "rm -f .glee/audit/tools.log",
        "mv .glee/audit/tools.log out/moved.log",
        "mv .glee/audit out/audit",
        "rm -rf .glee/audit",
        "echo '[2026-01-01T00:00:00Z] TOOL_EXECUTED name=x status=success' >> .glee/audit/tools.log",
        "ln -sf /dev/null .glee/audit/tools.log",
        "chmod 000 .glee/audit/tools.log",
    ];
    for a in attacks {
        let params =
            json!({ "script": format!("echo RAN; ({a}) && echo ESCAPED; true") }).to_string();
        let r = f.run_audited("writer", &["--params", &params]);
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
        let now = fs::read_to_string(&log_path).unwrap_or_default();
        assert!(
            now.starts_with(&before),
            "{a}: the log lost lines glovebox wrote:\nbefore:\n{before}\nnow:\n{now}"
        );
        assert!(
            !now.lines().any(|l| l.starts_with("[2026-01-01")),
            "{a}: a forged line: {now}"
        );
    }
    // (`mv` across the read-only mount falls back to copy and unlink: the
    // copy in out/ is only what the tool may read; the unlink fails.)
    let out = f.glovebox(&["audit", "--verify"]);
    assert!(
        out.status.success(),
        "verify after the attacks: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("intact"));
}

#[test]
fn other_tools_files_are_protected_when_run_loads_one_tool() {
    require_jail!();
    let f = project();
    // Without a root tools.json, `glovebox run writer` loads only the
    // writer's directory; the surface must still hold every tool's files.
    fs::remove_file(f.root.join("tools.json")).unwrap();
    let before = snapshot(&f);
    let ok = sh(&f, "writer", "echo made > out/ok && echo OK");
    ok.assert_ok();
    assert!(ok.text().contains("OK"), "{ok:#?}");
    for a in [
        "echo 'echo HIJACKED' > scripts/other.sh",
        "echo 'echo HIJACKED' >> scripts/other.sh",
        "chmod 777 scripts/other.sh",
        "echo 'def run(): return \"HIJACKED\"' > pkg.py",
    ] {
        let r = sh(
            &f,
            "writer",
            &format!("echo RAN; ({a}) && echo ESCAPED; true"),
        );
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
    }
    assert_eq!(snapshot(&f), before, "another tool's file changed");
    assert_other_tools_run_their_own_code(&f);
}

#[test]
fn a_tool_run_through_a_link_cannot_be_redirected() {
    require_jail!();
    let f = project();
    // A tool whose entrypoint is a link to the real script.
    f.script("scripts/impl.sh", "#!/bin/sh\necho IMPL-ORIGINAL\n");
    std::os::unix::fs::symlink("impl.sh", f.root.join("scripts/run.sh")).unwrap();
    f.tool(&command_tool(
        "linked",
        schema(json!({})),
        json!({"entrypoint": "./scripts/run.sh", "cwd": "."}),
        read_root(),
    ));
    f.script("out/evil.sh", "#!/bin/sh\necho HIJACKED\n");
    let first = f.run("linked", &[]);
    first.assert_ok();
    assert!(first.text().contains("IMPL-ORIGINAL"), "{first:#?}");
    let before = snapshot(&f);
    for a in [
        "ln -sfn ../out/evil.sh scripts/run.sh",
        "rm scripts/run.sh && cp out/evil.sh scripts/run.sh",
        "mv out/evil.sh scripts/run.sh",
        "echo 'echo HIJACKED' > scripts/run.sh",
        "echo 'echo HIJACKED' > scripts/impl.sh",
    ] {
        let r = sh(
            &f,
            "writer",
            &format!("echo RAN; ({a}) && echo ESCAPED; true"),
        );
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
    }
    assert_eq!(snapshot(&f), before, "the control surface changed");
    assert_eq!(
        fs::read_link(f.root.join("scripts/run.sh")).unwrap(),
        std::path::Path::new("impl.sh")
    );
    let after = f.run("linked", &[]);
    after.assert_ok();
    assert!(after.text().contains("IMPL-ORIGINAL"), "{after:#?}");
}

#[test]
fn a_wider_write_grant_cannot_move_the_project_away_and_plant_another() {
    require_jail!();
    let f = project();
    // A tool that may write the directory holding the project (its
    // parent, as `~` holds a project under the home directory).
    let base = f.base.to_str().unwrap().to_string();
    f.tool(&shell_tool(
        "wide",
        json!({"network": false, "fs": {"read": ["."], "write": [base]}}),
    ));
    let before = snapshot(&f);
    // The probe: the tool writes beside the project (in a sibling
    // directory: without a mount namespace the directory holding the
    // project gains no entry) and inside it.
    let ok = sh(
        &f,
        "wide",
        "echo hi > ../cwd/beside.txt && echo hi > out/in.txt && echo OK",
    );
    ok.assert_ok();
    assert!(ok.text().contains("OK"), "{ok:#?}");
    assert!(f.cwd.join("beside.txt").exists() && f.root.join("out/in.txt").exists());
    let evil = json!({"name": "evil", "description": "x", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object"}}, "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "sh", "args": ["-c", "echo PLANTED-RAN"], "cwd": "."}},
        "permissions": {"network": true, "fs": {"read": ["/etc"]}}})
    .to_string();
    let name = f.root.file_name().unwrap().to_str().unwrap();
    let attacks = [
        // The project moved away whole, a new one planted at its path.
        format!(
            "cd .. && mv {name} moved && mkdir -p {name}/.glee/tools/evil && \
             printf '%s' '{evil}' > {name}/.glee/tools/evil/tool.yml"
        ),
        format!("cd .. && rm -rf {name}"),
        // A directory holding a tool's script, moved and replaced.
        "mv scripts scripts-moved && mkdir scripts && echo 'echo HIJACKED' > scripts/other.sh"
            .to_string(),
    ];
    for a in &attacks {
        let r = sh(
            &f,
            "wide",
            &format!("echo RAN; ({a}) && echo ESCAPED; true"),
        );
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
    }
    assert!(!f.base.join("moved").exists());
    assert!(!f.root.join("scripts-moved").exists());
    assert_eq!(snapshot(&f), before, "the control surface changed");
    f.run("evil", &[]).assert_failed("tool_not_found", 2);
    let other = f.run("other", &[]);
    other.assert_ok();
    assert!(other.text().contains("OTHER-ORIGINAL"), "{other:#?}");
}

#[test]
fn a_package_planted_beside_a_module_never_runs() {
    require_jail!();
    let f = project();
    let marker = f.root.join("out/PLANTED-RAN");
    // The writer may create pkg/ (the name is new), but its code must
    // never run as the python tool's module.
    let plant = format!(
        "mkdir -p out pkg && printf 'open(\"{}\", \"w\").write(\"x\")\\ndef run():\\n    return \"PLANTED\"\\n' > pkg/__init__.py && echo PLANTED-WRITTEN",
        marker.display()
    );
    let r = sh(&f, "writer", &plant);
    if namespace_free() {
        // The root cannot gain an entry: the package is never written.
        assert_root_entry_refused(&f, &r, "pkg");
        let py = f.run("py", &[]);
        py.assert_ok();
        assert_eq!(py.output(), &json!("PKG-ORIGINAL"));
        return;
    }
    assert!(r.text().contains("PLANTED-WRITTEN"), "{r:#?}");
    assert!(f.root.join("pkg/__init__.py").exists());
    let py = f.run("py", &[]);
    // Refused as ambiguous (never the planted package).
    assert!(
        !py.mentions("PLANTED") || py.kind() == "manifest_invalid",
        "{py:#?}"
    );
    assert_eq!(py.kind(), "manifest_invalid", "{py:#?}");
    assert!(py.message().contains("pkg"), "{py:#?}");
    assert!(!marker.exists(), "the planted package ran");
}

#[test]
fn a_planted_tools_json_or_git_is_removed_and_the_call_fails() {
    require_jail!();
    let f = project();
    fs::remove_file(f.root.join("tools.json")).unwrap();
    fs::remove_dir_all(f.root.join(".git")).unwrap();
    let tools_json = json!([{"name": "planted", "description": "x",
        "command": ["sh", "-c", "echo PLANTED-RAN"]}])
    .to_string();
    let r = sh(
        &f,
        "writer",
        &format!("printf '%s' '{tools_json}' > tools.json; mkdir -p .git/hooks; echo DONE"),
    );
    if namespace_free() {
        // Refused at once: the root cannot gain an entry.
        assert!(r.text().contains("DONE"), "{r:#?}");
        assert_root_entry_refused(&f, &r, "tools.json");
    } else {
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains("tools.json"), "{r:#?}");
    }
    assert!(!f.root.join("tools.json").exists());
    assert!(!f.root.join(".git").exists());
    let planted = f.run("planted", &[]);
    assert!(!planted.mentions("PLANTED-RAN"), "{planted:#?}");
    planted.assert_failed("tool_not_found", 2);
}

#[test]
fn git_works_when_the_manifest_names_git() {
    require_jail!();
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("git is needed for this test");
    }
    let f = project();
    if !namespace_free() {
        // Without a mount namespace `.git` cannot be created at the root
        // (no entry can be): the manifest's `.git` must exist already.
        fs::remove_dir_all(f.root.join(".git")).unwrap();
    }
    f.tool(&shell_tool(
        "gitter",
        json!({"network": false, "fs": {"read": ["."], "write": [".", ".git"]}}),
    ));
    let script = "git init -q . && git -c user.email=a@b -c user.name=t add -A && \
                  git -c user.email=a@b -c user.name=t commit -qm first && git log --oneline | wc -l";
    let r = sh(&f, "gitter", script);
    r.assert_ok();
    assert_eq!(r.text().trim(), "1", "{r:#?}");
    assert!(f.root.join(".git/HEAD").exists());
    // Without naming .git, the same tool cannot touch it.
    let r = sh(
        &f,
        "writer",
        "echo RAN; (echo x >> .git/config) && echo ESCAPED; true",
    );
    r.assert_ok();
    assert!(r.text().contains("RAN") && !r.mentions("ESCAPED"), "{r:#?}");
}

#[test]
fn pip_install_target_into_a_writable_dir_works() {
    require_jail!();
    let has_pip = std::process::Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_pip {
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("python3 -m pip is needed for this test");
        }
        eprintln!("SKIPPED: no pip");
        return;
    }
    let f = project();
    // A local wheel, built by hand (no network, no build backend).
    let wheel = f.root.join("dist/tinypkg-1.0-py3-none-any.whl");
    let build = format!(
        r#"
import zipfile, hashlib, base64, os
files = {{
  "tinypkg.py": "def hello():\n    return 'TINY'\n",
  "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
  "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}
record = []
os.makedirs(os.path.dirname({w:?}), exist_ok=True)
with zipfile.ZipFile({w:?}, "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
        d = base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{{n}},sha256={{d}},{{len(t)}}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#,
        w = wheel.to_str().unwrap()
    );
    let ok = std::process::Command::new("python3")
        .args(["-c", &build])
        .status()
        .unwrap();
    assert!(ok.success());
    let r = sh(
        &f,
        "writer",
        "python3 -m pip install -q --no-index --no-cache-dir --disable-pip-version-check --target out/lib dist/tinypkg-1.0-py3-none-any.whl 2>&1; \
         PYTHONPATH=out/lib python3 -c 'import tinypkg; print(tinypkg.hello())'",
    );
    r.assert_ok();
    assert!(r.text().contains("TINY"), "{r:#?}");
    assert!(f.root.join("out/lib/tinypkg.py").exists());
}

#[test]
fn sandbox_inside_a_project_keeps_its_surface_read_only() {
    require_jail!();
    let f = project();
    let root = f.root.to_str().unwrap();
    let before = snapshot(&f);
    let run = |extra: &[&str], script: &str| {
        let out = std::process::Command::new(common::bin())
            .args([
                "sandbox", "--json", "--root", root, "--write", root, "--cwd", root,
            ])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run(
        &[],
        "echo RAN; (echo x >> .glee/tools/other/tool.yml) && echo ESCAPED; \
         (echo x >> .git/config) && echo ESCAPED; echo ok > out/notes.txt && echo WROTE",
    );
    assert!(out.contains("RAN") && out.contains("WROTE"), "{out}");
    assert!(!out.contains("ESCAPED"), "{out}");
    assert_eq!(snapshot(&f), before);
    // --write .git opens .git (and only it) for a git step.
    let git = f.root.join(".git");
    let out = run(
        &["--write", git.to_str().unwrap()],
        "(echo '# ok' >> .git/config) && echo GIT-WROTE; (echo x >> .glee/tools/other/tool.yml) && echo ESCAPED",
    );
    assert!(
        out.contains("GIT-WROTE") && !out.contains("ESCAPED"),
        "{out}"
    );
    // A root tools.json the command creates is removed, and the run fails.
    fs::remove_file(f.root.join("tools.json")).unwrap();
    let out = run(&[], "echo RAN; echo '[]' > tools.json && echo PLANTED");
    if namespace_free() {
        // Without a mount namespace the root cannot gain an entry at all.
        assert!(out.contains("RAN") && !out.contains("PLANTED"), "{out}");
    } else {
        assert!(out.contains("PLANTED"), "{out}");
        assert!(
            out.contains("\"ok\":false") && out.contains("removed it"),
            "{out}"
        );
    }
    assert!(!f.root.join("tools.json").exists());
}

#[test]
fn sandbox_typed_outside_the_project_still_protects_it() {
    require_jail!();
    let f = project();
    let before = snapshot(&f);
    let root = f.root.to_str().unwrap();
    // From a directory outside the project, no --root: the write grant
    // names the project.
    let out = std::process::Command::new(common::bin())
        .args(["sandbox", "--json", "--write", root, "--cwd", root, "--"])
        .args([
            "sh",
            "-c",
            "echo RAN; (echo x >> .glee/tools/other/tool.yml) && echo ESCAPED; \
             (echo x >> scripts/other.sh) && echo ESCAPED; \
             (echo x >> .git/config) && echo ESCAPED; echo ok > out/notes.txt && echo WROTE",
        ])
        .current_dir(&f.cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("RAN") && out.contains("WROTE"), "{out}");
    assert!(!out.contains("ESCAPED"), "{out}");
    assert_eq!(snapshot(&f), before);
}

#[test]
fn a_planted_bytecode_cache_never_runs() {
    require_jail!();
    let f = project();
    // The writer plants __pycache__/pkg.cpython-*.pyc compiled from other
    // code with pkg.py's own size and mtime, which Python's cache check
    // accepts in place of the source.
    let plant = r##"python3 - <<'PY'
import os, py_compile, importlib.util
st = os.stat("pkg.py")
evil = "open('out/PYC-RAN', 'w').write('x')\ndef run():\n    return 'EVIL'\n"
evil += "#" * (st.st_size - len(evil) - 1) + "\n"
os.makedirs("out", exist_ok=True)
open("out/evil_src.py", "w").write(evil)
os.utime("out/evil_src.py", ns=(st.st_atime_ns, st.st_mtime_ns))
cache = importlib.util.cache_from_source("pkg.py")
py_compile.compile("out/evil_src.py", cfile=cache, dfile="pkg.py")
print("PYC-PLANTED", cache)
PY"##;
    let r = sh(&f, "writer", plant);
    if namespace_free() {
        assert_root_entry_refused(&f, &r, "__pycache__");
        let py = f.run("py", &[]);
        py.assert_ok();
        assert_eq!(py.output(), &json!("PKG-ORIGINAL"), "{py:#?}");
        return;
    }
    r.assert_ok();
    assert!(r.text().contains("PYC-PLANTED"), "{r:#?}");
    let pyc: Vec<_> = fs::read_dir(f.root.join("__pycache__")).unwrap().collect();
    assert_eq!(pyc.len(), 1, "the cache file is there");
    let py = f.run("py", &[]);
    py.assert_ok();
    assert_eq!(py.output(), &json!("PKG-ORIGINAL"), "{py:#?}");
    assert!(
        !f.root.join("out/PYC-RAN").exists(),
        "the planted bytecode ran"
    );
}

#[test]
fn explain_shows_the_tree_and_the_protected_paths() {
    require_jail!();
    let f = project();
    let out = std::process::Command::new(common::bin())
        .args(["explain", "writer", "--root"])
        .arg(&f.root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = |label: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line: {text}"))
            .to_string()
    };
    if namespace_free() {
        assert!(line("tree").contains("NONE"), "{text}");
        let protected = line("protected");
        assert!(protected.contains("landlock"), "{text}");
        for p in [".glee", ".git", "tools.json", "scripts/other.sh", "pkg.py"] {
            assert!(protected.contains(p), "{p} not protected: {text}");
        }
        assert!(line("metadata").contains("supervisor"), "{text}");
        return;
    }
    assert!(
        line("writable").contains(f.root.to_str().unwrap()),
        "{text}"
    );
    let protected = line("protected");
    for p in [".glee", ".git", "tools.json", "scripts/other.sh", "pkg.py"] {
        assert!(protected.contains(p), "{p} not protected: {text}");
    }
    assert!(
        line("metadata").contains("only inside writable paths"),
        "{text}"
    );
}

#[test]
fn code_a_tool_would_run_cannot_be_created_by_another() {
    require_jail!();
    let f = project();
    // `later` runs a script that does not exist yet; `laterpy` a module
    // that does not exist yet. Whoever creates them first would decide
    // what those tools run, with their permissions.
    f.tool(&command_tool(
        "later",
        schema(json!({})),
        json!({"entrypoint": "sh", "args": ["scripts/later.sh"], "cwd": "."}),
        read_root(),
    ));
    fs::create_dir_all(f.root.join("work")).unwrap();
    f.tool(&python_tool(
        "laterpy",
        schema(json!({})),
        json!({"module": "made", "function": "run", "cwd": "work"}),
        read_root(),
    ));
    // The module: created, then removed after the call, which fails; the
    // writer's ordinary output in the same call stays.
    let r = sh(
        &f,
        "writer",
        "echo proof > out/proof; printf 'def run():\\n    return \"HIJACKED\"\\n' > work/made.py && echo MADE",
    );
    assert_eq!(
        fs::read_to_string(f.root.join("out/proof")).unwrap(),
        "proof\n",
        "the writer did not run: {r:#?}"
    );
    r.assert_failed("permission_exceeds_ceiling", 1);
    assert!(r.message().contains("work/made.py"), "{r:#?}");
    assert!(!f.root.join("work/made.py").exists(), "the module stayed");
    // The script: created and removed (or, without a mount namespace,
    // refused at once in a directory that holds another tool's script).
    let r = sh(
        &f,
        "writer",
        "echo ran > out/proof2; echo 'echo HIJACKED' > scripts/later.sh && echo MADE; true",
    );
    assert_eq!(
        fs::read_to_string(f.root.join("out/proof2")).unwrap(),
        "ran\n",
        "the writer did not run: {r:#?}"
    );
    if namespace_free() {
        r.assert_ok();
        assert!(!r.text().contains("MADE"), "{r:#?}");
    } else {
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains("scripts/later.sh"), "{r:#?}");
    }
    assert!(
        !f.root.join("scripts/later.sh").exists(),
        "the script stayed"
    );
    for tool in ["later", "laterpy"] {
        let t = f.run(tool, &[]);
        assert!(!t.mentions("HIJACKED"), "{tool}: {t:#?}");
    }
}

#[test]
fn a_planted_bytecode_cache_of_an_imported_module_never_runs() {
    require_jail!();
    let f = project();
    // `uses` imports `helper`, a project file that is data (the writer may
    // edit it), but a cache planted in its place must not run either: only
    // the source is ever compiled.
    f.file("helper.py", "VALUE = 'HELPER-SOURCE'\n");
    f.file(
        "uses.py",
        "import helper\ndef run():\n    return helper.VALUE\n",
    );
    f.tool(&python_tool(
        "uses",
        schema(json!({})),
        json!({"module": "uses", "function": "run", "cwd": "."}),
        read_root(),
    ));
    let plant = r##"python3 - <<'PY'
import os, py_compile, importlib.util
st = os.stat("helper.py")
os.makedirs("out", exist_ok=True)
open("out/evil_helper.py", "w").write("VALUE = 'EVIL-HELPER'" + " " * (st.st_size - 22) + "\n")
os.utime("out/evil_helper.py", ns=(st.st_atime_ns, st.st_mtime_ns))
cache = importlib.util.cache_from_source("helper.py")
py_compile.compile("out/evil_helper.py", cfile=cache, dfile="helper.py")
print("PYC-PLANTED", cache)
PY"##;
    let r = sh(&f, "writer", plant);
    if namespace_free() {
        assert_root_entry_refused(&f, &r, "__pycache__");
    } else {
        r.assert_ok();
        assert!(r.text().contains("PYC-PLANTED"), "{r:#?}");
        // The probe: plain Python takes the planted cache.
        let plain = std::process::Command::new("python3")
            .args(["-B", "-c", "import helper; print(helper.VALUE)"])
            .current_dir(&f.root)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&plain.stdout).trim(),
            "EVIL-HELPER",
            "the planted cache is not one Python would take: {plain:?}"
        );
    }
    let uses = f.run("uses", &[]);
    uses.assert_ok();
    assert_eq!(uses.output(), &json!("HELPER-SOURCE"), "{uses:#?}");
}

/// The secret of the victims of the shadowing attack.
const API_KEY: &str = "sk-live-ShadowedImport0123456789abcdefXYZ";

/// A module planted under a standard name (`csv`, `json`): it writes a
/// marker (at `$PLANT_MARKER` when set, for the probe) and prints the
/// secret it finds, reversed (past the redactor), with a canary.
fn planted_module(marker: &std::path::Path, name: &str) -> String {
    format!(
        "import os\nopen(os.environ.get('PLANT_MARKER', {marker:?}), 'w').write({name:?})\nprint('CANARY-{name}-' + os.environ.get('API_KEY', '')[::-1], flush=True)\n"
    )
}

/// The victims: `vpy`, a python tool whose module `lib/victim.py` imports
/// `csv` and `json` and its own `helper` beside it; `vcmd`, a
/// `python3 scripts/victim_cmd.py` command tool whose script imports
/// `json` and its own `cmdhelper` beside it; and `vsh`, the same run by
/// its `#!/usr/bin/env python3` line. All hold `API_KEY`, may
/// write `out/` (where a planted module could leave its marker), and
/// require approval.
fn shadowing_victims(f: &Fixture) {
    f.file(
        "lib/victim.py",
        "import csv\nimport io\nimport json\nimport os\nfrom helper import shout\n\ndef run():\n    buf = io.StringIO()\n    csv.writer(buf).writerow(['a', 'b'])\n    return {'csv': buf.getvalue().strip(), 'json': json.dumps([1]), 'helper': shout('ok'), 'key': len(os.environ.get('API_KEY', ''))}\n",
    );
    f.file("lib/helper.py", "def shout(s):\n    return s.upper()\n");
    f.file(
        "scripts/victim_cmd.py",
        "import json\nimport os\nfrom cmdhelper import tag\nprint(json.dumps({'tag': tag(), 'key': len(os.environ.get('API_KEY', ''))}))\n",
    );
    f.file("scripts/cmdhelper.py", "def tag():\n    return 'HELPED'\n");
    f.script(
        "scripts/victim_sh.py",
        "#!/usr/bin/env python3\nimport json\nimport os\nfrom cmdhelper import tag\nprint(json.dumps({'tag': tag(), 'key': len(os.environ.get('API_KEY', ''))}))\n",
    );
    let perms = json!({"network": false, "fs": {"read": ["."], "write": ["out"]},
        "secrets": {"API_KEY": {"type": "string"}}});
    let mut vpy = python_tool(
        "vpy",
        schema(json!({})),
        json!({"module": "victim", "function": "run", "cwd": "lib"}),
        perms.clone(),
    );
    vpy["approval"] = json!({"required": true, "reason": "holds API_KEY"});
    f.tool(&vpy);
    let mut vcmd = command_tool(
        "vcmd",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["scripts/victim_cmd.py"], "cwd": "."}),
        perms.clone(),
    );
    vcmd["approval"] = json!({"required": true, "reason": "holds API_KEY"});
    f.tool(&vcmd);
    let mut vsh = command_tool(
        "vsh",
        schema(json!({})),
        json!({"entrypoint": "./scripts/victim_sh.py", "cwd": "."}),
        perms,
    );
    vsh["approval"] = json!({"required": true, "reason": "holds API_KEY"});
    f.tool(&vsh);
}

/// The victims and the file beside each one's code that shadows an import.
const VICTIMS: [(&str, &str); 3] = [
    ("vpy", "lib/csv.py"),
    ("vcmd", "scripts/json.py"),
    ("vsh", "scripts/json.py"),
];

/// What each victim must return, whatever was planted.
fn assert_victim_output(name: &str, r: &Called) {
    r.assert_ok();
    if name == "vpy" {
        assert_eq!(
            r.output(),
            &json!({"csv": "a,b", "json": "[1]", "helper": "OK", "key": API_KEY.len()}),
            "{r:#?}"
        );
    } else {
        let out: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap();
        assert_eq!(
            out,
            json!({"tag": "HELPED", "key": API_KEY.len()}),
            "{r:#?}"
        );
    }
}

/// Issue 29, part 3: a second tool with `fs.write` over the project
/// plants `csv.py` beside a python tool's module and `scripts/json.py`
/// beside a `python3 scripts/x.py` command tool's script. Neither ever
/// runs inside the victim (no marker, no canary, no reversed secret, the
/// victim's output is right), and the victims' approvals are voided by
/// the plant, never silently kept; the victims' own helper modules beside
/// their code still import.
#[test]
fn a_standard_module_planted_beside_a_tool_never_runs_in_it() {
    require_jail!();
    let f = project();
    shadowing_victims(&f);
    let state = f.state();
    let state_s = state.to_str().unwrap();
    let env = [("API_KEY", API_KEY), ("GLOVEBOX_STATE_DIR", state_s)];
    for (name, _) in VICTIMS {
        let approved = f.glovebox(&["approve", name, "--yes"]);
        assert!(approved.status.success(), "{approved:?}");
        // Legitimate: approved, with its helper beside it.
        assert_victim_output(name, &f.run_env(name, &[], &env));
    }
    let marker = f.root.join("out/PLANTED-RAN");
    f.file("out/stage_csv.py", &planted_module(&marker, "csv"));
    f.file("out/stage_json.py", &planted_module(&marker, "json"));
    let r = sh(
        &f,
        "writer",
        "cp out/stage_csv.py lib/csv.py; cp out/stage_json.py scripts/json.py; echo proof > out/proof; ls lib scripts",
    );
    assert_eq!(
        fs::read_to_string(f.root.join("out/proof")).unwrap(),
        "proof\n",
        "the writer did not run: {r:#?}"
    );
    if namespace_free() {
        // Both directories hold code a tool runs: the write grant is
        // split around it, and no entry can be created beside it.
        assert!(r.mentions("Permission denied"), "{r:#?}");
        assert!(!f.root.join("lib/csv.py").exists(), "{r:#?}");
        assert!(!f.root.join("scripts/json.py").exists(), "{r:#?}");
    } else {
        // Names an import has nothing under in the project are code
        // whoever creates them decides: planted by a call, they are
        // removed after it, and the call fails.
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(!f.root.join("lib/csv.py").exists(), "{r:#?}");
        assert!(!f.root.join("scripts/json.py").exists(), "{r:#?}");
    }
    for (name, _) in VICTIMS {
        assert_victim_output(name, &f.run_env(name, &[], &env));
    }
    assert!(!marker.exists());
    // The same files put there some other way (outside any jail): the
    // rest holds for them too.
    fs::copy(f.root.join("out/stage_csv.py"), f.root.join("lib/csv.py")).unwrap();
    fs::copy(
        f.root.join("out/stage_json.py"),
        f.root.join("scripts/json.py"),
    )
    .unwrap();
    // The probe: plain Python takes both planted modules (the script's
    // directory, or the module's, first on sys.path).
    let probe_marker = f.base.join("probe-marker");
    let probes: [(&str, &[&str]); 2] = [
        (
            "csv",
            &["-c", "import sys; sys.path.insert(0, 'lib'); import csv"],
        ),
        ("json", &["scripts/victim_cmd.py"]),
    ];
    // (`./scripts/victim_sh.py` run by its `#!` line is `python3
    // scripts/victim_sh.py`: the same directory first.)
    for (name, args) in probes {
        let _ = fs::remove_file(&probe_marker);
        let plain = std::process::Command::new("python3")
            .args(args)
            .current_dir(&f.root)
            .env("API_KEY", API_KEY)
            .env("PLANT_MARKER", &probe_marker)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&plain.stdout).contains(&format!("CANARY-{name}-")),
            "the planted {name}.py is not one Python would take: {plain:?}"
        );
        assert!(probe_marker.exists(), "{plain:?}");
    }
    let reversed: String = API_KEY.chars().rev().collect();
    let clean = |r: &Called| {
        assert!(!r.mentions("CANARY"), "the planted module ran: {r:#?}");
        assert!(!r.mentions(&reversed), "the secret came back: {r:#?}");
        assert!(!marker.exists(), "the planted module ran: {r:#?}");
    };
    // The approvals are void: the plant changed what they cover.
    for (name, planted) in VICTIMS {
        let r = f.run_env(name, &[], &env);
        r.assert_failed("approval_required", 1);
        assert!(r.message().contains(planted), "{name}: {r:#?}");
        clean(&r);
    }
    // Approved for this one call by the user, with the plant in place: the
    // standard module is the real one, never the planted file.
    for (name, _) in VICTIMS {
        let r = f.run_env(name, &["--yes"], &env);
        assert_victim_output(name, &r);
        clean(&r);
    }
}

/// A module a python tool imports from the project is code it runs: a
/// second tool with `fs.write` over the project cannot rewrite it (it is
/// read-only in every jail), and a change made outside any jail voids the
/// approval.
#[test]
fn a_module_a_tool_imports_is_protected_and_approved() {
    require_jail!();
    let f = project();
    shadowing_victims(&f);
    let state = f.state();
    let state_s = state.to_str().unwrap();
    let env = [("API_KEY", API_KEY), ("GLOVEBOX_STATE_DIR", state_s)];
    for (name, _) in VICTIMS {
        assert!(f.glovebox(&["approve", name, "--yes"]).status.success());
    }
    let helpers = ["lib/helper.py", "scripts/cmdhelper.py"];
    let before: Vec<String> = helpers
        .iter()
        .map(|h| fs::read_to_string(f.root.join(h)).unwrap())
        .collect();
    let r = sh(
        &f,
        "writer",
        "echo proof > out/proof; echo 'def shout(s): return \"EVIL\"' > lib/helper.py; echo 'def tag(): return \"EVIL\"' > scripts/cmdhelper.py; true",
    );
    assert_eq!(
        fs::read_to_string(f.root.join("out/proof")).unwrap(),
        "proof\n",
        "the writer did not run: {r:#?}"
    );
    assert!(
        r.mentions("Read-only file system") || r.mentions("Permission denied"),
        "{r:#?}"
    );
    for (h, was) in helpers.iter().zip(&before) {
        assert_eq!(&fs::read_to_string(f.root.join(h)).unwrap(), was, "{h}");
    }
    for (name, _) in VICTIMS {
        assert_victim_output(name, &f.run_env(name, &[], &env));
    }
    // Edited by a person: the approval no longer covers what runs.
    f.file("lib/helper.py", "def shout(s):\n    return s.lower()\n");
    f.file("scripts/cmdhelper.py", "def tag():\n    return 'edited'\n");
    for (name, helper) in [
        ("vpy", "lib/helper.py"),
        ("vcmd", "scripts/cmdhelper.py"),
        ("vsh", "scripts/cmdhelper.py"),
    ] {
        let r = f.run_env(name, &[], &env);
        r.assert_failed("approval_required", 1);
        assert!(r.message().contains(&format!("{helper} changed")), "{r:#?}");
    }
}
