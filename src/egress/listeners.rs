//! glovebox's own listeners, recorded where every glovebox process on the
//! machine can read them, so that no tool reaches `serve` through the
//! egress proxy — whichever user runs the proxy, and even with
//! `security.http.allow_private`.
//!
//! `glovebox serve` [`register`]s each address it listens on as one file
//! in a shared directory: `/run/glovebox/listeners` when it can be used
//! (root), else `/tmp/glovebox-listeners`. Either is created sticky and
//! world-writable (mode 1777, like `/tmp` itself), each entry world-readable
//! and removed when the server stops. An entry is named
//! `<pid>-<port>-<random>` and holds one socket address per line and a
//! `start=<ticks>` line (the process's start time, field 22 of
//! `/proc/<pid>/stat`). [`load`] reads both directories, so a
//! proxy run by any user sees every user's servers.
//!
//! The directories are writable by every local user, so an entry is
//! evidence only of what its writer can prove (`entry_counts`): it counts
//! when it is a regular file, its name starts with a pid that is alive,
//! its `start=` line is that process's start time (not a dead process's,
//! nor an earlier holder's of a reused pid), the process's effective uid
//! is the file's owner (or the file is root's); and each address it lists
//! counts only while a TCP socket of the entry's owner listens on exactly
//! that address in the proxy's network namespace (socket diagnostics,
//! else `/proc/self/net/tcp` and `tcp6`). Anything else is ignored, so no
//! user can make another user's glovebox refuse a destination of their
//! choosing: at most a server they run themselves on this host. A
//! directory that is world-writable and owned by neither root nor the
//! current user (someone made `/tmp/glovebox-listeners` first) is not read
//! at all, with a warning said once; `register` refuses to write there
//! too, and removes entries that no longer count where it may.
//!
//! [`current`] is what a proxy asks on every connection: the
//! last load (unless an entry that counts named an address not yet
//! listened on: a server between its record and its `listen`), reused
//! while neither directory changed (device, inode and modification time,
//! read before the entries; a time within
//! [`RACY`] of the load is not trusted, since a second change in the same
//! clock tick would keep it) and for at most [`MAX_AGE`] (a killed server's
//! entry is then seen as dead, new interface addresses are seen). Reading
//! hundreds of entries on each connection was most of the proxy's set-up
//! time.
//!
//! An address the server bound as unspecified (`0.0.0.0`, `::`) stands for
//! every local address on that port: loopback and each address of the
//! host's interfaces.

use std::fs;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

use crate::net::Registry;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long a loaded registry is reused at most.
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// A directory changed this close to (or after) a load may have changed
/// again in the same clock tick: that load is not reused.
pub const RACY: Duration = Duration::from_millis(50);

/// The shared directories, in the order `register` tries them.
pub const DIRS: [&str; 2] = crate::jail::spec::ALWAYS_PROTECTED;

/// Errors recording a listener.
#[derive(Debug, thiserror::Error)]
pub enum ListenersError {
    /// No shared directory could be used.
    #[error("cannot record glovebox's listener {addr} in {} or {}: {error}; network tools could reach this server through the egress proxy — fix the directory's permissions (mode 1777)", DIRS[0], DIRS[1])]
    Record {
        /// The listener.
        addr: SocketAddr,
        /// The last failure (in the message, before the advice, so not a
        /// `source()` too).
        error: std::io::Error,
    },
}

/// A recorded listener; the record is removed when this is dropped.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// A shared directory, created with mode 1777 when missing; refused when
/// it is a symlink, not sticky, or owned by another user than root or us
/// (someone else could then remove entries).
fn shared_dir(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        if !parent.exists() {
            fs::create_dir(parent)?;
            fs::set_permissions(parent, fs::Permissions::from_mode(0o755))?;
        }
    }
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o1777))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.mode() & 0o1000 == 0 || (meta.uid() != 0 && meta.uid() != euid) {
        return Err(std::io::Error::other(format!(
            "{} is not a sticky directory owned by root or by this user",
            dir.display()
        )));
    }
    Ok(())
}

/// Records `addr` as a glovebox listener until the registration is dropped.
pub fn register(addr: SocketAddr) -> Result<Registration, ListenersError> {
    let mut last = std::io::Error::other("no directory tried");
    for dir in DIRS {
        let dir = Path::new(dir);
        if let Err(e) = shared_dir(dir) {
            last = e;
            continue;
        }
        let name = format!(
            "{}-{}-{}",
            std::process::id(),
            addr.port(),
            hex::encode(rand_bytes())
        );
        let path = dir.join(name);
        sweep(dir);
        // Without its start time an entry never counts: refuse rather
        // than record one that protects nothing.
        let Some(start) = start_time(std::process::id() as i32) else {
            last = std::io::Error::other(
                "cannot read this process's start time from /proc/self/stat (is /proc mounted?)",
            );
            continue;
        };
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .and_then(|mut f| {
                f.set_permissions(fs::Permissions::from_mode(0o644))?;
                f.write_all(format!("{addr}\nstart={start}\n").as_bytes())
            });
        match written {
            Ok(()) => return Ok(Registration { path }),
            Err(e) => last = e,
        }
    }
    Err(ListenersError::Record { addr, error: last })
}

fn rand_bytes() -> [u8; 8] {
    let mut b = [0u8; 8];
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b
}

fn alive(pid: i32) -> bool {
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

/// A process's start time in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), `None` when it cannot be read.
fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // from the last `)`; field 3 is the first after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A process's effective uid (`Uid:` of `/proc/<pid>/status`), `None`
/// when it cannot be read.
fn process_euid(pid: i32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The pid an entry's name starts with.
fn entry_pid(name: &std::ffi::OsStr) -> Option<i32> {
    name.to_str()
        .and_then(|n| n.split('-').next())
        .and_then(|p| p.parse::<i32>().ok())
        .filter(|p| *p > 0)
}

/// The start time an entry recorded.
fn recorded_start(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("start="))
        .and_then(|t| t.parse::<u64>().ok())
}

/// What is known of the process an entry names, read from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    /// Its start time (field 22 of `/proc/<pid>/stat`).
    start: u64,
    /// Its effective uid.
    euid: u32,
}

impl Process {
    /// The live process `pid`, `None` when it is gone or unreadable.
    fn read(pid: i32) -> Option<Process> {
        if !alive(pid) {
            return None;
        }
        let start = start_time(pid)?;
        let euid = process_euid(pid)?;
        // Read the start time again: the uid read belongs to the same
        // process only if the pid was not reused in between.
        (start_time(pid)? == start).then_some(Process { start, euid })
    }
}

/// Whether an entry counts: `text` written in a file owned by `owner`,
/// naming a process `process` (read from `/proc`; `None` when the pid is
/// not alive or unreadable). It counts only when that process is alive,
/// started when the entry says (not a dead process's entry, nor one of an
/// earlier holder of a reused pid) and runs as the entry's owner — or the
/// entry is root's. The pure decision of [`load`].
fn entry_counts(text: &str, owner: u32, process: Option<Process>) -> bool {
    let (Some(recorded), Some(p)) = (recorded_start(text), process) else {
        return false;
    };
    recorded == p.start && (owner == 0 || owner == p.euid)
}

/// An entry's text and owner, read through one descriptor opened without
/// following a link; `None` unless it is a regular file.
fn read_entry(path: &Path) -> Option<(String, u32)> {
    use std::io::Read;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return None;
    }
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    Some((text, meta.uid()))
}

/// The entry at `path` (its text and owner) when it counts now (see
/// [`entry_counts`]): read once, so the text used is the text checked.
fn counted_entry(path: &Path) -> Option<(String, u32)> {
    let pid = path.file_name().and_then(entry_pid)?;
    // Most stale entries are of dead pids: no need to read them.
    if !alive(pid) {
        return None;
    }
    let (text, owner) = read_entry(path)?;
    entry_counts(&text, owner, Process::read(pid)).then_some((text, owner))
}

/// The TCP sockets listening in this process's network namespace (the
/// one the proxy connects from), with their owners' uids: asked of the
/// kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, listening sockets
/// only, which walks the listening table alone), else read from
/// `/proc/self/net/tcp` and `tcp6` (which walk every connection's bucket:
/// about a millisecond each).
fn listening_sockets() -> Vec<(SocketAddr, u32)> {
    if let Ok(v) = diag_listening() {
        return v;
    }
    let mut v = Vec::new();
    for (file, v6) in [("/proc/self/net/tcp", false), ("/proc/self/net/tcp6", true)] {
        if let Ok(text) = fs::read_to_string(file) {
            v.extend(parse_tcp_table(&text, v6));
        }
    }
    v
}

/// `SOCK_DIAG_BY_FAMILY`, the request and reply type of socket dumps.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR`, `NLMSG_DONE`.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `TCP_LISTEN`, as a state bit.
const TCPF_LISTEN: u32 = 1 << 10;

/// A dump request (`nlmsghdr` + `inet_diag_req_v2`) for the listening
/// TCP sockets of `family`.
fn diag_request(family: u8) -> Vec<u8> {
    let mut m = Vec::with_capacity(72);
    m.extend_from_slice(&72u32.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&[0u8; 8]); // sequence, port id
    m.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    m.extend_from_slice(&TCPF_LISTEN.to_ne_bytes());
    m.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: any
    m
}

/// What one datagram of a dump held.
#[derive(Debug, PartialEq, Eq)]
enum DiagPart {
    More,
    Done,
}

/// Reads the sockets (`inet_diag_msg`) of one datagram into `out`.
fn parse_diag(buf: &[u8], out: &mut Vec<(SocketAddr, u32)>) -> Result<DiagPart, nix::errno::Errno> {
    let u16_at = |o: usize| buf.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        buf.get(o..o + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let bad = nix::errno::Errno::EBADMSG;
    let mut o = 0;
    while o + 16 <= buf.len() {
        let len = u32_at(o).ok_or(bad)? as usize;
        let kind = u16_at(o + 4).ok_or(bad)?;
        if len < 16 || o + len > buf.len() {
            return Err(bad);
        }
        match kind {
            NLMSG_DONE => return Ok(DiagPart::Done),
            NLMSG_ERROR => {
                let code = u32_at(o + 16).ok_or(bad)? as i32;
                return Err(nix::errno::Errno::from_raw(-code));
            }
            SOCK_DIAG_BY_FAMILY if len >= 16 + 72 => {
                let m = &buf[o + 16..o + len];
                let port = u16::from_be_bytes([m[4], m[5]]);
                let ip = match i32::from(m[0]) {
                    libc::AF_INET => IpAddr::from([m[8], m[9], m[10], m[11]]),
                    libc::AF_INET6 => {
                        let mut b = [0u8; 16];
                        b.copy_from_slice(&m[8..24]);
                        IpAddr::from(b)
                    }
                    _ => {
                        o += (len + 3) & !3;
                        continue;
                    }
                };
                let uid = u32::from_ne_bytes([m[64], m[65], m[66], m[67]]);
                out.push((SocketAddr::new(ip, port), uid));
            }
            _ => {}
        }
        o += (len + 3) & !3;
    }
    Ok(DiagPart::More)
}

/// The listening TCP sockets of this network namespace, by socket
/// diagnostics.
fn diag_listening() -> Result<Vec<(SocketAddr, u32)>, nix::errno::Errno> {
    use nix::sys::socket::{
        recv, sendto, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
        SockType,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        sendto(
            fd.as_raw_fd(),
            &diag_request(family),
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )?;
        // Bounded: a dump of a few hundred thousand listening sockets.
        let mut done = false;
        for _ in 0..10_000 {
            let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            if n == 0 || parse_diag(&buf[..n], &mut out)? == DiagPart::Done {
                done = true;
                break;
            }
        }
        if !done {
            return Err(nix::errno::Errno::EOVERFLOW);
        }
    }
    Ok(out)
}

/// The listening sockets (state `0A`) of a `/proc/net/tcp{,6}` table.
/// Addresses are words printed in the host's byte order; the port is a
/// plain number.
fn parse_tcp_table(text: &str, v6: bool) -> Vec<(SocketAddr, u32)> {
    let word = |h: &str| u32::from_str_radix(h, 16).ok().map(u32::to_ne_bytes);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 || f[3] != "0A" {
                return None;
            }
            let (ip, port) = f[1].split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let ip = if v6 {
                if ip.len() != 32 {
                    return None;
                }
                let mut b = [0u8; 16];
                for (i, chunk) in b.chunks_mut(4).enumerate() {
                    chunk.copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
                }
                IpAddr::from(b)
            } else {
                IpAddr::from(word(ip)?)
            };
            Some((SocketAddr::new(ip, port), f[7].parse().ok()?))
        })
        .collect()
}

/// Removes the entries that no longer count — servers that were killed,
/// entries that never could (those this user may remove: its own, or all
/// as root) — so the directory does not grow.
fn sweep(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if counted_entry(&e.path()).is_none() {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether a registry directory may be read by a process of `euid`: a
/// directory anyone may write (mode `o+w`) is trusted only when root or
/// `euid` owns it; otherwise whoever created it first could have planted
/// anything, or could swap it. Not a directory (a link included): no.
fn trusted_dir(meta: &fs::Metadata, euid: u32) -> bool {
    meta.is_dir() && (meta.mode() & 0o002 == 0 || meta.uid() == 0 || meta.uid() == euid)
}

/// Says once per process that `dir` is not read, and why.
fn warn_untrusted(dir: &Path, owner: u32) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "glovebox: not reading glovebox's listener registry {}: it is world-writable and owned by uid {owner}, not by root or by this user, so anyone could have planted entries in it; remove it (as root or as its owner) and glovebox recreates it",
            dir.display()
        );
    });
}

/// What identifies a directory's contents between two loads.
type Stamp = Option<(u64, u64, i64, i64)>;

fn stamp(dir: &str) -> Stamp {
    let m = fs::metadata(dir).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
}

/// The last load and what the directories looked like just before it.
struct Cached {
    stamps: [Stamp; 2],
    at: Instant,
    registry: Arc<Registry>,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// True when `stamp`'s modification time lies at least [`RACY`] before
/// `at` (a change in the same clock tick as the load would not move it).
fn settled(stamp: &Stamp, at: SystemTime) -> bool {
    match stamp {
        None => true,
        Some((_, _, s, ns)) => {
            let Ok(secs) = u64::try_from(*s) else {
                return false;
            };
            let mtime = SystemTime::UNIX_EPOCH
                + Duration::from_secs(secs)
                + Duration::from_nanos(u64::try_from(*ns).unwrap_or(0));
            at.duration_since(mtime).is_ok_and(|d| d >= RACY)
        }
    }
}

/// The registry as of now: the last load while it still holds (see
/// the module documentation), else a fresh one.
pub fn current() -> Arc<Registry> {
    let stamps = DIRS.map(stamp);
    if let Ok(cache) = CACHE.lock() {
        if let Some(c) = cache.as_ref() {
            if c.stamps == stamps && c.at.elapsed() < MAX_AGE {
                return c.registry.clone();
            }
        }
    }
    let wall = SystemTime::now();
    let at = Instant::now();
    let registry = Arc::new(load());
    if !registry.pending() && stamps.iter().all(|s| settled(s, wall)) {
        if let Ok(mut cache) = CACHE.lock() {
            *cache = Some(Cached {
                stamps,
                at,
                registry: registry.clone(),
            });
        }
    }
    registry
}

/// Reads the shared directories and the host's interface addresses.
pub fn load() -> Registry {
    load_from(&DIRS.map(Path::new))
}

/// [`load`] of the directories `dirs`.
fn load_from(dirs: &[&Path]) -> Registry {
    let euid = nix::unistd::geteuid().as_raw();
    // Each address with the uid of the entry that names it.
    let mut named: Vec<(SocketAddr, u32)> = Vec::new();
    for dir in dirs {
        let Ok(meta) = fs::symlink_metadata(dir) else {
            continue;
        };
        if !trusted_dir(&meta, euid) {
            if meta.is_dir() {
                warn_untrusted(dir, meta.uid());
            }
            continue;
        }
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if let Some((text, owner)) = counted_entry(&e.path()) {
                named.extend(
                    text.lines()
                        .filter_map(|l| l.trim().parse::<SocketAddr>().ok())
                        .map(|a| (a, owner)),
                );
            }
        }
    }
    // An address counts only while the entry's owner listens on it
    // here: an entry cannot make the proxy refuse a remote destination
    // or another user's local service, only its writer's own server.
    let sockets = if named.is_empty() {
        Vec::new()
    } else {
        listening_sockets()
    };
    let total = named.len();
    let listeners: Vec<SocketAddr> = named
        .into_iter()
        .filter(|(a, owner)| sockets.iter().any(|(s, uid)| s == a && uid == owner))
        .map(|(a, _)| a)
        .collect();
    let pending = listeners.len() < total;
    // Always read: the host's own addresses are refused as destinations
    // without `allow_private` (`Registry::is_this_host`), not only where
    // a listener is bound to an unspecified address.
    let local: Vec<IpAddr> = nix::ifaddrs::getifaddrs()
        .map(|it| {
            it.filter_map(|i| {
                let a = i.address?;
                a.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            })
            .collect()
        })
        .unwrap_or_default();
    Registry::found(listeners, local, pending)
}

#[cfg(test)]
#[path = "listeners_tests.rs"]
mod tests;
