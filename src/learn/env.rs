//! The environment a learning run was given, explained: which variables
//! the proposal must keep because their value names a path the run used
//! (`PATH`'s directory a program ran from, `RUSTUP_HOME`'s toolchain), and
//! which it was given with no use the jail could see. A program reads its
//! environment in its own memory — no system call shows a `getenv` — so
//! what is observable is the paths a value names; a variable whose value
//! names none the run touched is reported as not seen used, never dropped
//! (it may still be read: `LANG`, a token).

use std::ffi::OsString;
use std::path::Path;

use super::fold::Seen;
use crate::jail::observe::Op;

/// One variable the learning run was given (its name, never its value).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnvSeen {
    /// The variable's name.
    pub name: String,
    /// Its value names a path the run used: the proposal must keep it.
    pub used: bool,
    /// Why, for a person: the use seen, or that none was.
    pub why: String,
}

/// Explains each of `env` against what the run did (`seen`: every
/// access, the baseline's too); `home` shortens paths to `~/…`.
pub fn explain(env: &[(String, OsString)], seen: &[Seen], home: Option<&Path>) -> Vec<EnvSeen> {
    env.iter()
        .map(|(name, value)| match first_use(value, seen) {
            Some((dir, s)) => EnvSeen {
                name: name.clone(),
                used: true,
                why: format!(
                    "{} under {} (named by it) was {} by {}",
                    shown(&s.path, home),
                    shown(Path::new(&dir), home),
                    match s.op {
                        Op::Exec => "executed",
                        Op::Read => "read",
                        _ => "written",
                    },
                    if s.program.is_empty() {
                        "the command"
                    } else {
                        &s.program
                    }
                ),
            },
            None => EnvSeen {
                name: name.clone(),
                used: false,
                why: "given; its value names no path the run touched (a read of a variable is not observable): keep it if the tool reads it".into(),
            },
        })
        .collect()
}

/// The first directory of `value` (a path, or a `:` list of them) under
/// which the run did something, an execution first (a search path's
/// point), and that access. `/` names everything, so never counts.
fn first_use<'a>(value: &OsString, seen: &'a [Seen]) -> Option<(String, &'a Seen)> {
    let value = value.to_str()?;
    let dirs: Vec<&str> = value
        .split(':')
        .filter(|d| d.starts_with('/') && Path::new(d) != Path::new("/"))
        .collect();
    for want_exec in [true, false] {
        for d in &dirs {
            if let Some(s) = seen
                .iter()
                .find(|s| (s.op == Op::Exec) == want_exec && s.path.starts_with(d))
            {
                return Some((d.to_string(), s));
            }
        }
    }
    None
}

/// Toolchain variables whose tools fall back to a directory below the
/// home when they are unset: rustup's and cargo's (a default rustup
/// install sets neither), go's, pyenv's, nvm's, bun's.
const TOOLCHAIN_DEFAULTS: &[(&str, &str)] = &[
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo"),
    ("GOPATH", "go"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
    ("BUN_INSTALL", ".bun"),
];

/// The directory a toolchain uses for the unset variable `name` (below
/// `home`), when it exists: what `--env RUSTUP_HOME` passes on a default
/// rustup install, so that the tool finds in the jail (whose `HOME` is
/// its own) what it finds outside.
pub fn toolchain_default(name: &str, home: &Path) -> Option<std::path::PathBuf> {
    let (_, rel) = TOOLCHAIN_DEFAULTS.iter().find(|(n, _)| *n == name)?;
    let p = home.join(rel);
    p.is_dir().then_some(p)
}

fn shown(p: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| p.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => p.display().to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn seen(op: Op, path: &str, program: &str) -> Seen {
        Seen {
            op,
            path: path.into(),
            program: program.into(),
            dir: false,
            existed: true,
        }
    }

    #[test]
    fn an_unset_toolchain_variable_has_its_default_where_it_exists() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".rustup")).unwrap();
        assert_eq!(
            toolchain_default("RUSTUP_HOME", d.path()),
            Some(d.path().join(".rustup"))
        );
        assert_eq!(toolchain_default("CARGO_HOME", d.path()), None);
        assert_eq!(toolchain_default("SOMETHING", d.path()), None);
    }

    #[test]
    fn a_search_path_is_explained_by_the_program_it_found_and_a_bare_value_is_not_seen() {
        let v = vec![
            seen(Op::Read, "/usr/bin/env", "sh"),
            seen(Op::Exec, "/home/u/.cargo/bin/cargo", "sh"),
            seen(Op::Read, "/home/u/.rustup/toolchains/x/bin/rustc", "cargo"),
        ];
        let env = vec![
            (
                "PATH".to_string(),
                OsString::from("/home/u/.cargo/bin:/usr/bin:/bin"),
            ),
            ("RUSTUP_HOME".to_string(), OsString::from("/home/u/.rustup")),
            ("LANG".to_string(), OsString::from("C.UTF-8")),
            ("ROOT".to_string(), OsString::from("/")),
            ("OTHER".to_string(), OsString::from("/opt/other")),
        ];
        let e = explain(&env, &v, Some(Path::new("/home/u")));
        assert_eq!(
            e[0].why,
            "~/.cargo/bin/cargo under ~/.cargo/bin (named by it) was executed by sh"
        );
        assert!(e[1].used && e[1].why.contains("~/.rustup/toolchains/x/bin/rustc"));
        assert!(e[1].why.contains("read by cargo"));
        for x in &e[2..] {
            assert!(!x.used, "{x:?}");
        }
    }
}
