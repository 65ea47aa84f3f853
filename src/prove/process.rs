//! The process probes: a canary process of glovebox's own (outside the
//! jail, a marker in its environment) signalled, traced, read
//! (`process_vm_readv`, `/proc/PID/environ`) and its limits asked; the
//! supervisor's own process signalled and its `/proc` entry read. The
//! evidence: the canary died or was traced, its memory or environment
//! came back, a call worked.
//!
//! These run first in the battery, before it starts a thread or a child:
//! in the jail's PID namespace, a host pid names no process of the jail
//! (which then holds only the battery, pid 1). The `SIGKILL` goes last:
//! the other attacks need the canary alive.

use super::battery::{how, refusal, Ctx, Observed, Plan};
use super::canary::digest;
use super::canary::ProcessState;
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply};

/// Plans the process probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::Processes;
    let canary = &ctx.canaries.process;
    let pid = canary.pid;
    plan.control(
        inv,
        "signal 0 to its own process group".into(),
        Action::Signal { pid: 0, signal: 0 },
    );
    plan.control(
        inv,
        "read its own /proc/self/status".into(),
        Action::Read {
            path: "/proc/self/status".into(),
        },
    );
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    plan.refused(
        inv,
        format!("signal 0 to glovebox's own process {me}"),
        Action::Signal { pid: me, signal: 0 },
    );
    plan.attack(
        inv,
        format!("ptrace the canary process {pid}"),
        Action::Ptrace { pid },
        Box::new(|r: &Reply, o: &Observed<'_>| match &o.process {
            ProcessState::Traced(e) => Verdict::broken(e.clone()),
            _ => refusal(r),
        }),
    );
    if let Some((addr, bytes)) = canary.memory.clone() {
        plan.attack(
            inv,
            format!("read the canary process's memory at {addr:#x} (process_vm_readv)"),
            Action::VmRead { pid, addr, len: 16 },
            Box::new(move |r: &Reply, _: &_| {
                if r.ok && r.data == bytes {
                    Verdict::broken(format!("read 16 bytes of the canary's memory: {}", r.data))
                } else if r.ok {
                    Verdict::held("read another process's memory, not the canary's")
                } else {
                    Verdict::held(how(r.errno))
                }
            }),
        );
    }
    plan.refused(
        inv,
        format!("read the canary process's open-file limit (prlimit {pid})"),
        Action::Prlimit { pid },
    );
    let environ = canary.environ.clone();
    let marker = canary.marker.clone();
    plan.attack(
        inv,
        format!("read /proc/{pid}/environ (the canary's, with {marker})"),
        Action::Read {
            path: format!("/proc/{pid}/environ").into(),
        },
        Box::new(move |r: &Reply, _: &_| {
            if r.ok && r.data == environ {
                Verdict::broken(format!("read the canary's environment ({marker})"))
            } else if r.ok {
                Verdict::held("read another process's environment, not the canary's")
            } else {
                Verdict::held(how(r.errno))
            }
        }),
    );
    let cmdline = std::fs::read("/proc/self/cmdline")
        .map(|c| digest(&c))
        .unwrap_or_default();
    plan.attack(
        inv,
        format!("read /proc/{me}/cmdline (glovebox's own)"),
        Action::Read {
            path: format!("/proc/{me}/cmdline").into(),
        },
        Box::new(move |r: &Reply, _: &_| {
            if r.ok && r.data == cmdline {
                Verdict::broken("read glovebox's own command line from its /proc entry")
            } else if r.ok {
                Verdict::held("read another process's entry, not glovebox's")
            } else {
                Verdict::held(how(r.errno))
            }
        }),
    );
    // Last: the canary must live for the attacks above.
    plan.attack(
        inv,
        format!("SIGKILL the canary process {pid} (outside the jail)"),
        Action::Signal {
            pid,
            signal: libc::SIGKILL,
        },
        Box::new(|r: &Reply, o: &Observed<'_>| match &o.process {
            ProcessState::Died(e) => Verdict::broken(e.clone()),
            _ => refusal(r),
        }),
    );
}

// ---------------------------------------------------- in the jail

/// Tries a process action; `None` for another family's.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    use crate::jail::attempt as sys;
    Some(match action {
        Action::Signal { pid, signal } => {
            let sig = match *signal {
                0 => None,
                s => match nix::sys::signal::Signal::try_from(s) {
                    Ok(s) => Some(s),
                    Err(e) => return Some(Reply::failed(id, e as i32, "")),
                },
            };
            match nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), sig) {
                Ok(()) => Reply::ok(id, "signalled"),
                Err(e) => Reply::failed(id, e as i32, ""),
            }
        }
        Action::Ptrace { pid } => match sys::ptrace_attach(*pid) {
            Ok(()) => Reply::ok(id, "attached (and detached)"),
            Err(e) => Reply::failed(id, e, ""),
        },
        Action::VmRead { pid, addr, len } => match sys::process_vm_read(*pid, *addr, *len) {
            Ok(bytes) => Reply::ok(id, hex::encode(bytes)),
            Err(e) => Reply::failed(id, e, ""),
        },
        Action::Prlimit { pid } => match sys::prlimit_nofile(*pid) {
            Ok((cur, max)) => Reply::ok(id, format!("{cur}/{max}")),
            Err(e) => Reply::failed(id, e, ""),
        },
        _ => return None,
    })
}
