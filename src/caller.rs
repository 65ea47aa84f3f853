//! Who makes a call, and what they bring to it: the one [`Caller`] every
//! interface (CLI, MCP, HTTP, the built-in tools' helper) hands to
//! [`crate::engine::Engine::call`], and why a call was cancelled. Below the
//! engine and the built-in tools, so both name it without a cycle.

use std::sync::Arc;
use std::time::Instant;

use crate::jail;
use crate::run::SecretSource;

/// Who is calling, and what they bring.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// Free-form identity for logs ("cli", an MCP client name, …).
    pub id: String,
    /// The caller approved this call now (`--yes`, or a y/N prompt).
    pub approved: bool,
    /// The caller can approve one call itself (`glovebox run --yes`, or
    /// its y/N prompt): the CLI, on the user's own terminal. A refusal
    /// for want of approval then names that way too.
    pub approves_once: bool,
    /// The caller prints the Outcome, warnings included, on glovebox's
    /// own stderr (`glovebox run` without `--json`), so the engine does
    /// not say its audit failures there a second time.
    pub prints_to_stderr: bool,
    /// Where declared secrets are read from.
    pub secrets: SecretSource,
    /// Stops the call's jailed process tree when cancelled (an MCP client's
    /// `notifications/cancelled`); `None`: the call runs to its end.
    pub cancel: Option<jail::Cancel>,
    /// The agent on whose behalf the call is made, as the client says
    /// (HTTP `X-Agent-ID`); logged as `agent_id=`, after
    /// [`crate::audit::client_label`].
    pub agent_id: Option<String>,
    /// The client's project (HTTP `X-Project-ID`); logged as `project_id=`.
    pub project_id: Option<String>,
    /// Why [`Caller::cancel`] was fired, set by whoever fired it, so that
    /// the Outcome (and the audit line) says so with the right kind.
    pub cancelled: Arc<std::sync::OnceLock<Cancelled>>,
    /// When the request carrying the call runs out of time (HTTP
    /// `--request-timeout`); a call ended past it was timed out.
    pub deadline: Option<(Instant, std::time::Duration)>,
    /// Where a wrapped MCP server's progress reports for the call go (the
    /// MCP client's, with its progress token); `None`: dropped.
    pub progress: Option<crate::mcpwrap::client::Relay>,
}

/// Why a call was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// The client cancelled it (MCP `notifications/cancelled`).
    ByClient,
    /// The client went away before it ended (connection closed).
    ClientGone,
    /// The request ran past its time limit.
    RequestTimeout(std::time::Duration),
}
