//! glovebox's own listeners as a destination: whether a connection to an
//! address would reach one of them (pure). Reading which listeners are
//! live on this machine — the shared directories `serve` records itself
//! in, checked against the kernel's listening sockets — is
//! [`crate::egress::listeners`]'s job; this is the answer it loads.

use std::net::{IpAddr, SocketAddr};

/// Every live glovebox listener on this machine, and the host's own
/// addresses (for listeners bound to an unspecified address, and as
/// destinations in their own right: [`Registry::is_this_host`]).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    listeners: Vec<SocketAddr>,
    local: Vec<IpAddr>,
    /// An entry that counts named an address nobody listens on yet: a
    /// server between its record and its `listen` (see `serve::http`).
    /// Such a load is not reused, so the server counts as soon as it
    /// listens.
    pending: bool,
}

impl Registry {
    /// The registry a load found: the live `listeners`, the host's `local`
    /// addresses, and whether an entry named an address not listened on
    /// yet (`pending`).
    pub fn found(listeners: Vec<SocketAddr>, local: Vec<IpAddr>, pending: bool) -> Registry {
        Registry {
            listeners,
            local,
            pending,
        }
    }

    /// A registry of exactly these listeners and local addresses (tests).
    pub fn of(listeners: Vec<SocketAddr>, local: Vec<IpAddr>) -> Registry {
        Registry::found(listeners, local, false)
    }

    /// True when an entry named an address nobody listened on yet (such
    /// a load is not reused).
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// True when `ip` is one of this host's own interface addresses: a
    /// connection to it is delivered to the host itself, like one to
    /// loopback, and reaches every service bound to an unspecified
    /// address (`0.0.0.0`, `::`) — whatever range the address is in (a
    /// server's public address on its own interface, a global IPv6
    /// address).
    pub fn is_this_host(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.local.iter().any(|a| canonical(*a) == ip)
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
    fn the_hosts_own_addresses_are_this_host() {
        let r = Registry::of(
            vec![],
            vec![
                "203.0.113.7".parse().unwrap(),
                "2001:db8::7".parse().unwrap(),
            ],
        );
        assert!(r.is_this_host("203.0.113.7".parse().unwrap()));
        assert!(r.is_this_host("::ffff:203.0.113.7".parse().unwrap()));
        assert!(r.is_this_host("2001:db8::7".parse().unwrap()));
        assert!(!r.is_this_host("203.0.113.8".parse().unwrap()));
        assert!(!r.is_own("203.0.113.7:80".parse().unwrap()));
    }
}
