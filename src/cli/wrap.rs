//! `glovebox wrap [--read P] [--write P] [--allow-host H] [--secret
//! NAME:HOST] [--env NAME[=VALUE]] -- COMMAND ARGS…`: one stdio MCP
//! server, jailed, served over stdio (see `glovebox::mcpwrap::wrap`).
//! stdout carries MCP messages only.
//!
//! The server starts at once, on a thread of its own; the client's
//! `initialize` is answered as soon as it is ready, or after
//! [`READY_WAIT`] at the latest (a first start that installs its package
//! takes longer than clients wait: its tools are offered when it is
//! ready, with `list_changed`). A server that fails within that time
//! fails the handshake with the reason (every request answered with it;
//! exit status non-zero when stdin closes); one that fails later is
//! reported to the client as a log message with the next tool list
//! (`list_changed`), its tools absent, a call answered with the reason.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use glovebox::kind::ErrorKind;
use glovebox::mcpwrap::server::{self, Status};
use glovebox::mcpwrap::wrap::{self, Flags};
use glovebox::serve::call::{CallLimits, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_QUEUED};
use glovebox::serve::mcp::catalog::Offer;
use glovebox::serve::{live::Live, mcp};

use super::{Cli, EXIT_SANDBOX_UNAVAILABLE, EXIT_USAGE};

/// How long the client's `initialize` waits for the server at most:
/// under the shortest wait of the clients people use (Gemini CLI's
/// `mcp list` probe gives a server 5 s, Claude Code 30 s).
pub const READY_WAIT: Duration = Duration::from_millis(2500);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A path the server may read (repeatable; relative to the working
    /// directory). What the command itself needs is granted too: a
    /// script named by its path, a Python script's venv and the
    /// installation its interpreter's links lead to.
    #[arg(long, value_name = "PATH")]
    pub read: Vec<String>,
    /// A path the server may read and write (repeatable).
    #[arg(long, value_name = "PATH")]
    pub write: Vec<String>,
    /// A host the server may reach through glovebox's egress proxy
    /// (repeatable; `HOST` or `HOST:PORT`; none: no network). `npx -y`
    /// installs from registry.npmjs.org, `uvx` and `pipx run` from
    /// pypi.org and files.pythonhosted.org.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Let the proxy reach loopback and private addresses (a service on
    /// this machine or the LAN, named with --allow-host); never
    /// glovebox's own servers nor cloud metadata.
    #[arg(long = "allow-private")]
    pub allow_private: bool,
    /// A secret from the environment, given to the server as a placeholder
    /// that the proxy swaps for the real value on requests to HOST only.
    #[arg(long, value_name = "NAME:HOST")]
    pub secret: Vec<String>,
    /// A setting in the server's environment (repeatable): NAME=VALUE, or
    /// NAME for its value in glovebox's environment now. Written into the
    /// manifest as it is: pass credentials with --secret.
    #[arg(long, value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// The server's name, in glovebox's audit log and state (default: the
    /// package's, else the command's file name). Clients see its tools
    /// under their own names.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Offer glovebox's glee_tool and glee_tools_list beside the server's
    /// tools (the built-in file tools act on a project: serve one with
    /// `glovebox mcp`, and `--save` the server into it).
    #[arg(long = "glee-tools")]
    pub glee_tools: bool,
    /// Start the server once and exit: install its package now (`npx -y`,
    /// `uvx`, `pipx run`: later starts use the install, without the
    /// network), and say which tools it serves or why it cannot start.
    #[arg(long, conflicts_with = "save")]
    pub prepare: bool,
    /// Write the manifest to the project as .glee/tools/NAME/tool.yml
    /// instead of serving.
    #[arg(long, value_name = "NAME")]
    pub save: Option<String>,
    /// The server's command and arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    if args.save.is_some() || args.prepare {
        return serve(cli, args);
    }
    serve(cli, args).or_else(|e| {
        // A client shows "connection closed" for a server that exits at
        // once: its requests are answered with the reason first (not when
        // a person runs it at a terminal).
        let message = format!("glovebox: {e:#}");
        eprintln!("{message}");
        if !std::io::stdin().is_terminal() {
            super::mcp::refuse_stdio(&message);
        }
        Ok(ExitCode::from(EXIT_USAGE))
    })
}

fn serve(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let flags = Flags {
        read: args.read.clone(),
        write: args.write.clone(),
        allow_host: args.allow_host.clone(),
        secret: args.secret.clone(),
        env: args.env.clone(),
        allow_private: args.allow_private,
        name: args.save.clone().or_else(|| args.name.clone()),
        command: args.command.clone(),
    };
    let manifest = wrap::manifest(&flags, &cwd)?;
    let name = manifest["name"].as_str().unwrap_or_default().to_string();
    if args.save.is_some() {
        let root = cli.root.clone().unwrap_or(cwd);
        let file = wrap::save(&root, &manifest)?;
        eprintln!(
            "glovebox: wrote {}; review it, then `glovebox list` shows its tools",
            file.display()
        );
        if args.allow_private {
            eprintln!("glovebox: --allow-private is the project's setting: add `security: {{http: {{allow_private: true}}}}` to .glee/config.yml");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let root = wrap::private_root(&manifest, &wrap::config(&flags))?;
    glovebox::jail::cgroup::reuse();
    if args.prepare {
        return prepare(&root, &name);
    }
    // The handshake does not wait for an install: the server starts on a
    // thread of its own as the project loads.
    server::background();
    let offer = Offer::Server {
        name: name.clone(),
        meta: args.glee_tools,
    };
    let live = Live::open_offering(Some(&root), None, offer)?;
    if live.engine().tool(&name).is_err() {
        // The flags made a manifest glovebox does not load (a lint error).
        let why = live
            .engine()
            .project()
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let message = format!("glovebox: the server's manifest is not valid: {why}");
        eprintln!("{message}");
        super::mcp::refuse_stdio(&message);
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let started = server::get(&root, &name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match started.settle(READY_WAIT) {
        Status::Failed(why) => {
            let message = glovebox::mcpwrap::relayed(&why.message);
            eprintln!("glovebox: {message}");
            super::mcp::refuse_stdio(&format!("glovebox: {message}"));
            return Ok(ExitCode::from(exit_status(why.kind)));
        }
        // Its tools in the first list the client reads.
        Status::Running(_) => {
            runtime.block_on(live.reload())?;
        }
        Status::Starting => eprintln!(
            "glovebox: MCP server `{name}` is still starting: its tools are offered when it is ready (the client is told: list_changed)"
        ),
    }
    live.calls().set_limits(CallLimits {
        max_concurrent: DEFAULT_MAX_CONCURRENT,
        max_queued: DEFAULT_MAX_QUEUED,
    });
    runtime.block_on(async {
        let _relay = super::relay_mcp_lists(live.clone());
        mcp::serve_stdio(live).await
    })?;
    runtime.shutdown_background();
    glovebox::mcpwrap::shutdown();
    glovebox::jail::cgroup::release_idle();
    Ok(ExitCode::SUCCESS)
}

/// `--prepare`: starts the server (installing its package if need be),
/// says what it serves, stops it.
fn prepare(root: &std::path::Path, name: &str) -> anyhow::Result<ExitCode> {
    let engine = glovebox::engine::Engine::open(Some(root))?;
    let project = engine.project();
    if let Some((_, why)) = glovebox::mcpwrap::failures(project).into_iter().next() {
        // Said on stderr by the load already.
        return Ok(ExitCode::from(exit_status(why.kind)));
    }
    let prefix = format!("{name}{}", glovebox::mcpwrap::SEPARATOR);
    let tools: Vec<&str> = project
        .tools
        .iter()
        .filter_map(|t| t.name.strip_prefix(&prefix))
        .collect();
    eprintln!(
        "glovebox: MCP server `{name}` is ready: {} tools ({}); later starts use what was installed",
        tools.len(),
        tools.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The exit status of a server that cannot start: as `glovebox run`'s
/// for the same kind (2 for a manifest's fault, 3 for the sandbox), 1
/// otherwise.
fn exit_status(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::SandboxUnavailable => EXIT_SANDBOX_UNAVAILABLE,
        ErrorKind::ManifestInvalid | ErrorKind::SecretMissing => EXIT_USAGE,
        _ => 1,
    }
}
