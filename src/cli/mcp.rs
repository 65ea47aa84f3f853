//! `glovebox mcp`: the project's tools as an MCP server over stdio. stdout
//! carries MCP messages only; diagnostics go to stderr.

use std::process::ExitCode;

use glovebox::serve::{mcp, watch};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<ExitCode> {
    let live = super::live(cli)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _watcher = watch::spawn(live.clone())
            .inspect_err(|e| eprintln!("glovebox: {e:#}; tool changes on disk will not be noticed"))
            .ok();
        mcp::serve_stdio(live).await
    })?;
    // Calls still running belong to a client that is gone: do not wait.
    runtime.shutdown_background();
    Ok(ExitCode::SUCCESS)
}
