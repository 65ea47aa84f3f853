//! Helpers for the `glovebox run` integration tests: a throwaway project
//! (tools written by the test as JSON, which is YAML too), and one call of
//! the real binary with `--root`, from a separate working directory, with
//! the environment the test chooses.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::common::{bin, tempdir};

/// A project under a temp dir: `root` holds `.glee/`, `cwd` is where
/// glovebox is started from, `outside` is a sibling no tool is granted.
pub struct Fixture {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub cwd: PathBuf,
    pub outside: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempdir();
        let base = tmp.path().to_path_buf();
        let root = base.join("project");
        let cwd = base.join("cwd");
        let outside = base.join("outside");
        for d in [&root, &cwd, &outside] {
            fs::create_dir_all(d).unwrap();
        }
        fs::create_dir_all(root.join(".glee/tools")).unwrap();
        Fixture {
            _tmp: tmp,
            base,
            root,
            cwd,
            outside,
        }
    }

    /// Writes `.glee/tools/<name>/tool.yml` from a manifest value.
    pub fn tool(&self, manifest: &Value) -> &Self {
        let name = manifest["name"].as_str().expect("manifest has a name");
        let dir = self.root.join(".glee/tools").join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("tool.yml"),
            serde_json::to_string_pretty(manifest).unwrap(),
        )
        .unwrap();
        self
    }

    /// Writes `.glee/config.yml`.
    pub fn config(&self, config: &Value) -> &Self {
        fs::write(
            self.root.join(".glee/config.yml"),
            serde_json::to_string_pretty(config).unwrap(),
        )
        .unwrap();
        self
    }

    /// Writes a file under the root.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, text).unwrap();
        p
    }

    /// Writes an executable script under the root.
    pub fn script(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.file(rel, text);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// The fixture's own glovebox state directory (`BASE/state`): every
    /// call is audited, and refused without a writable state, whoever runs
    /// the tests (`nobody` in CI has no home).
    pub fn state(&self) -> PathBuf {
        self.base.join("state")
    }

    /// `glovebox --root ROOT ARGS…` from the fixture's cwd, with its state
    /// directory and no stdin.
    pub fn glovebox(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .arg("--root")
            .arg(&self.root)
            .args(args)
            .env("GLOVEBOX_STATE_DIR", self.state())
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// [`Fixture::run`] with the fixture's state directory.
    pub fn run_audited(&self, name: &str, args: &[&str]) -> Called {
        let state = self.state();
        self.run_env(
            name,
            args,
            &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        )
    }

    /// The project's audit log (empty when there is none).
    pub fn audit_log(&self) -> String {
        fs::read_to_string(self.root.join(".glee/audit/tools.log")).unwrap_or_default()
    }

    /// `glovebox run NAME ARGS… --json --root ROOT` with no extra env.
    pub fn run(&self, name: &str, args: &[&str]) -> Called {
        self.run_env(name, args, &[])
    }

    /// `glovebox run NAME ARGS… --json --root ROOT` with `envs` set on
    /// glovebox.
    pub fn run_env(&self, name: &str, args: &[&str], envs: &[(&str, &str)]) -> Called {
        call_glovebox(&self.root, &self.cwd, name, args, envs)
    }

    /// Every path under the base dir whose file name is `name`.
    pub fn find_named(&self, name: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        walk(&self.base, &mut |p| {
            if p.file_name().and_then(|n| n.to_str()) == Some(name) {
                found.push(p.to_path_buf());
            }
        });
        found
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        f(&p);
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            walk(&p, f);
        }
    }
}

/// Runs `glovebox run NAME ARGS… --json --root ROOT` from `cwd`.
pub fn call_glovebox(
    root: &Path,
    cwd: &Path,
    name: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Called {
    let mut c = Command::new(bin());
    c.arg("run")
        .arg(name)
        .args(args)
        .arg("--json")
        .arg("--root")
        .arg(root)
        .current_dir(cwd)
        .stdin(Stdio::null());
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run glovebox");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let glovebox_stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("glovebox printed no json ({e}): stdout={stdout:?} stderr={glovebox_stderr:?}")
    });
    assert_eq!(
        stdout.trim_end().lines().count(),
        1,
        "run --json prints exactly one line: {stdout:?}"
    );
    Called {
        code: out.status.code(),
        json,
        glovebox_stderr,
    }
}

/// The result of one `glovebox run --json`.
#[derive(Debug)]
pub struct Called {
    /// glovebox's exit status.
    pub code: Option<i32>,
    /// The Outcome it printed.
    pub json: Value,
    /// glovebox's own stderr.
    pub glovebox_stderr: String,
}

impl Called {
    /// `error.kind`, or "" on success.
    pub fn kind(&self) -> &str {
        self.json["error"]["kind"].as_str().unwrap_or("")
    }

    pub fn details(&self) -> &Value {
        &self.json["error"]["details"]
    }

    pub fn message(&self) -> &str {
        self.json["error"]["message"].as_str().unwrap_or("")
    }

    pub fn output(&self) -> &Value {
        &self.json["output"]
    }

    /// The output as a string (panics when it is not one).
    pub fn text(&self) -> &str {
        self.json["output"]
            .as_str()
            .unwrap_or_else(|| panic!("output is not a string: {self:#?}"))
    }

    /// The tool's stderr as returned in the Outcome.
    pub fn stderr(&self) -> &str {
        self.json["stderr"].as_str().unwrap_or("")
    }

    /// Asserts success (ok true, exit 0) and returns self.
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(self.json["ok"], json!(true), "call failed: {self:#?}");
        assert_eq!(self.code, Some(0), "{self:#?}");
        self
    }

    /// Asserts a failure of `kind` with CLI exit status `code`.
    pub fn assert_failed(&self, kind: &str, code: i32) -> &Self {
        assert_eq!(self.json["ok"], json!(false), "call succeeded: {self:#?}");
        assert_eq!(self.kind(), kind, "{self:#?}");
        assert_eq!(self.code, Some(code), "{self:#?}");
        assert_eq!(self.json["output"], Value::Null, "{self:#?}");
        self
    }

    /// True when `needle` occurs anywhere in the Outcome or glovebox's
    /// own stderr.
    pub fn mentions(&self, needle: &str) -> bool {
        self.json.to_string().contains(needle)
            || self.glovebox_stderr.contains(needle)
            || json_text_contains(&self.json, needle)
    }

    /// The first run of 8 consecutive characters of `secret` that appears
    /// anywhere in what came back (serialized or decoded), if any.
    pub fn piece_of(&self, secret: &str) -> Option<String> {
        let chars: Vec<char> = secret.chars().collect();
        chars
            .windows(8)
            .map(|w| w.iter().collect::<String>())
            .find(|piece| self.mentions(piece))
    }
}

/// Looks inside every string of `v` (the serialized form escapes some
/// characters).
fn json_text_contains(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(a) => a.iter().any(|x| json_text_contains(x, needle)),
        Value::Object(m) => m
            .iter()
            .any(|(k, x)| k.contains(needle) || json_text_contains(x, needle)),
        _ => false,
    }
}

/// An object schema with these properties (no extra keys allowed).
pub fn schema(properties: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties})
}

/// A command tool: `command` is the `exec.command` block; text output.
pub fn command_tool(name: &str, inputs: Value, command: Value, permissions: Value) -> Value {
    json!({
        "name": name,
        "description": "test tool",
        "kind": "command",
        "version": 1,
        "inputs": {"schema": inputs},
        "outputs": {"format": "text"},
        "exec": {"command": command},
        "permissions": permissions,
        "approval": {"required": false},
    })
}

/// A python tool: `python` is the `exec.python` block; json output.
pub fn python_tool(name: &str, inputs: Value, python: Value, permissions: Value) -> Value {
    json!({
        "name": name,
        "description": "test tool",
        "kind": "python",
        "version": 1,
        "inputs": {"schema": inputs},
        "outputs": {"format": "json"},
        "exec": {"python": python},
        "permissions": permissions,
        "approval": {"required": false},
    })
}

/// No network, reads the project root only.
pub fn read_root() -> Value {
    json!({"network": false, "fs": {"read": ["."], "write": []}, "secrets": {}})
}

/// No network, reads and writes the project root.
pub fn write_root() -> Value {
    json!({"network": false, "fs": {"read": ["."], "write": ["."]}, "secrets": {}})
}

/// Copies a directory tree (files, dirs, symlinks as symlinks).
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(e.path()).unwrap(), &dest).unwrap();
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}
