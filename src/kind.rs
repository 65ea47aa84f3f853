//! Why a call failed: the [`ErrorKind`] an Outcome carries (DESIGN.md's
//! error kinds, the same on the CLI, MCP and HTTP). It sits below every
//! other module so that each module's error enum can say its own kind
//! (`kind()`), the one mapping from an error to what callers see.

use serde::Serialize;

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
