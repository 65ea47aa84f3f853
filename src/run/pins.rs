//! Approved code stays pinned while it runs.
//!
//! A call of a tool that requires approval runs only the project code the
//! approval covers, checked when it is loaded: the jail gets the sha256
//! of every file of the approved fingerprint ([`crate::approval`]) in a
//! file of its private home (its path in [`VARIABLE`]), and the Python
//! glovebox starts — the python shim, and the bootstrap of a python
//! command ([`crate::run::safepath`]) — installs a check (`pin.py`)
//! before any project code is imported: every project file it then loads
//! as code (a module, a package's `__init__`, a sourceless `.pyc`, a
//! native extension, a zip, a script `runpy` runs), under any name — an
//! import statement, `__import__` of a computed name, `importlib`,
//! `runpy` — is read once, hashed, and used only when the approval holds
//! exactly those bytes. Anything else is refused with an `ImportError`
//! naming the file; the refusal is reported on the tool's stderr by a
//! line carrying a tag only glovebox and the jail know ([`Pins::refused`]
//! takes those lines out), and glovebox records the file
//! ([`crate::imports_seen`]): it joins the tool's footprint, so `glovebox
//! approve` shows and hashes it, and it is read-only in every jail from
//! then on.
//!
//! What is not checked one by one: the tool's venv inside the root
//! (protected whole, [`crate::surface`]), the Python installation, files
//! outside the root (no write grant of the project reaches them unless a
//! manifest names them), and a Python the tool's own code starts (it gets
//! no bootstrap); see SECURITY.md.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::approval::Fingerprint;
use crate::jail::HomeFile;

/// The variable naming the pins file in the jail.
pub const VARIABLE: &str = "GLOVEBOX_PINS";

/// The pins file's name in the call's private home.
const FILE: &str = "glovebox-pins";

/// The first field of the pins file.
const MAGIC: &str = "glovebox-pins-1";

/// What starts a refusal report on the tool's stderr.
const REPORT: &[u8] = b"glovebox-pinned-refused ";

/// The check source compiled before the shim and the bootstrap.
pub const SOURCE: &str = include_str!("pin.py");

/// What one call of an approved tool may load from the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// The project root as spelt, and with its links resolved.
    roots: Vec<PathBuf>,
    /// Directories inside the root whose files are not pinned one by one
    /// (protected whole: a venv).
    skip: Vec<PathBuf>,
    /// The tool's name (for messages).
    tool: String,
    /// The tag of the refusal reports (see [`Pins::refused`]).
    tag: String,
    /// sha256 by path relative to the root (as the fingerprint spells it
    /// and with its links resolved).
    files: BTreeMap<String, String>,
}

impl Pins {
    /// The pins of a call of `tool` whose approval covers `fingerprint`
    /// (the one it was checked against), with `skip` (a venv inside the
    /// root, protected whole).
    pub fn new(root: &Path, tool: &str, fingerprint: &Fingerprint, skip: Vec<PathBuf>) -> Pins {
        let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let mut files = BTreeMap::new();
        for (rel, hash) in &fingerprint.files {
            if Path::new(rel).is_absolute() {
                // Code outside the root (an MCP server's): not loaded by
                // a Python glovebox starts.
                continue;
            }
            files.insert(rel.clone(), hash.clone());
            // The same file by its real path (a link on the way).
            if let Ok(real) = std::fs::canonicalize(root.join(rel)) {
                if let Ok(r) = real.strip_prefix(&real_root) {
                    files
                        .entry(r.display().to_string())
                        .or_insert_with(|| hash.clone());
                }
            }
        }
        let mut roots = vec![root.to_path_buf()];
        if real_root != root {
            roots.push(real_root);
        }
        let skip = skip
            .into_iter()
            .map(|s| std::fs::canonicalize(&s).unwrap_or(s))
            .collect();
        let tag = tag(tool, fingerprint);
        Pins {
            roots,
            skip,
            tool: tool.to_string(),
            tag,
            files,
        }
    }

    /// The file the jail gets (its path in [`VARIABLE`]).
    pub fn home_file(&self) -> HomeFile {
        let mut out: Vec<u8> = MAGIC.as_bytes().to_vec();
        let mut field = |key: &[u8], value: &[u8]| {
            out.push(0);
            out.extend_from_slice(key);
            out.push(0);
            out.extend_from_slice(value);
        };
        for r in &self.roots {
            field(b"root", r.as_os_str().as_bytes());
        }
        for s in &self.skip {
            field(b"skip", s.as_os_str().as_bytes());
        }
        field(b"tool", self.tool.as_bytes());
        field(b"tag", self.tag.as_bytes());
        for (rel, hash) in &self.files {
            if rel.contains('\0') {
                continue;
            }
            field(hash.as_bytes(), rel.as_bytes());
        }
        HomeFile {
            name: FILE.into(),
            contents: out,
            variables: vec![VARIABLE.into()],
        }
    }

    /// Takes the refusal reports out of `stderr` and returns the files
    /// they name that lie inside the root (absolute, as the jail spelt
    /// them), each once. A line needs the call's tag: a parameter echoed
    /// on stderr cannot forge one.
    pub fn refused(&self, stderr: &mut Vec<u8>) -> Vec<PathBuf> {
        let mut prefix = REPORT.to_vec();
        prefix.extend_from_slice(self.tag.as_bytes());
        prefix.push(b' ');
        let mut found = Vec::new();
        let mut kept = Vec::with_capacity(stderr.len());
        let mut last_blank = false;
        for line in stderr.split_inclusive(|&b| b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            if let Some(hex) = body.strip_prefix(prefix.as_slice()) {
                if let Some(p) = decode_path(hex) {
                    if self.roots.iter().any(|r| p.starts_with(r)) && !found.contains(&p) {
                        found.push(p);
                    }
                }
                // The report starts with a newline of its own.
                if last_blank && kept.ends_with(b"\n") {
                    kept.pop();
                }
                last_blank = false;
                continue;
            }
            last_blank = body.is_empty();
            kept.extend_from_slice(line);
        }
        if !found.is_empty() {
            *stderr = kept;
        }
        found
    }
}

/// The tag of a tool's refusal reports: a digest of a secret of this
/// process, the tool and its fingerprint (the same for every call of one
/// version of the tool, so warm workers and standby jails are shared;
/// unknown to whoever writes the tool's parameters).
fn tag(tool: &str, fingerprint: &Fingerprint) -> String {
    use std::sync::OnceLock;
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    let secret = SECRET.get_or_init(|| {
        let mut b = [0u8; 32];
        if std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
            .is_err()
        {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            b[..16].copy_from_slice(&t.to_be_bytes());
            b[16..20].copy_from_slice(&std::process::id().to_be_bytes());
        }
        b
    });
    let mut h = Sha256::new();
    h.update(secret);
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(format!("{fingerprint:?}").as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// A path written as hex bytes.
fn decode_path(hex: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(hex).ok()?.trim();
    let bytes = hex::decode(text).ok()?;
    let p = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
    (p.is_absolute()
        && p.components()
            .all(|c| !matches!(c, std::path::Component::ParentDir)))
    .then_some(p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pins(root: &Path) -> Pins {
        let mut files = BTreeMap::new();
        files.insert("lib/mod.py".to_string(), "ab".repeat(32));
        files.insert("/outside/x.js".to_string(), "cd".repeat(32));
        let fp = Fingerprint {
            files,
            paths: BTreeMap::new(),
            grants: BTreeMap::new(),
            interpreter: None,
            offered: None,
        };
        Pins::new(root, "t", &fp, vec![root.join("venv")])
    }

    #[test]
    fn the_home_file_lists_the_root_the_skips_and_each_hash() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let f = pins(&root).home_file();
        assert_eq!(f.variables, [VARIABLE]);
        let fields: Vec<&[u8]> = f.contents.split(|&b| b == 0).collect();
        assert_eq!(fields[0], MAGIC.as_bytes());
        assert_eq!(fields.len() % 2, 1);
        let pairs: Vec<(String, String)> = fields[1..]
            .chunks(2)
            .map(|c| {
                (
                    String::from_utf8_lossy(c[0]).into_owned(),
                    String::from_utf8_lossy(c[1]).into_owned(),
                )
            })
            .collect();
        assert!(pairs.contains(&("root".into(), root.display().to_string())));
        assert!(pairs.contains(&("skip".into(), root.join("venv").display().to_string())));
        assert!(pairs.contains(&("ab".repeat(32), "lib/mod.py".into())));
        // Code outside the root is not the jail's Python's to load.
        assert!(!pairs.iter().any(|(_, v)| v == "/outside/x.js"));
    }

    #[test]
    fn only_reports_with_the_calls_tag_are_taken_and_inside_the_root() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let p = pins(&root);
        let hex = |path: &Path| hex::encode(path.as_os_str().as_bytes());
        let inside = root.join("plugins/plug_x.py");
        let forged = "glovebox-pinned-refused 0000 ".to_string() + &hex(&root.join("a.py"));
        let text = format!(
            "before\n\nglovebox-pinned-refused {} {}\nTraceback\n{forged}\n\nglovebox-pinned-refused {} {}\n",
            p.tag,
            hex(&inside),
            p.tag,
            hex(Path::new("/etc/passwd")),
        );
        let mut stderr = text.into_bytes();
        assert_eq!(p.refused(&mut stderr), [inside]);
        assert_eq!(
            String::from_utf8(stderr).unwrap(),
            format!("before\nTraceback\n{forged}\n")
        );
        // Nothing reported: stderr is left as it is.
        let mut plain = b"just\n\nlines\n".to_vec();
        assert!(p.refused(&mut plain).is_empty());
        assert_eq!(plain, b"just\n\nlines\n");
    }
}
