//! `read_file {path}`: a text file of the project, as
//! `Successfully read N lines from PATH` followed by its content.

use serde_json::{json, Map, Value};

use crate::manifest::model::Manifest;
use crate::run::{ErrorKind, Outcome};

use super::protocol::Reply;
use super::{confine, Context};

/// The tool's name.
pub const NAME: &str = "read_file";

/// The tool's manifest.
pub fn manifest() -> Manifest {
    super::builtin_manifest(
        NAME,
        "Read the content of a text file inside the project. Returns `Successfully read N lines from PATH` followed by the file's content.",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["path"],
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The path to the file to read, relative to the project root"
                }
            }
        }),
        false,
        vec![("Read the README", json!({"path": "README.md"}))],
    )
}

/// Reads the file in the jail.
pub fn call(params: &Map<String, Value>, ctx: &Context<'_>) -> Outcome {
    let given = super::text(params, "path");
    let rel = match confine::relative(ctx.root, given, "path") {
        Ok(rel) => rel,
        Err(e) => return super::refused(NAME, &e),
    };
    let limit = ctx.config.limits.output_bytes;
    let request = ctx.read_request(&rel);
    let reply = match ctx.exchange(NAME, None, &request) {
        Ok(reply) => reply,
        Err(outcome) => return *outcome,
    };
    let fail =
        |kind, message: String| Outcome::failure(NAME, kind, message, json!({"path": given}));
    match reply {
        Reply::Content { text } => Outcome::success(
            NAME,
            Value::String(format!(
                "Successfully read {} lines from {given}\n{text}",
                text.lines().count()
            )),
        ),
        Reply::Missing => fail(
            ErrorKind::InputInvalid,
            format!("Error: File not found at {given}"),
        ),
        Reply::WrongType => fail(
            ErrorKind::InputInvalid,
            format!("Error: {given} is a directory, not a file; use list_files to see what it holds"),
        ),
        Reply::TooLarge { size } => fail(
            ErrorKind::ResourceLimit,
            format!("Error: {given} is {size} bytes, more than the {limit}-byte limit (limits.output_bytes in .glee/config.yml)"),
        ),
        Reply::Denied { detail } => fail(
            ErrorKind::PermissionExceedsCeiling,
            format!("Error: access to {given} was denied by the sandbox ({detail}); read_file reaches only files inside the project root, and a symbolic link cannot lead out of it"),
        ),
        Reply::Failed { detail } => fail(
            ErrorKind::InputInvalid,
            format!("Error: Unable to read file {given}: {detail}"),
        ),
        Reply::Listing { .. } | Reply::Written => fail(
            ErrorKind::Internal,
            "the built-in helper answered a read with something else".into(),
        ),
    }
}
