//! `glovebox doctor --prove`: proof by effect, on this host, that each
//! tool's jail holds.
//!
//! For each tool, the prover makes canaries of its own ([`canary`]: a
//! scratch directory and file outside every grant, listeners on the
//! host's loopback and unix sockets, a canary process, a canary variable
//! in its own environment), plans a battery of attacks from the tool's
//! policy ([`battery`], one module per family: [`files`], [`network`],
//! [`process`], [`kernel`], [`environment`], [`resources`]), and runs it
//! in the tool's real jail in place of the tool's code
//! ([`crate::engine::Engine::stand_in`]: the call's own steps — grants,
//! control surface, network and egress proxy, secrets as placeholders,
//! limits, the mode this host allows). The battery is this binary
//! re-executed as `glovebox __prove` ([`inside`]): nothing else has to be
//! installed, no shell or interpreter runs in the jail.
//!
//! Each attack is judged by its effect where one can be seen (a canary
//! listener received something, a canary file was read — its digest came
//! back —, a file appeared, a file's mode or change time moved, the
//! canary process died or is traced, the canary variable or a secret's
//! value reached the jail, a bomb got past its limit), else by the
//! kernel's answer (a forbidden call that worked). Nothing counts before
//! the battery's proof of life (the nonce, echoed), and a family whose
//! control failed (something the jail allows) is unproven, not held. The
//! report ([`verdict`]) gives per tool, per invariant: held (by which
//! mechanism), broken (the evidence), unproven or not applicable; its
//! exit status is 0 only when every applicable invariant held.
//!
//! Whatever an attack could create is a canary name, removed afterwards;
//! the host's files are only read, or given the mode and times they
//! already have. The canaries are removed when the proof ends.

pub mod battery;
pub mod canary;
pub mod environment;
pub mod files;
pub mod inside;
pub mod kernel;
pub mod network;
pub mod process;
pub mod resources;
pub mod verdict;
pub mod wire;

#[cfg(test)]
#[path = "weakened_tests.rs"]
mod weakened_tests;

use std::path::PathBuf;
use std::time::Instant;

use indexmap::IndexMap;

use crate::engine::Engine;
use crate::kind::ErrorKind;
use crate::manifest::model::Exec;
use crate::manifest::project::Origin;
use crate::policy::Policy;
use battery::{Ctx, Observed, Plan};
use verdict::{Check, Invariant, InvariantReport, NotRun, Report, ToolReport, Verdict};
use wire::Transcript;

pub use verdict::{EXIT_BROKEN, EXIT_HELD, EXIT_UNAVAILABLE};

/// What to prove, and with what.
#[derive(Debug, Clone)]
pub struct Options {
    /// The tools to prove (empty: every tool of the project).
    pub tools: Vec<String>,
    /// The battery's program: this glovebox binary.
    pub exe: PathBuf,
    /// A variable of this process's environment (name, value) that no jail
    /// may see: the environment probe's canary.
    pub env_canary: Option<(String, String)>,
}

/// The name of the canary variable `glovebox doctor --prove` sets in its
/// own environment.
pub const ENV_CANARY: &str = "GLOVEBOX_PROVE_CANARY";

/// A fresh random hex string of `bytes` bytes.
pub fn nonce(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = t
            .to_le_bytes()
            .iter()
            .copied()
            .cycle()
            .take(bytes)
            .collect();
    }
    hex::encode(b)
}

/// Proves the tools `options` names (all by default) of `engine`'s
/// project.
pub fn prove(engine: &Engine, options: &Options) -> Report {
    let project = engine.project();
    let names: Vec<String> = if options.tools.is_empty() {
        project.tools.iter().map(|t| t.name.clone()).collect()
    } else {
        options.tools.clone()
    };
    let tools = names
        .iter()
        .map(|n| prove_tool(engine, n, options))
        .collect();
    Report::new(project.root.clone(), tools)
}

fn not_run(tool: &str, kind: &str, why: NotRun, note: impl Into<String>) -> ToolReport {
    ToolReport {
        tool: tool.into(),
        kind: kind.into(),
        not_run: Some(why),
        note: note.into(),
        enforcement: None,
        invariants: Vec::new(),
        duration_ms: 0,
    }
}

/// Every invariant unproven, `why` (the battery could not run).
fn unproven(tool: &str, kind: &str, why: &str, started: Instant) -> ToolReport {
    ToolReport {
        tool: tool.into(),
        kind: kind.into(),
        not_run: None,
        note: why.into(),
        enforcement: None,
        invariants: Invariant::ALL
            .iter()
            .map(|i| {
                InvariantReport::sum(
                    *i,
                    vec![Check {
                        what: "run the battery".into(),
                        control: false,
                        verdict: Verdict::inconclusive(why),
                        micros: 0,
                    }],
                    "",
                )
            })
            .collect(),
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// A directory outside every grant of `policy` where a scratch directory
/// can be made.
fn scratch_dir(policy: &Policy) -> Option<PathBuf> {
    let candidates = [
        std::env::temp_dir(),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
        PathBuf::from("/tmp"),
    ];
    candidates.into_iter().find(|d| {
        d.is_dir()
            && !policy.can_read(d)
            && nix::unistd::access(d.as_path(), nix::unistd::AccessFlags::W_OK).is_ok()
    })
}

/// The canary values of `policy`'s declared secrets (`nonce` in each).
fn secret_canaries(policy: &Policy, nonce: &str) -> IndexMap<String, String> {
    policy
        .secrets
        .iter()
        .enumerate()
        .map(|(i, name)| (name.clone(), format!("gbxprove{i}x{nonce}")))
        .collect()
}

fn prove_tool(engine: &Engine, name: &str, options: &Options) -> ToolReport {
    let started = Instant::now();
    let tool = match engine.tool(name) {
        Ok(t) => t,
        Err(e) => return not_run(name, "", NotRun::Refused, crate::run::error_chain(&e)),
    };
    let kind = tool.manifest.kind.to_string();
    if tool.origin == Origin::Builtin {
        return not_run(
            name,
            &kind,
            NotRun::NoJail,
            "a built-in: glovebox's own helper, in a jail made per request (the project root read-only)",
        );
    }
    match &tool.manifest.exec {
        Exec::Http(_) => {
            return not_run(
                name,
                &kind,
                NotRun::NoJail,
                "an http tool runs no code: glovebox makes its request (secrets added there, behind the ssrf guard)",
            )
        }
        Exec::Mcp(_) => {
            return not_run(
                name,
                &kind,
                NotRun::NoJail,
                "an MCP server's tool: its server's jail is not attacked by this battery yet",
            )
        }
        _ => {}
    }
    let policy = match engine.policy(name) {
        Ok(p) => p,
        Err(o) => return refused(name, &kind, &o),
    };
    let nonce = nonce(16);
    let secrets = secret_canaries(&policy, &nonce);
    let scratch = scratch_dir(&policy);
    let mut canaries = match canary::Canaries::make(scratch.as_deref(), &options.exe, &nonce) {
        Ok(c) => c,
        Err(e) => return unproven(name, &kind, &crate::run::error_chain(&e), started),
    };
    let ctx = Ctx {
        project: engine.project(),
        tool,
        policy: &policy,
        canaries: &canaries,
        state_dir: crate::state::dir().ok(),
        exe: &options.exe,
        euid: nix::unistd::geteuid().as_raw(),
        nonce: &nonce,
        env_canary: options.env_canary.as_ref(),
        secrets: &secrets,
    };
    let plan = plan(&ctx);
    let stdin = match serde_json::to_vec(&plan.request(&nonce)) {
        Ok(s) => s,
        Err(e) => return unproven(name, &kind, &e.to_string(), started),
    };
    let run = match engine.stand_in(name, &secrets, &options.exe, &[wire::SUBCOMMAND], stdin) {
        Ok(r) => r,
        Err(o) => return refused(name, &kind, &o),
    };
    let Some(result) = run.result.as_ref() else {
        let why = format!(
            "the battery did not start: {}",
            run.outcome
                .error
                .as_ref()
                .map_or("no result", |e| e.message.as_str())
        );
        return unproven(name, &kind, &why, started);
    };
    canaries.settle();
    let mut transcript = Transcript::read(&result.stdout);
    if transcript.alive.as_deref() != Some(nonce.as_str()) {
        transcript = Transcript::default();
    }
    let note = if transcript.done {
        String::new()
    } else {
        format!(
            "the battery did not finish ({:?}); its stderr ends: {}",
            result.status,
            tail(&result.stderr)
        )
    };
    let process = canaries.process.state();
    let egress = run
        .extra
        .iter()
        .find(|(k, _)| *k == "egress")
        .map_or("", |(_, v)| v.as_str());
    let observed = Observed {
        canaries: &canaries,
        process,
        result,
        outcome: &run.outcome,
        egress,
        placeholders: &run.placeholders,
    };
    let invariants = plan.judge(&transcript, &observed, &result.enforcement);
    ToolReport {
        tool: name.into(),
        kind,
        not_run: None,
        note,
        enforcement: Some(result.enforcement.clone()),
        invariants,
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// The battery of `ctx`'s tool. The process probes go first (before the
/// battery has a thread or a child), the bombs last.
fn plan(ctx: &Ctx<'_>) -> Plan {
    let mut plan = Plan::default();
    process::plan(ctx, &mut plan);
    environment::plan(ctx, &mut plan);
    kernel::plan(ctx, &mut plan);
    files::plan(ctx, &mut plan);
    network::plan(ctx, &mut plan);
    resources::plan(ctx, &mut plan);
    plan
}

/// The report of a tool whose call would be refused before its code ran.
fn refused(name: &str, kind: &str, o: &crate::run::Outcome) -> ToolReport {
    let (why, message) = match &o.error {
        Some(e) if e.kind == ErrorKind::SandboxUnavailable => {
            (NotRun::Unavailable, e.message.clone())
        }
        Some(e) => (NotRun::Refused, e.message.clone()),
        None => (NotRun::Refused, "refused".into()),
    };
    not_run(name, kind, why, message)
}

/// The last line of `bytes` (bounded), for a note.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(400)..]);
    text.trim()
        .lines()
        .last()
        .unwrap_or("(nothing)")
        .chars()
        .take(200)
        .collect()
}
