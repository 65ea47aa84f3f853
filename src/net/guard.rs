//! The SSRF guard: which resolved addresses an http tool may connect to.
//!
//! The proxy resolves a host itself, passes every address through
//! [`check`], and connects to exactly an address that passed — there is no
//! second DNS lookup for a rebinding server to answer differently.
//!
//! Three classes:
//!
//! - **always refused**: link-local (`169.254.0.0/16`, `fe80::/10`), where
//!   cloud metadata services live (`169.254.169.254`, `fd00:ec2::254`).
//!   No setting opens these: a tool that reads instance credentials is
//!   the classic SSRF.
//! - **private**, refused unless `.glee/config.yml` sets
//!   `security.http.allow_private: true`: loopback (`127.0.0.0/8`, `::1`),
//!   private ranges (`10/8`, `172.16/12`, `192.168/16`, `100.64/10`,
//!   `fc00::/7`), unspecified (`0.0.0.0/8`, `::`), multicast, broadcast and
//!   the reserved `240/4`, `198.18/15`.
//! - **public**: everything else.
//!
//! IPv6 forms that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`,
//! IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are
//! judged by the IPv4 address they carry; the local-use NAT64 prefix
//! `64:ff9b:1::/48` is private (a local gateway's).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address the guard refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// Link-local or cloud metadata: never allowed.
    #[error("the SSRF guard refused {addr} ({what}); link-local and cloud metadata addresses are never reachable from http tools")]
    Forbidden {
        /// The refused address.
        addr: IpAddr,
        /// Which range it is in.
        what: &'static str,
    },
    /// Private, loopback and the like, without `allow_private`.
    #[error("the SSRF guard refused {addr} ({what}); set `security.http.allow_private: true` in .glee/config.yml to let http tools reach private addresses")]
    Private {
        /// The refused address.
        addr: IpAddr,
        /// Which range it is in.
        what: &'static str,
    },
}

/// Where an address falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A public address.
    Public,
    /// Private, loopback, unspecified, multicast or reserved.
    Private(&'static str),
    /// Link-local or cloud metadata.
    Forbidden(&'static str),
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    const FORBIDDEN: &[([u8; 4], u32, &str)] = &[([169, 254, 0, 0], 16, "link-local")];
    const PRIVATE: &[([u8; 4], u32, &str)] = &[
        ([127, 0, 0, 0], 8, "loopback"),
        ([10, 0, 0, 0], 8, "private"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 168, 0, 0], 16, "private"),
        ([100, 64, 0, 0], 10, "shared address space"),
        ([0, 0, 0, 0], 8, "unspecified"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([240, 0, 0, 0], 4, "reserved"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([192, 0, 0, 0], 24, "protocol assignments"),
    ];
    for (net, bits, what) in FORBIDDEN {
        if in_v4(ip, *net, *bits) {
            return Class::Forbidden(what);
        }
    }
    for (net, bits, what) in PRIVATE {
        if in_v4(ip, *net, *bits) {
            return Class::Private(what);
        }
    }
    Class::Public
}

/// The IPv4 address an IPv6 address carries, if it is one of the forms
/// that embed one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        // IPv4-mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        // IPv4-compatible ::a.b.c.d (not :: and ::1, judged as IPv6)
        [0, 0, 0, 0, 0, 0, _, _] if u128::from(ip) > 1 => Some(tail),
        // NAT64 64:ff9b::/96
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        // 6to4 2002:a.b.c.d::/48
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        _ => None,
    }
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Class::Forbidden("cloud metadata")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Class::Forbidden("link-local")
    } else if ip.is_loopback() {
        Class::Private("loopback")
    } else if ip.is_unspecified() {
        Class::Private("unspecified")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Class::Private("unique local")
    } else if s[0] & 0xff00 == 0xff00 {
        Class::Private("multicast")
    } else if s[0] & 0xffc0 == 0xfec0 {
        Class::Private("site-local")
    } else if s[..3] == [0x64, 0xff9b, 1] {
        // RFC 8215's local-use NAT64 prefix: translated by a gateway of the
        // local network, to whatever IPv4 addresses it serves.
        Class::Private("NAT64 local-use")
    } else {
        Class::Public
    }
}

/// The class of `ip`.
pub fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Ok when an http tool may connect to `ip`.
pub fn check(ip: IpAddr, allow_private: bool) -> Result<(), GuardError> {
    match classify(ip) {
        Class::Public => Ok(()),
        Class::Private(_) if allow_private => Ok(()),
        Class::Private(what) => Err(GuardError::Private { addr: ip, what }),
        Class::Forbidden(what) => Err(GuardError::Forbidden { addr: ip, what }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn class(s: &str) -> Class {
        classify(s.parse().unwrap())
    }

    #[test]
    fn metadata_and_link_local_are_always_refused() {
        for a in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
        ] {
            assert!(matches!(class(a), Class::Forbidden(_)), "{a}");
            assert!(check(a.parse().unwrap(), true).is_err(), "{a}");
        }
    }

    #[test]
    fn private_needs_allow_private() {
        for a in [
            "127.0.0.1",
            "127.9.9.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "64:ff9b:1::808:808",
        ] {
            assert!(matches!(class(a), Class::Private(_)), "{a}");
            assert!(check(a.parse().unwrap(), false).is_err(), "{a}");
            assert!(check(a.parse().unwrap(), true).is_ok(), "{a}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(class(a), Class::Public, "{a}");
            assert!(check(a.parse().unwrap(), false).is_ok(), "{a}");
        }
    }
}
