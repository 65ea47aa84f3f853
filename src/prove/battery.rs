//! One tool's battery: what each probe family plans for it (an attempt,
//! the invariant it attacks and how its reply is judged, with the effects
//! the prover sees itself), and the judging once the battery ran.
//!
//! Every attempt counts only with its reply, and every reply only after
//! the battery's proof of life ([`super::wire::Transcript`]); a family's
//! control (something the jail allows, tried beside the attacks) that
//! failed leaves its invariant unproven, never held.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::canary::Canaries;
use super::verdict::{Check, Invariant, InvariantReport, Verdict};
use super::wire::{Action, Attempt, Reply, Request, Transcript};
use crate::jail::spec::Enforcement;
use crate::manifest::project::{Project, Tool};
use crate::policy::Policy;

/// What the families plan from.
pub struct Ctx<'a> {
    /// The project.
    pub project: &'a Project,
    /// The tool.
    pub tool: &'a Tool,
    /// Its policy (grants, network, limits, protected paths).
    pub policy: &'a Policy,
    /// This proof's canaries.
    pub canaries: &'a Canaries,
    /// glovebox's state directory, when there is one.
    pub state_dir: Option<PathBuf>,
    /// The battery's program (this binary): granted to the battery.
    pub exe: &'a Path,
    /// This process's effective uid.
    pub euid: u32,
    /// This proof's nonce.
    pub nonce: &'a str,
    /// A variable of this process's environment that no jail may see.
    pub env_canary: Option<&'a (String, String)>,
    /// The values the declared secrets were given (canaries).
    pub secrets: &'a IndexMap<String, String>,
}

/// What the prover sees once the battery ended.
pub struct Observed<'a> {
    /// The canaries (their listeners settled).
    pub canaries: &'a Canaries,
    /// What became of the canary process.
    pub process: super::canary::ProcessState,
    /// The jail's result.
    pub result: &'a crate::jail::JailResult,
    /// The call's Outcome.
    pub outcome: &'a crate::run::Outcome,
    /// The egress proxy's record of the call (`egress=` audit field).
    pub egress: &'a str,
    /// Each placeholder secret's placeholder.
    pub placeholders: &'a IndexMap<String, String>,
}

/// How a reply is judged.
pub type Judge = Box<dyn Fn(&Reply, &Observed<'_>) -> Verdict>;

/// One planned item.
enum Item {
    /// An attempt.
    Try {
        invariant: Invariant,
        what: String,
        control: bool,
        action: Action,
        judge: Judge,
    },
    /// Nothing to attack (why).
    Skip {
        invariant: Invariant,
        what: String,
        why: String,
    },
}

/// A tool's battery, as planned.
#[derive(Default)]
pub struct Plan {
    items: Vec<Item>,
    /// Names an attack could create: removed after the battery when they
    /// exist (evidence first).
    cleanup: Vec<PathBuf>,
}

impl Plan {
    /// An attack on `invariant`, judged by `judge`.
    pub fn attack(&mut self, invariant: Invariant, what: String, action: Action, judge: Judge) {
        self.items.push(Item::Try {
            invariant,
            what,
            control: false,
            action,
            judge,
        });
    }

    /// An attack on `invariant` that must fail ([`refusal`]).
    pub fn refused(&mut self, invariant: Invariant, what: String, action: Action) {
        self.attack(invariant, what, action, Box::new(|r, _| refusal(r)));
    }

    /// A control: something the jail allows, which must work for the
    /// refusals of `invariant` to prove anything.
    pub fn control(&mut self, invariant: Invariant, what: String, action: Action) {
        self.items.push(Item::Try {
            invariant,
            what,
            control: true,
            action,
            judge: Box::new(|r, _| {
                if r.ok {
                    Verdict::held("it worked")
                } else {
                    Verdict::broken(format!("it failed: {}", how(r.errno)))
                }
            }),
        });
    }

    /// Makes the last attempt planned its invariant's control (judged by
    /// its own judge: held means it worked).
    pub fn mark_last_control(&mut self) {
        if let Some(Item::Try { control, .. }) = self.items.last_mut() {
            *control = true;
        }
    }

    /// Nothing to attack for `invariant` here.
    pub fn skip(&mut self, invariant: Invariant, what: impl Into<String>, why: impl Into<String>) {
        self.items.push(Item::Skip {
            invariant,
            what: what.into(),
            why: why.into(),
        });
    }

    /// `path` may be created by an attack: removed afterwards if so.
    pub fn clean_up(&mut self, path: PathBuf) {
        self.cleanup.push(path);
    }

    /// The battery's request.
    pub fn request(&self, nonce: &str) -> Request {
        let attempts = self
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Try { action, .. } => Some(action.clone()),
                Item::Skip { .. } => None,
            })
            .enumerate()
            .map(|(id, action)| Attempt { id, action })
            .collect();
        Request {
            nonce: nonce.into(),
            attempts,
        }
    }

    /// Judges every item: `transcript` is the battery's output (`None`
    /// when it never ran: `why`), `observed` what the prover saw; then
    /// removes what attacks created. Per invariant, in report order.
    pub fn judge(
        self,
        transcript: &Transcript,
        observed: &Observed<'_>,
        enforcement: &Enforcement,
    ) -> Vec<InvariantReport> {
        let mut checks: IndexMap<Invariant, Vec<Check>> = IndexMap::new();
        let mut id = 0;
        let stopped = if transcript.alive.is_none() {
            "the battery never showed it ran (no proof of life)"
        } else {
            "the battery stopped before this attempt"
        };
        for item in self.items {
            let (invariant, check) = match item {
                Item::Skip {
                    invariant,
                    what,
                    why,
                } => (
                    invariant,
                    Check {
                        what,
                        control: false,
                        verdict: Verdict::not_applicable(why),
                        micros: 0,
                    },
                ),
                Item::Try {
                    invariant,
                    what,
                    control,
                    judge,
                    ..
                } => {
                    let reply = transcript.replies.get(&id);
                    let verdict = match reply {
                        Some(r) if r.was_not_tried() => {
                            Verdict::inconclusive(format!("{} ({})", r.data, how(r.errno)))
                        }
                        Some(reply) => judge(reply, observed),
                        None => Verdict::inconclusive(stopped),
                    };
                    id += 1;
                    (
                        invariant,
                        Check {
                            what,
                            control,
                            verdict,
                            micros: reply.map_or(0, |r| r.micros),
                        },
                    )
                }
            };
            checks.entry(invariant).or_default().push(check);
        }
        for path in &self.cleanup {
            remove(path);
        }
        Invariant::ALL
            .iter()
            .filter_map(|inv| {
                let c = checks.shift_remove(inv)?;
                Some(InvariantReport::sum(*inv, c, &inv.mechanism(enforcement)))
            })
            .collect()
    }
}

/// Removes what an attack created at `path` (a file, a link, a directory).
fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// An errno's name ("EACCES").
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

/// What an errno says held the attack.
pub fn how(errno: Option<i32>) -> String {
    let Some(e) = errno else {
        return "refused".into();
    };
    let why = match e {
        libc::ENOENT => "not in the jail's view",
        libc::EACCES => "refused by landlock (or file permissions)",
        libc::EROFS => "a read-only mount",
        libc::EPERM => "refused by seccomp, the supervisor or a missing privilege",
        libc::ENOSYS => "refused by seccomp",
        libc::EXDEV => "across a mount or outside landlock's rules",
        libc::ECONNREFUSED => "nothing listens there in the jail's network",
        libc::ENETUNREACH | libc::EHOSTUNREACH => "no route from the jail's network",
        libc::ESRCH => "no such process in the jail's view",
        libc::ENXIO => "no controlling terminal",
        libc::ENOTTY => "not a terminal",
        libc::EAGAIN => "a limit refused it",
        libc::ENOMEM => "a memory limit refused it",
        libc::EAFNOSUPPORT => "the kernel lacks this socket family",
        _ => "refused",
    };
    format!("{} ({why})", errno_name(e))
}

/// A reply to an attack that must fail: held when it failed, broken when
/// it worked.
pub fn refusal(reply: &Reply) -> Verdict {
    if reply.ok {
        Verdict::broken(if reply.data.is_empty() {
            "the call worked".to_string()
        } else {
            format!("the call worked: {}", reply.data)
        })
    } else {
        Verdict::held(how(reply.errno))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_its_errno_and_a_success_is_broken() {
        assert_eq!(
            refusal(&Reply::failed(0, libc::EACCES, "")),
            Verdict::held("EACCES (refused by landlock (or file permissions))")
        );
        assert!(matches!(
            refusal(&Reply::ok(0, "x")),
            Verdict::Broken { .. }
        ));
        assert_eq!(errno_name(libc::ENXIO), "ENXIO");
    }

    #[test]
    fn requests_number_only_the_attempts() {
        let mut plan = Plan::default();
        plan.skip(Invariant::Secrets, "x", "no secret");
        plan.refused(Invariant::Kernel, "io_uring".into(), Action::IoUring);
        plan.control(Invariant::Processes, "self".into(), Action::SocketPair);
        let r = plan.request("n");
        assert_eq!(r.attempts.len(), 2);
        assert_eq!(r.attempts[1].id, 1);
        assert_eq!(r.attempts[1].action, Action::SocketPair);
    }
}
