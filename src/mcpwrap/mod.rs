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
pub mod install;
pub mod npx;
pub mod pypi;
pub mod remote;
pub mod rules;
pub mod server;
pub mod wrap;

use std::path::PathBuf;

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
        let running = if server::in_background() {
            match s.ensure_background(&launch) {
                server::Status::Running(r) => Ok(r),
                // Its tools are added when it is ready (a reload).
                server::Status::Starting => {
                    if let Exec::Mcp(m) = &mut project.tools[i].manifest.exec {
                        m.wrapped = Some(Wrapped {
                            server: tool.name.clone(),
                            tool: String::new(),
                            served: String::new(),
                        });
                    }
                    continue;
                }
                server::Status::Failed(e) => Err(e),
            }
        } else {
            s.ensure(&launch)
        };
        let listed = running.and_then(|r| r.listed().map_err(|e| lost(&tool.name, &e)));
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
                say_once(&project.root, &tool.name, &why.message);
                s.refuse(why);
                String::new()
            }
            Ok(offer) => {
                added.extend(offer.tools);
                offer.shown.digest
            }
            Err(e) => {
                // The reason itself, not when the next start is (which
                // changes at each load).
                let why = s.last_error().map_or(e.message, |l| l.message);
                say_once(&project.root, &tool.name, &why);
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

/// Prints `glovebox: MESSAGE` on stderr the first time this process sees
/// it for that server (a project is loaded again at each change; a
/// server that cannot start says so once, not at every load).
fn say_once(root: &std::path::Path, server: &str, message: &str) {
    use std::sync::{Mutex, OnceLock, PoisonError};
    static SAID: OnceLock<Mutex<std::collections::HashSet<(PathBuf, String, String)>>> =
        OnceLock::new();
    let first = SAID
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((root.to_path_buf(), server.to_string(), message.to_string()));
    if first {
        eprintln!("glovebox: {message}");
    }
}

/// The MCP servers of `project` that offer no tools, and why: a start
/// that failed, or an approval that is missing. (A server still starting
/// is not one of them.)
pub fn failures(project: &Project) -> Vec<(String, Unavailable)> {
    project
        .tools
        .iter()
        .filter(|t| {
            matches!(&t.manifest.exec, Exec::Mcp(m)
                if m.wrapped.as_ref().is_some_and(|w| w.tool.is_empty() && w.served.is_empty()))
        })
        .filter_map(|t| {
            let s = server::get(&project.root, &t.name);
            if s.starting() {
                return None;
            }
            s.last_error().map(|why| (t.name.clone(), why))
        })
        .collect()
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
    let s = server::get(&project.root, server);
    if s.starting() {
        return Some(Outcome::failure(
            name,
            ErrorKind::Internal,
            format!(
                "the tool is not offered yet: MCP server `{server}` is still starting; its tools are offered when it is ready (the client is told: list_changed)"
            ),
            json!({"mcp_server": server, "starting": true}),
        ));
    }
    let why = s.last_error()?;
    Some(Outcome::failure(
        name,
        why.kind,
        format!("the tool is not offered: {}", why.message),
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
    let mut contradictions = Vec::new();
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
            let claims = contradicted(server, t);
            if !claims.is_empty() {
                contradictions.push((name.to_string(), claims));
            }
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
    say_contradicted(server, &contradictions);
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

/// Longest text of a server's own (its stderr quoted in why it ended, an
/// install's output) glovebox relays, in bytes.
pub const RELAY_MAX: usize = 2048;

/// What glovebox relays of a server's own text — the tail of its stderr
/// or of its install's output, in a failure's reason that reaches the
/// client (the `initialize` error, a log message, a call's error) and the
/// terminal: hostile input (DESIGN.md, invariant 15). What would act on a
/// terminal is shown escaped ([`crate::terminal::escaped`]: `\x1b`,
/// `\u{9b}`), as is every code point a person does not see
/// ([`crate::invisible::escape`]: bidi overrides, zero-width characters,
/// the tag block), so nothing in it can move the cursor, rewrite a line
/// or hide text from the person reading; the end is kept (`…` and the
/// last [`RELAY_MAX`] bytes: where an error says what went wrong).
pub fn relayed(text: &str) -> String {
    let text = text.trim_end();
    let cut = text.len().saturating_sub(RELAY_MAX);
    let cut = (cut..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    let shown = crate::terminal::escaped(&text[cut..]);
    let shown = crate::invisible::escape(&shown);
    if cut > 0 {
        format!("…{shown}")
    } else {
        shown.into_owned()
    }
}

/// What a server's own hints for one of its tools claim that its grants
/// contradict (`read-only` with writes or the network, `not destructive`
/// with writes, `closed-world` with the network): glovebox's hints come
/// from the grants ([`crate::export::mcp_annotations`]), so the claim is
/// dropped, not believed ([`say_contradicted`] says so).
fn contradicted(server: &Tool, t: &Value) -> Vec<&'static str> {
    let Some(a) = t.get("annotations") else {
        return Vec::new();
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
    claims
}

/// Tools named in full in [`say_contradicted`]'s line; the others are
/// counted.
const NAMED_TOOLS: usize = 4;

/// Says in one line on stderr, once per process and server (not once per
/// tool), which of the server's tools claim less than its grants allow
/// (`found`: each tool's name and [`contradicted`] claims).
fn say_contradicted(server: &Tool, found: &[(String, Vec<&'static str>)]) {
    use std::sync::{Mutex, OnceLock, PoisonError};
    static TOLD: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    if found.is_empty() {
        return;
    }
    let first = TOLD
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(server.name.clone());
    if first {
        eprintln!("glovebox: warning: {}", contradiction(server, found));
    }
}

/// The line of [`say_contradicted`].
fn contradiction(server: &Tool, found: &[(String, Vec<&'static str>)]) -> String {
    let p = &server.manifest.permissions;
    let allowed = match (!p.fs.write.is_empty(), p.network.enabled()) {
        (true, true) => "writes and the network",
        (true, false) => "writes",
        _ => "the network",
    };
    let mut claims: Vec<&str> = Vec::new();
    for c in found.iter().flat_map(|(_, c)| c) {
        if !claims.contains(c) {
            claims.push(c);
        }
    }
    let claims = claims.join(", ");
    let said = match found {
        [(name, _)] => format!("its tool `{}` is {claims}", printable(name)),
        _ => {
            let mut names: Vec<String> = found
                .iter()
                .take(NAMED_TOOLS)
                .map(|(n, _)| format!("`{}`", printable(n)))
                .collect();
            if found.len() > NAMED_TOOLS {
                names.push(format!("{} more", found.len() - NAMED_TOOLS));
            }
            format!(
                "{} of its tools are {claims} ({})",
                found.len(),
                names.join(", ")
            )
        }
    };
    format!(
        "MCP server `{}` says {said}, but its grants allow {allowed}: glovebox's hints follow the grants",
        server.name
    )
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
/// result's audit line adds (`mcp_server=`, `mcp_tool=`, and `egress=`:
/// the connections the server's egress proxy decided while the call ran,
/// whose refusals are the Outcome's warnings too, and said on stderr once
/// each with the fix: a 403's reason is otherwise only in its body,
/// which the server may not show).
pub fn call(c: &Call<'_>, audit: &mut dyn FnMut(&'static str, String)) -> Outcome {
    let mut egress = None;
    let mut outcome = call_server(c, audit, &mut egress);
    if let Some((running, before)) = egress {
        report_egress(c, &running, before, &mut outcome, audit);
    }
    outcome
}

/// Adds the egress decisions of `running`'s proxy past the first `before`
/// to `outcome` and `audit` (see [`call`]).
fn report_egress(
    c: &Call<'_>,
    running: &server::Running,
    before: usize,
    outcome: &mut Outcome,
    audit: &mut dyn FnMut(&'static str, String),
) {
    let Some(log) = running.egress() else {
        return;
    };
    let (all, _) = log.connections();
    let new: Vec<crate::egress::log::Connection> = all.into_iter().skip(before).collect();
    if new.is_empty() {
        return;
    }
    audit(
        "egress",
        c.redact
            .value(serde_json::to_value(&new).unwrap_or(Value::Null))
            .to_string(),
    );
    let words = wrap::Words::of(&c.project.root);
    let mut refusals: Vec<String> = Vec::new();
    for conn in &new {
        let Some(r) = conn.refusal() else { continue };
        let r = c.redact.text(&r);
        if refusals.contains(&r) {
            continue;
        }
        let fix = conn
            .reason
            .as_deref()
            .and_then(|why| words.fix_refusal(why, &conn.host))
            .map(|f| format!(": {f}"))
            .unwrap_or_default();
        say_once(
            &c.project.root,
            &c.tool.name,
            &format!(
                "MCP server `{}`: the egress proxy {r}{fix}",
                running_name(c)
            ),
        );
        refusals.push(r);
    }
    if refusals.is_empty() {
        return;
    }
    if let Some(Value::Object(details)) = outcome.error.as_mut().map(|e| &mut e.details) {
        details.insert("egress_refused".into(), json!(refusals));
    }
    outcome.warnings.extend(refusals);
}

/// The server a call's tool belongs to.
fn running_name(c: &Call<'_>) -> String {
    match &c.tool.manifest.exec {
        Exec::Mcp(m) => m
            .wrapped
            .as_ref()
            .map_or_else(|| c.tool.name.clone(), |w| w.server.clone()),
        _ => c.tool.name.clone(),
    }
}

/// [`call`] without the egress report; `egress` is set to the running
/// server and its proxy's count of decisions when the call is sent.
fn call_server(
    c: &Call<'_>,
    audit: &mut dyn FnMut(&'static str, String),
    egress: &mut Option<(std::sync::Arc<server::Running>, usize)>,
) -> Outcome {
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
    *egress = Some((
        running.clone(),
        running.egress().map_or(0, |l| l.connections().0.len()),
    ));
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
    fn what_a_server_says_is_relayed_without_escapes_or_invisible_text() {
        assert_eq!(
            super::relayed("ok\n\tline \u{1b}[2Kgone\u{7}\u{9b} a\u{202e}b\u{200b}c\u{e0041}\n"),
            "ok\n\tline \\x1b[2Kgone\\x07\\u{9b} a\\u{202e}b\\u{200b}c\\u{e0041}"
        );
        let long = format!("{}é{}", "x".repeat(3000), "the reason");
        let r = super::relayed(&long);
        assert!(r.starts_with('…') && r.ends_with("the reason"), "{r}");
        assert!(r.len() <= super::RELAY_MAX + 4, "{}", r.len());
    }

    #[test]
    fn contradicted_hints_are_said_in_one_line_per_server() {
        let server: crate::manifest::project::Tool = crate::manifest::project::Tool {
            name: "fs".into(),
            file: "/p/.glee/tools/fs/tool.yml".into(),
            manifest: serde_json::from_value(serde_json::json!({
                "name": "fs", "description": "d", "kind": "mcp", "version": 1,
                "inputs": {"schema": {"type": "object"}}, "outputs": {"format": "json"},
                "exec": {"mcp": {"entrypoint": "node"}},
                "permissions": {"fs": {"write": ["/d"]}},
            }))
            .unwrap(),
            origin: crate::manifest::project::Origin::Dir,
        };
        let one = [("echo".to_string(), vec!["read-only", "not destructive"])];
        assert_eq!(
            super::contradiction(&server, &one),
            "MCP server `fs` says its tool `echo` is read-only, not destructive, but its grants allow writes: glovebox's hints follow the grants"
        );
        let many: Vec<(String, Vec<&str>)> = (0..11)
            .map(|i| {
                (
                    format!("t{i}"),
                    vec![if i == 3 {
                        "not destructive"
                    } else {
                        "read-only"
                    }],
                )
            })
            .collect();
        assert_eq!(
            super::contradiction(&server, &many),
            "MCP server `fs` says 11 of its tools are read-only, not destructive (`t0`, `t1`, `t2`, `t3`, 7 more), but its grants allow writes: glovebox's hints follow the grants"
        );
    }

    #[test]
    fn what_a_server_says_is_printed_without_escapes() {
        assert_eq!(
            super::printable("ok\n\tline \u{1b}[2Kgone\u{7}\u{9b}"),
            "ok\n\tline \u{FFFD}[2Kgone\u{FFFD}\u{FFFD}"
        );
    }
}
