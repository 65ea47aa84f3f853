//! The resource probes, each a short bounded bomb a little past the
//! tool's declared limit: memory (a child process touching pages), tasks
//! (threads of the battery) and output (bytes on stderr). Held when the
//! bomb stopped at the limit (its process killed or its allocation or
//! fork refused; the supervisor kept only the limit's bytes), broken when
//! it got all it asked for. They run last: a thread or child before the
//! process probes would share their pids.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};

use super::battery::{how, Ctx, Observed, Plan};
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply, SUBCOMMAND};

/// How far past its limit each bomb goes.
const MEMORY_PAST: u64 = 64 << 20;
const TASKS_PAST: u64 = 8;
const OUTPUT_PAST: u64 = 64 << 10;

/// The memory bomb's step (large, so that most of it is backed by huge
/// pages).
const CHUNK: usize = 32 << 20;

/// Plans the resource probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::Resources;
    let limits = &ctx.policy.limits;
    let mib = |b: u64| b >> 20;
    let memory = limits.memory_bytes;
    let asked = memory.saturating_add(MEMORY_PAST);
    plan.attack(
        inv,
        format!(
            "touch {} MiB of memory in a child (limit {} MiB)",
            mib(asked),
            mib(memory)
        ),
        Action::Memory { bytes: asked },
        Box::new(move |r: &Reply, o: &Observed<'_>| {
            let reached = field(&r.data, "reached").unwrap_or(0);
            let end = r
                .data
                .split_whitespace()
                .find_map(|w| w.strip_prefix("end="))
                .unwrap_or("")
                .replace('-', " ");
            if !r.ok {
                return Verdict::inconclusive(format!("the child did not start: {}", how(r.errno)));
            }
            if reached == 0 {
                return Verdict::inconclusive(format!("the child never reported memory ({end})"));
            }
            if reached >= asked {
                return Verdict::broken(format!(
                    "the child touched {} MiB, past the {} MiB limit",
                    mib(reached),
                    mib(memory)
                ));
            }
            let by = if o.result.limits_hit.contains(&crate::jail::LimitHit::Memory) {
                "killed by the memory limit"
            } else {
                "stopped"
            };
            Verdict::held(format!("{by} at {} MiB ({end})", mib(reached)))
        }),
    );
    let pids = limits.pids;
    let asked = pids.saturating_add(TASKS_PAST);
    plan.attack(
        inv,
        format!("start {asked} threads (limit {pids} tasks)"),
        Action::Threads { count: asked },
        Box::new(move |r: &Reply, _: &_| {
            let made = field(&r.data, "made").unwrap_or(0);
            if made == 0 {
                return Verdict::inconclusive(format!("no thread started: {}", how(r.errno)));
            }
            if made >= asked {
                return Verdict::broken(format!(
                    "started {made} threads, past the {pids} task limit"
                ));
            }
            Verdict::held(format!("refused after {made} threads: {}", how(r.errno)))
        }),
    );
    let output = limits.output_bytes;
    let asked = output.saturating_add(OUTPUT_PAST);
    plan.attack(
        inv,
        format!("write {asked} bytes to stderr (limit {output})"),
        Action::Output { bytes: asked },
        Box::new(move |r: &Reply, o: &Observed<'_>| {
            let kept = o.result.stderr.len() as u64;
            let seen = o.result.stderr_bytes;
            if !r.ok || seen < asked {
                return Verdict::inconclusive(format!(
                    "the supervisor saw {seen} of {asked} bytes ({})",
                    how(r.errno)
                ));
            }
            if kept > output {
                return Verdict::broken(format!(
                    "the supervisor kept {kept} bytes, past the {output} byte limit"
                ));
            }
            Verdict::held(format!("the supervisor kept {kept} of {seen} bytes"))
        }),
    );
}

/// The number after `name=` in `data`.
fn field(data: &str, name: &str) -> Option<u64> {
    data.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

// ---------------------------------------------------- in the jail

/// Tries a resource action; `None` for another family's.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    Some(match action {
        Action::Memory { bytes } => memory(id, *bytes),
        Action::Threads { count } => threads(id, *count),
        Action::Output { bytes } => output(id, *bytes),
        _ => return None,
    })
}

/// Runs the memory bomb in a child (`__prove memory BYTES`) and reads how
/// far it got.
fn memory(id: usize, bytes: u64) -> Reply {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return Reply::not_tried(id, e.raw_os_error().unwrap_or(libc::EIO), "current_exe")
        }
    };
    let child = Command::new(exe)
        .args([SUBCOMMAND, "memory", &bytes.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return Reply::not_tried(
                id,
                e.raw_os_error().unwrap_or(libc::EIO),
                "starting the child",
            )
        }
    };
    let mut reached = 0u64;
    let mut refused = false;
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(n) = field(&line, "reached") {
                reached = n;
            }
            refused |= line.starts_with("refused");
        }
    }
    let end = match child.wait() {
        Ok(s) => match (std::os::unix::process::ExitStatusExt::signal(&s), s.code()) {
            (Some(sig), _) => format!("killed-by-signal-{sig}"),
            _ if refused => "allocation-refused".into(),
            (None, Some(c)) => format!("exited-{c}"),
            (None, None) => "ended".into(),
        },
        Err(_) => "not-waited-for".into(),
    };
    Reply::ok(id, format!("reached={reached} end={end}"))
}

/// The memory bomb's child: touches `bytes` of memory a chunk at a time,
/// saying how far it got after each (`reached=N`), or `refused` when a
/// mapping failed (a data limit).
pub fn memory_child(bytes: u64) -> std::process::ExitCode {
    let mut reached = 0u64;
    let mut out = std::io::stdout();
    while reached < bytes {
        if crate::jail::attempt::touch_memory(CHUNK).is_err() {
            let _ = writeln!(out, "refused at reached={reached}");
            return std::process::ExitCode::SUCCESS;
        }
        reached = reached.saturating_add(CHUNK as u64);
        let _ = writeln!(out, "reached={reached}");
        let _ = out.flush();
    }
    std::process::ExitCode::SUCCESS
}

/// Starts threads (each waiting to be released) until `count` run or one
/// is refused; reports how many ran.
fn threads(id: usize, count: u64) -> Reply {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let mut running = Vec::new();
    let mut refused = None;
    for _ in 0..count {
        let g = gate.clone();
        let t = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let (lock, cv) = &*g;
                let mut open = lock.lock().unwrap_or_else(|p| p.into_inner());
                while !*open {
                    open = cv.wait(open).unwrap_or_else(|p| p.into_inner());
                }
            });
        match t {
            Ok(t) => running.push(t),
            Err(e) => {
                refused = Some(e.raw_os_error().unwrap_or(libc::EAGAIN));
                break;
            }
        }
    }
    let made = running.len();
    {
        let (lock, cv) = &*gate;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }
    for t in running {
        let _ = t.join();
    }
    match refused {
        None => Reply::ok(id, format!("made={made}")),
        Some(e) => Reply::failed(id, e, format!("made={made}")),
    }
}

/// Writes `bytes` to stderr.
fn output(id: usize, bytes: u64) -> Reply {
    let chunk = [b'x'; 64 << 10];
    let mut left = bytes;
    let mut err = std::io::stderr().lock();
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if let Err(e) = err.write_all(&chunk[..n]) {
            return Reply::failed(id, e.raw_os_error().unwrap_or(libc::EIO), "");
        }
        left -= n as u64;
    }
    let _ = err.flush();
    Reply::ok(id, format!("wrote={bytes}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_from_the_reply() {
        assert_eq!(
            field("reached=4194304 end=killed-by-signal-9", "reached"),
            Some(4 << 20)
        );
        assert_eq!(field("refused at reached=8", "reached"), Some(8));
        assert_eq!(field("made=3", "made"), Some(3));
        assert_eq!(field("made=x", "made"), None);
    }
}
