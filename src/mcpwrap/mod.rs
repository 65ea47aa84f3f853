//! MCP servers as glovebox tools (`kind: mcp`, a Glee extension).
//!
//! A manifest `.glee/tools/SERVER/tool.yml` with `exec.mcp` names a stdio
//! MCP server (`entrypoint`, `args`, `cwd`, `env` over declared secrets),
//! or a remote one (`url`, `headers`: [`remote`], reached by glovebox
//! itself as an http tool's request is), and the usual `permissions` and
//! `approval`. glovebox runs the server in
//! one jail per glovebox process ([`server`]: the jail every tool call
//! gets, built from the manifest's policy; started on first use,
//! restarted after a crash with back-off, stopped when idle and at
//! shutdown), speaks MCP to it as its client ([`client`]), and offers
//! each tool it lists as the glovebox tool `SERVER__TOOL` ([`add_to`]),
//! with the server's input and output schemas, filtered by
//! `exec.mcp.tools` ([`rules`]).
//!
//! Every call of such a tool is an ordinary [`crate::engine::Engine::call`]:
//! the parameters are checked against the server's schema before the
//! server sees them, the intent and the result are written to the audit
//! log (naming the server and its tool), approvals are asked where the
//! manifest (or `tools.approve`) says so, and the result is an
//! [`Outcome`] with the usual error kinds. One approval covers the
//! server: the manifest, what it runs, its grants and the digest of what
//! clients are offered of its list as `glovebox approve` showed it
//! ([`offered`], [`crate::approval::Fingerprint::offered`]: every
//! offered tool's name, description, schemas, annotations and `_meta`,
//! the property descriptions of its input schema included); a server
//! that changes any of it afterwards (the MCP "rug pull") needs a new
//! approval before any of its tools runs again, and its tools are not
//! offered until then.
//!
//! `glovebox wrap` ([`wrap`]) makes the same manifest from command-line
//! flags for one server and serves it over stdio.

pub mod client;
pub mod npx;
pub mod remote;
pub mod rules;
pub mod server;
pub mod wrap;

use serde_json::{json, Map, Value};

use crate::jail::Cancel;
use crate::kind::ErrorKind;
use crate::manifest::config::Config;
use crate::manifest::model::{Exec, Format, Outputs, Wrapped};
use crate::manifest::project::{Project, Tool};
use crate::run::{Outcome, Redactor, SecretSource};
use client::ClientError;
use server::{Launch, Unavailable};

pub use server::{generation, shutdown};

/// Between a server's name and its tool's: `SERVER__TOOL`.
pub use crate::manifest::name::MCP_SEPARATOR as SEPARATOR;

/// The project with each MCP server's tools added as `SERVER__TOOL`
/// (each server started, if it is not running yet, to list them). A
/// server that cannot start keeps only its own entry (whose calls say
/// why); a tool whose name would be invalid or taken is left out, with a
/// line on stderr.
pub fn add_to(mut project: Project) -> Project {
    let servers: Vec<usize> = project
        .tools
        .iter()
        .enumerate()
        .filter(|(_, t)| matches!(&t.manifest.exec, Exec::Mcp(m) if m.wrapped.is_none()))
        .map(|(i, _)| i)
        .collect();
    if servers.is_empty() {
        return project;
    }
    let Ok(config) = project.config().cloned() else {
        return project;
    };
    let source = SecretSource::default();
    let mut added: Vec<Tool> = Vec::new();
    for &i in &servers {
        let tool = project.tools[i].clone();
        let s = server::get(&project.root, &tool.name);
        if !may_start(&project, &tool) {
            s.refuse(Unavailable {
                kind: ErrorKind::ApprovalRequired,
                message: format!(
                    "MCP server `{0}` needs an approval before it runs ({1}); `glovebox approve {0}` starts it to read its tool list, shows the list and records it",
                    tool.name,
                    tool.manifest.approval.reason.as_deref().unwrap_or("no reason given"),
                ),
            });
            if let Exec::Mcp(m) = &mut project.tools[i].manifest.exec {
                m.wrapped = Some(Wrapped {
                    server: tool.name.clone(),
                    tool: String::new(),
                    served: String::new(),
                });
            }
            continue;
        }
        let launch = Launch {
            project: &project,
            tool: &tool,
            config: &config,
            secrets: &source,
        };
        let listed = s
            .ensure(&launch)
            .and_then(|r| r.listed().map_err(|e| lost(&tool.name, &e)));
        let offer = listed.map(|l| offered(&tool, &l, true));
        let served = match offer {
            Ok(offer) if !list_approved(&project, &tool, &offer.shown.digest) => {
                // A list no person approved is not served: its names,
                // descriptions and schemas are the server's text, which
                // would reach the agent before anyone read it (a rug
                // pull's instructions). Its tools' calls say why.
                let why = Unavailable {
                    kind: ErrorKind::ApprovalRequired,
                    message: format!(
                        "MCP server `{0}` now serves another tool list than the one approved (a tool added or removed, or a name, description or schema changed), so none of its tools is offered; `glovebox approve {0}` shows the new list and records it",
                        tool.name
                    ),
                };
                eprintln!("glovebox: {}", why.message);
                s.refuse(why);
                String::new()
            }
            Ok(offer) => {
                added.extend(offer.tools);
                offer.shown.digest
            }
            Err(e) => {
                eprintln!("glovebox: {e}");
                String::new()
            }
        };
        if let Exec::Mcp(m) = &mut project.tools[i].manifest.exec {
            m.wrapped = Some(Wrapped {
                server: tool.name.clone(),
                tool: String::new(),
                served,
            });
        }
    }
    let server_names: Vec<String> = servers
        .iter()
        .map(|&i| project.tools[i].name.clone())
        .collect();
    for t in added {
        // `b__c` of server `a` would be `a__b__c`, the name of server
        // `a__b`'s tool `c`: a name is offered only by the server whose
        // namespace it is in (the longest server name it starts with).
        let own = match &t.manifest.exec {
            Exec::Mcp(m) => m.wrapped.as_ref().map(|w| w.server.as_str()),
            _ => None,
        }
        .unwrap_or_default();
        if let Some(other) = server_names
            .iter()
            .find(|n| n.len() > own.len() && t.name.starts_with(&format!("{n}{SEPARATOR}")))
        {
            eprintln!(
                "glovebox: the MCP tool `{}` of server `{own}` is not offered: the name is in the namespace of MCP server `{other}`",
                t.name
            );
            continue;
        }
        if project.tools.iter().any(|o| o.name == t.name) || project.rejected.contains(&t.name) {
            eprintln!(
                "glovebox: the MCP tool `{}` is not offered: a tool of that name exists",
                t.name
            );
            continue;
        }
        project.tools.push(t);
    }
    project.tools.sort_by(|a, b| a.name.cmp(&b.name));
    project
}

/// The tool directory a one-tool load of `name` reads: the server's, for
/// `SERVER__TOOL` when `.glee/tools/SERVER` exists and no directory of
/// that full name does (the longest such SERVER: `a__b__c` is server
/// `a__b`'s tool `c` where both `a` and `a__b` exist, as in
/// [`add_to`]); else `name`.
pub fn directory_of<'a>(root: &std::path::Path, name: &'a str) -> &'a str {
    let tools = root.join(crate::manifest::discover::TOOLS_DIR);
    if tools.join(name).is_dir() {
        return name;
    }
    name.rmatch_indices(SEPARATOR)
        .map(|(i, _)| &name[..i])
        .find(|server| !server.is_empty() && tools.join(server).is_dir())
        .unwrap_or(name)
}

/// For `SERVER__TOOL` where SERVER is an MCP server of `project` that
/// could not list its tools: the Outcome that says why (its start's error
/// kind and message), instead of an unknown tool.
pub fn unlisted(project: &Project, name: &str) -> Option<Outcome> {
    let (server, _) = name.split_once(SEPARATOR)?;
    let tool = project.tools.iter().find(|t| t.name == server)?;
    let Exec::Mcp(m) = &tool.manifest.exec else {
        return None;
    };
    if !m.wrapped.as_ref().is_some_and(|w| w.served.is_empty()) {
        return None;
    }
    let why = server::get(&project.root, server).last_error()?;
    Some(Outcome::failure(
        name,
        why.kind,
        format!(
            "`{name}` is a tool of the MCP server `{server}`, which could not list its tools: {}",
            why.message
        ),
        json!({"mcp_server": server}),
    ))
}

/// Whether the server `tool` may start without a person: its manifest
/// asks no approval, or an approval of its manifest, files and grants
/// holds (the tool list it serves is checked against it at each call).
/// An unapproved server's code never runs, jailed or not.
fn may_start(project: &Project, tool: &Tool) -> bool {
    !tool.manifest.approval.required
        || crate::approval::Store::open(&project.root)
            .and_then(|s| s.approved_but_served(&project.root, tool))
            .unwrap_or(false)
}

/// Whether the tools `server` offers, whose shown text has the digest
/// `hash`, may be offered: the server asks no approval, or its approval
/// holds with that text (the one a person read when approving).
fn list_approved(project: &Project, server: &Tool, hash: &str) -> bool {
    if !server.manifest.approval.required {
        return true;
    }
    let mut now = server.clone();
    if let Exec::Mcp(m) = &mut now.manifest.exec {
        m.wrapped = Some(Wrapped {
            server: server.name.clone(),
            tool: String::new(),
            served: hash.to_string(),
        });
    }
    crate::approval::Store::open(&project.root)
        .and_then(|s| s.is_approved(&project.root, &now))
        .unwrap_or(false)
}

/// Starts the server `name` of `project` (approved or not: a person is
/// about to read what it serves) and returns its tool list, for
/// `glovebox approve`.
pub fn list_for_approval(project: &Project, name: &str) -> Result<server::Listed, Unavailable> {
    let tool = project.tool(name).map_err(|e| Unavailable {
        kind: e.kind(),
        message: e.to_string(),
    })?;
    let config = project.config().map_err(|e| Unavailable {
        kind: e.kind(),
        message: e.to_string(),
    })?;
    let source = SecretSource::default();
    let launch = Launch {
        project,
        tool,
        config,
        secrets: &source,
    };
    server::get(&project.root, name)
        .ensure(&launch)
        .and_then(|r| r.listed().map_err(|e| lost(name, &e)))
        .map(|l| l.as_ref().clone())
}

fn lost(server: &str, e: &ClientError) -> Unavailable {
    Unavailable {
        kind: match e {
            ClientError::Http { kind, .. } => *kind,
            _ => ErrorKind::Internal,
        },
        message: format!("MCP server `{server}`: {e}"),
    }
}

/// What clients are offered of a server's list: its tools as glovebox
/// tools, and the text `glovebox approve` shows of them (their
/// rendering, [`crate::offer::shown`]), whose digest each tool's
/// [`Wrapped::served`] records and the server's approval covers.
#[derive(Debug, Clone)]
pub struct Offered {
    /// The glovebox tools (`SERVER__TOOL`), in the server's order.
    pub tools: Vec<Tool>,
    /// What a person approving the server is shown of them.
    pub shown: crate::offer::Shown,
    /// The server's tools not offered (`exec.mcp.tools`, or a name that
    /// is no tool name), as shown on a terminal.
    pub withheld: Vec<String>,
}

/// What clients are offered of `server`'s list `listed` (`tell`: say on
/// stderr why a tool is left out, and which hints are not believed).
pub fn offered(server: &Tool, listed: &server::Listed, tell: bool) -> Offered {
    let (mut tools, withheld) = tools_of(server, listed, tell);
    let shown = crate::offer::shown(tools.iter().map(|t| &t.manifest));
    for t in &mut tools {
        if let Exec::Mcp(e) = &mut t.manifest.exec {
            if let Some(w) = &mut e.wrapped {
                w.served.clone_from(&shown.digest);
            }
        }
    }
    Offered {
        tools,
        shown,
        withheld,
    }
}

/// The digest of what clients are offered of the list `listed` of the
/// server of `tool` (one of its tools, `w` its [`Wrapped`]).
fn offered_digest(tool: &Tool, w: &Wrapped, listed: &server::Listed) -> String {
    let mut server = tool.clone();
    server.name.clone_from(&w.server);
    server.manifest.name.clone_from(&w.server);
    offered(&server, listed, false).shown.digest
}

/// The glovebox tools of `server`'s list (their [`Wrapped::served`] not
/// yet set), and the names of those left out.
fn tools_of(server: &Tool, listed: &server::Listed, tell: bool) -> (Vec<Tool>, Vec<String>) {
    let Exec::Mcp(exec) = &server.manifest.exec else {
        return (Vec::new(), Vec::new());
    };
    let mut out = Vec::new();
    let mut withheld = Vec::new();
    for t in &listed.tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        if !rules::offered(&exec.tools, name) {
            withheld.push(crate::manifest::name::shown(name));
            continue;
        }
        let full = format!("{}{SEPARATOR}{name}", server.name);
        if !crate::manifest::name::is_valid(&full) {
            withheld.push(crate::manifest::name::shown(name));
            if tell {
                eprintln!(
                    "glovebox: MCP server `{}`: its tool `{}` is not offered: `{}` is not a tool name ({})",
                    server.name,
                    crate::manifest::name::shown(name),
                    crate::manifest::name::shown(&full),
                    crate::manifest::name::GRAMMAR
                );
            }
            continue;
        }
        if tell {
            contradicted_hints(server, name, t);
        }
        let mut m = server.manifest.clone();
        m.name = full.clone();
        m.description = printable(t.get("description").and_then(Value::as_str).unwrap_or(name));
        m.inputs.schema = match t.get("inputSchema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => json!({"type": "object"}),
        };
        // Only an object schema is offered (to MCP clients and the HTTP
        // API alike), so only one is shown and approved.
        m.outputs = Outputs {
            format: Format::Json,
            schema: t
                .get("outputSchema")
                .filter(|s| s.get("type") == Some(&json!("object")))
                .cloned(),
        };
        m.examples = Vec::new();
        if rules::needs_approval(&exec.tools, name) && !m.approval.required {
            m.approval.required = true;
            m.approval.reason = Some(format!(
                "calls of the MCP tool `{name}` need approval (exec.mcp.tools.approve)"
            ));
        }
        if let Exec::Mcp(e) = &mut m.exec {
            e.wrapped = Some(Wrapped {
                server: server.name.clone(),
                tool: name.to_string(),
                served: String::new(),
            });
        }
        out.push(Tool {
            name: full,
            file: server.file.clone(),
            manifest: m,
            origin: server.origin,
        });
    }
    (out, withheld)
}

/// `text` without control characters (but newlines and tabs): what a
/// server says is shown on terminals (`glovebox list`, `approve`), where
/// an escape sequence could hide or rewrite what a person reads.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// Says once per process (on stderr) when a server's own hints for its
/// tool `name` claim less than its grants allow: glovebox's hints come
/// from the grants ([`crate::offer::mcp_annotations`]), so the claim is
/// dropped, not believed.
fn contradicted_hints(server: &Tool, name: &str, t: &Value) {
    use std::sync::{Mutex, OnceLock, PoisonError};
    static TOLD: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    let Some(a) = t.get("annotations") else {
        return;
    };
    let p = &server.manifest.permissions;
    let (writes, net) = (!p.fs.write.is_empty(), p.network.enabled());
    let mut claims = Vec::new();
    if a.get("readOnlyHint") == Some(&Value::Bool(true)) && (writes || net) {
        claims.push("read-only");
    }
    if a.get("destructiveHint") == Some(&Value::Bool(false)) && writes {
        claims.push("not destructive");
    }
    if a.get("openWorldHint") == Some(&Value::Bool(false)) && net {
        claims.push("closed-world");
    }
    if claims.is_empty() {
        return;
    }
    let key = format!("{}{SEPARATOR}{name}", server.name);
    let first = TOLD
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.clone());
    if first {
        eprintln!(
            "glovebox: warning: MCP server `{}` says its tool `{}` is {}, but its grants allow {}: glovebox's hints follow the grants",
            server.name,
            printable(name),
            claims.join(", "),
            match (writes, net) {
                (true, true) => "writes and the network",
                (true, false) => "writes",
                _ => "the network",
            }
        );
    }
}

/// One call of a server's tool, decided by the engine (its inputs
/// checked, its approval, its intent written).
#[derive(Debug)]
pub struct Call<'a> {
    /// The project.
    pub project: &'a Project,
    /// Its config.
    pub config: &'a Config,
    /// The tool called (`SERVER__TOOL`).
    pub tool: &'a Tool,
    /// The checked parameters.
    pub params: &'a Map<String, Value>,
    /// Where the server's secrets come from, if it starts for this call.
    pub secrets: &'a SecretSource,
    /// The caller approved this call now.
    pub approved: bool,
    /// Fires when the client cancels the call.
    pub cancel: Option<&'a Cancel>,
    /// Where the server's progress reports for the call go.
    pub relay: Option<&'a client::Relay>,
    /// Removes secret values from what comes back.
    pub redact: &'a Redactor,
}

/// Runs `call` in the server's jail; `audit` receives the fields the
/// result's audit line adds (`mcp_server=`, `mcp_tool=`).
pub fn call(c: &Call<'_>, audit: &mut dyn FnMut(&'static str, String)) -> Outcome {
    let name = c.tool.name.as_str();
    let Exec::Mcp(exec) = &c.tool.manifest.exec else {
        return Outcome::failure(name, ErrorKind::Internal, "not an MCP tool", json!({}));
    };
    let Some(w) = exec.wrapped.as_ref().filter(|w| !w.tool.is_empty()) else {
        return Outcome::failure(
            name,
            ErrorKind::ToolNotFound,
            format!("`{name}` is an MCP server, not a tool: call its tools, named {name}{SEPARATOR}TOOL (see glovebox list)"),
            json!({}),
        );
    };
    audit("mcp_server", w.server.clone());
    audit("mcp_tool", w.tool.clone());
    let details = || json!({"mcp_server": w.server, "mcp_tool": w.tool});
    let s = server::get(&c.project.root, &w.server);
    let launch = Launch {
        project: c.project,
        tool: c.tool,
        config: c.config,
        secrets: c.secrets,
    };
    let running = match s.ensure(&launch) {
        Ok(r) => r,
        Err(e) => return Outcome::failure(name, e.kind, c.redact.text(&e.message), details()),
    };
    let listed = match running.listed() {
        Ok(l) => l,
        Err(e) => {
            let why = lost(&w.server, &e);
            s.crashed(&running, why.clone());
            return Outcome::failure(name, why.kind, why.message, details());
        }
    };
    if c.tool.manifest.approval.required
        && !c.approved
        && offered_digest(c.tool, w, &listed) != w.served
    {
        return Outcome::failure(
            name,
            ErrorKind::ApprovalRequired,
            format!(
                "MCP server `{}` now serves another tool list than the one approved (a tool added or removed, or a name, description or schema changed); `glovebox approve {}` shows the new list and records it",
                w.server, w.server
            ),
            json!({
                "mcp_server": w.server,
                "mcp_tool": w.tool,
                "approve_with": format!("glovebox approve {}", w.server),
                "changed": ["the MCP server now serves another tool list"],
            }),
        );
    }
    if !listed
        .tools
        .iter()
        .any(|t| t.get("name").and_then(Value::as_str) == Some(w.tool.as_str()))
    {
        return Outcome::failure(
            name,
            ErrorKind::ToolNotFound,
            format!(
                "MCP server `{}` no longer lists the tool `{}`; list the tools again",
                w.server, w.tool
            ),
            details(),
        );
    }
    let _busy = running.busy();
    let reply = running.conn().call_tool(
        &w.tool,
        c.params,
        std::time::Duration::from_millis(exec.timeout_ms),
        c.cancel,
        c.relay,
    );
    let result = match reply {
        Ok(r) => r,
        Err(ClientError::Timeout { ms }) => {
            let mut d = details();
            d["limit"] = json!("timeout_ms");
            return Outcome::failure(
                name,
                ErrorKind::Timeout,
                format!("MCP server `{}` did not answer within {ms} ms (exec.mcp.timeout_ms); the call was cancelled", w.server),
                d,
            );
        }
        Err(ClientError::Cancelled) => {
            let mut d = details();
            d["cancelled"] = json!(true);
            return Outcome::failure(
                name,
                ErrorKind::Cancelled,
                "the client cancelled the call; the server was told",
                d,
            );
        }
        Err(ClientError::Closed { why }) => {
            // Wait briefly for the jail's own account of the end.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
            let mut ended = running.jail_ended();
            while ended.is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
                ended = running.jail_ended();
            }
            let (kind, said) = ended.unwrap_or((ErrorKind::Internal, why));
            let message = format!(
                "MCP server `{}` ended during the call ({}); it is started again on the next call",
                w.server,
                c.redact.text(&said)
            );
            s.crashed(
                &running,
                Unavailable {
                    kind,
                    message: message.clone(),
                },
            );
            return Outcome::failure(name, kind, message, details());
        }
        Err(ClientError::Http { kind, message }) => {
            return Outcome::failure(
                name,
                kind,
                format!("MCP server `{}`: {}", w.server, c.redact.text(&message)),
                details(),
            );
        }
        Err(ClientError::Rpc { code, message }) => {
            let mut d = details();
            d["code"] = json!(code);
            return Outcome::failure(
                name,
                if code == -32602 {
                    ErrorKind::InputInvalid
                } else {
                    ErrorKind::ExitCode
                },
                format!(
                    "MCP server `{}` refused the call: {}",
                    w.server,
                    c.redact.text(&message)
                ),
                d,
            );
        }
    };
    s.succeeded();
    outcome(name, w, &result, c.redact)
}

/// A `tools/call` result as an Outcome: `structuredContent`, else the
/// text of its content (or the content itself when not all text); an
/// `isError` result is a failed call (`exit_code`, as a tool's own
/// failure is for a command).
fn outcome(name: &str, w: &Wrapped, result: &Value, redact: &Redactor) -> Outcome {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let texts: Option<Vec<&str>> = content
        .iter()
        .map(|c| {
            (c.get("type").and_then(Value::as_str) == Some("text"))
                .then(|| c.get("text").and_then(Value::as_str))
                .flatten()
        })
        .collect();
    if result.get("isError") == Some(&Value::Bool(true)) {
        let text = texts.map(|t| t.join("\n")).unwrap_or_default();
        return Outcome::failure(
            name,
            ErrorKind::ExitCode,
            redact.text(&format!(
                "MCP server `{}`: its tool `{}` failed: {text}",
                w.server, w.tool
            )),
            redact.value(json!({"mcp_server": w.server, "mcp_tool": w.tool, "content": content})),
        );
    }
    let output = match (result.get("structuredContent"), texts) {
        (Some(s), _) if !s.is_null() => s.clone(),
        (_, Some(t)) => Value::String(t.join("\n")),
        (_, None) => Value::Array(content),
    };
    Outcome::success(name, redact.value(output))
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_a_server_says_is_printed_without_escapes() {
        assert_eq!(
            super::printable("ok\n\tline \u{1b}[2Kgone\u{7}\u{9b}"),
            "ok\n\tline \u{FFFD}[2Kgone\u{FFFD}\u{FFFD}"
        );
    }
}
