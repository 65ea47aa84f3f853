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

/// Where Python looks for byte code instead of `__pycache__`: below
/// `/dev/null`, so nowhere.
pub const NO_PYCACHE: &str = "pycache_prefix=/dev/null/glovebox-no-pycache";

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
    /// The venv's `bin/python` does not lead to a Python installation.
    #[error("venv {venv:?}: its interpreter {program:?} resolves to {real:?}, which is not part of a Python installation (no lib/pythonX.Y/os.py beside it); recreate the venv with `python3 -m venv`")]
    NotPython {
        venv: PathBuf,
        program: PathBuf,
        real: PathBuf,
    },
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
/// → `/x` (links resolved).
fn prefix_of(binary: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(binary).ok()?;
    Some(real.parent()?.parent()?.to_path_buf())
}

/// The installation prefix of `real` (a resolved interpreter binary) when
/// it is part of a Python installation: a regular executable named
/// `python…` in `PREFIX/bin`, with the standard library's landmark
/// `PREFIX/lib/pythonX.Y/os.py` (what CPython itself looks for) — never
/// `/`, whatever the files say.
pub fn installation(real: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let named = real
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"));
    let meta = std::fs::metadata(real).ok()?;
    if !named || !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return None;
    }
    let bin = real.parent()?;
    if bin.file_name().is_none_or(|n| n != "bin") {
        return None;
    }
    let prefix = bin.parent()?;
    // Never `/` itself.
    prefix.parent()?;
    let landmark = ["lib", "lib64"].iter().any(|lib| {
        std::fs::read_dir(prefix.join(lib)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("python"))
                    && e.path().join("os.py").is_file()
            })
        })
    });
    landmark.then(|| prefix.to_path_buf())
}

impl Interpreter {
    /// The venv's interpreter when the manifest names one, else `python3`
    /// from the jail's PATH.
    ///
    /// A venv's grant comes from its interpreter, never from a file in the
    /// venv that a tool could edit: `bin/python3` (or `bin/python`) is
    /// resolved through its links to the real binary, and that binary's
    /// installation prefix is granted (read + execute) beside the venv. A
    /// venv whose interpreter is not part of a Python installation (see
    /// [`installation`]) is refused. Only a venv made with `--copies` (the
    /// binary itself inside the venv, without a standard library beside
    /// it) takes its base from `pyvenv.cfg`'s `home`, and then only when
    /// that names a Python installation too.
    pub fn locate(root: &Path, exec: &PythonExec) -> Result<Interpreter, PythonError> {
        let Some(venv) = &exec.venv else {
            let program = std::env::split_paths(JAIL_PATH)
                .map(|d| d.join("python3"))
                .find(|p| p.exists())
                .ok_or(PythonError::NoPython)?;
            let grant = prefix_of(&program).into_iter().collect();
            return Ok(Interpreter { program, grant });
        };
        let dir = resolve(root, venv);
        let program = ["python3", "python"]
            .iter()
            .map(|n| dir.join("bin").join(n))
            .find(|p| p.exists())
            .ok_or_else(|| PythonError::VenvMissing { path: dir.clone() })?;
        let real = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
        let not_python = || PythonError::NotPython {
            venv: dir.clone(),
            program: program.clone(),
            real: real.clone(),
        };
        let real_dir = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        // A conda environment or a Python built into the venv directory is
        // an installation itself; a venv made with `--copies` has only the
        // binary, and its base comes from `pyvenv.cfg`, checked.
        let prefix = match installation(&real) {
            Some(prefix) => prefix,
            None if real.starts_with(&real_dir) => copied_base(&dir).ok_or_else(not_python)?,
            None => return Err(not_python()),
        };
        let mut grant = vec![dir];
        if !grant.contains(&prefix) {
            grant.push(prefix);
        }
        Ok(Interpreter { program, grant })
    }

    /// argv for running the shim: isolated mode (`-I`), no byte code
    /// written (`-B`), and none read from `__pycache__` either (a cache
    /// prefix that can never exist): a forged `.pyc` with the source's
    /// size and time beside an approved module is never loaded.
    pub fn argv(&self) -> Vec<OsString> {
        vec![
            self.program.clone().into_os_string(),
            "-I".into(),
            "-B".into(),
            "-X".into(),
            NO_PYCACHE.into(),
            "-c".into(),
            SHIM.into(),
        ]
    }
}

/// The base installation of a venv made with `--copies`: `pyvenv.cfg`'s
/// `home` (the base's `bin` directory), accepted only when a `python3…`
/// there is part of a Python installation.
fn copied_base(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    ["python3", "python"].iter().find_map(|n| {
        let real = std::fs::canonicalize(home.join(n)).ok()?;
        installation(&real)
    })
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
    json!({
        "cwd": cwd,
        "chain": chain_json(exec, chain),
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
pub fn init_request(exec: &PythonExec, cwd: &Path, chain: Option<&[Found]>, idle_s: u64) -> Value {
    json!({
        "cwd": cwd,
        "chain": chain_json(exec, chain),
        "module": exec.module,
        "idle_s": idle_s,
    })
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn an_installation_has_its_standard_library_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = std::fs::canonicalize(tmp.path()).unwrap().join("py");
        let bin = prefix.join("bin/python3.12");
        executable(&bin);
        assert_eq!(installation(&bin), None, "no lib/python3.12/os.py yet");
        std::fs::create_dir_all(prefix.join("lib/python3.12")).unwrap();
        std::fs::write(prefix.join("lib/python3.12/os.py"), "").unwrap();
        assert_eq!(installation(&bin), Some(prefix.clone()));
        // Not named python, or not in a bin directory: no.
        let other = prefix.join("bin/sh");
        executable(&other);
        assert_eq!(installation(&other), None);
        let loose = prefix.join("lib/python3.12/python3");
        executable(&loose);
        assert_eq!(installation(&loose), None);
    }

    #[test]
    fn a_conda_like_environment_is_its_own_installation() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let env = root.join("env");
        executable(&env.join("bin/python3"));
        std::fs::create_dir_all(env.join("lib/python3.11")).unwrap();
        std::fs::write(env.join("lib/python3.11/os.py"), "").unwrap();
        let exec: PythonExec = serde_json::from_value(json!({
            "module": "m", "function": "f", "venv": "env"
        }))
        .unwrap();
        let i = Interpreter::locate(&root, &exec).unwrap();
        assert_eq!(i.grant, std::slice::from_ref(&env));
        // The same directory without its standard library, and without a
        // pyvenv.cfg naming a real installation: refused.
        std::fs::remove_dir_all(env.join("lib")).unwrap();
        std::fs::write(env.join("pyvenv.cfg"), "home = /etc\n").unwrap();
        assert!(matches!(
            Interpreter::locate(&root, &exec),
            Err(PythonError::NotPython { .. })
        ));
    }
}
