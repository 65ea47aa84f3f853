//! Reading what an agentcli `tools.json` tool hands back
//! (`seeds/agentcli-tools-json.md`, "Execution model"): on exit 0, stdout
//! is one JSON value (a single line); on failure the tool exits non-zero
//! with a single-line JSON error, `{"error": "..."}`, on stderr, which
//! becomes the Outcome's error message.
//!
//! The call's JSON arguments reach the tool on stdin
//! ([`crate::jail::Stdin::Bytes`]); the jail's pump writes them without
//! blocking and stops at the first refused write, so a tool that never
//! reads stdin, or a payload larger than the pipe, cannot hang the call.

use serde_json::{json, Value};

use super::{exit_failure, parse_output, ErrorKind, Finished, Outcome, Redactor};
use crate::jail::{JailResult, Status};
use crate::manifest::model::Format;

/// The `error` string of a JSON error line (`{"error": "..."}`), taken
/// from the last non-empty line of `stderr` (or all of it).
pub fn error_message(stderr: &str) -> Option<String> {
    let from = |text: &str| -> Option<String> {
        let v: Value = serde_json::from_str(text.trim()).ok()?;
        match v.get("error")? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(from)
        .or_else(|| from(stderr))
}

/// Reads a finished agentcli tool (secrets and passthrough values
/// redacted).
pub fn read(tool: &str, result: &JailResult, redact: &Redactor) -> Finished {
    match result.status {
        Status::Exited(0) => {
            if result.stdout.iter().all(u8::is_ascii_whitespace) {
                return Finished::failed(Outcome::failure(
                    tool,
                    ErrorKind::Internal,
                    "the tool exited 0 but printed nothing on stdout; an agentcli tool must print its result as one line of JSON",
                    json!({}),
                ));
            }
            parse_output(tool, &result.stdout, Format::Json, redact)
        }
        status => {
            let stderr = redact.text(&String::from_utf8_lossy(&result.stderr));
            match (status, error_message(&stderr)) {
                (Status::Exited(code), Some(message)) => Finished::failed(Outcome::failure(
                    tool,
                    ErrorKind::ExitCode,
                    message.clone(),
                    json!({"exit_code": code, "error": message}),
                )),
                _ => Finished::failed(exit_failure(tool, status, &stderr, &[0])),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines() {
        assert_eq!(
            error_message("warning: x\n{\"error\":\"bad tz\"}\n").as_deref(),
            Some("bad tz")
        );
        assert_eq!(
            error_message("{\n \"error\": \"multi\"\n}").as_deref(),
            Some("multi")
        );
        assert_eq!(error_message("plain failure\n"), None);
        assert_eq!(error_message("{\"other\":1}"), None);
    }
}
