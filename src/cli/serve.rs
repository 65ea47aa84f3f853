//! `glovebox serve [--listen 127.0.0.1:7878]`: MCP over Streamable HTTP at
//! `/mcp` and the HTTP API at `/api/v1/tools` (see
//! `glovebox::serve::api`). Loopback by default; a non-loopback address
//! needs `GLOVEBOX_API_TOKEN`, which every request must then present as a
//! bearer token. Stops on SIGTERM/SIGINT after a grace period.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use glovebox::serve::call::CallLimits;
use glovebox::serve::http::{self, Options, DEFAULT_GRACE, DEFAULT_LISTEN, TOKEN_ENV};
use glovebox::serve::limits::{
    Limits, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_QUEUED, DEFAULT_MAX_SESSIONS,
    DEFAULT_REQUEST_TIMEOUT, DEFAULT_SESSION_IDLE_TIMEOUT, DEFAULT_USAGE_SCAN_BYTES,
};
use glovebox::serve::ready::Require;
use glovebox::serve::{ready, shutdown, watch};

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
    /// Idle connections one client (IP address) may hold; one more closes
    /// its oldest idle one [default: a quarter of
    /// --max-connections-per-peer].
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_idle_per_peer: Option<usize>,
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
    /// MiB every call's transparent network connections may hold in
    /// buffers together; past it a new one is refused (logged).
    #[arg(long, value_name = "MIB", default_value_t = glovebox::egress::budget::DEFAULT_BYTES_TOTAL >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub egress_memory: u64,
    /// MiB one call's transparent network connections may hold in
    /// buffers (also charged to the tool's memory limit).
    #[arg(long, value_name = "MIB", default_value_t = glovebox::egress::budget::DEFAULT_BYTES_PER_CALL >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub egress_memory_per_call: u64,
    /// Seconds one request may take (longer: 504, and its call is killed).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_REQUEST_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub request_timeout: u64,
    /// Seconds running calls get to finish after SIGTERM/SIGINT before they
    /// are killed.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_GRACE.as_secs(), env = "GLOVEBOX_GRACE",
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub grace: u64,
    /// A host name (`name` or `name:port`) a non-loopback server answers
    /// to besides its own address; repeatable. Requests naming another
    /// host get 421 (DNS rebinding). On loopback, which answers to
    /// localhost, 127.0.0.1 and [::1] with its port, only such a name with
    /// another port counts (`127.0.0.1:8080`: a balancer in front).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Without GLOVEBOX_API_TOKEN only the account running the server may
    /// call (each loopback connection's owner is looked up); this account
    /// (a uid or a user name) may too. Repeatable.
    #[arg(
        long = "allow-uid",
        value_name = "UID",
        env = "GLOVEBOX_ALLOW_UID",
        value_delimiter = ','
    )]
    pub allow_uid: Vec<String>,
    /// A browser origin (`http://localhost:6274`, as the browser sends it
    /// in `Origin`) whose pages may call; every other request with an
    /// `Origin` is refused. Repeatable; none by default.
    #[arg(
        long = "allow-origin",
        value_name = "ORIGIN",
        env = "GLOVEBOX_ALLOW_ORIGIN",
        value_delimiter = ','
    )]
    pub allow_origin: Vec<String>,
    /// Also serve /metrics (and /healthz, /readyz) on this address,
    /// without the API token: for Prometheus and the HPA, which carry
    /// none.
    #[arg(long, value_name = "ADDR", env = "GLOVEBOX_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Seconds after SIGTERM during which new calls get 503 with
    /// Retry-After and /readyz is 503, before the server stops accepting
    /// (time for a balancer to take it out).
    #[arg(long, value_name = "SECS", default_value_t = 0, env = "GLOVEBOX_DRAIN_DELAY",
          value_parser = clap::value_parser!(u64).range(0..=600))]
    pub drain_delay: u64,
    /// The weakest jail /readyz accepts: `any` (namespaces or the
    /// namespace-free mode) or `namespaces`.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Require::Any, env = "GLOVEBOX_REQUIRE_JAIL")]
    pub require_jail: Require,
    /// Seconds between the readiness probe's jails.
    #[arg(long, value_name = "SECS", default_value_t = 10, env = "GLOVEBOX_READY_INTERVAL",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ready_interval: u64,
    /// Run as one replica of many: tools come only from the image or the
    /// mounted project, and creating or deleting one (glee_tool_create,
    /// POST/DELETE /api/v1/tools) is refused. Implied by --approvals-dir.
    #[arg(long, env = "GLOVEBOX_REPLICATED", value_parser = clap::builder::BoolishValueParser::new())]
    pub replicated: bool,
    /// Make the next call's jail ahead of it (standby jails: held,
    /// planned and built while the server waits, revalidated by identity
    /// when the call arrives; one process and a few descriptors kept per
    /// recently called tool). Off by default.
    #[arg(long, env = "GLOVEBOX_STANDBY", value_parser = clap::builder::BoolishValueParser::new())]
    pub standby: bool,
    /// This replica's id, written as `replica=` on every audit line and
    /// exported record [default when replicated: the host name].
    #[arg(long, value_name = "ID", env = "GLOVEBOX_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// The directory of the audit log (tools.log) instead of the
    /// project's .glee/audit/ (a replica's project is read-only).
    #[arg(long, value_name = "DIR", env = "GLOVEBOX_AUDIT_DIR")]
    pub audit_dir: Option<PathBuf>,
    /// Export every audit line as it is written: `stdout` (one JSON object
    /// per line, for a log collector).
    #[arg(long, value_name = "SINK", value_enum, env = "GLOVEBOX_AUDIT_EXPORT")]
    pub audit_export: Option<AuditExport>,
    /// Also export every audit line as an OpenTelemetry log record over
    /// OTLP/HTTP (JSON) to this URL (a collector's `/v1/logs`, `http://`
    /// or `https://`).
    #[arg(long, value_name = "URL", env = "GLOVEBOX_AUDIT_OTLP")]
    pub audit_otlp: Option<String>,
    /// A PEM file of CA certificates an `https://` --audit-otlp collector
    /// may also be verified with (a private CA), beside the Mozilla roots.
    #[arg(
        long,
        value_name = "FILE",
        env = "GLOVEBOX_AUDIT_OTLP_CA",
        requires = "audit_otlp"
    )]
    pub audit_otlp_ca: Option<PathBuf>,
    /// The secret key (`glovebox approve --generate-key`) that signs the
    /// exported stream's checkpoints.
    #[arg(
        long,
        value_name = "KEYFILE",
        env = "GLOVEBOX_CHECKPOINT_KEY",
        requires = "audit_export"
    )]
    pub checkpoint_key: Option<PathBuf>,
    /// Lines between two signed checkpoints (and one at shutdown).
    #[arg(long, value_name = "N", default_value_t = 64, env = "GLOVEBOX_CHECKPOINT_EVERY",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub checkpoint_every: u64,
}

/// Where exported audit lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditExport {
    /// JSON lines on stdout.
    Stdout,
}

/// Sets up the replica's settings and the audit export.
fn replica(cli: &Cli, args: &Args) -> anyhow::Result<()> {
    let replicated = args.replicated || cli.approvals_dir.is_some();
    let id = match &args.replica_id {
        Some(id) if !glovebox::replica::valid_id(id) => {
            anyhow::bail!("--replica-id {id:?}: use letters, digits, `.`, `_` and `-` (at most 63)")
        }
        Some(id) => Some(id.clone()),
        None if replicated || args.audit_export.is_some() || args.audit_otlp.is_some() => {
            Some(glovebox::replica::default_id())
        }
        None => None,
    };
    if let Some(dir) = &args.audit_dir {
        std::fs::create_dir_all(dir)?;
    }
    glovebox::replica::set(glovebox::replica::Settings {
        id: id.clone(),
        replicated,
        audit_dir: args
            .audit_dir
            .as_ref()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())),
    });
    if args.audit_export.is_some() || args.audit_otlp.is_some() {
        use glovebox::audit::export::{Exporter, Sink};
        let key = match &args.checkpoint_key {
            Some(p) => {
                let key = glovebox::signing::load_signing(p)?;
                super::approve::remember(p);
                Some(key)
            }
            None if args.audit_export.is_some() => {
                eprintln!("glovebox: audit export without --checkpoint-key: the exported stream has no signed checkpoints, and `glovebox audit --verify --exported` cannot check it");
                None
            }
            None => None,
        };
        let replica = id.as_deref().unwrap_or("replica");
        let sink = match args.audit_export {
            Some(AuditExport::Stdout) => Sink::Stdout,
            None => Sink::None,
        };
        let mut exporter = Exporter::new(replica, sink, key, args.checkpoint_every);
        if let Some(url) = &args.audit_otlp {
            // Built here, before the async runtime (its client blocks).
            exporter = exporter.with_otlp(glovebox::audit::otlp::Otlp::start(
                url,
                replica,
                args.audit_otlp_ca.as_deref(),
            )?);
        }
        glovebox::audit::export::install(exporter);
    }
    if replicated {
        eprintln!(
            "glovebox: replica {}: tools come from the image or the mounted project; creating tools is refused",
            id.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}

/// `--allow-uid` values as uids: a number, or a user name looked up.
fn uids(given: &[String]) -> anyhow::Result<Vec<u32>> {
    given
        .iter()
        .map(|u| match u.parse::<u32>() {
            Ok(uid) => Ok(uid),
            Err(_) => match nix::unistd::User::from_name(u) {
                Ok(Some(user)) => Ok(user.uid.as_raw()),
                _ => anyhow::bail!("--allow-uid {u:?}: not a uid, and no user has that name"),
            },
        })
        .collect()
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    if token.is_some() && !args.allow_uid.is_empty() {
        eprintln!("glovebox: --allow-uid has no effect with {TOKEN_ENV} set: the token decides who may call");
    }
    let options = Options {
        listen: args.listen,
        token,
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            calls: CallLimits {
                max_concurrent: args.max_concurrent,
                max_queued: args.max_queued,
            },
            request_timeout: Duration::from_secs(args.request_timeout),
            max_connections: args.max_connections,
            max_connections_per_peer: args.max_connections_per_peer,
            max_idle_per_peer: args.max_idle_per_peer,
            max_streams: args.max_streams,
            max_streams_per_peer: args.max_streams_per_peer,
            header_timeout: Duration::from_secs(args.header_timeout),
            body_timeout: Duration::from_secs(args.body_timeout),
            max_sessions: args.max_sessions,
            session_idle_timeout: Duration::from_secs(args.session_idle_timeout),
            usage_scan_bytes: args.usage_scan_bytes,
            egress_memory: args.egress_memory << 20,
            egress_memory_per_call: args.egress_memory_per_call << 20,
        },
        grace: Duration::from_secs(args.grace),
        drain_delay: Duration::from_secs(args.drain_delay),
        hosts: args.allow_host.clone(),
        bound: Default::default(),
        allow_uids: uids(&args.allow_uid)?,
        origins: glovebox::serve::browsers::Origins::parse(&args.allow_origin)?,
        metrics_listen: args.metrics_listen,
    };
    options.check()?;
    replica(cli, args)?;
    let live = super::live(cli)?;
    // Python tools fork warm workers (the CLI `run` stays cold).
    glovebox::run::warm::enable();
    if args.standby {
        glovebox::jail::standby::enable();
    }
    glovebox::jail::cgroup::reuse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _watcher = watch::spawn(live.clone())
            .inspect_err(|e| eprintln!("glovebox: {e:#}; tool changes on disk will not be noticed"))
            .ok();
        let _relay = super::relay_mcp_lists(live.clone());
        ready::spawn_probes(args.require_jail, Duration::from_secs(args.ready_interval));
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
    // Standby jails end at their gates, their cgroups removed.
    if !glovebox::jail::standby::shutdown(std::time::Duration::from_secs(10)) {
        eprintln!("glovebox: a standby jail had not ended 10 s after shutdown");
    }
    // Idle warm workers end with their jails (and private HOMEs) removed.
    glovebox::run::warm::shutdown();
    glovebox::jail::cgroup::release_idle();
    // Every line is written (the calls have ended): synced, then the
    // final checkpoint.
    let synced = glovebox::audit::Log::for_project(live.root()).and_then(|l| l.sync_tail());
    if let Err(e) = synced {
        eprintln!("glovebox: the audit log could not be synced at shutdown: {e}");
    }
    glovebox::audit::export::finish();
    eprintln!("glovebox: stopped");
    Ok(ExitCode::SUCCESS)
}
