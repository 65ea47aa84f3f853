//! The lint rules on a manifest's permissions: paths inside the root
//! (and not through a link), writes to databases and to the control
//! surface, http permissions, network patterns and the hosts of
//! placeholder secrets.

use std::path::Path;

use serde_json::Value;

use super::Lint;
use crate::manifest::diagnostic::Rule;
use crate::manifest::discover;
use crate::manifest::schema::display_path;
use crate::manifest::yaml::{self, Document};

impl Lint<'_> {
    /// `path-leaves-root` and `grant-through-link`.
    pub(super) fn paths(&mut self, doc: &Document) {
        let mut paths: Vec<(String, &str)> = Vec::new();
        for list in ["read", "write"] {
            let pointer = format!("/permissions/fs/{list}");
            if let Some(items) = doc.value.pointer(&pointer).and_then(Value::as_array) {
                for (i, item) in items.iter().enumerate() {
                    if let Some(path) = item.as_str() {
                        paths.push((format!("{pointer}/{i}"), path));
                    }
                }
            }
        }
        for pointer in [
            "/exec/command/cwd",
            "/exec/python/cwd",
            "/exec/python/venv",
            "/exec/mcp/cwd",
        ] {
            if let Some(path) = doc.value.pointer(pointer).and_then(Value::as_str) {
                paths.push((pointer.to_owned(), path));
            }
        }
        let real_root = discover::resolved(self.root);
        for (pointer, path) in paths {
            if discover::leaves_root(self.root, path) {
                if pointer != "/exec/python/venv" {
                    let message = format!(
                        "`{}` is `{path}`, which resolves outside the project root; keep paths under the root or make sure this is intended",
                        display_path(&pointer)
                    );
                    self.report(Rule::PathLeavesRoot, doc.positions.value(&pointer), message);
                }
                continue;
            }
            // Inside the root as written: does a symlink lead elsewhere?
            let lexical = discover::resolve(self.root, path);
            let real = discover::resolved(&lexical);
            let expected = lexical
                .strip_prefix(self.root)
                .map(|rel| real_root.join(rel))
                .unwrap_or_else(|_| lexical.clone());
            if real != expected && real != lexical {
                let outside = !real.starts_with(&real_root);
                let message = format!(
                    "`{}` is `{path}`, which goes through a symlink to {}{}; grant the real path instead, so a changed link cannot change what the tool may reach",
                    display_path(&pointer),
                    real.display(),
                    if outside {
                        " (outside the project root: refused at run time unless the manifest names that path itself)"
                    } else {
                        ""
                    }
                );
                self.report(
                    Rule::GrantThroughLink,
                    doc.positions.value(&pointer),
                    message,
                );
            }
        }
    }

    /// `database-file-grant`: a write grant of a SQLite database file alone
    /// lets SQLite open it but not create its journal beside it, so every
    /// write fails with "unable to open database file". Said here, with the
    /// grant that works (the directory), instead of widening the grant.
    pub(super) fn database_file_writes(&mut self, doc: &Document) {
        for (pointer, path) in write_grants(doc) {
            let resolved = discover::resolve(self.root, path);
            if !is_sqlite_database(&resolved) {
                continue;
            }
            let name = resolved
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dir = Path::new(path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| format!("{}/", p.display()))
                .unwrap_or_else(|| ".".into());
            let message = format!(
                "`{}` is `{path}`, a SQLite database: SQLite also creates `{name}-journal` (or `-wal` and `-shm`) beside it, which a grant of the file alone does not allow (writes fail with 'unable to open database file'); grant its directory (`{dir}`) instead",
                display_path(&pointer)
            );
            self.report(
                Rule::DatabaseFileGrant,
                doc.positions.value(&pointer),
                message,
            );
        }
    }

    /// `write-on-control-surface`: `.glee/` and a root `tools.json` decide
    /// which tools exist and what they may do, so no jail can change them,
    /// write grant or not ([`crate::surface`]). A manifest asking for it
    /// is told so instead of finding out from a failed write.
    pub(super) fn control_surface_writes(&mut self, doc: &Document) {
        for (pointer, path) in write_grants(doc) {
            let lexical = discover::resolve(self.root, path);
            let Ok(rel) = lexical.strip_prefix(self.root) else {
                continue;
            };
            let first = rel.components().next().map(|c| c.as_os_str().to_owned());
            let protected = match first.as_deref().and_then(|c| c.to_str()) {
                Some(".glee") => Some("`.glee/`"),
                Some("tools.json") if rel.components().count() == 1 => {
                    Some("the root `tools.json`")
                }
                _ => None,
            };
            if let Some(what) = protected {
                let message = format!(
                    "`{}` is `{path}`, but {what} is glovebox's control surface and stays read-only in every jail, write grant or not; write elsewhere (for instance a directory of the project's own)",
                    display_path(&pointer)
                );
                self.report(
                    Rule::WriteOnControlSurface,
                    doc.positions.value(&pointer),
                    message,
                );
            }
        }
    }

    /// `http-with-fs` and `http-without-network`.
    pub(super) fn http_permissions(&mut self, doc: &Document) {
        if doc.value.pointer("/exec/http").is_none() {
            return;
        }
        let non_empty = |p: &str| {
            doc.value
                .pointer(p)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        };
        if non_empty("/permissions/fs/read") || non_empty("/permissions/fs/write") {
            self.report(
                Rule::HttpWithFs,
                doc.positions.key("/permissions/fs"),
                "http tools run no code, so filesystem permissions grant nothing; remove permissions.fs",
            );
        }
        let network = doc.value.pointer("/permissions/network");
        if !matches!(network, Some(Value::Bool(true)) | Some(Value::Object(_))) {
            let pointer = if doc.value.pointer("/permissions/network").is_some() {
                "/permissions/network"
            } else {
                "/exec/http"
            };
            self.report(
                Rule::HttpWithoutNetwork,
                doc.positions.key(pointer),
                "http tool without `permissions.network: true` will be refused at run time; set it",
            );
        }
    }

    /// `network-pattern-invalid`: each `permissions.network.allow` entry
    /// must be `host`, `host:port`, `*.suffix` or an IP literal.
    pub(super) fn network_patterns(&mut self, doc: &Document) {
        let Some(list) = doc
            .value
            .pointer("/permissions/network/allow")
            .and_then(Value::as_array)
        else {
            return;
        };
        for (i, item) in list.iter().enumerate() {
            let Some(text) = item.as_str() else { continue };
            if let Err(e) = crate::net::Pattern::parse(text) {
                let pointer = format!("/permissions/network/allow/{i}");
                self.report(
                    Rule::NetworkPatternInvalid,
                    doc.positions.value(&pointer),
                    format!("`permissions.network.allow[{i}]`: {e}"),
                );
            }
        }
    }

    /// `secret-hosts-outside-network` (each `permissions.secrets.NAME.hosts`
    /// entry must parse and lie inside the network allowlist),
    /// `secret-without-hosts` (a networked tool that runs code and gets a
    /// secret's value) and `secret-hosts-on-http-tool`.
    pub(super) fn secret_hosts(&mut self, doc: &Document) {
        let Some(secrets) = doc
            .value
            .pointer("/permissions/secrets")
            .and_then(Value::as_object)
        else {
            return;
        };
        let network = doc.value.pointer("/permissions/network");
        // None: any host; Some(list): only those (`false` is the empty list).
        let allow: Option<crate::net::Allowlist> = match network {
            None | Some(Value::Bool(false)) => Some(crate::net::Allowlist::default()),
            Some(Value::Bool(true)) => None,
            Some(v) => {
                let list = v.get("allow").unwrap_or(v);
                let texts: Vec<&str> = list
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let parsed: Vec<&str> = texts
                    .into_iter()
                    .filter(|t| crate::net::Pattern::parse(t).is_ok())
                    .collect();
                crate::net::Allowlist::parse(&parsed).ok()
            }
        };
        let networked = !matches!(network, None | Some(Value::Bool(false)));
        let runs_code = doc.value.get("kind").and_then(Value::as_str) != Some("http");
        for (name, spec) in secrets {
            let Some(hosts) = spec.get("hosts").and_then(Value::as_array) else {
                if networked && runs_code {
                    self.report(
                        Rule::SecretWithoutHosts,
                        doc.positions
                            .key(&yaml::pointer_of(["permissions", "secrets", name])),
                        format!(
                            "secret {name} reaches the tool's code as its value, which the code can send to any host it reaches; add `hosts: [the hosts it is for]` and the code gets a placeholder, the egress proxy adding the value for those hosts only"
                        ),
                    );
                }
                continue;
            };
            if !runs_code {
                self.report(
                    Rule::SecretHostsOnHttpTool,
                    doc.positions.key(&yaml::pointer_of([
                        "permissions",
                        "secrets",
                        name,
                        "hosts",
                    ])),
                    format!(
                        "`hosts` of secret {name} changes nothing on an http tool: glovebox sends the request itself and its code never holds the value; remove it"
                    ),
                );
                continue;
            }
            for (i, item) in hosts.iter().enumerate() {
                let Some(text) = item.as_str() else { continue };
                let pointer =
                    yaml::pointer_of(["permissions", "secrets", name, "hosts", &i.to_string()]);
                let message = match crate::net::Pattern::parse(text) {
                    Err(e) => format!("`permissions.secrets.{name}.hosts[{i}]`: {e}"),
                    Ok(p) => {
                        let inside = match &allow {
                            None => true,
                            Some(list) => list.patterns().iter().any(|a| a.covers(&p)),
                        };
                        if inside {
                            continue;
                        }
                        format!(
                            "`permissions.secrets.{name}.hosts[{i}]` ({p}) is outside the tool's network allowlist, so the value could never be sent there; add it to permissions.network.allow or narrow the secret's hosts"
                        )
                    }
                };
                self.report(
                    Rule::SecretHostsOutsideNetwork,
                    doc.positions.value(&pointer),
                    message,
                );
            }
        }
    }
}

/// A SQLite database: an existing file starting with SQLite's header, or a
/// name with one of its usual extensions.
fn is_sqlite_database(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    let header = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == b"SQLite format 3\0")
        .unwrap_or(false);
    if header {
        return true;
    }
    if path.is_dir() {
        return false;
    }
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "db" | "sqlite" | "sqlite3" | "db3"))
}

/// The `fs.write` entries of `doc` that are strings, with their JSON
/// pointers.
fn write_grants(doc: &Document) -> Vec<(String, &str)> {
    doc.value
        .pointer("/permissions/fs/write")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    v.as_str()
                        .map(|p| (format!("/permissions/fs/write/{i}"), p))
                })
                .collect()
        })
        .unwrap_or_default()
}
