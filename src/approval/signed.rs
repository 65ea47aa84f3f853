//! Signed approvals: an approval made once and honoured by every replica.
//!
//! `glovebox approve NAME --sign-with KEY` writes `NAME.json` (the name
//! an approval is recorded under, [`super::key`]) holding the tool's
//! [`Fingerprint`] and who approved when, signed with an Ed25519 secret
//! key. A process given the directory of such files and the public key
//! (`--approvals-dir DIR --approval-key PUB`, or `GLOVEBOX_APPROVALS_DIR`
//! and `GLOVEBOX_APPROVAL_KEY`) honours them as it honours the approvals
//! in its own state directory; it only reads the directory, so it can be
//! a mounted ConfigMap or Secret, or committed to the project.
//!
//! What is signed is the record's exact text (`payload`), prefixed by a
//! domain tag, so no re-encoding can change what was verified. The
//! payload names the tool, and must name the one its file is for: a
//! record cannot be renamed to approve another tool. Paths under the
//! project root are written as `$ROOT/…`, so an approval made in a
//! checkout verifies where the project is mounted elsewhere (`/project`
//! in a pod); everything else (the files' hashes, the grants, the served
//! tool list) must be as approved, or the approval is void and the
//! refusal says what changed. A record whose signature does not verify
//! is never used, and the refusal says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::{Fingerprint, Record};
use crate::footprint;
use crate::signing::{self, SigningError};

/// The domain tag signed before every payload.
const DOMAIN: &[u8] = b"glovebox signed approval v1\n";

/// The payload's `format`.
pub const FORMAT: &str = "glovebox-approval/1";

/// Largest signed record read (a fingerprint of many files still fits).
const MAX_RECORD_BYTES: u64 = 4 << 20;

/// The file as written.
#[derive(Debug, Serialize, Deserialize)]
struct File {
    /// The signed text: a [`Payload`] as JSON.
    payload: String,
    /// Which key signed ([`signing::key_id`]), for people.
    key_id: String,
    /// Ed25519 over [`DOMAIN`] ‖ `payload`, in hex.
    signature: String,
}

/// What is signed.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    format: String,
    tool: String,
    #[serde(flatten)]
    record: Record,
}

/// Where signed approvals are read from, and the key they must verify with.
#[derive(Debug, Clone)]
pub struct Source {
    /// The directory of `NAME.json` records.
    pub dir: PathBuf,
    /// The approval key's public half.
    pub key: VerifyingKey,
}

static SOURCE: OnceLock<Source> = OnceLock::new();

/// Honours signed approvals from `dir` verified with the public key in
/// `key_file`, for the rest of the process.
pub fn configure(dir: &Path, key_file: &Path) -> Result<(), SigningError> {
    let key = signing::load_verifying(key_file)?;
    if !dir.is_dir() {
        return Err(SigningError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the approvals directory does not exist",
            ),
        });
    }
    let _ = SOURCE.set(Source {
        dir: dir.to_path_buf(),
        key,
    });
    Ok(())
}

/// The configured source, if any.
pub fn source() -> Option<&'static Source> {
    SOURCE.get()
}

/// What a signed record says about a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No record for it.
    None,
    /// A record that verified: the approval it carries.
    Valid(Record),
    /// A record that must not be used, and why (one line, naming the fix).
    Refused(String),
}

/// `fp` with every path under `root` written as `$ROOT/…`.
pub fn portable(root: &Path, fp: &Fingerprint) -> Fingerprint {
    let real = footprint::resolved(root).display().to_string();
    let lexical = root.display().to_string();
    let sub = |s: &str| -> String {
        for prefix in [&real, &lexical] {
            if s == prefix.as_str() {
                return "$ROOT".into();
            }
            if let Some(rest) = s.strip_prefix(prefix.as_str()) {
                if rest.starts_with('/') {
                    return format!("$ROOT{rest}");
                }
            }
        }
        s.to_string()
    };
    Fingerprint {
        files: fp.files.iter().map(|(k, v)| (sub(k), v.clone())).collect(),
        paths: fp.paths.iter().map(|(k, v)| (sub(k), v.clone())).collect(),
        grants: fp.grants.iter().map(|(k, v)| (k.clone(), sub(v))).collect(),
        interpreter: fp.interpreter.as_deref().map(sub),
        offered: fp.offered.clone(),
    }
}

/// The text of a signed approval of `name` for `record` (its fingerprint
/// already [`portable`]).
pub fn sign(key: &SigningKey, name: &str, record: Record) -> String {
    let payload = Payload {
        format: FORMAT.into(),
        tool: name.into(),
        record,
    };
    let payload = serde_json::to_string_pretty(&payload).unwrap_or_default();
    let mut message = DOMAIN.to_vec();
    message.extend_from_slice(payload.as_bytes());
    let file = File {
        signature: signing::sign(key, &message),
        key_id: signing::key_id(&key.verifying_key()),
        payload,
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

/// The file of `name`'s signed approval in `dir`.
pub fn path_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Reads and checks `name`'s record in `source`.
pub fn find(source: &Source, name: &str) -> Found {
    let path = path_of(&source.dir, name);
    let text = match read_capped(&path) {
        Ok(Some(t)) => t,
        Ok(None) => return Found::None,
        Err(e) => {
            return Found::Refused(format!(
            "the signed approval {} cannot be read ({e}); check the mounted approvals directory",
            path.display()
        ))
        }
    };
    check(&source.key, name, &path, &text)
}

fn read_capped(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut text = String::new();
    f.take(MAX_RECORD_BYTES).read_to_string(&mut text)?;
    Ok(Some(text))
}

/// Checks the signed record `text` (read from `path`) of `name` against `key`.
pub fn check(key: &VerifyingKey, name: &str, path: &Path, text: &str) -> Found {
    let refuse = |why: &str| {
        Found::Refused(format!(
            "the signed approval {} is refused: {why}; sign it again with `glovebox approve {name} --sign-with KEY`",
            path.display()
        ))
    };
    let Ok(file) = serde_json::from_str::<File>(text) else {
        return refuse("it is not a signed approval record");
    };
    let mut message = DOMAIN.to_vec();
    message.extend_from_slice(file.payload.as_bytes());
    if !signing::verify(key, &message, &file.signature) {
        return refuse(&format!(
            "its signature does not verify with the approval key {} (it was edited, or signed with another key)",
            signing::key_id(key)
        ));
    }
    let Ok(payload) = serde_json::from_str::<Payload>(&file.payload) else {
        return refuse("its signed payload is not an approval record");
    };
    if payload.format != FORMAT {
        return refuse(&format!("its format {:?} is not {FORMAT}", payload.format));
    }
    if payload.tool != name {
        return refuse(&format!(
            "it approves tool `{}`, not `{name}`",
            payload.tool
        ));
    }
    Found::Valid(payload.record)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record() -> Record {
        let mut fp = Fingerprint {
            files: Default::default(),
            paths: Default::default(),
            grants: Default::default(),
            interpreter: None,
            offered: None,
        };
        fp.files
            .insert(".glee/tools/t/tool.yml".into(), "ab".repeat(32));
        fp.grants.insert("cwd".into(), "$ROOT".into());
        Record {
            fingerprint: fp,
            approver: "alice".into(),
            at: "2026-11-27T00:00:00Z".into(),
        }
    }

    #[test]
    fn only_an_untouched_record_of_this_tool_signed_with_this_key_verifies() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("k");
        let public = signing::generate(&k).unwrap();
        let secret = signing::load_signing(&k).unwrap();
        let p = Path::new("t.json");
        let text = sign(&secret, "t", record());
        assert_eq!(check(&public, "t", p, &text), Found::Valid(record()));

        // Renamed to approve another tool: refused.
        let Found::Refused(why) = check(&public, "other", p, &text) else {
            panic!("a record of `t` approved `other`")
        };
        assert!(why.contains("approves tool `t`, not `other`"), "{why}");

        // A hash edited in the payload: the signature no longer verifies.
        let edited = text.replacen("abab", "cdab", 1);
        assert_ne!(edited, text);
        let Found::Refused(why) = check(&public, "t", p, &edited) else {
            panic!("an edited record verified")
        };
        assert!(why.contains("signature does not verify"), "{why}");

        // Signed with another key.
        let k2 = d.path().join("k2");
        signing::generate(&k2).unwrap();
        let forged = sign(&signing::load_signing(&k2).unwrap(), "t", record());
        assert!(matches!(check(&public, "t", p, &forged), Found::Refused(_)));

        // Not a record at all.
        assert!(matches!(check(&public, "t", p, "{}"), Found::Refused(_)));
    }

    #[test]
    fn paths_under_the_root_are_written_relative_to_it() {
        let d = tempfile::tempdir().unwrap();
        let root = footprint::resolved(d.path());
        let mut fp = record().fingerprint;
        fp.grants
            .insert("fs.read src".into(), root.join("src").display().to_string());
        fp.grants.insert("cwd".into(), root.display().to_string());
        fp.grants.insert("fs.read /etc".into(), "/etc".into());
        let p = portable(&root, &fp);
        assert_eq!(p.grants["fs.read src"], "$ROOT/src");
        assert_eq!(p.grants["cwd"], "$ROOT");
        assert_eq!(p.grants["fs.read /etc"], "/etc");
        // A sibling whose name merely starts like the root is not under it.
        fp.grants
            .insert("x".into(), format!("{}-other/a", root.display()));
        assert!(!portable(&root, &fp).grants["x"].starts_with("$ROOT"));
    }
}
