//! TLS for http tools: rustls with the `ring` provider (no OpenSSL), the
//! Mozilla root store compiled in (`webpki-roots`, so a call does not read
//! and parse the system's certificate directory), plus the CAs of an
//! optional PEM file named by `security.http.extra_ca_file` in
//! `.glee/config.yml` (a corporate proxy's CA, a test server's CA).
//!
//! Certificates are verified by rustls' WebPKI verifier against the host
//! name (or IP address) of the URL; there is no switch to turn that off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// Errors building the TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The extra CA file could not be read.
    #[error("cannot read the extra CA file {path:?}")]
    ReadCaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The extra CA file holds no usable certificate.
    #[error("the extra CA file {path:?} holds no valid PEM certificate{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    BadCaFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: Option<String>,
    },
    /// rustls refused the configuration.
    #[error("cannot configure TLS")]
    Config(#[source] rustls::Error),
}

/// The client configuration: Mozilla roots plus the certificates in
/// `extra_ca` (a PEM file), HTTP/1.1 over ALPN.
pub fn client_config(extra_ca: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let pem = std::fs::read(path).map_err(|source| TlsError::ReadCaFile {
            path: path.to_path_buf(),
            source,
        })?;
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| TlsError::BadCaFile {
                path: path.to_path_buf(),
                detail: Some(e.to_string()),
            })?;
            roots.add(cert).map_err(|e| TlsError::BadCaFile {
                path: path.to_path_buf(),
                detail: Some(e.to_string()),
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(TlsError::BadCaFile {
                path: path.to_path_buf(),
                detail: None,
            });
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
