//! Command-line adapter: one file per subcommand, each a thin layer over the
//! library. Exit statuses follow DESIGN.md: 0 ok, 1 the tool call (or lint)
//! failed, 2 usage or manifest error, 3 sandbox unavailable.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod approve;
mod audit;
mod builtin_helper;
mod create;
mod doctor;
mod explain;
mod export;
mod import;
mod learn;
mod lint;
mod list;
mod mcp;
mod migrate;
mod prove;
mod prove_battery;
mod run;
mod sandbox;
mod serve;
mod show;
mod untaint;
mod wrap;

/// The help heading of the options every command takes: listed after
/// the command's own.
const GLOBAL: &str = "Global options";

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
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub root: Option<PathBuf>,

    /// Load tools from an agentcli `tools.json` file (root: --root, else
    /// the file's directory). Without it, a `tools.json` in the root is
    /// loaded too.
    #[arg(long = "tools-json", global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub tools_json: Option<PathBuf>,

    /// glovebox's state directory (approvals, the audit key); default:
    /// `$GLOVEBOX_STATE_DIR`, else `state_dir` of
    /// ~/.config/glovebox/config.yml, else ~/.local/state/glovebox, with
    /// `~` the home directory of the user's passwd entry (not `$HOME`).
    #[arg(long = "state-dir", global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub state_dir: Option<PathBuf>,

    /// A directory of signed approvals (`glovebox approve --sign-with`)
    /// to honour, read only; needs --approval-key.
    #[arg(
        long = "approvals-dir",
        global = true,
        help_heading = GLOBAL,
        value_name = "DIR",
        env = "GLOVEBOX_APPROVALS_DIR"
    )]
    pub approvals_dir: Option<PathBuf>,

    /// The public key (`KEY.pub` of `glovebox approve --generate-key`)
    /// signed approvals must verify with.
    #[arg(
        long = "approval-key",
        global = true,
        help_heading = GLOBAL,
        value_name = "PUBKEY",
        env = "GLOVEBOX_APPROVAL_KEY"
    )]
    pub approval_key: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

// The subcommands. Each one's arguments are defined only when it is the
// one invoked (`defer`): defining all seventeen with their options and
// help texts before parsing cost every invocation about 0.15–0.2 ms (a
// tenth of `glovebox --version`). (A plain comment: clap would take a doc
// comment here as the program's description.)
#[derive(Debug, Subcommand)]
#[command(defer = true)]
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
    /// Run a tool in an observing jail on a throw-away copy of the project
    /// and propose the narrowest permissions that keep it working.
    Learn(learn::Args),
    /// Report which kernel features this machine enforces.
    Doctor(doctor::Args),
    /// Serve the tools over MCP on stdin/stdout.
    Mcp(mcp::Args),
    /// Serve the tools over HTTP (MCP Streamable HTTP at /mcp).
    Serve(Box<serve::Args>),
    /// Internal: the built-in tools' helper, run inside the jail.
    #[command(name = "__builtin", hide = true)]
    BuiltinHelper,
    /// Internal: `doctor --prove`'s battery, run inside each tool's jail.
    #[command(name = "__prove", hide = true)]
    ProveBattery(prove_battery::Args),
    /// Print the tools as an OpenAI, Anthropic or MCP tool list.
    Export(export::Args),
    /// Turn another runner's tool file into tool directories.
    #[command(subcommand)]
    Import(import::Command),
    /// Let glovebox load a project again after a call planted control
    /// files it could not remove (once they are gone).
    Untaint(untaint::Args),
    /// Turn Glee v1 single-file tools (.glee/tools/<name>.yml) into v2 tool directories.
    Migrate(migrate::Args),
    /// Run one MCP server jailed, serving its tools over stdio (put it in
    /// front of the server's command in a client's config).
    Wrap(wrap::Args),
}

/// The project named by `--root` / `--tools-json` (or found from the
/// working directory), with the built-ins its config enables.
fn project(cli: &Cli) -> anyhow::Result<glovebox::manifest::Project> {
    Ok(glovebox::builtin::add_to(
        glovebox::manifest::Project::discover_with(cli.root.as_deref(), cli.tools_json.as_deref())?,
    ))
}

/// [`project`] with each MCP server's tools (the servers started to list
/// them): for the commands that show the tools a client would see.
fn project_with_servers(cli: &Cli) -> anyhow::Result<glovebox::manifest::Project> {
    Ok(glovebox::mcpwrap::add_to(project(cli)?))
}

/// Reloads the served project whenever a wrapped MCP server's tool list
/// may have changed, so that clients are told (`list_changed`).
fn relay_mcp_lists(
    live: std::sync::Arc<glovebox::serve::live::Live>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = glovebox::mcpwrap::generation();
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let now = glovebox::mcpwrap::generation();
            if now != seen {
                seen = now;
                let _ = live.reload().await;
            }
        }
    })
}

/// The engine with only tool `name` loaded when that is enough (see
/// [`glovebox::engine::Engine::open_tool`]), for one-shot commands.
fn engine_for(
    cli: &Cli,
    name: &str,
) -> Result<glovebox::engine::Engine, glovebox::engine::EngineError> {
    glovebox::engine::Engine::open_tool(cli.root.as_deref(), cli.tools_json.as_deref(), name)
}

/// The live (reloading) project for the servers.
fn live(
    cli: &Cli,
) -> Result<std::sync::Arc<glovebox::serve::live::Live>, glovebox::serve::live::LiveError> {
    let live =
        glovebox::serve::live::Live::open_with(cli.root.as_deref(), cli.tools_json.as_deref())?;
    if let Some(notice) = live.engine().project().unread_notice() {
        eprintln!("glovebox: {notice}");
    }
    Ok(live)
}

/// Makes a closed stdout (`glovebox doctor | head`) end the process
/// quietly with status 0, instead of a panic from `println!`. SIGPIPE
/// stays ignored (a jailed child closing a pipe must not kill glovebox):
/// only the panic `println!` raises on `EPIPE` is turned into an exit.
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Parses the command line and runs the chosen command.
/// Honours the signed approvals of --approvals-dir with --approval-key;
/// one without the other is refused, as is a key that cannot be read (no
/// approval would ever verify). `glovebox approve --sign-with` only writes
/// into --approvals-dir and needs no key.
fn signed_approvals(cli: &Cli) -> Result<(), ExitCode> {
    let writing = matches!(&cli.command, Command::Approve(a) if a.sign_with.is_some() || a.generate_key.is_some());
    match (&cli.approvals_dir, &cli.approval_key) {
        (None, None) => Ok(()),
        (Some(_), None) if writing => Ok(()),
        (Some(dir), Some(key)) => glovebox::approval::signed::configure(dir, key).map_err(|e| {
            eprintln!("glovebox: signed approvals: {e}");
            ExitCode::from(EXIT_USAGE)
        }),
        (Some(_), None) => {
            eprintln!("glovebox: --approvals-dir needs --approval-key PUBKEY (or GLOVEBOX_APPROVAL_KEY) to verify its records with");
            Err(ExitCode::from(EXIT_USAGE))
        }
        (None, Some(_)) => {
            eprintln!("glovebox: --approval-key needs --approvals-dir DIR (or GLOVEBOX_APPROVALS_DIR), the directory of signed approvals");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

pub fn main() -> ExitCode {
    quiet_broken_pipe();
    let cli = Cli::parse();
    if let Some(dir) = &cli.state_dir {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        glovebox::state::set_dir(dir);
    }
    if let Err(code) = signed_approvals(&cli) {
        return code;
    }
    let result = match &cli.command {
        Command::Lint(a) => lint::run(&cli, a),
        Command::List(a) => list::run(&cli, a),
        Command::Show(a) => show::run(&cli, a),
        Command::Run(a) => run::run(&cli, a),
        Command::Explain(a) => explain::run(&cli, a),
        Command::Approve(a) => approve::run(&cli, a),
        Command::Create(a) => create::run(&cli, a),
        Command::Audit(a) => audit::run(&cli, a),
        Command::Sandbox(a) if a.learn => learn::sandbox(a),
        Command::Sandbox(a) => sandbox::run(&cli, a),
        Command::Learn(a) => learn::run(&cli, a),
        Command::Doctor(a) => doctor::run(&cli, a),
        Command::Mcp(a) => mcp::run(&cli, a),
        Command::Serve(a) => serve::run(&cli, a),
        Command::BuiltinHelper => return builtin_helper::run(),
        Command::ProveBattery(a) => return prove_battery::run(a),
        Command::Export(a) => export::run(&cli, a),
        Command::Import(a) => import::run(&cli, a),
        Command::Migrate(a) => migrate::run(&cli, a),
        Command::Untaint(a) => untaint::run(&cli, a),
        Command::Wrap(a) => wrap::run(&cli, a),
    };
    // Wrapped MCP servers end with their jails.
    glovebox::mcpwrap::shutdown();
    match result {
        Ok(code) => code,
        // A reader that stopped reading (`glovebox export | head`) ends
        // the output quietly, as a closed stdout under `println!` does.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("glovebox: {err:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Whether `err` comes from writing to a stdout whose reader has gone: a
/// broken pipe in its chain, and stdout itself a pipe with no reader (an
/// `EPIPE` from anything else is still reported).
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let epipe = err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if !epipe {
        return false;
    }
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLOUT)];
    poll(&mut fds, PollTimeout::ZERO).is_ok()
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLERR))
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// clap's own consistency checks over every subcommand (the deferred
    /// ones are built for it too).
    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Each subcommand says in one line what it does, and its help lists
    /// its own options first, the global ones last under their heading
    /// (issue 44: `wrap` had no line, every command's options were
    /// interleaved with the five global ones).
    #[test]
    fn each_command_has_an_about_line_and_its_own_options_first() {
        let mut cli = Cli::command();
        cli.build();
        let globals: Vec<String> = cli
            .get_arguments()
            .filter(|a| a.is_global_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        assert_eq!(globals.len(), 5, "{globals:?}");
        for sub in cli.get_subcommands_mut() {
            let name = sub.get_name().to_string();
            if name == "help" {
                continue;
            }
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            assert!(
                !about.is_empty() && !about.contains('\n'),
                "`{name}`: {about:?}"
            );
            let help = sub.render_help().to_string();
            let heading = help
                .find("Global options:")
                .unwrap_or_else(|| panic!("`{name}`: no global heading:\n{help}"));
            let (own, global) = help.split_at(heading);
            // The options listed before the heading (a line that starts
            // with one, `-x, --name` or `--name`).
            let listed: Vec<&str> = own
                .lines()
                .map(str::trim_start)
                .filter(|l| l.starts_with('-'))
                .filter_map(|l| l.split([' ', ',', '=']).find(|w| w.starts_with("--")))
                .collect();
            for g in &globals {
                assert!(
                    !listed.contains(&g.as_str()),
                    "`{name}`: {g} among its own options:\n{help}"
                );
                assert!(global.contains(g.as_str()), "`{name}`: {g}:\n{help}");
            }
        }
    }
}
