//! Runs the in-jail helper ([`super::helper`]) for one request: the
//! glovebox binary itself, under [`crate::jail::run`], with the project
//! root readable, at most one directory writable, no network, the
//! project's limits and never in degraded mode.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::jail::{self, FsAccess, Limits, Output, Spec, Status, Stdin};
use crate::manifest::config::Config;
use crate::run::{self, ErrorKind, Outcome};

use super::protocol::{Reply, Request};

/// The hidden subcommand that runs the helper.
pub const SUBCOMMAND: &str = "__builtin";

/// Bytes of reply kept beyond the content limit (JSON escaping, framing).
fn reply_limit(content: u64) -> u64 {
    content.saturating_mul(6).saturating_add(64 * 1024)
}

/// Sends `request` to a jailed helper that may read `root` and write in
/// `write_dir`; the reply, or the Outcome that says why there is none.
pub fn exchange(
    tool: &str,
    root: &Path,
    write_dir: Option<PathBuf>,
    protect: &[PathBuf],
    config: &Config,
    cancel: Option<jail::Cancel>,
    request: &Request,
) -> Result<Reply, Box<Outcome>> {
    let internal = |message: String| {
        Box::new(Outcome::failure(
            tool,
            ErrorKind::Internal,
            message,
            json!({}),
        ))
    };
    let exe = std::env::current_exe()
        .map_err(|e| internal(format!("cannot find the glovebox executable: {e}")))?;
    let stdin = serde_json::to_vec(request)
        .map_err(|e| internal(format!("cannot encode the request: {e}")))?;
    let mut spec = Spec::new([exe.as_os_str(), SUBCOMMAND.as_ref()]);
    spec.cwd = root.to_path_buf();
    spec.fs = FsAccess {
        read: vec![root.to_path_buf()],
        write: write_dir.into_iter().collect(),
        exec: vec![exe.clone()],
        read_only: Vec::new(),
    };
    spec.protect = protect.to_vec();
    let mib = |n: u64| n.saturating_mul(1 << 20);
    spec.limits = Limits {
        wall: Duration::from_millis(config.limits.timeout_ms),
        memory_bytes: mib(config.limits.memory_mb),
        pids: config.limits.pids,
        output_bytes: reply_limit(config.limits.output_bytes),
        file_size_bytes: mib(config.limits.file_size_mb),
        ..Limits::default()
    };
    spec.stdin = Stdin::Bytes(stdin);
    spec.output = Output::Capture;
    // The jail is the built-ins' whole confinement: never run without it.
    spec.degraded = false;
    spec.cancel = cancel;
    let result = run::start(&spec).map_err(|e| Box::new(run::jail_error(tool, &e, &exe)))?;
    if result.cancelled {
        return Err(internal("the call was cancelled".into()));
    }
    if result.timed_out() {
        return Err(Box::new(Outcome::failure(
            tool,
            ErrorKind::Timeout,
            format!(
                "Error: the call did not finish within {} ms (limits.timeout_ms)",
                config.limits.timeout_ms
            ),
            json!({}),
        )));
    }
    if result.status != Status::Exited(0) {
        let stderr = String::from_utf8_lossy(&result.stderr);
        return Err(internal(format!(
            "the built-in helper failed ({}): {}",
            match result.status {
                Status::Exited(c) => format!("exit status {c}"),
                Status::Signaled(s) => format!("signal {s}"),
            },
            stderr.trim()
        )));
    }
    serde_json::from_slice(&result.stdout)
        .map_err(|e| internal(format!("the built-in helper's reply is not valid: {e}")))
}
