//! `glovebox approve NAME`: approve a tool as it is now; with
//! `--sign-with KEY`, as a signed record every replica honours (see
//! `glovebox::approval::signed`); `--generate-key PATH` makes the key.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use glovebox::approval::Store;
use glovebox::audit::{Event, Log};
use glovebox::manifest::yaml;

use super::{Cli, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to approve.
    #[arg(required_unless_present = "generate_key")]
    pub name: Option<String>,
    /// Approve without asking (for scripts).
    #[arg(long)]
    pub yes: bool,
    /// Write a signed approval (Ed25519, with this secret key file)
    /// instead of recording it in the state directory: into
    /// --approvals-dir, else the project's `.glee/approvals/`.
    #[arg(long, value_name = "KEYFILE")]
    pub sign_with: Option<std::path::PathBuf>,
    /// Make a new approval key: the secret at PATH (mode 0600) and the
    /// public key, which replicas are given, at PATH.pub.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["name", "sign_with"])]
    pub generate_key: Option<std::path::PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.generate_key {
        let public = glovebox::signing::generate(path)?;
        println!(
            "made approval key {} (secret: {}, public: {})",
            glovebox::signing::key_id(&public),
            path.display(),
            glovebox::signing::public_path(path).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = &args.name else {
        eprintln!("glovebox: name the tool to approve");
        return Ok(ExitCode::from(EXIT_USAGE));
    };
    let secret = match &args.sign_with {
        Some(p) => Some(glovebox::signing::load_signing(p)?),
        None => None,
    };
    let args = &NamedArgs {
        name: name.clone(),
        yes: args.yes,
    };
    let engine = super::engine_for(cli, &args.name)?;
    let tool = match engine.tool(&args.name) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("glovebox: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let policy = match engine.policy(&args.name) {
        Ok(p) => p,
        Err(o) => {
            let msg = o.error.map(|e| e.message).unwrap_or_default();
            eprintln!("glovebox: {}: {msg}", args.name);
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    // An MCP server is started (jailed) to read the tool list it serves
    // now, which is shown and recorded with the approval.
    let mut tool = tool.clone();
    let served = match &mut tool.manifest.exec {
        glovebox::manifest::model::Exec::Mcp(m) => {
            let listed = match glovebox::mcpwrap::list_for_approval(engine.project(), &args.name) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!(
                        "glovebox: {}: {e}; there is no tool list to approve",
                        args.name
                    );
                    return Ok(ExitCode::from(1));
                }
            };
            m.wrapped = Some(glovebox::manifest::model::Wrapped {
                server: args.name.clone(),
                tool: String::new(),
                served: listed.hash.clone(),
            });
            let tools: Vec<String> = listed
                .tools
                .iter()
                .map(|t| {
                    format!(
                        "  {}: {}",
                        glovebox::mcpwrap::printable(t["name"].as_str().unwrap_or("?")),
                        glovebox::mcpwrap::printable(t["description"].as_str().unwrap_or(""))
                    )
                })
                .collect();
            Some(tools)
        }
        _ => None,
    };
    let tool = &tool;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!("glovebox: approving needs a terminal to ask on; pass --yes to approve from a script");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        let manifest = serde_json::to_value(&tool.manifest)?;
        let mut err = std::io::stderr();
        writeln!(err, "{}", yaml::emit(&manifest).unwrap_or_default())?;
        // Paths are shown with their control characters replaced (a
        // directory a tool made may be named with an escape sequence).
        write!(err, "{}", glovebox::mcpwrap::printable(&policy.explain()))?;
        let root = &engine.project().root;
        let covered: Vec<String> = glovebox::footprint::of(root, tool)
            .files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
            .collect();
        writeln!(
            err,
            "covers    {} (a change to any of them, a file that would shadow them, or where a grant leads voids the approval)",
            glovebox::mcpwrap::printable(&covered.join(", "))
        )?;
        if let Some(tools) = &served {
            writeln!(
                err,
                "serves    (a change to this list, a description or a schema voids the approval)"
            )?;
            for t in tools {
                writeln!(err, "{t}")?;
            }
        }
        write!(err, "approve tool `{}` as shown? [y/N] ", args.name)?;
        err.flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            eprintln!("not approved");
            return Ok(ExitCode::from(1));
        }
    }
    let root = &engine.project().root;
    let approver = std::env::var("USER").unwrap_or_else(|_| "user".into());
    if let Some(secret) = &secret {
        let text = Store::signed_approval(root, tool, &approver, secret)?;
        let dir = cli
            .approvals_dir
            .clone()
            .unwrap_or_else(|| root.join(".glee/approvals"));
        std::fs::create_dir_all(&dir)?;
        let path = glovebox::approval::signed::path_of(&dir, glovebox::approval::key(tool));
        glovebox::state::write_atomic(&path, text.as_bytes())?;
        let key_id = glovebox::signing::key_id(&secret.verifying_key());
        Log::for_project(root)?.append(&Event {
            kind: glovebox::audit::event::TOOL_APPROVED,
            fields: vec![
                ("name", args.name.clone()),
                ("approver", approver),
                ("signed", key_id.clone()),
            ],
        })?;
        println!(
            "approved {} (signed with key {key_id}: {})",
            args.name,
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    Store::open(root)?.approve(root, tool, &approver)?;
    Log::for_project(root)?.append(&Event {
        kind: glovebox::audit::event::TOOL_APPROVED,
        fields: vec![("name", args.name.clone()), ("approver", approver)],
    })?;
    println!("approved {} ({})", args.name, glovebox::state::describe());
    Ok(ExitCode::SUCCESS)
}

/// The arguments once a tool is named.
struct NamedArgs {
    name: String,
    yes: bool,
}
