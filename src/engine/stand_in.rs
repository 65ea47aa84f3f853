//! [`Engine::stand_in`]: a program run in the jail a call of a tool gets,
//! in place of the tool's code — how `doctor --prove` ([`crate::prove`])
//! runs its battery in each tool's real jail.
//!
//! The jail is made by the call's own steps, in [`Engine::call`]'s order
//! from the tool on: the tool found and not planted, under its ceiling,
//! its declared secrets resolved (from the map given, never the caller's
//! environment) and made placeholders where bound to hosts, its policy
//! with the project's control surface, then the call's job
//! ([`crate::run::job::Job`]: its spec, network and clean-up). What is left
//! out is what concerns the tool's code, not its jail: inputs (none are
//! given), approval (the tool's code does not run) and the audit intent
//! (nothing of the tool runs to record).

use std::path::Path;

use indexmap::IndexMap;
use serde_json::json;

use super::Engine;
use crate::audit::intent::Extra;
use crate::manifest::model::Exec;
use crate::policy::Policy;
use crate::run::job::{policy_failure, Job};
use crate::run::secrets::{self, SecretSource};
use crate::run::{self, ErrorKind, Outcome, Redactor};

/// What ran in a tool's jail in place of its code.
#[derive(Debug)]
pub struct StandIn {
    /// The jail's result, when the program was started (its stdout and
    /// stderr, the limits it hit, what was enforced).
    pub result: Option<crate::jail::JailResult>,
    /// The call's Outcome (warnings: the egress proxy's refusals, what
    /// glovebox removed).
    pub outcome: Outcome,
    /// The audit fields the run added (`egress`: every connection the
    /// proxy saw, allowed or refused).
    pub extra: Vec<(&'static str, String)>,
    /// The policy the jail was built from.
    pub policy: Policy,
    /// Each placeholder secret and the placeholder the jail got instead.
    pub placeholders: IndexMap<String, String>,
}

impl Engine {
    /// Runs `program args…` (reading `stdin`) in the jail a call of tool
    /// `name` gets, in place of its code, with `secrets` as the declared
    /// secrets' values. Refused, with the Outcome a call would get, where
    /// a call would be refused before its code ran; a tool that runs no
    /// code in a jail of its own (http, mcp, a built-in) is refused with
    /// `internal`.
    pub fn stand_in(
        &self,
        name: &str,
        secrets: &IndexMap<String, String>,
        program: &Path,
        args: &[&str],
        stdin: Vec<u8>,
    ) -> Result<StandIn, Box<Outcome>> {
        let (tool, config) = self.tool_and_config(name)?;
        self.not_planted(tool)?;
        let m = &tool.manifest;
        let cwd = match &m.exec {
            Exec::Command(c) => c.cwd.as_str(),
            Exec::Python(p) => p.cwd.as_str(),
            Exec::AgentCli(a) => a.dir.as_str(),
            Exec::Http(_) | Exec::Mcp(_) => {
                return Err(Box::new(Outcome::failure(
                    name,
                    ErrorKind::Internal,
                    "this tool runs no code in a jail of its own",
                    json!({}),
                )))
            }
        };
        if tool.origin == crate::manifest::project::Origin::Builtin {
            return Err(Box::new(Outcome::failure(
                name,
                ErrorKind::Internal,
                "a built-in runs glovebox's own helper, in a jail made per request",
                json!({}),
            )));
        }
        self.within_ceiling(tool, config)?;
        let source = SecretSource::Map(secrets.clone());
        let values = secrets::resolve(&m.permissions, &source).map_err(|missing| {
            Box::new(Outcome::failure(
                name,
                ErrorKind::SecretMissing,
                format!("secrets not given: {}", missing.join(", ")),
                json!({"missing": missing}),
            ))
        })?;
        let redact = Redactor::new(&values);
        let placeholders = secrets::placeholders(&m.permissions, &values).map_err(|e| {
            Box::new(Outcome::failure(
                name,
                e.kind(),
                run::error_chain(&e),
                json!({}),
            ))
        })?;
        let jail_values = secrets::jail_values(&values, &placeholders);
        let policy = Policy::for_tool(&self.project.root, m, config)
            .map(|p| p.with_surface(&self.project))
            .map_err(|e| policy_failure(name, &e))?;
        let schemas = self.schemas(m)?;
        let extra = Extra::default();
        let job = Job {
            tool,
            root: &self.project.root,
            policy: &policy,
            secrets: &jail_values,
            placeholders: &placeholders,
            redact: &redact,
            schemas: &schemas,
            cancel: None,
            extra: &extra,
            gate: None,
            observer: None,
            // The battery is glovebox's own binary, not project code.
            pins: None,
        };
        let run = job.run_stand_in(cwd, program, args, stdin)?;
        Ok(StandIn {
            result: run.result,
            outcome: run.outcome,
            extra: extra.take(),
            placeholders: placeholders
                .iter()
                .map(|s| (s.name().to_string(), s.placeholder().to_string()))
                .collect(),
            policy,
        })
    }
}
