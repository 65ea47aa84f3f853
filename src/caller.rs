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
    /// The caller's W3C trace context (MCP `_meta.traceparent`, HTTP
    /// `traceparent`), when it is a valid one ([`traceparent`]): logged as
    /// `traceparent=` and continued by the OTLP export.
    pub trace: Option<String>,
}

/// `value` as a W3C `traceparent` (version `00`: `00-` 32 lowercase hex
/// digits of trace id `-` 16 of parent span id `-` 2 of flags, neither id
/// all zeros), or `None`: an invalid one is ignored, as the W3C Trace
/// Context spec asks, never an error. A later version's longer value is
/// read for its first four fields.
pub fn traceparent(value: &str) -> Option<String> {
    let value = value.trim();
    let mut parts = value.split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let parent = parts.next()?;
    let flags = parts.next()?;
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    let ok = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace, 32)
        && !zero(trace)
        && hex(parent, 16)
        && !zero(parent)
        && hex(flags, 2);
    ok.then(|| format!("00-{trace}-{parent}-{flags}"))
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

#[cfg(test)]
mod tests {
    use super::traceparent;

    #[test]
    fn a_traceparent_is_taken_only_when_valid() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(traceparent(ok).as_deref(), Some(ok));
        assert_eq!(traceparent(&format!(" {ok} ")).as_deref(), Some(ok));
        // A later version: its first four fields, as version 00.
        assert_eq!(
            traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra").as_deref(),
            Some(ok)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1z",
            "00-4bf92f3577b34da6a3ce929d0e0e4736 x-00f067aa0ba902b7-01",
        ] {
            assert_eq!(traceparent(bad), None, "{bad:?}");
        }
    }
}
