//! `uvx PACKAGE ARGS…` and `pipx run PACKAGE ARGS…` servers, jailed: a
//! PyPI package run as its console script. Neither launcher is needed
//! (nor used): the package is installed once, in a jail of its own, into
//! a virtual environment in the server's cache directory
//! (`cache/mcp/PROJECT/SERVER/venv`, made with the jail's `python3`),
//! and the server runs the script from there, granted read and execute
//! on it only.
//!
//! As with [`super::npx`]: the install runs in a copy of the server's
//! jail (its grants, limits and network: PyPI is reached only through
//! the egress proxy, under the manifest's allowlist, e.g. `pypi.org` and
//! `files.pythonhosted.org`), with the cache directory writable, and
//! takes wheels only (`--only-binary :all:`), so no code of the package
//! runs at install (a package published only as a source archive is
//! refused, with the reason). The install is done again when the command
//! names other packages (`installed.json`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::install;
use super::server::Unavailable;
use crate::kind::ErrorKind;

/// The hosts a PyPI install reaches.
pub const HOSTS: [&str; 2] = ["pypi.org", "files.pythonhosted.org"];

/// A `uvx` / `uv tool run` / `pipx run` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pypi {
    /// How it was started (`uvx`, `pipx run`), for messages.
    pub launcher: &'static str,
    /// The requirements to install (pip's syntax: `name`, `name==1.2`).
    pub packages: Vec<String>,
    /// The console script to run.
    pub command: String,
    /// The arguments after it (the server's own).
    pub args: Vec<String>,
}

/// `name@1.2` (uvx's spelling of a pinned version) as pip's `name==1.2`.
fn requirement(spec: &str) -> String {
    match spec.split_once('@') {
        Some((name, version))
            if !name.is_empty() && !version.is_empty() && !spec.contains("://") =>
        {
            format!("{name}=={version}")
        }
        _ => spec.to_string(),
    }
}

/// The script name of a requirement (`name==1.2`, `name[extra]>=1` →
/// `name`).
fn script_of(spec: &str) -> String {
    spec.split(['=', '<', '>', '!', '~', '[', '@', ';', ' '])
        .next()
        .unwrap_or(spec)
        .to_string()
}

/// The command `entrypoint args` when it runs a PyPI package through
/// `uvx` (or `uv tool run`) or `pipx run`, with only the options that say
/// what to install (`--from`/`--spec`, `--with`); `None` for anything
/// else (another option is not guessed at: the launcher would be run
/// as it is, and is not found in the jail).
pub fn parse(entrypoint: &str, args: &[String]) -> Option<Pypi> {
    let program = Path::new(entrypoint).file_name()?.to_str()?;
    let (launcher, rest): (&'static str, &[String]) = match program {
        "uvx" => ("uvx", args),
        "uv" if args.len() >= 2 && args[0] == "tool" && args[1] == "run" => ("uvx", &args[2..]),
        "pipx" if args.first().is_some_and(|a| a == "run") => ("pipx run", &args[1..]),
        _ => return None,
    };
    let from_flag = if launcher == "uvx" {
        "--from"
    } else {
        "--spec"
    };
    let mut from: Option<String> = None;
    let mut with: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        let value = |i: &mut usize| -> Option<String> {
            *i += 1;
            rest.get(*i).cloned()
        };
        if a == from_flag {
            from = Some(value(&mut i)?);
        } else if let Some(v) = a.strip_prefix(from_flag).and_then(|v| v.strip_prefix('=')) {
            from = Some(v.to_string());
        } else if launcher == "uvx" && a == "--with" {
            with.push(value(&mut i)?);
        } else if let Some(v) = a.strip_prefix("--with=").filter(|_| launcher == "uvx") {
            with.push(v.to_string());
        } else if a == "--" {
            i += 1;
            break;
        } else if a.starts_with('-') {
            return None;
        } else {
            break;
        }
        i += 1;
    }
    let first = rest.get(i)?;
    let (package, command) = match from {
        Some(f) => (requirement(&f), first.clone()),
        None => {
            let package = requirement(first);
            let command = script_of(&package);
            (package, command)
        }
    };
    if command.is_empty() || command.contains('/') {
        return None;
    }
    let mut packages = vec![package];
    packages.extend(with.iter().map(|w| requirement(w)));
    Some(Pypi {
        launcher,
        packages,
        command,
        args: rest[i + 1..].to_vec(),
    })
}

/// Installs the packages of `p` into `dir/venv` (unless they are there),
/// in a jail made from the server's ([`install::Context`]), and returns
/// the script to run.
pub fn install(ctx: &install::Context<'_>, p: &Pypi, dir: &Path) -> Result<PathBuf, Unavailable> {
    let record = dir.join("installed.json");
    let venv = dir.join("venv");
    let script = venv.join("bin").join(&p.command);
    let installed = || -> bool {
        std::fs::read(&record)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|r| r.get("packages") == Some(&json!(p.packages)))
            && script.is_file()
    };
    if installed() {
        return Ok(script);
    }
    let what = format!("{} {}", p.launcher, p.packages.join(" "));
    ctx.check_hosts(&what, &HOSTS)?;
    let _lock = install::lock(ctx, dir)?;
    if installed() {
        return Ok(script);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let _ = std::fs::remove_file(&record);
    install::announce(ctx.server, &p.packages.join(" "));
    ctx.run(
        &format!("a virtual environment for {what}"),
        vec![
            "python3".into(),
            "-m".into(),
            "venv".into(),
            venv.clone().into(),
        ],
        dir,
        Vec::new(),
    )?;
    let mut argv: Vec<std::ffi::OsString> = vec![
        venv.join("bin/python").into(),
        "-m".into(),
        "pip".into(),
        "install".into(),
        "--quiet".into(),
        "--disable-pip-version-check".into(),
        "--no-input".into(),
        // No code of the package runs at install: wheels only.
        "--only-binary".into(),
        ":all:".into(),
        // A refused index fails at once, not after retries.
        "--retries".into(),
        "0".into(),
    ];
    argv.extend(p.packages.iter().map(Into::into));
    ctx.run(
        &format!("{} ({what})", p.packages.join(" ")),
        argv,
        dir,
        vec![
            ("PIP_CACHE_DIR".into(), dir.join("pip-cache").into()),
            ("PIP_NO_INPUT".into(), "1".into()),
        ],
    )?;
    if !script.is_file() {
        return Err(ctx.fail(
            ErrorKind::ManifestInvalid,
            format!(
                "{} installs no script named {}; name the package with {} and the script after it",
                p.packages.join(" "),
                p.command,
                if p.launcher == "uvx" {
                    "--from"
                } else {
                    "--spec"
                }
            ),
        ));
    }
    let _ = std::fs::write(&record, json!({"packages": p.packages}).to_string());
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn uvx_and_pipx_run_commands_are_recognised() {
        let p = parse("uvx", &a(&["mcp-server-time", "--local-timezone", "UTC"])).unwrap();
        assert_eq!(p.packages, ["mcp-server-time"]);
        assert_eq!(p.command, "mcp-server-time");
        assert_eq!(p.args, ["--local-timezone", "UTC"]);
        let p = parse("/usr/local/bin/uvx", &a(&["mcp-server-time@2026.10.19"])).unwrap();
        assert_eq!(p.packages, ["mcp-server-time==2026.10.19"]);
        assert_eq!(p.command, "mcp-server-time");
        let p = parse(
            "uvx",
            &a(&[
                "--from",
                "git-mcp==1",
                "--with",
                "extra",
                "mcp-git",
                "-r",
                ".",
            ]),
        )
        .unwrap();
        assert_eq!(p.packages, ["git-mcp==1", "extra"]);
        assert_eq!(
            (p.command.as_str(), p.args.clone()),
            ("mcp-git", a(&["-r", "."]))
        );
        let p = parse("uv", &a(&["tool", "run", "--from=x", "y"])).unwrap();
        assert_eq!((p.packages, p.command), (a(&["x"]), "y".to_string()));
        let p = parse("pipx", &a(&["run", "--spec", "pkg==2", "app", "--flag"])).unwrap();
        assert_eq!(p.launcher, "pipx run");
        assert_eq!((p.packages, p.command), (a(&["pkg==2"]), "app".to_string()));
        let p = parse("pipx", &a(&["run", "mcp-server-fetch==1.0"])).unwrap();
        assert_eq!(p.command, "mcp-server-fetch");
        // Options that change more than what is installed are not guessed at.
        assert_eq!(parse("uvx", &a(&["--python", "3.12", "x"])), None);
        assert_eq!(parse("pipx", &a(&["install", "x"])), None);
        assert_eq!(parse("uv", &a(&["run", "x"])), None);
        assert_eq!(parse("python3", &a(&["x"])), None);
        assert_eq!(parse("uvx", &a(&[])), None);
    }
}
