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
//! (`installed.json` records the spec and the version installed).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::server::{Unavailable, START_LIMIT};
use crate::jail::{Output, Spec, Stdin};
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

/// The server's cache directory (made, mode 0700).
pub fn directory(root: &Path, server: &str) -> Result<PathBuf, Unavailable> {
    let dir = crate::state::dir()
        .map_err(|e| Unavailable {
            kind: ErrorKind::Internal,
            message: format!("MCP server `{server}`: {e}"),
        })?
        .join("cache/mcp")
        .join(crate::state::project_key(root))
        .join(server);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Unavailable {
            kind: ErrorKind::Internal,
            message: format!("MCP server `{server}`: creating {}: {e}", dir.display()),
        })?;
    Ok(dir)
}

use std::os::unix::fs::DirBuilderExt;

/// Installs `npx.package` into `dir` (unless it is there), in a jail made
/// from the server's `spec`, and returns the program to run.
pub fn install(server: &str, npx: &Npx, dir: &Path, spec: &Spec) -> Result<PathBuf, Unavailable> {
    let fail = |kind, message: String| Unavailable {
        kind,
        message: format!("MCP server `{server}`: {message}"),
    };
    let record = dir.join("installed.json");
    let install = dir.join("package");
    let name = name_of(&npx.package);
    let recorded: Option<Value> = std::fs::read(&record)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if recorded.as_ref().and_then(|r| r.get("package")) == Some(&json!(npx.package)) {
        if let Ok(p) = program(&install, name) {
            return Ok(p);
        }
    }
    if !spec.network {
        return Err(fail(
            ErrorKind::ManifestInvalid,
            format!(
                "`npx -y {}` installs the package from the npm registry: allow it in permissions.network (allow: [registry.npmjs.org])",
                npx.package
            ),
        ));
    }
    let _ = std::fs::remove_dir_all(&install);
    let _ = std::fs::remove_file(&record);
    std::fs::create_dir_all(&install).map_err(|e| {
        fail(
            ErrorKind::Internal,
            format!("creating {}: {e}", install.display()),
        )
    })?;
    let mut s = spec.clone();
    s.argv = vec![
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
    ];
    s.stdin = Stdin::Null;
    s.output = Output::Capture;
    s.limits.wall = START_LIMIT;
    s.fs.write.push(dir.to_path_buf());
    s.env.extend([
        ("npm_config_cache".into(), dir.join("npm-cache").into()),
        ("npm_config_update_notifier".into(), "false".into()),
        ("npm_config_logs_max".into(), "0".into()),
        // A refused registry fails at once, not after minutes of retries.
        ("npm_config_fetch_retries".into(), "0".into()),
    ]);
    trust_system_cas(&mut s);
    let r = crate::run::start(&s).map_err(|e| fail(e.kind(), crate::run::error_chain(&e)))?;
    if r.status.code() != 0 {
        let err = String::from_utf8_lossy(&r.stderr);
        let err = err.trim();
        let cut = (err.len().saturating_sub(1500)..=err.len())
            .find(|i| err.is_char_boundary(*i))
            .unwrap_or(err.len());
        let tail = &err[cut..];
        return Err(fail(
            if r.limits_hit.is_empty() {
                ErrorKind::ExitCode
            } else {
                ErrorKind::ResourceLimit
            },
            format!(
                "installing {} (npx -y) failed with status {}: {tail}",
                npx.package,
                r.status.code()
            ),
        ));
    }
    let p = program(&install, name).map_err(|why| fail(ErrorKind::Internal, why))?;
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

/// The install trusts the system's CA bundle besides node's own (as
/// npm on this machine would, where a TLS-inspecting proxy's CA is
/// installed): node reads it from the jail's HOME. A server whose calls
/// are intercepted already has glovebox's bundle (system CAs included).
fn trust_system_cas(s: &mut Spec) {
    use crate::egress::intercept::SYSTEM_BUNDLES;
    const VAR: &str = "NODE_EXTRA_CA_CERTS";
    if s.home_files
        .iter()
        .any(|h| h.variables.iter().any(|v| v == VAR))
    {
        return;
    }
    let Some(bundle) = SYSTEM_BUNDLES.iter().find_map(|p| std::fs::read(p).ok()) else {
        return;
    };
    s.home_files.push(crate::jail::HomeFile {
        name: "npm-system-ca.pem".into(),
        contents: bundle,
        variables: vec![VAR.to_string()],
    });
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
