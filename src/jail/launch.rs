//! Launching a prepared call: the caller's gate, learn mode's early
//! watch, then the clone (vfork-style; fork-style for the namespace-free
//! jail's reaper, which never execs) and the child's report — exec'd, or
//! the step that failed and its errno, which decides whether the call is
//! planned again (probe first, or without namespaces) or fails.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};

use super::child::{Prepared, Step};
use super::metadata::{EarlyWatch, Watch};
use super::plan::Plan;
use super::prepare::{pipe, Call};
use super::spawn::Attempt;
use super::spec::Spec;
use super::sys;
use super::JailError;

/// Launches `call` as `plan` decided: returns the child's pidfd once it
/// has exec'd (and learn mode's watch, already answering), or why not —
/// `assumed` (planned with assumed facts) turns a namespace failure into
/// a probe.
pub(super) fn start(
    spec: &Spec,
    plan: &Plan,
    call: &mut Call,
    assumed: bool,
) -> Result<(OwnedFd, Option<EarlyWatch>), Attempt> {
    let prepared = &mut call.prepared;
    // Everything above prepared the call; nothing of its own has run. The
    // caller's gate (the engine's: its intent line durable) is waited for
    // last: by the child right before `execve` when the gate signals
    // through a pipe (the child's own set-up overlaps the wait), else here.
    if let Some(gate) = &spec.gate {
        match gate.signal() {
            Some(fd) => prepared.gate = Some(fd),
            None => gate.pass().map_err(|message| JailError::Gate { message })?,
        }
    }
    // Namespaces may still fail in the child (a container that masks /proc
    // refuses a fresh one, a limit on network namespaces): planned with
    // assumed facts, probe and plan again; with probed facts, plan again
    // with the facts of a machine without namespaces (`run_keeping_out`):
    // the namespace-free jail (the connect broker for a networked call)
    // where it keeps every invariant of the call, a degraded run where the
    // caller opted in, else a refusal that names what failed.
    // Learn mode: the child's own `execve` is observed, so the thread that
    // answers starts before it (it receives the listener itself).
    let early = match (&spec.observe, &prepared.notify) {
        (Some(observer), Some(h)) => {
            let handoff = h
                .parent_end
                .try_clone()
                .map_err(|source| JailError::Prepare {
                    what: "duplicating the seccomp notification hand-off",
                    source,
                })?;
            Some(Watch::start_early(handoff, observer.clone())?)
        }
        (Some(_), None) => return Err(super::observe::unavailable().into()),
        _ => None,
    };
    let flags = plan.flags;
    match clone_and_wait(prepared, flags) {
        Ok(pidfd) => Ok((pidfd, early)),
        Err((Step::Gate, _)) => Err(refused_by_gate(spec).into()),
        Err((step, errno)) if flags != 0 && step_is_namespace(step, errno) => {
            if assumed {
                return Err(Attempt::Probe);
            }
            Err(Attempt::WithoutNamespaces(format!(
                "{}: {}: {}",
                step.describe(),
                sys::errno_name(errno),
                std::io::Error::from_raw_os_error(errno)
            )))
        }
        // Learn mode's listener refused (gVisor, a container's profile):
        // it cannot observe, so it does not run.
        Err((Step::Seccomp, errno)) if spec.observe.is_some() => {
            Err(super::observe::refused(errno).into())
        }
        Err((step, errno)) => Err(JailError::child_failed(step, errno, &call.program).into()),
    }
}

/// The child read a refusal from the caller's gate: the reason, from the
/// gate itself.
fn refused_by_gate(spec: &Spec) -> JailError {
    let message = match spec.gate.as_ref().map(|g| g.pass()) {
        Some(Err(message)) => message,
        _ => "the call's gate did not open".into(),
    };
    JailError::Gate { message }
}

/// Failures that mean "this kernel or this user cannot have namespaces".
fn step_is_namespace(step: Step, errno: i32) -> bool {
    match step {
        Step::Parent => matches!(
            errno,
            libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS
        ),
        // A source that is no longer the object resolved for it was
        // replaced (ESTALE) or a protected path removed (ENOENT) by someone
        // racing the call: never a reason to fall back.
        Step::Mount => !matches!(errno, libc::ESTALE | libc::ENOENT),
        Step::Namespaces | Step::IdMap => true,
        _ => false,
    }
}

/// Clones the child with `flags` and waits until it has exec'd. On failure
/// returns the step and errno (clone itself failing is reported as
/// `Step::Parent`).
pub(super) fn clone_and_wait(
    p: &mut Prepared,
    flags: libc::c_ulong,
) -> Result<OwnedFd, (Step, i32)> {
    let (report_r, report_w) = pipe().map_err(|_| (Step::Parent, libc::EMFILE))?;
    p.report = report_w.as_raw_fd();
    p.report_read_end = report_r.as_raw_fd();
    p.keep = p.descriptors();
    let clone_failed = |e: std::io::Error| {
        let step = if flags == 0 {
            Step::Parent
        } else {
            Step::Namespaces
        };
        (step, e.raw_os_error().unwrap_or(libc::EINVAL))
    };
    let pidfd = sys::clone_child(flags, p).map_err(clone_failed)?;
    drop(report_w);
    let mut report_file = std::fs::File::from(report_r);
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        match report_file.read(&mut msg[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if got == 0 {
        return Ok(pidfd);
    }
    let _ = sys::pidfd_wait(pidfd.as_raw_fd());
    let step = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let errno = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    Err((Step::from_u32(step).unwrap_or(Step::Exec), errno))
}
