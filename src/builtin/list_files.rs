//! `list_files {directory, recursive=false}`: a directory of the project,
//! one entry per line, subdirectories first with a `/` suffix, each group
//! sorted by name; recursively, entries of a subdirectory follow it,
//! indented by two spaces per level. Symbolic links are listed, never
//! followed.

use serde_json::{json, Map, Value};

use crate::manifest::model::Manifest;
use crate::run::{ErrorKind, Outcome};

use super::protocol::{Reply, Request};
use super::{confine, Context};

/// The tool's name.
pub const NAME: &str = "list_files";

/// Entries listed at most in one call.
pub const MAX_ENTRIES: usize = 10_000;

/// The tool's manifest.
pub fn manifest() -> Manifest {
    super::builtin_manifest(
        NAME,
        "List the contents of a directory inside the project: subdirectories (ending in /) first, then files, sorted by name. With recursive, the entries of each subdirectory follow it, indented by two spaces.",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["directory"],
            "properties": {
                "directory": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The directory path to list, relative to the project root (. for the root)"
                },
                "recursive": {
                    "type": "boolean",
                    "default": false,
                    "description": "Whether to list files recursively"
                }
            }
        }),
        false,
        vec![
            ("List the project root", json!({"directory": "."})),
            ("List src/ recursively", json!({"directory": "src", "recursive": true})),
        ],
    )
}

/// Lists the directory in the jail.
pub fn call(params: &Map<String, Value>, ctx: &Context<'_>) -> Outcome {
    let given = super::text(params, "directory");
    let recursive = params
        .get("recursive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let rel = match confine::relative(ctx.root, given, "directory") {
        Ok(rel) => rel,
        Err(e) => return super::refused(NAME, &e),
    };
    let request = Request::List {
        root: ctx.root.to_path_buf(),
        directory: rel.to_string_lossy().into_owned(),
        recursive,
        max_entries: MAX_ENTRIES,
    };
    let reply = match ctx.exchange(NAME, None, &request) {
        Ok(reply) => reply,
        Err(outcome) => return *outcome,
    };
    let fail =
        |kind, message: String| Outcome::failure(NAME, kind, message, json!({"directory": given}));
    match reply {
        Reply::Listing { text } => Outcome::success(NAME, Value::String(text)),
        Reply::Missing => fail(
            ErrorKind::InputInvalid,
            format!("Error: Directory not found: {given}"),
        ),
        Reply::WrongType => fail(
            ErrorKind::InputInvalid,
            format!("Error: {given} is a file, not a directory; use read_file to read it"),
        ),
        Reply::Denied { detail } => fail(
            ErrorKind::PermissionExceedsCeiling,
            format!("Error: access to {given} was denied by the sandbox ({detail}); list_files reaches only directories inside the project root, and a symbolic link cannot lead out of it"),
        ),
        Reply::Failed { detail } => fail(
            ErrorKind::InputInvalid,
            format!("Error: Unable to list {given}: {detail}"),
        ),
        Reply::Content { .. } | Reply::Written | Reply::TooLarge { .. } => fail(
            ErrorKind::Internal,
            "the built-in helper answered a listing with something else".into(),
        ),
    }
}
