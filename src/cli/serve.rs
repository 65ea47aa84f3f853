//! `glovebox serve [--listen 127.0.0.1:7878]`: MCP over Streamable HTTP at
//! `/mcp` and the HTTP API at `/api/v1/tools` (see
//! `glovebox::serve::api`). Loopback by default; a non-loopback address
//! needs `GLOVEBOX_API_TOKEN`, which every request must then present as a
//! bearer token. Stops on SIGTERM/SIGINT after a grace period.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use glovebox::serve::http::{self, Options, DEFAULT_GRACE, DEFAULT_LISTEN, TOKEN_ENV};
use glovebox::serve::limits::{
    Limits, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONCURRENT, DEFAULT_REQUEST_TIMEOUT,
};
use glovebox::serve::{shutdown, watch};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Largest request body, in bytes (larger: 413).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 30))]
    pub max_body_bytes: usize,
    /// Requests served at once (API and /mcp); one more gets 503 at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_concurrent: usize,
    /// Seconds one request may take (longer: 504, and its call is killed).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_REQUEST_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub request_timeout: u64,
    /// Seconds running calls get to finish after SIGTERM/SIGINT before they
    /// are killed.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_GRACE.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub grace: u64,
    /// A host name (`name` or `name:port`) a non-loopback server answers
    /// to besides its own address; repeatable. Requests naming another
    /// host get 421 (DNS rebinding). Ignored on loopback, which answers to
    /// localhost, 127.0.0.1 and [::1] only.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let options = Options {
        listen: args.listen,
        token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_concurrent: args.max_concurrent,
            request_timeout: Duration::from_secs(args.request_timeout),
        },
        grace: Duration::from_secs(args.grace),
        hosts: args.allow_host.clone(),
        bound: Default::default(),
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
        http::serve(
            router,
            live.clone(),
            &options,
            |addr| {
                eprintln!("glovebox: serving MCP at http://{addr}/mcp");
                eprintln!("glovebox: serving the HTTP API at http://{addr}/api/v1/tools (GET /openapi.json)");
            },
            shutdown::signal(),
        )
        .await
    })?;
    runtime.shutdown_background();
    eprintln!("glovebox: stopped");
    Ok(ExitCode::SUCCESS)
}
