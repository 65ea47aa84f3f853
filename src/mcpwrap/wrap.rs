//! `glovebox wrap`: one stdio MCP server, jailed, from command-line flags
//! (what an agent's `.mcp.json` runs in place of the bare server).
//!
//! The flags become an `exec.mcp` manifest ([`manifest`]): `--read` and
//! `--write` its `fs` grants, `--allow-host` its network allowlist (no
//! flag: no network), `--secret NAME:HOST` a placeholder secret bound to
//! that host (the host is allowed too). Without `--save` the manifest is
//! written to a private project in glovebox's state directory
//! ([`private_root`]), keyed by the flags, so that nothing is written to
//! the user's project (the audit log of its calls lives there too); with
//! `--save NAME` it is written to the project as
//! `.glee/tools/NAME/tool.yml`, for the user to review and keep.

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
    /// The server's name (its tools are `NAME__TOOL`).
    pub name: Option<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

impl Flags {
    /// The server's name: `--name`, else the command's file name.
    pub fn name(&self) -> Result<String, WrapError> {
        let name = match &self.name {
            Some(n) => n.clone(),
            None => {
                let first = self.command.first().ok_or(WrapError::NoCommand)?;
                Path::new(first)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("server")
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            }
        };
        if !crate::manifest::name::is_valid(&name) {
            return Err(WrapError::Name { name });
        }
        Ok(name)
    }
}

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
/// server's working directory).
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
    let network = if hosts.is_empty() {
        json!(false)
    } else {
        json!({"allow": hosts})
    };
    let read: Vec<String> = flags.read.iter().map(|p| absolute(cwd, p)).collect();
    let write: Vec<String> = flags.write.iter().map(|p| absolute(cwd, p)).collect();
    let command = flags.command.join(" ");
    Ok(json!({
        "name": name,
        "description": format!("The MCP server `{command}`, jailed by glovebox"),
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": {
            "entrypoint": entrypoint,
            "args": args,
            "cwd": cwd.display().to_string(),
        }},
        "permissions": {
            "network": network,
            "fs": {"read": read, "write": write},
            "secrets": secrets,
        },
    }))
}

/// A private project in glovebox's state directory holding only this
/// server's manifest (written anew each time), keyed by the manifest.
pub fn private_root(manifest: &Value) -> Result<PathBuf, WrapError> {
    let key = hex::encode(Sha256::digest(manifest.to_string().as_bytes()));
    let root = state::ensure_dir()?.join("wrap").join(&key[..16]);
    let name = manifest["name"].as_str().unwrap_or("server");
    let dir = root.join(".glee/tools").join(name);
    std::fs::create_dir_all(&dir).map_err(|source| WrapError::Io {
        path: dir.clone(),
        source,
    })?;
    let file = dir.join("tool.yml");
    let text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    state::write_atomic(&file, text.as_bytes())?;
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
        let f = Flags {
            read: vec!["docs".into(), "/etc/hosts".into()],
            write: vec!["out".into()],
            allow_host: vec!["registry.npmjs.org".into()],
            secret: vec!["GH_TOKEN:api.github.com".into()],
            name: None,
            command: vec!["npx".into(), "-y".into(), "srv".into()],
        };
        let m = manifest(&f, Path::new("/p")).unwrap();
        assert_eq!(m["name"], "npx");
        assert_eq!(m["exec"]["mcp"]["entrypoint"], "npx");
        assert_eq!(m["exec"]["mcp"]["args"], json!(["-y", "srv"]));
        assert_eq!(
            m["permissions"]["fs"]["read"],
            json!(["/p/docs", "/etc/hosts"])
        );
        assert_eq!(m["permissions"]["fs"]["write"], json!(["/p/out"]));
        assert_eq!(
            m["permissions"]["network"]["allow"],
            json!(["registry.npmjs.org", "api.github.com"])
        );
        assert_eq!(
            m["permissions"]["secrets"]["GH_TOKEN"]["hosts"],
            json!(["api.github.com"])
        );
        let none = Flags {
            command: vec!["./srv.py".into()],
            ..Flags::default()
        };
        let m = manifest(&none, Path::new("/p")).unwrap();
        assert_eq!(m["permissions"]["network"], json!(false));
        assert_eq!(m["exec"]["mcp"]["entrypoint"], "/p/./srv.py");
        assert_eq!(m["name"], "srv_py");
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
    }
}
