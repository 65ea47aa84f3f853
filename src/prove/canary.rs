//! The canaries the prover makes for one tool's proof, all glovebox's own
//! and removed when it ends: a scratch directory outside every grant
//! holding a canary file, listeners on the host's loopback (TCP over IPv4
//! and IPv6, UDP), a unix socket in the scratch directory and an abstract
//! one, one more TCP listener recorded as a glovebox server (the egress
//! proxy must never reach glovebox's own servers), and a canary process
//! (this binary, waiting for its stdin to close) with a marker in its
//! environment. Each listener records what it received: the evidence when
//! the battery reaches it.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::wire;

/// Errors making the canaries.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// A listener, file or process could not be made.
    #[error("cannot make the proof's canary {what}")]
    Make {
        /// Which.
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

fn make(what: &'static str) -> impl FnOnce(std::io::Error) -> CanaryError {
    move |source| CanaryError::Make { what, source }
}

/// The digest the battery reports of what it read: sha256 of the first
/// [`DIGESTED`] bytes, in hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(&bytes[..bytes.len().min(DIGESTED)]))
}

/// How many bytes of a file a read's digest covers.
pub const DIGESTED: usize = 64 * 1024;

/// What one listener received.
#[derive(Debug, Default)]
struct Heard {
    connections: usize,
    bytes: Vec<u8>,
}

/// A listener on its own thread, recording what arrives.
#[derive(Debug)]
pub struct Listener {
    /// Where it listens (a socket address, a path, an abstract name).
    pub at: String,
    heard: Arc<Mutex<Heard>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Bytes kept of what one listener received.
const KEPT: usize = 64 * 1024;

impl Listener {
    fn spawn<S: Send + 'static>(
        at: String,
        socket: S,
        mut poll: impl FnMut(&S, &mut Heard) + Send + 'static,
    ) -> Listener {
        let heard = Arc::new(Mutex::new(Heard::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (heard.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // One more round after the stop: what was queued meanwhile.
            loop {
                let last = s.load(Ordering::Acquire);
                if let Ok(mut heard) = h.lock() {
                    poll(&socket, &mut heard);
                }
                if last {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Listener {
            at,
            heard,
            stop,
            thread: Some(thread),
        }
    }

    /// A TCP listener on `addr` (port 0: any).
    fn tcp(addr: SocketAddr) -> std::io::Result<(Listener, SocketAddr)> {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        let local = l.local_addr()?;
        let listener = Listener::spawn(local.to_string(), l, |l, heard| {
            while let Ok((mut s, _)) = l.accept() {
                heard.connections += 1;
                take(&mut s, heard);
            }
        });
        Ok((listener, local))
    }

    /// What it received: connections (or datagrams) and bytes.
    fn heard(&self) -> (usize, Vec<u8>) {
        self.heard
            .lock()
            .map(|h| (h.connections, h.bytes.clone()))
            .unwrap_or_default()
    }

    /// Stops listening, after one last look.
    fn settle(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The evidence, when it received anything: `None` when silent.
    pub fn evidence(&self) -> Option<String> {
        let (n, bytes) = self.heard();
        if n == 0 && bytes.is_empty() {
            return None;
        }
        let payload = memchr::memmem::find(&bytes, wire::PAYLOAD.as_bytes()).is_some();
        Some(format!(
            "the canary listener at {} received {n} connection{} and {} bytes{}",
            self.at,
            if n == 1 { "" } else { "s" },
            bytes.len(),
            if payload {
                " (the battery's payload)"
            } else {
                ""
            }
        ))
    }

    /// Whether what it received holds `needle`.
    pub fn received(&self, needle: &[u8]) -> bool {
        !needle.is_empty() && memchr::memmem::find(&self.heard().1, needle).is_some()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Reads what a connected stream sends, for a moment (bounded).
fn take(s: &mut impl Read, heard: &mut Heard) {
    let mut buf = [0u8; 4096];
    for _ in 0..20 {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let room = KEPT.saturating_sub(heard.bytes.len());
                heard.bytes.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => return,
        }
    }
}

/// The canary process: this binary waiting for its stdin to close, with
/// [`Process::marker`] in its environment.
#[derive(Debug)]
pub struct Process {
    child: Child,
    /// Its pid (the host's).
    pub pid: i32,
    /// The marker in its environment.
    pub marker: String,
    /// The digest of its `/proc/PID/environ` (first [`DIGESTED`] bytes).
    pub environ: String,
    /// The start of its first readable mapping, and the 16 bytes there in
    /// hex (what a `process_vm_readv` of them would return).
    pub memory: Option<(u64, String)>,
}

impl Process {
    /// What became of it: still running and untraced, or not.
    pub fn state(&mut self) -> ProcessState {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                return ProcessState::Died(format!(
                    "the canary process {} died ({status})",
                    self.pid
                ))
            }
            Ok(None) => {}
            Err(e) => {
                return ProcessState::Died(format!(
                    "the canary process {} cannot be waited for: {e}",
                    self.pid
                ))
            }
        }
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let tracer = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .map(str::trim)
            .unwrap_or("");
        if !tracer.is_empty() && tracer != "0" {
            return ProcessState::Traced(format!(
                "the canary process {} is traced by {tracer}",
                self.pid
            ));
        }
        ProcessState::Unharmed
    }
}

/// What became of the canary process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessState {
    /// Still running, untraced.
    Unharmed,
    /// Gone (why).
    Died(String),
    /// Traced (by whom).
    Traced(String),
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every canary of one tool's proof.
#[derive(Debug)]
pub struct Canaries {
    /// The scratch directory (outside every grant), when one could be
    /// placed so; removed with its contents when dropped.
    pub scratch: Option<tempfile::TempDir>,
    /// The canary file in it, and the digest of its content.
    pub file: Option<(PathBuf, String)>,
    /// TCP on 127.0.0.1.
    pub tcp4: (Listener, SocketAddr),
    /// TCP on ::1, where the host has IPv6.
    pub tcp6: Option<(Listener, SocketAddr)>,
    /// UDP on 127.0.0.1.
    pub udp: (Listener, SocketAddr),
    /// A unix socket in the scratch directory.
    pub unix: Option<(Listener, PathBuf)>,
    /// An abstract unix socket.
    pub abstract_socket: (Listener, String),
    /// A TCP listener on 127.0.0.1 recorded as a glovebox server, and its
    /// record (removed when dropped), when it could be recorded.
    pub own: Option<(Listener, SocketAddr, crate::egress::listeners::Registration)>,
    /// The canary process.
    pub process: Process,
}

impl Canaries {
    /// Makes them; `scratch_in` is a directory outside every grant of the
    /// tool (`None`: there is none), `exe` this binary, `nonce` the
    /// proof's.
    pub fn make(
        scratch_in: Option<&Path>,
        exe: &Path,
        nonce: &str,
    ) -> Result<Canaries, CanaryError> {
        let scratch = match scratch_in {
            Some(dir) => Some(
                tempfile::Builder::new()
                    .prefix("glovebox-prove-")
                    .tempdir_in(dir)
                    .map_err(make("directory"))?,
            ),
            None => None,
        };
        let file = match &scratch {
            Some(s) => {
                let path = s.path().join("canary");
                let content = format!("{} {nonce}\n", wire::PAYLOAD);
                std::fs::write(&path, &content).map_err(make("file"))?;
                Some((path, digest(content.as_bytes())))
            }
            None => None,
        };
        let loopback4: SocketAddr = ([127, 0, 0, 1], 0).into();
        let tcp4 = Listener::tcp(loopback4).map_err(make("tcp listener"))?;
        let tcp6 = Listener::tcp((std::net::Ipv6Addr::LOCALHOST, 0).into()).ok();
        let udp = {
            let s = UdpSocket::bind(loopback4).map_err(make("udp socket"))?;
            s.set_nonblocking(true).map_err(make("udp socket"))?;
            let local = s.local_addr().map_err(make("udp socket"))?;
            let l = Listener::spawn(local.to_string(), s, |s, heard| {
                let mut buf = [0u8; 2048];
                while let Ok((n, _)) = s.recv_from(&mut buf) {
                    heard.connections += 1;
                    let room = KEPT.saturating_sub(heard.bytes.len());
                    heard.bytes.extend_from_slice(&buf[..n.min(room)]);
                }
            });
            (l, local)
        };
        let unix = match &scratch {
            Some(s) => {
                let path = s.path().join("canary.sock");
                let l = UnixListener::bind(&path).map_err(make("unix socket"))?;
                l.set_nonblocking(true).map_err(make("unix socket"))?;
                let listener = Listener::spawn(path.display().to_string(), l, |l, heard| {
                    while let Ok((mut s, _)) = l.accept() {
                        heard.connections += 1;
                        let _ = s.set_nonblocking(true);
                        take(&mut s, heard);
                    }
                });
                Some((listener, path))
            }
            None => None,
        };
        let abstract_socket = {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("glovebox-prove-{nonce}");
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .map_err(make("abstract socket"))?;
            let l = UnixListener::bind_addr(&addr).map_err(make("abstract socket"))?;
            l.set_nonblocking(true).map_err(make("abstract socket"))?;
            let listener = Listener::spawn(format!("@{name}"), l, |l, heard| {
                while let Ok((mut s, _)) = l.accept() {
                    heard.connections += 1;
                    let _ = s.set_nonblocking(true);
                    take(&mut s, heard);
                }
            });
            (listener, name)
        };
        let own = Listener::tcp(loopback4).ok().and_then(|(l, addr)| {
            crate::egress::listeners::register(addr)
                .ok()
                .map(|r| (l, addr, r))
        });
        let process = spawn_process(exe, nonce)?;
        Ok(Canaries {
            scratch,
            file,
            tcp4,
            tcp6,
            udp,
            unix,
            abstract_socket,
            own,
            process,
        })
    }

    /// Every listener, stopped after one last look (call once the
    /// battery ended).
    pub fn settle(&mut self) {
        for l in self.listeners_mut() {
            l.settle();
        }
    }

    fn listeners_mut(&mut self) -> Vec<&mut Listener> {
        let mut v = vec![
            &mut self.tcp4.0,
            &mut self.udp.0,
            &mut self.abstract_socket.0,
        ];
        v.extend(self.tcp6.as_mut().map(|t| &mut t.0));
        v.extend(self.unix.as_mut().map(|u| &mut u.0));
        v.extend(self.own.as_mut().map(|o| &mut o.0));
        v
    }
}

/// The canary process: `exe __prove hold` (it waits for its stdin to
/// close), a marker in its environment.
fn spawn_process(exe: &Path, nonce: &str) -> Result<Process, CanaryError> {
    let marker = format!("GLOVEBOX_PROVE_MARK={nonce}");
    let child = Command::new(exe)
        .args([wire::SUBCOMMAND, "hold"])
        .env("GLOVEBOX_PROVE_MARK", nonce)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(make("process"))?;
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let mut process = Process {
        child,
        pid,
        marker,
        environ: String::new(),
        memory: None,
    };
    // Its environment and memory are read once it has exec'd (its
    // environ then holds the marker).
    for _ in 0..200 {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if memchr::memmem::find(&environ, process.marker.as_bytes()).is_some() {
            process.environ = digest(&environ);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    process.memory = first_mapping(pid);
    Ok(process)
}

/// The start of `pid`'s first readable mapping, and its first 16 bytes
/// in hex.
fn first_mapping(pid: i32) -> Option<(u64, String)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().find(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|p| p.starts_with('r'))
    })?;
    let start = u64::from_str_radix(line.split('-').next()?, 16).ok()?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = [0u8; 16];
    std::os::unix::fs::FileExt::read_exact_at(&mem, &mut buf, start).ok()?;
    Some((start, hex::encode(buf)))
}
