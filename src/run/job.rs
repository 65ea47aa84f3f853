//! Running a job: what every kind of run needs from the decisions
//! [`crate::engine::Engine::call`] already made ([`Job`]), the command,
//! agent-cli and python runs, the call's network (its egress proxy, or
//! the host network the config opted into), the warm worker a python call
//! may run in, and the Outcome of a call that planted control names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::json;

use crate::approval;
use crate::audit::intent::{Extra, IntentGate};
use crate::egress::placeholder::Placeholders;
use crate::jail::{self, Output, Spec, Stdin};
use crate::manifest::discover::resolve;
use crate::manifest::model::{AgentCliExec, CommandExec, PythonExec};
use crate::manifest::project::Tool;
use crate::policy::{Policy, PolicyError};
use crate::run::{self, command, python, ErrorKind, Finished, Outcome, Redactor};
use crate::template::{Bindings, TemplateError};
use crate::validate::Schemas;

/// What every kind of run needs from the decisions already made.
pub(crate) struct Job<'a> {
    /// The tool called (its name is the one the caller gave).
    pub tool: &'a Tool,
    pub root: &'a std::path::Path,
    pub policy: &'a Policy,
    /// The values the jail sees (placeholders for placeholder secrets).
    pub secrets: &'a IndexMap<String, String>,
    pub placeholders: &'a Placeholders,
    pub redact: &'a Redactor,
    pub schemas: &'a Schemas,
    /// The caller's cancel token.
    pub cancel: Option<jail::Cancel>,
    pub extra: &'a Extra,
    /// Asked right before the call's code starts ([`crate::audit::intent::Intent::begin`]).
    pub gate: Option<Arc<IntentGate>>,
    /// Learn mode's observer (`Engine::observe`).
    pub observer: Option<&'a Arc<jail::observe::Observer>>,
    /// What a call of a tool that requires approval may load
    /// ([`run::pins`]).
    pub pins: Option<&'a run::pins::Pins>,
}

impl Job<'_> {
    /// The working directory, resolved. A tool starts in it even when its
    /// permissions do not let it read it (`fs.read: []` and the default
    /// `cwd: .`): the jail enters it before Landlock applies, and the
    /// kernel then refuses to list or read it, so a tool that needs no
    /// files runs without being granted any. A cwd that is not a
    /// directory is refused, saying so (never as a missing grant).
    ///
    /// Its symlinks are resolved, like the grants': the jail holds the
    /// real paths it was granted, not the links that led to them.
    fn cwd(&self, rel: &str) -> Result<PathBuf, Box<Outcome>> {
        let root = self.root;
        let cwd = crate::footprint::resolved_under(root, &resolve(root, rel));
        if cwd.is_dir() {
            return Ok(cwd);
        }
        Err(policy_failure(
            &self.tool.name,
            &crate::policy::PolicyError::NoSuchCwd { path: cwd },
        ))
    }

    pub fn run_command(
        &self,
        exec: &CommandExec,
        bindings: &Bindings<'_>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = self.tool.name.as_str();
        let root = self.root;
        let program = command::program(root, exec);
        if program.is_absolute() {
            self.policy
                .require_readable("entrypoint", &program)
                .map_err(|e| policy_failure(name, &e))?;
        }
        let cwd = self.cwd(&exec.cwd)?;
        let argv = command::argv(root, exec, bindings).map_err(|e| template_failure(name, &e))?;
        let stdout = &exec.stdout;
        let allowed = exec.exit_codes_ok.clone();
        let mut spec = self.spec(argv, cwd);
        run::safepath::apply(&mut spec, false);
        self.pin(&mut spec);
        self.module_not_planted(&mut spec)?;
        self.execute(spec, &program, |r, redact| match r.status {
            jail::Status::Exited(c) if allowed.contains(&c) => {
                run::select::read(name, &r.stdout, stdout, redact)
            }
            status => Finished::failed(run::exit_failure(
                name,
                status,
                &redact.text(&String::from_utf8_lossy(&r.stderr)),
                &allowed,
            )),
        })
    }

    pub fn run_agentcli(
        &self,
        exec: &AgentCliExec,
        stdin: Vec<u8>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = self.tool.name.as_str();
        let Some(program) = exec.command.first().map(PathBuf::from) else {
            return Err(Box::new(Outcome::failure(
                name,
                ErrorKind::ManifestInvalid,
                "the tool's command is empty",
                json!({}),
            )));
        };
        if program.is_absolute() {
            self.policy
                .require_readable("command[0]", &program)
                .map_err(|e| policy_failure(name, &e))?;
        }
        let cwd = self.cwd(&exec.dir)?;
        let argv = exec.command.iter().map(Into::into).collect();
        let mut spec = self.spec(argv, cwd);
        run::safepath::apply(&mut spec, false);
        self.pin(&mut spec);
        self.module_not_planted(&mut spec)?;
        spec.stdin = Stdin::Bytes(stdin);
        self.execute(spec, &program, |r, redact| {
            run::agentcli::read(name, r, redact)
        })
    }

    pub fn run_python(
        &self,
        exec: &PythonExec,
        bindings: &Bindings<'_>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = self.tool.name.as_str();
        let interpreter = python::Interpreter::locate(self.root, exec)
            .map_err(|e| policy_failure(name, &PolicyError::Python(e)))?;
        let cwd = self.cwd(&exec.cwd)?;
        let mut args = Vec::new();
        // Without `args`, the parameters go as keyword arguments.
        let mut kwargs = serde_json::Map::new();
        match &exec.args {
            Some(templates) => {
                for t in templates {
                    if let Some(v) = crate::template::json(t, bindings)
                        .map_err(|e| template_failure(name, &e))?
                    {
                        args.push(v);
                    }
                }
            }
            None => kwargs = bindings.params.clone(),
        }
        let chain = python::resolve_module(&cwd, &exec.module)
            .map_err(|e| policy_failure(name, &PolicyError::Python(e)))?;
        // Taken after the chain, before the records are read: what either
        // found present was, if planted, recorded before it appeared.
        let footprint = crate::footprint::of(self.root, self.tool);
        self.not_planted_now(chain.as_deref(), &footprint.paths)?;
        let mut spec = self.spec(interpreter.argv(self.pins.is_some()), cwd.clone());
        run::safepath::apply(&mut spec, true);
        spec.stdin = Stdin::Bytes(python::request(
            exec,
            &cwd,
            chain.as_deref(),
            &footprint.absent_imports,
            args,
            kwargs,
        ));
        let warm = self.warm_plan(exec, &spec, &cwd, chain.as_deref(), footprint);
        let returns = exec.returns;
        self.execute_with(
            spec,
            &interpreter.program,
            |spec| {
                warm.as_ref()
                    .and_then(|(pool, plan)| pool.run(plan, spec))
                    .unwrap_or_else(|| run::start(spec))
            },
            |r, redact| python::read(name, returns, r, redact),
        )
    }

    /// Refuses a module found in `cwd` now that a call still running may
    /// have planted since the engine's check (the chain is resolved after
    /// it): the records are read after the files were seen, so a plant
    /// seen here was recorded before it appeared ([`crate::planted`]). A
    /// module not found here is imported by name from everywhere but
    /// `cwd` (the shim), so one that appears later never runs.
    fn not_planted_now(
        &self,
        chain: Option<&[python::Found]>,
        also: &[PathBuf],
    ) -> Result<(), Box<Outcome>> {
        let chain = chain.unwrap_or_default();
        if chain.is_empty() && also.is_empty() {
            return Ok(());
        }
        let name = self.tool.name.as_str();
        let hidden = crate::planted::hidden(self.root).map_err(|e| {
            Box::new(Outcome::failure(
                name,
                e.kind(),
                run::error_chain(&e),
                json!({}),
            ))
        })?;
        let planted = chain.iter().find_map(|f| {
            let (python::Found::Module(p)
            | python::Found::Package(p)
            | python::Found::Namespace(p)) = f;
            crate::planted::is_hidden(p, &hidden).then_some(p)
        });
        let planted =
            planted.or_else(|| also.iter().find(|p| crate::planted::is_hidden(p, &hidden)));
        match planted {
            Some(p) => Err(Box::new(Outcome::failure(
                name,
                ErrorKind::ManifestInvalid,
                format!(
                    "tool `{name}` runs {}, which a call still running may have created; it is not used before that call has ended and glovebox has checked it: retry then",
                    p.strip_prefix(self.root).unwrap_or(p).display()
                ),
                json!({}),
            ))),
            None => Ok(()),
        }
    }

    /// A call of a tool that requires approval: a Python it starts
    /// through the bootstrap checks what it loads ([`run::pins`]).
    fn pin(&self, spec: &mut Spec) {
        if self.pins.is_some() {
            run::safepath::pin(&mut spec.argv);
        }
    }

    /// A `python -m MOD` command (through the bootstrap): MOD found in
    /// `cwd` now is refused when a call still running may have planted it;
    /// not found there, Python is told to find it without searching `cwd`
    /// ([`run::safepath::module_not_in_cwd`]), so one that appears later
    /// never runs.
    fn module_not_planted(&self, spec: &mut Spec) -> Result<(), Box<Outcome>> {
        let Some(module) = run::safepath::module(&spec.argv).and_then(|m| m.to_str()) else {
            return Ok(());
        };
        let chain = python::resolve_module(&spec.cwd, module)
            .map_err(|e| policy_failure(&self.tool.name, &PolicyError::Python(e)))?;
        if chain.is_some() {
            return self.not_planted_now(chain.as_deref(), &[]);
        }
        run::safepath::module_not_in_cwd(&mut spec.argv);
        Ok(())
    }

    /// The warm worker a python call may run in (`serve` and `mcp` only,
    /// see [`run::warm`]): keyed by the tool's approval fingerprint, so
    /// an edited manifest, module or venv never reaches an old worker.
    fn warm_plan(
        &self,
        exec: &PythonExec,
        spec: &Spec,
        cwd: &std::path::Path,
        chain: Option<&[python::Found]>,
        footprint: crate::footprint::Footprint,
    ) -> Option<(&'static run::warm::Pool, run::warm::Plan)> {
        let pool = run::warm::pool().filter(|_| exec.warm)?;
        if !run::warm::eligible(spec) {
            return None;
        }
        let tool = self.tool;
        // The call's footprint (found once, in `python`): hashed for the
        // key, and its files watched.
        let fingerprint = approval::fingerprint_by_stamp(self.root, tool, &footprint).ok()?;
        let init = python::init_request(
            exec,
            cwd,
            chain,
            &footprint.absent_imports,
            run::warm::IDLE.as_secs(),
        );
        let watch = footprint.files;
        let seen = run::warm::Seen {
            root: self.root.to_path_buf(),
            tool: tool.name.clone(),
            venv: exec.venv.as_ref().map(|v| resolve(self.root, v)),
        };
        let plan =
            run::warm::Plan::new(spec, &format!("{fingerprint:?}"), &init, watch)?.recording(seen);
        Some((pool, plan))
    }
}

/// What ran in a tool's jail in place of its code ([`Job::run_stand_in`]).
pub(crate) struct StandInRun {
    /// The jail's result, when the program was started.
    pub result: Option<jail::JailResult>,
    /// The call's Outcome, as a call of the tool would have it (its
    /// egress refusals in the warnings; a planted control name undone).
    pub outcome: Outcome,
}

impl Job<'_> {
    /// Runs `program` with `args`, reading `stdin`, in place of the tool's
    /// code, in the jail a call of the tool gets: the same spec (grants,
    /// control surface, limits, secrets as the jail sees them), network
    /// and clean-up as [`Job::run_command`], started in `cwd` (as the
    /// manifest writes it); `program` is also granted read and execute
    /// (`doctor --prove` runs the glovebox binary's battery so).
    pub(crate) fn run_stand_in(
        &self,
        cwd: &str,
        program: &Path,
        args: &[&str],
        stdin: Vec<u8>,
    ) -> Result<StandInRun, Box<Outcome>> {
        let cwd = self.cwd(cwd)?;
        let argv = std::iter::once(program.as_os_str().to_owned())
            .chain(args.iter().map(Into::into))
            .collect();
        let mut spec = self.spec(argv, cwd);
        spec.fs.exec.push(program.to_path_buf());
        spec.stdin = Stdin::Bytes(stdin);
        let mut kept = None;
        let outcome = self.execute_with(
            spec,
            program,
            |spec| {
                let r = run::start(spec);
                if let Ok(r) = &r {
                    kept = Some(r.clone());
                }
                r
            },
            |_, _| Finished::Output(serde_json::Value::Null),
        )?;
        Ok(StandInRun {
            result: kept,
            outcome,
        })
    }

    /// The jail spec for `argv` in `cwd` under the policy, with the
    /// declared secrets in its environment and the caller's cancel token.
    fn spec(&self, argv: Vec<std::ffi::OsString>, cwd: PathBuf) -> Spec {
        let mut spec = Spec::new(argv);
        spec.cwd = cwd;
        spec.fs = self.policy.fs_access();
        // The policy checked its grants in resolved form: the jail follows
        // no link below the project root (one there appeared since).
        spec.links = crate::jail::hold::Links::Checked {
            root: Some(self.root.to_path_buf()),
        };
        spec.protect = self.policy.protected.clone();
        spec.network = self.policy.network;
        spec.limits = self.policy.limits.clone();
        spec.degraded = self.policy.degraded;
        spec.output = Output::Capture;
        spec.env = self
            .secrets
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        spec.cancel = self.cancel.clone();
        spec.gate = self.gate.clone().map(|g| g as Arc<dyn jail::Gate>);
        spec.observe = self.observer.cloned();
        if let Some(pins) = self.pins {
            spec.home_files.push(pins.home_file());
        }
        spec
    }

    /// Runs `spec` and reads its result with `read`. A networked call
    /// gets its own egress proxy; its log goes into the audit line and its
    /// refusals into the warnings.
    fn execute(
        &self,
        spec: Spec,
        program: &std::path::Path,
        read: impl FnOnce(&jail::JailResult, &Redactor) -> Finished,
    ) -> Result<Outcome, Box<Outcome>> {
        self.execute_with(spec, program, run::start, read)
    }

    /// [`Job::execute`] with `start` running the spec (a warm worker or
    /// [`run::start`]).
    fn execute_with(
        &self,
        mut spec: Spec,
        program: &std::path::Path,
        start: impl FnOnce(&Spec) -> Result<jail::JailResult, run::StartError>,
        read: impl FnOnce(&jail::JailResult, &Redactor) -> Finished,
    ) -> Result<Outcome, Box<Outcome>> {
        let gateway = match self.network(&mut spec) {
            Ok(g) => g,
            Err(e) => {
                return Ok(Outcome::failure(
                    &self.tool.name,
                    e.kind(),
                    run::error_chain(&e),
                    json!({}),
                ))
            }
        };
        // The names this call could plant are recorded before it starts:
        // every loader treats them as absent until they are checked gone.
        let watch = match crate::planted::Watch::begin(self.root, &self.policy.absent) {
            Ok(w) => w,
            Err(e) => {
                return Ok(Outcome::failure(
                    &self.tool.name,
                    e.kind(),
                    format!(
                        "the call was not run: the control names it could create cannot be recorded: {}",
                        run::error_chain(&e)
                    ),
                    json!({}),
                ))
            }
        };
        let hand_run = crate::byhand::Snapshot::take(&self.policy.reported);
        let mut started = start(&spec);
        let undone = watch.map(crate::planted::Watch::finish).unwrap_or_default();
        let refused = match (&mut started, self.pins) {
            (Ok(result), Some(pins)) => pins.refused(&mut result.stderr),
            _ => Vec::new(),
        };
        if let (Ok(_), Some(gate)) = (&started, &self.gate) {
            if !gate.asked() {
                // Its code ran without waiting for its intent to be on
                // disk: a path that skips the gate is a bug.
                return Err(Box::new(Outcome::failure(
                    &self.tool.name,
                    ErrorKind::Internal,
                    "the call started without its intent's durability being checked; this is a glovebox bug, please report it",
                    json!({}),
                )));
            }
        }
        let mut outcome = match started {
            _ if !undone.is_empty() => planted_failure(&self.tool.name, self.root, &undone),
            Err(e) => run::jail_error(&self.tool.name, &e, program),
            Ok(result) => run::finish(
                &self.tool.name,
                result,
                &self.policy.limits,
                self.redact,
                self.schemas,
                read,
            ),
        };
        outcome
            .warnings
            .extend(self.policy.surface_warnings.iter().cloned());
        self.report_refused(&mut outcome, &refused);
        if let Some(field) = report_hand_run(self.root, &hand_run, &mut outcome) {
            self.extra.push(field);
        }
        if spec.network && spec.direct_network {
            self.extra.push(("network", "direct".into()));
            if !self.placeholders.is_empty() {
                outcome.warnings.push(
                    "direct network (sandbox.direct_network): no egress proxy, so placeholder secrets reached the network as placeholders only; their hosts got no real value".into(),
                );
            }
        }
        if let (Some(g), Some(o)) = (&gateway, self.observer) {
            for c in g.log().connections().0.iter().filter(|c| c.allowed) {
                o.record_host(&c.host, c.port);
            }
            for u in g.log().secret_uses() {
                o.record_secret(jail::observe::SecretSent {
                    secret: u.secret,
                    host: u.host,
                    port: u.port,
                    delivered: u.swapped.saturating_add(u.injected),
                    refused: u.refused,
                });
            }
        }
        if let Some(g) = gateway {
            for field in run::egress::report(&mut outcome, g.log(), self.redact) {
                self.extra.push(field);
            }
        }
        Ok(outcome)
    }

    /// Records the project files the approved-code check refused to load
    /// (`refused`, [`run::pins`]): they join the tool's footprint, so
    /// `glovebox approve` shows and hashes them and every jail keeps them
    /// read-only; the Outcome says so, and the audit line lists them.
    fn report_refused(&self, outcome: &mut Outcome, refused: &[PathBuf]) {
        if refused.is_empty() {
            return;
        }
        let name = &self.tool.name;
        let shown: Vec<String> = refused
            .iter()
            .map(|p| p.strip_prefix(self.root).unwrap_or(p).display().to_string())
            .collect();
        if let Err(e) = crate::imports_seen::record(self.root, name, refused, None) {
            outcome.warnings.push(format!(
                "the files glovebox refused to load could not be recorded for `glovebox approve {name}`: {}",
                run::error_chain(&e)
            ));
        }
        for s in &shown {
            outcome.warnings.push(format!(
                "glovebox refused to load {s}: the approval of `{name}` does not hold it as it is now; run `glovebox approve {name}` to review and approve it"
            ));
        }
        self.extra
            .push(("pinned_refused", serde_json::json!(shown).to_string()));
    }

    /// Sets up the network of `spec` under the policy
    /// ([`run::egress::network`]).
    fn network(
        &self,
        spec: &mut Spec,
    ) -> Result<Option<Arc<crate::egress::Gateway>>, crate::egress::intercept::InterceptError> {
        run::egress::network(self.policy, self.placeholders, spec)
    }
}

/// Says which files people run by hand changed since `before` (what they
/// were when the call started, [`crate::byhand`]): the Outcome's
/// `run_surfaces_changed` and a warning; returns the audit line's field.
pub(crate) fn report_hand_run(
    root: &Path,
    before: &crate::byhand::Snapshot,
    outcome: &mut Outcome,
) -> Option<(&'static str, String)> {
    if before.is_empty() {
        return None;
    }
    let changed: Vec<String> = before
        .changed()
        .iter()
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    if changed.is_empty() {
        return None;
    }
    outcome.warnings.push(format!(
        "the call changed {}, which people run by hand: review the change before running it",
        changed.join(", ")
    ));
    let field = ("run_surfaces_changed", json!(changed).to_string());
    outcome.run_surfaces_changed = changed;
    Some(field)
}

/// The Outcome of a call that created control names (`undone`): removed,
/// or, where glovebox could not remove one, left with the project
/// tainted.
fn planted_failure(name: &str, root: &Path, undone: &crate::planted::Undone) -> Outcome {
    let shown = |p: &PathBuf| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let removed: Vec<String> = undone.removed.iter().map(shown).collect();
    let left: Vec<String> = undone
        .left
        .iter()
        .map(|(p, why)| format!("{} ({why})", shown(p)))
        .collect();
    let created: Vec<String> = undone
        .removed
        .iter()
        .chain(undone.left.iter().map(|(p, _)| p))
        .map(shown)
        .collect();
    let mut message = format!(
        "the tool created {}, part of the project's control surface (it would define tools, be code another tool runs, or run outside the jail: a git hook, `.envrc`, an editor's tasks)",
        created.join(", ")
    );
    if left.is_empty() {
        message.push_str("; glovebox removed it");
    } else {
        message.push_str(&format!(
            "; glovebox could not remove {}: the project is refused until you remove it and run `glovebox untaint`",
            left.join(", ")
        ));
        if let Some(why) = &undone.unrecorded {
            message.push_str(&format!(
                " (the taint could not be recorded: {why}; the next glovebox command that loads the project tries again)"
            ));
        }
    }
    message.push_str(". A tool whose job is git must name .git in permissions.fs.write (and one that edits a hook, editor or direnv file, that file)");
    Outcome::failure(
        name,
        ErrorKind::PermissionExceedsCeiling,
        message,
        json!({"removed": removed, "left": undone.left.iter().map(|(p, _)| shown(p)).collect::<Vec<_>>(), "tainted": !undone.left.is_empty()}),
    )
}

pub(crate) fn policy_failure(name: &str, e: &PolicyError) -> Box<Outcome> {
    Box::new(Outcome::failure(
        name,
        e.kind(),
        run::error_chain(e),
        json!({}),
    ))
}

fn template_failure(name: &str, e: &TemplateError) -> Box<Outcome> {
    Box::new(Outcome::failure(name, e.kind(), e.to_string(), json!({})))
}
