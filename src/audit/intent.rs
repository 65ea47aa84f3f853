//! A call's intent: its `TOOL_STARTED call=ID` line, written to the
//! audit log right before the call starts anything ([`Intent::record`]),
//! or written with its sync left to run while the jail is prepared
//! ([`Intent::begin`]), the jail then asking its [`IntentGate`] right
//! before the call's code starts. An intent that cannot be recorded
//! refuses the call ([`Refused`], `audit_unavailable`) unless the config
//! says `audit: best_effort`.

use std::cell::{Cell, OnceCell, RefCell};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::{AuditError, Durable, Event, Log, Who, SIGNAL_DURABLE};
use crate::jail;
use crate::kind::{error_chain, ErrorKind};
use crate::manifest::config::{AuditMode, Config};

/// The intent of one call: written to the audit log right before the
/// call starts anything ([`Intent::record`]).
pub struct Intent<'a> {
    root: &'a Path,
    name: &'a str,
    params: &'a Value,
    who: Who<'a>,
    quiet: bool,
    id: &'a str,
    written: Cell<bool>,
    /// The log the intent went to, kept for the result line.
    log: OnceCell<Log>,
    warnings: RefCell<Vec<String>>,
    /// Fields the run adds to the result's audit line.
    extra: Extra,
    /// The gate of an intent whose sync runs in the background
    /// ([`Intent::begin`]).
    gate: RefCell<Option<Arc<IntentGate>>>,
}

/// A call refused because its intent cannot be recorded: the message and
/// details of its Outcome (kind [`Refused::kind`]).
#[derive(Debug)]
pub struct Refused {
    /// What happened and what to do.
    pub message: String,
    /// The Outcome's details (`audit`, `state_dir`, `key`).
    pub details: Value,
}

impl Refused {
    /// The Outcome's error kind: the call cannot be recorded.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::AuditUnavailable
    }
}

impl<'a> Intent<'a> {
    /// The intent of the call `id` of tool `name` (as the caller gave
    /// it) with `params` as the log keeps them, in the log of the project
    /// at `root`; `quiet` when the caller prints the Outcome's warnings
    /// itself (nothing more on stderr).
    pub fn new(
        root: &'a Path,
        name: &'a str,
        params: &'a Value,
        who: Who<'a>,
        quiet: bool,
        id: &'a str,
    ) -> Intent<'a> {
        Intent {
            root,
            name,
            params,
            who,
            quiet,
            id,
            written: Cell::new(false),
            log: OnceCell::new(),
            warnings: RefCell::new(Vec::new()),
            extra: Extra::default(),
            gate: RefCell::new(None),
        }
    }

    /// Whether the intent line was written (durable or not): the result
    /// line then names the call's id.
    pub fn written(&self) -> bool {
        self.written.get()
    }

    /// The log the intent went to, its directory opened then
    /// ([`Log::pinned`]), for the result line.
    pub fn opened_log(&self) -> Option<Log> {
        self.log.get().cloned()
    }

    /// The warnings of an intent not recorded under `audit: best_effort`.
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings.take()
    }

    /// Fields the run adds to the result's audit line.
    pub fn extra(&self) -> &Extra {
        &self.extra
    }

    /// The gate [`Intent::begin`] left, for the jail to ask.
    pub fn gate(&self) -> Option<Arc<IntentGate>> {
        self.gate.borrow().clone()
    }

    /// The project's audit log, its directory opened at the first use
    /// (the intent), so that the result line reaches it whatever the call
    /// did to the directories above it.
    fn log(&self) -> Result<Log, AuditError> {
        if let Some(log) = self.log.get() {
            return Ok(log.clone());
        }
        let log = Log::for_project(self.root)?.pinned();
        Ok(self.log.get_or_init(|| log).clone())
    }

    fn event(&self) -> Event {
        Event::call_started(self.name, self.id, &self.params.to_string(), self.who)
    }

    /// Writes `TOOL_STARTED call=ID` and waits until it is on disk. When
    /// that fails the call is refused (`audit_unavailable`), unless
    /// `config.audit` is `best_effort`, in which case it goes on with a
    /// warning.
    pub fn record(&self, config: &Config) -> Result<(), Refused> {
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
    pub fn begin(&self, config: &Config) -> Result<(), Refused> {
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

    /// Once the call ran, its intent's background sync as known: a failed
    /// sync refuses the call (nothing of it ran: the gate said no before
    /// its code started) or, with `audit: best_effort`, warns.
    pub fn settle(&self) -> Result<(), Refused> {
        let Some(gate) = self.gate.borrow_mut().take() else {
            return Ok(());
        };
        match gate.durable.decided() {
            Some(Err(e)) => {
                let why = error_chain(&*e);
                if gate.best_effort {
                    self.warn_unrecorded(&why);
                    Ok(())
                } else {
                    Err(self.refusal(&e))
                }
            }
            _ => Ok(()),
        }
    }

    /// Writing the intent failed: refused, or a warning with
    /// `audit: best_effort`.
    fn failed(&self, config: &Config, e: &AuditError) -> Result<(), Refused> {
        // A line written but not made durable still has to be closed by
        // the result line.
        self.written.set(e.written());
        let why = error_chain(e);
        if config.audit == AuditMode::BestEffort {
            self.warn_unrecorded(&why);
            return Ok(());
        }
        Err(self.refusal(e))
    }

    fn warn_unrecorded(&self, why: &str) {
        let w = format!("the call's intent could not be recorded in the audit log (audit: best_effort, so it ran): {why}");
        if !self.quiet {
            eprintln!("glovebox: {}: {w}", self.name);
        }
        self.warnings.borrow_mut().push(w);
    }

    fn refusal(&self, e: &AuditError) -> Refused {
        let why = error_chain(e);
        if !self.quiet {
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
        Refused { message, details }
    }
}

/// The jail's [`jail::Gate`] for a call whose intent line is being synced
/// in the background ([`Intent::begin`]): open once the line is on disk;
/// shut if its sync failed, unless `audit: best_effort`.
#[derive(Debug)]
pub struct IntentGate {
    durable: Arc<Durable>,
    best_effort: bool,
    /// Whether anything asked (checked after the call started: a way to
    /// start a call's code that skips the gate is a bug).
    asked: AtomicBool,
}

// The jail's child starts on the byte the audit's pipe sends when the
// intent is on disk.
const _: () = assert!(SIGNAL_DURABLE == jail::GATE_OPEN);

impl IntentGate {
    /// Whether anything asked the gate: a call's code that started
    /// without asking is a glovebox bug.
    pub fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }
}

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
                error_chain(&*e)
            )),
        }
    }
}

/// Fields a run adds to the call's audit line (`egress=[…]`,
/// `network=direct`).
#[derive(Debug, Default)]
pub struct Extra(std::cell::RefCell<Vec<(&'static str, String)>>);

impl Extra {
    pub fn push(&self, field: (&'static str, String)) {
        self.0.borrow_mut().push(field);
    }

    pub fn take(&self) -> Vec<(&'static str, String)> {
        self.0.take()
    }
}
