//! Supervising a launched call until it ends: the connect broker and
//! the metadata supervisor (seccomp's notification listener) where the
//! plan has them, the egress proxy attached to the call's listener (and
//! its TUN device), then the output pumped until exit, timeout or cancel,
//! and the result assembled (which limits were hit, what was enforced).

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use super::broker::{Admission, Broker};
use super::child::{NetHandoff, Prepared};
use super::forks::ForkLimit;
use super::metadata::{EarlyWatch, Grants, Watch};
use super::network::NetPlan;
use super::plan::Plan;
use super::prepare::Call;
use super::pump::{self, Sink};
use super::spawn::Attempt;
use super::spec::{Attached, Enforcement, Gateway, JailResult, Spec, Status, ToolMemory};
use super::sys;
use super::JailError;

/// What the launched child hands the supervisor: whether its seccomp
/// filter notifies (and the socket its listener comes over), the socket
/// of its network namespace's listener, and learn mode's early watch.
struct Handoffs {
    notified: bool,
    notify: Option<NetHandoff>,
    net: Option<NetHandoff>,
    early: Option<EarlyWatch>,
}

/// A proxy serving the call, stopped when dropped.
type Egress = Box<dyn Attached>;

/// What runs beside the call in the supervisor until it ends; dropping
/// it stops them (the proxy's listener and connections go, which frees
/// the call's network namespace).
struct Beside {
    /// The egress proxy (behind the broker or in the call's namespace).
    egress: Option<Egress>,
    /// The transparent egress of the call's TUN device.
    transparent: Option<Egress>,
    /// The metadata supervisor (and the broker, the fork counter).
    watch: Option<Watch>,
    /// Set when the fork counter refused a fork.
    fork_hit: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Supervises the launched child (`pidfd`) of `call` until it ends and
/// returns its result; a failure to start what runs beside it kills the
/// child first.
pub(super) fn supervise(
    spec: &Spec,
    plan: Plan,
    call: Call,
    pidfd: OwnedFd,
    early: Option<EarlyWatch>,
    started: Instant,
) -> Result<JailResult, Attempt> {
    let Call {
        prepared,
        home,
        mut group,
        write_grants,
        stdin_feed,
        out_r,
        err_r,
        ..
    } = call;
    // The child has exec'd: its copies of these are its own now.
    let Prepared {
        stdin,
        stdout,
        stderr,
        landlock,
        net,
        notify,
        seccomp,
        ..
    } = prepared;
    drop((stdin, stdout, stderr, landlock));
    let notified = seccomp.and_then(|p| p.notify).is_some();
    let handoffs = Handoffs {
        notified,
        notify,
        net,
        early,
    };
    // What the supervisor holds for the call in memory (transparent
    // egress's buffers) is charged to the tool's memory limit.
    let tool_memory = group.as_mut().and_then(|g| g.tool_memory());
    let beside = match start_beside(spec, &plan, &pidfd, handoffs, &write_grants, tool_memory) {
        Ok(b) => b,
        Err(e) => {
            let _ = sys::pidfd_kill(pidfd.as_raw_fd());
            let _ = sys::pidfd_wait(pidfd.as_raw_fd());
            return Err(e.into());
        }
    };
    let deadline = started + spec.limits.wall;
    let mut out = Sink::new(out_r, spec.limits.output_bytes, spec.output, 1).map_err(|source| {
        JailError::Prepare {
            what: "reading the child's output",
            source,
        }
    })?;
    let mut err = Sink::new(err_r, spec.limits.output_bytes, spec.output, 2).map_err(|source| {
        JailError::Prepare {
            what: "reading the child's output",
            source,
        }
    })?;
    // A subreaper ends the tree on SIGTERM; a PID namespace ends with its
    // first process.
    let stop = if plan.flags & libc::CLONE_NEWPID as libc::c_ulong == 0 {
        libc::SIGTERM
    } else {
        libc::SIGKILL
    };
    let pumped = pump::run(
        &pidfd,
        stop,
        stdin_feed,
        &mut out,
        &mut err,
        deadline,
        spec.cancel.as_ref(),
    );
    if pumped.is_err() {
        let _ = sys::pidfd_kill(pidfd.as_raw_fd());
    }
    let exit = sys::pidfd_wait(pidfd.as_raw_fd()).map_err(|source| JailError::Wait { source })?;
    let transparent_egress = beside.transparent.is_some();
    let Beside {
        egress,
        transparent,
        watch,
        fork_hit,
    } = beside;
    drop(transparent);
    drop(egress);
    drop(watch);
    let pumped = pumped.map_err(|source| JailError::Wait { source })?;

    let mut limits_hit = pump::limits_hit(pumped.timed_out, group.as_ref(), &out, &err);
    // A fork the supervisor's count refused (no pids cgroup): the same
    // limit hit a pids cgroup reports.
    if fork_hit.load(std::sync::atomic::Ordering::SeqCst)
        && !limits_hit.contains(&super::spec::LimitHit::Pids)
    {
        limits_hit.push(super::spec::LimitHit::Pids);
    }
    drop(group);
    drop(home);
    let Plan {
        enforcement,
        warnings,
        ..
    } = plan;
    Ok(JailResult {
        status: match exit {
            sys::Exit::Code(c) => Status::Exited(c),
            sys::Exit::Signal(s) => Status::Signaled(s),
        },
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout: std::mem::take(&mut out.kept),
        stderr: std::mem::take(&mut err.kept),
        limits_hit,
        duration: started.elapsed(),
        enforcement: Enforcement {
            transparent_egress,
            ..enforcement
        },
        warnings,
        cancelled: pumped.cancelled,
    })
}

/// Starts what runs beside the launched call: behind the connect broker
/// the call's proxy on a loopback port of the host (serving only the
/// connections the broker makes); the fork counter; the metadata
/// supervisor with the listener the child sent (or learn mode's early
/// watch given its context); the egress proxy on the listener the child
/// opened in its network namespace.
fn start_beside(
    spec: &Spec,
    plan: &Plan,
    pidfd: &OwnedFd,
    handoffs: Handoffs,
    write_grants: &[std::path::PathBuf],
    tool_memory: Option<std::sync::Arc<dyn ToolMemory>>,
) -> Result<Beside, JailError> {
    let Handoffs {
        notified,
        notify,
        net,
        mut early,
    } = handoffs;
    let (brokered_egress, broker) = match &plan.net {
        NetPlan::Brokered(gateway) => {
            let (attached, broker) =
                start_broker(gateway).map_err(|source| JailError::Prepare {
                    what: "starting the egress proxy",
                    source,
                })?;
            (Some(attached), Some(broker))
        }
        _ => (None, None),
    };
    let brokered = broker.is_some();
    // No pids cgroup: the supervisor counts the call's tasks below its
    // reaper (the first child here: the subreaper, or the PID namespace's
    // first process), and records a refused fork in `fork_hit`.
    let fork_hit = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forks = if plan.count_forks {
        match sys::pidfd_pid(pidfd.as_raw_fd()) {
            Some(reaper) => Some(ForkLimit {
                reaper,
                limit: spec.limits.pids,
                // Without a subreaper the first child is the PID
                // namespace's first process: the tool itself.
                with_reaper: !plan.reaper,
                hit: fork_hit.clone(),
            }),
            None => {
                return Err(JailError::Prepare {
                    what: "finding the call's reaper for its process limit",
                    source: std::io::Error::other("no pid in the pidfd's fdinfo"),
                })
            }
        }
    } else {
        None
    };
    if plan.count_forks && !notified {
        return Err(JailError::Prepare {
            what: "counting the call's processes",
            source: std::io::Error::other("no seccomp notification listener"),
        });
    }
    // Without a mount namespace the metadata family is answered by the
    // supervisor (see `super::metadata`) until the call ends, and behind
    // the broker `connect` too.
    let watch = match (notified, notify) {
        (true, Some(h)) if early.is_some() => {
            drop(h.child_end);
            early.take().map(|e| {
                e.provide(super::metadata::Context {
                    grants: Grants::new(write_grants, &spec.protect),
                    broker,
                    forks,
                })
            })
        }
        (true, Some(h)) => {
            drop(h.child_end);
            let grants = Grants::new(write_grants, &spec.protect);
            let fd =
                sys::recv_fd(h.parent_end.as_raw_fd()).map_err(|source| JailError::Prepare {
                    what: "receiving the seccomp notification listener",
                    source,
                })?;
            Some(Watch::start(fd, grants, broker, forks)?)
        }
        _ => None,
    };
    if spec.observe.is_some() && watch.is_none() {
        return Err(super::observe::unavailable());
    }
    if brokered && watch.is_none() {
        // Never reached (the broker is planned only with seccomp's
        // notification listener), but a brokered call without its broker
        // must not run.
        return Err(JailError::Prepare {
            what: "starting the connect broker",
            source: std::io::Error::other("no seccomp notification listener"),
        });
    }
    // The proxy runs until the call's tree is gone.
    let (egress, transparent) = match (&plan.net, net) {
        (NetPlan::Brokered(_), _) => (brokered_egress, None),
        (NetPlan::Proxied(gateway), Some(h)) => {
            let (a, t) = attach_proxy(gateway, h, tool_memory)?;
            (Some(a), t)
        }
        _ => (None, None),
    };
    Ok(Beside {
        egress,
        transparent,
        watch,
        fork_hit,
    })
}

/// The egress proxy on the listener the child opened in its network
/// namespace, and the transparent egress of its TUN device when the child
/// could make one (sent before it exec'd, so already here or never),
/// with its loopback DNS sockets (what it holds for the call charged to
/// `tool_memory`).
fn attach_proxy(
    gateway: &std::sync::Arc<dyn Gateway>,
    h: NetHandoff,
    tool_memory: Option<std::sync::Arc<dyn ToolMemory>>,
) -> Result<(Egress, Option<Egress>), JailError> {
    drop(h.child_end);
    let attached = sys::recv_fd(h.parent_end.as_raw_fd())
        .map(std::net::TcpListener::from)
        .and_then(|l| gateway.attach(l, None))
        .map_err(|source| JailError::Prepare {
            what: "starting the egress proxy",
            source,
        })?;
    let transparent = sys::recv_fd(h.parent_end.as_raw_fd())
        .and_then(|tun| {
            // Then its loopback DNS sockets, until the child's end is
            // closed.
            let dns = std::iter::from_fn(|| sys::recv_fd(h.parent_end.as_raw_fd()).ok())
                .take(super::network::MAX_LOOPBACK_DNS)
                .collect();
            gateway.attach_tun(tun, dns, tool_memory)
        })
        .ok();
    Ok((attached, transparent))
}

/// The proxy of a call behind the connect broker: a listener on a fresh
/// loopback port of the host, served by `gateway` admitting only the
/// broker's connections, and the broker that makes them.
fn start_broker(
    gateway: &std::sync::Arc<dyn Gateway>,
) -> std::io::Result<(Box<dyn Attached>, Broker)> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let admission = Admission::new();
    let attached = gateway.attach(listener, Some(admission.clone()))?;
    let (ip, port) = super::spec::PROXY_ADDR;
    let (log, judge) = (gateway.clone(), gateway.clone());
    Ok((
        attached,
        Broker {
            published: std::net::SocketAddr::from((ip, port)),
            listener: addr,
            admission,
            carries: Box::new(move |a| judge.carries_direct(a)),
            refused: Box::new(move |a| log.refused_direct(a)),
        },
    ))
}
