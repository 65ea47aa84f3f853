//! Host allowlists: `permissions.network: {allow: [PATTERN…]}`.
//!
//! A PATTERN is one of
//!
//! - `host` or `host:port`: that DNS name exactly (case-insensitive, a
//!   trailing dot ignored), on any port or on that port;
//! - `*.suffix` or `*.suffix:port`: every name *below* `suffix`
//!   (`*.example.com` matches `api.example.com` and `a.b.example.com`, not
//!   `example.com` itself — list both when both are meant);
//! - an IP literal, `1.2.3.4`, `1.2.3.4:443`, `::1`, `[::1]` or
//!   `[::1]:8080`.
//!
//! A destination named by an IP address (a bare-IP `CONNECT`, a SOCKS5
//! request with an address) is matched against IP patterns only: a name
//! pattern never lets a tool reach whatever address it likes. An allowlist
//! only narrows: every destination it lets through still passes the SSRF
//! guard ([`crate::net::guard`]).
//!
//! Everything here is pure and unit-tested; the egress proxy ([`crate::egress::forward`]), the http tools' client
//! and `create`'s ceiling ([`Allowlist::covers`]) use it.

use std::fmt;
use std::net::IpAddr;

/// A pattern that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Not a host, `*.suffix` or IP literal.
    #[error("invalid network pattern {pattern:?}: {why}; use `host`, `host:port`, `*.suffix` or an IP literal (`[::1]:port` for IPv6)")]
    Invalid {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Where a connection goes, as the tool named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An IP address.
    Ip(IpAddr),
}

impl Host {
    /// Reads a host as a tool sends it (`example.com`, `1.2.3.4`, `::1`,
    /// `[::1]`). `None` when it is neither a valid DNS name nor an address
    /// (numeric forms such as `2130706433` that resolvers read as
    /// addresses are refused, not guessed at).
    pub fn parse(text: &str) -> Option<Host> {
        let t = text
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = t.parse::<IpAddr>() {
            return Some(Host::Ip(ip));
        }
        if text.starts_with('[') {
            return None;
        }
        let name = t.strip_suffix('.').unwrap_or(t).to_ascii_lowercase();
        valid_name(&name).then_some(Host::Name(name))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// True for a label that resolvers and URL parsers read as a number
/// (`127`, `0x7f`, `0X`): a name ending in one is an IPv4 address in
/// disguise (`0x7f000001`, `0x7f.1`, `127.0.0.1.`).
fn numeric_label(l: &str) -> bool {
    let hex = l.strip_prefix("0x").or_else(|| l.strip_prefix("0X"));
    match hex {
        Some(h) => h.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// True for a DNS name glovebox accepts: labels of letters, digits, `-`
/// and `_`, 1–63 bytes each, 253 in all, and a last label that is not a
/// number (decimal or `0x` hex: that would be an address in disguise).
fn valid_name(name: &str) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    labels.iter().all(label_ok) && labels.last().is_some_and(|l| !numeric_label(l))
}

/// What one pattern names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Name(String),
    Suffix(String),
    Ip(IpAddr),
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    target: Target,
    port: Option<u16>,
}

fn invalid(pattern: &str, why: &'static str) -> PatternError {
    PatternError::Invalid {
        pattern: pattern.to_string(),
        why,
    }
}

fn port(pattern: &str, text: &str) -> Result<u16, PatternError> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 && !text.starts_with('+') => Ok(p),
        _ => Err(invalid(pattern, "the port is not a number from 1 to 65535")),
    }
}

impl Pattern {
    /// Parses one pattern.
    pub fn parse(pattern: &str) -> Result<Pattern, PatternError> {
        let p = pattern.trim();
        if p.is_empty() {
            return Err(invalid(pattern, "it is empty"));
        }
        if p != pattern {
            return Err(invalid(pattern, "it has spaces around it"));
        }
        if let Some(rest) = p.strip_prefix('[') {
            let (ip, after) = rest
                .split_once(']')
                .ok_or_else(|| invalid(pattern, "an IPv6 address in brackets lacks its `]`"))?;
            let ip: std::net::Ipv6Addr = ip
                .parse()
                .map_err(|_| invalid(pattern, "the text in brackets is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                _ => Some(port(
                    pattern,
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| invalid(pattern, "expected `:port` after `]`"))?,
                )?),
            };
            return Ok(Pattern {
                target: Target::Ip(IpAddr::V6(ip)),
                port,
            });
        }
        if let Ok(ip) = p.parse::<IpAddr>() {
            return Ok(Pattern {
                target: Target::Ip(ip),
                port: None,
            });
        }
        let (host, port) = match p.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(invalid(
                    pattern,
                    "an IPv6 address with a port must be written `[addr]:port`",
                ))
            }
            Some((h, pt)) => (h, Some(port(pattern, pt)?)),
            None => (p, None),
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Pattern {
                target: Target::Ip(ip),
                port,
            });
        }
        let target = if let Some(suffix) = host.strip_prefix("*.") {
            let s = suffix
                .strip_suffix('.')
                .unwrap_or(suffix)
                .to_ascii_lowercase();
            if !valid_name(&s) {
                return Err(invalid(pattern, "the part after `*.` is not a host name"));
            }
            Target::Suffix(s)
        } else {
            if host.contains('*') {
                return Err(invalid(
                    pattern,
                    "`*` is allowed only as a whole first label (`*.example.com`); use `network: true` for any host",
                ));
            }
            let n = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
            if !valid_name(&n) {
                return Err(invalid(pattern, "it is not a host name or IP address"));
            }
            Target::Name(n)
        };
        Ok(Pattern { target, port })
    }

    /// True when a connection to `host`:`port` matches.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        self.matches_host(host)
    }

    /// True when a connection to `host` matches on some port.
    pub fn matches_host(&self, host: &Host) -> bool {
        match (&self.target, host) {
            (Target::Name(n), Host::Name(h)) => n == h,
            (Target::Suffix(s), Host::Name(h)) => h
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            // `::ffff:a.b.c.d` is `a.b.c.d` (the kernel connects to it).
            (Target::Ip(a), Host::Ip(b)) => a.to_canonical() == b.to_canonical(),
            _ => false,
        }
    }

    /// True when everything `other` matches, `self` matches too.
    pub fn covers(&self, other: &Pattern) -> bool {
        if let Some(p) = self.port {
            if other.port != Some(p) {
                return false;
            }
        }
        match (&self.target, &other.target) {
            (Target::Name(a), Target::Name(b)) => a == b,
            (Target::Ip(a), Target::Ip(b)) => a == b,
            (Target::Suffix(s), Target::Name(n)) => n
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Target::Suffix(s), Target::Suffix(t)) => {
                t == s
                    || t.strip_suffix(s.as_str())
                        .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
            }
            _ => false,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.target, self.port) {
            (Target::Name(n), None) => f.write_str(n),
            (Target::Name(n), Some(p)) => write!(f, "{n}:{p}"),
            (Target::Suffix(s), None) => write!(f, "*.{s}"),
            (Target::Suffix(s), Some(p)) => write!(f, "*.{s}:{p}"),
            (Target::Ip(IpAddr::V6(ip)), Some(p)) => write!(f, "[{ip}]:{p}"),
            (Target::Ip(ip), Some(p)) => write!(f, "{ip}:{p}"),
            (Target::Ip(ip), None) => write!(f, "{ip}"),
        }
    }
}

/// The hosts a tool may reach; empty allows nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allowlist {
    patterns: Vec<Pattern>,
}

impl Allowlist {
    /// Parses every pattern; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Allowlist, PatternError> {
        Ok(Allowlist {
            patterns: patterns
                .iter()
                .map(|p| Pattern::parse(p.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    /// True when some pattern matches `host`:`port`.
    pub fn permits(&self, host: &Host, port: u16) -> bool {
        self.patterns.iter().any(|p| p.matches(host, port))
    }

    /// True when some pattern matches `host` on some port (transparent
    /// egress answers its DNS question; each connection is still decided
    /// with its port by [`Allowlist::permits`]).
    pub fn names(&self, host: &Host) -> bool {
        self.patterns.iter().any(|p| p.matches_host(host))
    }

    /// True when every pattern of `other` lies inside one of ours.
    pub fn covers(&self, other: &Allowlist) -> bool {
        other
            .patterns
            .iter()
            .all(|o| self.patterns.iter().any(|s| s.covers(o)))
    }

    /// The patterns of `other` that no pattern of ours covers.
    pub fn uncovered<'a>(&self, other: &'a Allowlist) -> Vec<&'a Pattern> {
        other
            .patterns
            .iter()
            .filter(|o| !self.patterns.iter().any(|s| s.covers(o)))
            .collect()
    }

    /// The patterns, normalized, for people.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    fn list(p: &[&str]) -> Allowlist {
        Allowlist::parse(p).unwrap()
    }

    #[test]
    fn patterns_parse_and_print_normalized() {
        for (text, shown) in [
            ("example.com", "example.com"),
            ("Example.COM.", "example.com"),
            ("example.com:443", "example.com:443"),
            ("*.example.com", "*.example.com"),
            ("*.example.com:8080", "*.example.com:8080"),
            ("10.0.0.5", "10.0.0.5"),
            ("10.0.0.5:22", "10.0.0.5:22"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("[::1]:8080", "[::1]:8080"),
            ("localhost", "localhost"),
        ] {
            assert_eq!(Pattern::parse(text).unwrap().to_string(), shown, "{text}");
        }
    }

    #[test]
    fn bad_patterns_say_why() {
        for bad in [
            "",
            " example.com",
            "*",
            "*example.com",
            "api.*.com",
            "example.com:0",
            "example.com:70000",
            "example.com:http",
            "[::1",
            "[::1]8080",
            "[example.com]",
            "http://example.com",
            "exa mple.com",
            "example.com/path",
            "-bad.com",
            "2130706433",
            "1.2.3",
        ] {
            let e = Pattern::parse(bad);
            assert!(e.is_err(), "{bad:?} parsed as {e:?}");
            assert!(e
                .unwrap_err()
                .to_string()
                .contains("invalid network pattern"));
        }
    }

    #[test]
    fn names_match_names_and_ips_match_ips_only() {
        let l = list(&["example.com", "*.pypi.org:443", "10.0.0.5:22", "[::1]:8080"]);
        assert!(l.permits(&host("example.com"), 80));
        assert!(l.permits(&host("EXAMPLE.com."), 443));
        assert!(!l.permits(&host("www.example.com"), 80));
        assert!(l.permits(&host("files.pypi.org"), 443));
        assert!(l.permits(&host("a.b.pypi.org"), 443));
        assert!(!l.permits(&host("pypi.org"), 443));
        assert!(!l.permits(&host("files.pypi.org"), 80));
        assert!(!l.permits(&host("evilpypi.org"), 443));
        assert!(l.permits(&host("10.0.0.5"), 22));
        assert!(!l.permits(&host("10.0.0.5"), 23));
        assert!(l.permits(&host("::1"), 8080));
        assert!(l.permits(&host("[::1]"), 8080));
        assert!(!l.permits(&host("::1"), 8081));
        assert!(l.permits(&host("::ffff:10.0.0.5"), 22));
        assert!(!l.permits(&host("::ffff:10.0.0.6"), 22));
        // A name pattern never admits an address, whatever it resolves to.
        let byname = list(&["localhost"]);
        assert!(!byname.permits(&host("127.0.0.1"), 80));
        assert!(Allowlist::default().permits(&host("x.org"), 1).eq(&false));
    }

    #[test]
    fn hosts_that_hide_addresses_do_not_parse() {
        assert_eq!(Host::parse("2130706433"), None);
        for disguised in [
            "0x7f000001",
            "0X7F000001",
            "0x7f.1",
            "0x7f.0.0.0x1",
            "127.0.0.1.",
            "0177.0.0.1",
            "127.1",
            "foo.0x",
        ] {
            assert_eq!(Host::parse(disguised), None, "{disguised}");
            assert!(Pattern::parse(disguised).is_err(), "{disguised}");
        }
        // Hex-looking labels that are not numbers stay names.
        assert!(matches!(Host::parse("0xfeed.example"), Some(Host::Name(_))));
        assert!(matches!(Host::parse("cafe"), Some(Host::Name(_))));
        assert!(matches!(Host::parse("x0x1"), Some(Host::Name(_))));
        assert_eq!(Host::parse("evil.com/x"), None);
        assert_eq!(Host::parse("[example.com]"), None);
        assert_eq!(
            Host::parse("127.0.0.1"),
            Some(Host::Ip("127.0.0.1".parse().unwrap()))
        );
    }

    #[test]
    fn ceilings_cover_narrower_lists_only() {
        let ceiling = list(&["*.example.com", "pypi.org", "10.0.0.5"]);
        assert!(ceiling.covers(&list(&[
            "api.example.com:443",
            "*.a.example.com",
            "pypi.org:443"
        ])));
        assert!(ceiling.covers(&list(&["10.0.0.5:22"])));
        assert!(!ceiling.covers(&list(&["example.com"])));
        assert!(!ceiling.covers(&list(&["files.pypi.org"])));
        assert!(!ceiling.covers(&list(&["10.0.0.6"])));
        let port_bound = list(&["pypi.org:443"]);
        assert!(!port_bound.covers(&list(&["pypi.org"])));
        assert!(port_bound.covers(&list(&["pypi.org:443"])));
        assert_eq!(
            ceiling
                .uncovered(&list(&["evil.com", "x.example.com"]))
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            ["evil.com"]
        );
    }
}
