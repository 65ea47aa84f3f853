//! The servers: MCP over stdio (`glovebox mcp`) and over Streamable HTTP
//! (`glovebox serve`, at `/mcp`).
//!
//! Both are thin adapters over [`crate::engine::Engine::call`]: validation,
//! approval, secrets, policy, the jail and the audit log are all decided
//! there. What lives here is protocol work only:
//!
//! - [`mcp`]: MCP itself — the `rmcp` server handler and the stdio
//!   server; [`mcp::catalog`], the tool list (every manifest as a native
//!   tool, plus the `glee_*` meta-tools; pagination); [`mcp::reply`], an
//!   [`crate::run::Outcome`] as an MCP tool result (the one place where
//!   glovebox errors become MCP errors); [`mcp::stdio`], the screened
//!   stdio transport of `glovebox mcp`; [`mcp::sessions`], the bounded
//!   sessions of `/mcp`; [`mcp::compat`], CORS for the allowed origins,
//!   `ping` without a session, `DELETE` answers: what clients expect
//!   beyond `rmcp`'s transport.
//! - [`api`]: the HTTP API (HDN-compatible `/api/v1/tools`, `/healthz`):
//!   its routes; [`api::tools`], the HDN tool view; [`api::usage`], recent
//!   calls from the audit log; described by [`api::openapi`].
//! - [`call`]: one call on a thread of its own while it runs, with
//!   cancellation and progress; [`workers`], the pool of those threads.
//! - [`live`]: the project being served, reloaded when `.glee/tools/`
//!   changes, and the connected clients told so.
//! - [`watch`]: the file watcher behind that reload.
//! - [`http`]: the HTTP server: a router with `/mcp` and the API mounted
//!   behind one guard — the bearer token, or without one the caller's
//!   account ([`owner`]), and what a web page may do ([`browsers`]:
//!   allowed origins, no CORS simple request acts); its refusals are
//!   [`problem`]s.
//! - [`limits`]: body size, connection, concurrency and time limits, and
//!   the open-file limit shared out (the server, each call's jail, the
//!   connections, each call's network connections).
//! - [`conns`]: the connection slots shared fairly: idle ones shed, the
//!   heaviest peer's first, new ones admitted at once, event streams
//!   bounded apart.
//! - [`wire`]: hyper's own 400/414/431 answers given JSON bodies.
//! - [`shutdown`]: SIGTERM/SIGINT, the grace period, then the kill.
//! - [`metrics`]: `GET /metrics` (Prometheus); [`ready`]: `/readyz`
//!   (the jail's posture, draining) and the refusal of new calls while
//!   draining.

pub mod api;
pub mod browsers;
pub mod call;
pub mod conns;
pub mod http;
pub mod limits;
pub mod live;
pub mod mcp;
pub mod metrics;
pub mod owner;
pub mod problem;
pub mod ready;
pub mod shutdown;
pub mod watch;
pub mod wire;
pub mod workers;
