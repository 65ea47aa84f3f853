//! `GET /api/v1/tools/usage`: its query, and the recent calls it answers
//! from the audit log's entries.

use serde_json::{json, Map, Value};

use crate::audit;
use crate::serve::problem::Problem;

/// Usage entries answered when `limit` is not given.
pub const DEFAULT_USAGE_LIMIT: usize = 50;
/// Most usage entries answered.
pub const MAX_USAGE_LIMIT: usize = 1000;

/// The query of `GET /api/v1/tools/usage`: `limit`, `tool`, `agent_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// Most entries answered.
    pub limit: usize,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls of this agent (as logged, i.e. after
    /// [`audit::client_label`]).
    pub agent_id: Option<String>,
}

/// Reads the usage query string.
pub fn usage_query(query: Option<&str>) -> Result<UsageQuery, Problem> {
    let mut q = UsageQuery {
        limit: DEFAULT_USAGE_LIMIT,
        tool: None,
        agent_id: None,
    };
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "limit" => {
                q.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_USAGE_LIMIT).contains(n))
                    .ok_or_else(|| {
                        Problem::bad_request(format!(
                            "`limit` must be a whole number from 1 to {MAX_USAGE_LIMIT}, not {v:?}"
                        ))
                    })?
            }
            "tool" => q.tool = Some(v.into_owned()),
            "agent_id" => q.agent_id = Some(audit::client_label(&v)),
            _ => {}
        }
    }
    Ok(q)
}

/// Recent calls from the end of the audit log (its last
/// `--usage-scan-bytes`), newest first: `{ts, type, tool, …}`
/// with every field the log line has (`status`, `kind`, `duration_ms`,
/// `caller`, `agent_id`, `project_id`, `reason`); parameters are left out.
/// Calls are `TOOL_EXECUTED` entries and `TOOL_DENIED` ones for want of an
/// approval (not refused creations or deletions).
pub fn usage_records(entries: Vec<audit::Entry>, q: &UsageQuery) -> Vec<Value> {
    entries
        .into_iter()
        .rev()
        .filter(audit::Entry::is_call_result)
        .filter_map(|e| {
            let mut rec = Map::new();
            rec.insert("ts".into(), json!(audit::display(&e.ts)));
            rec.insert("type".into(), json!(audit::display(&e.event)));
            for (k, v) in e.fields {
                // Control characters a foreign line may hold are escaped.
                let v = audit::display(&v);
                match k.as_str() {
                    "name" => {
                        rec.insert("tool".into(), json!(v));
                    }
                    "duration_ms" => {
                        rec.insert(k, v.parse::<u64>().map_or(json!(v), |n| json!(n)));
                    }
                    "params" | "detail" | "permissions" => {}
                    _ => {
                        rec.insert(k, json!(v));
                    }
                }
            }
            let tool = rec.get("tool").and_then(Value::as_str)?;
            if q.tool.as_deref().is_some_and(|t| t != tool) {
                return None;
            }
            let agent = rec.get("agent_id").and_then(Value::as_str);
            if q.agent_id.is_some() && q.agent_id.as_deref() != agent {
                return None;
            }
            Some(Value::Object(rec))
        })
        .take(q.limit)
        .collect()
}
