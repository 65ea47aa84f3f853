//! glovebox results as MCP tool results: the one place where an
//! [`Outcome`] (or a failed `glee_tool_create`) becomes what an MCP client
//! reads.
//!
//! A successful call answers with its output: JSON output as
//! `structuredContent` (when it is an object) and as a text block holding
//! the JSON text; text output as a text block. A failed call answers with
//! `isError: true` and a text block holding the JSON of the Outcome's
//! `error` object (`{kind, message, details}`), so the model can read what
//! went wrong and correct itself. Warnings (output-schema violations,
//! degraded mode) travel in `_meta.glovebox.warnings`.

use rmcp::model::{CallToolResult, ContentBlock as Content, MetaObject};
use rmcp::ErrorData;
use serde_json::{json, Value};

use crate::create::CreateError;
use crate::run::{ErrorKind, Outcome};

/// A tool call's [`Outcome`] as an MCP tool result.
pub fn outcome(o: &Outcome) -> CallToolResult {
    let mut r = match (&o.output, &o.error) {
        (_, Some(e)) => CallToolResult::error(vec![Content::text(json_text(&json!({
            "kind": e.kind,
            "message": e.message,
            "details": e.details,
        })))]),
        (Some(Value::String(s)), None) => CallToolResult::success(vec![Content::text(s.clone())]),
        (Some(v @ Value::Object(_)), None) => CallToolResult::structured(v.clone()),
        (Some(v), None) => CallToolResult::success(vec![Content::text(json_text(v))]),
        (None, None) => CallToolResult::success(Vec::new()),
    };
    if !o.warnings.is_empty() {
        r = r.with_meta(meta(json!({"glovebox": {"warnings": o.warnings}})));
    }
    r
}

/// A tool call's [`Outcome`] as the MCP result of a tool that declares an
/// `outputSchema` (when `declares_output_schema`): an output that is not
/// an object, or breaks the schema, is an `isError` result of kind
/// `output_invalid` naming the mismatch (and holding the output), since
/// MCP clients reject a result without matching structured content. The
/// CLI and the HTTP API keep such output, with a warning.
pub fn checked_outcome(o: &Outcome, declares_output_schema: bool) -> CallToolResult {
    if !declares_output_schema || !o.ok {
        return outcome(o);
    }
    let violations: Vec<&String> = o
        .warnings
        .iter()
        .filter(|w| w.starts_with(crate::run::OUTPUT_MISMATCH))
        .collect();
    let message = match &o.output {
        Some(Value::Object(_)) if violations.is_empty() => return outcome(o),
        Some(Value::Object(_)) => format!(
            "the output of `{}` does not match its outputSchema: {}",
            o.tool,
            violations
                .iter()
                .map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Some(Value::String(_)) => format!(
            "the output of `{}` is text, but it declares an outputSchema (a JSON object): print JSON and set outputs.format: json",
            o.tool
        ),
        _ => format!(
            "the output of `{}` is not a JSON object, but it declares an outputSchema (a JSON object)",
            o.tool
        ),
    };
    failure(
        ErrorKind::OutputInvalid,
        message,
        json!({"violations": violations, "output": o.output}),
    )
}

/// A successful JSON answer of a `glee_*` tool: `text` as the text block
/// (what the seed documents) and `structured` as `structuredContent`.
pub fn meta_answer(text: &Value, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![Content::text(json_text(text))]);
    r.structured_content = Some(structured);
    r
}

/// A failed `glee_*` call, shaped like a failed Outcome's error.
pub fn failure(kind: ErrorKind, message: impl Into<String>, details: Value) -> CallToolResult {
    CallToolResult::error(vec![Content::text(json_text(&json!({
        "kind": kind,
        "message": message.into(),
        "details": details,
    })))])
}

/// A failed `glee_tool_create`.
pub fn create_failure(e: &CreateError) -> CallToolResult {
    failure(e.kind(), crate::run::error_chain(e), e.details())
}

/// Longest part of a client's tool name an error message repeats.
pub const SHOWN_NAME_BYTES: usize = 128;

/// `name` as an error message repeats it: at most [`SHOWN_NAME_BYTES`]
/// (cut at a character boundary) and `…` when it was longer.
pub fn shown_name(name: &str) -> String {
    if name.len() <= SHOWN_NAME_BYTES {
        return name.to_string();
    }
    let mut end = SHOWN_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

/// A call to a tool this server does not offer: a protocol error (invalid
/// params), as the MCP specification asks for unknown tools.
pub fn unknown_tool(name: &str) -> ErrorData {
    let name = shown_name(name);
    ErrorData::invalid_params(
        format!("unknown tool `{name}`; call tools/list (or glee_tools_list) to see the tools"),
        Some(json!({"kind": ErrorKind::ToolNotFound})),
    )
}

/// Arguments of a `glee_*` tool that do not match its input schema.
pub fn bad_arguments(tool: &str, message: impl Into<String>) -> CallToolResult {
    failure(
        ErrorKind::InputInvalid,
        format!("{tool}: {}", message.into()),
        json!({}),
    )
}

fn meta(v: Value) -> Option<MetaObject> {
    match v {
        Value::Object(o) => Some(MetaObject(o)),
        _ => None,
    }
}

fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_tool_name_is_cut_in_the_error() {
        let long = "é".repeat(500_000);
        let e = unknown_tool(&long);
        assert!(e.message.len() < 300, "{} bytes", e.message.len());
        assert!(e.message.contains("…`"), "{}", e.message);
        assert_eq!(shown_name("echo"), "echo");
        let cut = shown_name(&long);
        assert_eq!(cut.len(), SHOWN_NAME_BYTES + "…".len());
    }

    #[test]
    fn json_output_is_structured_and_text() {
        let r = outcome(&Outcome::success("t", json!({"n": 1})));
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"n": 1})));
        let text = &r.content[0].as_text().unwrap().text;
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"n": 1})
        );
    }

    #[test]
    fn text_output_is_text() {
        let r = outcome(&Outcome::success("t", json!("hello\n")));
        assert_eq!(r.structured_content, None);
        assert_eq!(r.content[0].as_text().unwrap().text, "hello\n");
    }

    #[test]
    fn failures_carry_the_error_object() {
        let o = Outcome::failure("t", ErrorKind::InputInvalid, "bad", json!({"v": []}));
        let r = outcome(&o);
        assert_eq!(r.is_error, Some(true));
        let v: Value = serde_json::from_str(&r.content[0].as_text().unwrap().text).unwrap();
        assert_eq!(
            v,
            json!({"kind": "input_invalid", "message": "bad", "details": {"v": []}})
        );
    }

    #[test]
    fn warnings_travel_in_meta() {
        let mut o = Outcome::success("t", json!({"n": 1}));
        o.warnings.push("degraded".into());
        let v = serde_json::to_value(outcome(&o)).unwrap();
        assert_eq!(v["_meta"]["glovebox"]["warnings"], json!(["degraded"]));
    }
}
