//! Safe import paths for Python started by a command tool.
//!
//! Python puts the script's directory (`python3 scripts/x.py`), or the
//! working directory (`python3 -m mod`, `python3 -c …`), *first* on
//! `sys.path`, before the standard library: a file planted there under a
//! standard name (`scripts/json.py`) runs in place of the real module,
//! inside the tool, with its secrets. A jailed Python never searches a
//! project directory before the standard library and the installed
//! packages:
//!
//! - the jail's environment gets `PYTHONSAFEPATH=1` (Python 3.11 and
//!   later), so neither the script's directory nor the working directory
//!   is prepended, for the tool's interpreter and every Python it starts;
//! - a command whose program is a Python (`python3`, `python3.12`, a
//!   venv's `bin/python`), or a script whose `#!` line runs one
//!   (`#!/usr/bin/python3 [ARG]`, `#!/usr/bin/env python3`, given by an
//!   absolute path as a command's entrypoint with a `/` is: started as
//!   the kernel would, interpreter first), running a script, a directory
//!   or `-m MOD` is
//!   started through a small bootstrap ([`BOOT`], given with `-c`) that
//!   removes an empty (`''`) first entry (Python before 3.11, or `-E`),
//!   *appends* the script's directory (for `-m`, the working directory)
//!   to `sys.path`, after the standard library and site-packages, and runs
//!   the script as `__main__` (compiled and run in `__main__` as Python
//!   does, without importing `runpy`, which would cost about 10 ms; `-m`
//!   and a script not named `.py` go through `runpy` as Python's own
//!   `-m` does): the tool's own helper modules
//!   beside its script still import, and a standard name planted there
//!   never shadows the real module.
//!
//! Not rewritten (the environment alone holds): `-c CODE`, a script read
//! from stdin (`-`), and command lines with options the bootstrap does not
//! know (`-x`, option clusters that take a value): with Python 3.11 or
//! later nothing of the project is on `sys.path` for them; an older Python
//! puts the working directory first for `-c`. A `#!` line the kernel would
//! split differently (`env -S …`) is left alone, without the variable.
//! A Python a tool starts itself gets the variable only (its own script's
//! directory is then not on `sys.path` at all).

use std::ffi::OsString;
use std::path::Path;

/// The bootstrap run with `-c` (`boot.py`); `sys.argv[1]` is `m` (a
/// module), `M` (a module that was not in the working directory when
/// glovebox looked: found without it, so one planted there since never
/// runs; the working directory is appended after, for what it imports) or
/// `s` (a script, directory or zip), `sys.argv[2]` the module or script,
/// and the rest the tool's own arguments.
pub const BOOT: &str = include_str!("boot.py");

/// [`BOOT`] for a tool that requires approval: the check of approved code
/// (`pin.py`, [`crate::run::pins`]) first, so the script and every project
/// module it loads are checked against the approval.
pub const BOOT_PINNED: &str = concat!(include_str!("pin.py"), "\n", include_str!("boot.py"));

/// True when `arg` is a bootstrap's source.
fn is_boot(arg: &OsString) -> bool {
    arg == BOOT || arg == BOOT_PINNED
}

/// Starts the bootstrap of `argv` (if any) with the check of approved code
/// ([`BOOT_PINNED`]).
pub fn pin(argv: &mut [OsString]) {
    for a in argv.iter_mut() {
        if a == BOOT {
            *a = BOOT_PINNED.into();
        }
    }
}

/// Marks the `-m` module of a command started through [`BOOT`] as not in
/// the working directory (`M`): Python then finds it without searching
/// there. Returns the module, when the command runs one through the
/// bootstrap.
pub fn module_not_in_cwd(argv: &mut [OsString]) -> Option<OsString> {
    let at = argv.iter().position(is_boot)?;
    if argv.get(at + 1)? != "m" {
        return None;
    }
    let module = argv.get(at + 2)?.clone();
    argv[at + 1] = "M".into();
    Some(module)
}

/// The `-m` module of a command started through [`BOOT`], if any.
pub fn module(argv: &[OsString]) -> Option<&OsString> {
    let at = argv.iter().position(is_boot)?;
    (argv.get(at + 1)? == "m")
        .then(|| argv.get(at + 2))
        .flatten()
}

/// The variable that turns Python's safe paths on.
pub const VARIABLE: &str = "PYTHONSAFEPATH";

/// True when `program` (a path or a name) is a Python interpreter.
pub fn is_python(program: &Path) -> bool {
    program
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"))
}

/// What a Python command line runs, as far as the bootstrap needs.
enum Target {
    /// `-m MOD` (or `-mMOD`) at `at`; its arguments start at `rest`.
    Module {
        at: usize,
        module: OsString,
        rest: usize,
    },
    /// The script (a file, directory or zip) at `at`.
    Script { at: usize },
}

/// Finds the script or `-m` module in `args` (the arguments after the
/// program); `None` when the bootstrap must not be used.
fn target(args: &[OsString]) -> Option<Target> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_str()?;
        match a {
            "-m" => {
                let module = args.get(i + 1)?.clone();
                return Some(Target::Module {
                    at: i,
                    module,
                    rest: i + 2,
                });
            }
            "-W" | "-X" | "--check-hash-based-pycs" => i += 2,
            "-" | "--" | "-c" => return None,
            _ if a.starts_with("-m") => {
                return Some(Target::Module {
                    at: i,
                    module: a[2..].into(),
                    rest: i + 1,
                })
            }
            _ if a.starts_with("-W") || a.starts_with("-X") => i += 1,
            // Flags without a value, alone or together (`-uB`); `-x`
            // (skip the first line) is not something `runpy` can do.
            _ if a.starts_with('-') && !a.starts_with("--") => {
                if !a[1..].chars().all(|c| "bBdEiIOPqRsSuv".contains(c)) {
                    return None;
                }
                i += 1;
            }
            _ if a.starts_with("--") => return None,
            _ => return Some(Target::Script { at: i }),
        }
    }
    None
}

/// `argv` with a Python program started through [`BOOT`] (see the module
/// documentation), and whether it is a Python at all (its jail then gets
/// [`VARIABLE`]). Anything else is returned as it is.
pub fn command(argv: Vec<OsString>) -> (Vec<OsString>, bool) {
    let Some(program) = argv.first() else {
        return (argv, false);
    };
    if !is_python(Path::new(program)) {
        // A script whose `#!` line runs a Python: started as the kernel
        // would (the interpreter, its argument, the script), through the
        // bootstrap.
        let script = Path::new(program);
        let shebang = script
            .is_absolute()
            .then(|| crate::interpreter::python_shebang(script))
            .flatten();
        let Some(prefix) = shebang else {
            return (argv, false);
        };
        // `env python3`: the Python is the word after `env`.
        let at = prefix
            .iter()
            .position(|w| is_python(Path::new(w)))
            .unwrap_or(0);
        let python: Vec<OsString> = prefix[at..]
            .iter()
            .map(OsString::from)
            .chain(argv.iter().cloned())
            .collect();
        let (wrapped, _) = command(python.clone());
        if wrapped == python {
            // Not something the bootstrap runs (an option it does not
            // parse): left to the kernel, with the variable.
            return (argv, true);
        }
        let mut out: Vec<OsString> = prefix[..at].iter().map(OsString::from).collect();
        out.extend(wrapped);
        return (out, true);
    }
    let args = &argv[1..];
    let (options, kind, what, rest): (&[OsString], &str, OsString, &[OsString]) = match target(args)
    {
        Some(Target::Module { at, module, rest }) => (&args[..at], "m", module, &args[rest..]),
        Some(Target::Script { at }) => (&args[..at], "s", args[at].clone(), &args[at + 1..]),
        None => return (argv, true),
    };
    let mut out = Vec::with_capacity(argv.len() + 4);
    out.push(program.clone());
    out.extend(options.iter().cloned());
    out.push("-c".into());
    out.push(BOOT.into());
    out.push(kind.into());
    out.push(what);
    out.extend(rest.iter().cloned());
    (out, true)
}

/// Starts `spec`'s program with safe paths when it is a Python
/// ([`command`]), and gives every Python the jail starts [`VARIABLE`]
/// when `always` (a `kind: python` tool, whose shim runs in isolated
/// mode anyway) or when the program is one.
pub fn apply(spec: &mut crate::jail::Spec, always: bool) {
    let (argv, python) = command(std::mem::take(&mut spec.argv));
    spec.argv = argv;
    if python || always {
        spec.env.retain(|(k, _)| k != VARIABLE);
        spec.env.push((VARIABLE.into(), "1".into()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn tail(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .filter(|a| *a != BOOT)
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_script_or_module_goes_through_the_bootstrap() {
        let (a, py) = command(v(&["python3", "-u", "scripts/x.py", "--flag", "v"]));
        assert!(py && a.contains(&BOOT.into()));
        assert_eq!(
            tail(&a),
            ["python3", "-u", "-c", "s", "scripts/x.py", "--flag", "v"]
        );
        let (a, _) = command(v(&["venv/bin/python", "-X", "dev", "-m", "pkg.mod", "a"]));
        assert_eq!(
            tail(&a),
            ["venv/bin/python", "-X", "dev", "-c", "m", "pkg.mod", "a"]
        );
    }

    #[test]
    fn a_script_whose_shebang_runs_python_goes_through_the_bootstrap() {
        let d = tempfile::tempdir().unwrap();
        let script = |name: &str, line: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, format!("{line}\nimport json\n")).unwrap();
            p.to_str().unwrap().to_string()
        };
        let env = script("e.py", "#!/usr/bin/env python3");
        let (a, py) = command(v(&[&env, "arg"]));
        assert!(py);
        assert_eq!(
            tail(&a),
            ["/usr/bin/env", "python3", "-c", "s", &env, "arg"]
        );
        let direct = script("d.py", "#!/usr/bin/python3 -u");
        let (a, _) = command(v(&[&direct]));
        assert_eq!(tail(&a), ["/usr/bin/python3", "-u", "-c", "s", &direct]);
        // An option the bootstrap does not parse: as the kernel runs it,
        // with the variable.
        let skip = script("x.py", "#!/usr/bin/python3 -x");
        assert_eq!(command(v(&[&skip])), (v(&[&skip]), true));
        let sh = script("s.sh", "#!/bin/sh");
        assert_eq!(command(v(&[&sh])), (v(&[&sh]), false));
        let split = script("S.py", "#!/usr/bin/env -S python3 -u");
        assert_eq!(command(v(&[&split])), (v(&[&split]), false));
    }

    #[test]
    fn what_the_bootstrap_cannot_run_is_left_alone() {
        for argv in [
            v(&["python3", "-c", "import json"]),
            v(&["python3", "-"]),
            v(&["python3", "-x", "s.py"]),
            v(&["python3", "-Bmtool"]),
            v(&["python3", "--version"]),
            v(&["python3"]),
        ] {
            let (a, py) = command(argv.clone());
            assert!(py, "{argv:?}");
            assert_eq!(a, argv);
        }
        let (a, py) = command(v(&["sh", "x.py"]));
        assert!(!py);
        assert_eq!(a, v(&["sh", "x.py"]));
    }
}
