//! Command-line adapter: one file per subcommand, each a thin layer over the
//! library. Exit statuses follow DESIGN.md: 0 ok, 1 the tool call (or lint)
//! failed, 2 usage or manifest error, 3 sandbox unavailable.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod approve;
mod audit;
mod create;
mod doctor;
mod explain;
mod lint;
mod list;
mod mcp;
mod migrate;
mod run;
mod sandbox;
mod serve;
mod show;

/// Exit status: usage or manifest error.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the kernel cannot enforce what was asked.
pub const EXIT_SANDBOX_UNAVAILABLE: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "glovebox",
    version,
    about = "Run AI-agent tools under kernel-enforced isolation"
)]
pub struct Cli {
    /// Project root (the directory holding `.glee/`); default: the nearest
    /// ancestor of the working directory that holds `.glee/`.
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Load tools from an agentcli `tools.json` file.
    #[arg(long = "tools-json", global = true, value_name = "FILE")]
    pub tools_json: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every tool manifest and report problems with file:line:col.
    Lint(lint::Args),
    /// List the tools of the project.
    List(list::Args),
    /// Print one tool's manifest, normalised.
    Show(show::Args),
    /// Run a tool with parameters, jailed.
    Run(run::Args),
    /// Print a tool's effective policy (what its jail allows).
    Explain(explain::Args),
    /// Approve a tool as it is now (voided when it changes).
    Approve(approve::Args),
    /// Create a tool on behalf of an agent, under the permission ceiling.
    Create(create::Args),
    /// Read or verify the audit log.
    Audit(audit::Args),
    /// Run an ad-hoc command inside the jail.
    Sandbox(Box<sandbox::Args>),
    /// Report which kernel features this machine enforces.
    Doctor(doctor::Args),
    /// Serve the tools over MCP on stdin/stdout.
    Mcp(mcp::Args),
    /// Serve the tools over HTTP (MCP Streamable HTTP at /mcp).
    Serve(serve::Args),
    /// Turn Glee v1 single-file tools (.glee/tools/<name>.yml) into v2 tool directories.
    Migrate(migrate::Args),
}

/// Fails for commands that do not read `--tools-json` files yet.
fn refuse_tools_json(cli: &Cli) -> anyhow::Result<()> {
    if cli.tools_json.is_some() {
        anyhow::bail!("--tools-json is not supported by this command yet; use a .glee/ project");
    }
    Ok(())
}

/// Parses the command line and runs the chosen command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Lint(a) => lint::run(&cli, a),
        Command::List(a) => list::run(&cli, a),
        Command::Show(a) => show::run(&cli, a),
        Command::Run(a) => run::run(&cli, a),
        Command::Explain(a) => explain::run(&cli, a),
        Command::Approve(a) => approve::run(&cli, a),
        Command::Create(a) => create::run(&cli, a),
        Command::Audit(a) => audit::run(&cli, a),
        Command::Sandbox(a) => sandbox::run(&cli, a),
        Command::Doctor(a) => doctor::run(&cli, a),
        Command::Mcp(a) => mcp::run(&cli, a),
        Command::Serve(a) => serve::run(&cli, a),
        Command::Migrate(a) => migrate::run(&cli, a),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("glovebox: {err:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
