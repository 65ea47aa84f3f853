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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use crate::egress::placeholder::Placeholders;
use crate::jail::{self, Output, Spec, Stdin};
use crate::manifest::config::{AuditMode, Config};
use crate::manifest::discover::resolve;
use crate::manifest::model::{AgentCliExec, CommandExec, Exec, Manifest, PythonExec};
use crate::manifest::project::{Origin, Project, ProjectError, Tool};
use crate::policy::{Policy, PolicyError};
use crate::run::{self, command, python, secrets, ErrorKind, Finished, Outcome, Redactor};
use crate::template::{Bindings, TemplateError};
use crate::validate::Schemas;
use crate::{approval, audit};

pub use crate::caller::{Caller, Cancelled};

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
    /// served project loaded before either happened refuses it too.
    fn not_planted(&self, tool: &Tool) -> Result<(), Box<Outcome>> {
        let fail = |kind, message: String| {
            Box::new(Outcome::failure(&tool.name, kind, message, json!({})))
        };
        let hidden = crate::planted::hidden(&self.project.root)
            .map_err(|e| fail(e.kind(), run::error_chain(&e)))?;
        if hidden.is_empty() || tool.origin == Origin::Builtin {
            return Ok(());
        }
        let footprint = crate::footprint::of(&self.project.root, tool);
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
                    p.strip_prefix(&self.project.root).unwrap_or(p).display()
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
                Record::default(),
                started,
            );
            return outcome;
        }
        let logged_params = self.redacted_params(name, &params, caller);
        let call_id = new_call_id();
        let intent = Intent {
            engine: self,
            name,
            params: &logged_params,
            caller,
            id: &call_id,
            written: std::cell::Cell::new(false),
            log: std::cell::OnceCell::new(),
            warnings: std::cell::RefCell::new(Vec::new()),
            extra: AuditExtra::default(),
            gate: std::cell::RefCell::new(None),
        };
        let mut outcome = match self.call_inner(name, params, caller, &intent) {
            Ok(o) => o,
            Err(o) => *o,
        };
        outcome.warnings.extend(intent.warnings.take());
        let was_cancelled = outcome
            .error
            .as_ref()
            .is_some_and(|e| e.details["cancelled"] == true);
        if let (true, Some(why)) = (was_cancelled, caller.cancelled.get()) {
            cancelled_outcome(&mut outcome, *why);
        }
        let id = intent.written.get().then_some(call_id.as_str());
        let record = Record {
            call_id: id,
            extra: intent.extra.take(),
            log: intent.log.get().cloned(),
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
        approval::Store::open(&self.project.root)
            .and_then(|s| s.status(&self.project.root, tool))
            .unwrap_or(approval::Status::Missing)
    }

    /// The call's parameters as the audit log keeps them: every declared
    /// secret value redacted, and every string longer than
    /// [`LOGGED_STRING_MAX`] bytes (a file's content for `write_file`, a
    /// large body) replaced by its length and SHA-256, so the log stays
    /// small and still identifies what was sent.
    fn redacted_params(&self, name: &str, params: &Value, caller: &Caller) -> Value {
        let redacted = match self.project.tool(name) {
            Ok(tool) => {
                let values = secrets::available(&tool.manifest.permissions, &caller.secrets);
                Redactor::new(&values).value(params.clone())
            }
            Err(_) => params.clone(),
        };
        abbreviate(redacted)
    }

    /// For an agentcli tool, the names (never the values) of the
    /// `envPassthrough` variables the caller has set, as a JSON array.
    fn env_keys(&self, name: &str, caller: &Caller) -> Option<String> {
        let tool = self.project.tool(name).ok()?;
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
        let params = self.redacted_params(name, params, caller);
        self.log_call(
            name,
            params,
            caller,
            outcome,
            Record {
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
                    env_keys: self.env_keys(name, caller),
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
            intent.record(config)?;
            let ctx = crate::builtin::Context {
                root: &self.project.root,
                config,
                caller,
                surface: &surface,
            };
            return Ok(crate::builtin::call(name, &params, &ctx));
        }

        let status = if m.approval.required && !caller.approved {
            self.approval_status(name)
        } else {
            approval::Status::Approved
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
                    match e {
                        secrets::SecretError::Hosts { .. } => ErrorKind::ManifestInvalid,
                        secrets::SecretError::Placeholder(_) => ErrorKind::SecretMissing,
                    },
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
        let inputs: Vec<String> = m.input_names().map(String::from).collect();
        let bindings = Bindings {
            params: &params,
            inputs: &inputs,
            secrets: &jail_values,
        };
        if matches!(m.exec, Exec::Http(_) | Exec::Mcp(_)) {
            // glovebox itself makes the request (to the web, or to an MCP
            // server already running in its jail): nothing to overlap.
            intent.record(config)?;
        } else {
            // The sync overlaps the jail's preparation; the jail (or the
            // warm worker) waits for it right before the code starts.
            intent.begin(config)?;
        }
        let gate = intent.gate.borrow().clone();
        let job = Job {
            name,
            root: &self.project.root,
            policy: &policy,
            secrets: &jail_values,
            placeholders: &placeholders,
            redact: &redact,
            schemas: &schemas,
            caller,
            extra: &intent.extra,
            gate,
            observer: self.observer.as_ref(),
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
                intent.extra.push((k, v))
            }));
        }
        let result = match &m.exec {
            Exec::Command(exec) => self.run_command(exec, &job, &bindings),
            Exec::Python(exec) => self.run_python(exec, &job, &bindings),
            Exec::AgentCli(exec) => self.run_agentcli(exec, &job, stdin.unwrap_or_default()),
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
        intent.settle(result)
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

    /// The working directory, resolved. A tool starts in it even when its
    /// permissions do not let it read it (`fs.read: []` and the default
    /// `cwd: .`): the jail enters it before Landlock applies, and the
    /// kernel then refuses to list or read it, so a tool that needs no
    /// files runs without being granted any. A cwd that is not a
    /// directory is refused, saying so (never as a missing grant).
    ///
    /// Its symlinks are resolved, like the grants': the jail holds the
    /// real paths it was granted, not the links that led to them.
    fn cwd(&self, job: &Job<'_>, rel: &str) -> Result<PathBuf, Box<Outcome>> {
        let root = &self.project.root;
        let cwd = crate::footprint::resolved_under(root, &resolve(root, rel));
        if cwd.is_dir() {
            return Ok(cwd);
        }
        Err(policy_failure(
            job.name,
            &crate::policy::PolicyError::NoSuchCwd { path: cwd },
        ))
    }

    fn run_command(
        &self,
        exec: &CommandExec,
        job: &Job<'_>,
        bindings: &Bindings<'_>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = job.name;
        let root = &self.project.root;
        let program = command::program(root, exec);
        if program.is_absolute() {
            job.policy
                .require_readable("entrypoint", &program)
                .map_err(|e| policy_failure(name, &e))?;
        }
        let cwd = self.cwd(job, &exec.cwd)?;
        let argv = command::argv(root, exec, bindings).map_err(|e| template_failure(name, &e))?;
        let stdout = &exec.stdout;
        let allowed = exec.exit_codes_ok.clone();
        let mut spec = job.spec(argv, cwd);
        run::safepath::apply(&mut spec, false);
        job.execute(spec, &program, |r, redact| match r.status {
            jail::Status::Exited(c) if allowed.contains(&c) => {
                run::select::read(name, &r.stdout, stdout, redact)
            }
            status => Finished::Failed(run::exit_failure(
                name,
                status,
                &redact.text(&String::from_utf8_lossy(&r.stderr)),
                &allowed,
            )),
        })
    }

    fn run_agentcli(
        &self,
        exec: &AgentCliExec,
        job: &Job<'_>,
        stdin: Vec<u8>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = job.name;
        let Some(program) = exec.command.first().map(PathBuf::from) else {
            return Err(Box::new(Outcome::failure(
                name,
                ErrorKind::ManifestInvalid,
                "the tool's command is empty",
                json!({}),
            )));
        };
        if program.is_absolute() {
            job.policy
                .require_readable("command[0]", &program)
                .map_err(|e| policy_failure(name, &e))?;
        }
        let cwd = self.cwd(job, &exec.dir)?;
        let argv = exec.command.iter().map(Into::into).collect();
        let mut spec = job.spec(argv, cwd);
        run::safepath::apply(&mut spec, false);
        spec.stdin = Stdin::Bytes(stdin);
        job.execute(spec, &program, |r, redact| {
            run::agentcli::read(name, r, redact)
        })
    }

    fn run_python(
        &self,
        exec: &PythonExec,
        job: &Job<'_>,
        bindings: &Bindings<'_>,
    ) -> Result<Outcome, Box<Outcome>> {
        let name = job.name;
        let interpreter = python::Interpreter::locate(&self.project.root, exec)
            .map_err(|e| policy_failure(name, &PolicyError::Python(e)))?;
        let cwd = self.cwd(job, &exec.cwd)?;
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
        let mut spec = job.spec(interpreter.argv(), cwd.clone());
        run::safepath::apply(&mut spec, true);
        spec.stdin = Stdin::Bytes(python::request(exec, &cwd, chain.as_deref(), args, kwargs));
        let warm = self.warm_plan(name, exec, &spec, &cwd, chain.as_deref());
        let returns = exec.returns;
        job.execute_with(
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
}

impl Engine {
    /// The warm worker a python call may run in (`serve` and `mcp` only,
    /// see [`run::warm`]): keyed by the tool's approval fingerprint, so
    /// an edited manifest, module or venv never reaches an old worker.
    fn warm_plan(
        &self,
        name: &str,
        exec: &PythonExec,
        spec: &Spec,
        cwd: &std::path::Path,
        chain: Option<&[python::Found]>,
    ) -> Option<(&'static run::warm::Pool, run::warm::Plan)> {
        let pool = run::warm::pool().filter(|_| exec.warm)?;
        if !run::warm::eligible(spec) {
            return None;
        }
        let tool = self.tool(name).ok()?;
        let fingerprint = crate::approval::fingerprint_by_stamp(&self.project.root, tool).ok()?;
        let watch = crate::footprint::of(&self.project.root, tool).files;
        let init = python::init_request(exec, cwd, chain, run::warm::IDLE.as_secs());
        let seen = run::warm::Seen {
            root: self.project.root.clone(),
            tool: name.to_string(),
            venv: exec.venv.as_ref().map(|v| resolve(&self.project.root, v)),
        };
        let plan =
            run::warm::Plan::new(spec, &format!("{fingerprint:?}"), &init, watch)?.recording(seen);
        Some((pool, plan))
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

/// What the result's audit line carries besides the Outcome: the call's
/// id (when its intent was written) and the run's extra fields.
#[derive(Debug, Default)]
struct Record<'a> {
    call_id: Option<&'a str>,
    extra: Vec<(&'static str, String)>,
    /// The log the intent was written to, its directory opened then
    /// ([`audit::Log::pinned`]).
    log: Option<audit::Log>,
}

/// The intent of one call: written to the audit log right before the
/// call starts anything ([`Intent::record`]).
struct Intent<'a> {
    engine: &'a Engine,
    name: &'a str,
    params: &'a Value,
    caller: &'a Caller,
    id: &'a str,
    written: std::cell::Cell<bool>,
    /// The log the intent went to, kept for the result line.
    log: std::cell::OnceCell<audit::Log>,
    warnings: std::cell::RefCell<Vec<String>>,
    /// Fields the run adds to the result's audit line.
    extra: AuditExtra,
    /// The gate of an intent whose sync runs in the background
    /// ([`Intent::begin`]).
    gate: std::cell::RefCell<Option<Arc<IntentGate>>>,
}

impl Intent<'_> {
    /// The project's audit log, its directory opened at the first use
    /// (the intent), so that the result line reaches it whatever the call
    /// did to the directories above it.
    fn log(&self) -> Result<audit::Log, audit::AuditError> {
        if let Some(log) = self.log.get() {
            return Ok(log.clone());
        }
        let log = audit::Log::for_project(&self.engine.project.root)?.pinned();
        Ok(self.log.get_or_init(|| log).clone())
    }

    fn event(&self) -> audit::Event {
        audit::Event::call_started(
            self.name,
            self.id,
            &self.params.to_string(),
            self.caller.who(),
        )
    }

    /// Writes `TOOL_STARTED call=ID` and waits until it is on disk. When
    /// that fails the call is refused (`audit_unavailable`), unless
    /// `config.audit` is `best_effort`, in which case it goes on with a
    /// warning.
    fn record(&self, config: &Config) -> Result<(), Box<Outcome>> {
        let result = self.log().and_then(|log| log.append_durable(&self.event()));
        match result {
            Ok(()) => {
                self.written.set(true);
                Ok(())
            }
            Err(e) => self.failed(config, &e),
        }
    }

    /// [`Intent::record`] whose wait is left to the call's code: the line
    /// is written now, its sync runs in the background while the call is
    /// prepared, and the jail asks the gate this leaves in
    /// [`Intent::gate`] right before the call's code starts
    /// (`jail::Gate`). [`Intent::settle`] turns a sync that failed into
    /// the refusal (or the warning) [`Intent::record`] would have given.
    fn begin(&self, config: &Config) -> Result<(), Box<Outcome>> {
        let result = self.log().and_then(|log| log.append_pending(&self.event()));
        match result {
            Ok(pending) => {
                self.written.set(true);
                *self.gate.borrow_mut() = Some(Arc::new(IntentGate {
                    durable: pending.in_background(),
                    best_effort: config.audit == AuditMode::BestEffort,
                    asked: AtomicBool::new(false),
                }));
                Ok(())
            }
            Err(e) => self.failed(config, &e),
        }
    }

    /// The call's outcome once its intent's background sync is known: a
    /// failed sync refuses the call (nothing of it ran: the gate said no
    /// before its code started) or, with `audit: best_effort`, warns.
    fn settle(&self, result: Result<Outcome, Box<Outcome>>) -> Result<Outcome, Box<Outcome>> {
        let Some(gate) = self.gate.borrow_mut().take() else {
            return result;
        };
        match gate.durable.decided() {
            Some(Err(e)) => {
                let why = run::error_chain(&*e);
                if gate.best_effort {
                    self.warn_unrecorded(&why);
                    result
                } else {
                    Err(self.refusal(&e))
                }
            }
            _ => result,
        }
    }

    /// Writing the intent failed: refused, or a warning with
    /// `audit: best_effort`.
    fn failed(&self, config: &Config, e: &audit::AuditError) -> Result<(), Box<Outcome>> {
        // A line written but not made durable still has to be closed by
        // the result line.
        self.written.set(e.written());
        let why = run::error_chain(e);
        if config.audit == AuditMode::BestEffort {
            self.warn_unrecorded(&why);
            return Ok(());
        }
        Err(self.refusal(e))
    }

    fn warn_unrecorded(&self, why: &str) {
        let w = format!("the call's intent could not be recorded in the audit log (audit: best_effort, so it ran): {why}");
        if !self.caller.prints_to_stderr {
            eprintln!("glovebox: {}: {w}", self.name);
        }
        self.warnings.borrow_mut().push(w);
    }

    fn refusal(&self, e: &audit::AuditError) -> Box<Outcome> {
        let why = run::error_chain(e);
        if !self.caller.prints_to_stderr {
            eprintln!(
                "glovebox: refused a call of {}: its intent cannot be recorded in the audit log: {why}",
                self.name
            );
        }
        // The audit key itself gone or replaced: its message says what to
        // do (a full disk or permissions are not the cause).
        let (message, details) = match e.key_file() {
            Some(key) => (
                format!(
                    "the call was not run: its intent cannot be signed for the audit log ({why}; {})",
                    crate::state::describe()
                ),
                json!({"audit": "required", "state_dir": crate::state::dir().ok(), "key": key}),
            ),
            None => (
                format!("the call was not run: its intent cannot be recorded in the audit log ({why}); free the disk or fix the permissions of the log and of glovebox's state directory ({}), or set `audit: best_effort` in .glee/config.yml to run calls without a record", crate::state::describe()),
                json!({"audit": "required", "state_dir": crate::state::dir().ok()}),
            ),
        };
        Box::new(Outcome::failure(
            self.name,
            ErrorKind::AuditUnavailable,
            message,
            details,
        ))
    }
}

/// The jail's [`jail::Gate`] for a call whose intent line is being synced
/// in the background ([`Intent::begin`]): open once the line is on disk;
/// shut if its sync failed, unless `audit: best_effort`.
#[derive(Debug)]
struct IntentGate {
    durable: Arc<audit::Durable>,
    best_effort: bool,
    /// Whether anything asked (checked after the call started: a way to
    /// start a call's code that skips the gate is a bug).
    asked: AtomicBool,
}

// The jail's child starts on the byte the audit's pipe sends when the
// intent is on disk.
const _: () = assert!(audit::SIGNAL_DURABLE == jail::GATE_OPEN);

impl jail::Gate for IntentGate {
    fn signal(&self) -> Option<std::os::fd::OwnedFd> {
        // Already on disk (a sync shared with other calls), or no pipe to
        // be had: the jail asks `pass` before its clone.
        if self.durable.decided().is_some() {
            return None;
        }
        let fd = self.durable.signal(self.best_effort).ok()?;
        self.asked.store(true, Ordering::SeqCst);
        Some(fd)
    }

    fn pass(&self) -> Result<(), String> {
        self.asked.store(true, Ordering::SeqCst);
        match self.durable.wait() {
            Ok(()) => Ok(()),
            Err(_) if self.best_effort => Ok(()),
            Err(e) => Err(format!(
                "its intent could not be recorded in the audit log: {}",
                run::error_chain(&*e)
            )),
        }
    }
}

/// What every kind of run needs from the decisions already made.
struct Job<'a> {
    name: &'a str,
    root: &'a std::path::Path,
    policy: &'a Policy,
    /// The values the jail sees (placeholders for placeholder secrets).
    secrets: &'a IndexMap<String, String>,
    placeholders: &'a Placeholders,
    redact: &'a Redactor,
    schemas: &'a Schemas,
    caller: &'a Caller,
    extra: &'a AuditExtra,
    /// Asked right before the call's code starts ([`Intent::begin`]).
    gate: Option<Arc<IntentGate>>,
    /// Learn mode's observer ([`Engine::observe`]).
    observer: Option<&'a Arc<jail::observe::Observer>>,
}

/// Fields a run adds to the call's audit line (`egress=[…]`,
/// `network=direct`).
#[derive(Debug, Default)]
struct AuditExtra(std::cell::RefCell<Vec<(&'static str, String)>>);

impl AuditExtra {
    fn push(&self, field: (&'static str, String)) {
        self.0.borrow_mut().push(field);
    }

    fn take(&self) -> Vec<(&'static str, String)> {
        self.0.take()
    }
}

impl Job<'_> {
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
        spec.cancel = self.caller.cancel.clone();
        spec.gate = self.gate.clone().map(|g| g as Arc<dyn jail::Gate>);
        spec.observe = self.observer.cloned();
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
                    self.name,
                    ErrorKind::Internal,
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
                    self.name,
                    e.kind(),
                    format!(
                        "the call was not run: the control names it could create cannot be recorded: {}",
                        run::error_chain(&e)
                    ),
                    json!({}),
                ))
            }
        };
        let started = start(&spec);
        let undone = watch.map(crate::planted::Watch::finish).unwrap_or_default();
        if let (Ok(_), Some(gate)) = (&started, &self.gate) {
            if !gate.asked.load(Ordering::SeqCst) {
                // Its code ran without waiting for its intent to be on
                // disk: a path that skips the gate is a bug.
                return Err(Box::new(Outcome::failure(
                    self.name,
                    ErrorKind::Internal,
                    "the call started without its intent's durability being checked; this is a glovebox bug, please report it",
                    json!({}),
                )));
            }
        }
        let mut outcome = match started {
            _ if !undone.is_empty() => planted_failure(self.name, self.root, &undone),
            Err(e) => run::jail_error(self.name, &e, program),
            Ok(result) => run::finish(
                self.name,
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

    /// Sets up the network of `spec` under the policy: the egress proxy
    /// (returned, for its log), or the host network when the config opted
    /// into it.
    ///
    /// With placeholder secrets, the proxy intercepts their hosts with a
    /// CA made for this call, and the jail gets the bundle that trusts it
    /// in its private TMPDIR ([`crate::egress::intercept::CA_VARIABLES`]).
    fn network(
        &self,
        spec: &mut Spec,
    ) -> Result<Option<Arc<crate::egress::Gateway>>, crate::egress::intercept::InterceptError> {
        use crate::egress::intercept::{Interception, CA_FILE, CA_VARIABLES};
        spec.network = self.policy.network;
        if !self.policy.network {
            return Ok(None);
        }
        if self.policy.direct_network {
            spec.direct_network = true;
            return Ok(None);
        }
        let mut rules = self.policy.egress_rules();
        if !self.placeholders.is_empty() {
            let i = Interception::new(self.placeholders.clone(), self.policy.extra_ca.clone())?;
            let (bundle, _) = i.bundle();
            spec.home_files.push(jail::HomeFile {
                name: CA_FILE.into(),
                contents: bundle,
                variables: CA_VARIABLES.iter().map(|v| v.to_string()).collect(),
            });
            rules.intercept = Some(Arc::new(i));
        }
        let g = Arc::new(crate::egress::Gateway::new(rules));
        spec.gateway = Some(g.clone());
        Ok(Some(g))
    }
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
        "the tool created {}, part of the project's control surface (it would define tools, run code outside the jail, or be code another tool runs)",
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
    message.push_str(". A tool whose job is git must name .git in permissions.fs.write");
    Outcome::failure(
        name,
        ErrorKind::PermissionExceedsCeiling,
        message,
        json!({"removed": removed, "left": undone.left.iter().map(|(p, _)| shown(p)).collect::<Vec<_>>(), "tainted": !undone.left.is_empty()}),
    )
}

fn policy_failure(name: &str, e: &PolicyError) -> Box<Outcome> {
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
