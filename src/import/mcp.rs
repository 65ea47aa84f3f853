//! `glovebox import mcp FILE`: the MCP servers of a client's config —
//! `{"mcpServers": {...}}` (Claude Code's `.mcp.json`, Cursor, Gemini
//! CLI) or `{"servers": {...}}` (VS Code's `.vscode/mcp.json`) — as
//! `kind: mcp` tools, with the narrowest permissions glovebox can infer,
//! for a person to review:
//!
//! - no filesystem grant but a read grant of each argument that names an
//!   existing path (a filesystem server's directories), and of what a
//!   command named by its path needs to run (a venv's script: the venv,
//!   and the installation its interpreter's links lead to);
//! - no network, but the package registry for a server started through
//!   `npx -y`, `uvx` or `pipx run` (glovebox installs the package in the
//!   server's jail at its first start), and a remote server's own host
//!   (`url`, or Gemini CLI's `httpUrl`);
//! - an `env` value that names a variable (`${VAR}`, `${env:VAR}`,
//!   `$VAR`) becomes a declared secret read from glovebox's environment,
//!   as does a value that looks like a credential (its name says token,
//!   key, secret, password…; or it looks like one): such a literal is
//!   never copied, the variable of that name is declared instead, and
//!   the note says to export it; any other value (a path, a setting)
//!   stays a plain value of the server's environment;
//! - a remote server's `headers` as `env`, each secret bound to the
//!   server's host (glovebox sends it there, nowhere else);
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

/// Whether the literal `value` of `key` looks like a credential: its name
/// says so (token, key, secret, password, credential, auth, cookie,
/// session, `PAT`), or the value has a credential's shape (a known
/// prefix, or a long run of letters and digits without a path's or a
/// sentence's separators). A credential is never copied into a manifest.
fn is_credential(key: &str, value: &str) -> bool {
    let k = key.to_ascii_uppercase();
    let named = [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|w| k.contains(w))
        || k.split('_').any(|part| part == "PAT" || part == "PASS");
    let prefixed = [
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "glpat-",
        "sk-",
        "xox",
        "AKIA",
        "AIza",
        "Bearer ",
    ]
    .iter()
    .any(|p| value.starts_with(p));
    let opaque = value.len() >= 24
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '=' | '+'))
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic());
    named || prefixed || opaque
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

/// How [`templated`] treats the values it maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Values {
    /// A stdio server's `env`: a variable it names becomes a declared
    /// secret, as does a literal credential; any other literal stays as
    /// it is.
    Env,
    /// A remote server's `headers`: as `env`, each secret bound to the
    /// server's host (`host`).
    Headers,
}

/// Maps `values` (env or headers) to templates over declared secrets
/// where `how` says they are secret, adding each secret to `secrets`
/// (bound to `host` for headers) and a note for each literal not copied.
fn templated(
    how: Values,
    values: Option<&Map<String, Value>>,
    host: Option<&str>,
    secrets: &mut Map<String, Value>,
    notes: &mut Vec<String>,
) -> Map<String, Value> {
    let (what, skip_same) = match how {
        Values::Env => ("env", true),
        Values::Headers => ("header", false),
    };
    let declared = match host {
        Some(h) => json!({"hosts": [h]}),
        None => json!({}),
    };
    let mut out = Map::new();
    for (k, v) in values.into_iter().flatten() {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match variable(&text) {
            Some((before, var, after)) => {
                secrets.insert(var.clone(), declared.clone());
                if !(skip_same && var == *k && before.is_empty() && after.is_empty()) {
                    out.insert(k.clone(), json!(format!("{before}${{{var}}}{after}")));
                }
            }
            None if !is_credential(k, &text) => {
                out.insert(k.clone(), json!(text));
            }
            None => {
                let var = secret_name(k);
                secrets.insert(var.clone(), declared.clone());
                if !(skip_same && var == *k) {
                    out.insert(k.clone(), json!(format!("${{{var}}}")));
                }
                notes.push(format!(
                    "{what} `{k}` had a value in the config that looks like a credential, which was not copied: glovebox reads it from the environment variable {var}; export it before serving"
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
    let url = e
        .get("httpUrl")
        .or_else(|| e.get("url"))
        .and_then(Value::as_str);
    let exec = if let Some(url) = url {
        if e.get("httpUrl").is_none() && e.get("type").and_then(Value::as_str) == Some("sse") {
            return Err(refuse(
                "an SSE server (the old HTTP transport) cannot be wrapped; use its Streamable HTTP endpoint".into(),
            ));
        }
        let parsed = url::Url::parse(url).map_err(|err| refuse(format!("url {url:?}: {err}")))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| refuse(format!("url {url:?} has no host")))?;
        let origin = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        network.push(origin.clone());
        let headers = templated(
            Values::Headers,
            e.get("headers").and_then(Value::as_object),
            Some(&origin),
            &mut secrets,
            &mut notes,
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
        let launcher = crate::mcpwrap::install::Launcher::parse(command, &args);
        if let Some(l) = &launcher {
            network.extend(l.hosts().iter().map(|h| h.to_string()));
            notes.push(format!(
                "network: {}, where glovebox installs the package from, in the server's jail, at its first start (`glovebox approve {name}` starts it); pin its version so that the install is the one you reviewed",
                l.hosts().join(", ")
            ));
        }
        match program {
            _ if launcher.is_some() => {}
            "npx" | "bunx" | "pnpm" | "npm" => {
                network.push("registry.npmjs.org".into());
                notes.push("network: registry.npmjs.org, for the package it fetches at start; glovebox installs packages itself only for `npx -y PACKAGE`: use that form, or install the package (pinned) under a read grant and run it with node".into());
            }
            "uvx" | "uv" | "pipx" => {
                network.extend(["pypi.org".into(), "files.pythonhosted.org".into()]);
                notes.push("network: PyPI, for the package it fetches at start; glovebox installs packages itself only for `uvx PACKAGE` (with --from, --with) and `pipx run PACKAGE` (with --spec): use that form, or install the package (pinned) in a venv under a read grant and run its script".into());
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
        if command.contains('/') {
            let entry = discover::resolve(root, command);
            let needed: Vec<String> = crate::mcpwrap::wrap::needed(&entry)
                .iter()
                .map(|p| p.display().to_string())
                .filter(|p| !read.contains(p))
                .collect();
            if !needed.is_empty() {
                notes.push(format!(
                    "fs.read: {} (what its command needs to run: the program, its venv, the Python installation its interpreter's links lead to)",
                    needed.join(", ")
                ));
                read.extend(needed);
            }
        }
        let env = templated(
            Values::Env,
            e.get("env").and_then(Value::as_object),
            None,
            &mut secrets,
            &mut notes,
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
    fn credentials_become_declared_variables_and_are_not_copied() {
        let mut secrets = Map::new();
        let mut notes = Vec::new();
        let env = json!({"GITHUB_TOKEN": "ghp_abc", "API": "${env:API_KEY}", "SAME": "${SAME}",
                         "OPAQUE": "Zx81kq0Pl3mN7vB2cX9aQ4wE", "MEMORY_FILE_PATH": "/data/memory.json",
                         "LOG_LEVEL": "debug", "DEBUG": true});
        let out = templated(Values::Env, env.as_object(), None, &mut secrets, &mut notes);
        assert_eq!(
            json!(out),
            json!({"API": "${API_KEY}", "MEMORY_FILE_PATH": "/data/memory.json",
                   "LOG_LEVEL": "debug", "DEBUG": "true"})
        );
        assert_eq!(
            secrets.keys().collect::<Vec<_>>(),
            ["GITHUB_TOKEN", "API_KEY", "SAME", "OPAQUE"]
        );
        assert!(secrets.values().all(|s| s == &json!({})));
        let said = format!("{out:?}{notes:?}");
        assert!(
            !said.contains("ghp_abc") && !said.contains("Zx81kq"),
            "{said}"
        );
        assert_eq!(notes.len(), 2);
    }

    #[test]
    fn a_remote_servers_headers_are_secrets_bound_to_its_host() {
        let mut secrets = Map::new();
        let mut notes = Vec::new();
        let headers = json!({"Authorization": "Bearer ${env:REMOTE_TOKEN}", "X-Team": "blue",
                             "X-Api-Key": "k-123"});
        let out = templated(
            Values::Headers,
            headers.as_object(),
            Some("mcp.example.com"),
            &mut secrets,
            &mut notes,
        );
        assert_eq!(
            json!(out),
            json!({"Authorization": "Bearer ${REMOTE_TOKEN}", "X-Team": "blue",
                   "X-Api-Key": "${X_API_KEY}"})
        );
        assert_eq!(
            json!(secrets),
            json!({"REMOTE_TOKEN": {"hosts": ["mcp.example.com"]},
                   "X_API_KEY": {"hosts": ["mcp.example.com"]}})
        );
    }
}
