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

/// The error and its sources, joined (a source whose text the message
/// already ends with is not repeated).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let text = c.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::ErrorKind as K;
    use std::io;
    use std::path::PathBuf;

    fn os(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    /// Every module's error says its own kind; this is the one table of
    /// error → kind the CLI, MCP and HTTP all show.
    #[test]
    fn each_error_maps_to_one_kind() {
        use crate::builtin::confine::ConfineError;
        use crate::create::CreateError;
        use crate::egress::intercept::InterceptError;
        use crate::egress::placeholder::PlaceholderError;
        use crate::httpclient::ClientError;
        use crate::jail::JailError;
        use crate::manifest::project::ProjectError;
        use crate::net::PatternError;
        use crate::policy::PolicyError;
        use crate::run::python::PythonError;
        use crate::run::secrets::SecretError;
        use crate::run::StartError;
        use crate::state::StateError;
        use crate::template::TemplateError;

        let exposed = || StateError::Exposed {
            path: PathBuf::from("/"),
            state: PathBuf::from("/s"),
        };
        let table: Vec<(K, K)> = vec![
            // The jail and its one door.
            (
                JailError::Unavailable {
                    feature: "landlock".into(),
                }
                .kind(),
                K::SandboxUnavailable,
            ),
            (
                JailError::NotFound {
                    program: "x".into(),
                }
                .kind(),
                K::ManifestInvalid,
            ),
            (
                JailError::ExecDenied {
                    program: "x".into(),
                    source: os(libc::EACCES),
                }
                .kind(),
                K::ManifestInvalid,
            ),
            (
                JailError::Exec {
                    program: "x".into(),
                    source: os(libc::E2BIG),
                }
                .kind(),
                K::InputInvalid,
            ),
            (
                JailError::InvalidSpec {
                    message: "x".into(),
                }
                .kind(),
                K::InputInvalid,
            ),
            // A grant replaced during set-up refuses; the host replacing
            // baseline files through every try is transient.
            (JailError::Changed.kind(), K::ManifestInvalid),
            (
                JailError::HostChurn {
                    paths: vec![PathBuf::from("/etc/ld.so.cache")],
                    tries: 8,
                }
                .kind(),
                K::SandboxUnavailable,
            ),
            (
                JailError::Wait {
                    source: os(libc::EINTR),
                }
                .kind(),
                K::Internal,
            ),
            (exposed().kind(), K::PermissionExceedsCeiling),
            (
                StartError::from(exposed()).kind(),
                K::PermissionExceedsCeiling,
            ),
            (StateError::NoLocation.kind(), K::Internal),
            // What a manifest asks for.
            (
                ProjectError::ToolNotFound {
                    name: "x".into(),
                    hint: String::new(),
                }
                .kind(),
                K::ToolNotFound,
            ),
            (ProjectError::ConfigInvalid.kind(), K::ManifestInvalid),
            (
                crate::planted::PlantedError::Tainted {
                    root: PathBuf::new(),
                    files: Vec::new(),
                    state: String::new(),
                }
                .kind(),
                K::ManifestInvalid,
            ),
            (
                crate::planted::PlantedError::Busy {
                    root: PathBuf::new(),
                }
                .kind(),
                K::Internal,
            ),
            (
                ProjectError::from(crate::manifest::discover::DiscoverError::NoRoot {
                    start: PathBuf::from("/x"),
                })
                .kind(),
                K::ManifestInvalid,
            ),
            (
                PolicyError::OutsideAllowed {
                    what: "cwd",
                    path: PathBuf::from("/x"),
                }
                .kind(),
                K::ManifestInvalid,
            ),
            (PythonError::NoPython.kind(), K::ManifestInvalid),
            (
                TemplateError::Unknown { name: "x".into() }.kind(),
                K::ManifestInvalid,
            ),
            (
                TemplateError::DotSegment { name: "x".into() }.kind(),
                K::InputInvalid,
            ),
            // The built-ins' confinement.
            (
                ConfineError::Empty { param: "path" }.kind(),
                K::InputInvalid,
            ),
            (
                ConfineError::Outside { path: "..".into() }.kind(),
                K::PermissionExceedsCeiling,
            ),
            // Agent-created tools (MCP and HTTP alike).
            (
                CreateError::ExceedsCeiling { excess: vec![] }.kind(),
                K::PermissionExceedsCeiling,
            ),
            (
                CreateError::NotCreated { name: "x".into() }.kind(),
                K::PermissionExceedsCeiling,
            ),
            (
                CreateError::NotFound { name: "x".into() }.kind(),
                K::ToolNotFound,
            ),
            (
                CreateError::Exists { name: "x".into() }.kind(),
                K::ManifestInvalid,
            ),
            (CreateError::Config.kind(), K::ManifestInvalid),
            (CreateError::from(exposed()).kind(), K::Internal),
            // The audit log and http requests.
            (
                crate::audit::AuditError::Io {
                    path: PathBuf::from("/x"),
                    source: os(libc::ENOSPC),
                }
                .kind(),
                K::AuditUnavailable,
            ),
            (ClientError::Timeout { ms: 1 }.kind(), K::Timeout),
            (ClientError::TooLarge { limit: 1 }.kind(), K::ResourceLimit),
            (ClientError::Runtime(os(libc::EMFILE)).kind(), K::Internal),
            (
                ClientError::Scheme {
                    scheme: "ftp".into(),
                }
                .kind(),
                K::HttpError,
            ),
            // Secrets and their placeholders.
            (
                SecretError::Hosts {
                    name: "TOKEN".into(),
                    source: PatternError::Invalid {
                        pattern: "a b".into(),
                        why: "x",
                    },
                }
                .kind(),
                K::ManifestInvalid,
            ),
            (
                SecretError::from(PlaceholderError::TooShort {
                    name: "TOKEN".into(),
                })
                .kind(),
                K::SecretMissing,
            ),
            (
                InterceptError::Ca(rcgen::Error::KeyGenerationUnavailable).kind(),
                K::Internal,
            ),
        ];
        for (row, (got, want)) in table.into_iter().enumerate() {
            assert_eq!(got, want, "row {row}");
        }
    }
}
