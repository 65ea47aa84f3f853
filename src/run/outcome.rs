//! The result of one tool call ([`Outcome`]) and its error kinds, the
//! contract of DESIGN.md that the CLI, MCP and HTTP adapters all print.

use serde::Serialize;
use serde_json::Value;

pub use crate::kind::ErrorKind;

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
    /// Files people run by hand (`Makefile`, `package.json`, CI
    /// workflows: [`crate::surface::RUN_BY_HAND`]) that the call created,
    /// changed or removed, relative to the project root: review them
    /// before running them ([`crate::byhand`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_surfaces_changed: Vec<String>,
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
            run_surfaces_changed: Vec::new(),
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
            run_surfaces_changed: Vec::new(),
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
        ok.run_surfaces_changed = vec!["Makefile".into()];
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
