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

/// Records a secret key file in the state directory, so that no learning
/// run sees it wherever it is (`glovebox::learn::sensitive`); a failure
/// is said, not fatal (the key is made or used all the same).
pub fn remember(key: &std::path::Path) {
    if let Err(e) = glovebox::state::remember_key(key) {
        eprintln!(
            "glovebox: could not record {} as a key file in the state directory ({e}); keep it out of learning runs' view yourself",
            key.display()
        );
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.generate_key {
        let public = glovebox::signing::generate(path)?;
        remember(path);
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
        Some(p) => {
            let key = glovebox::signing::load_signing(p)?;
            remember(p);
            Some(key)
        }
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
    // What clients are offered, shown and approved: the tool's rendering,
    // or for an MCP server (started, jailed, to read its list now) the
    // rendering of each of its tools glovebox offers.
    let mut tool = tool.clone();
    let mut withheld = Vec::new();
    let shown = match &tool.manifest.exec {
        glovebox::manifest::model::Exec::Mcp(_) => {
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
            let offered = glovebox::mcpwrap::offered(&tool, &listed, true);
            if let glovebox::manifest::model::Exec::Mcp(m) = &mut tool.manifest.exec {
                m.wrapped = Some(glovebox::manifest::model::Wrapped {
                    server: args.name.clone(),
                    tool: String::new(),
                    served: offered.shown.digest.clone(),
                });
            }
            withheld = offered.withheld;
            offered.shown
        }
        _ => glovebox::offer::shown([&tool.manifest]),
    };
    let tool = &tool;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!("glovebox: approving needs a terminal to ask on; pass --yes to approve from a script");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        let prompt = prompt(engine.project(), tool, &policy.explain(), &shown, &withheld)?;
        let mut err = std::io::stderr();
        write!(err, "{prompt}")?;
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

/// What the person is asked to approve: the manifest, the grants, the
/// files the approval covers, and what clients are offered (`shown`,
/// whose digest the approval records), every control character and
/// invisible code point of it shown escaped (a directory a tool made may
/// be named with an escape sequence, a server's description may hide
/// tag characters).
fn prompt(
    project: &glovebox::manifest::project::Project,
    tool: &glovebox::manifest::project::Tool,
    explain: &str,
    shown: &glovebox::offer::Shown,
    withheld: &[String],
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let manifest = serde_json::to_value(&tool.manifest)?;
    let root = &project.root;
    let covered: Vec<String> = glovebox::footprint::of(root, tool)
        .files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
        .collect();
    let mut text = String::new();
    writeln!(text, "{}", yaml::emit(&manifest).unwrap_or_default())?;
    write!(text, "{explain}")?;
    writeln!(
        text,
        "covers    {} (a change to any of them, a file that would shadow them, or where a grant leads voids the approval)",
        covered.join(", ")
    )?;
    // Escaped before it is added: `shown` is already the text whose
    // digest is approved, its invisible code points escaped.
    let mut text = visible(&text);
    let _ = writeln!(
        text,
        "offers    what clients are given, exactly (invisible characters are shown as \\u{{…}} and are not sent; a change to any of it voids the approval; sha256 {}):",
        &shown.digest[..16.min(shown.digest.len())]
    );
    text.push_str(&shown.text);
    if !withheld.is_empty() {
        let _ = writeln!(
            text,
            "withheld  the server's tools not offered: {}",
            visible(&withheld.join(", "))
        );
    }
    Ok(text)
}

/// `text` with its invisible code points escaped (control characters
/// but newline and tab among them).
fn visible(text: &str) -> String {
    glovebox::invisible::escape(text).into_owned()
}

/// The arguments once a tool is named.
struct NamedArgs {
    name: String,
    yes: bool,
}
