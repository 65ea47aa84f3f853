//! A tiny threaded HTTP/1.1 test server (plain or TLS with a CA made by
//! rcgen) that records every connection and request it gets, so a test
//! can assert what reached the server — not only what glovebox printed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the server read it.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub method: String,
    /// The raw request target (`/a/b?x=1`).
    pub target: String,
    /// The target up to `?`.
    pub path: String,
    /// The raw query (after `?`), `""` when none.
    pub query: String,
    /// Header (lowercased name, value), in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    /// Decoded query pairs.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }

    /// Everything the server got, as one lossy string.
    pub fn raw(&self) -> String {
        format!(
            "{} {}\n{:?}\n{}",
            self.method,
            self.target,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// What the handler answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Send the body without Content-Length (close-delimited).
    pub no_length: bool,
}

impl Reply {
    pub fn json(v: serde_json::Value) -> Reply {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: v.to_string().into_bytes(),
            delay: Duration::ZERO,
            no_length: false,
        }
    }

    pub fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.as_bytes().to_vec(),
            delay: Duration::ZERO,
            no_length: false,
        }
    }

    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
            delay: Duration::ZERO,
            no_length: false,
        }
    }
}

type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// A running server (on 127.0.0.1 unless started on another address).
pub struct Server {
    pub addr: SocketAddr,
    pub tls: bool,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<AtomicUsize>,
    /// Connections accepted and not yet closed.
    open: Arc<AtomicUsize>,
    /// Replies whose body could not be written whole (the client left).
    pub write_failures: Arc<AtomicUsize>,
}

/// A CA and a server certificate for `127.0.0.1` and `localhost`.
pub struct TestCa {
    pub ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "glovebox test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
        .unwrap();
        TestCa {
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    }

    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, &self.ca_pem).unwrap();
    }
}

impl Server {
    /// A plain HTTP server answering with `handler`.
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Server {
        Self::spawn("127.0.0.1:0", Arc::new(handler), None)
    }

    /// A plain HTTP server on `bind` (`[::1]:0`, `0.0.0.0:0`, …).
    pub fn start_on(
        bind: &str,
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Self::spawn(bind, Arc::new(handler), None)
    }

    /// An HTTPS server with `ca`'s certificate.
    pub fn start_tls(
        ca: &TestCa,
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Self::spawn("127.0.0.1:0", Arc::new(handler), Some(ca.server.clone()))
    }

    fn spawn(bind: &str, handler: Handler, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let listener = TcpListener::bind(bind).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let write_failures = Arc::new(AtomicUsize::new(0));
        let is_tls = tls.is_some();
        {
            let requests = requests.clone();
            let connections = connections.clone();
            let open = open.clone();
            let write_failures = write_failures.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    connections.fetch_add(1, Ordering::SeqCst);
                    open.fetch_add(1, Ordering::SeqCst);
                    let open = open.clone();
                    let handler = handler.clone();
                    let requests = requests.clone();
                    let write_failures = write_failures.clone();
                    let tls = tls.clone();
                    std::thread::spawn(move || {
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                        let ok = match tls {
                            Some(cfg) => {
                                let conn = match rustls::ServerConnection::new(cfg) {
                                    Ok(c) => c,
                                    Err(_) => {
                                        open.fetch_sub(1, Ordering::SeqCst);
                                        return;
                                    }
                                };
                                let mut s = rustls::StreamOwned::new(conn, stream);
                                serve(&mut s, &handler, &requests)
                            }
                            None => {
                                let mut s = stream;
                                serve(&mut s, &handler, &requests)
                            }
                        };
                        if ok == Some(false) {
                            write_failures.fetch_add(1, Ordering::SeqCst);
                        }
                        // The stream was closed with its arm above.
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            });
        }
        Server {
            addr,
            tls: is_tls,
            requests,
            connections,
            open,
            write_failures,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http(s)://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!(
            "{}://127.0.0.1:{}",
            if self.tls { "https" } else { "http" },
            self.port()
        )
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Connections accepted and not yet closed.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// `http(s)://ADDR/path`, by the address it listens on.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// The only request received (panics unless exactly one).
    pub fn only(&self) -> Recorded {
        let r = self.requests();
        assert_eq!(r.len(), 1, "expected exactly one request: {r:#?}");
        r.into_iter().next().unwrap()
    }
}

/// Serves one request on `s`. `None`: no request was read; `Some(ok)`:
/// whether the whole reply was written.
fn serve<S: Read + Write>(
    s: &mut S,
    handler: &Handler,
    requests: &Mutex<Vec<Recorded>>,
) -> Option<bool> {
    let mut reader = BufReader::new(&mut *s);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.trim_end().splitn(3, ' ');
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':')?;
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    drop(reader);
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    let rec = Recorded {
        method,
        target,
        path,
        query,
        headers,
        body,
    };
    requests.lock().unwrap().push(rec.clone());
    let reply = handler(&rec);
    std::thread::sleep(reply.delay);
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
    for (n, v) in &reply.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if !reply.no_length {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("\r\n");
    let ok = s.write_all(head.as_bytes()).is_ok()
        && reply.body.chunks(64 * 1024).all(|c| s.write_all(c).is_ok())
        && s.flush().is_ok();
    Some(ok)
}
