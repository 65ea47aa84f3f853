//! The battery's side in the jail: `glovebox __prove` (hidden), started
//! by the supervisor in place of a tool's code. It reads its
//! [`Request`] from stdin, proves it ran (the request's nonce, echoed as
//! the first line), makes each attempt in order with the family that
//! knows it, one reply line each, and says when it finished. It decides
//! nothing: what a reply proves is judged outside.
//!
//! Other modes, for the battery's own children and the prover's canary:
//! `__prove one ACTION` (one attempt in a process of its own: namespaces
//! and mounts), `__prove memory BYTES` (the memory bomb's child) and
//! `__prove hold` (the canary process: waits for its stdin to close).

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

use super::wire::{Action, Attempt, Line, Reply, Request, SUBCOMMAND};

/// The largest request read (attempts are a few hundred bytes each).
const MAX_REQUEST: u64 = 1 << 20;

/// `glovebox __prove [MODE ARG]`: `args` are the words after `__prove`.
pub fn main(args: &[String]) -> ExitCode {
    match args.first().map(String::as_str) {
        None => battery(),
        Some("hold") => {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            ExitCode::SUCCESS
        }
        Some("memory") => match args.get(1).and_then(|b| b.parse().ok()) {
            Some(bytes) => super::resources::memory_child(bytes),
            None => ExitCode::from(2),
        },
        Some("one") => {
            let action = args
                .get(1)
                .and_then(|a| serde_json::from_str::<Action>(a).ok());
            let Some(action) = action else {
                return ExitCode::from(2);
            };
            let reply = super::kernel::attempt_here(0, &action);
            emit(&Line::Reply(reply));
            ExitCode::SUCCESS
        }
        Some(_) => ExitCode::from(2),
    }
}

/// Prints one line (and flushes it: a battery that dies next still said
/// it).
fn emit(line: &Line) {
    if let Ok(text) = serde_json::to_string(line) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

fn battery() -> ExitCode {
    let mut input = Vec::new();
    if std::io::stdin()
        .take(MAX_REQUEST)
        .read_to_end(&mut input)
        .is_err()
    {
        return ExitCode::from(2);
    }
    let Ok(request) = serde_json::from_slice::<Request>(&input) else {
        return ExitCode::from(2);
    };
    emit(&Line::Alive {
        nonce: request.nonce.clone(),
        pid: std::process::id(),
    });
    for a in &request.attempts {
        let started = std::time::Instant::now();
        let mut reply = attempt(a);
        reply.micros = started.elapsed().as_micros() as u64;
        emit(&Line::Reply(reply));
    }
    emit(&Line::Done {
        count: request.attempts.len(),
    });
    ExitCode::SUCCESS
}

/// One attempt, by the family that knows its action.
fn attempt(a: &Attempt) -> Reply {
    let families: [fn(usize, &Action) -> Option<Reply>; 6] = [
        super::files::attempt,
        super::network::attempt,
        super::process::attempt,
        super::kernel::attempt,
        super::environment::attempt,
        super::resources::attempt,
    ];
    families
        .iter()
        .find_map(|f| f(a.id, &a.action))
        .unwrap_or_else(|| Reply::failed(a.id, libc::ENOSYS, "no family knows this action"))
}

/// `action` tried in a child process of its own (`__prove one`), its
/// reply read back.
pub fn in_child(id: usize, action: &Action) -> Reply {
    let fail = |e: std::io::Error, what: &str| {
        Reply::not_tried(id, e.raw_os_error().unwrap_or(libc::EIO), what)
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return fail(e, "current_exe"),
    };
    let Ok(json) = serde_json::to_string(action) else {
        return Reply::not_tried(id, libc::EINVAL, "encoding the action");
    };
    let out = Command::new(exe)
        .args([SUBCOMMAND, "one", &json])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return fail(e, "starting the child"),
    };
    let reply =
        String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Reply(r)) => Some(r),
                _ => None,
            }
        });
    match reply {
        Some(r) => Reply { id, ..r },
        None => Reply::not_tried(id, libc::ECHILD, "the child gave no reply"),
    }
}
