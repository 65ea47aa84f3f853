//! The audit log's vocabulary: the names of its events (a line's type;
//! everything that writes or reads a line names its event through these)
//! and the [`Event`]s glovebox logs for a call ([`Event::call_started`],
//! [`Event::call_unapproved`], [`Event::call_result`]). How an event
//! becomes a line is `line`; how a line is sealed, `chain`.

use crate::kind::ErrorKind;

use super::line::client_label;

/// A call's intent, written and synced before it starts anything.
pub const TOOL_STARTED: &str = "TOOL_STARTED";
/// A call's result.
pub const TOOL_EXECUTED: &str = "TOOL_EXECUTED";
/// A call, creation or deletion refused (`reason=`).
pub const TOOL_DENIED: &str = "TOOL_DENIED";
/// An agent created a tool.
pub const TOOL_CREATED: &str = "TOOL_CREATED";
/// An agent deleted a tool it created.
pub const TOOL_DELETED: &str = "TOOL_DELETED";
/// A person approved a tool.
pub const TOOL_APPROVED: &str = "TOOL_APPROVED";
/// A write to the log was interrupted before its end.
pub const AUDIT_INTERRUPTED: &str = "AUDIT_INTERRUPTED";
/// The log's end no longer matched its head when a line was added.
pub const AUDIT_BREAK: &str = "AUDIT_BREAK";
/// A person acknowledged the damage (`audit --reseal`).
pub const AUDIT_RESEALED: &str = "AUDIT_RESEALED";

/// One event to log: its type and `key=value` fields, in order.
#[derive(Debug, Clone)]
pub struct Event {
    /// One of this module's names ([`TOOL_EXECUTED`], …).
    pub kind: &'static str,
    /// Fields; values are written as they are (callers keep them on one
    /// line and redacted).
    pub fields: Vec<(&'static str, String)>,
}

/// Who made a call, as its lines name it: the caller's id and, when the
/// client said, its agent and project (`agent_id=`, `project_id=`, each
/// through [`client_label`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Who<'a> {
    /// Free-form identity (`cli`, an MCP client name, …).
    pub caller: &'a str,
    /// HTTP `X-Agent-ID`.
    pub agent_id: Option<&'a str>,
    /// HTTP `X-Project-ID`.
    pub project_id: Option<&'a str>,
    /// The caller's W3C `traceparent` (validated where the interface
    /// reads it).
    pub trace: Option<&'a str>,
}

/// A call's end, as its [`TOOL_EXECUTED`] line records it.
#[derive(Debug, Clone)]
pub struct CallResult<'a> {
    /// The tool's name (as the caller gave it).
    pub name: &'a str,
    /// The call's id, when its intent was written.
    pub call: Option<&'a str>,
    /// The parameters as the log keeps them (redacted, abbreviated).
    pub params: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// Its error kind, if it failed.
    pub kind: Option<ErrorKind>,
    /// Its wall time.
    pub duration_ms: u64,
    /// An agentcli tool's passed-through variable names, as a JSON array.
    pub env_keys: Option<String>,
    /// Fields the run added (`egress=[…]`, `network=direct`, …).
    pub extra: Vec<(&'static str, String)>,
}

impl Event {
    /// [`TOOL_STARTED`]: a call's intent, written before it
    /// starts anything.
    pub fn call_started(name: &str, call: &str, params: &str, who: Who<'_>) -> Event {
        Event {
            kind: TOOL_STARTED,
            fields: vec![
                ("name", client_label(name)),
                ("call", call.to_string()),
                ("params", params.to_string()),
                ("caller", who.caller.to_string()),
            ],
        }
        .with_client(who)
    }

    /// [`TOOL_DENIED`] `reason=approval_required`: a call refused
    /// for want of an approval.
    pub fn call_unapproved(name: &str, call: Option<&str>, params: String, who: Who<'_>) -> Event {
        let mut fields = vec![("name", client_label(name))];
        match call {
            // Its intent line holds the parameters.
            Some(id) => fields.push(("call", id.to_string())),
            None => fields.push(("params", params)),
        }
        fields.extend([
            ("reason", "approval_required".into()),
            ("caller", who.caller.to_string()),
        ]);
        Event {
            kind: TOOL_DENIED,
            fields,
        }
        .with_client(who)
    }

    /// [`TOOL_EXECUTED`]: a call's result.
    pub fn call_result(r: CallResult<'_>, who: Who<'_>) -> Event {
        let mut fields = vec![("name", client_label(r.name))];
        match r.call {
            // The intent line of the same call id holds the parameters:
            // said once, not twice.
            Some(id) => fields.push(("call", id.to_string())),
            None => fields.push(("params", r.params)),
        }
        fields.push(("status", if r.ok { "success" } else { "error" }.to_string()));
        if let Some(k) = r.kind {
            fields.push((
                "kind",
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            ));
        }
        fields.push(("duration_ms", r.duration_ms.to_string()));
        if let Some(keys) = r.env_keys {
            fields.push(("envKeys", keys));
        }
        fields.extend(r.extra);
        fields.push(("caller", who.caller.to_string()));
        Event {
            kind: TOOL_EXECUTED,
            fields,
        }
        .with_client(who)
    }

    /// The event with the client's `agent_id` / `project_id`, when given.
    fn with_client(mut self, who: Who<'_>) -> Self {
        if let Some(a) = who.agent_id {
            self.fields.push(("agent_id", client_label(a)));
        }
        if let Some(p) = who.project_id {
            self.fields.push(("project_id", client_label(p)));
        }
        if let Some(t) = who.trace {
            self.fields.push(("traceparent", client_label(t)));
        }
        self
    }
}
