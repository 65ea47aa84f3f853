//! Approvals bound to content.
//!
//! Approving a tool records a [`Fingerprint`] of everything the call runs
//! and is granted: the sha256 of every file of its [`crate::footprint`]
//! (the manifest, an entrypoint or script argument inside the root, a
//! python module with its package chain and native extensions, the venv's
//! `pyvenv.cfg` and start-up files), what is at each name that could
//! shadow them (absent, a directory, a link), the venv's interpreter with
//! its links resolved, where each granted path (`fs.read`,
//! `fs.write`, `cwd`, `venv`) resolves to, and the digest of what clients
//! are offered as `glovebox approve` showed it ([`crate::offer`]: every
//! tool's name, description, schemas, annotations and `_meta`, a wrapped
//! server's tools included). Any change voids the approval,
//! and [`Store::status`] names what changed. The project modules python
//! code imports are covered as [`crate::footprint`] finds them (import
//! statements, and what warm workers were seen loading); a file the code
//! merely opens on its own is data and is not covered. Records live in
//! glovebox's state directory (see [`crate::state`]), in
//! `approvals/<project key>.json`, out of every jail's reach; signed
//! approvals ([`signed`]) can also come from a read-only directory, for
//! replicas that share one approval.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::footprint;
use crate::manifest::discover::resolve;
use crate::manifest::model::Exec;
use crate::manifest::project::Tool;
use crate::state::{self, StateError};

pub mod signed;

/// Errors reading or writing approvals.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// The state directory.
    #[error(transparent)]
    State(#[from] StateError),
    /// The approvals file is not valid JSON.
    #[error("approvals file {path:?} is corrupt; remove it to start over")]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl ApprovalError {
    /// The Outcome's error kind: the approval store failed.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::Internal
    }
}

/// What an approval is bound to: everything the call runs or is granted
/// (see [`crate::footprint`] for the exact list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// sha256 of each file the tool runs, by path relative to the root.
    pub files: BTreeMap<String, String>,
    /// What is at each path that must stay unchanged (shadowing names,
    /// package directories, venv links): `absent`, `dir`, `file`, or
    /// `link:TARGET`, by path relative to the root.
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
    /// Where each granted path resolves to now (symlinks followed as far
    /// as they exist): `fs.read P`, `fs.write P`, `cwd`, `venv` → path.
    #[serde(default)]
    pub grants: BTreeMap<String, String>,
    /// The venv's interpreter, its `bin/python` links resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<String>,
    /// The digest of what `glovebox approve` showed of what clients are
    /// given ([`crate::offer::shown`]): the tool's rendering (name,
    /// description, schemas, annotations, `_meta`), or for an MCP server
    /// (`exec.mcp`) the rendering of every tool of its list it offers
    /// (its text the server's), so that what an agent gets is what a
    /// person read, and a server that changes what it offers after its
    /// approval needs a new one (see `crate::mcpwrap`). An approval made
    /// before glovebox recorded it has none, and is void.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<String>,
}

/// The name an approval of `tool` is recorded under: its own, or for a
/// tool of an MCP server, the server's (one approval covers the server
/// and the tool list it served).
pub fn key(tool: &Tool) -> &str {
    match &tool.manifest.exec {
        Exec::Mcp(m) => m.wrapped.as_ref().map_or(&tool.name, |w| &w.server),
        _ => &tool.name,
    }
}

/// One recorded approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The content approved.
    pub fingerprint: Fingerprint,
    /// Who approved.
    pub approver: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

/// Whether a tool's approval holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Approved, and nothing it covers changed since.
    Approved,
    /// Never approved (or revoked).
    Missing,
    /// Approved once; these changes voided it (one line each).
    Changed(Vec<String>),
}

/// The files whose content an approval hashes (see
/// [`crate::footprint::of`]).
pub fn covered_files(root: &Path, tool: &Tool) -> Vec<PathBuf> {
    footprint::of(root, tool).files
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// What is at `p` now, without following a final symlink.
fn kind_of(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Err(_) => "absent".into(),
        Ok(m) if m.file_type().is_symlink() => format!(
            "link:{}",
            std::fs::read_link(p)
                .map(|t| t.display().to_string())
                .unwrap_or_default()
        ),
        Ok(m) if m.is_dir() => "dir".into(),
        Ok(_) => "file".into(),
    }
}

/// Every path the tool is granted, by what the manifest says.
fn grant_paths(root: &Path, tool: &Tool) -> Vec<(String, PathBuf)> {
    let m = &tool.manifest;
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for r in &m.permissions.fs.read {
        out.push((format!("fs.read {r}"), resolve(root, r)));
    }
    for w in &m.permissions.fs.write {
        out.push((format!("fs.write {w}"), resolve(root, w)));
    }
    match &m.exec {
        Exec::Command(c) => out.push(("cwd".into(), resolve(root, &c.cwd))),
        Exec::Python(p) => {
            out.push(("cwd".into(), resolve(root, &p.cwd)));
            if let Some(v) = &p.venv {
                out.push(("venv".into(), resolve(root, v)));
            }
        }
        Exec::AgentCli(a) => out.push(("cwd".into(), PathBuf::from(&a.dir))),
        Exec::Mcp(m) => out.push(("cwd".into(), resolve(root, &m.cwd))),
        Exec::Http(_) => {}
    }
    out
}

/// The tool's current fingerprint (every file read and hashed now: what
/// an approval is checked against).
pub fn fingerprint(root: &Path, tool: &Tool) -> Result<Fingerprint, ApprovalError> {
    fingerprint_of(root, tool, &footprint::of(root, tool))
}

/// [`fingerprint`] with the tool's footprint `fp` as [`footprint::of`]
/// found it (a caller that needs the footprint too finds it once).
pub fn fingerprint_of(
    root: &Path,
    tool: &Tool,
    fp: &footprint::Footprint,
) -> Result<Fingerprint, ApprovalError> {
    let mut fp = fingerprint_hashing(root, tool, fp, state::file_sha256)?;
    fp.offered = Some(offered(tool));
    Ok(fp)
}

/// The tool's fingerprint with each file's hash reused while the file's
/// stamp (device, inode, size, mtime and ctime to the nanosecond) is the
/// one it was hashed under: for the key of a warm worker, which checks the
/// same stamps before every call anyway (what clients are offered is not
/// in it: the manifest's hash covers it). Not for approvals
/// ([`fingerprint`] reads every file). `fp` is the tool's footprint as
/// [`footprint::of`] finds it now (the caller watches its files too).
pub fn fingerprint_by_stamp(
    root: &Path,
    tool: &Tool,
    fp: &footprint::Footprint,
) -> Result<Fingerprint, ApprovalError> {
    fingerprint_hashing(root, tool, fp, stamped_sha256)
}

/// What identifies a file's content without reading it.
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// Files hashed by stamp: at most this many are remembered.
const STAMPED_MAX: usize = 4096;

/// The sha256 of `path`, reused while its stamp is unchanged. A hash is
/// remembered only when the stamp was the same before and after reading,
/// so a file written meanwhile is hashed again next time.
fn stamped_sha256(path: &Path) -> Result<String, StateError> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock, PoisonError};
    type Cache = Mutex<HashMap<PathBuf, (Stamp, String)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let before = stamp(path);
    if let Some(s) = before {
        let known = cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((was, hash)) = known.get(path) {
            if *was == s {
                return Ok(hash.clone());
            }
        }
    }
    let hash = state::file_sha256(path)?;
    if let (Some(s), true) = (before, before == stamp(path)) {
        let mut known = cache.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= STAMPED_MAX {
            known.clear();
        }
        known.insert(path.to_path_buf(), (s, hash.clone()));
    }
    Ok(hash)
}

fn fingerprint_hashing(
    root: &Path,
    tool: &Tool,
    fp: &footprint::Footprint,
    hash: impl Fn(&Path) -> Result<String, StateError>,
) -> Result<Fingerprint, ApprovalError> {
    let mut files = BTreeMap::new();
    for f in &fp.files {
        files.insert(rel(root, f), hash(f)?);
    }
    if let Exec::Mcp(m) = &tool.manifest.exec {
        for f in mcp_code_outside(root, m) {
            files.insert(f.display().to_string(), hash(&f)?);
        }
    }
    let paths = fp
        .paths
        .iter()
        .map(|p| (rel(root, p), kind_of(p)))
        .collect();
    let grants = grant_paths(root, tool)
        .into_iter()
        .map(|(k, p)| (k, footprint::resolved(&p).display().to_string()))
        .collect();
    let interpreter = match &tool.manifest.exec {
        Exec::Python(p) => p.venv.as_ref().map(|v| {
            let bin = resolve(root, v).join("bin");
            let program = ["python3", "python"]
                .iter()
                .map(|n| bin.join(n))
                .find(|p| p.exists())
                .unwrap_or_else(|| bin.join("python3"));
            footprint::resolved(&program).display().to_string()
        }),
        _ => None,
    };
    Ok(Fingerprint {
        files,
        paths,
        grants,
        interpreter,
        offered: None,
    })
}

/// The digest of what clients are given of `tool`, as `approve` shows it
/// ([`crate::offer::shown`]); an MCP server's is the one its wrapper
/// recorded when it read the server's list ([`Wrapped::served`], empty
/// when it could not).
///
/// [`Wrapped::served`]: crate::manifest::model::Wrapped::served
pub fn offered(tool: &Tool) -> String {
    match &tool.manifest.exec {
        Exec::Mcp(m) => m
            .wrapped
            .as_ref()
            .map(|w| w.served.clone())
            .unwrap_or_default(),
        _ => crate::offer::shown([&tool.manifest]).digest,
    }
}

/// An MCP server's code outside the project (a server installed under
/// a read grant elsewhere: `~/.mcp-servers/…/index.js`, a venv's script),
/// which [`footprint`] does not cover: the entrypoint and each argument
/// naming an existing regular file outside the root, and the
/// `package.json` of the npm package such a file belongs to (its name
/// and version). Absolute paths, hashed like the project's files.
pub fn mcp_code_outside(root: &Path, m: &crate::manifest::model::McpExec) -> Vec<PathBuf> {
    let cwd = resolve(root, &m.cwd);
    let real_root = footprint::resolved(root);
    let mut out: Vec<PathBuf> = Vec::new();
    let named = (m.entrypoint.contains('/'))
        .then(|| resolve(root, &m.entrypoint))
        .into_iter()
        .chain(
            m.args
                .iter()
                .filter(|a| !a.starts_with('-') && !a.contains("${"))
                .map(|a| resolve(&cwd, a)),
        );
    for p in named {
        let real = footprint::resolved(&p);
        if real.starts_with(&real_root) || !real.is_file() {
            continue;
        }
        // The package the file belongs to: the directory below the
        // nearest `node_modules` (one more level for a `@scope`).
        let parts: Vec<_> = real.components().collect();
        if let Some(i) = parts.iter().rposition(|c| c.as_os_str() == "node_modules") {
            let scoped = parts
                .get(i + 1)
                .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('@'));
            let end = i + if scoped { 3 } else { 2 };
            if end <= parts.len() {
                let package: PathBuf = parts[..end].iter().collect();
                let manifest = package.join("package.json");
                if manifest.is_file() && !out.contains(&manifest) {
                    out.push(manifest);
                }
            }
        }
        if !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

/// What differs between the approved fingerprint and the current one, one
/// line per change, each naming the path.
pub fn changes(approved: &Fingerprint, now: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    let both = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| {
        let mut keys: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter_map(|k| {
                let (x, y) = (a.get(&k).cloned(), b.get(&k).cloned());
                (x != y).then_some((k, x, y))
            })
            .collect::<Vec<_>>()
    };
    for (k, was, is) in both(&approved.files, &now.files) {
        out.push(match (was, is) {
            (Some(_), Some(_)) => format!("{k} changed"),
            (None, _) => format!("{k} appeared"),
            (_, None) => format!("{k} was removed"),
        });
    }
    for (k, was, is) in both(&approved.paths, &now.paths) {
        let say = |v: Option<String>| v.unwrap_or_else(|| "not recorded".into());
        out.push(format!("{k} is now {} (was {})", say(is), say(was)));
    }
    for (k, was, is) in both(&approved.grants, &now.grants) {
        let say = |v: Option<String>| v.unwrap_or_else(|| "not granted".into());
        out.push(format!(
            "{k} now resolves to {} (was {})",
            say(is),
            say(was)
        ));
    }
    if approved.offered != now.offered {
        out.push(match (approved.offered.as_deref(), now.offered.as_deref()) {
            (_, Some("")) => "the MCP server's tool list could not be read (the server did not start)".into(),
            (None, _) => "the approval does not record what clients are offered (made by an older glovebox, whose prompt showed less); approve it again".into(),
            _ => "what clients are offered changed (a tool added or removed, or a name, description, schema, annotation or _meta changed)".into(),
        });
    }
    if approved.interpreter != now.interpreter {
        out.push(format!(
            "the venv's interpreter is now {} (was {})",
            now.interpreter.as_deref().unwrap_or("none"),
            approved.interpreter.as_deref().unwrap_or("none")
        ));
    }
    out
}

/// The approvals of one project.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    records: BTreeMap<String, Record>,
}

impl Store {
    /// Opens the store of the project at `root` (empty if none yet).
    pub fn open(root: &Path) -> Result<Store, ApprovalError> {
        let path = state::dir()?
            .join("approvals")
            .join(format!("{}.json", state::project_key(root)));
        let records = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| ApprovalError::Corrupt {
                    path: path.clone(),
                    source,
                })?
            }
            Err(_) => BTreeMap::new(),
        };
        Ok(Store { path, records })
    }

    /// True when `tool` is approved in its current content.
    pub fn is_approved(&self, root: &Path, tool: &Tool) -> Result<bool, ApprovalError> {
        Ok(self.status(root, tool)? == Status::Approved)
    }

    /// Whether `tool`'s approval holds, and if not, what changed: the
    /// state directory's record, else a signed one ([`signed`]) when a
    /// source of them is configured.
    pub fn status(&self, root: &Path, tool: &Tool) -> Result<Status, ApprovalError> {
        self.status_against(root, tool, &fingerprint(root, tool)?)
    }

    /// [`Store::status`] of `tool` as `now` says it is (its
    /// [`fingerprint`], worked out once by a caller that also pins the
    /// call to it: [`crate::run::pins`]).
    pub fn status_against(
        &self,
        root: &Path,
        tool: &Tool,
        now: &Fingerprint,
    ) -> Result<Status, ApprovalError> {
        let local = self.local_status(tool, now);
        if local == Status::Approved {
            return Ok(local);
        }
        let Some(source) = signed::source() else {
            return Ok(local);
        };
        match signed::find(source, key(tool)) {
            signed::Found::None => Ok(local),
            signed::Found::Refused(why) => Ok(Status::Changed(vec![why])),
            signed::Found::Valid(r) => {
                let now = signed::portable(root, now);
                if r.fingerprint == now {
                    return Ok(Status::Approved);
                }
                let mut changed = changes(&r.fingerprint, &now);
                if changed.is_empty() {
                    changed.push("what the signed approval covers changed".into());
                }
                Ok(Status::Changed(changed))
            }
        }
    }

    fn local_status(&self, tool: &Tool, now: &Fingerprint) -> Status {
        let Some(r) = self.records.get(key(tool)) else {
            return Status::Missing;
        };
        if r.fingerprint == *now {
            return Status::Approved;
        }
        let mut changed = changes(&r.fingerprint, now);
        if changed.is_empty() {
            changed.push("what the approval covers changed".into());
        }
        Status::Changed(changed)
    }

    /// Whether `tool` has an approval whose every part but the served
    /// tool list matches it now: an MCP server that may start without a
    /// person, to read the list its approval is then checked against.
    pub fn approved_but_served(&self, root: &Path, tool: &Tool) -> Result<bool, ApprovalError> {
        if let Some(r) = self.records.get(key(tool)) {
            let mut now = fingerprint(root, tool)?;
            now.offered.clone_from(&r.fingerprint.offered);
            if now == r.fingerprint {
                return Ok(true);
            }
        }
        let Some(source) = signed::source() else {
            return Ok(false);
        };
        let signed::Found::Valid(r) = signed::find(source, key(tool)) else {
            return Ok(false);
        };
        let mut now = signed::portable(root, &fingerprint(root, tool)?);
        now.offered.clone_from(&r.fingerprint.offered);
        Ok(now == r.fingerprint)
    }

    /// Records an approval of `tool` as it is now.
    pub fn approve(
        &mut self,
        root: &Path,
        tool: &Tool,
        approver: &str,
    ) -> Result<Record, ApprovalError> {
        let record = Record {
            fingerprint: fingerprint(root, tool)?,
            approver: approver.to_string(),
            at: crate::audit::now(),
        };
        self.records.insert(key(tool).to_string(), record.clone());
        self.save()?;
        Ok(record)
    }

    /// A signed approval of `tool` as it is now (the text of its file,
    /// see [`signed`]); nothing is recorded in the state directory.
    pub fn signed_approval(
        root: &Path,
        tool: &Tool,
        approver: &str,
        secret: &ed25519_dalek::SigningKey,
    ) -> Result<String, ApprovalError> {
        let record = Record {
            fingerprint: signed::portable(root, &fingerprint(root, tool)?),
            approver: approver.to_string(),
            at: crate::audit::now(),
        };
        Ok(signed::sign(secret, key(tool), record))
    }

    /// Forgets the approval of `name` (a deleted or replaced tool).
    pub fn revoke(&mut self, name: &str) -> Result<(), ApprovalError> {
        if self.records.remove(name).is_some() {
            self.save()?;
        }
        Ok(())
    }

    fn save(&self) -> Result<(), ApprovalError> {
        state::ensure_dir()?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StateError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let text = serde_json::to_vec_pretty(&self.records).unwrap_or_default();
        state::write_atomic(&self.path, &text)?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_servers_code_outside_the_project_is_covered() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("project");
        let pkg = d.path().join("srv/node_modules/@scope/pkg");
        std::fs::create_dir_all(pkg.join("dist")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(pkg.join("package.json"), "{}").unwrap();
        std::fs::write(pkg.join("dist/index.js"), "x").unwrap();
        std::fs::write(root.join("inside.py"), "x").unwrap();
        let m: crate::manifest::model::McpExec = serde_json::from_value(serde_json::json!({
            "entrypoint": "node",
            "args": [pkg.join("dist/index.js"), "inside.py", "--flag", "data"]
        }))
        .unwrap();
        let got = mcp_code_outside(&root, &m);
        let real = |p: PathBuf| footprint::resolved(&p);
        assert_eq!(
            got,
            vec![
                real(pkg.join("package.json")),
                real(pkg.join("dist/index.js"))
            ]
        );
    }

    #[test]
    fn a_stamped_hash_follows_every_rewrite_of_the_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("mod.py");
        std::fs::write(&f, "a = 1\n").unwrap();
        let first = stamped_sha256(&f).unwrap();
        assert_eq!(first, state::file_sha256(&f).unwrap());
        assert_eq!(stamped_sha256(&f).unwrap(), first, "unchanged: the same");
        // Same size, same mtime set back: ctime still moves.
        let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
        std::fs::write(&f, "a = 2\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let second = stamped_sha256(&f).unwrap();
        assert_ne!(second, first);
        assert_eq!(second, state::file_sha256(&f).unwrap());
        // Replaced by another file (a new inode).
        let other = d.path().join("other.py");
        std::fs::write(&other, "a = 3\n").unwrap();
        std::fs::rename(&other, &f).unwrap();
        assert_eq!(stamped_sha256(&f).unwrap(), state::file_sha256(&f).unwrap());
    }
}
