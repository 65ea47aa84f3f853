//! [`Engine::call`]: the one library call behind every interface.
//!
//! In order, and nothing runs until every step passed: find the tool (its
//! manifest lints clean), check the project config, validate the inputs
//! (defaults applied, every violation with its JSON pointer), require an
//! approval where the manifest asks for one, resolve the declared secrets
//! (a missing required one stops the call), work out the policy (entrypoint
//! and cwd must be reachable under it), expand the templates once, then
//! run the jailed process and turn its result into an [`Outcome`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::audit::intent::{Intent, Refused};
use crate::egress::placeholder::Placeholders;
use crate::jail;
use crate::manifest::config::Config;
use crate::manifest::model::{Exec, Manifest};
use crate::manifest::project::{Origin, Project, ProjectError, Tool};
use crate::policy::Policy;
use crate::run::job::{policy_failure, report_hand_run, Job};
use crate::run::{self, secrets, ErrorKind, Outcome, Redactor};
use crate::template::Bindings;
use crate::validate::Schemas;
use crate::{approval, audit};

pub use crate::caller::{Caller, Cancelled};
pub use stand_in::StandIn;

mod stand_in;

/// `outcome` of a call killed for `why`: the kind and message that say so.
fn cancelled_outcome(outcome: &mut Outcome, why: Cancelled) {
    let Some(e) = outcome.error.as_mut() else {
        return;
    };
    match why {
        Cancelled::ByClient => {
            e.kind = ErrorKind::Cancelled;
            e.message = "the client cancelled the call; all its processes were killed".into();
        }
        Cancelled::ClientGone => {
            e.kind = ErrorKind::Cancelled;
            e.message =
                "the client went away before the call ended; all its processes were killed".into();
        }
        Cancelled::RequestTimeout(t) => {
            e.kind = ErrorKind::Timeout;
            e.message = format!(
                "the request took longer than {} s (glovebox serve --request-timeout); all the call's processes were killed",
                t.as_secs_f64()
            );
            if let Some(d) = e.details.as_object_mut() {
                d.insert("limit".into(), "request_timeout".into());
                d.insert("request_timeout_s".into(), t.as_secs_f64().into());
            }
        }
    }
}

impl Caller {
    /// Who the call's audit lines name.
    fn who(&self) -> audit::Who<'_> {
        audit::Who {
            caller: &self.id,
            agent_id: self.agent_id.as_deref(),
            project_id: self.project_id.as_deref(),
            trace: self.trace.as_deref(),
        }
    }
}

/// Errors opening a project.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The project could not be found or read.
    #[error(transparent)]
    Project(#[from] ProjectError),
}

impl EngineError {
    /// The Outcome's error kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Project(e) => e.kind(),
        }
    }
}

/// A loaded project, ready to run its tools.
#[derive(Debug)]
pub struct Engine {
    project: Project,
    schemas: Mutex<HashMap<String, Arc<Schemas>>>,
    /// Learn mode (`glovebox learn`, on a throw-away copy of the project):
    /// every jailed call records what it touches here.
    observer: Option<Arc<jail::observe::Observer>>,
}

fn project_failure(name: &str, e: &ProjectError) -> Box<Outcome> {
    let details = match e {
        ProjectError::ToolInvalid { diagnostics, .. } => {
            json!({"diagnostics": diagnostics.iter().map(|d| d.to_string()).collect::<Vec<_>>()})
        }
        _ => json!({}),
    };
    Box::new(Outcome::failure(
        name,
        e.kind(),
        run::error_chain(e),
        details,
    ))
}

impl Engine {
    /// Opens the project at `root` (or the nearest one above the working
    /// directory).
    pub fn open(root: Option<&Path>) -> Result<Engine, EngineError> {
        Ok(Engine::new(Project::discover(root)?))
    }

    /// Opens the project with an explicit agentcli `tools.json`
    /// (`--tools-json`; see [`Project::discover_with`]).
    pub fn open_with(
        root: Option<&Path>,
        tools_json: Option<&Path>,
    ) -> Result<Engine, EngineError> {
        Ok(Engine::new(Project::discover_with(root, tools_json)?))
    }

    /// Opens the project at `root` (or the nearest one above the working
    /// directory) with only the tool `name` loaded and linted (see
    /// [`Project::load_one`]): for one-shot front-ends (`glovebox run`,
    /// `explain`, `approve`) that call a single tool.
    pub fn open_tool(
        root: Option<&Path>,
        tools_json: Option<&Path>,
        name: &str,
    ) -> Result<Engine, EngineError> {
        if tools_json.is_some() {
            return Engine::open_with(root, tools_json);
        }
        match crate::manifest::discover::find_root(root) {
            // A tool of an MCP server loads (and starts) that server only.
            Ok(root) => Ok(Engine::new(Project::load_one(
                &root,
                crate::mcpwrap::directory_of(&root, name),
            )?)),
            // No .glee/ above: maybe a tools.json drop-in; the full
            // discovery decides (and reports).
            Err(_) => Engine::open_with(root, None),
        }
    }

    /// An engine over an already loaded project, with the built-ins its
    /// config enables ([`crate::builtin::add_to`]).
    pub fn new(project: Project) -> Engine {
        Engine {
            project: crate::mcpwrap::add_to(crate::builtin::add_to(project)),
            schemas: Mutex::new(HashMap::new()),
            observer: None,
        }
    }

    /// Learn mode: every jailed call of this engine records what it
    /// touches in `observer`, and is refused where the jail cannot
    /// observe it ([`crate::learn`]).
    pub fn observe(&mut self, observer: Arc<jail::observe::Observer>) {
        self.observer = Some(observer);
    }

    /// The project.
    pub fn project(&self) -> &Project {
        &self.project
    }

    /// Whether `name` is a wrapped MCP server's tool, whose server reports
    /// its own progress ([`Caller::progress`]).
    pub fn relays_progress(&self, name: &str) -> bool {
        self.project.tool(name).is_ok_and(|t| {
            matches!(&t.manifest.exec, Exec::Mcp(m) if m.wrapped.as_ref().is_some_and(|w| !w.tool.is_empty()))
        })
    }

    /// The tool named `name`, if its manifest is valid.
    pub fn tool(&self, name: &str) -> Result<&Tool, ProjectError> {
        self.project.tool(name)
    }

    /// The tool (its manifest lints clean) and the project config (valid),
    /// or the Outcome that says which is not.
    fn tool_and_config(&self, name: &str) -> Result<(&Tool, &Config), Box<Outcome>> {
        let tool = self.project.tool(name).map_err(|e| {
            // `SERVER__TOOL` of an MCP server that did not start: say why.
            crate::mcpwrap::unlisted(&self.project, name)
                .map(Box::new)
                .unwrap_or_else(|| project_failure(name, &e))
        })?;
        let config = self
            .project
            .config()
            .map_err(|e| project_failure(name, &e))?;
        Ok((tool, config))
    }

    /// Refuses the call when the project is tainted now, or when what
    /// `tool` is defined by or runs is a name a call still running could
    /// have planted ([`crate::planted`]): checked at each call, so that a
    /// served project loaded before either happened refuses it too. Also
    /// refused: a call whose first code is not there
    /// ([`crate::footprint::Footprint::absent_runs`]): it could not work,
    /// and a second call with a write grant could create it between this
    /// check and the exec, where its clean-up comes too late. The
    /// footprint is taken before the records are read: a name it finds
    /// present was, if a running call planted it, recorded before it
    /// appeared, so the records read next list it.
    fn not_planted(&self, tool: &Tool) -> Result<(), Box<Outcome>> {
        let fail = |kind, message: String| {
            Box::new(Outcome::failure(&tool.name, kind, message, json!({})))
        };
        let root = &self.project.root;
        let footprint = (tool.origin != Origin::Builtin).then(|| crate::footprint::of(root, tool));
        let hidden =
            crate::planted::hidden(root).map_err(|e| fail(e.kind(), run::error_chain(&e)))?;
        let Some(footprint) = footprint else {
            return Ok(());
        };
        let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        if let Some(p) = footprint.absent_runs.first() {
            return Err(fail(
                ErrorKind::ManifestInvalid,
                format!(
                    "tool `{}` runs {}, which does not exist; create it, then call the tool again (a file that appears while a call starts is never run)",
                    tool.name,
                    shown(p)
                ),
            ));
        }
        if hidden.is_empty() {
            return Ok(());
        }
        let planted = std::iter::once(&tool.file)
            .chain(&footprint.paths)
            .chain(&footprint.missing)
            .find(|p| crate::planted::is_hidden(p, &hidden));
        match planted {
            Some(p) => Err(fail(
                ErrorKind::ManifestInvalid,
                format!(
                    "tool `{}` is defined by or runs {}, which a call still running may have created; it is not used before that call has ended and glovebox has checked it: retry then",
                    tool.name,
                    shown(p)
                ),
            )),
            None => Ok(()),
        }
    }

    /// The effective policy of a tool.
    pub fn policy(&self, name: &str) -> Result<Policy, Box<Outcome>> {
        let (tool, config) = self.tool_and_config(name)?;
        Policy::for_tool(&self.project.root, &tool.manifest, config)
            .map(|p| p.with_surface(&self.project))
            .map_err(|e| policy_failure(name, &e))
    }

    fn schemas(&self, m: &Manifest) -> Result<Arc<Schemas>, Box<Outcome>> {
        let mut cache = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cache.get(&m.name) {
            return Ok(s.clone());
        }
        let s = Schemas::compile(&m.inputs.schema, m.outputs.schema.as_ref())
            .map_err(|e| Outcome::failure(&m.name, e.kind(), e.to_string(), json!({})))?;
        let s = Arc::new(s);
        cache.insert(m.name.clone(), s.clone());
        Ok(s)
    }

    /// Calls tool `name` with `params`. Every failure is an [`Outcome`]
    /// too; nothing here panics or returns early without one.
    ///
    /// A name outside the grammar ([`crate::manifest::name`]) names no
    /// tool and goes no further. A call that gets as far as starting
    /// something (a process, a request, a built-in) first writes its
    /// intent to the audit log; if that fails the call is refused with
    /// `audit_unavailable` (unless the config says `audit: best_effort`).
    /// Its result is logged after, with the same call id.
    pub fn call(&self, name: &str, params: Value, caller: &Caller) -> Outcome {
        let started = Instant::now();
        // Found once: its secrets redact the logged parameters, and an
        // agentcli tool's passed-through names go on its result line.
        let found = self.project.tool(name).ok();
        if !crate::manifest::name::is_valid(name) {
            let shown = crate::manifest::name::shown(name);
            let mut outcome = Outcome::failure(
                &shown,
                ErrorKind::ToolNotFound,
                format!(
                    "`{shown}` is not a tool name (names match {}); list the tools to see theirs",
                    crate::manifest::name::GRAMMAR
                ),
                json!({}),
            );
            // Logged through the audit log's one sanitiser, once.
            self.finish(
                name,
                json!(null),
                caller,
                &mut outcome,
                Record {
                    tool: found,
                    ..Record::default()
                },
                started,
            );
            return outcome;
        }
        let logged_params = self.redacted_params(found, &params, caller);
        let call_id = new_call_id();
        let intent = Intent::new(
            &self.project.root,
            name,
            &logged_params,
            caller.who(),
            caller.prints_to_stderr,
            &call_id,
        );
        let mut outcome = match self.call_inner(name, params, caller, &intent) {
            Ok(o) => o,
            Err(o) => *o,
        };
        outcome.warnings.extend(intent.take_warnings());
        let was_cancelled = outcome
            .error
            .as_ref()
            .is_some_and(|e| e.details["cancelled"] == true);
        if let (true, Some(why)) = (was_cancelled, caller.cancelled.get()) {
            cancelled_outcome(&mut outcome, *why);
        }
        let id = intent.written().then_some(call_id.as_str());
        let record = Record {
            tool: found,
            call_id: id,
            extra: intent.extra().take(),
            log: intent.opened_log(),
        };
        self.finish(name, logged_params, caller, &mut outcome, record, started);
        outcome
    }

    /// Times `outcome` and logs its result (a failure to log is a warning
    /// on the Outcome and a line on stderr: the call has happened).
    fn finish(
        &self,
        name: &str,
        params: Value,
        caller: &Caller,
        outcome: &mut Outcome,
        record: Record<'_>,
        started: Instant,
    ) {
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        if let Err(e) = self.log_call(name, params, caller, outcome, record) {
            if outcome.kind() == Some(ErrorKind::AuditUnavailable) {
                // The Outcome already says the call has no record.
                return;
            }
            let message = if e.written() {
                format!(
                    "the call was written to the audit log but not made durable: {}",
                    run::error_chain(&e)
                )
            } else {
                format!(
                    "the call was not written to the audit log: {}",
                    run::error_chain(&e)
                )
            };
            if !caller.prints_to_stderr {
                eprintln!("glovebox: {}: {message}", audit::client_label(name));
            }
            outcome.warnings.push(message);
        }
    }

    /// Whether `name` has a persisted approval matching its current content.
    pub fn is_approved(&self, name: &str) -> bool {
        self.approval_status(name) == approval::Status::Approved
    }

    /// Whether `name`'s approval holds, and if not, what voided it.
    pub fn approval_status(&self, name: &str) -> approval::Status {
        let Ok(tool) = self.project.tool(name) else {
            return approval::Status::Missing;
        };
        self.approval_of(tool)
    }

    /// Whether `tool`'s approval holds, and if not, what voided it.
    fn approval_of(&self, tool: &Tool) -> approval::Status {
        approval::Store::open(&self.project.root)
            .and_then(|s| s.status(&self.project.root, tool))
            .unwrap_or(approval::Status::Missing)
    }

    /// Whether `tool`'s approval holds for `now`, its fingerprint.
    fn approval_against(&self, tool: &Tool, now: &approval::Fingerprint) -> approval::Status {
        approval::Store::open(&self.project.root)
            .and_then(|s| s.status_against(&self.project.root, tool, now))
            .unwrap_or(approval::Status::Missing)
    }

    /// What a call of `tool`, which requires approval, may load: its
    /// fingerprint now (what its approval is checked against) and the
    /// pins made of it ([`run::pins`]).
    fn pins(&self, tool: &Tool) -> Result<(approval::Fingerprint, run::pins::Pins), Box<Outcome>> {
        let root = &self.project.root;
        let fp = crate::footprint::of(root, tool);
        let now = approval::fingerprint_of(root, tool, &fp).map_err(|e| {
            Box::new(Outcome::failure(
                &tool.name,
                e.kind(),
                format!(
                    "the files the approval covers cannot be read: {}",
                    run::error_chain(&e)
                ),
                json!({}),
            ))
        })?;
        let pins = run::pins::Pins::new(root, &tool.name, &now, fp.venvs);
        Ok((now, pins))
    }

    /// The call's parameters as the audit log keeps them: every declared
    /// secret value redacted, and every string longer than
    /// [`LOGGED_STRING_MAX`] bytes (a file's content for `write_file`, a
    /// large body) replaced by its length and SHA-256, so the log stays
    /// small and still identifies what was sent.
    fn redacted_params(&self, tool: Option<&Tool>, params: &Value, caller: &Caller) -> Value {
        let redacted = match tool {
            Some(tool) => {
                let values = secrets::available(&tool.manifest.permissions, &caller.secrets);
                Redactor::new(&values).value(params.clone())
            }
            None => params.clone(),
        };
        abbreviate(redacted)
    }

    /// For an agentcli tool, the names (never the values) of the
    /// `envPassthrough` variables the caller has set, as a JSON array.
    fn env_keys(&self, tool: Option<&Tool>, caller: &Caller) -> Option<String> {
        let tool = tool?;
        if !matches!(tool.manifest.exec, Exec::AgentCli(_)) {
            return None;
        }
        let names: Vec<String> = secrets::available(&tool.manifest.permissions, &caller.secrets)
            .into_keys()
            .collect();
        serde_json::to_string(&names).ok()
    }

    /// Logs a call that was refused before it was started (no slot free,
    /// its client gone or the server stopping while it waited): one
    /// result line with its parameters (redacted) and `outcome`'s kind,
    /// so every call a client made is in the log.
    pub fn log_not_started(
        &self,
        name: &str,
        params: &Value,
        caller: &Caller,
        outcome: &Outcome,
    ) -> Result<(), audit::AuditError> {
        let tool = self.project.tool(name).ok();
        let params = self.redacted_params(tool, params, caller);
        self.log_call(
            name,
            params,
            caller,
            outcome,
            Record {
                tool,
                call_id: None,
                extra: Vec::new(),
                log: None,
            },
        )
    }

    fn log_call(
        &self,
        name: &str,
        params: Value,
        caller: &Caller,
        outcome: &Outcome,
        record: Record<'_>,
    ) -> Result<(), audit::AuditError> {
        let Record {
            tool,
            call_id,
            extra,
            log,
        } = record;
        let log = match log {
            Some(log) => log,
            None => audit::Log::for_project(&self.project.root)?,
        };
        let params = params.to_string();
        let event = match outcome.kind() {
            Some(ErrorKind::ApprovalRequired) => {
                audit::Event::call_unapproved(name, call_id, params, caller.who())
            }
            kind => audit::Event::call_result(
                audit::CallResult {
                    name,
                    call: call_id,
                    params,
                    ok: outcome.ok,
                    kind,
                    duration_ms: outcome.duration_ms,
                    env_keys: self.env_keys(tool, caller),
                    extra,
                },
                caller.who(),
            ),
        };
        log.append(&event)
    }

    fn call_inner(
        &self,
        name: &str,
        params: Value,
        caller: &Caller,
        intent: &Intent<'_>,
    ) -> Result<Outcome, Box<Outcome>> {
        let (tool, config) = self.tool_and_config(name)?;
        self.not_planted(tool)?;
        let m = &tool.manifest;
        let schemas = self.schemas(m)?;

        let params = if params.is_null() {
            Value::Object(Map::new())
        } else {
            params
        };
        // An agentcli tool gets the arguments as the caller sent them.
        let stdin = match &m.exec {
            Exec::AgentCli(_) => serde_json::to_vec(&params).ok(),
            _ => None,
        };
        let params = schemas.check_input(params).map_err(|violations| {
            let summary = violations
                .iter()
                .map(|v| {
                    format!(
                        "{}: {}",
                        if v.pointer.is_empty() {
                            "(root)"
                        } else {
                            &v.pointer
                        },
                        v.message
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            Box::new(Outcome::failure(
                name,
                ErrorKind::InputInvalid,
                format!("the parameters do not match inputs.schema: {summary}"),
                json!({"violations": violations}),
            ))
        })?;
        let Value::Object(params) = params else {
            return Err(Box::new(Outcome::failure(
                name,
                ErrorKind::InputInvalid,
                "the parameters must be a JSON object",
                json!({}),
            )));
        };

        if tool.origin == Origin::Builtin {
            // Only a write needs the control surface (to refuse it).
            let surface = if name == crate::builtin::write_file::NAME {
                crate::surface::for_writes(&self.project)
            } else {
                Vec::new()
            };
            intent.record(config).map_err(|r| refused(name, r))?;
            let ctx = crate::builtin::Context {
                root: &self.project.root,
                config,
                caller,
                surface: &surface,
            };
            // A write may change a file people run by hand: said, as for a
            // jailed call.
            let hand_run = match surface.is_empty() {
                true => crate::byhand::Snapshot::default(),
                false => crate::byhand::Snapshot::take(
                    &crate::surface::RUN_BY_HAND
                        .iter()
                        .map(|n| self.project.root.join(n))
                        .collect::<Vec<_>>(),
                ),
            };
            let mut outcome = crate::builtin::call(name, &params, &ctx);
            let root = &self.project.root;
            if let Some(field) = report_hand_run(root, &hand_run, &mut outcome) {
                intent.extra().push(field);
            }
            return Ok(outcome);
        }

        // A tool that requires approval runs only the code its approval
        // covers (approved for this one call: the code as it is now),
        // checked when the jail's Python loads it (`run::pins`).
        let pinned = match m.approval.required {
            true => Some(self.pins(tool)?),
            false => None,
        };
        let status = match &pinned {
            Some((now, _)) if !caller.approved => self.approval_against(tool, now),
            _ => approval::Status::Approved,
        };
        if status != approval::Status::Approved {
            let voided = match &status {
                approval::Status::Changed(what) => {
                    format!("; its approval was voided: {}", what.join("; "))
                }
                _ => String::new(),
            };
            return Err(Box::new(Outcome::failure(
                name,
                ErrorKind::ApprovalRequired,
                format!(
                    "tool `{name}` requires approval ({}){voided}; approve it with `glovebox approve {name}`{} (approvals of {})",
                    m.approval.reason.as_deref().unwrap_or("no reason given"),
                    if caller.approves_once {
                        format!(", or this one call with `glovebox run {name} --yes`")
                    } else {
                        String::new()
                    },
                    crate::state::describe(),
                ),
                json!({
                    "reason": m.approval.reason,
                    "approve_with": format!("glovebox approve {name}"),
                    "changed": match &status {
                        approval::Status::Changed(what) => json!(what),
                        _ => json!([]),
                    },
                    "state_dir": crate::state::dir().ok(),
                }),
            )));
        }

        self.within_ceiling(tool, config)?;

        let secret_values =
            secrets::resolve(&m.permissions, &caller.secrets).map_err(|missing| {
                Outcome::failure(
                    name,
                    ErrorKind::SecretMissing,
                    format!(
                        "required secret{} not set in the environment: {}",
                        if missing.len() == 1 { " is" } else { "s are" },
                        missing.join(", ")
                    ),
                    json!({"missing": missing}),
                )
            })?;
        let redact = Redactor::new(&secret_values);
        // Code never sees a placeholder secret's value: command, python
        // and agent-cli tools get its placeholder (environment and
        // templates alike); http tools run no code and use the value.
        let placeholders = if matches!(m.exec, Exec::Http(_)) {
            Placeholders::default()
        } else {
            secrets::placeholders(&m.permissions, &secret_values).map_err(|e| {
                Box::new(Outcome::failure(
                    name,
                    e.kind(),
                    run::error_chain(&e),
                    json!({}),
                ))
            })?
        };
        let jail_values = secrets::jail_values(&secret_values, &placeholders);

        // Learn mode runs on a throw-away copy of the project, loaded once
        // for the learning calls: the copy's control surface is not kept
        // read-only there (without a mount tree that would keep the tool
        // from creating what it creates in the root, and nothing of the
        // copy outlives the learning run).
        let policy = Policy::for_tool(&self.project.root, m, config)
            .map(|p| match self.observer {
                Some(_) => p,
                None => p.with_surface(&self.project),
            })
            .map_err(|e| policy_failure(name, &e))?;
        make_missing_reads(&policy, &self.project.root);
        let inputs: Vec<String> = m.input_names().map(String::from).collect();
        let bindings = Bindings {
            params: &params,
            inputs: &inputs,
            secrets: &jail_values,
        };
        if matches!(m.exec, Exec::Http(_) | Exec::Mcp(_)) {
            // glovebox itself makes the request (to the web, or to an MCP
            // server already running in its jail): nothing to overlap.
            intent.record(config).map_err(|r| refused(name, r))?;
        } else {
            // The sync overlaps the jail's preparation; the jail (or the
            // warm worker) waits for it right before the code starts.
            intent.begin(config).map_err(|r| refused(name, r))?;
        }
        let job = Job {
            tool,
            root: &self.project.root,
            policy: &policy,
            secrets: &jail_values,
            placeholders: &placeholders,
            redact: &redact,
            schemas: &schemas,
            cancel: caller.cancel.clone(),
            extra: intent.extra(),
            gate: intent.gate(),
            observer: self.observer.as_ref(),
            pins: pinned.as_ref().map(|(_, p)| p),
        };
        if let Exec::Mcp(_) = &m.exec {
            let call = crate::mcpwrap::Call {
                project: &self.project,
                config,
                tool,
                params: &params,
                secrets: &caller.secrets,
                approved: caller.approved,
                cancel: caller.cancel.as_ref(),
                relay: caller.progress.as_ref(),
                redact: &redact,
            };
            return Ok(crate::mcpwrap::call(&call, &mut |k, v| {
                intent.extra().push((k, v))
            }));
        }
        let result = match &m.exec {
            Exec::Command(exec) => job.run_command(exec, &bindings),
            Exec::Python(exec) => job.run_python(exec, &bindings),
            Exec::AgentCli(exec) => job.run_agentcli(exec, stdin.unwrap_or_default()),
            Exec::Mcp(_) => Err(Box::new(Outcome::failure(
                name,
                ErrorKind::Internal,
                "an MCP tool reached the jail's runner",
                json!({}),
            ))),
            Exec::Http(exec) => Ok(run::http::run(
                &self.project.root,
                m,
                exec,
                config,
                &bindings,
                &redact,
                &schemas,
            )),
        };
        match intent.settle() {
            Ok(()) => result,
            Err(r) => Err(refused(name, r)),
        }
    }

    /// An agent-created tool stays under the ceiling at every call, its
    /// paths resolved as they are now (a link made after creation cannot
    /// widen it).
    fn within_ceiling(&self, tool: &Tool, config: &Config) -> Result<(), Box<Outcome>> {
        let root = &self.project.root;
        if tool.origin != Origin::Dir
            || !crate::create::created_tools(root).contains_key(&tool.name)
        {
            return Ok(());
        }
        let ceiling = config
            .security
            .max_permissions
            .clone()
            .unwrap_or_else(crate::manifest::ceiling::default_ceiling);
        let excess = crate::manifest::ceiling::excess(root, &tool.manifest, &ceiling);
        if excess.is_empty() {
            return Ok(());
        }
        Err(Box::new(Outcome::failure(
            &tool.name,
            ErrorKind::PermissionExceedsCeiling,
            format!(
                "agent-created tool `{}` now reaches beyond security.max_permissions: {}; remove the symlink or recreate the tool",
                tool.name,
                excess.join("; ")
            ),
            json!({"excess": excess}),
        )))
    }
}

/// A fresh call id: 16 random hex digits (from the kernel's random pool;
/// the time and the process id when that cannot be read).
fn new_call_id() -> String {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = ((t as u64) ^ (u64::from(std::process::id()) << 40)).to_be_bytes();
    }
    hex::encode(b)
}

/// What the result's audit line carries besides the Outcome: the tool,
/// the call's id (when its intent was written) and the run's extra fields.
#[derive(Debug, Default)]
struct Record<'a> {
    /// The tool called, found once at the call's start (`None`: no such
    /// tool).
    tool: Option<&'a Tool>,
    call_id: Option<&'a str>,
    extra: Vec<(&'static str, String)>,
    /// The log the intent was written to, its directory opened then
    /// ([`audit::Log::pinned`]).
    log: Option<audit::Log>,
}

/// The Outcome of a call refused because its intent cannot be recorded.
fn refused(name: &str, r: Refused) -> Box<Outcome> {
    Box::new(Outcome::failure(name, r.kind(), r.message, r.details))
}

/// Longest string parameter the audit log records verbatim.
pub const LOGGED_STRING_MAX: usize = 1024;

/// `value` with every string longer than [`LOGGED_STRING_MAX`] bytes
/// replaced by `"[N bytes, sha256 HEX]"`.
fn abbreviate(value: Value) -> Value {
    match value {
        Value::String(s) if s.len() > LOGGED_STRING_MAX => {
            use sha2::{Digest, Sha256};
            Value::String(format!(
                "[{} bytes, sha256 {}]",
                s.len(),
                hex::encode(Sha256::digest(s.as_bytes()))
            ))
        }
        Value::Array(items) => Value::Array(items.into_iter().map(abbreviate).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, abbreviate(v))).collect())
        }
        other => other,
    }
}

/// Makes each read grant of `policy` that does not exist yet but that one
/// of its write grants holds (a build's `target/` on a fresh checkout),
/// never at a protected or control name: the call could make it itself,
/// and without it the read grant — which carries the execute a write
/// grant does not — grants nothing (`jail::hold::missing_under`). Made
/// beneath the write grant's descriptor, following no link below the
/// root, as the jail holds the grant; one that cannot be made is left to
/// the call (its grant then grants nothing, as before).
fn make_missing_reads(policy: &Policy, root: &Path) {
    let keep: Vec<std::path::PathBuf> = policy
        .protected
        .iter()
        .chain(&policy.absent)
        .cloned()
        .collect();
    let links = jail::hold::Links::Checked {
        root: Some(root.to_path_buf()),
    };
    for (w, rel) in jail::hold::missing_under(&policy.read, &policy.write, &keep) {
        let _ = jail::hold::make_beneath(w, &rel, &links);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_logged_as_length_and_digest() {
        let long = "x".repeat(LOGGED_STRING_MAX + 1);
        let logged = abbreviate(json!({"path": "a.txt", "content": long, "n": [long, 3]}));
        assert_eq!(logged["path"], "a.txt");
        let content = logged["content"].as_str().unwrap();
        assert!(content.starts_with("[1025 bytes, sha256 "), "{content}");
        assert_eq!(logged["n"][0], logged["content"]);
        assert_eq!(logged["n"][1], 3);
        let short = "y".repeat(LOGGED_STRING_MAX);
        assert_eq!(abbreviate(json!(short.clone())), json!(short));
    }
}
