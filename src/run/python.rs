//! `kind: python`: a function of a module, called by a small shim
//! (`shim.py`) inside the jail. The shim gets its request on stdin and
//! hands back the return value on the original stdout, apart from
//! anything the function prints (which goes to stderr); an exception comes
//! back as its type, message and traceback.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::jail::spawn::JAIL_PATH;
use crate::manifest::discover::resolve;
use crate::manifest::model::{Format, PythonExec};

/// The shim's source, passed with `-c`.
pub const SHIM: &str = include_str!("shim.py");

/// Errors locating the interpreter.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// The manifest names a venv that does not exist.
    #[error("venv {path:?} has no python interpreter (bin/python3); create it with `python3 -m venv {path:?}`")]
    VenvMissing { path: PathBuf },
    /// No python3 in the jail's PATH.
    #[error("no python3 found in {JAIL_PATH}; install python3")]
    NoPython,
    /// Both a module file and a package directory answer to one name.
    #[error("{name} is both {file:?} and the package {dir:?}; one of them was planted or is left over: remove the one the tool does not use")]
    Ambiguous {
        name: String,
        file: PathBuf,
        dir: PathBuf,
    },
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

/// The interpreter a python tool runs with.
#[derive(Debug, Clone)]
pub struct Interpreter {
    /// What to execute.
    pub program: PathBuf,
    /// Paths to grant read + execute: the venv and the installation the
    /// interpreter comes from (empty parts of the baseline are harmless).
    pub grant: Vec<PathBuf>,
}

/// The installation prefix of an interpreter binary: `/x/bin/python3.11`
/// → `/x`.
fn prefix_of(binary: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(binary).ok()?;
    Some(real.parent()?.parent()?.to_path_buf())
}

impl Interpreter {
    /// The venv's interpreter when the manifest names one, else `python3`
    /// from the jail's PATH.
    pub fn locate(root: &Path, exec: &PythonExec) -> Result<Interpreter, PythonError> {
        let mut grant = Vec::new();
        let program = match &exec.venv {
            Some(venv) => {
                let dir = resolve(root, venv);
                let program = ["python3", "python"]
                    .iter()
                    .map(|n| dir.join("bin").join(n))
                    .find(|p| p.exists())
                    .ok_or_else(|| PythonError::VenvMissing { path: dir.clone() })?;
                // pyvenv.cfg's `home` names the base interpreter's bin dir.
                if let Ok(cfg) = std::fs::read_to_string(dir.join("pyvenv.cfg")) {
                    for line in cfg.lines() {
                        if let Some((k, v)) = line.split_once('=') {
                            if k.trim() == "home" {
                                if let Some(base) = Path::new(v.trim()).parent() {
                                    grant.push(base.to_path_buf());
                                }
                            }
                        }
                    }
                }
                grant.push(dir);
                program
            }
            None => std::env::split_paths(JAIL_PATH)
                .map(|d| d.join("python3"))
                .find(|p| p.exists())
                .ok_or(PythonError::NoPython)?,
        };
        if let Some(prefix) = prefix_of(&program) {
            if !grant.contains(&prefix) {
                grant.push(prefix);
            }
        }
        Ok(Interpreter { program, grant })
    }

    /// argv for running the shim.
    pub fn argv(&self) -> Vec<OsString> {
        vec![
            self.program.clone().into_os_string(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            SHIM.into(),
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
    args: Vec<Value>,
    kwargs: serde_json::Map<String, Value>,
) -> Vec<u8> {
    let returns = match exec.returns {
        Format::Json => "json",
        Format::Text => "text",
    };
    let parts: Vec<&str> = exec.module.split('.').collect();
    let chain: Option<Vec<Value>> = chain.map(|c| {
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
    });
    json!({
        "cwd": cwd,
        "chain": chain,
        "module": exec.module,
        "function": exec.function,
        "args": args,
        "kwargs": kwargs,
        "return": returns,
    })
    .to_string()
    .into_bytes()
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
