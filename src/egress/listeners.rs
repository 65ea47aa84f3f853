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
//! `/proc/<pid>/stat`); entries of dead processes — or of a pid now reused
//! by another process — are ignored, and `register` removes those it may.
//! [`Registry::load`] reads both directories, so a proxy run by any user
//! sees every user's servers.
//!
//! [`Registry::current`] is what a proxy asks on every connection: the
//! last load, reused while neither directory changed (device, inode and
//! modification time, read before the entries; a time within
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
        let start = start_time(std::process::id() as i32);
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .and_then(|mut f| {
                f.set_permissions(fs::Permissions::from_mode(0o644))?;
                let mut text = format!("{addr}\n");
                if let Some(t) = start {
                    text.push_str(&format!("start={t}\n"));
                }
                f.write_all(text.as_bytes())
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

/// The pid an entry's name starts with.
fn entry_pid(name: &std::ffi::OsStr) -> Option<i32> {
    name.to_str()
        .and_then(|n| n.split('-').next())
        .and_then(|p| p.parse::<i32>().ok())
        .filter(|p| *p > 0)
}

/// Whether the process that wrote `text` as the entry of `pid` still
/// runs: the pid is alive and, when the entry recorded a start time, the
/// process with that pid started then (not a later one given the same
/// pid). Unknown counts as alive: a listener is never forgotten by doubt.
fn entry_alive(pid: i32, text: &str) -> bool {
    if !alive(pid) {
        return false;
    }
    let recorded = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("start="))
        .and_then(|t| t.parse::<u64>().ok());
    match (recorded, start_time(pid)) {
        (Some(r), Some(now)) => r == now,
        _ => true,
    }
}

/// Removes the entries of processes that are gone (those this user may
/// remove: its own, or all as root), so the directory does not grow with
/// servers that were killed.
fn sweep(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = entry_pid(&e.file_name()) else {
            continue;
        };
        let text = fs::read_to_string(e.path()).unwrap_or_default();
        if !entry_alive(pid, &text) {
            let _ = fs::remove_file(e.path());
        }
    }
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

/// Every live glovebox listener on this machine, and the host's own
/// addresses (for listeners bound to an unspecified address).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    listeners: Vec<SocketAddr>,
    local: Vec<IpAddr>,
}

impl Registry {
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
        let registry = Arc::new(Registry::load());
        if stamps.iter().all(|s| settled(s, wall)) {
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
        let mut listeners: Vec<SocketAddr> = Vec::new();
        for dir in DIRS {
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let pid = entry_pid(&e.file_name());
                // Most stale entries are of dead pids: no need to read them.
                if pid.is_some_and(|p| !alive(p)) {
                    continue;
                }
                let Ok(text) = fs::read_to_string(e.path()) else {
                    continue;
                };
                if pid.is_some_and(|p| !entry_alive(p, &text)) {
                    continue;
                }
                listeners.extend(
                    text.lines()
                        .filter_map(|l| l.trim().parse::<SocketAddr>().ok()),
                );
            }
        }
        let local = if listeners.iter().any(|a| a.ip().is_unspecified()) {
            nix::ifaddrs::getifaddrs()
                .map(|it| {
                    it.filter_map(|i| {
                        let a = i.address?;
                        a.as_sockaddr_in()
                            .map(|v4| IpAddr::V4(v4.ip()))
                            .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
                    })
                    .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Registry { listeners, local }
    }

    /// A registry of exactly these listeners and local addresses (tests).
    pub fn of(listeners: Vec<SocketAddr>, local: Vec<IpAddr>) -> Registry {
        Registry { listeners, local }
    }

    /// True when connecting to `dest` would reach a glovebox listener.
    pub fn is_own(&self, dest: SocketAddr) -> bool {
        let ip = canonical(dest.ip());
        self.listeners.iter().any(|l| {
            if l.port() != dest.port() {
                return false;
            }
            let lip = canonical(l.ip());
            if lip.is_unspecified() {
                ip.is_loopback()
                    || ip.is_unspecified()
                    || self.local.iter().any(|a| canonical(*a) == ip)
            } else {
                lip == ip || (lip.is_loopback() && ip.is_unspecified())
            }
        })
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; everything else as it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn specific_and_unspecified_listeners_match() {
        let r = Registry::of(
            vec![
                "127.0.0.1:7878".parse().unwrap(),
                "[::]:9000".parse().unwrap(),
            ],
            vec!["192.168.1.10".parse().unwrap()],
        );
        assert!(r.is_own("127.0.0.1:7878".parse().unwrap()));
        assert!(r.is_own("[::ffff:127.0.0.1]:7878".parse().unwrap()));
        assert!(r.is_own("0.0.0.0:7878".parse().unwrap()));
        assert!(!r.is_own("127.0.0.2:7878".parse().unwrap()));
        assert!(!r.is_own("127.0.0.1:7879".parse().unwrap()));
        assert!(r.is_own("127.0.0.5:9000".parse().unwrap()));
        assert!(r.is_own("[::1]:9000".parse().unwrap()));
        assert!(r.is_own("192.168.1.10:9000".parse().unwrap()));
        assert!(!r.is_own("192.168.1.11:9000".parse().unwrap()));
    }

    #[test]
    fn a_registration_is_seen_and_removed() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let reg = register(addr).unwrap();
        assert!(Registry::load().is_own(addr));
        drop(reg);
        assert!(!Registry::load().is_own(addr));
    }

    #[test]
    fn the_current_registry_sees_a_new_registration_at_once() {
        let addr: SocketAddr = "127.0.0.1:2".parse().unwrap();
        // Load (and perhaps cache) before the registration.
        assert!(!Registry::current().is_own(addr));
        let reg = register(addr).unwrap();
        assert!(Registry::current().is_own(addr));
        drop(reg);
        assert!(!Registry::current().is_own(addr));
    }

    #[test]
    fn entries_of_dead_or_reused_pids_are_not_alive_and_are_swept() {
        let me = std::process::id() as i32;
        let start = start_time(me).unwrap();
        assert!(entry_alive(me, &format!("127.0.0.1:1\nstart={start}\n")));
        // Written by an older process that had our pid.
        assert!(!entry_alive(
            me,
            &format!("127.0.0.1:1\nstart={}\n", start + 1)
        ));
        // Entries without a start time: the pid alone decides.
        assert!(entry_alive(me, "127.0.0.1:1\n"));
        let dead = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let pid = c.id() as i32;
            c.wait().unwrap();
            pid
        };
        assert!(!entry_alive(dead, "127.0.0.1:1\n"));
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join(format!("{me}-1-a"));
        let reused = dir.path().join(format!("{me}-1-b"));
        let gone = dir.path().join(format!("{dead}-1-c"));
        fs::write(&keep, format!("127.0.0.1:1\nstart={start}\n")).unwrap();
        fs::write(&reused, format!("127.0.0.1:1\nstart={}\n", start + 1)).unwrap();
        fs::write(&gone, "127.0.0.1:1\n").unwrap();
        sweep(dir.path());
        assert!(keep.exists());
        assert!(!reused.exists());
        assert!(!gone.exists());
    }

    #[test]
    fn a_recent_change_is_not_trusted_to_stay_put() {
        let now = SystemTime::now();
        let at = |t: SystemTime| {
            let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
            Some((1, 1, d.as_secs() as i64, i64::from(d.subsec_nanos())))
        };
        assert!(settled(&at(now - Duration::from_secs(5)), now));
        assert!(!settled(&at(now - RACY / 2), now));
        assert!(!settled(&at(now + Duration::from_secs(1)), now));
        assert!(settled(&None, now));
    }
}
