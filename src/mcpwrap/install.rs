//! A package a launcher fetches at start (`npx -y`, `uvx`, `pipx run`),
//! installed once into the server's cache directory, in a jail made from
//! the server's own: what [`super::npx`] and [`super::pypi`] share.
//!
//! - Its hosts first: the registry must be reachable through the egress
//!   proxy under the manifest's allowlist, or nothing is tried and the
//!   fix is named (in the words of the interface the server came from:
//!   [`Words`]).
//! - One install at a time per directory: a lock file held while it is
//!   checked and made (a client often starts the same server twice at
//!   once: a probe and the session), so a second glovebox waits and uses
//!   the first one's install.
//! - Said on stderr: `installing X (first start only)`.
//! - Its failure quotes the installer's output made printable
//!   ([`super::relayed`]) and the egress proxy's refusals.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::npx::Npx;
use super::pypi::Pypi;
use super::server::Unavailable;
use super::wrap::Words;
use crate::egress::Log;
use crate::jail::{Output, Spec, Stdin};
use crate::kind::ErrorKind;
use crate::net::{Allowlist, Host};

/// An install longer than this is cut (`timeout`): a registry that
/// answers slowly, a large package.
pub const INSTALL_LIMIT: Duration = Duration::from_secs(300);

/// A launcher that fetches its package at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// `npx -y PACKAGE`.
    Npx(Npx),
    /// `uvx PACKAGE`, `pipx run PACKAGE`.
    Pypi(Pypi),
}

/// A package installed: the program to run, and the directory of its
/// code (granted read and execute to the server).
#[derive(Debug, Clone)]
pub struct Installed {
    /// The program (the package's `bin`, its console script).
    pub program: PathBuf,
    /// The installed code.
    pub code: PathBuf,
}

impl Launcher {
    /// The launcher `entrypoint args` is, if it is one glovebox installs
    /// for.
    pub fn parse(entrypoint: &str, args: &[String]) -> Option<Launcher> {
        super::npx::parse(entrypoint, args)
            .map(Launcher::Npx)
            .or_else(|| super::pypi::parse(entrypoint, args).map(Launcher::Pypi))
    }

    /// The server's own arguments (after the package).
    pub fn args(&self) -> &[String] {
        match self {
            Launcher::Npx(n) => &n.args,
            Launcher::Pypi(p) => &p.args,
        }
    }

    /// The package's name, as a server's default name: `@scope/name@1`
    /// → `name`, `mcp-server-time==1` → `mcp-server-time`.
    pub fn package_name(&self) -> String {
        match self {
            Launcher::Npx(n) => {
                let name = super::npx::name_of(&n.package);
                name.rsplit('/').next().unwrap_or(name).to_string()
            }
            Launcher::Pypi(p) => p.command.clone(),
        }
    }

    /// The hosts its install reaches.
    pub fn hosts(&self) -> &'static [&'static str] {
        match self {
            Launcher::Npx(_) => &[super::npx::REGISTRY],
            Launcher::Pypi(_) => &super::pypi::HOSTS,
        }
    }

    /// What it installs, as a key: the packages named.
    fn key(&self) -> String {
        use sha2::{Digest, Sha256};
        let packages = match self {
            Launcher::Npx(n) => vec![n.package.clone()],
            Launcher::Pypi(p) => p.packages.clone(),
        };
        hex::encode(Sha256::digest(packages.join("\n").as_bytes()))[..16].to_string()
    }

    /// The directory its install is kept in (made, mode 0700), under
    /// glovebox's state: the server's own, `cache/mcp/PROJECT/SERVER`, for
    /// a project's manifest; for a server `glovebox wrap` serves from a
    /// private project, `cache/mcp/wrap/SERVER-KEY` (KEY: the packages),
    /// shared by every wrap of the same packages whatever its other
    /// flags — so that `wrap --prepare --allow-host REGISTRY` installs
    /// once and a later `wrap` without the registry runs it.
    pub fn directory(&self, root: &Path, server: &str) -> Result<PathBuf, Unavailable> {
        use std::os::unix::fs::DirBuilderExt;
        let fail = |message: String| Unavailable {
            kind: ErrorKind::Internal,
            message: format!("MCP server `{server}`: {message}"),
        };
        let cache = crate::state::dir()
            .map_err(|e| fail(e.to_string()))?
            .join("cache/mcp");
        let dir = match Words::of(root) {
            Words::Flags => cache.join("wrap").join(format!("{server}-{}", self.key())),
            Words::Manifest => cache.join(crate::state::project_key(root)).join(server),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
        Ok(dir)
    }

    /// Installs the package into `dir` unless it is there.
    pub fn install(&self, ctx: &Context<'_>, dir: &Path) -> Result<Installed, Unavailable> {
        Ok(match self {
            Launcher::Npx(n) => Installed {
                program: super::npx::install(ctx, n, dir)?,
                code: dir.join("package"),
            },
            Launcher::Pypi(p) => Installed {
                program: super::pypi::install(ctx, p, dir)?,
                code: dir.join("venv"),
            },
        })
    }
}

/// What an install needs from the server's start.
pub struct Context<'a> {
    /// The server's name.
    pub server: &'a str,
    /// The server's jail; the install runs in a copy of it.
    pub spec: &'a Spec,
    /// The hosts the server may reach (`None`: any, when it has the
    /// network at all).
    pub allow: Option<&'a Allowlist>,
    /// How fixes are worded.
    pub words: Words,
    /// The egress proxy's log of the server's jail (its refusals are
    /// quoted when the install fails).
    pub log: Option<&'a Log>,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Context<'_> {
    /// An error about the server.
    pub fn fail(&self, kind: ErrorKind, message: String) -> Unavailable {
        Unavailable {
            kind,
            message: format!("MCP server `{}`: {message}", self.server),
        }
    }

    /// Refuses before anything runs when a host of `hosts` (where
    /// `what` installs from) is out of the server's reach.
    pub fn check_hosts(&self, what: &str, hosts: &[&str]) -> Result<(), Unavailable> {
        let missing: Vec<&str> = if !self.spec.network {
            hosts.to_vec()
        } else {
            hosts
                .iter()
                .copied()
                .filter(|h| {
                    self.allow
                        .is_some_and(|a| Host::parse(h).is_none_or(|host| !a.permits(&host, 443)))
                })
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        Err(self.fail(
            ErrorKind::ManifestInvalid,
            format!(
                "`{what}` installs the package from {}, which the server may not reach: {}",
                missing.join(" and "),
                self.words.allow_hosts(&missing)
            ),
        ))
    }

    /// Runs `argv` in a copy of the server's jail with `dir` writable,
    /// `env` added, the system's CA bundle trusted; `what` names the
    /// install in its error.
    pub fn run(
        &self,
        what: &str,
        argv: Vec<std::ffi::OsString>,
        dir: &Path,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    ) -> Result<(), Unavailable> {
        let mut s = self.spec.clone();
        s.argv = argv;
        s.stdin = Stdin::Null;
        s.output = Output::Capture;
        s.limits.wall = INSTALL_LIMIT;
        s.fs.write.push(dir.to_path_buf());
        s.env.extend(env);
        trust_system_cas(&mut s);
        let before = self.refused();
        let r =
            crate::run::start(&s).map_err(|e| self.fail(e.kind(), crate::run::error_chain(&e)))?;
        if r.status.code() == 0 {
            return Ok(());
        }
        let output = super::relayed(&String::from_utf8_lossy(&r.stderr));
        let refused: Vec<String> = self.refused().into_iter().skip(before.len()).collect();
        let proxy = if refused.is_empty() {
            String::new()
        } else {
            format!(
                "; the egress proxy refused: {} ({})",
                refused.join("; "),
                self.words.allow_hosts_hint()
            )
        };
        Err(self.fail(
            if r.limits_hit.is_empty() {
                ErrorKind::ExitCode
            } else {
                ErrorKind::ResourceLimit
            },
            format!(
                "installing {what} failed with status {}{proxy}: {output}",
                r.status.code()
            ),
        ))
    }

    /// The proxy's refusals so far.
    fn refused(&self) -> Vec<String> {
        self.log
            .map(|l| {
                l.connections()
                    .0
                    .iter()
                    .filter_map(|c| c.refusal())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Says on stderr that `what` is being installed, once per install.
pub fn announce(server: &str, what: &str) {
    eprintln!("glovebox: MCP server `{server}`: installing {what} (first start only)");
}

/// The lock of the install directory `dir` (`dir/.lock`), held until
/// dropped; waits up to [`INSTALL_LIMIT`] for another glovebox's
/// install, saying so once.
pub fn lock(
    ctx: &Context<'_>,
    dir: &Path,
) -> Result<nix::fcntl::Flock<std::fs::File>, Unavailable> {
    use nix::fcntl::{Flock, FlockArg};
    let path = dir.join(".lock");
    let deadline = Instant::now() + INSTALL_LIMIT;
    let mut said = false;
    loop {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| {
                ctx.fail(
                    ErrorKind::Internal,
                    format!("opening {}: {e}", path.display()),
                )
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Ok(held),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                if !said {
                    eprintln!(
                        "glovebox: MCP server `{}`: waiting for another glovebox that is installing its package",
                        ctx.server
                    );
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err((_, e)) => {
                return Err(ctx.fail(
                    ErrorKind::Internal,
                    format!("locking {}: {e}", path.display()),
                ))
            }
        }
    }
}

/// The install trusts the system's CA bundle besides its runtime's own
/// (as npm or pip on this machine would, where a TLS-inspecting proxy's
/// CA is installed): node reads it from the jail's HOME
/// (`NODE_EXTRA_CA_CERTS`), pip from `PIP_CERT`. A server whose calls are
/// intercepted already has glovebox's bundle (system CAs included).
fn trust_system_cas(s: &mut Spec) {
    use crate::egress::intercept::SYSTEM_BUNDLES;
    const VARS: [&str; 2] = ["NODE_EXTRA_CA_CERTS", "PIP_CERT"];
    if s.home_files
        .iter()
        .any(|h| h.variables.iter().any(|v| VARS.contains(&v.as_str())))
    {
        return;
    }
    let Some(bundle) = SYSTEM_BUNDLES.iter().find_map(|p| std::fs::read(p).ok()) else {
        return;
    };
    s.home_files.push(crate::jail::HomeFile {
        name: "install-system-ca.pem".into(),
        contents: bundle,
        variables: VARS.iter().map(|v| v.to_string()).collect(),
    });
}
