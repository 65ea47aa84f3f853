//! `glovebox wrap [--read P] [--write P] [--allow-host H] [--secret
//! NAME:HOST] -- COMMAND ARGS…`: one stdio MCP server, jailed, served
//! over stdio (see `glovebox::mcpwrap::wrap`). stdout carries MCP
//! messages only.

use std::process::ExitCode;

use glovebox::mcpwrap::wrap::{self, Flags};
use glovebox::serve::call::{CallLimits, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_QUEUED};
use glovebox::serve::{live::Live, mcp};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A path the server may read (repeatable; relative to the working
    /// directory).
    #[arg(long, value_name = "PATH")]
    pub read: Vec<String>,
    /// A path the server may read and write (repeatable).
    #[arg(long, value_name = "PATH")]
    pub write: Vec<String>,
    /// A host the server may reach through glovebox's egress proxy
    /// (repeatable; none: no network).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// A secret from the environment, given to the server as a placeholder
    /// that the proxy swaps for the real value on requests to HOST only.
    #[arg(long, value_name = "NAME:HOST")]
    pub secret: Vec<String>,
    /// The server's name: its tools are NAME__TOOL (default: the
    /// command's file name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Write the manifest to the project as .glee/tools/NAME/tool.yml
    /// instead of serving.
    #[arg(long, value_name = "NAME")]
    pub save: Option<String>,
    /// The server's command and arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let flags = Flags {
        read: args.read.clone(),
        write: args.write.clone(),
        allow_host: args.allow_host.clone(),
        secret: args.secret.clone(),
        name: args.save.clone().or_else(|| args.name.clone()),
        command: args.command.clone(),
    };
    let manifest = wrap::manifest(&flags, &cwd)?;
    if args.save.is_some() {
        let root = cli.root.clone().unwrap_or(cwd);
        let file = wrap::save(&root, &manifest)?;
        eprintln!(
            "glovebox: wrote {}; review it, then `glovebox list` shows its tools",
            file.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let root = wrap::private_root(&manifest)?;
    let live = Live::open(Some(&root))?;
    glovebox::jail::cgroup::reuse();
    live.calls().set_limits(CallLimits {
        max_concurrent: DEFAULT_MAX_CONCURRENT,
        max_queued: DEFAULT_MAX_QUEUED,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _relay = super::relay_mcp_lists(live.clone());
        mcp::serve_stdio(live).await
    })?;
    runtime.shutdown_background();
    glovebox::mcpwrap::shutdown();
    glovebox::jail::cgroup::release_idle();
    Ok(ExitCode::SUCCESS)
}
