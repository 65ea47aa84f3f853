//! Ed25519 key files: the approval key (`glovebox approve --sign-with`)
//! and the audit checkpoint key (`glovebox serve --checkpoint-key`).
//!
//! A key file is one line of hex: the 32-byte secret seed (mode 0600),
//! and beside it `NAME.pub`, the 32-byte public key. Replicas hold only
//! the public approval key; the secret one stays with whoever approves.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

/// Errors reading, making or using a key file.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The file could not be read or written.
    #[error("cannot use the key file {path:?}; check that it exists and is readable")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold a key of the expected kind.
    #[error("{path:?} is not an ed25519 {what} key (one line of 64 hex digits); make one with `glovebox approve --generate-key PATH`")]
    Malformed { path: PathBuf, what: &'static str },
    /// No randomness for a new key.
    #[error("cannot get random bytes for a new key: {0}")]
    Random(String),
    /// The key file exists already.
    #[error("{path:?} exists already; pick another path or remove it first")]
    Exists { path: PathBuf },
}

fn read_hex32(path: &Path, what: &'static str) -> Result<[u8; 32], SigningError> {
    let text = std::fs::read_to_string(path).map_err(|source| SigningError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = hex::decode(text.trim()).map_err(|_| SigningError::Malformed {
        path: path.to_path_buf(),
        what,
    })?;
    bytes.try_into().map_err(|_| SigningError::Malformed {
        path: path.to_path_buf(),
        what,
    })
}

/// The secret key in `path`.
pub fn load_signing(path: &Path) -> Result<SigningKey, SigningError> {
    Ok(SigningKey::from_bytes(&read_hex32(path, "secret")?))
}

/// The public key in `path`.
pub fn load_verifying(path: &Path) -> Result<VerifyingKey, SigningError> {
    VerifyingKey::from_bytes(&read_hex32(path, "public")?).map_err(|_| SigningError::Malformed {
        path: path.to_path_buf(),
        what: "public",
    })
}

/// The public key's file beside a secret key's: `PATH.pub`.
pub fn public_path(secret: &Path) -> PathBuf {
    let mut s = secret.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

fn create_new(path: &Path, mode: u32, text: &str) -> Result<(), SigningError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => SigningError::Exists {
                path: path.to_path_buf(),
            },
            _ => SigningError::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|source| SigningError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Makes a new key: the secret at `path` (0600, never overwritten) and
/// the public key at `PATH.pub`; returns the public key.
pub fn generate(path: &Path) -> Result<VerifyingKey, SigningError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| SigningError::Random(e.to_string()))?;
    let key = SigningKey::from_bytes(&seed);
    create_new(path, 0o600, &format!("{}\n", hex::encode(seed)))?;
    let public = key.verifying_key();
    create_new(
        &public_path(path),
        0o644,
        &format!("{}\n", hex::encode(public.as_bytes())),
    )?;
    Ok(public)
}

/// Whether `path` holds a key in the format of these files (one line of
/// 64 hex digits): how a copy of a project leaves out a secret key kept
/// in it, whatever its name (`crate::learn`). A `.pub` file is the public
/// half and is not reported.
pub fn is_key_file(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "pub") {
        return false;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && (64..=66).contains(&m.len()) => {}
        _ => return false,
    }
    std::fs::read(path).is_ok_and(|b| is_key_text(&b))
}

/// Whether `bytes` is a key file's text: 64 hex digits, then at most a
/// line end.
pub fn is_key_text(bytes: &[u8]) -> bool {
    let body = bytes
        .strip_suffix(b"\n")
        .map(|b| b.strip_suffix(b"\r").unwrap_or(b))
        .unwrap_or(bytes);
    body.len() == 64 && body.iter().all(u8::is_ascii_hexdigit)
}

/// `message` signed with `key`, in hex.
pub fn sign(key: &SigningKey, message: &[u8]) -> String {
    hex::encode(key.sign(message).to_bytes())
}

/// Whether `signature` (hex) is `key`'s over `message`.
pub fn verify(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Ok(bytes) = hex::decode(signature) else {
        return false;
    };
    let Ok(bytes): Result<[u8; 64], _> = bytes.try_into() else {
        return false;
    };
    key.verify(message, &Signature::from_bytes(&bytes)).is_ok()
}

/// A short name for a public key (the first 16 hex digits of its
/// SHA-256), printed so a person can tell keys apart.
pub fn key_id(key: &VerifyingKey) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))[..16].to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_recognised_by_its_text() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("anything.txt");
        generate(&p).unwrap();
        assert!(is_key_file(&p));
        assert!(!is_key_file(&public_path(&p)), "the public half");
        std::fs::write(d.path().join("x"), "not a key\n").unwrap();
        assert!(!is_key_file(&d.path().join("x")));
        assert!(is_key_text(&[b'a'; 64]));
        assert!(!is_key_text(&[b'g'; 64]));
        assert!(!is_key_text(&[b'a'; 63]));
    }

    #[test]
    fn a_generated_key_signs_what_its_public_half_verifies() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k");
        let public = generate(&p).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_verifying(&public_path(&p)).unwrap(), public);
        let sig = sign(&load_signing(&p).unwrap(), b"hello");
        assert!(verify(&public, b"hello", &sig));
        assert!(!verify(&public, b"hellO", &sig));
        assert!(!verify(&public, b"hello", "00"));
        // Never overwritten.
        assert!(matches!(generate(&p), Err(SigningError::Exists { .. })));
        // A secret key is not a public one of someone else's: another key
        // does not verify.
        let q = d.path().join("q");
        let other = generate(&q).unwrap();
        assert!(!verify(&other, b"hello", &sig));
    }
}
