//! The effective policy of a tool: what its jail will allow, as a plain
//! struct that `glovebox explain` prints.
//!
//! Policy = the manifest's `permissions` (paths resolved from the root) ∪
//! the sandbox profile baseline ∪ the runtime a python tool needs (its
//! interpreter's installation and its venv, read + execute), with limits
//! from `.glee/config.yml` and the manifest's `timeout_ms`. Nothing else:
//! secrets not declared are not passed, paths not listed are not reachable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::jail::{self, FsAccess, Limits};
use crate::manifest::config::Config;
use crate::manifest::discover::resolve;
use crate::manifest::model::{Exec, Manifest};
use crate::run::python::Interpreter;

/// Errors while working out a tool's policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The entrypoint or cwd is not reachable under the tool's own policy.
    #[error("{what} {path:?} is outside the tool's allowed paths; add it (or a parent) to permissions.fs.read")]
    OutsideAllowed { what: &'static str, path: PathBuf },
    /// The python interpreter or venv could not be found.
    #[error(transparent)]
    Python(#[from] crate::run::python::PythonError),
    /// `permissions.network.allow` holds a pattern that does not parse.
    #[error("permissions.network: {0}")]
    Network(#[from] crate::egress::PatternError),
    /// The sandbox profiles are broken.
    #[error(transparent)]
    Profile(#[from] jail::profile::ProfileError),
}

/// What one tool's jail allows.
#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    /// The tool.
    pub tool: String,
    /// Network access (through the egress proxy, unless `direct_network`).
    pub network: bool,
    /// Only these hosts (normalized patterns), when the manifest narrows
    /// the network to an allowlist.
    pub network_allow: Option<Vec<String>>,
    /// `security.http.allow_private`: the proxy may reach loopback and
    /// private addresses.
    pub allow_private: bool,
    /// `sandbox.direct_network`: the host's network, no proxy.
    pub direct_network: bool,
    /// Read (and execute) paths from `permissions.fs.read`.
    pub read: Vec<PathBuf>,
    /// Read and write paths from `permissions.fs.write`.
    pub write: Vec<PathBuf>,
    /// Runtime paths granted automatically (python interpreter, venv).
    pub runtime: Vec<PathBuf>,
    /// Sandbox profiles applied.
    pub profiles: Vec<&'static str>,
    /// The baseline those profiles grant.
    pub baseline: FsAccess,
    /// Names of the secrets the tool receives.
    pub secrets: Vec<String>,
    /// Resource limits.
    pub limits: Limits,
    /// Whether degraded mode is on (config `sandbox.degraded`).
    pub degraded: bool,
    /// The project's control surface, read-only in the jail even inside
    /// write grants ([`crate::surface`]); empty until
    /// [`Policy::with_surface`].
    pub protected: Vec<PathBuf>,
}

fn mib(n: u64) -> u64 {
    n.saturating_mul(1 << 20)
}

impl Policy {
    /// The policy of `manifest` in the project at `root` with `config`.
    pub fn for_tool(
        root: &Path,
        manifest: &Manifest,
        config: &Config,
    ) -> Result<Policy, PolicyError> {
        let p = &manifest.permissions;
        let read: Vec<PathBuf> = p.fs.read.iter().map(|s| resolve(root, s)).collect();
        let write: Vec<PathBuf> = p.fs.write.iter().map(|s| resolve(root, s)).collect();
        let timeout_ms = match &manifest.exec {
            Exec::Command(c) => c.timeout_ms,
            Exec::Python(py) => py.timeout_ms,
            Exec::Http(h) => h.timeout_ms,
            Exec::AgentCli(a) => a.timeout_ms.unwrap_or(config.limits.timeout_ms),
        };
        let limits = Limits {
            wall: Duration::from_millis(timeout_ms),
            memory_bytes: mib(config.limits.memory_mb),
            pids: config.limits.pids,
            output_bytes: config.limits.output_bytes,
            file_size_bytes: mib(config.limits.file_size_mb),
            ..Limits::default()
        };
        let runtime = match &manifest.exec {
            Exec::Python(py) => Interpreter::locate(root, py)?.grant,
            _ => Vec::new(),
        };
        Ok(Policy {
            tool: manifest.name.clone(),
            network: p.network.enabled(),
            network_allow: p
                .network
                .allowlist()?
                .map(|l| l.patterns().iter().map(ToString::to_string).collect()),
            allow_private: config.security.http.allow_private,
            direct_network: config.sandbox.direct_network,
            read,
            write,
            runtime,
            profiles: jail::profile::names(p.network.enabled()).to_vec(),
            baseline: jail::profile::baseline(p.network.enabled())?,
            secrets: p.secrets.keys().cloned().collect(),
            limits,
            degraded: config.sandbox.degraded,
            protected: Vec::new(),
        })
    }

    /// This policy with the control surface of `project` protected.
    pub fn with_surface(mut self, project: &crate::manifest::project::Project) -> Policy {
        self.protected = crate::surface::paths(project, &self.write);
        self
    }

    /// The filesystem the jail will build for this policy (the private
    /// HOME, made per call, is not in it).
    pub fn tree(&self) -> Result<jail::tree::Tree, jail::tree::TreeError> {
        let mut access = self.baseline.clone();
        let own = self.fs_access();
        access.read.extend(own.read);
        access.write.extend(own.write);
        access.exec.extend(own.exec);
        jail::tree::Tree::build(&access, &self.protected, &[])
    }

    /// The filesystem access to ask the jail for (the jail adds the
    /// baseline itself).
    pub fn fs_access(&self) -> FsAccess {
        FsAccess {
            read: self.read.clone(),
            write: self.write.clone(),
            exec: self.runtime.clone(),
            read_only: Vec::new(),
        }
    }

    /// True when `path` can be read under this policy.
    pub fn can_read(&self, path: &Path) -> bool {
        let b = &self.baseline;
        [
            &self.read,
            &self.write,
            &self.runtime,
            &b.read,
            &b.exec,
            &b.read_only,
            &b.write,
        ]
        .iter()
        .any(|list| jail::fs::covered(path, list))
    }

    /// Errors unless `path` is readable under this policy.
    pub fn require_readable(&self, what: &'static str, path: &Path) -> Result<(), PolicyError> {
        if self.can_read(path) {
            Ok(())
        } else {
            Err(PolicyError::OutsideAllowed {
                what,
                path: path.to_path_buf(),
            })
        }
    }

    /// The network line of `explain`.
    pub fn network_text(&self) -> String {
        if !self.network {
            return "denied (no socket of any kind)".into();
        }
        if self.direct_network {
            return "DIRECT: the host's network, no namespace, no proxy, no SSRF guard (sandbox.direct_network)".into();
        }
        let hosts = match &self.network_allow {
            Some(list) if list.is_empty() => "no host (empty allowlist)".to_string(),
            Some(list) => format!("only {}", list.join(", ")),
            None => "any host".to_string(),
        };
        format!(
            "{hosts}, through glovebox's egress proxy in its own network namespace (SSRF guard: link-local and metadata refused, loopback and private {}, glovebox's own servers refused)",
            if self.allow_private { "allowed by security.http.allow_private" } else { "refused" }
        )
    }

    /// The rules of this policy's egress proxy.
    pub fn egress_rules(&self) -> crate::egress::Rules {
        crate::egress::Rules {
            allow: self
                .network_allow
                .as_ref()
                .and_then(|l| crate::egress::Allowlist::parse(l).ok()),
            allow_private: self.allow_private,
        }
    }

    /// A description for people (`glovebox explain`).
    pub fn explain(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let list = |v: &[PathBuf]| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let _ = writeln!(s, "tool      {}", self.tool);
        let _ = writeln!(s, "network   {}", self.network_text());
        let _ = writeln!(s, "read      {}", list(&self.read));
        let _ = writeln!(s, "write     {}", list(&self.write));
        if !self.runtime.is_empty() {
            let _ = writeln!(
                s,
                "runtime   {} (read + execute, for the interpreter)",
                list(&self.runtime)
            );
        }
        let _ = writeln!(
            s,
            "baseline  profiles {}: {} read+exec, {} read-only, {} writable paths (sandbox-profiles/)",
            self.profiles.join(", "),
            self.baseline.exec.len(),
            self.baseline.read_only.len(),
            self.baseline.write.len()
        );
        let kernel = jail::probe::kernel();
        let mount_ns = kernel.mode == jail::probe::Mode::Namespaces;
        match self.tree() {
            Ok(tree) if mount_ns => {
                let rw: Vec<PathBuf> = tree
                    .writable()
                    .filter(|p| !p.starts_with("/dev"))
                    .map(Path::to_path_buf)
                    .collect();
                let own: Vec<PathBuf> = tree
                    .read_only()
                    .filter(|p| {
                        !self.baseline.exec.iter().any(|b| p.starts_with(b))
                            && !self.baseline.read_only.iter().any(|b| p.starts_with(b))
                            && !tree.protected().any(|x| x == *p)
                    })
                    .map(Path::to_path_buf)
                    .collect();
                let protected: Vec<PathBuf> = tree.protected().map(Path::to_path_buf).collect();
                let _ = writeln!(
                    s,
                    "tree      the jail's own root: only these paths exist (plus the baseline, /proc, /dev/{{null,zero,full,random,urandom}}, a private HOME)"
                );
                let _ = writeln!(s, "  writable  {}", list(&rw));
                let _ = writeln!(s, "  read-only {}", list(&own));
                let _ = writeln!(
                    s,
                    "  protected {} (read-only inside the write grants: .glee/, tools.json, .git/, what tools run)",
                    list(&protected)
                );
                let _ = writeln!(
                    s,
                    "metadata  chmod, chown, utimes, xattrs: only inside writable paths (read-only mounts; ungranted paths do not exist)"
                );
            }
            Ok(tree) => {
                let _ = writeln!(
                    s,
                    "tree      NONE: no mount namespace here; ungranted paths stay visible to stat (landlock still denies reading them)"
                );
                let _ = writeln!(
                    s,
                    "metadata  chmod, chown, utimes, xattrs, inotify, fanotify: refused for every path by seccomp (EPERM)"
                );
                if tree.protected().next().is_some() {
                    let _ = writeln!(
                        s,
                        "protected NOT ENFORCEABLE here ({}): calls are refused unless degraded mode is on",
                        list(&tree.protected().map(Path::to_path_buf).collect::<Vec<_>>())
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(s, "tree      cannot be built: {e}");
            }
        }
        let _ = writeln!(
            s,
            "secrets   {}",
            if self.secrets.is_empty() {
                "(none)".to_string()
            } else {
                self.secrets.join(", ")
            }
        );
        let l = &self.limits;
        let _ = writeln!(
            s,
            "limits    {} ms wall, {} MiB memory, {} processes, {} bytes of output, {} MiB per file",
            l.wall.as_millis(),
            l.memory_bytes >> 20,
            l.pids,
            l.output_bytes,
            l.file_size_bytes >> 20
        );
        let _ = writeln!(
            s,
            "also      private HOME and /proc, no other environment, no terminal, no capabilities"
        );
        if self.degraded {
            let _ = writeln!(
                s,
                "DEGRADED  restrictions this kernel cannot enforce are skipped with a warning"
            );
        }
        s
    }
}
