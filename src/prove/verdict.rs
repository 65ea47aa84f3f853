//! What `doctor --prove` reports: per tool, per invariant, held (by which
//! mechanism), broken (with the evidence), inconclusive (a probe that did
//! not show it ran) or not applicable; a summary; the exit status.

use serde::Serialize;

use crate::jail::spec::{Enforcement, MetadataBy};

/// An invariant the battery attacks (DESIGN.md's, split where one of them
/// is attacked in several ways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// Nothing outside the grants can be read or listed.
    DenyByDefault,
    /// Nothing outside `fs.write` can be changed, its metadata included.
    ReadOnly,
    /// No call can change what any tool runs or may do.
    ControlSurface,
    /// glovebox's state directory and audit key are out of reach.
    State,
    /// `network: false`: no channel out.
    NoNetwork,
    /// `network: true`: only through glovebox's egress proxy.
    EgressProxy,
    /// No reach into processes outside the call's own tree.
    Processes,
    /// No new namespaces or mounts, no `io_uring`, no kernel keyrings.
    Kernel,
    /// No controlling terminal, no input pushed into one.
    Terminal,
    /// No capabilities, `no_new_privs`.
    Capabilities,
    /// The environment starts empty.
    Environment,
    /// A secret bound to hosts is a placeholder in the jail.
    Secrets,
    /// Memory, processes and output are bounded.
    Resources,
}

impl Invariant {
    /// Every invariant, in the order they are reported.
    pub const ALL: [Invariant; 13] = [
        Invariant::DenyByDefault,
        Invariant::ReadOnly,
        Invariant::ControlSurface,
        Invariant::State,
        Invariant::NoNetwork,
        Invariant::EgressProxy,
        Invariant::Processes,
        Invariant::Kernel,
        Invariant::Terminal,
        Invariant::Capabilities,
        Invariant::Environment,
        Invariant::Secrets,
        Invariant::Resources,
    ];

    /// The stable identifier (JSON).
    pub fn id(self) -> &'static str {
        match self {
            Invariant::DenyByDefault => "deny-by-default",
            Invariant::ReadOnly => "read-only",
            Invariant::ControlSurface => "control-surface",
            Invariant::State => "state",
            Invariant::NoNetwork => "no-network",
            Invariant::EgressProxy => "egress-proxy",
            Invariant::Processes => "processes",
            Invariant::Kernel => "kernel",
            Invariant::Terminal => "terminal",
            Invariant::Capabilities => "capabilities",
            Invariant::Environment => "environment",
            Invariant::Secrets => "secrets",
            Invariant::Resources => "resources",
        }
    }

    /// What it says, for people.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::DenyByDefault => "deny-by-default filesystem",
            Invariant::ReadOnly => "read-only outside fs.write",
            Invariant::ControlSurface => "tools cannot rewrite tools",
            Invariant::State => "glovebox's state out of reach",
            Invariant::NoNetwork => "no network when network is false",
            Invariant::EgressProxy => "network only through the egress proxy",
            Invariant::Processes => "no reach into other processes",
            Invariant::Kernel => "no namespaces, mounts, io_uring, keyrings",
            Invariant::Terminal => "no controlling terminal",
            Invariant::Capabilities => "no capabilities",
            Invariant::Environment => "empty environment",
            Invariant::Secrets => "secrets are placeholders",
            Invariant::Resources => "bounded resources",
        }
    }

    /// The mechanisms that hold it in a jail that enforced `e`.
    pub fn mechanism(self, e: &Enforcement) -> String {
        let landlock = |what: &str| {
            if e.landlock_abi > 0 {
                format!(" + landlock abi {} ({what})", e.landlock_abi)
            } else {
                String::new()
            }
        };
        match self {
            Invariant::DenyByDefault if e.mount_tree => format!(
                "the jail's own root (ungranted paths do not exist){}",
                landlock("second layer")
            ),
            Invariant::DenyByDefault => format!(
                "landlock abi {} (ungranted paths cannot be read or listed)",
                e.landlock_abi
            ),
            Invariant::ReadOnly => match e.metadata_guard {
                MetadataBy::Tree => format!(
                    "read-only binds (EROFS, metadata included){}",
                    landlock("second layer")
                ),
                MetadataBy::Seccomp => format!(
                    "the supervisor decides every metadata call (seccomp user notification){}",
                    landlock("contents")
                ),
                MetadataBy::Nothing => "nothing (a degraded run)".into(),
            },
            Invariant::ControlSurface if e.mount_tree => {
                "protected paths bound read-only inside write grants".into()
            }
            Invariant::ControlSurface => {
                "landlock write rules split around the protected paths; metadata calls refused by the supervisor".into()
            }
            Invariant::State if e.mount_tree => {
                "never granted (refused by identity) and absent from the jail's root".into()
            }
            Invariant::State => "never granted (refused by identity); landlock".into(),
            Invariant::NoNetwork => format!(
                "seccomp socket filter{}{}",
                if e.landlock_abi >= 4 { " + landlock tcp" } else { "" },
                if e.landlock_abi >= 6 {
                    " + abstract unix scope"
                } else {
                    ""
                }
            ),
            Invariant::EgressProxy if e.net_namespace => {
                "own network namespace + the supervisor's proxy and ssrf guard".into()
            }
            Invariant::EgressProxy if e.connect_broker => {
                "connect broker (each connect made by the supervisor, only to the call's proxy) + the proxy's ssrf guard".into()
            }
            Invariant::EgressProxy => "the host's network (direct)".into(),
            Invariant::Processes if e.pid_namespace => format!(
                "pid namespace + private /proc + seccomp{}",
                landlock("signal and ptrace scoping")
            ),
            Invariant::Processes => format!(
                "seccomp{}",
                landlock("/proc closed, signals and ptrace scoped")
            ),
            Invariant::Kernel => "seccomp".into(),
            Invariant::Terminal => "setsid, stdin never a terminal, seccomp (TIOCSTI)".into(),
            Invariant::Capabilities if e.capabilities_dropped => {
                "all capabilities dropped, bounding set emptied, no_new_privs".into()
            }
            Invariant::Capabilities => "unprivileged supervisor, no_new_privs".into(),
            Invariant::Environment => "built by glovebox, nothing inherited".into(),
            Invariant::Secrets => {
                "placeholders in the jail; the value added by the egress proxy for its hosts only"
                    .into()
            }
            Invariant::Resources => format!(
                "memory: {}, processes: {}, output: capped by the supervisor",
                e.memory_limit, e.pids_limit
            ),
        }
    }
}

impl Serialize for Invariant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// What one check, or one invariant, came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// The attack failed; how (the errno, the mechanism).
    Held { how: String },
    /// The attack worked; what shows it.
    Broken { evidence: String },
    /// The probe did not show it ran (or its control failed): nothing is
    /// proven either way.
    Inconclusive { why: String },
    /// Nothing to attack here.
    NotApplicable { why: String },
}

impl Verdict {
    /// Held, `how`.
    pub fn held(how: impl Into<String>) -> Verdict {
        Verdict::Held { how: how.into() }
    }

    /// Broken, with `evidence`.
    pub fn broken(evidence: impl Into<String>) -> Verdict {
        Verdict::Broken {
            evidence: evidence.into(),
        }
    }

    /// Inconclusive, `why`.
    pub fn inconclusive(why: impl Into<String>) -> Verdict {
        Verdict::Inconclusive { why: why.into() }
    }

    /// Not applicable, `why`.
    pub fn not_applicable(why: impl Into<String>) -> Verdict {
        Verdict::NotApplicable { why: why.into() }
    }

    /// The label shown.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Held { .. } => "held",
            Verdict::Broken { .. } => "BROKEN",
            Verdict::Inconclusive { .. } => "UNPROVEN",
            Verdict::NotApplicable { .. } => "n/a",
        }
    }

    /// Its text (how, the evidence, why).
    pub fn text(&self) -> &str {
        match self {
            Verdict::Held { how } => how,
            Verdict::Broken { evidence } => evidence,
            Verdict::Inconclusive { why } | Verdict::NotApplicable { why } => why,
        }
    }
}

/// One attack and what it came to.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was tried.
    pub what: String,
    /// A control (something the jail allows, tried to show the probe
    /// works), not an attack.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub control: bool,
    /// What it came to.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// How long the attempt took in the jail, in microseconds.
    #[serde(skip_serializing_if = "is_zero")]
    pub micros: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One invariant of one tool.
#[derive(Debug, Clone, Serialize)]
pub struct InvariantReport {
    /// Which.
    pub invariant: Invariant,
    /// Its name.
    pub name: &'static str,
    /// Every check's verdict, summed up: broken when one check is, else
    /// inconclusive when one is (or a control failed), else held when one
    /// is, else not applicable.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The checks.
    pub checks: Vec<Check>,
}

impl InvariantReport {
    /// `checks` of `invariant` summed up; a held one says `mechanism`.
    pub fn sum(invariant: Invariant, checks: Vec<Check>, mechanism: &str) -> InvariantReport {
        let attacks = || checks.iter().filter(|c| !c.control);
        let broken: Vec<String> = attacks()
            .filter_map(|c| match &c.verdict {
                Verdict::Broken { evidence } => Some(format!("{}: {evidence}", c.what)),
                _ => None,
            })
            .collect();
        let failed_control = checks
            .iter()
            .find(|c| c.control && !matches!(c.verdict, Verdict::Held { .. }));
        let unproven = attacks().find(|c| matches!(c.verdict, Verdict::Inconclusive { .. }));
        let held = attacks()
            .filter(|c| matches!(c.verdict, Verdict::Held { .. }))
            .count();
        let verdict = if !broken.is_empty() {
            Verdict::broken(broken.join("; "))
        } else if let Some(c) = failed_control {
            Verdict::inconclusive(format!(
                "the probe's control failed ({}: {}), so a refusal proves nothing",
                c.what,
                c.verdict.text()
            ))
        } else if let Some(c) = unproven {
            Verdict::inconclusive(format!("{}: {}", c.what, c.verdict.text()))
        } else if held > 0 {
            Verdict::held(format!(
                "{mechanism} ({held} attack{} refused)",
                if held == 1 { "" } else { "s" }
            ))
        } else {
            let why = attacks()
                .find_map(|c| match &c.verdict {
                    Verdict::NotApplicable { why } => Some(why.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "nothing to attack here".into());
            Verdict::not_applicable(why)
        };
        InvariantReport {
            invariant,
            name: invariant.name(),
            verdict,
            checks,
        }
    }
}

/// Why a tool was not proven.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotRun {
    /// It runs no code in a jail of its own (an http tool, an MCP server's
    /// tool, a built-in): nothing of its own to attack.
    NoJail,
    /// A call would be refused before its code runs (its manifest, a
    /// missing venv, a missing secret): nothing of it runs here.
    Refused,
    /// The jail cannot be made here (`sandbox_unavailable`): a call is
    /// refused the same way.
    Unavailable,
}

/// One tool's proof.
#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    /// The tool.
    pub tool: String,
    /// Its kind (command, python, http…).
    pub kind: String,
    /// Why it was not proven, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_run: Option<NotRun>,
    /// What a call would be told (not run), or the proof's notes.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// What its jail enforced, when the battery ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// Each invariant (empty when not run).
    pub invariants: Vec<InvariantReport>,
    /// Wall time of its battery.
    pub duration_ms: u64,
}

/// The counts the summary line gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Tools whose battery ran.
    pub proven: usize,
    /// Tools not proven, by reason.
    pub no_jail: usize,
    pub refused: usize,
    pub unavailable: usize,
    /// Invariants of the proven tools, by verdict.
    pub held: usize,
    pub broken: usize,
    pub inconclusive: usize,
    pub not_applicable: usize,
}

/// `doctor --prove`'s findings.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The project.
    pub root: std::path::PathBuf,
    /// Each tool named (all by default).
    pub tools: Vec<ToolReport>,
    /// The counts.
    pub summary: Summary,
}

/// Exit status: every applicable invariant held.
pub const EXIT_HELD: u8 = 0;
/// Exit status: an invariant is broken, or could not be proven.
pub const EXIT_BROKEN: u8 = 1;
/// Exit status: a tool's jail cannot be made here (nothing broken).
pub const EXIT_UNAVAILABLE: u8 = 3;

impl Report {
    /// The report of `tools` in the project at `root`, summed up.
    pub fn new(root: std::path::PathBuf, tools: Vec<ToolReport>) -> Report {
        let mut s = Summary::default();
        for t in &tools {
            match t.not_run {
                None => s.proven += 1,
                Some(NotRun::NoJail) => s.no_jail += 1,
                Some(NotRun::Refused) => s.refused += 1,
                Some(NotRun::Unavailable) => s.unavailable += 1,
            }
            for i in &t.invariants {
                match i.verdict {
                    Verdict::Held { .. } => s.held += 1,
                    Verdict::Broken { .. } => s.broken += 1,
                    Verdict::Inconclusive { .. } => s.inconclusive += 1,
                    Verdict::NotApplicable { .. } => s.not_applicable += 1,
                }
            }
        }
        Report {
            root,
            tools,
            summary: s,
        }
    }

    /// The exit status: 0 when every applicable invariant held, 1 when
    /// one is broken or unproven, 3 when none is but a tool's jail cannot
    /// be made here.
    pub fn exit_status(&self) -> u8 {
        let s = &self.summary;
        if s.broken > 0 || s.inconclusive > 0 {
            EXIT_BROKEN
        } else if s.unavailable > 0 {
            EXIT_UNAVAILABLE
        } else {
            EXIT_HELD
        }
    }

    /// The summary line.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        let mut line = format!(
            "{} tool{} proven: {} invariant{} held, {} broken, {} unproven, {} not applicable",
            s.proven,
            if s.proven == 1 { "" } else { "s" },
            s.held,
            if s.held == 1 { "" } else { "s" },
            s.broken,
            s.inconclusive,
            s.not_applicable
        );
        let not_run = [
            (s.no_jail, "with no jail of their own"),
            (s.refused, "refused before their code runs"),
            (s.unavailable, "whose jail cannot be made here"),
        ];
        for (n, why) in not_run.into_iter().filter(|(n, _)| *n > 0) {
            line.push_str(&format!("; {n} not run ({why})"));
        }
        line
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn check(what: &str, control: bool, verdict: Verdict) -> Check {
        Check {
            what: what.into(),
            control,
            verdict,
            micros: 0,
        }
    }

    #[test]
    fn an_invariant_is_broken_by_one_check_and_unproven_by_a_failed_control() {
        let held = || check("a", false, Verdict::held("EACCES"));
        let r = InvariantReport::sum(Invariant::NoNetwork, vec![held(), held()], "seccomp");
        assert_eq!(r.verdict, Verdict::held("seccomp (2 attacks refused)"));
        let r = InvariantReport::sum(
            Invariant::NoNetwork,
            vec![held(), check("udp", false, Verdict::broken("got 21 bytes"))],
            "seccomp",
        );
        assert_eq!(r.verdict, Verdict::broken("udp: got 21 bytes"));
        let r = InvariantReport::sum(
            Invariant::NoNetwork,
            vec![held(), check("pair", true, Verdict::broken("EPERM"))],
            "seccomp",
        );
        assert!(matches!(r.verdict, Verdict::Inconclusive { .. }), "{r:?}");
        // Broken wins over a failed control: the evidence stands.
        let r = InvariantReport::sum(
            Invariant::NoNetwork,
            vec![
                check("pair", true, Verdict::broken("EPERM")),
                check("udp", false, Verdict::broken("got 21 bytes")),
            ],
            "seccomp",
        );
        assert!(matches!(r.verdict, Verdict::Broken { .. }), "{r:?}");
        let r = InvariantReport::sum(
            Invariant::Secrets,
            vec![check("x", false, Verdict::not_applicable("no secret"))],
            "m",
        );
        assert_eq!(r.verdict, Verdict::not_applicable("no secret"));
    }

    #[test]
    fn the_exit_status_is_zero_only_when_everything_applicable_held() {
        let inv = |v: Verdict| InvariantReport {
            invariant: Invariant::Kernel,
            name: "k",
            verdict: v,
            checks: Vec::new(),
        };
        let tool = |not_run, invariants| ToolReport {
            tool: "t".into(),
            kind: "command".into(),
            not_run,
            note: String::new(),
            enforcement: None,
            invariants,
            duration_ms: 0,
        };
        let held = || inv(Verdict::held("seccomp"));
        let na = || inv(Verdict::not_applicable("x"));
        let report = |tools| Report::new("/p".into(), tools);
        assert_eq!(
            report(vec![
                tool(None, vec![held(), na()]),
                tool(Some(NotRun::NoJail), vec![])
            ])
            .exit_status(),
            EXIT_HELD
        );
        assert_eq!(
            report(vec![tool(None, vec![held(), inv(Verdict::broken("e"))])]).exit_status(),
            EXIT_BROKEN
        );
        assert_eq!(
            report(vec![tool(None, vec![inv(Verdict::inconclusive("e"))])]).exit_status(),
            EXIT_BROKEN
        );
        assert_eq!(
            report(vec![
                tool(None, vec![held()]),
                tool(Some(NotRun::Unavailable), vec![])
            ])
            .exit_status(),
            EXIT_UNAVAILABLE
        );
        let line = report(vec![
            tool(None, vec![held()]),
            tool(Some(NotRun::NoJail), vec![]),
        ])
        .summary_line();
        assert!(
            line.starts_with("1 tool proven: 1 invariant held, 0 broken"),
            "{line}"
        );
        assert!(
            line.contains("1 not run (with no jail of their own)"),
            "{line}"
        );
    }
}
