//! `glovebox wrap`: one stdio MCP server, jailed, from command-line flags
//! (what an agent's `.mcp.json` runs in place of the bare server).
//!
//! The flags become an `exec.mcp` manifest ([`manifest`]): `--read` and
//! `--write` its `fs` grants, `--allow-host` its network allowlist (no
//! flag: no network), `--secret NAME:HOST` a placeholder secret bound to
//! that host (the host is allowed too), `--env NAME[=VALUE]` a plain
//! setting in its environment. What the command itself needs to run is
//! granted read from the command ([`needed`]): a script named by its
//! path, and a Python script's virtual environment and the installation
//! its interpreter's links lead to. Without `--save` the manifest is
//! written to a private project in glovebox's state directory
//! ([`private_root`]), keyed by the flags, so that nothing is written to
//! the user's project (the audit log of its calls lives there too; its
//! config turns the built-in file tools off and holds `--allow-private`);
//! with `--save NAME` it is written to the project as
//! `.glee/tools/NAME/tool.yml`, for the user to review and keep.
//!
//! Fixes are worded in the flags for a server `wrap` made ([`Words`]).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::state::{self, StateError};

/// Why the flags make no server.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// No command after `--`.
    #[error("no server command given; pass it after `--` (glovebox wrap -- npx -y SERVER)")]
    NoCommand,
    /// A `--secret` without `NAME:HOST`.
    #[error("--secret {given:?} is not NAME:HOST; name the variable and the host it is for")]
    Secret { given: String },
    /// An `--env` whose name is not a variable name.
    #[error("--env {given:?}: {name:?} is not a variable name (letters, digits and `_`, not starting with a digit)")]
    EnvName { given: String, name: String },
    /// An `--env NAME` whose variable is not set.
    #[error("--env {name}: {name} is not set in glovebox's environment; pass --env {name}=VALUE, or export it")]
    EnvUnset { name: String },
    /// An `--env` value that would be read as a secret's name.
    #[error("--env {name}: the value holds `${{`, which the manifest reads as a declared secret (`${{NAME}}`); pass the secret with --secret NAME:HOST instead")]
    EnvTemplate { name: String },
    /// A `--read` or `--write` of a path that is not there (a grant of
    /// nothing: the jail can only grant what exists).
    #[error("{flag} {path}: no such file or directory, so the server would get nothing there; create it first (mkdir -p for a directory), or grant the directory that will hold it")]
    Missing { flag: &'static str, path: String },
    /// `--allow-private` without a host to reach.
    #[error("--allow-private lets the server reach loopback and private addresses through the egress proxy, but it has no network: pass --allow-host HOST[:PORT] too (e.g. --allow-host 127.0.0.1:8765)")]
    PrivateWithoutHost,
    /// A name outside the grammar.
    #[error(
        "{name:?} is not a tool name ({}); pass --name",
        crate::manifest::name::GRAMMAR
    )]
    Name { name: String },
    /// The manifest is there already.
    #[error("{path} exists; remove it or pick another name")]
    Exists { path: PathBuf },
    /// The state directory.
    #[error(transparent)]
    State(#[from] StateError),
    /// Writing the manifest.
    #[error("cannot write {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The flags of `glovebox wrap`.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// Readable paths.
    pub read: Vec<String>,
    /// Writable paths.
    pub write: Vec<String>,
    /// Hosts the server may reach (through the egress gateway).
    pub allow_host: Vec<String>,
    /// `NAME:HOST` placeholder secrets.
    pub secret: Vec<String>,
    /// `NAME=VALUE` (or `NAME`, its value taken from glovebox's
    /// environment now) settings in the server's environment.
    pub env: Vec<String>,
    /// Loopback and private addresses reachable through the proxy.
    pub allow_private: bool,
    /// The server's name (its tools are `NAME__TOOL`).
    pub name: Option<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

impl Flags {
    /// The server's name: `--name`, else the package's (`npx -y
    /// @scope/server-x` → `server-x`, `uvx mcp-server-time` →
    /// `mcp-server-time`, `node …/node_modules/@scope/server-x/dist/index.js`
    /// → `server-x`, `python3 server.py` → `server`), else the command's
    /// file name; made a tool name (other characters are `_`).
    pub fn name(&self) -> Result<String, WrapError> {
        let name = match &self.name {
            Some(n) => n.clone(),
            None => {
                let (first, args) = self.command.split_first().ok_or(WrapError::NoCommand)?;
                tool_name(&default_name(first, args))
            }
        };
        if !crate::manifest::name::is_valid(&name) {
            return Err(WrapError::Name { name });
        }
        Ok(name)
    }

    /// The `--env` settings as `(NAME, VALUE)`.
    fn settings(&self) -> Result<Vec<(String, String)>, WrapError> {
        let valid = |n: &str| {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        };
        self.env
            .iter()
            .map(|given| {
                let (name, value) = match given.split_once('=') {
                    Some((n, v)) => (n.to_string(), v.to_string()),
                    None => {
                        let value = std::env::var(given).map_err(|_| WrapError::EnvUnset {
                            name: given.clone(),
                        })?;
                        (given.clone(), value)
                    }
                };
                if !valid(&name) {
                    return Err(WrapError::EnvName {
                        given: given.clone(),
                        name,
                    });
                }
                if value.contains("${") {
                    return Err(WrapError::EnvTemplate { name });
                }
                Ok((name, value))
            })
            .collect()
    }
}

/// The name a server's command suggests (see [`Flags::name`]).
fn default_name(first: &str, args: &[String]) -> String {
    if let Some(l) = super::install::Launcher::parse(first, args) {
        return l.package_name();
    }
    let file = |p: &str| {
        Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("server")
            .to_string()
    };
    let program = file(first);
    let runtime =
        program.starts_with("python") || matches!(program.as_str(), "node" | "deno" | "bun");
    if !runtime {
        return program;
    }
    // `python3 -m package.module`: the package.
    if let Some(i) = args.iter().position(|a| a == "-m") {
        if let Some(module) = args.get(i + 1) {
            return module.split('.').next().unwrap_or(module).to_string();
        }
    }
    let Some(script) = args.iter().find(|a| !a.starts_with('-')) else {
        return program;
    };
    // An installed package's file: the package's name.
    let parts: Vec<&str> = script.split('/').collect();
    if let Some(at) = parts
        .iter()
        .rposition(|p| matches!(*p, "node_modules" | "site-packages"))
    {
        let name = parts.get(at + 1).copied().unwrap_or_default();
        let name = if name.starts_with('@') {
            parts.get(at + 2).copied().unwrap_or(name)
        } else {
            name
        };
        if !name.is_empty() {
            return name.to_string();
        }
    }
    let stem = Path::new(script)
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or("server");
    // `…/server-x/dist/index.js`: the directory above the build's.
    if matches!(stem, "index" | "main" | "server" | "__main__") {
        let dirs: Vec<&str> = parts[..parts.len().saturating_sub(1)]
            .iter()
            .copied()
            .filter(|d| {
                !matches!(
                    *d,
                    "" | "." | ".." | "dist" | "build" | "lib" | "src" | "bin"
                )
            })
            .collect();
        if let Some(dir) = dirs.last() {
            return dir.to_string();
        }
    }
    stem.to_string()
}

/// `name` made a tool name: other characters than letters, digits, `_`,
/// `.` and `-` become `_`, a leading `.` or `-` gets a `_` before it,
/// cut to the longest name.
fn tool_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(['.', '-']) {
        out.insert(0, '_');
    }
    out.truncate(crate::manifest::name::MAX_LEN);
    out
}

/// How a fix is worded: in `glovebox wrap`'s flags for a server it wraps
/// (the person typed flags, not a manifest), in a manifest's keys
/// otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// `--read P`, `--allow-host H`.
    Flags,
    /// `permissions.fs.read`, `permissions.network.allow`.
    Manifest,
}

impl Words {
    /// The words for the project at `root`: `glovebox wrap`'s private
    /// projects ([`private_root`]) speak in its flags.
    pub fn of(root: &Path) -> Words {
        match state::dir() {
            Ok(dir) if root.starts_with(dir.join(PRIVATE_DIR)) => Words::Flags,
            _ => Words::Manifest,
        }
    }

    /// How to let the server reach `hosts`.
    pub fn allow_hosts(self, hosts: &[&str]) -> String {
        match self {
            Words::Flags => format!(
                "pass {}",
                hosts
                    .iter()
                    .map(|h| format!("--allow-host {h}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Words::Manifest => format!("add {} to permissions.network.allow", hosts.join(", ")),
        }
    }

    /// Where hosts are allowed, in general.
    pub fn allow_hosts_hint(self) -> &'static str {
        match self {
            Words::Flags => "--allow-host HOST lets the server reach a host",
            Words::Manifest => "permissions.network.allow lists the hosts the server may reach",
        }
    }

    /// How to grant a directory to read (and run from).
    pub fn grant_directory(self) -> &'static str {
        match self {
            Words::Flags => "grant its directory (--read DIR)",
            Words::Manifest => "grant its directory (permissions.fs.read)",
        }
    }

    /// The fix for a connection to `host` the egress proxy refused for
    /// `why` (its [`crate::net::Refusal`] text), when there is one a
    /// person may want.
    pub fn fix_refusal(self, why: &str, host: &str) -> Option<String> {
        if why.contains("allowlist") {
            return Some(format!("to allow it, {}", self.allow_hosts(&[host])));
        }
        if matches!(why, "loopback" | "private" | "this host") {
            return Some(format!(
                "to let the server reach loopback and private addresses, {}",
                match self {
                    Words::Flags => "pass --allow-private",
                    Words::Manifest => "set security.http.allow_private: true in .glee/config.yml",
                }
            ));
        }
        None
    }
}

/// Where the private projects of `glovebox wrap` live, under glovebox's
/// state directory.
const PRIVATE_DIR: &str = "wrap";

/// `path` as the manifest should say it: absolute (from `cwd`).
fn absolute(cwd: &Path, path: &str) -> String {
    let p = Path::new(path);
    if p.is_absolute() {
        path.to_string()
    } else {
        cwd.join(p).display().to_string()
    }
}

/// The manifest the flags describe, its paths absolute (from `cwd`, the
/// server's working directory), with what the command needs to run
/// granted read ([`needed`]).
pub fn manifest(flags: &Flags, cwd: &Path) -> Result<Value, WrapError> {
    let (entry, args) = flags.command.split_first().ok_or(WrapError::NoCommand)?;
    let name = flags.name()?;
    let entrypoint = if entry.contains('/') {
        absolute(cwd, entry)
    } else {
        entry.clone()
    };
    let mut hosts = flags.allow_host.clone();
    let mut secrets = serde_json::Map::new();
    for s in &flags.secret {
        let Some((var, host)) = s
            .split_once(':')
            .filter(|(v, h)| !v.is_empty() && !h.is_empty())
        else {
            return Err(WrapError::Secret { given: s.clone() });
        };
        secrets.insert(var.into(), json!({"hosts": [host]}));
        if !hosts.iter().any(|h| h == host) {
            hosts.push(host.to_string());
        }
    }
    if flags.allow_private && hosts.is_empty() {
        return Err(WrapError::PrivateWithoutHost);
    }
    let network = if hosts.is_empty() {
        json!(false)
    } else {
        json!({"allow": hosts})
    };
    let mut read: Vec<String> = flags.read.iter().map(|p| absolute(cwd, p)).collect();
    let write: Vec<String> = flags.write.iter().map(|p| absolute(cwd, p)).collect();
    for (flag, paths) in [("--read", &read), ("--write", &write)] {
        if let Some(p) = paths.iter().find(|p| std::fs::symlink_metadata(p).is_err()) {
            return Err(WrapError::Missing {
                flag,
                path: p.clone(),
            });
        }
    }
    if entry.contains('/') {
        for p in needed(Path::new(&entrypoint)) {
            let granted = read
                .iter()
                .chain(&write)
                .any(|g| p.starts_with(Path::new(g)));
            if !granted {
                read.push(p.display().to_string());
            }
        }
    }
    let command = flags.command.join(" ");
    let mut mcp = json!({
        "entrypoint": entrypoint,
        "args": args,
        "cwd": cwd.display().to_string(),
    });
    let env: serde_json::Map<String, Value> = flags
        .settings()?
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    if !env.is_empty() {
        mcp["env"] = Value::Object(env);
    }
    Ok(json!({
        "name": name,
        "description": format!("The MCP server `{command}`, jailed by glovebox"),
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": mcp},
        "permissions": {
            "network": network,
            "fs": {"read": read, "write": write},
            "secrets": secrets,
        },
    }))
}

/// What the program at `entrypoint` needs to read to run, beyond the
/// baseline: the file itself, and for a Python script (or a venv's
/// `python`) its virtual environment and the installation its
/// interpreter's links lead to ([`crate::interpreter::needed_by`]).
pub fn needed(entrypoint: &Path) -> Vec<PathBuf> {
    let mut out = crate::interpreter::needed_by(entrypoint);
    if !out.iter().any(|p| entrypoint.starts_with(p)) && entrypoint.is_file() {
        out.insert(0, entrypoint.to_path_buf());
    }
    out
}

/// The project config of a wrapped server's private project: no built-in
/// file tools (they would act on the private project, not the user's),
/// and `--allow-private`.
pub fn config(flags: &Flags) -> String {
    let mut text = String::from("builtins: []\n");
    if flags.allow_private {
        text.push_str("security:\n  http:\n    allow_private: true\n");
    }
    text
}

/// A private project in glovebox's state directory holding only this
/// server's manifest and `config` (written anew each time), keyed by
/// both.
pub fn private_root(manifest: &Value, config: &str) -> Result<PathBuf, WrapError> {
    let key = hex::encode(Sha256::digest(format!("{manifest}\n{config}").as_bytes()));
    let root = state::ensure_dir()?.join(PRIVATE_DIR).join(&key[..16]);
    let name = manifest["name"].as_str().unwrap_or("server");
    let dir = root.join(".glee/tools").join(name);
    std::fs::create_dir_all(&dir).map_err(|source| WrapError::Io {
        path: dir.clone(),
        source,
    })?;
    let file = dir.join("tool.yml");
    let text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    state::write_atomic(&file, text.as_bytes())?;
    state::write_atomic(&root.join(".glee/config.yml"), config.as_bytes())?;
    Ok(root)
}

/// Writes the manifest to the project at `root` as
/// `.glee/tools/NAME/tool.yml` (never over an existing one).
pub fn save(root: &Path, manifest: &Value) -> Result<PathBuf, WrapError> {
    let name = manifest["name"].as_str().unwrap_or("server");
    let dir = root.join(".glee/tools").join(name);
    let file = dir.join("tool.yml");
    if file.exists() {
        return Err(WrapError::Exists { path: file });
    }
    std::fs::create_dir_all(&dir).map_err(|source| WrapError::Io {
        path: dir.clone(),
        source,
    })?;
    let text = serde_json::to_string_pretty(manifest).unwrap_or_default() + "\n";
    std::fs::write(&file, text).map_err(|source| WrapError::Io {
        path: file.clone(),
        source,
    })?;
    Ok(file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_grants() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join("docs")).unwrap();
        std::fs::create_dir_all(p.join("out")).unwrap();
        let f = Flags {
            read: vec!["docs".into(), "/etc/hosts".into()],
            write: vec!["out".into()],
            allow_host: vec!["registry.npmjs.org".into()],
            secret: vec!["GH_TOKEN:api.github.com".into()],
            env: vec!["MEMORY_FILE_PATH=/p/out/m.json".into()],
            allow_private: false,
            name: None,
            command: vec!["npx".into(), "-y".into(), "srv".into()],
        };
        let m = manifest(&f, p).unwrap();
        assert_eq!(m["name"], "srv");
        assert_eq!(m["exec"]["mcp"]["entrypoint"], "npx");
        assert_eq!(m["exec"]["mcp"]["args"], json!(["-y", "srv"]));
        assert_eq!(
            m["permissions"]["fs"]["read"],
            json!([p.join("docs"), "/etc/hosts"])
        );
        assert_eq!(m["permissions"]["fs"]["write"], json!([p.join("out")]));
        let missing = Flags {
            write: vec!["nothere".into()],
            command: vec!["x".into()],
            ..Flags::default()
        };
        let e = manifest(&missing, p).unwrap_err().to_string();
        assert!(
            e.starts_with("--write ") && e.contains("create it first"),
            "{e}"
        );
        assert_eq!(
            m["permissions"]["network"]["allow"],
            json!(["registry.npmjs.org", "api.github.com"])
        );
        assert_eq!(
            m["permissions"]["secrets"]["GH_TOKEN"]["hosts"],
            json!(["api.github.com"])
        );
        assert_eq!(
            m["exec"]["mcp"]["env"],
            json!({"MEMORY_FILE_PATH": "/p/out/m.json"})
        );
        let none = Flags {
            command: vec!["./srv.py".into()],
            ..Flags::default()
        };
        let m = manifest(&none, Path::new("/p")).unwrap();
        assert_eq!(m["permissions"]["network"], json!(false));
        assert_eq!(m["exec"]["mcp"]["entrypoint"], "/p/./srv.py");
        assert_eq!(m["name"], "srv.py");
        assert!(manifest(&Flags::default(), Path::new("/")).is_err());
        let bad = Flags {
            secret: vec!["NOHOST".into()],
            command: vec!["x".into()],
            ..Flags::default()
        };
        assert!(matches!(
            manifest(&bad, Path::new("/")),
            Err(WrapError::Secret { .. })
        ));
        let private = Flags {
            allow_private: true,
            command: vec!["x".into()],
            ..Flags::default()
        };
        assert!(matches!(
            manifest(&private, Path::new("/")),
            Err(WrapError::PrivateWithoutHost)
        ));
        for (env, bad) in [
            ("1X=a", "is not a variable name"),
            ("A B=c", "is not a variable name"),
            ("X=${TOKEN}", "declared secret"),
            ("GLOVEBOX_SURELY_UNSET_VARIABLE", "is not set"),
        ] {
            let f = Flags {
                env: vec![env.into()],
                command: vec!["x".into()],
                ..Flags::default()
            };
            let e = manifest(&f, Path::new("/")).unwrap_err().to_string();
            assert!(e.contains(bad), "{env}: {e}");
        }
    }

    #[test]
    fn a_server_is_named_after_its_package() {
        let n = |cmd: &[&str]| {
            Flags {
                command: cmd.iter().map(|s| s.to_string()).collect(),
                ..Flags::default()
            }
            .name()
            .unwrap()
        };
        assert_eq!(
            n(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.2",
                "/d"
            ]),
            "server-filesystem"
        );
        assert_eq!(
            n(&["uvx", "mcp-server-time", "--local-timezone", "UTC"]),
            "mcp-server-time"
        );
        assert_eq!(n(&["pipx", "run", "--spec", "x==1", "mcp-x"]), "mcp-x");
        assert_eq!(
            n(&[
                "node",
                "/h/.mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
                "docs"
            ]),
            "server-filesystem"
        );
        assert_eq!(n(&["node", "/h/src/weather/dist/index.js"]), "weather");
        assert_eq!(n(&["python3", "server.py"]), "server");
        assert_eq!(
            n(&["python3", "-u", "-m", "mcp_server_git.cli", "-r", "."]),
            "mcp_server_git"
        );
        assert_eq!(n(&["/venv/bin/mcp-server-fetch"]), "mcp-server-fetch");
        assert_eq!(n(&["./my server"]), "my_server");
    }

    #[test]
    fn the_words_of_a_fix_are_those_of_the_interface() {
        assert_eq!(
            Words::Flags.allow_hosts(&["pypi.org", "files.pythonhosted.org"]),
            "pass --allow-host pypi.org --allow-host files.pythonhosted.org"
        );
        assert_eq!(
            Words::Manifest.allow_hosts(&["registry.npmjs.org"]),
            "add registry.npmjs.org to permissions.network.allow"
        );
        assert!(Words::Flags.grant_directory().contains("--read"));
        assert!(Words::Manifest
            .grant_directory()
            .contains("permissions.fs.read"));
    }
}
