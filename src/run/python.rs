//! `kind: python`: a function of a module, called by a small shim
//! (`shim.py`) inside the jail. The shim gets its request on stdin and
//! hands back the return value on the original stdout, apart from
//! anything the function prints (which goes to stderr); an exception comes
//! back as its type, message and traceback.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{ErrorKind, Finished, Outcome, Redactor};
pub use crate::interpreter::{installation, Interpreter, PythonError};
use crate::jail::{JailResult, Status};
use crate::manifest::model::{Format, PythonExec};

/// The shim's source, passed with `-c`.
pub const SHIM: &str = include_str!("shim.py");
/// The shim of a tool that requires approval: the check of approved code
/// first ([`super::pins`], `pin.py`), installed before the shim imports
/// anything of the project. Only those calls compile it.
pub const SHIM_PINNED: &str = concat!(include_str!("pin.py"), "\n", include_str!("shim.py"));
/// A warm worker's source ([`super::warm`]): the zygote's part, then the
/// shim. A cold call compiles only [`SHIM`] (the zygote's code was a
/// millisecond of every cold start).
pub const SHIM_WARM: &str = concat!(include_str!("shim_warm.py"), "\n", include_str!("shim.py"));
/// [`SHIM_WARM`] with the check of approved code ([`SHIM_PINNED`]).
pub const SHIM_WARM_PINNED: &str = concat!(
    include_str!("shim_warm.py"),
    "\n",
    include_str!("pin.py"),
    "\n",
    include_str!("shim.py")
);

/// The warm worker's source for a cold shim's (`shim`: [`SHIM`] or
/// [`SHIM_PINNED`]), if it is one.
pub fn warm_source(shim: &std::ffi::OsStr) -> Option<&'static str> {
    if shim == SHIM {
        Some(SHIM_WARM)
    } else if shim == SHIM_PINNED {
        Some(SHIM_WARM_PINNED)
    } else {
        None
    }
}

/// How one component of a dotted module name is found in the tool's cwd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// `name.py`.
    Module(PathBuf),
    /// `name/__init__.py` (the directory).
    Package(PathBuf),
    /// A directory without `__init__.py` (a namespace package).
    Namespace(PathBuf),
}

/// Resolves `module` (dotted) under `cwd` component by component, the
/// way the shim then loads it: by these exact files, never by a search of
/// `sys.path`, so a package planted beside a module (or a module beside a
/// package) never runs. A name that is both is refused. `None` when the
/// module is not in `cwd` (an installed module: imported by name).
pub fn resolve_module(cwd: &Path, module: &str) -> Result<Option<Vec<Found>>, PythonError> {
    let mut chain = Vec::new();
    let mut dir = cwd.to_path_buf();
    let parts: Vec<&str> = module.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let file = dir.join(format!("{part}.py"));
        let pkg = dir.join(part);
        let is_pkg = pkg.join("__init__.py").is_file();
        let is_file = file.is_file();
        let found = match (is_file, is_pkg) {
            (true, true) => {
                return Err(PythonError::Ambiguous {
                    name: parts[..=i].join("."),
                    file,
                    dir: pkg,
                })
            }
            (true, false) => Found::Module(file),
            (false, true) => Found::Package(pkg.clone()),
            (false, false) if pkg.is_dir() && i + 1 < parts.len() => Found::Namespace(pkg.clone()),
            (false, false) => return Ok(None),
        };
        let last = i + 1 == parts.len();
        if matches!(found, Found::Module(_)) && !last {
            // `a.b` where a is a plain module: not importable from here.
            return Ok(None);
        }
        chain.push(found);
        dir = pkg;
    }
    Ok(Some(chain))
}

/// How the shim is run by the interpreter [`Interpreter::locate`] chose.
impl Interpreter {
    /// argv for running the shim: isolated mode (`-I`), no byte code
    /// written (`-B`). None is read from a `__pycache__` outside the
    /// Python installation either: the shim loads the tool's modules, and
    /// every `.py` found outside the installation, from source
    /// (`SourceOnly` in `shim.py`), so a forged `.pyc` with the source's
    /// size and time beside an approved module is never loaded, while the
    /// standard library keeps its caches (compiling it per call cost
    /// 20-200 ms).
    ///
    /// `pinned`: the call is of a tool that requires approval
    /// ([`SHIM_PINNED`]).
    pub fn argv(&self, pinned: bool) -> Vec<OsString> {
        vec![
            self.program.clone().into_os_string(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            if pinned { SHIM_PINNED } else { SHIM }.into(),
        ]
    }
}

/// The request the shim reads on stdin: the function is called with
/// `args` (positional) and `kwargs` (keyword); `chain` is the module as
/// [`resolve_module`] found it.
pub fn request(
    exec: &PythonExec,
    cwd: &Path,
    chain: Option<&[Found]>,
    absent: &[PathBuf],
    args: Vec<Value>,
    kwargs: serde_json::Map<String, Value>,
) -> Vec<u8> {
    let returns = match exec.returns {
        Format::Json => "json",
        Format::Text => "text",
    };
    json!({
        "cwd": cwd,
        "chain": chain_json(exec, chain),
        "absent": absent_names(absent),
        "module": exec.module,
        "function": exec.function,
        "args": args,
        "kwargs": kwargs,
        "return": returns,
    })
    .to_string()
    .into_bytes()
}

/// What a warm worker's zygote imports (see `crate::run::warm`): the
/// module as [`resolve_module`] found it, never a call's parameters.
pub fn init_request(
    exec: &PythonExec,
    cwd: &Path,
    chain: Option<&[Found]>,
    absent: &[PathBuf],
    idle_s: u64,
) -> Value {
    json!({
        "cwd": cwd,
        "chain": chain_json(exec, chain),
        "absent": absent_names(absent),
        "module": exec.module,
        "idle_s": idle_s,
    })
}

/// The names an import had nothing under when glovebox looked
/// ([`crate::footprint::Footprint::absent_imports`]), for the shim: each
/// `DIR/NAME` (its suffixed forms are the shim's to match).
fn absent_names(absent: &[PathBuf]) -> Vec<&Path> {
    absent
        .iter()
        .filter(|p| p.extension().is_none())
        .map(PathBuf::as_path)
        .collect()
}

fn chain_json(exec: &PythonExec, chain: Option<&[Found]>) -> Option<Vec<Value>> {
    let parts: Vec<&str> = exec.module.split('.').collect();
    chain.map(|c| {
        c.iter()
            .enumerate()
            .map(|(i, f)| {
                let name = parts[..=i].join(".");
                match f {
                    Found::Module(p) => json!([name, "module", p]),
                    Found::Package(p) => json!([name, "package", p]),
                    Found::Namespace(p) => json!([name, "namespace", p]),
                }
            })
            .collect()
    })
}

/// What the shim reported.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The function returned this value.
    Returned(Value),
    /// The function raised.
    Raised {
        /// Exception type name.
        kind: String,
        /// `str(exception)`.
        message: String,
        /// Formatted traceback.
        traceback: String,
    },
}

/// Parses the shim's reply; `None` when it wrote none (it died first).
pub fn reply(stdout: &[u8]) -> Option<Reply> {
    let v: Value = serde_json::from_slice(stdout).ok()?;
    if v.get("ok")? == &Value::Bool(true) {
        return Some(Reply::Returned(
            v.get("value").cloned().unwrap_or(Value::Null),
        ));
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(Reply::Raised {
        kind: s("type"),
        message: s("message"),
        traceback: s("traceback"),
    })
}

/// Reads a finished call from the shim's reply: the function's value
/// (as text when the tool returns text), its exception
/// (`python_exception`), or, when the shim wrote nothing, how the
/// process ended. Secrets are redacted from the value.
pub fn read(tool: &str, returns: Format, r: &JailResult, redact: &Redactor) -> Finished {
    match reply(&r.stdout) {
        Some(Reply::Returned(v)) => Finished::Output(redact.value(match (returns, v) {
            (Format::Text, Value::String(s)) => Value::String(s),
            (Format::Text, other) => Value::String(other.to_string()),
            (_, v) => v,
        })),
        Some(Reply::Raised {
            kind,
            message,
            traceback,
        }) => Finished::failed(Outcome::failure(
            tool,
            ErrorKind::PythonException,
            format!("{kind}: {message}"),
            json!({"type": kind, "message": message, "traceback": traceback}),
        )),
        None => match r.status {
            Status::Exited(0) => Finished::failed(Outcome::failure(
                tool,
                ErrorKind::Internal,
                "the python shim returned no result",
                json!({}),
            )),
            status => Finished::failed(super::exit_failure(
                tool,
                status,
                &redact.text(&String::from_utf8_lossy(&r.stderr)),
                &[0],
            )),
        },
    }
}
