//! The effective policy of a tool: what its jail will allow, as a plain
//! struct that `glovebox explain` prints.
//!
//! Policy = the manifest's `permissions` (paths resolved from the root,
//! then through their symlinks at every call: a grant written inside the
//! root that now leads outside it is refused unless the manifest names the
//! target itself) ∪
//! the sandbox profile baseline ∪ the runtime a python tool needs (its
//! interpreter's installation and its venv, read + execute), with limits
//! from `.glee/config.yml` and the manifest's `timeout_ms`. Nothing else:
//! secrets not declared are not passed, paths not listed are not reachable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::footprint;
use crate::interpreter::Interpreter;
use crate::jail::{self, FsAccess, Limits};
use crate::manifest::config::Config;
use crate::manifest::discover::resolve;
use crate::manifest::model::{Exec, Manifest};

/// Errors while working out a tool's policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The entrypoint or cwd is not reachable under the tool's own policy.
    #[error("{what} {path:?} is outside the tool's allowed paths; add it (or a parent) to permissions.fs.read")]
    OutsideAllowed { what: &'static str, path: PathBuf },
    /// The working directory does not exist (or is not a directory).
    #[error("cwd {path:?} is not a directory; create it, or change the tool's cwd")]
    NoSuchCwd { path: PathBuf },
    /// A granted path inside the root resolves through a symlink to a
    /// place outside it that the manifest does not name.
    #[error("{what} {path:?} resolves through a symlink to {target:?}, outside the project root; remove the link, or name {target:?} itself in the manifest if that is intended")]
    GrantThroughLink {
        what: String,
        path: String,
        target: PathBuf,
    },
    /// The python interpreter or venv could not be found.
    #[error(transparent)]
    Python(#[from] crate::interpreter::PythonError),
    /// `permissions.network.allow` holds a pattern that does not parse.
    #[error("permissions.network")]
    Network(#[from] crate::net::PatternError),
    /// The sandbox profiles are broken.
    #[error(transparent)]
    Profile(#[from] jail::profile::ProfileError),
}

impl PolicyError {
    /// The Outcome's error kind: the manifest asks for what cannot be
    /// granted.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
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
    /// The same allowlist, parsed once here: the egress proxy's rules are
    /// this value, never a re-parse that could fall back to "any host".
    #[serde(skip)]
    pub allowlist: Option<crate::net::Allowlist>,
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
    /// The placeholder secrets among them and their hosts: the tool gets a
    /// stand-in, the egress proxy adds the value for these hosts only.
    pub placeholder_hosts: Vec<(String, Vec<String>)>,
    /// `security.http.extra_ca_file`, resolved: trusted for the proxy's
    /// TLS to a placeholder secret's hosts too.
    pub extra_ca: Option<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
    /// Whether degraded mode is on (config `sandbox.degraded`).
    pub degraded: bool,
    /// The project's control surface, read-only in the jail even inside
    /// write grants ([`crate::surface`]); empty until
    /// [`Policy::with_surface`].
    pub protected: Vec<PathBuf>,
    /// Names that do not exist yet but that this call could create and
    /// that would change what tools exist or run ([`crate::surface::absent`]):
    /// removed after the call, which then fails; empty until
    /// [`Policy::with_surface`].
    pub absent: Vec<PathBuf>,
    /// What the call is told about its surface (a nested scan that hit
    /// its bound: [`crate::surface::nested`]).
    pub surface_warnings: Vec<String>,
    /// Files people run by hand that the write grants reach
    /// ([`crate::surface::RUN_BY_HAND`]): a call that changed one says so
    /// ([`crate::byhand`]); empty until [`Policy::with_surface`].
    pub reported: Vec<PathBuf>,
}

/// Checks the paths a manifest grants, as they resolve at this call.
struct Grants<'a> {
    root: &'a Path,
    /// The root with its own links resolved.
    real_root: PathBuf,
    /// Absolute paths the manifest names itself, that a read grant may
    /// resolve into.
    named_read: Vec<PathBuf>,
    /// The same for write grants (only `fs.write` entries).
    named_write: Vec<PathBuf>,
}

impl<'a> Grants<'a> {
    fn new(root: &'a Path, manifest: &Manifest) -> Grants<'a> {
        let fs = &manifest.permissions.fs;
        // An absolute entry names itself; one outside the root (a system
        // path such as /lib → /usr/lib) also names where it resolves. One
        // inside the root names only itself: a link there is the very
        // thing being checked.
        let absolute = |list: &[String]| {
            list.iter()
                .filter(|s| crate::manifest::discover::names_itself(s))
                .flat_map(|s| {
                    let p = resolve(root, s);
                    let outside = !p.starts_with(root);
                    let real = outside.then(|| footprint::resolved(&p));
                    std::iter::once(p).chain(real)
                })
                .collect::<Vec<_>>()
        };
        let named_write = absolute(&fs.write);
        let mut named_read = absolute(&fs.read);
        named_read.extend(named_write.iter().cloned());
        Grants {
            root,
            real_root: footprint::resolved(root),
            named_read,
            named_write,
        }
    }

    /// The grant `path` resolved (symlinks followed as far as they exist,
    /// so the jail grants exactly what was checked), or an error when a
    /// path written inside the root leads outside it and the manifest does
    /// not name where it leads.
    fn check(&self, what: &str, path: &str, named: &[PathBuf]) -> Result<PathBuf, PolicyError> {
        let lexical = resolve(self.root, path);
        let real = footprint::resolved(&lexical);
        let inside_written = lexical.starts_with(self.root);
        let inside_real = real.starts_with(&self.real_root);
        if inside_written && !inside_real && !named.iter().any(|n| real.starts_with(n)) {
            return Err(PolicyError::GrantThroughLink {
                what: what.to_string(),
                path: path.to_string(),
                target: real,
            });
        }
        // Inside the root, spelled under the root as written (the jail
        // protects the project's control files by that spelling) — from
        // the one resolution just checked, never a second one (a link
        // swapped in between would be granted unchecked). The jail then
        // holds it following no link below the root (`jail::hold`).
        Ok(match real.strip_prefix(&self.real_root) {
            Ok(rest) if rest.as_os_str().is_empty() => self.root.to_path_buf(),
            Ok(rest) => self.root.join(rest),
            Err(_) => real,
        })
    }
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
        let grants = Grants::new(root, manifest);
        let read =
            p.fs.read
                .iter()
                .map(|s| grants.check("fs.read", s, &grants.named_read))
                .collect::<Result<Vec<_>, _>>()?;
        let write =
            p.fs.write
                .iter()
                .map(|s| grants.check("fs.write", s, &grants.named_write))
                .collect::<Result<Vec<_>, _>>()?;
        let timeout_ms = match &manifest.exec {
            Exec::Command(c) => c.timeout_ms,
            Exec::Python(py) => py.timeout_ms,
            Exec::Http(h) => h.timeout_ms,
            Exec::AgentCli(a) => a.timeout_ms.unwrap_or(config.limits.timeout_ms),
            Exec::Mcp(m) => m.timeout_ms,
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
            Exec::Python(py) => {
                if let Some(v) = &py.venv {
                    grants.check("exec.python.venv", v, &[resolve(root, v)])?;
                }
                Interpreter::locate(root, py)?.grant
            }
            _ => Vec::new(),
        };
        let allowlist = p.network.allowlist()?;
        Ok(Policy {
            tool: manifest.name.clone(),
            network: p.network.enabled(),
            network_allow: allowlist
                .as_ref()
                .map(|l| l.patterns().iter().map(ToString::to_string).collect()),
            allowlist,
            allow_private: config.security.http.allow_private,
            direct_network: config.sandbox.direct_network,
            read,
            write,
            runtime,
            profiles: jail::profile::names(p.network.enabled()).to_vec(),
            baseline: jail::profile::baseline(p.network.enabled())?,
            secrets: p.secrets.keys().cloned().collect(),
            placeholder_hosts: p
                .secrets
                .iter()
                .filter_map(|(n, s)| s.hosts.clone().map(|h| (n.clone(), h)))
                .collect(),
            extra_ca: config
                .security
                .http
                .extra_ca_file
                .as_ref()
                .map(|f| resolve(root, f)),
            limits,
            degraded: config.sandbox.degraded,
            protected: Vec::new(),
            absent: Vec::new(),
            surface_warnings: Vec::new(),
            reported: Vec::new(),
        })
    }

    /// This policy with the control surface of `project` protected.
    pub fn with_surface(mut self, project: &crate::manifest::project::Project) -> Policy {
        let g = crate::surface::guard_full(project, &self.write);
        (self.protected, self.absent, self.surface_warnings) = (g.protected, g.absent, g.warnings);
        self.reported = g.reported;
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

    /// True when `path` (as written, or with its symlinks resolved) can be
    /// read under this policy.
    pub fn can_read(&self, path: &Path) -> bool {
        self.covers(path) || self.covers(&footprint::resolved(path))
    }

    fn covers(&self, path: &Path) -> bool {
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

    /// The rules of this policy's outbound connections (the egress
    /// proxy's, with `I` what it attaches: [`crate::egress::Rules`]).
    pub fn egress_rules<I>(&self) -> crate::net::Rules<I> {
        crate::net::Rules {
            allow: self.allowlist.clone(),
            allow_private: self.allow_private,
            intercept: None,
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
                    "metadata  chmod, chown, utimes, xattrs: only inside writable paths, decided call by call by the supervisor (seccomp user notification); no setuid/setgid bits; inotify, fanotify, inode flags (chattr, file_setattr) refused"
                );
                if tree.protected().next().is_some() {
                    let _ = writeln!(
                        s,
                        "protected {} (read-only by landlock: the write grants are split around them, so no entry can be created or removed directly in a directory holding one, such as the project root)",
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
                self.secrets
                    .iter()
                    .map(|n| {
                        match self.placeholder_hosts.iter().find(|(p, _)| p == n) {
                            Some((_, hosts)) => format!(
                                "{n} (placeholder: the tool gets a stand-in; the egress proxy adds the value only for {})",
                                hosts.join(", ")
                            ),
                            None => format!("{n} (the value itself, in the environment)"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::manifest::project::Project;

    fn policy(root: &Path, read: &[&str]) -> Result<Policy, PolicyError> {
        let dir = root.join(".glee/tools/t");
        std::fs::create_dir_all(&dir).unwrap();
        let read: Vec<String> = read.iter().map(|r| format!("{r:?}")).collect();
        std::fs::write(
            dir.join("tool.yml"),
            format!("name: t\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema: {{type: object}}\noutputs:\n  format: text\nexec:\n  command:\n    entrypoint: cat\npermissions:\n  fs:\n    read: [{}]\n", read.join(", ")),
        )
        .unwrap();
        let project = Project::load(root).unwrap();
        let tool = project.tool("t").unwrap();
        Policy::for_tool(root, &tool.manifest, &Config::default())
    }

    #[test]
    fn a_grant_a_link_leads_out_of_the_root_is_refused_unless_named() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("data/real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("data/cache")).unwrap();
        std::os::unix::fs::symlink("real", root.join("data/inner")).unwrap();
        let out = outside.to_str().unwrap();
        let abs_link = root.join("data/cache");
        let abs_link = abs_link.to_str().unwrap();
        for refused in [&["data/cache"][..], &["data/cache/sub"], &[abs_link]] {
            let e = policy(&root, refused).unwrap_err();
            assert!(
                matches!(e, PolicyError::GrantThroughLink { .. }),
                "{refused:?}: {e}"
            );
        }
        let p = policy(&root, &["data/cache", out]).unwrap();
        assert_eq!(p.read[0], outside);
        // A link that stays inside the root is fine, and granted resolved.
        let p = policy(&root, &["data/inner", "."]).unwrap();
        assert_eq!(p.read, [root.join("data/real"), root.clone()]);
        // A grant that does not exist yet resolves to itself.
        let p = policy(&root, &["data/new"]).unwrap();
        assert_eq!(p.read, [root.join("data/new")]);
        // A root reached through a link keeps its spelling (the jail
        // protects the project's control files by it); links inside are
        // still followed.
        let via = base.join("via");
        std::os::unix::fs::symlink(&root, &via).unwrap();
        let p = policy(&via, &["data/inner", "."]).unwrap();
        assert_eq!(p.read, [via.join("data/real"), via.clone()]);
        assert!(policy(&via, &["data/cache"]).is_err());
    }
}
