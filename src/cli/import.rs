//! `glovebox import hdn|mcp FILE [--force]`: another runner's tool file as
//! v2 tool directories (see `glovebox::import`). Exit 0 when every entry
//! was imported, 2 when any was refused (the others are still written).

use std::path::PathBuf;
use std::process::ExitCode;

use glovebox::import::{self, Report};
use glovebox::manifest::discover;

use super::{Cli, EXIT_USAGE};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Import an HDN tools_bootstrap.json (Tool JSON) as command tools.
    Hdn(Args),
    /// Import the MCP servers of a client's config (.mcp.json, Cursor's,
    /// Gemini CLI's `mcpServers`, VS Code's `servers`) as `kind: mcp`
    /// tools that need an approval.
    Mcp(McpArgs),
}

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The client's config: {"mcpServers": {...}} or {"servers": {...}}.
    pub file: PathBuf,
    /// Replace tool directories that already exist.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The HDN tool file: a JSON array of Tool objects, or {"tools": [...]}.
    pub file: PathBuf,
    /// Replace tool directories that already exist.
    #[arg(long)]
    pub force: bool,
}

pub fn run(cli: &Cli, command: &Command) -> anyhow::Result<ExitCode> {
    if cli.tools_json.is_some() {
        anyhow::bail!(
            "import writes .glee/tools/ directories and does not read --tools-json; pass --root DIR instead"
        );
    }
    let root = discover::find_root(cli.root.as_deref())?;
    let report = match command {
        Command::Hdn(args) => import::hdn::import(&root, &args.file, args.force)?,
        Command::Mcp(args) => import::mcp::import(&root, &args.file, args.force)?,
    };
    Ok(print(&report))
}

fn print(report: &Report) -> ExitCode {
    for w in &report.written {
        let verb = if w.replaced { "replaced" } else { "imported" };
        println!("{verb} {} -> {}", w.name, w.display);
        for n in &w.notes {
            println!("  note: {n}");
        }
    }
    for r in &report.refused {
        eprintln!("glovebox: import: {r}");
    }
    if report.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "glovebox: import: {} imported, {} not imported",
            report.written.len(),
            report.refused.len()
        );
        ExitCode::from(EXIT_USAGE)
    }
}
