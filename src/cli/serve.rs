//! `glovebox serve [--listen 127.0.0.1:7878]`: MCP over Streamable HTTP at
//! `/mcp` and the HTTP API at `/api/v1/tools` (see
//! `glovebox::serve::api`). Loopback by default; a non-loopback address
//! needs `GLOVEBOX_API_TOKEN`, which every request must then present as a
//! bearer token. Stops on SIGTERM/SIGINT after a grace period.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use glovebox::serve::call::CallLimits;
use glovebox::serve::http::{self, Options, DEFAULT_GRACE, DEFAULT_LISTEN, TOKEN_ENV};
use glovebox::serve::limits::{
    Limits, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_QUEUED, DEFAULT_MAX_SESSIONS,
    DEFAULT_REQUEST_TIMEOUT, DEFAULT_SESSION_IDLE_TIMEOUT, DEFAULT_USAGE_SCAN_BYTES,
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
    /// Tool calls run at once (API and /mcp together).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_concurrent: usize,
    /// Tool calls waiting for a slot; one more gets 503 at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_QUEUED,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=65_536))]
    pub max_queued: usize,
    /// Connections open at once; past it the one idle longest is closed,
    /// and only when all are busy do new ones wait (a line on stderr says so).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_connections: usize,
    /// Connections one client (IP address) may hold; past it its idle one
    /// is closed, or 503 when all are busy [default: half of
    /// --max-connections].
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_connections_per_peer: Option<usize>,
    /// Event streams (subscriptions/listen, GET /mcp) open at once; one
    /// more gets 503 [default: a quarter of --max-connections].
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_streams: Option<usize>,
    /// Event streams one client (IP address) may hold [default: a quarter
    /// of --max-streams].
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_streams_per_peer: Option<usize>,
    /// Seconds to send a request's headers; also the longest a kept-alive
    /// connection may sit idle.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds to send a request's body (longer: 408).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout: u64,
    /// MCP sessions kept at once; the oldest is closed to make room.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_sessions: usize,
    /// Seconds an MCP session may sit idle before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SESSION_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub session_idle_timeout: u64,
    /// Bytes read from the end of the audit log for GET /api/v1/tools/usage.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_USAGE_SCAN_BYTES,
          value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    pub usage_scan_bytes: u64,
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
            calls: CallLimits {
                max_concurrent: args.max_concurrent,
                max_queued: args.max_queued,
            },
            request_timeout: Duration::from_secs(args.request_timeout),
            max_connections: args.max_connections,
            max_connections_per_peer: args.max_connections_per_peer,
            max_streams: args.max_streams,
            max_streams_per_peer: args.max_streams_per_peer,
            header_timeout: Duration::from_secs(args.header_timeout),
            body_timeout: Duration::from_secs(args.body_timeout),
            max_sessions: args.max_sessions,
            session_idle_timeout: Duration::from_secs(args.session_idle_timeout),
            usage_scan_bytes: args.usage_scan_bytes,
        },
        grace: Duration::from_secs(args.grace),
        hosts: args.allow_host.clone(),
        bound: Default::default(),
    };
    options.check()?;
    let live = super::live(cli)?;
    // Python tools fork warm workers (the CLI `run` stays cold).
    glovebox::run::warm::enable();
    glovebox::jail::cgroup::reuse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _watcher = watch::spawn(live.clone())
            .inspect_err(|e| eprintln!("glovebox: {e:#}; tool changes on disk will not be noticed"))
            .ok();
        let _relay = super::relay_mcp_lists(live.clone());
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
    // Idle warm workers end with their jails (and private HOMEs) removed.
    glovebox::run::warm::shutdown();
    glovebox::jail::cgroup::release_idle();
    eprintln!("glovebox: stopped");
    Ok(ExitCode::SUCCESS)
}
