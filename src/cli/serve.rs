//! `glovebox serve [--listen 127.0.0.1:7878]`: MCP over Streamable HTTP at
//! `/mcp`. Loopback by default; a non-loopback address needs
//! `GLOVEBOX_API_TOKEN`, which every request must then present as a bearer
//! token.

use std::net::SocketAddr;
use std::process::ExitCode;

use glovebox::serve::http::{self, Options, DEFAULT_LISTEN, TOKEN_ENV};
use glovebox::serve::watch;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let options = Options {
        listen: args.listen,
        token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
    };
    options.check()?;
    let live = super::live(cli)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _watcher = watch::spawn(live.clone())
            .inspect_err(|e| eprintln!("glovebox: {e:#}; tool changes on disk will not be noticed"))
            .ok();
        let router = http::router(live.clone(), &options);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        http::serve(
            router,
            &options,
            |addr| eprintln!("glovebox: serving MCP at http://{addr}/mcp"),
            shutdown,
        )
        .await
    })?;
    runtime.shutdown_background();
    Ok(ExitCode::SUCCESS)
}
