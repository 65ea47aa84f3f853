//! The GitHub Action (`action.yml`) and its scripts: the composite steps
//! are run here under bash as a runner would run them, with the inputs in
//! the environment, and their effect is checked (a granted write happens,
//! an ungranted one does not, the step's exit status comes through).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{bin, tempdir, tiny_crate};
use saphyr::LoadableYamlNode;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `ci/action/run.sh` in `dir` with the given inputs.
fn run_step(dir: &Path, inputs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("ci/action/run.sh"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GLOVEBOX_BIN", bin());
    for (k, v) in inputs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn action_yml_names_only_scripts_that_exist() {
    let text = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let docs = saphyr::Yaml::load_from_str(&text).unwrap();
    let doc = &docs[0];
    assert_eq!(doc["runs"]["using"].as_str(), Some("composite"));
    let steps = doc["runs"]["steps"].as_vec().unwrap();
    assert_eq!(steps.len(), 4);
    // The cache of an earlier job's build, keyed by its source.
    let has = |step: &saphyr::Yaml, key: &str| {
        step.as_mapping()
            .unwrap()
            .iter()
            .any(|(k, _)| k.as_str() == Some(key))
    };
    assert!(has(&steps[1], "uses") && !has(&steps[1], "run"));
    assert!(text.contains("uses: actions/cache@v4"));
    assert!(text.contains(
        "key: glovebox-${{ runner.os }}-${{ runner.arch }}-${{ steps.key.outputs.hash }}"
    ));
    for step in steps.iter().filter(|s| has(s, "run")) {
        assert_eq!(step["shell"].as_str(), Some("bash"));
        let run = step["run"].as_str().unwrap();
        let at = run.find("$GITHUB_ACTION_PATH/").unwrap() + "$GITHUB_ACTION_PATH/".len();
        let script = run[at..].split('"').next().unwrap().to_string();
        assert!(repo().join(&script).is_file(), "{script} is missing");
        // Every INPUT_* the script reads is wired from an input.
        let env = step["env"].as_mapping().unwrap();
        for (k, _) in env {
            let k = k.as_str().unwrap();
            if let Some(name) = k.strip_prefix("INPUT_") {
                let input = name.to_lowercase().replace('_', "-");
                assert!(
                    !doc["inputs"][input.as_str()].is_badvalue(),
                    "no input {input}"
                );
            }
        }
    }
    assert_eq!(doc["inputs"]["run"]["required"].as_bool(), Some(true));
}

/// Without `glovebox:`, a binary an earlier job built from the same
/// source (restored by actions/cache under `install.sh --key`) is used as
/// it is: no cargo needed. Another source's key finds nothing there and
/// needs cargo (a clear error without it).
#[test]
fn install_step_uses_the_binary_an_earlier_job_built_from_this_source() {
    let tmp = tempdir();
    let key = Command::new("bash")
        .arg(repo().join("ci/action/install.sh"))
        .arg("--key")
        .env("GLOVEBOX_SRC", repo())
        .output()
        .unwrap();
    assert!(key.status.success());
    let key = String::from_utf8(key.stdout).unwrap().trim().to_string();
    assert_eq!(key.len(), 32, "{key}");
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(cache.join(&key)).unwrap();
    std::fs::copy(bin(), cache.join(&key).join("glovebox")).unwrap();
    let path_file = tmp.path().join("github_path");
    let install = |cache: &Path| {
        Command::new("bash")
            .arg(repo().join("ci/action/install.sh"))
            .env("GLOVEBOX_SRC", repo())
            .env("GLOVEBOX_CACHE", cache)
            .env("RUNNER_TEMP", tmp.path())
            .env("GITHUB_PATH", &path_file)
            // No cargo on this PATH: only the cached binary can do.
            .env("PATH", "/usr/bin:/bin")
            .env_remove("INPUT_GLOVEBOX")
            .output()
            .unwrap()
    };
    let out = install(&cache);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("built earlier from this source"), "{text}");
    let dest = std::fs::read_to_string(&path_file).unwrap();
    let v = Command::new(Path::new(dest.trim()).join("glovebox"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(v.status.success());
    // An empty cache: a build is needed, and cargo is not there.
    let out = install(&tmp.path().join("empty"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo is needed"));
}

#[test]
fn install_step_puts_the_given_binary_on_the_job_path() {
    let tmp = tempdir();
    let path_file = tmp.path().join("github_path");
    let out = Command::new("bash")
        .arg(repo().join("ci/action/install.sh"))
        .env("INPUT_GLOVEBOX", bin())
        .env("RUNNER_TEMP", tmp.path())
        .env("GITHUB_PATH", &path_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dest = std::fs::read_to_string(&path_file).unwrap();
    let installed = Path::new(dest.trim()).join("glovebox");
    assert!(installed.is_file());
    let v = Command::new(&installed).arg("--version").output().unwrap();
    assert!(v.status.success());
    // A missing binary is a clear usage error, not a build attempt.
    let out = Command::new("bash")
        .arg(repo().join("ci/action/install.sh"))
        .env("INPUT_GLOVEBOX", tmp.path().join("nope"))
        .env("RUNNER_TEMP", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an executable file"));
}

#[test]
fn run_step_writes_only_what_it_was_granted_and_keeps_the_exit_status() {
    require_jail!();
    let tmp = tempdir();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(work.join("out")).unwrap();
    std::fs::write(work.join("input.txt"), "step-input\n").unwrap();
    let outside = tmp.path().join("outside.txt");

    // The legitimate step: read the workspace, write into out/.
    let out = run_step(
        &work,
        &[
            (
                "INPUT_RUN",
                "echo STEP-START; cat input.txt > out/copy.txt; echo done",
            ),
            ("INPUT_READ", "."),
            ("INPUT_WRITE", "out\n"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("STEP-START") && stdout.contains("done"));
    assert_eq!(
        std::fs::read_to_string(work.join("out/copy.txt")).unwrap(),
        "step-input\n"
    );

    // The same step may not write beside its grant, nor outside the
    // workspace: the files are not created and the step fails (-e).
    let script = format!(
        "echo STEP-START; echo x > ungranted.txt; echo y > {}",
        outside.display()
    );
    let out = run_step(
        &work,
        &[("INPUT_RUN", script.as_str()), ("INPUT_WRITE", "out")],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("STEP-START"));
    assert!(!out.status.success());
    assert!(!work.join("ungranted.txt").exists());
    assert!(!outside.exists());

    // The step's own exit status comes through.
    let out = run_step(&work, &[("INPUT_RUN", "exit 7")]);
    assert_eq!(out.status.code(), Some(7));

    // A bad network input is a usage error before anything runs.
    let out = run_step(
        &work,
        &[("INPUT_RUN", "touch out/ran"), ("INPUT_NETWORK", "maybe")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!work.join("out/ran").exists());
}

#[test]
fn run_step_has_no_network_unless_asked() {
    require_jail!();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tmp = tempdir();
    let script = format!("echo STEP-START; exec 3<>/dev/tcp/127.0.0.1/{port}");
    let out = run_step(tmp.path(), &[("INPUT_RUN", script.as_str())]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("STEP-START"));
    assert!(!out.status.success());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(listener.accept().is_err(), "the listener got a connection");
}

/// The README's CI example (issue 32, items 8 and 10), read from README.md:
/// its YAML block under "### CI:", each plain `run:` step run by bash and
/// the action step by `ci/action/run.sh` with its `with:` inputs exactly as
/// written, in a fresh small crate (no `target/` yet), against this
/// machine's rustup toolchain (`~/.cargo`, `~/.rustup`), with the PATH a
/// runner has. Its tests must run and pass inside the jail.
#[test]
fn the_readme_ci_example_works_verbatim_with_a_rustup_toolchain() {
    require_jail!();
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    assert!(
        home.join(".rustup").is_dir() && home.join(".cargo/bin/cargo").is_file(),
        "the README's CI example is checked against a rustup toolchain in ~/.rustup and ~/.cargo: install one (https://rustup.rs)"
    );
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme.find("### CI:").expect("the CI section")..];
    let start = section.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let docs = saphyr::Yaml::load_from_str(yaml).unwrap();
    let steps = docs[0].as_vec().expect("a list of steps");
    let dir = tempdir();
    let krate = tiny_crate(
        dir.path(),
        "pub fn two() -> u32 { 2 }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn ran_in_the_jail() {\n        assert_eq!(super::two(), 2);\n    }\n}\n",
    );
    let path = format!("{}/.cargo/bin:/usr/local/bin:/usr/bin:/bin", home.display());
    let mut ran_action = false;
    let get = |m: &'_ saphyr::Yaml<'_>, k: &str| -> Option<String> {
        m.as_mapping()?
            .iter()
            .find(|(key, _)| key.as_str() == Some(k))
            .and_then(|(_, v)| v.as_str().map(str::to_string))
    };
    for step in steps {
        if let Some(run) = get(step, "run") {
            let out = Command::new("bash")
                .args(["-eo", "pipefail", "-c", &run])
                .current_dir(&krate)
                .env_clear()
                .env("PATH", &path)
                .env("HOME", &home)
                .output()
                .unwrap();
            assert!(out.status.success(), "step `{run}`: {out:?}");
            continue;
        }
        assert!(get(step, "uses").is_some(), "a step is run: or uses:");
        let with = step["with"].as_mapping().expect("with:");
        let mut cmd = Command::new("bash");
        cmd.arg(repo().join("ci/action/run.sh"))
            .current_dir(&krate)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("GLOVEBOX_BIN", bin())
            .env("GLOVEBOX_STATE_DIR", dir.path().join("state"));
        for (k, v) in with {
            let k = k.as_str().unwrap();
            if k == "glovebox" {
                continue;
            }
            let v = match (v.as_str(), v.as_integer()) {
                (Some(s), _) => s.to_string(),
                (None, Some(n)) => n.to_string(),
                _ => panic!("input {k}: {v:?}"),
            };
            cmd.env(format!("INPUT_{}", k.to_uppercase().replace('-', "_")), v);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        // The probe: the crate's own test ran, inside the jail.
        assert!(
            stdout.contains("test tests::ran_in_the_jail ... ok"),
            "{stdout}\n{stderr}"
        );
        ran_action = true;
    }
    assert!(ran_action, "the example has no action step");
}

/// `policy: learn`: the step runs observed on a copy (the workspace is
/// unchanged), its output comes through, and the job summary holds the
/// inputs that keep it working; with them, `policy: enforce` is green.
#[test]
fn policy_learn_writes_the_proposed_inputs_to_the_job_summary() {
    require_jail!();
    let tmp = tempdir();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::create_dir_all(work.join("docs")).unwrap();
    std::fs::write(work.join("src/input.txt"), "step-input\n").unwrap();
    std::fs::write(work.join("docs/unread.txt"), "never read\n").unwrap();
    let summary = tmp.path().join("summary.md");
    let step = "echo STEP-START; mkdir -p out; cat src/input.txt > out/copy.txt; echo done";
    let out = run_step(
        &work,
        &[
            ("INPUT_RUN", step),
            ("INPUT_POLICY", "learn"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("STEP-START") && stdout.contains("done"),
        "{stdout}"
    );
    assert!(!work.join("out").exists(), "learning changed the workspace");
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.contains("policy: enforce"), "{text}");
    assert!(text.contains("    read: |\n      src\n"), "{text}");
    assert!(text.contains("    write: |\n      out\n"), "{text}");
    assert!(!text.contains("docs"), "{text}");
    // The proposed inputs, enforced.
    let out = run_step(
        &work,
        &[
            ("INPUT_RUN", step),
            ("INPUT_READ", "src"),
            ("INPUT_WRITE", "out"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(work.join("out/copy.txt")).unwrap(),
        "step-input\n"
    );
    // A bad policy is a usage error before anything runs.
    let out = run_step(
        &work,
        &[("INPUT_RUN", "touch ran"), ("INPUT_POLICY", "maybe")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!work.join("ran").exists());
}
