//! `write_file {path, content}`: creates or replaces a text file of the
//! project, never in its control surface (`.glee/`, a root `tools.json`,
//! `.git/`, any file or package a tool runs: [`crate::surface`]), whatever
//! `safety_mode`, after showing a unified diff.
//!
//! What happens depends on `safety_mode` in `.glee/config.yml`:
//! - `ask` (default): writes only when the caller consented to this call —
//!   `y`/`yes` at the `Allow write? [y/N]:` prompt of `glovebox run` on a
//!   terminal, or `glovebox run --yes`. Without consent (MCP, HTTP, no
//!   terminal) nothing is written: `approval_required`, "Action denied by
//!   user.", with the diff in `details`.
//! - `strict`: never writes (`permission_exceeds_ceiling`).
//! - `always_allow`: writes.
//!
//! The current content is read in a read-only jail for the diff; the write
//! runs in a jail that may write only in the target's directory, as it was
//! when checked: the supervisor opens that directory, checks where it
//! really is (inside the root, not in `.glee/`) and grants the jail that
//! very directory through `/proc/self/fd/N`, so swapping a component for a
//! symbolic link afterwards changes nothing. The helper writes a temporary
//! file beside the target, syncs it, keeps the old file's mode and renames
//! it into place (a symbolic link at the target is refused, never followed).

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{self, OFlag};
use nix::sys::stat::Mode;
use serde_json::{json, Map, Value};
use similar::TextDiff;

use crate::manifest::config::SafetyMode;
use crate::manifest::model::Manifest;
use crate::run::{ErrorKind, Outcome};

use super::confine::{self, ConfineError};
use super::protocol::{Reply, Request};
use super::Context;

/// The tool's name.
pub const NAME: &str = "write_file";

/// The line closing a diff preview.
const RULE: &str = "---------------------------------------";

/// The tool's manifest.
pub fn manifest() -> Manifest {
    super::builtin_manifest(
        NAME,
        "Write or create a text file inside the project (its directory must exist; never under .glee/). Shows a diff of the change and, depending on the project's safety_mode, asks for confirmation first. Returns `Successfully wrote N lines to PATH`, or `Action denied by user.`",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["path", "content"],
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The path to the file to write, relative to the project root"
                },
                "content": {
                    "type": "string",
                    "description": "The content to write to the file"
                }
            }
        }),
        true,
        vec![(
            "Create a small file",
            json!({"path": "notes/hello.txt", "content": "hello\n"}),
        )],
    )
}

/// A checked write, ready to be confirmed and done.
#[derive(Debug)]
pub struct Plan {
    given: String,
    rel: PathBuf,
    content: String,
    /// The diff preview, ending in a rule line.
    pub diff: String,
}

/// Checks the call and computes its diff (reading the current content in
/// a read-only jail); nothing is written.
pub fn preview(params: &Map<String, Value>, ctx: &Context<'_>) -> Result<Plan, Box<Outcome>> {
    let given = super::text(params, "path");
    let content = super::text(params, "content");
    let refused = |e: ConfineError| Box::new(super::refused(NAME, &e));
    let rel = confine::relative(ctx.root, given, "path").map_err(refused)?;
    confine::writable(&rel, given).map_err(refused)?;
    confine::unprotected(ctx.root, &rel, ctx.surface, given).map_err(refused)?;
    let fail = |kind, message: String| {
        Box::new(Outcome::failure(
            NAME,
            kind,
            message,
            json!({"path": given}),
        ))
    };
    if rel == Path::new(".") {
        return Err(fail(
            ErrorKind::InputInvalid,
            format!("Error: {given} is the project root, not a file; give a file path"),
        ));
    }
    let max_file = ctx.config.limits.file_size_mb.saturating_mul(1 << 20);
    if content.len() as u64 > max_file {
        return Err(fail(
            ErrorKind::ResourceLimit,
            format!(
                "Error: content is {} bytes, more than the {max_file}-byte limit (limits.file_size_mb in .glee/config.yml)",
                content.len()
            ),
        ));
    }
    let limit = ctx.config.limits.output_bytes;
    let request = ctx.read_request(&rel);
    let old = match ctx.exchange(NAME, None, &request)? {
        Reply::Content { text } => Some(text),
        Reply::Missing => None,
        Reply::WrongType => {
            return Err(fail(
                ErrorKind::InputInvalid,
                format!("Error: {given} is a directory; write_file writes files"),
            ))
        }
        Reply::TooLarge { size } => {
            return Err(fail(
                ErrorKind::ResourceLimit,
                format!("Error: {given} is {size} bytes, more than the {limit}-byte limit for showing its diff (limits.output_bytes in .glee/config.yml)"),
            ))
        }
        Reply::Denied { detail } => return Err(denied(given, &detail)),
        Reply::Failed { detail } => {
            return Err(fail(
                ErrorKind::InputInvalid,
                format!("Error: Unable to write file: cannot read the current {given}: {detail}"),
            ))
        }
        Reply::Listing { .. } | Reply::Written => {
            return Err(fail(
                ErrorKind::Internal,
                "the built-in helper answered a read with something else".into(),
            ))
        }
    };
    Ok(Plan {
        given: given.to_owned(),
        diff: diff(given, old.as_deref(), content),
        rel,
        content: content.to_owned(),
    })
}

/// The preview: a unified diff (a new file shows its full content).
pub fn diff(path: &str, old: Option<&str>, new: &str) -> String {
    let mut out = format!("--- Proposed Changes for {path} ---\n");
    let from = match old {
        Some(_) => format!("a/{path}"),
        None => "/dev/null".to_owned(),
    };
    let text = TextDiff::from_lines(old.unwrap_or(""), new);
    let body = text
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .to_string();
    if body.is_empty() {
        out.push_str("(no changes)\n");
    } else {
        out.push_str(&body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str(RULE);
    out.push('\n');
    out
}

fn denied(given: &str, detail: &str) -> Box<Outcome> {
    let free = crate::jail::probe::kernel().mode == crate::jail::probe::Mode::NamespaceFree;
    let why = if free {
        "; without a mount namespace (this machine) no new file can be created directly in the project root or another directory holding .glee/, tools.json or .git/: write below it (src/, out/…)"
    } else {
        ""
    };
    Box::new(Outcome::failure(
        NAME,
        ErrorKind::PermissionExceedsCeiling,
        format!("Error: access to {given} was denied by the sandbox ({detail}); write_file reaches only files inside the project root, and a symbolic link cannot lead out of it{why}"),
        json!({"path": given}),
    ))
}

/// Checks, previews, applies `safety_mode` and writes.
pub fn call(params: &Map<String, Value>, ctx: &Context<'_>) -> Outcome {
    let plan = match preview(params, ctx) {
        Ok(plan) => plan,
        Err(outcome) => return *outcome,
    };
    let denial = |kind, why: &str| {
        Outcome::failure(
            NAME,
            kind,
            format!("Action denied by user. {why}"),
            json!({"path": plan.given, "diff": plan.diff}),
        )
    };
    match ctx.config.safety_mode {
        SafetyMode::Strict => denial(
            ErrorKind::PermissionExceedsCeiling,
            "(safety_mode is strict in .glee/config.yml, so write_file never writes; set it to ask or always_allow to allow writes)",
        ),
        SafetyMode::Ask if !ctx.caller.approved => denial(
            ErrorKind::ApprovalRequired,
            "(safety_mode is ask and no one confirmed this write: answer the prompt of `glovebox run write_file` on a terminal, pass --yes, or set safety_mode: always_allow in .glee/config.yml)",
        ),
        SafetyMode::Ask | SafetyMode::AlwaysAllow => write(&plan, ctx),
    }
}

/// Where the target's directory really is, opened once: the descriptor
/// is what the jail is granted, its resolved path what the checks see.
struct Target {
    dir: OwnedFd,
    real: PathBuf,
}

fn open_dir(ctx: &Context<'_>, plan: &Plan) -> Result<Target, Box<Outcome>> {
    let given = plan.given.as_str();
    let rel_dir = match plan.rel.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fail = |kind, message: String| {
        Box::new(Outcome::failure(
            NAME,
            kind,
            message,
            json!({"path": given}),
        ))
    };
    let dir = fcntl::open(
        &ctx.root.join(&rel_dir),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        fail(
            ErrorKind::InputInvalid,
            format!(
                "Error: Directory not found: {} ({}); write_file does not create directories, create it first",
                rel_dir.display(),
                e.desc()
            ),
        )
    })?;
    let real = fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())).map_err(|e| {
        fail(
            ErrorKind::Internal,
            format!("cannot resolve the directory of {given}: {e}"),
        )
    })?;
    let root = fs::canonicalize(ctx.root).map_err(|e| {
        fail(
            ErrorKind::Internal,
            format!("cannot resolve the project root: {e}"),
        )
    })?;
    let inside = real.strip_prefix(&root).map_err(|_| {
        Box::new(super::refused(
            NAME,
            &ConfineError::Outside { path: given.into() },
        ))
    })?;
    confine::writable(inside, given).map_err(|e| Box::new(super::refused(NAME, &e)))?;
    // The directory as it really is, and the surface in the same terms.
    let canonical_surface: Vec<PathBuf> = ctx
        .surface
        .iter()
        .map(|p| root.join(p.strip_prefix(ctx.root).unwrap_or(p)))
        .collect();
    let file = inside.join(plan.rel.file_name().unwrap_or_default());
    confine::unprotected(&root, &file, &canonical_surface, given)
        .map_err(|e| Box::new(super::refused(NAME, &e)))?;
    Ok(Target { dir, real })
}

fn write(plan: &Plan, ctx: &Context<'_>) -> Outcome {
    let given = plan.given.as_str();
    let target = match open_dir(ctx, plan) {
        Ok(target) => target,
        Err(outcome) => return *outcome,
    };
    let name = plan
        .rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let request = Request::Write {
        root: ctx.root.to_path_buf(),
        write_dir: target.real.clone(),
        dir: target.real.to_string_lossy().into_owned(),
        name,
        content: plan.content.clone(),
    };
    let grant = PathBuf::from(format!("/proc/self/fd/{}", target.dir.as_raw_fd()));
    let reply = match ctx.exchange(NAME, Some(grant), &request) {
        Ok(reply) => reply,
        Err(outcome) => return *outcome,
    };
    drop(target);
    let fail =
        |kind, message: String| Outcome::failure(NAME, kind, message, json!({"path": given}));
    match reply {
        Reply::Written => Outcome::success(
            NAME,
            Value::String(format!(
                "Successfully wrote {} lines to {given}",
                plan.content.lines().count()
            )),
        ),
        Reply::Missing => fail(
            ErrorKind::InputInvalid,
            format!("Error: Unable to write file: the directory of {given} no longer exists"),
        ),
        Reply::WrongType => fail(
            ErrorKind::InputInvalid,
            format!("Error: {given} is a directory; write_file writes files"),
        ),
        Reply::Denied { detail } => *denied(given, &detail),
        Reply::Failed { detail } => fail(
            ErrorKind::InputInvalid,
            format!("Error: Unable to write file: {detail}"),
        ),
        Reply::Content { .. } | Reply::Listing { .. } | Reply::TooLarge { .. } => fail(
            ErrorKind::Internal,
            "the built-in helper answered a write with something else".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_file_diff_shows_everything() {
        let d = diff("a.txt", None, "one\ntwo\n");
        assert!(d.starts_with("--- Proposed Changes for a.txt ---\n"), "{d}");
        assert!(d.contains("+one\n+two\n"), "{d}");
        assert!(d.contains("--- /dev/null"), "{d}");
        assert!(d.ends_with(&format!("{RULE}\n")), "{d}");
    }

    #[test]
    fn changed_file_diff_is_unified() {
        let d = diff("a.txt", Some("one\ntwo\n"), "one\n2\n");
        assert!(d.contains("--- a/a.txt\n+++ b/a.txt\n"), "{d}");
        assert!(d.contains("@@ -1,2 +1,2 @@\n one\n-two\n+2\n"), "{d}");
        assert!(diff("a", Some("x\n"), "x\n").contains("(no changes)"));
    }
}
