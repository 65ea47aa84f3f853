//! `npx -y PACKAGE ARGS…` servers, jailed: the package is installed once,
//! in a jail of its own, into a directory of the server's under
//! glovebox's state (`cache/mcp/PROJECT/SERVER/`), and the server runs
//! the installed program from there, granted read and execute on it only.
//!
//! What `npx -y` does unjailed (fetch into `~/.npm` and run from there)
//! cannot work in a jail: its HOME is private and no jail executes from
//! it. So glovebox splits it in two:
//!
//! 1. The install: `npm install --ignore-scripts PACKAGE` in the server's
//!    jail (its grants, limits and network: the registry is reached only
//!    through the egress proxy, under the manifest's allowlist, e.g.
//!    `registry.npmjs.org`), with the cache directory writable. No code
//!    of the package runs (no install scripts).
//! 2. The server: the package's program (its `bin`, as npx chooses it)
//!    with the manifest's arguments; the directory is read and execute
//!    only, so the server cannot change the code it runs next time.
//!
//! The install is done again when the manifest names another package
//! (`installed.json` records the spec and the version installed); until
//! then every start uses it, without the network. What it shares with
//! the other launchers (the registry checked first, one install at a
//! time, said on stderr) is [`super::install`].

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::install;
use super::server::Unavailable;
use crate::kind::ErrorKind;

/// An `npx -y PACKAGE ARGS…` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npx {
    /// The package spec (`@scope/name@1.2.3`, `name`, …).
    pub package: String,
    /// The arguments after it (the server's own).
    pub args: Vec<String>,
}

/// The `npx -y` command `entrypoint args`, if it is one: `npx` with
/// `-y`/`--yes` and no other option before the package.
pub fn parse(entrypoint: &str, args: &[String]) -> Option<Npx> {
    if Path::new(entrypoint).file_name()? != "npx" {
        return None;
    }
    let mut yes = false;
    for (i, a) in args.iter().enumerate() {
        match a.as_str() {
            "-y" | "--yes" => yes = true,
            "--" => continue,
            other if other.starts_with('-') => return None,
            package => {
                return yes.then(|| Npx {
                    package: package.to_string(),
                    args: args[i + 1..].to_vec(),
                })
            }
        }
    }
    None
}

/// The package's name in a spec (`@scope/name@1.2.3` → `@scope/name`).
pub fn name_of(spec: &str) -> &str {
    match spec.rfind('@') {
        Some(at) if at > 0 => &spec[..at],
        _ => spec,
    }
}

/// The program npx runs for the installed package `dir/node_modules/NAME`
/// (its `bin`: the only one, or the one named after the package).
pub fn program(install: &Path, name: &str) -> Result<PathBuf, String> {
    let pkg = install.join("node_modules").join(name);
    let manifest: Value = std::fs::read(pkg.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| format!("{name} was not installed (no package.json)"))?;
    let base = name.rsplit('/').next().unwrap_or(name);
    let file = match manifest.get("bin") {
        Some(Value::String(f)) => f.clone(),
        Some(Value::Object(bins)) if bins.len() == 1 => bins
            .values()
            .next()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Some(Value::Object(bins)) => bins
            .get(base)
            .and_then(Value::as_str)
            .ok_or_else(|| {
                format!("{name} has several programs and none named {base}; run one with its path")
            })?
            .to_string(),
        _ => {
            return Err(format!(
                "{name} has no program (no `bin` in its package.json)"
            ))
        }
    };
    let path = pkg.join(&file);
    // Its own file: a `bin` leading out of the package is refused.
    let real = path
        .canonicalize()
        .map_err(|e| format!("{name}'s program {file}: {e}"))?;
    let root = pkg.canonicalize().map_err(|e| format!("{name}: {e}"))?;
    if !real.starts_with(&root) {
        return Err(format!("{name}'s program {file} leads out of the package"));
    }
    Ok(real)
}

/// The host `npx -y` installs from.
pub const REGISTRY: &str = "registry.npmjs.org";

/// Installs `npx.package` into `dir` (unless it is there), in a jail made
/// from the server's ([`install::Context`]), and returns the program to
/// run.
pub fn install(ctx: &install::Context<'_>, npx: &Npx, dir: &Path) -> Result<PathBuf, Unavailable> {
    let record = dir.join("installed.json");
    let install = dir.join("package");
    let name = name_of(&npx.package);
    let installed = || -> Option<PathBuf> {
        let recorded: Value = std::fs::read(&record)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())?;
        (recorded.get("package") == Some(&json!(npx.package)))
            .then(|| program(&install, name).ok())
            .flatten()
    };
    if let Some(p) = installed() {
        return Ok(p);
    }
    let what = format!("npx -y {}", npx.package);
    ctx.check_hosts(&what, &[REGISTRY])?;
    let _lock = install::lock(ctx, dir)?;
    // Another glovebox may have installed it while this one waited.
    if let Some(p) = installed() {
        return Ok(p);
    }
    let _ = std::fs::remove_dir_all(&install);
    let _ = std::fs::remove_file(&record);
    std::fs::create_dir_all(&install).map_err(|e| {
        ctx.fail(
            ErrorKind::Internal,
            format!("creating {}: {e}", install.display()),
        )
    })?;
    install::announce(ctx.server, &npx.package);
    ctx.run(
        &format!("{} ({what})", npx.package),
        vec![
            "npm".into(),
            "install".into(),
            "--prefix".into(),
            install.clone().into(),
            "--ignore-scripts".into(),
            "--no-audit".into(),
            "--no-fund".into(),
            "--no-package-lock".into(),
            "--loglevel=error".into(),
            npx.package.clone().into(),
        ],
        dir,
        vec![
            ("npm_config_cache".into(), dir.join("npm-cache").into()),
            ("npm_config_update_notifier".into(), "false".into()),
            ("npm_config_logs_max".into(), "0".into()),
            // A refused registry fails at once, not after minutes of retries.
            ("npm_config_fetch_retries".into(), "0".into()),
        ],
    )?;
    let p = program(&install, name).map_err(|why| ctx.fail(ErrorKind::Internal, why))?;
    let version = std::fs::read(install.join("node_modules").join(name).join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| m.get("version").cloned());
    let _ = std::fs::write(
        &record,
        json!({"package": npx.package, "version": version}).to_string(),
    );
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npx_commands_are_recognised() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse("npx", &a(&["-y", "@m/server-x@1.2.3", "/data"])),
            Some(Npx {
                package: "@m/server-x@1.2.3".into(),
                args: a(&["/data"])
            })
        );
        assert_eq!(
            parse("/usr/bin/npx", &a(&["--yes", "pkg"])).map(|n| n.package),
            Some("pkg".into())
        );
        assert_eq!(parse("npx", &a(&["pkg"])), None, "without -y it asks");
        assert_eq!(parse("npx", &a(&["-y", "--registry=x", "pkg"])), None);
        assert_eq!(parse("node", &a(&["-y", "pkg"])), None);
        assert_eq!(name_of("@m/server-x@1.2.3"), "@m/server-x");
        assert_eq!(name_of("@m/server-x"), "@m/server-x");
        assert_eq!(name_of("pkg@2"), "pkg");
    }
}
