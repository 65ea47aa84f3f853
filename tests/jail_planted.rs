//! Invariant 13, its second half: nothing planted during a call takes
//! effect, and removal is never best-effort. A tool granted
//! `fs.write: ["."]` plants a root `tools.json`, a tool directory, and the
//! script another tool would run (`work/later.sh`), then sleeps; while it
//! runs, `glovebox list` and `glovebox run` of the same project never see
//! them, and after it they are gone. A planter that closes the project root
//! (`chmod 555 .`, `chmod 000 .`) is undone all the same, and its call's
//! audit result line is written; one whose plant cannot be removed fails
//! its call and leaves the project refused, naming the file, until it is
//! removed and `glovebox untaint` run. Projects and repositories nested
//! under a write grant are protected like the root's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, namespace_free, wait_until};
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

/// A project with `writer` (`fs.write: ["."]`) and `later`, which runs
/// `work/later.sh`, a script that does not exist yet.
fn project() -> Fixture {
    let f = Fixture::new();
    f.tool(&shell_tool("writer", write_root()));
    f.tool(&command_tool(
        "later",
        schema(json!({})),
        json!({"entrypoint": "sh", "args": ["work/later.sh"], "cwd": "."}),
        read_root(),
    ));
    fs::create_dir_all(f.root.join("out")).unwrap();
    fs::create_dir_all(f.root.join("work")).unwrap();
    for d in [&f.base, &f.root] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    f
}

/// The planted root `tools.json` (its tool prints PLANTED-RAN).
fn tools_json() -> String {
    json!({"tools": [{"name": "planted", "description": "x",
        "command": ["/bin/echo", "\"PLANTED-RAN\""]}]})
    .to_string()
}

/// A script planting `tools.json`, `.glee/tools/evil/tool.yml` and
/// `work/later.sh`, each on its own (one refused does not stop the others).
fn plant() -> String {
    let evil = json!({"name": "evil", "description": "x", "kind": "command", "version": 1,
        "inputs": {"schema": {"type": "object"}}, "outputs": {"format": "text"},
        "exec": {"command": {"entrypoint": "sh", "args": ["-c", "echo PLANTED-RAN"], "cwd": "."}},
        "permissions": {"network": false}})
    .to_string();
    format!(
        "printf '%s' '{}' > tools.json; \
         (mkdir -p .glee/tools/evil && printf '%s' '{evil}' > .glee/tools/evil/tool.yml); \
         printf 'echo PLANTED-RAN\\n' > work/later.sh; ",
        tools_json()
    )
}

fn params(script: &str) -> String {
    json!({ "script": script }).to_string()
}

/// `glovebox run writer` with `script`, started in the background with the
/// fixture's state directory.
fn spawn_writer(f: &Fixture, script: &str) -> Child {
    Command::new(bin())
        .args([
            "run",
            "writer",
            "--json",
            "--params",
            &params(script),
            "--root",
        ])
        .arg(&f.root)
        .env("GLOVEBOX_STATE_DIR", f.state())
        .current_dir(&f.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn outcome(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no json ({e}): {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The names `glovebox list --json` shows, or its error text.
fn listed(f: &Fixture) -> Result<Vec<String>, String> {
    let out = f.glovebox(&["list", "--json"]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    Ok(v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect())
}

fn gone(p: &Path) -> bool {
    p.symlink_metadata().is_err()
}

#[test]
fn planted_names_are_invisible_while_the_call_runs_and_gone_after() {
    require_jail!();
    let f = project();
    // The probe: the planted tools.json, written by a person, is a tool
    // that runs.
    fs::write(f.root.join("tools.json"), tools_json()).unwrap();
    assert!(listed(&f).unwrap().contains(&"planted".to_string()));
    let r = f.run_audited("planted", &["--yes"]);
    assert!(r.mentions("PLANTED-RAN"), "{r:#?}");
    fs::remove_file(f.root.join("tools.json")).unwrap();
    let ready = f.root.join("out/ready");
    let mut child = spawn_writer(
        &f,
        &format!("{} echo up > out/ready; sleep 4; echo DONE", plant()),
    );
    assert!(
        wait_until(Duration::from_secs(20), || ready.exists()),
        "the planter never got to its plants"
    );
    // The probe: the plants are really there during the window (without a
    // mount namespace the root gains no entry, so only the script).
    let later = f.root.join("work/later.sh");
    assert!(later.exists(), "the script was not planted");
    if !namespace_free() {
        assert!(
            f.root.join("tools.json").exists(),
            "tools.json was not planted"
        );
    } else {
        assert!(gone(&f.root.join("tools.json")));
    }
    let (mut rounds, started) = (0, Instant::now());
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(30) {
        let shown = listed(&f).unwrap();
        assert!(shown.contains(&"writer".to_string()), "{shown:?}");
        assert!(
            !shown.iter().any(|n| n == "planted" || n == "evil"),
            "a planted tool is listed while its call runs: {shown:?}"
        );
        for name in ["planted", "evil"] {
            let r = f.run_audited(name, &[]);
            assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
            r.assert_failed("tool_not_found", 2);
        }
        let r = f.run_audited("later", &[]);
        assert!(!r.mentions("PLANTED-RAN"), "the planted script ran: {r:#?}");
        assert_eq!(r.json["ok"], json!(false), "{r:#?}");
        rounds += 1;
    }
    assert!(rounds >= 2, "too few rounds in the window: {rounds}");
    let o = outcome(child);
    assert_eq!(o["ok"], json!(false), "{o}");
    assert_eq!(o["error"]["kind"], "permission_exceeds_ceiling", "{o}");
    assert!(
        o["error"]["message"]
            .as_str()
            .unwrap()
            .contains("work/later.sh"),
        "{o}"
    );
    for name in ["tools.json", ".glee/tools/evil", "work/later.sh"] {
        assert!(gone(&f.root.join(name)), "{name} is still there");
    }
    assert!(!listed(&f)
        .unwrap()
        .iter()
        .any(|n| n == "planted" || n == "evil"));
    let r = f.run_audited("later", &[]);
    assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
}

#[test]
fn a_planter_that_closes_the_root_is_undone_and_its_call_recorded() {
    require_jail!();
    for close in ["chmod 555 .", "chmod 000 ."] {
        let f = project();
        let r = f.run_audited(
            "writer",
            &[
                "--params",
                &params(&format!("{} chmod 555 work; {close}; echo DONE", plant())),
            ],
        );
        // Open again (its owner may), to look.
        fs::set_permissions(&f.root, fs::Permissions::from_mode(0o755)).unwrap();
        let work = fs::metadata(f.root.join("work"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(work, 0o555, "{close}: the tool's mode is put back: {r:#?}");
        assert!(
            !gone(&f.root.join("out")),
            "{close}: the root cannot be read: {r:#?}"
        );
        assert_eq!(r.json["ok"], json!(false), "{close}: {r:#?}");
        r.assert_failed("permission_exceeds_ceiling", 1);
        assert!(r.message().contains("removed it"), "{close}: {r:#?}");
        for name in ["tools.json", ".glee/tools/evil", "work/later.sh"] {
            assert!(gone(&f.root.join(name)), "{close}: {name} is still there");
        }
        // The call's result line is in the log, after its intent.
        let log = f.audit_log();
        let last = log.lines().last().unwrap_or("");
        assert!(
            last.contains("name=writer") && !last.contains("TOOL_STARTED"),
            "{close}: no result line for the call: {log}"
        );
        // The planted tools never run.
        f.run_audited("planted", &[])
            .assert_failed("tool_not_found", 2);
        let later = f.run_audited("later", &[]);
        assert!(!later.mentions("PLANTED-RAN"), "{close}: {later:#?}");
    }
}

/// `mkdir -p NAME/d/d/…` deeper than glovebox removes.
fn deep(name: &str) -> String {
    format!("mkdir -p {name}/{}", vec!["d"; 80].join("/"))
}

#[test]
fn a_plant_that_cannot_be_removed_fails_the_call_and_taints_the_project() {
    require_jail!();
    let f = project();
    let r = f.run_audited(
        "writer",
        &[
            "--params",
            &params(&format!(
                "{}; chmod 555 work; chmod 555 .; echo DONE",
                deep("work/later.sh")
            )),
        ],
    );
    fs::set_permissions(&f.root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(f.root.join("work"), fs::Permissions::from_mode(0o755)).unwrap();
    r.assert_failed("permission_exceeds_ceiling", 1);
    assert!(r.message().contains("work/later.sh"), "{r:#?}");
    assert!(r.message().contains("glovebox untaint"), "{r:#?}");
    assert_eq!(r.details()["tainted"], json!(true), "{r:#?}");
    assert!(
        f.root.join("work/later.sh").is_dir(),
        "the probe: it is still there"
    );
    // Every loader refuses the project, naming the file and the way out.
    let e = listed(&f).unwrap_err();
    assert!(
        e.contains("work/later.sh") && e.contains("glovebox untaint"),
        "{e}"
    );
    for name in ["writer", "later"] {
        let c = f.run_audited(name, &[]);
        assert_eq!(c.json["ok"], json!(false), "{c:#?}");
        assert!(
            c.mentions("work/later.sh") && c.mentions("untaint"),
            "{c:#?}"
        );
    }
    for cmd in [&["show", "writer"][..], &["explain", "writer"][..]] {
        let out = f.glovebox(cmd);
        assert!(!out.status.success(), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("work/later.sh"),
            "{cmd:?}"
        );
    }
    // `untaint` refuses while the file is there, and clears once it is not.
    let out = f.glovebox(&["untaint"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("work/later.sh"));
    assert!(listed(&f).is_err());
    fs::remove_dir_all(f.root.join("work/later.sh")).unwrap();
    let out = f.glovebox(&["untaint"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listed(&f).unwrap().contains(&"writer".to_string()));
    let ok = f.run_audited(
        "writer",
        &["--params", &params("echo fine > out/x && echo OK")],
    );
    ok.assert_ok();
}

#[test]
fn a_killed_supervisors_plants_are_removed_by_the_next_loader() {
    require_jail!();
    let f = project();
    let ready = f.root.join("out/ready");
    let mut child = spawn_writer(&f, &format!("{} echo up > out/ready; sleep 60", plant()));
    assert!(wait_until(Duration::from_secs(20), || ready.exists()));
    assert!(f.root.join("work/later.sh").exists(), "the probe: planted");
    // The supervisor dies without cleaning up (its jail dies with it).
    child.kill().unwrap();
    child.wait().unwrap();
    let shown = listed(&f).unwrap();
    assert!(
        !shown.iter().any(|n| n == "planted" || n == "evil"),
        "{shown:?}"
    );
    for name in ["tools.json", "work/later.sh"] {
        assert!(gone(&f.root.join(name)), "{name} is still there");
    }
    let r = f.run_audited("later", &[]);
    assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
}

#[test]
fn projects_and_repositories_nested_under_a_write_grant_keep_their_control_files() {
    require_jail!();
    let f = project();
    let b_tool = f.file(
        "sub/b/.glee/tools/x/tool.yml",
        &serde_json::to_string_pretty(&command_tool(
            "x",
            schema(json!({})),
            json!({"entrypoint": "sh", "args": ["-c", "echo B-ORIGINAL"], "cwd": "."}),
            read_root(),
        ))
        .unwrap(),
    );
    let config = f.file("vendor/lib/.git/config", "[core]\n\tbare = false\n");
    fs::create_dir_all(f.root.join("vendor/lib/.git/hooks")).unwrap();
    f.file("sub/b/data.txt", "data\n");
    f.file("vendor/lib/file.txt", "file\n");
    let before = (fs::read(&b_tool).unwrap(), fs::read(&config).unwrap());
    let attacks = [
        "echo '# changed' >> sub/b/.glee/tools/x/tool.yml",
        "printf 'name: x\\n' > sub/b/.glee/tools/x/tool.yml",
        "rm -rf sub/b/.glee/tools/x",
        "mkdir -p sub/b/.glee/tools/evil && echo x > sub/b/.glee/tools/evil/tool.yml",
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> vendor/lib/.git/config",
        "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > vendor/lib/.git/hooks/pre-commit",
        "mv vendor/lib/.git vendor/lib/moved",
        "rm -rf vendor/lib/.git",
    ];
    for a in attacks {
        let r = f.run_audited(
            "writer",
            &[
                "--params",
                &params(&format!("echo RAN; ({a}) && echo ESCAPED; true")),
            ],
        );
        r.assert_ok();
        assert!(r.text().contains("RAN"), "{a}: {r:#?}");
        assert!(!r.mentions("ESCAPED"), "{a}: {r:#?}");
    }
    assert_eq!(
        (fs::read(&b_tool).unwrap(), fs::read(&config).unwrap()),
        before
    );
    assert!(!f.root.join("sub/b/.glee/tools/evil").exists());
    assert!(!f.root.join("vendor/lib/.git/hooks/pre-commit").exists());
    // The same tool still writes elsewhere in its grant, nested
    // directories' ordinary files included.
    let ok = f.run_audited(
        "writer",
        &["--params", &params("echo w > out/x && echo more >> sub/b/data.txt && echo more >> vendor/lib/file.txt && echo OK")],
    );
    ok.assert_ok();
    assert!(ok.text().contains("OK"), "{ok:#?}");
    assert_eq!(
        fs::read_to_string(f.root.join("sub/b/data.txt")).unwrap(),
        "data\nmore\n"
    );
    assert_eq!(
        fs::read_to_string(f.root.join("vendor/lib/file.txt")).unwrap(),
        "file\nmore\n"
    );
    // A manifest naming the nested .git may write it.
    f.tool(&shell_tool(
        "vendorgit",
        json!({"network": false, "fs": {"read": ["."], "write": [".", "vendor/lib/.git"]}}),
    ));
    let r = f.run_audited(
        "vendorgit",
        &[
            "--params",
            &params("echo '# ok' >> vendor/lib/.git/config && echo GIT-WROTE"),
        ],
    );
    r.assert_ok();
    assert!(r.text().contains("GIT-WROTE"), "{r:#?}");
    assert!(fs::read_to_string(&config).unwrap().ends_with("# ok\n"));
}

#[test]
fn a_second_call_cannot_keep_what_the_first_planted() {
    require_jail!();
    let f = project();
    let first_up = f.root.join("out/first");
    let first = spawn_writer(&f, &format!("{} echo up > out/first; sleep 3", plant()));
    assert!(wait_until(Duration::from_secs(20), || first_up.exists()));
    // The second call starts while the plants are there, waits for the
    // first call's clean-up, and plants them again.
    let second = spawn_writer(
        &f,
        &format!(
            "echo up > out/second; i=0; while [ -e work/later.sh ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
             echo gone > out/saw-gone; {} echo replanted > out/second-done; sleep 1",
            plant()
        ),
    );
    let first = outcome(first);
    assert_eq!(first["ok"], json!(false), "{first}");
    let second = outcome(second);
    // The probe: the second call saw the clean-up and planted again.
    assert!(f.root.join("out/saw-gone").exists(), "{second}");
    assert!(f.root.join("out/second-done").exists(), "{second}");
    for name in ["tools.json", ".glee/tools/evil", "work/later.sh"] {
        assert!(gone(&f.root.join(name)), "{name} is still there: {second}");
    }
    assert!(!listed(&f)
        .unwrap()
        .iter()
        .any(|n| n == "planted" || n == "evil"));
    let r = f.run_audited("later", &[]);
    assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
}

#[test]
fn a_served_project_never_serves_what_a_running_call_planted() {
    require_jail!();
    let f = project();
    let state = f.state();
    let mut s = servekit::Served::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &[],
    );
    let names = |s: &servekit::Served| -> Vec<String> {
        let list = s.get("/api/v1/tools");
        assert_eq!(list.status, 200, "{list:?}");
        list.json
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(&s).contains(&"later".to_string()));
    let ready = f.root.join("out/ready");
    let mut child = spawn_writer(&f, &format!("{} echo up > out/ready; sleep 4", plant()));
    assert!(wait_until(Duration::from_secs(20), || ready.exists()));
    assert!(f.root.join("work/later.sh").exists(), "the probe: planted");
    let (mut rounds, started) = (0, Instant::now());
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(30) {
        // A reload now (the watcher's own may come at any time too).
        let d = s.post("/api/v1/tools/discover", &json!({}));
        assert!(d.status < 500, "{d:?}");
        let shown = names(&s);
        assert!(
            !shown.iter().any(|n| n == "planted" || n == "evil"),
            "served while its call runs: {shown:?}"
        );
        for name in ["planted", "evil"] {
            let r = s.post(&format!("/api/v1/tools/{name}/invoke"), &json!({}));
            assert!(!r.body.contains("PLANTED-RAN"), "{r:?}");
            assert_eq!(r.kind(), "tool_not_found", "{r:?}");
        }
        let r = s.post("/api/v1/tools/later/invoke", &json!({}));
        assert!(
            !r.body.contains("PLANTED-RAN"),
            "the planted script ran: {r:?}"
        );
        assert_eq!(r.json["ok"], json!(false), "{r:?}");
        rounds += 1;
    }
    assert!(rounds >= 2, "too few rounds in the window: {rounds}");
    assert_eq!(outcome(child)["ok"], json!(false));
    let d = s.post("/api/v1/tools/discover", &json!({}));
    assert!(d.status < 500, "{d:?}");
    assert!(!names(&s).iter().any(|n| n == "planted" || n == "evil"));
    let r = s.post("/api/v1/tools/later/invoke", &json!({}));
    assert!(!r.body.contains("PLANTED-RAN"), "{r:?}");
    s.terminate();
}

#[test]
fn a_tools_json_found_in_the_root_runs_only_once_approved() {
    require_jail!();
    let f = project();
    fs::write(f.root.join("tools.json"), tools_json()).unwrap();
    // Found in the root: it waits for a person, whoever wrote it.
    let r = f.run_audited("planted", &[]);
    assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
    r.assert_failed("approval_required", 1);
    assert!(r.message().contains("glovebox approve planted"), "{r:#?}");
    let out = f.glovebox(&["approve", "planted", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = f.run_audited("planted", &[]);
    r.assert_ok();
    assert!(r.mentions("PLANTED-RAN"), "{r:#?}");
    // Changed (or replaced) since the approval: not trusted again.
    let changed = tools_json().replace("\"description\":\"x\"", "\"description\":\"y\"");
    assert_ne!(changed, tools_json());
    fs::write(f.root.join("tools.json"), changed).unwrap();
    let r = f.run_audited("planted", &[]);
    assert!(!r.mentions("PLANTED-RAN"), "{r:#?}");
    r.assert_failed("approval_required", 1);
    assert!(r.message().contains("tools.json"), "{r:#?}");
    // Named by the user (`--tools-json`), it is theirs: no approval asked.
    let out = Command::new(bin())
        .arg("--tools-json")
        .arg(f.root.join("tools.json"))
        .args(["run", "planted", "--json"])
        .env("GLOVEBOX_STATE_DIR", f.state())
        .current_dir(&f.cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["ok"], json!(true), "{o}");
}

/// `glovebox run NAME --json`, started in the background with the
/// fixture's state directory.
fn spawn_run(f: &Fixture, name: &str) -> Child {
    Command::new(bin())
        .args(["run", name, "--json", "--root"])
        .arg(&f.root)
        .env("GLOVEBOX_STATE_DIR", f.state())
        .current_dir(&f.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The race the records alone left open: a call that starts *before* a
/// second call plants the code it runs passed its check while the name was
/// absent and nobody's record listed it; the planter's clean-up comes at
/// the end of the planter's own call, too late for the victim, which ran
/// the plant with its own grants. The victims: `later` (`sh
/// work/later.sh`), `latepy` (a python tool whose module `latermod` is not
/// there yet) and `latem` (`python3 -m latecmd`, not there yet). The
/// writer plants `work/later.sh`, the package `work/latermod/` and
/// `work/latecmd.py` at once and sleeps; each round starts a victim, then
/// the writer 0–40 ms later. The planted code prints PLANTED-RAN and
/// writes `out/PWN` with the victim's write grant: neither ever happens
/// (on main the python victims ran it in the first rounds, and a planted
/// package or `-m` module was never removed), every plant is gone after
/// each round, each writer's own outcome proves it planted all three
/// (glovebox removed them), and a probe first shows the same files, put
/// there before the call, run.
#[test]
fn a_call_started_before_a_plant_never_runs_it() {
    require_jail!();
    let f = project();
    let grants = json!({"network": false, "fs": {"read": ["work"], "write": ["out"]}});
    f.tool(&python_tool(
        "latepy",
        schema(json!({})),
        json!({"module": "latermod", "function": "run", "cwd": "work"}),
        grants.clone(),
    ));
    f.tool(&command_tool(
        "latem",
        schema(json!({})),
        json!({"entrypoint": "python3", "args": ["-m", "latecmd"], "cwd": "work"}),
        grants,
    ));
    let script = "echo PLANTED-RAN\n";
    let pwn_py = "import os\nopen(os.path.join(os.getcwd(), '..', 'out', 'PWN'), 'w').write('x')\n";
    let module = format!("{pwn_py}\ndef run():\n    return 'PLANTED-RAN'\n");
    let main = format!("{pwn_py}print('PLANTED-RAN')\n");
    let pwn = f.root.join("out/PWN");
    let plants = ["work/later.sh", "work/latermod", "work/latecmd.py"];
    let put = |f: &Fixture| {
        fs::write(f.root.join("work/later.sh"), script).unwrap();
        fs::create_dir_all(f.root.join("work/latermod")).unwrap();
        fs::write(f.root.join("work/latermod/__init__.py"), &module).unwrap();
        fs::write(f.root.join("work/latecmd.py"), &main).unwrap();
    };
    // The probe: there before the call, each runs (and the python ones
    // write their marker).
    put(&f);
    for name in ["later", "latepy", "latem"] {
        let r = f.run_audited(name, &[]);
        r.assert_ok();
        assert!(r.mentions("PLANTED-RAN"), "{r:#?}");
        if name != "later" {
            assert!(pwn.exists(), "{name}: the probe wrote its marker");
            fs::remove_file(&pwn).unwrap();
        }
    }
    fs::remove_file(f.root.join("work/later.sh")).unwrap();
    fs::remove_dir_all(f.root.join("work/latermod")).unwrap();
    fs::remove_file(f.root.join("work/latecmd.py")).unwrap();
    let plant = format!(
        "printf '%s' {} > work/later.sh; mkdir work/latermod; printf '%s' {} > work/latermod/__init__.py; printf '%s' {} > work/latecmd.py; sleep 0.3",
        shell_quote(script),
        shell_quote(&module),
        shell_quote(&main)
    );
    let rounds = 45;
    let mut planted = 0;
    for i in 0..rounds {
        let name = ["latepy", "latem", "later"][i % 3];
        let victim = spawn_run(&f, name);
        std::thread::sleep(Duration::from_millis(10 * (i as u64 % 5)));
        let writer = outcome(spawn_writer(&f, &plant));
        let removed = writer["error"]["details"]["removed"].to_string();
        if plants.iter().all(|p| removed.contains(p)) {
            planted += 1;
        }
        let v = outcome(victim);
        assert!(
            !v.to_string().contains("PLANTED-RAN"),
            "round {i}: {name} ran the plant: {v}"
        );
        assert!(!pwn.exists(), "round {i}: {name} ran the plant: {v}");
        for p in plants {
            assert!(
                gone(&f.root.join(p)),
                "round {i}: {p} is still there: {writer}"
            );
        }
    }
    assert_eq!(planted, rounds, "every writer planted all three names");
}

/// `s` as one single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// An optional import (`try: import fastjsonx`, a name neither the
/// standard library, the installed packages nor the project has) is code
/// whoever creates it decides. A second call with a write grant over the
/// tool's directory plants `lib/fastjsonx.py` and the package
/// `lib/fastpkg/`, which the victim imports lazily, after a sleep: planted
/// while the victim runs, or by a call that has ended, neither ever runs
/// in it (on the previous code the plant stayed after the planter's call
/// and ran in every later call, with the victim's grants). Without a mount
/// namespace the writer cannot create them at all (its grant is split
/// around the module). A probe first shows the same files, put there by
/// the test, run in the victim.
#[test]
fn an_optional_import_planted_by_another_call_never_runs() {
    require_jail!();
    let f = project();
    f.file(
        "lib/victim.py",
        "import time\n\ndef run():\n    time.sleep(0.3)\n    found = []\n    try:\n        import fastjsonx\n        found.append('fastjsonx')\n    except ImportError:\n        pass\n    try:\n        from fastpkg import speed\n        found.append('fastpkg')\n    except ImportError:\n        pass\n    return {'found': found}\n",
    );
    f.tool(&python_tool(
        "optpy",
        schema(json!({})),
        json!({"module": "victim", "function": "run", "cwd": "lib"}),
        json!({"network": false, "fs": {"read": ["lib"], "write": ["out"]}}),
    ));
    let pwn = f.root.join("out/PWN");
    let body = "import os\nopen(os.path.join(os.getcwd(), '..', 'out', 'PWN'), 'w').write('x')\nprint('PLANTED-RAN')\n";
    let plants = ["lib/fastjsonx.py", "lib/fastpkg"];
    // The probe: put there before the call, both run.
    f.file("lib/fastjsonx.py", body);
    f.file("lib/fastpkg/__init__.py", &format!("{body}speed = 1\n"));
    let r = f.run_audited("optpy", &[]);
    r.assert_ok();
    assert_eq!(
        r.output(),
        &json!({"found": ["fastjsonx", "fastpkg"]}),
        "{r:#?}"
    );
    assert!(pwn.exists(), "the probe wrote its marker");
    fs::remove_file(&pwn).unwrap();
    fs::remove_file(f.root.join("lib/fastjsonx.py")).unwrap();
    fs::remove_dir_all(f.root.join("lib/fastpkg")).unwrap();
    let r = f.run_audited("optpy", &[]);
    assert_eq!(r.output(), &json!({"found": []}), "{r:#?}");

    let plant = |sleep: &str| {
        format!(
            "printf '%s' {q} > lib/fastjsonx.py; mkdir lib/fastpkg; printf '%s' {p} > lib/fastpkg/__init__.py; {sleep}",
            q = shell_quote(body),
            p = shell_quote(&format!("{body}speed = 1\n"))
        )
    };
    let clean = |what: &str, v: &Value, writer: &Value| {
        assert!(!v.to_string().contains("PLANTED-RAN"), "{what}: {v}");
        if v["ok"] == json!(true) {
            assert_eq!(v["output"], json!({"found": []}), "{what}: {v}");
        } else {
            // Started once the plant was there: refused until the
            // planter's call has ended.
            assert!(
                v["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("a call still running may have created")),
                "{what}: {v}"
            );
        }
        assert!(!pwn.exists(), "{what}: the plant ran: {v}");
        if namespace_free() {
            // No mount namespace: the write grant is split around the
            // tool's module, and no entry can be created beside it.
            assert!(
                writer.to_string().contains("Permission denied"),
                "{what}: {writer}"
            );
        } else {
            let removed = writer["error"]["details"]["removed"].to_string();
            assert!(
                plants.iter().all(|p| removed.contains(p)),
                "{what}: the writer planted: {writer}"
            );
        }
        for p in plants {
            assert!(gone(&f.root.join(p)), "{what}: {p} is still there");
        }
    };
    // Planted while the victim runs: the writer starts 0–125 ms after
    // the victim and plants at once, the victim imports 300 ms after it
    // starts, so a victim that was not refused imported with the plant
    // there.
    let mut ran = 0;
    for i in 0..12u64 {
        let victim = spawn_run(&f, "optpy");
        std::thread::sleep(Duration::from_millis(25 * (i % 6)));
        let writer = outcome(spawn_writer(&f, &plant("sleep 0.5")));
        let v = outcome(victim);
        clean(&format!("round {i}"), &v, &writer);
        if v["ok"] == json!(true) {
            ran += 1;
        }
    }
    assert!(ran > 0, "no victim ran while the plant was there");
    // Planted by a call that has ended.
    let writer = outcome(spawn_writer(&f, &plant("")));
    let v = f.run_audited("optpy", &[]);
    clean("after the planter", &v.json, &writer);
}
