//! Which Python a `kind: python` tool runs with, and what that interpreter
//! must be granted: `python3` from the jail's PATH, or the manifest's venv
//! checked down to the installation its interpreter really comes from. A
//! decision on the manifest and the filesystem, made before anything runs:
//! the policy grants it ([`crate::policy`]) and [`crate::run::python`]
//! runs the shim with it.

use std::path::{Path, PathBuf};

use crate::jail::spawn::JAIL_PATH;
use crate::manifest::discover::resolve;
use crate::manifest::model::PythonExec;

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

impl PythonError {
    /// The Outcome's error kind: the manifest names a python that
    /// cannot be used.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
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

/// The interpreter prefix of a script whose `#!` line runs a Python:
/// `#!/usr/bin/python3 [ARG]` → `["/usr/bin/python3", ARG]`, `#!/usr/bin/env
/// python3` → `["/usr/bin/env", "python3"]` (the kernel passes everything
/// after the interpreter as one argument). `None` for anything else (not
/// a Python, `env -S …`, an unreadable file).
pub fn python_shebang(script: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?.trim();
    let (interpreter, arg) = match text.split_once([' ', '\t']) {
        Some((i, a)) => (i, Some(a.trim()).filter(|a| !a.is_empty())),
        None => (text, None),
    };
    let name = Path::new(interpreter).file_name()?.to_str()?;
    let python = |n: &str| n.starts_with("python") && !n.contains(char::is_whitespace);
    if python(name) {
        return Some(
            std::iter::once(interpreter)
                .chain(arg)
                .map(String::from)
                .collect(),
        );
    }
    match arg {
        Some(a) if name == "env" && python(a) => Some(vec![interpreter.into(), a.into()]),
        _ => None,
    }
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
}

/// What a program needs read (and run) beyond the jail's baseline when it
/// is a Python interpreter (a venv's `bin/python3`) or a script whose
/// `#!` line names one by path (a venv's console script): the virtual
/// environment it belongs to (the directory above `bin` holding
/// `pyvenv.cfg`), and the installation its interpreter's links finally
/// lead to ([`installation`]; for a venv made with `--copies`,
/// `pyvenv.cfg`'s `home`). What the baseline holds (`/usr`: the system's
/// Python) is not repeated; a link that leads to no Python installation
/// adds nothing (the start then fails naming where it leads). For
/// `glovebox wrap` and `import mcp`, which grant what the command the
/// person gave needs.
pub fn needed_by(program: &Path) -> Vec<PathBuf> {
    let is_python = program
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"));
    let interpreter = if is_python {
        program.to_path_buf()
    } else {
        match python_shebang(program).and_then(|s| s.into_iter().next()) {
            Some(i) if !i.ends_with("/env") && i.starts_with('/') => PathBuf::from(i),
            _ => return Vec::new(),
        }
    };
    let mut out = Vec::new();
    let venv = interpreter
        .parent()
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
        .filter(|v| v.join("pyvenv.cfg").is_file());
    if let Some(v) = venv {
        out.push(v.to_path_buf());
    }
    let base = std::fs::canonicalize(&interpreter)
        .ok()
        .and_then(|real| installation(&real))
        .or_else(|| venv.and_then(copied_base));
    if let Some(base) = base {
        if !out.iter().any(|p| base.starts_with(p)) {
            out.push(base);
        }
    }
    let baseline = crate::jail::profile::baseline(false).unwrap_or_default();
    out.retain(|p| {
        !baseline
            .exec
            .iter()
            .chain(&baseline.read_only)
            .any(|b| p.starts_with(b))
    });
    out
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;
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
    fn a_venv_script_needs_its_venv_and_the_installation_its_links_lead_to() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        // A pyenv-like installation, and a venv whose python links to it
        // through a second link.
        let prefix = root.join("pyenv/versions/3.12.1");
        executable(&prefix.join("bin/python3.12"));
        std::fs::create_dir_all(prefix.join("lib/python3.12")).unwrap();
        std::fs::write(prefix.join("lib/python3.12/os.py"), "").unwrap();
        std::os::unix::fs::symlink(prefix.join("bin/python3.12"), root.join("py-link")).unwrap();
        let venv = root.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /nowhere\n").unwrap();
        std::os::unix::fs::symlink(root.join("py-link"), venv.join("bin/python3")).unwrap();
        let script = venv.join("bin/mcp-server-x");
        std::fs::write(
            &script,
            format!("#!{}\nimport x\n", venv.join("bin/python3").display()),
        )
        .unwrap();
        assert_eq!(needed_by(&script), vec![venv.clone(), prefix.clone()]);
        assert_eq!(
            needed_by(&venv.join("bin/python3")),
            vec![venv.clone(), prefix]
        );
        // Not Python, or the system's (the baseline's): nothing.
        let sh = root.join("tool.sh");
        std::fs::write(&sh, "#!/bin/sh\n").unwrap();
        assert!(needed_by(&sh).is_empty());
        if Path::new("/usr/bin/python3").exists() {
            assert!(needed_by(Path::new("/usr/bin/python3")).is_empty());
        }
        // A link leading to no installation adds only the venv.
        std::fs::remove_file(venv.join("bin/python3")).unwrap();
        std::os::unix::fs::symlink(&sh, venv.join("bin/python3")).unwrap();
        assert_eq!(needed_by(&script), vec![venv]);
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
