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
//! `<pid>-<port>-<random>` and holds one socket address per line; entries of
//! dead processes are ignored. [`Registry::load`] reads both directories,
//! so a proxy run by any user sees every user's servers.
//!
//! An address the server bound as unspecified (`0.0.0.0`, `::`) stands for
//! every local address on that port: loopback and each address of the
//! host's interfaces.

use std::fs;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The shared directories, in the order `register` tries them.
pub const DIRS: [&str; 2] = ["/run/glovebox/listeners", "/tmp/glovebox-listeners"];

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
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .and_then(|mut f| {
                f.set_permissions(fs::Permissions::from_mode(0o644))?;
                writeln!(f, "{addr}")
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

/// Every live glovebox listener on this machine, and the host's own
/// addresses (for listeners bound to an unspecified address).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    listeners: Vec<SocketAddr>,
    local: Vec<IpAddr>,
}

impl Registry {
    /// Reads the shared directories and the host's interface addresses.
    pub fn load() -> Registry {
        let mut listeners: Vec<SocketAddr> = Vec::new();
        for dir in DIRS {
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let pid = name
                    .to_str()
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<i32>().ok());
                if pid.is_some_and(|p| p > 0 && !alive(p)) {
                    continue;
                }
                if let Ok(text) = fs::read_to_string(e.path()) {
                    listeners.extend(
                        text.lines()
                            .filter_map(|l| l.trim().parse::<SocketAddr>().ok()),
                    );
                }
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
}
