//! Running one tool: command and python kinds in the jail, and the
//! [`Outcome`] every interface returns.
//!
//! [`crate::engine::Engine::call`] decides everything before a process
//! starts (tool, inputs, approval, secrets, policy); this module turns the
//! decision into a [`crate::jail::Spec`] and the jail's result into an
//! [`Outcome`]. Under the servers a python call may run in a [`warm`]
//! worker instead of a fresh jail; it yields the same kind of result, read
//! by the same code.

pub mod agentcli;
pub mod command;
pub mod egress;
pub mod http;
pub(crate) mod job;
pub mod outcome;
pub mod pins;
pub mod python;
pub mod safepath;
pub mod secrets;
pub mod select;
pub mod warm;

use std::path::Path;

use serde_json::{json, Value};

use crate::jail::{self, JailError, JailResult, LimitHit, Status};
use crate::manifest::model::Format;
use crate::state::StateError;
use crate::validate::Schemas;

pub use outcome::{CallError, ErrorKind, Outcome};
pub use secrets::{Redactor, SecretSource};

/// Why a jailed run did not happen ([`start`]).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The grants would bring glovebox's state directory into the jail:
    /// refused before anything starts, whoever asked (a manifest, a
    /// built-in, `glovebox sandbox`).
    #[error(transparent)]
    State(#[from] StateError),
    /// The jail failed.
    #[error(transparent)]
    Jail(#[from] JailError),
}

impl StartError {
    /// The Outcome's error kind for this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StartError::State(e) => e.kind(),
            StartError::Jail(e) => e.kind(),
        }
    }
}

/// Maps a failed start (nothing ran, or it could not start) to an outcome.
pub fn jail_error(tool: &str, err: &StartError, program: &Path) -> Outcome {
    if let StartError::Jail(JailError::Exec { source, .. }) = err {
        if source.raw_os_error() == Some(libc::E2BIG) {
            // The parameters, not the manifest: a value too long for argv.
            return Outcome::failure(
                tool,
                err.kind(),
                "the parameters make the command line longer than the kernel accepts (at most 128 KiB per argument, about 2 MiB in all); send shorter values, or give the tool large ones another way (a file it reads)",
                json!({"program": program, "limit": "argument_length"}),
            );
        }
    }
    let details = match err {
        // The host's, for a moment: the caller may retry (HTTP says when).
        StartError::Jail(e) if e.is_transient() => {
            json!({"program": program, "transient": true, "retry_after_s": 1})
        }
        _ => json!({"program": program}),
    };
    Outcome::failure(tool, err.kind(), error_chain(err), details)
}

pub use crate::kind::error_chain;

/// What the kind-specific part decided about a finished process.
pub enum Finished {
    /// The tool produced this output.
    Output(Value),
    /// The tool failed (boxed: an Outcome is large beside a value).
    Failed(Box<Outcome>),
}

impl Finished {
    /// The tool failed with `outcome`.
    pub fn failed(outcome: Outcome) -> Finished {
        Finished::Failed(Box::new(outcome))
    }
}

/// Common handling of a finished jailed process: limits first (a tree
/// killed at its deadline or for memory says so), then the kind-specific
/// reading of its output. Secrets are redacted from everything returned.
/// `limits` are the limits the process ran under.
pub fn finish(
    tool: &str,
    result: JailResult,
    limits: &crate::jail::Limits,
    redact: &Redactor,
    schemas: &Schemas,
    read: impl FnOnce(&JailResult, &Redactor) -> Finished,
) -> Outcome {
    let mut result = result;
    // An output cap cut the stream: what was kept may end in the first
    // characters of a secret, which whole-value redaction cannot see.
    if result.stdout_bytes > result.stdout.len() as u64 {
        result.stdout = redact
            .text_cut(&String::from_utf8_lossy(&result.stdout))
            .into_bytes();
    }
    if result.stderr_bytes > result.stderr.len() as u64 {
        result.stderr = redact
            .text_cut(&String::from_utf8_lossy(&result.stderr))
            .into_bytes();
    }
    let stderr = redact.text(&String::from_utf8_lossy(&result.stderr));
    let exit_code = match result.status {
        Status::Exited(c) => Some(c),
        Status::Signaled(_) => None,
    };
    let wall = limits.wall;
    let hit = |h: LimitHit| result.limits_hit.contains(&h);
    let limit_failure = if hit(LimitHit::Timeout) {
        Some((
            ErrorKind::Timeout,
            format!(
                "the tool ran past its {} ms limit (stopped after {} ms); all its processes were killed",
                wall.as_millis(),
                result.duration.as_millis()
            ),
            "timeout",
        ))
    } else if hit(LimitHit::Memory) {
        Some((
            ErrorKind::ResourceLimit,
            "the tool exceeded its memory limit and was killed".to_string(),
            "memory",
        ))
    } else if hit(LimitHit::Output) {
        Some((
            ErrorKind::ResourceLimit,
            format!(
                "the tool printed more than its output limit of {} bytes (limits.output_bytes in .glee/config.yml): {} bytes of stdout and {} of stderr; only the first {} of each were kept",
                limits.output_bytes, result.stdout_bytes, result.stderr_bytes, limits.output_bytes
            ),
            "output",
        ))
    } else if hit(LimitHit::Pids) {
        // Exceeding a limit fails the call even when the tool coped with
        // the refused fork (invariant 9).
        Some((
            ErrorKind::ResourceLimit,
            "the tool tried to run more processes than its limit allows; a fork was refused"
                .to_string(),
            "pids",
        ))
    } else {
        None
    };
    let mut outcome = match limit_failure {
        _ if result.cancelled => Outcome::failure(
            tool,
            ErrorKind::Internal,
            "the call was cancelled by the caller; all its processes were killed",
            json!({"cancelled": true}),
        ),
        Some((kind, message, limit)) => {
            let details = if kind == ErrorKind::Timeout {
                json!({"limit": limit, "timeout_ms": wall.as_millis() as u64})
            } else if limit == "output" {
                json!({"limit": limit, "output_bytes": limits.output_bytes})
            } else {
                json!({"limit": limit})
            };
            Outcome::failure(tool, kind, message, details)
        }
        None => match read(&result, redact) {
            Finished::Output(value) => {
                let mut o = Outcome::success(tool, value);
                if let Some(v) = &o.output {
                    for violation in schemas.check_output(v) {
                        o.warnings.push(format!(
                            "{OUTPUT_MISMATCH} at {:?}: {}",
                            violation.pointer, violation.message
                        ));
                    }
                }
                o
            }
            Finished::Failed(o) => *o,
        },
    };
    if let Some(e) = &mut outcome.error {
        e.message = redact.text(&e.message);
        e.details = redact.value(std::mem::take(&mut e.details));
    }
    outcome.exit_code = exit_code;
    outcome.stderr = Some(stderr);
    outcome.warnings.extend(result.warnings.iter().cloned());
    outcome
}

/// How the warning about an output that breaks `outputs.schema` starts.
pub const OUTPUT_MISMATCH: &str = "output does not match outputs.schema";

/// The tool's stdout read as its declared format (secrets redacted).
pub fn parse_output(tool: &str, stdout: &[u8], format: Format, redact: &Redactor) -> Finished {
    let text = redact.text(&String::from_utf8_lossy(stdout));
    match format {
        Format::Text => Finished::Output(Value::String(text)),
        Format::Json => match serde_json::from_str::<Value>(&text) {
            Ok(v) => Finished::Output(redact.value(v)),
            Err(e) => {
                let byte = byte_offset(&text, e.line(), e.column());
                Finished::failed(Outcome::failure(
                    tool,
                    ErrorKind::Internal,
                    format!("the tool's output is not valid JSON: {e} (first bad byte at offset {byte})"),
                    json!({"byte": byte, "line": e.line(), "column": e.column()}),
                ))
            }
        },
    }
}

/// Byte offset of a 1-based line/column position in `text`.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    start + column.saturating_sub(1)
}

/// A non-zero (not allowed) exit or a signal, as an `exit_code` failure.
pub fn exit_failure(tool: &str, status: Status, stderr: &str, allowed: &[i32]) -> Outcome {
    let excerpt: String = stderr
        .chars()
        .rev()
        .take(2000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    match status {
        Status::Exited(code) => Outcome::failure(
            tool,
            ErrorKind::ExitCode,
            format!(
                "the tool exited with code {code} (allowed: {allowed:?}){}",
                if excerpt.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", excerpt.trim())
                }
            ),
            json!({"exit_code": code, "stderr": excerpt}),
        ),
        Status::Signaled(sig) => Outcome::failure(
            tool,
            ErrorKind::ExitCode,
            format!("the tool was killed by signal {sig}"),
            json!({"signal": sig, "stderr": excerpt}),
        ),
    }
}

/// Starts `spec` in the jail: the one door every jailed run goes
/// through. Grants that would cover glovebox's state directory are
/// refused here, before anything starts (invariant 11).
pub fn start(spec: &jail::Spec) -> Result<JailResult, StartError> {
    let state: Vec<std::path::PathBuf> = crate::state::dir().into_iter().collect();
    Ok(jail::run_keeping_out(spec, &state)?)
}
