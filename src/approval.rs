//! Approvals bound to content.
//!
//! Approving a tool records the sha256 of its `tool.yml` and of the file
//! its entrypoint (command) or module (python) points to when that file is
//! inside the project root. Changing any of them voids the approval: the
//! stored fingerprint no longer matches. Records live in glovebox's state
//! directory (see [`crate::state`]), in `approvals/<project key>.json`, out
//! of every jail's reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::manifest::discover::resolve;
use crate::manifest::model::Exec;
use crate::manifest::project::Tool;
use crate::state::{self, StateError};

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

/// What an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// sha256 of each file, by path relative to the root.
    pub files: BTreeMap<String, String>,
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

/// The files an approval covers: the manifest, and the entrypoint or
/// module file when it is inside the root.
pub fn covered_files(root: &Path, tool: &Tool) -> Vec<PathBuf> {
    let mut files = vec![tool.file.clone()];
    match &tool.manifest.exec {
        Exec::Command(c) if c.entrypoint.contains('/') => files.push(resolve(root, &c.entrypoint)),
        Exec::AgentCli(a) => files.extend(a.command.first().map(PathBuf::from)),
        Exec::Python(p) => {
            let base = resolve(root, &p.cwd).join(p.module.replace('.', "/"));
            let module = base.with_extension("py");
            files.push(if module.exists() {
                module
            } else {
                base.join("__init__.py")
            });
        }
        _ => {}
    }
    files.retain(|f| f.starts_with(root) && f.is_file());
    files
}

/// The tool's current fingerprint.
pub fn fingerprint(root: &Path, tool: &Tool) -> Result<Fingerprint, ApprovalError> {
    let mut files = BTreeMap::new();
    for f in covered_files(root, tool) {
        let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        files.insert(rel, state::file_sha256(&f)?);
    }
    Ok(Fingerprint { files })
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
        let Some(r) = self.records.get(&tool.name) else {
            return Ok(false);
        };
        Ok(r.fingerprint == fingerprint(root, tool)?)
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
        self.records.insert(tool.name.clone(), record.clone());
        self.save()?;
        Ok(record)
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
