//! The result of one tool call ([`Outcome`]) and its error kinds, the
//! contract of DESIGN.md that the CLI, MCP and HTTP adapters all print.

use serde::Serialize;
use serde_json::Value;

/// Why a call failed. Serialized in snake_case (`input_invalid`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No tool of that name.
    ToolNotFound,
    /// The manifest (or the project config) is unusable.
    ManifestInvalid,
    /// The parameters break `inputs.schema`.
    InputInvalid,
    /// A required secret is not in the caller's environment.
    SecretMissing,
    /// The tool needs an approval it does not have.
    ApprovalRequired,
    /// A created tool asks for more than the project's ceiling.
    PermissionExceedsCeiling,
    /// The kernel cannot enforce the tool's restrictions here.
    SandboxUnavailable,
    /// The command exited with a code not in `exit_codes_ok`.
    ExitCode,
    /// The wall-clock limit ran out.
    Timeout,
    /// A memory, process or output limit was exceeded.
    ResourceLimit,
    /// The python function raised.
    PythonException,
    /// The HTTP request failed.
    HttpError,
    /// The client cancelled the call, or went away before it ended; its
    /// processes were killed.
    Cancelled,
    /// The call's audit record could not be written, so the call was not
    /// run (`audit: best_effort` in `.glee/config.yml` runs it anyway).
    AuditUnavailable,
    /// Anything else.
    Internal,
    /// The output does not match the tool's declared output schema. Only
    /// MCP answers so (its specification requires structured content that
    /// matches a declared `outputSchema`); the CLI and the HTTP API keep
    /// the output with a warning.
    OutputInvalid,
    /// An HTTP request without the bearer token the server requires
    /// (`glovebox serve` with `GLOVEBOX_API_TOKEN`); never a tool call's.
    Unauthorized,
}

impl ErrorKind {
    /// The CLI exit status for this kind: 2 usage or manifest error, 3
    /// sandbox unavailable, 1 any other failed call.
    pub fn exit_status(self) -> u8 {
        match self {
            ErrorKind::ToolNotFound | ErrorKind::ManifestInvalid => 2,
            ErrorKind::SandboxUnavailable => 3,
            _ => 1,
        }
    }
}

/// A failed call's error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// In plain words, lowercase.
    pub message: String,
    /// Structured details (violations, exit code, …); `{}` when none.
    pub details: Value,
}

/// The result of one call: `ok` with `output`, or not with `error`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The tool's name.
    pub tool: String,
    /// Parsed JSON when the output format is json, else a string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
    /// Output-schema violations and degraded-mode notes.
    pub warnings: Vec<String>,
    /// Wall time of the whole call.
    pub duration_ms: u64,
    /// The process's exit code, when one ran and exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The process's standard error (bounded, secrets redacted), when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl Outcome {
    /// A failed outcome.
    pub fn failure(
        tool: &str,
        kind: ErrorKind,
        message: impl Into<String>,
        details: Value,
    ) -> Self {
        Outcome {
            ok: false,
            tool: tool.to_string(),
            output: None,
            error: Some(CallError {
                kind,
                message: message.into(),
                details,
            }),
            warnings: Vec::new(),
            duration_ms: 0,
            exit_code: None,
            stderr: None,
        }
    }

    /// A successful outcome.
    pub fn success(tool: &str, output: Value) -> Self {
        Outcome {
            ok: true,
            tool: tool.to_string(),
            output: Some(output),
            error: None,
            warnings: Vec::new(),
            duration_ms: 0,
            exit_code: None,
            stderr: None,
        }
    }

    /// The error kind, if the call failed.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.error.as_ref().map(|e| e.kind)
    }

    /// The CLI exit status: 0 on success, else by error kind.
    pub fn exit_status(&self) -> u8 {
        self.kind().map_or(0, ErrorKind::exit_status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The Outcome serialization and schemas/result.schema.json agree.
    #[test]
    fn outcomes_match_the_result_schema() {
        let schema: Value =
            serde_json::from_str(include_str!("../../schemas/result.schema.json")).unwrap();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let mut ok = Outcome::success("t", json!({"files": 1}));
        ok.exit_code = Some(0);
        ok.stderr = Some(String::new());
        let err = Outcome::failure(
            "t",
            ErrorKind::InputInvalid,
            "bad",
            json!({"violations": []}),
        );
        for o in [ok, err] {
            let v = serde_json::to_value(&o).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{v}: {errors:?}");
        }
        // Every kind serializes to a value the schema lists.
        let kinds = &schema["properties"]["error"]["properties"]["kind"]["enum"];
        for k in [
            ErrorKind::ToolNotFound,
            ErrorKind::ManifestInvalid,
            ErrorKind::InputInvalid,
            ErrorKind::SecretMissing,
            ErrorKind::ApprovalRequired,
            ErrorKind::PermissionExceedsCeiling,
            ErrorKind::SandboxUnavailable,
            ErrorKind::ExitCode,
            ErrorKind::Timeout,
            ErrorKind::ResourceLimit,
            ErrorKind::PythonException,
            ErrorKind::HttpError,
            ErrorKind::Internal,
        ] {
            let v = serde_json::to_value(k).unwrap();
            assert!(kinds.as_array().unwrap().contains(&v), "{v}");
        }
    }
}
