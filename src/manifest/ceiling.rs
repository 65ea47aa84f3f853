//! The permission ceiling (`security.max_permissions` in
//! `.glee/config.yml`): what a tool an agent created, or a `tools.json`
//! entry's own permissions, may ask for at most. A decision on manifest
//! data alone, so the tools.json loader, `create` and the engine's check
//! at every call all reach it going down.

use std::path::{Path, PathBuf};

use super::config::MaxPermissions;
use super::discover::{resolve, resolved as real};
use super::model::{Exec, FsPermissions, Manifest};

/// The ceiling used when the config names none: no network, read the
/// project, write nothing, no secrets.
pub fn default_ceiling() -> MaxPermissions {
    MaxPermissions {
        network: false.into(),
        fs: FsPermissions {
            read: vec![".".into()],
            write: Vec::new(),
        },
        secrets: Vec::new(),
    }
}

fn within(path: &Path, allowed: &[PathBuf]) -> bool {
    allowed.iter().any(|a| path.starts_with(a))
}

/// Everything `m` asks for beyond `ceiling`.
pub fn excess(root: &Path, m: &Manifest, ceiling: &MaxPermissions) -> Vec<String> {
    let mut out = Vec::new();
    let p = &m.permissions;
    out.extend(network_excess(&p.network, &ceiling.network));
    let real_all = |v: &[String]| {
        v.iter()
            .map(|s| real(&resolve(root, s)))
            .collect::<Vec<_>>()
    };
    let c_read = real_all(&ceiling.fs.read);
    let c_write = real_all(&ceiling.fs.write);
    let readable: Vec<PathBuf> = c_read.iter().chain(&c_write).cloned().collect();
    for r in &p.fs.read {
        if !within(&real(&resolve(root, r)), &readable) {
            out.push(format!("fs.read {r:?} is outside the ceiling's paths"));
        }
    }
    for w in &p.fs.write {
        if !within(&real(&resolve(root, w)), &c_write) {
            out.push(format!(
                "fs.write {w:?} is outside the ceiling's writable paths"
            ));
        }
    }
    // The working directory and a venv are granted too (read + execute).
    let mut granted: Vec<(&str, &str)> = Vec::new();
    match &m.exec {
        Exec::Command(c) => granted.push(("exec.command.cwd", &c.cwd)),
        Exec::Mcp(m) => granted.push(("exec.mcp.cwd", &m.cwd)),
        Exec::Python(py) => {
            granted.push(("exec.python.cwd", &py.cwd));
            if let Some(v) = &py.venv {
                granted.push(("exec.python.venv", v));
            }
        }
        // An agentcli entry runs in the directory of its tools.json,
        // which the user chose, not an agent.
        Exec::AgentCli(_) | Exec::Http(_) => {}
    }
    for (what, path) in granted {
        if !within(&real(&resolve(root, path)), &readable) {
            out.push(format!("{what} {path:?} is outside the ceiling's paths"));
        }
    }
    for s in p.secrets.keys() {
        if !ceiling.secrets.contains(s) {
            out.push(format!("secret {s} is not in the ceiling's secrets"));
        }
    }
    out
}

/// What a tool's `permissions.network` asks beyond the ceiling's: any
/// network under a ceiling of none; any host under a ceiling list; hosts
/// outside the ceiling list.
pub fn network_excess(
    asked: &super::model::Network,
    ceiling: &super::model::Network,
) -> Vec<String> {
    if !asked.enabled() {
        return Vec::new();
    }
    if !ceiling.enabled() {
        return vec!["network: the ceiling allows no network".into()];
    }
    let Ok(Some(max)) = ceiling.allowlist() else {
        return match ceiling.allowlist() {
            Err(e) => vec![format!("network: the ceiling's allowlist is invalid: {e}")],
            _ => Vec::new(),
        };
    };
    match asked.allowlist() {
        Err(e) => vec![format!("network: {e}")],
        Ok(None) => vec![format!(
            "network: any host asked, the ceiling allows only {}",
            max.patterns()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )],
        Ok(Some(list)) => max
            .uncovered(&list)
            .into_iter()
            .map(|p| format!("network: {p} is outside the ceiling's allowlist"))
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::network_excess;
    use crate::manifest::model::Network;

    fn net(yaml: &str) -> Network {
        serde_json::from_str(yaml).unwrap()
    }

    #[test]
    fn a_created_allowlist_must_lie_inside_the_ceiling() {
        let ceiling = net(r#"["*.example.com", "pypi.org:443"]"#);
        assert!(network_excess(&net("false"), &ceiling).is_empty());
        assert!(network_excess(
            &net(r#"{"allow": ["api.example.com", "pypi.org:443"]}"#),
            &ceiling
        )
        .is_empty());
        assert_eq!(
            network_excess(&net(r#"{"allow": ["evil.com", "pypi.org"]}"#), &ceiling),
            [
                "network: evil.com is outside the ceiling's allowlist",
                "network: pypi.org is outside the ceiling's allowlist"
            ]
        );
        assert!(network_excess(&net("true"), &ceiling)[0].contains("any host asked"));
        assert!(network_excess(&net("true"), &net("true")).is_empty());
        assert!(network_excess(
            &net(r#"{"allow": ["x.org"]}"#),
            &net(r#"{"allow": ["x.org"]}"#)
        )
        .is_empty());
        assert_eq!(
            network_excess(&net(r#"{"allow": ["x.org"]}"#), &net("false")),
            ["network: the ceiling allows no network"]
        );
    }
}
