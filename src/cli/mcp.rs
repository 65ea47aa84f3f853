//! `glovebox mcp`: the project's tools as an MCP server over stdio. stdout
//! carries MCP messages only; diagnostics go to stderr.

use std::process::ExitCode;

use glovebox::serve::call::{CallLimits, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_QUEUED};
use glovebox::serve::{mcp, watch};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tool calls run at once (as `glovebox serve --max-concurrent`).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_concurrent: usize,
    /// Tool calls waiting for a slot; one more is answered at once with a
    /// `resource_limit` error (`details.busy`).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_QUEUED,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=65_536))]
    pub max_queued: usize,
    /// Make the next call's jail ahead of it (standby jails: held,
    /// planned and built while the server waits, revalidated by identity
    /// when the call arrives; one process and a few descriptors kept per
    /// recently called tool). Off by default.
    #[arg(long, env = "GLOVEBOX_STANDBY", value_parser = clap::builder::BoolishValueParser::new())]
    pub standby: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let live = match super::live(cli) {
        Ok(live) => live,
        Err(e) => {
            // A client shows "connection closed" for a server that exits
            // at once: answer its requests with the reason first.
            let e = anyhow::Error::from(e);
            refuse_stdio(&format!(
                "glovebox cannot serve MCP here: {e:#} (in the client's server config: args [\"--root\", \"/path/to/project\", \"mcp\"])"
            ));
            return Err(e);
        }
    };
    // Python tools fork warm workers (the CLI `run` stays cold).
    glovebox::run::warm::enable();
    if args.standby {
        glovebox::jail::standby::enable();
    }
    glovebox::jail::cgroup::reuse();
    live.calls().set_limits(CallLimits {
        max_concurrent: args.max_concurrent,
        max_queued: args.max_queued,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _watcher = watch::spawn(live.clone())
            .inspect_err(|e| eprintln!("glovebox: {e:#}; tool changes on disk will not be noticed"))
            .ok();
        let _relay = super::relay_mcp_lists(live.clone());
        mcp::serve_stdio(live).await
    })?;
    // Calls still running belong to a client that is gone: do not wait.
    runtime.shutdown_background();
    // Standby jails end at their gates, their cgroups removed.
    if !glovebox::jail::standby::shutdown(std::time::Duration::from_secs(10)) {
        eprintln!("glovebox: a standby jail had not ended 10 s after shutdown");
    }
    // Idle warm workers end with their jails (and private HOMEs) removed.
    glovebox::run::warm::shutdown();
    glovebox::jail::cgroup::release_idle();
    Ok(ExitCode::SUCCESS)
}

/// Answers every JSON-RPC request on stdin (`initialize` first) with an
/// error carrying `message`, until stdin closes; lines are read at most
/// 1 MiB at a time.
pub(super) fn refuse_stdio(message: &str) {
    use std::io::{BufRead, Read, Write};
    let mut stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut stdin).take(1 << 20).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(&line)
        else {
            continue;
        };
        let Some(id) = m.get("id").filter(|id| id.is_string() || id.is_number()) else {
            continue;
        };
        if !m.get("method").is_some_and(serde_json::Value::is_string) {
            continue;
        }
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32603, "message": message}});
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}
