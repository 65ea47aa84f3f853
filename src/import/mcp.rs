//! `glovebox import mcp FILE`: the MCP servers of a client's config —
//! `{"mcpServers": {...}}` (Claude Code's `.mcp.json`, Cursor, Gemini
//! CLI) or `{"servers": {...}}` (VS Code's `.vscode/mcp.json`) — as
//! `kind: mcp` tools, with the narrowest permissions glovebox can infer,
//! for a person to review:
//!
//! - no filesystem grant but a read grant of each argument that names an
//!   existing path (a filesystem server's directories);
//! - no network, but the package registry for a server started through
//!   `npx`/`bunx`/`pnpm dlx` (registry.npmjs.org) or `uvx`/`pipx`
//!   (pypi.org, files.pythonhosted.org), and a remote server's own host;
//! - every `env` and `headers` value that names a variable (`${VAR}`,
//!   `${env:VAR}`, `$VAR`) becomes a declared secret read from glovebox's
//!   environment; a literal value (a token pasted into the config) is
//!   never copied: the variable of that name is declared instead, and the
//!   note says to export it;
//! - `approval.required`, so nothing of the server runs before a person
//!   approved what it serves.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{read_input, tools_dir, write_tool, Converted, ImportError, Refused, Report};
use crate::manifest::discover;

const HEADER: &str =
    "# Imported by `glovebox import mcp`: review the permissions, then `glovebox approve NAME`.\n";

/// Imports every server of `file` into the project at `root`.
pub fn import(root: &Path, file: &Path, force: bool) -> Result<Report, ImportError> {
    let bytes = read_input(file)?;
    let format = |message: String| ImportError::Format {
        path: file.to_path_buf(),
        expected: "an MCP client config ({\"mcpServers\": {...}} or {\"servers\": {...}})",
        message,
    };
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| format(e.to_string()))?;
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| format("no `mcpServers` or `servers` object".into()))?;
    let root = &std::path::absolute(root)
        .map(|r| discover::normalize(&r))
        .map_err(|e| ImportError::ToolsDir {
            path: root.to_path_buf(),
            message: e.to_string(),
        })?;
    let tools = tools_dir(root)?;
    let shown = file.display().to_string();
    let mut report = Report::default();
    for (name, entry) in servers {
        match convert(root, &shown, name, entry) {
            Ok(c) => match write_tool(root, &tools, &c, HEADER, force) {
                Ok(w) => report.written.push(w),
                Err(r) => report.refused.push(r),
            },
            Err(r) => report.refused.push(r),
        }
    }
    Ok(report)
}

/// `name` made a tool name: every character outside the grammar is `_`.
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
    if out.starts_with(['.', '-']) {
        out.insert(0, '_');
    }
    out
}

/// The variable a config value names (`${VAR}`, `${env:VAR}`, `$VAR`),
/// with what surrounds it (`Bearer ${TOKEN}` → `Bearer ` + `TOKEN`).
fn variable(value: &str) -> Option<(String, String, String)> {
    let valid = |v: &str| {
        !v.is_empty()
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !v.starts_with(|c: char| c.is_ascii_digit())
    };
    if let Some(at) = value.find("${") {
        let rest = &value[at + 2..];
        let end = rest.find('}')?;
        let inner = &rest[..end];
        let var = inner.strip_prefix("env:").unwrap_or(inner);
        return valid(var).then(|| {
            (
                value[..at].to_string(),
                var.to_string(),
                rest[end + 1..].to_string(),
            )
        });
    }
    let at = value.find('$')?;
    let var: String = value[at + 1..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    valid(&var).then(|| {
        (
            value[..at].to_string(),
            var.clone(),
            value[at + 1 + var.len()..].to_string(),
        )
    })
}

/// The secret variable name for a literal value of `key`.
fn secret_name(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Maps `values` (env or headers) to templates over declared secrets,
/// adding each secret to `secrets` and a note for each literal.
fn templated(
    what: &str,
    values: Option<&Map<String, Value>>,
    secrets: &mut Map<String, Value>,
    notes: &mut Vec<String>,
    skip_same: bool,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in values.into_iter().flatten() {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match variable(&text) {
            Some((before, var, after)) => {
                secrets.insert(var.clone(), json!({}));
                if !(skip_same && var == *k && before.is_empty() && after.is_empty()) {
                    out.insert(k.clone(), json!(format!("{before}${{{var}}}{after}")));
                }
            }
            None => {
                let var = secret_name(k);
                secrets.insert(var.clone(), json!({}));
                if !(skip_same && var == *k) {
                    out.insert(k.clone(), json!(format!("${{{var}}}")));
                }
                notes.push(format!(
                    "{what} `{k}` had a value in the config, which was not copied: glovebox reads it from the environment variable {var}; export it before serving"
                ));
            }
        }
    }
    out
}

fn convert(root: &Path, file: &str, key: &str, entry: &Value) -> Result<Converted, Refused> {
    let name = tool_name(key);
    let refuse = |reason: String| Refused {
        tool: name.clone(),
        reason,
    };
    let Some(e) = entry.as_object() else {
        return Err(refuse("the entry is not an object".into()));
    };
    let mut notes = Vec::new();
    let mut secrets = Map::new();
    let mut network: Vec<String> = Vec::new();
    let mut read: Vec<String> = Vec::new();
    let exec = if let Some(url) = e.get("url").and_then(Value::as_str) {
        if e.get("type").and_then(Value::as_str) == Some("sse") {
            return Err(refuse(
                "an SSE server (the old HTTP transport) cannot be wrapped; use its Streamable HTTP endpoint".into(),
            ));
        }
        let parsed = url::Url::parse(url).map_err(|err| refuse(format!("url {url:?}: {err}")))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| refuse(format!("url {url:?} has no host")))?;
        network.push(match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        });
        let headers = templated(
            "header",
            e.get("headers").and_then(Value::as_object),
            &mut secrets,
            &mut notes,
            false,
        );
        let mut mcp = json!({"url": url});
        if !headers.is_empty() {
            mcp["headers"] = Value::Object(headers);
        }
        mcp
    } else if let Some(command) = e.get("command").and_then(Value::as_str) {
        let args: Vec<String> = e
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        if let Some(a) = args.iter().find(|a| a.contains("${")) {
            return Err(refuse(format!(
                "argument {a:?} holds a client variable glovebox cannot resolve; write the value into the config and import again"
            )));
        }
        let program = Path::new(command)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(command);
        match program {
            "npx" | "bunx" | "pnpm" | "npm" => {
                network.push("registry.npmjs.org".into());
                notes.push("network: registry.npmjs.org, for the package it fetches at start; but what it fetches lands in the jail's HOME, which no jail may execute: install the package (pinned) under a read grant and run it with node instead".into());
            }
            "uvx" | "uv" | "pipx" => {
                network.extend(["pypi.org".into(), "files.pythonhosted.org".into()]);
                notes.push("network: PyPI, for the package it fetches at start; what it fetches lands in the jail's HOME: install the package (pinned) in a venv under a read grant and run its script instead".into());
            }
            "docker" | "podman" => {
                return Err(refuse(format!(
                    "`{program}` starts a container, which needs privileges no jail gives; run the server's own command instead"
                )))
            }
            _ => {}
        }
        for a in &args {
            if a.starts_with('-') {
                continue;
            }
            let p = discover::resolve(root, a);
            if (Path::new(a).is_absolute() || a.contains('/') || p.exists()) && p.exists() {
                read.push(a.clone());
            }
        }
        if !read.is_empty() {
            notes.push(format!(
                "fs.read: {} (arguments naming paths); move one to fs.write if the server must change it",
                read.join(", ")
            ));
        }
        let env = templated(
            "env",
            e.get("env").and_then(Value::as_object),
            &mut secrets,
            &mut notes,
            true,
        );
        let mut mcp = json!({"entrypoint": command, "args": args});
        if !env.is_empty() {
            mcp["env"] = Value::Object(env);
        }
        if let Some(cwd) = e.get("cwd").and_then(Value::as_str) {
            mcp["cwd"] = json!(cwd);
        }
        mcp
    } else {
        return Err(refuse("the entry has neither `command` nor `url`".into()));
    };
    let network = if network.is_empty() {
        json!(false)
    } else {
        json!({"allow": network})
    };
    Ok(Converted {
        name: name.clone(),
        manifest: json!({
            "name": name,
            "description": format!("The MCP server `{key}` of {file}, jailed by glovebox"),
            "kind": "mcp",
            "version": 1,
            "exec": {"mcp": exec},
            "permissions": {
                "network": network,
                "fs": {"read": read, "write": []},
                "secrets": secrets,
            },
            "approval": {
                "required": true,
                "reason": format!("imported from {file}: review its permissions and the tools it serves"),
            },
        }),
        notes,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_found_in_every_client_spelling() {
        let v = |s: &str| variable(s).map(|(a, b, c)| format!("{a}|{b}|{c}"));
        assert_eq!(v("${TOKEN}").as_deref(), Some("|TOKEN|"));
        assert_eq!(v("${env:GH_TOKEN}").as_deref(), Some("|GH_TOKEN|"));
        assert_eq!(v("Bearer ${API}").as_deref(), Some("Bearer |API|"));
        assert_eq!(v("$HOME_DIR/x").as_deref(), Some("|HOME_DIR|/x"));
        assert_eq!(v("ghp_literal"), None);
        assert_eq!(v("${input:token}"), None);
    }

    #[test]
    fn literals_become_declared_variables_and_are_not_copied() {
        let mut secrets = Map::new();
        let mut notes = Vec::new();
        let env = json!({"GITHUB_TOKEN": "ghp_abc", "API": "${env:API_KEY}", "SAME": "${SAME}"});
        let out = templated("env", env.as_object(), &mut secrets, &mut notes, true);
        assert_eq!(json!(out), json!({"API": "${API_KEY}"}));
        assert_eq!(
            secrets.keys().collect::<Vec<_>>(),
            ["GITHUB_TOKEN", "API_KEY", "SAME"]
        );
        assert!(!format!("{out:?}{notes:?}").contains("ghp_abc"));
        assert_eq!(notes.len(), 1);
    }
}
