//! `glovebox learn TOOL` and `glovebox sandbox --learn -- CMD`: run in an
//! observing jail on a throw-away copy, then propose the narrowest
//! permissions (see `glovebox::learn`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::Value;

use glovebox::engine::{Caller, Engine};
use glovebox::jail::observe::Observer;
use glovebox::jail::{self, Limits, Output, Spec, Stdin};
use glovebox::learn::{self, Proposal, Workspace};
use glovebox::manifest::project::Origin;

use super::{Cli, EXIT_SANDBOX_UNAVAILABLE, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to learn.
    pub name: String,
    /// Parameters of one learning call, as JSON (repeatable: each is one
    /// call; default: one call with `{}`).
    #[arg(long, value_name = "JSON")]
    pub params: Vec<String>,
    /// Let the learning run reach the network through the egress proxy
    /// (any public host, logged) even if the manifest has `network: false`.
    #[arg(long)]
    pub net: bool,
    /// Also let the learning run read this path (repeatable): the view is
    /// otherwise the system's, the toolchains and caches below the home
    /// and the tool's declared grants; never a place secrets live unless
    /// named here.
    #[arg(long, value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Write the proposal into the tool's `tool.yml` (and create the
    /// directories the run made). Exit status 0 when it was written,
    /// non-zero when not (a failed learning run writes nothing).
    #[arg(long)]
    pub apply: bool,
    /// Take in a withheld grant (a place secrets live, a file run later, a
    /// write outside the project), named exactly as the proposal shows it
    /// (`~/…` below the home; repeatable).
    #[arg(long, value_name = "PATH")]
    pub include: Vec<String>,
    /// Approve the learning calls (for tools that require approval).
    #[arg(long)]
    pub yes: bool,
    /// Print one JSON object: the outcomes and the proposal.
    #[arg(long)]
    pub json: bool,
}

/// The copy's manifest for a learning run: the learning view readable,
/// the copy readable (and executable) and writable, the network as asked;
/// the secrets as [`learning_secrets`] has them.
fn learning_block(read: &[PathBuf], network: bool, secrets: Option<&str>) -> String {
    let list: Vec<String> = std::iter::once(".".to_string())
        .chain(read.iter().map(|p| p.display().to_string()))
        .collect();
    let mut s = format!(
        "permissions:\n  network: {network}\n  fs:\n    read: {}\n    write: [\".\"]\n",
        serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
    );
    if let Some(secrets) = secrets {
        s.push_str(&format!("  secrets: {secrets}\n"));
    }
    s
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let engine = match super::engine_for(cli, &args.name) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("glovebox: {e:#}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let tool = match engine.tool(&args.name) {
        Ok(t) => t.clone(),
        Err(e) => {
            eprintln!("glovebox: {e:#}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    if tool.origin != Origin::Dir {
        eprintln!(
            "glovebox: learn proposes a tool.yml, and `{}` is not a .glee/tools/<name>/tool.yml tool; run `glovebox migrate` first",
            args.name
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let root = engine.project().root.clone();
    let perms = &tool.manifest.permissions;
    let secrets = (!perms.secrets.is_empty())
        .then(|| serde_json::to_string(&perms.secrets).ok())
        .flatten();
    let network = perms.network.enabled() || args.net;
    let params: Vec<Value> = if args.params.is_empty() {
        vec![Value::Object(Default::default())]
    } else {
        args.params
            .iter()
            .map(|p| serde_json::from_str(p).with_context(|| format!("--params {p:?} is not JSON")))
            .collect::<anyhow::Result<_>>()?
    };
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let read = match existing_reads(&here, &args.read) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("glovebox: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };

    let ws = Workspace::copy_of(&root)?;
    let rel = tool.file.strip_prefix(&root).unwrap_or(&tool.file);
    let copy_file = ws.copy.join(rel);
    let text = std::fs::read_to_string(&copy_file)
        .with_context(|| format!("cannot read {}", copy_file.display()))?;
    // The person's grants: the tool's declared ones and --read, visible
    // as named and proposed as named.
    let mut named: Vec<(learn::Access, PathBuf)> = Vec::new();
    for (access, list) in [
        (learn::Access::Read, &perms.fs.read),
        (learn::Access::Write, &perms.fs.write),
    ] {
        named.extend(
            list.iter()
                .map(|s| (access, glovebox::manifest::discover::resolve(&root, s))),
        );
    }
    named.extend(read.into_iter().map(|p| (learn::Access::Read, p)));
    let include = args
        .include
        .iter()
        .map(|s| glovebox::manifest::discover::resolve(&here, s))
        .collect();
    let bounds = learn::Bounds::new(named, &[], &ws, include);
    let learning = glovebox::learn::propose::replace_block(
        &text,
        &learning_block(
            &bounds.view.read,
            network,
            learning_secrets(&perms.secrets, network).as_deref(),
        ),
    );
    std::fs::write(&copy_file, learning)
        .with_context(|| format!("cannot write {}", copy_file.display()))?;

    let mut copy_engine = match Engine::open_tool(Some(&ws.copy), None, &args.name) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("glovebox: the learning copy did not load: {e:#}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let observer = Arc::new(Observer::new());
    copy_engine.observe(observer.clone());
    let caller = Caller {
        id: "learn".into(),
        approved: args.yes,
        approves_once: true,
        prints_to_stderr: false,
        ..Caller::default()
    };
    let mut outcomes = Vec::new();
    let mut unavailable = false;
    for (i, p) in params.into_iter().enumerate() {
        let outcome = copy_engine.call(&args.name, p, &caller);
        if !args.json {
            match &outcome.error {
                None => eprintln!("glovebox: learning call {}: ok", i + 1),
                Some(e) => eprintln!(
                    "glovebox: learning call {} FAILED: {} ({})",
                    i + 1,
                    glovebox::terminal::shown(
                        &e.message,
                        std::io::IsTerminal::is_terminal(&std::io::stderr())
                    ),
                    serde_json::to_value(e.kind).unwrap_or_default()
                ),
            }
        }
        unavailable |= outcome
            .error
            .as_ref()
            .is_some_and(|e| e.kind == glovebox::kind::ErrorKind::SandboxUnavailable);
        outcomes.push(outcome);
    }
    if unavailable {
        if args.json {
            println!("{}", serde_json::json!({"ok": false, "outcomes": outcomes}));
        }
        return Ok(ExitCode::from(EXIT_SANDBOX_UNAVAILABLE));
    }
    let all_ok = outcomes.iter().all(|o| o.error.is_none());
    // What the jail grants this tool anyway: its runtime (interpreter,
    // venv).
    let granted: Vec<PathBuf> = engine
        .policy(&args.name)
        .map(|p| p.runtime)
        .unwrap_or_default();
    // The tool's environment is its manifest's (its secrets, reported
    // per host in the proposal): nothing to explain beyond them.
    let proposal = learn::propose(&learn::Run {
        observer: &observer,
        workspace: Some(&ws),
        root: &root,
        network,
        succeeded: all_ok,
        granted: &granted,
        env: &[],
        bounds: &bounds,
    });
    drop(ws);
    let current_net = serde_json::to_string(&perms.network).unwrap_or_default();
    let diff = proposal.diff(&perms.fs.read, &perms.fs.write, &current_net);
    let block = proposal.manifest_block(secrets.as_deref());
    let was_approved = engine.is_approved(&args.name);
    // A failed learning run's proposal is what it used before it failed:
    // never written (it could drop what the tool needs after that point,
    // and the tool chose where it failed).
    let applied = if args.apply && all_ok {
        let made = proposal.apply(&tool.file, secrets.as_deref())?;
        let lint = lint_one(&root, &args.name);
        Some((made, lint))
    } else {
        None
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "ok": all_ok,
                "outcomes": outcomes,
                "proposal": proposal,
                "permissions": block,
                "diff": diff,
                "applied": applied.as_ref().map(|(made, lint)| serde_json::json!({
                    "file": tool.file, "created": made, "lint": lint.as_ref().err(),
                    "approval_voided": was_approved,
                })),
            })
        );
    } else {
        if all_ok {
            println!(
                "# proposed by `glovebox learn {}` for {}",
                args.name,
                tool.file.display()
            );
        } else {
            println!(
                "# `glovebox learn {}` FAILED (see above): what the failed run used, not a working set, for {}",
                args.name,
                tool.file.display()
            );
        }
        print!("{block}");
        let mut notes = String::new();
        proposal.notes(&mut notes);
        eprint!("{notes}");
        eprintln!("difference with the manifest:\n{diff}");
        match &applied {
            Some((made, lint)) => {
                for m in made {
                    eprintln!("glovebox: created {}", m.display());
                }
                match lint {
                    Ok(()) => eprintln!("glovebox: wrote {} (lint: ok)", tool.file.display()),
                    Err(e) => eprintln!(
                        "glovebox: wrote {}, but lint says: {e}",
                        tool.file.display()
                    ),
                }
                if was_approved {
                    eprintln!(
                        "glovebox: the approval of {} no longer holds (its permissions changed): review them and run `glovebox approve {}`",
                        args.name, args.name
                    );
                }
            }
            None if args.apply => eprintln!(
                "glovebox: the learning run failed, so nothing was written to {}; fix what failed and learn again",
                tool.file.display()
            ),
            None => eprintln!(
                "glovebox: nothing written; run again with --apply to write it into {}",
                tool.file.display()
            ),
        }
    }
    // With --apply: 0 when the proposal was written, 1 when not. Without:
    // 0 when every learning call succeeded.
    let ok = if args.apply {
        applied.is_some()
    } else {
        all_ok
    };
    Ok(ExitCode::from(if ok { 0 } else { 1 }))
}

/// `paths` made absolute against `here`, each checked to exist: a grant
/// of a path that does not exist grants nothing.
fn existing_reads(here: &Path, paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    paths
        .iter()
        .map(|p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                here.join(p)
            };
            if std::fs::symlink_metadata(&abs).is_err() {
                anyhow::bail!(
                    "--read {}: no such file or directory, so nothing would be readable there: create it first (mkdir -p for a directory), or name the directory that holds it",
                    p.display()
                );
            }
            Ok(abs)
        })
        .collect()
}

/// The declared secrets as the learning copy's manifest has them: as
/// declared, except that with the network on a secret bound to no host
/// is a placeholder bound to none (`hosts: []`), so that its real value
/// cannot leave through the learning run's any-host network (the proposal
/// says where its placeholder went: the hosts to bind it to).
fn learning_secrets(
    secrets: &indexmap::IndexMap<String, glovebox::manifest::model::Secret>,
    network: bool,
) -> Option<String> {
    if secrets.is_empty() {
        return None;
    }
    let mut v = serde_json::to_value(secrets).ok()?;
    if network {
        if let Some(map) = v.as_object_mut() {
            for s in map.values_mut() {
                if let Some(o) = s.as_object_mut() {
                    if o.get("hosts").is_none_or(Value::is_null) {
                        o.insert("hosts".into(), Value::Array(Vec::new()));
                    }
                }
            }
        }
    }
    serde_json::to_string(&v).ok()
}

/// The tool's diagnostics after `--apply`, as `glovebox lint` reports
/// them.
fn lint_one(root: &Path, name: &str) -> Result<(), String> {
    let project = glovebox::manifest::project::Project::load(root).map_err(|e| e.to_string())?;
    let found: Vec<String> = project
        .diagnostics
        .iter()
        .filter(|d| d.to_string().contains(&format!("/{name}/")))
        .map(ToString::to_string)
        .collect();
    if !found.is_empty() || project.rejected.iter().any(|r| r == name) {
        return Err(found.join("; "));
    }
    Ok(())
}

/// `glovebox sandbox --learn -- CMD`.
pub fn sandbox(args: &super::sandbox::Args) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = args
        .cwd
        .as_deref()
        .map(|c| {
            if c.is_absolute() {
                c.to_path_buf()
            } else {
                here.join(c)
            }
        })
        .unwrap_or_else(|| here.clone());
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout must be a positive number of seconds");
    }
    if args.net.as_deref() == Some("direct") {
        anyhow::bail!(
            "--learn observes the network through the egress proxy: use --net, not --net=direct"
        );
    }
    // --read widens the view; --write names a place the command may write
    // (outside the working directory it stays read-only while learning:
    // a learning run writes only to its copy), both proposed as named.
    let mut named: Vec<(learn::Access, PathBuf)> = existing_reads(&here, &args.read)?
        .into_iter()
        .map(|p| (learn::Access::Read, p))
        .collect();
    for w in &args.write {
        let abs = if w.is_absolute() {
            w.clone()
        } else {
            here.join(w)
        };
        if std::fs::symlink_metadata(&abs).is_err() {
            anyhow::bail!(
                "--write {}: no such file or directory, so nothing would be writable there: create it first (mkdir -p for a directory, touch for a file), or grant the directory that will hold it",
                w.display()
            );
        }
        named.push((learn::Access::Write, abs));
    }
    let mut env_typed = Vec::new();
    let mut env_given = Vec::new();
    for item in &args.env {
        let Some((k, v)) = super::sandbox::env_item(item) else {
            continue;
        };
        // The flags name the variable as typed (`NAME`, or `NAME=VALUE`
        // when typed so), never a value taken from the environment.
        env_typed.push(item.clone());
        env_given.push((k.to_string_lossy().into_owned(), v));
    }
    let ws = Workspace::copy_of(&cwd)?;
    let bounds = learn::Bounds::new(named, &learn::env_dirs(&env_given), &ws, Vec::new());
    let mut spec = Spec::new(args.command.iter().cloned());
    spec.cwd = ws.copy.clone();
    // The copy is read (and executed: a venv's programs, a build's
    // binaries) and written; the view read-only.
    spec.fs.read = bounds.view.read.clone();
    spec.fs.read.push(ws.copy.clone());
    spec.fs.write = vec![ws.copy.clone()];
    spec.network = args.net.is_some();
    let gateway = spec.network.then(|| {
        Arc::new(glovebox::egress::Gateway::new(glovebox::egress::Rules {
            allow: None,
            allow_private: args.allow_private,
            intercept: None,
        }))
    });
    if let Some(g) = &gateway {
        spec.gateway = Some(g.clone() as Arc<dyn jail::Gateway>);
    }
    spec.degraded = false;
    spec.limits = Limits {
        wall: std::time::Duration::from_secs_f64(args.timeout),
        memory_bytes: super::sandbox::parse_size(&args.memory)?,
        pids: args.pids,
        output_bytes: super::sandbox::parse_size(&args.max_output)?,
        file_size_bytes: super::sandbox::parse_size(&args.file_size)?,
        ..Limits::default()
    };
    for (k, v) in &env_given {
        spec.env.push((k.into(), v.clone()));
    }
    spec.stdin = Stdin::InheritIfSafe;
    spec.output = if args.json {
        Output::Capture
    } else {
        Output::Stream
    };
    let observer = Arc::new(Observer::new());
    spec.observe = Some(observer.clone());
    let result = match glovebox::run::start(&spec) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("glovebox: {}", glovebox::run::error_chain(&e));
            let unavailable =
                matches!(&e, glovebox::run::StartError::Jail(j) if j.is_unavailable());
            return Ok(ExitCode::from(if unavailable {
                EXIT_SANDBOX_UNAVAILABLE
            } else {
                EXIT_USAGE
            }));
        }
    };
    if let Some(g) = &gateway {
        for c in g.log().connections().0.iter().filter(|c| c.allowed) {
            observer.record_host(&c.host, c.port);
        }
    }
    let succeeded = result.status.code() == 0 && !result.timed_out();
    let proposal: Proposal = learn::propose(&learn::Run {
        observer: &observer,
        workspace: Some(&ws),
        root: &cwd,
        network: spec.network,
        succeeded,
        granted: &[],
        env: &env_given,
        bounds: &bounds,
    });
    drop(ws);
    let mut flags = proposal.sandbox_flags();
    if args.allow_private && !proposal.hosts.is_empty() {
        flags.push("--allow-private".into());
    }
    flags.extend(env_typed.iter().map(|e| format!("--env {e}")));
    let mut argv = proposal.sandbox_args();
    if args.allow_private && !proposal.hosts.is_empty() {
        argv.push("--allow-private".into());
    }
    for e in &env_typed {
        argv.extend(["--env".to_string(), e.clone()]);
    }
    let code = result.status.code();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "ok": succeeded,
                "exit_code": match result.status { jail::Status::Exited(c) => Some(c), _ => None },
                "stdout": String::from_utf8_lossy(&result.stdout),
                "stderr": String::from_utf8_lossy(&result.stderr),
                "proposal": proposal,
                "flags": flags,
                "args": argv,
                "make": proposal.to_make(),
            })
        );
    } else {
        if !succeeded {
            eprintln!(
                "glovebox: the command failed while learning ({})",
                if result.timed_out() {
                    "it timed out".to_string()
                } else {
                    format!("exit status {code}")
                }
            );
        }
        let mut text = proposal.sandbox_text(&env_typed);
        if args.allow_private && !proposal.hosts.is_empty() {
            text.push_str("  (add --allow-private: the hosts reached are private or loopback)\n");
        }
        eprint!("{text}");
    }
    if result.timed_out() {
        return Ok(ExitCode::from(124));
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_learning_block_is_a_manifest_block() {
        let b = learning_block(&["/usr".into(), "/a b".into()], true, Some("{\"K\":{}}"));
        let v = glovebox::manifest::yaml::parse(&format!("name: x\n{b}"))
            .unwrap()
            .value;
        assert_eq!(v["permissions"]["fs"]["read"][0], ".");
        assert_eq!(v["permissions"]["fs"]["read"][2], "/a b");
        assert_eq!(v["permissions"]["fs"]["write"][0], ".");
        assert_eq!(v["permissions"]["network"], true);
        assert!(v["permissions"]["secrets"]["K"].is_object());
    }
}
