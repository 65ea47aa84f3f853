//! Where a connection may go, decided without a lookup or a socket: the
//! allowlist on the host as the tool named it ([`check_host`]), then, for
//! every address it resolves to, the SSRF guard and glovebox's own
//! listeners ([`check_addr`]). The egress proxy carries the decision out
//! (resolves, connects to exactly an address that passed:
//! [`crate::egress::connect`]).

use std::net::SocketAddr;

use super::guard::{self, Class};
use super::own::Registry;
use crate::net::allow::{Allowlist, Host};

/// What a call's connections may reach: the input of the decision.
///
/// `I` is what the carrier attaches to the rules for the hosts it reads
/// rather than tunnels (the egress proxy: the interception of the call's
/// placeholder secrets, [`crate::egress::Rules`]); the decision never
/// looks at it.
#[derive(Debug, Clone)]
pub struct Rules<I = ()> {
    /// Only these hosts, when set (`permissions.network: {allow: […]}`).
    pub allow: Option<Allowlist>,
    /// `security.http.allow_private`: loopback and private ranges pass
    /// the guard (link-local, metadata and glovebox's own listeners never).
    pub allow_private: bool,
    /// What the carrier reads of the connections to some hosts, after
    /// this decision allowed them.
    pub intercept: Option<I>,
}

impl<I> Default for Rules<I> {
    fn default() -> Self {
        Rules {
            allow: None,
            allow_private: false,
            intercept: None,
        }
    }
}

/// Why a destination was refused, in the words of the egress log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The host is not a valid name or address.
    BadHost,
    /// The allowlist does not name it.
    NotAllowed,
    /// The guard's class of the first refused address (`private`,
    /// `loopback`, `link-local`, `cloud metadata`, …).
    Guard(&'static str),
    /// A glovebox server listens there.
    Own,
    /// The name did not resolve.
    Resolve(String),
    /// Every address that passed refused the connection.
    Connect(String),
    /// The request is not one the proxy serves (origin-form HTTP, another
    /// scheme, SOCKS4, a SOCKS5 command other than `CONNECT`, bytes that
    /// are no request at all): what to send instead.
    Protocol(&'static str),
}

impl Refusal {
    /// The reason, as the log and the warnings print it.
    pub fn reason(&self) -> String {
        match self {
            Refusal::BadHost => "not a valid host name or address".into(),
            Refusal::NotAllowed => "not in the tool's network allowlist".into(),
            Refusal::Guard(what) => (*what).into(),
            Refusal::Own => "glovebox's own server".into(),
            Refusal::Resolve(e) => format!("cannot resolve: {e}"),
            Refusal::Connect(e) => format!("connect failed: {e}"),
            Refusal::Protocol(what) => (*what).into(),
        }
    }

    /// True when the policy refused it (not the network failing).
    pub fn by_policy(&self) -> bool {
        matches!(
            self,
            Refusal::BadHost
                | Refusal::NotAllowed
                | Refusal::Guard(_)
                | Refusal::Own
                | Refusal::Protocol(_)
        )
    }
}

/// The policy part of the decision for one resolved address.
pub fn check_addr<I>(
    rules: &Rules<I>,
    registry: &Registry,
    addr: SocketAddr,
) -> Result<(), Refusal> {
    if guard::check(addr.ip(), rules.allow_private).is_err() {
        let what = match guard::classify(addr.ip()) {
            Class::Private(w) | Class::Forbidden(w) => w,
            Class::Public => "refused",
        };
        return Err(Refusal::Guard(what));
    }
    if registry.is_own(addr) {
        return Err(Refusal::Own);
    }
    // The host's own addresses are the host, as loopback is, whatever
    // range they are in (a public address on its interface reaches every
    // service bound to `0.0.0.0` or `::`).
    if !rules.allow_private && registry.is_this_host(addr.ip()) {
        return Err(Refusal::Guard("this host"));
    }
    Ok(())
}

/// The policy part of the decision that needs no lookup.
pub fn check_host<I>(rules: &Rules<I>, host: &Host, port: u16) -> Result<(), Refusal> {
    match &rules.allow {
        Some(list) if !list.permits(host, port) => Err(Refusal::NotAllowed),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_and_own_listeners_refuse_even_with_allow_private() {
        let reg = Registry::of(vec!["127.0.0.1:7878".parse().unwrap()], vec![]);
        let strict: Rules = Rules::default();
        let open: Rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            check_addr(&strict, &reg, a("10.0.0.5:22")),
            Err(Refusal::Guard("private"))
        );
        assert_eq!(
            check_addr(&strict, &reg, a("127.0.0.1:80")),
            Err(Refusal::Guard("loopback"))
        );
        assert!(check_addr(&open, &reg, a("127.0.0.1:80")).is_ok());
        assert_eq!(
            check_addr(&open, &reg, a("127.0.0.1:7878")),
            Err(Refusal::Own)
        );
        assert_eq!(
            check_addr(&open, &reg, a("169.254.169.254:80")),
            Err(Refusal::Guard("link-local"))
        );
        assert!(check_addr(&strict, &reg, a("1.1.1.1:443")).is_ok());
    }

    #[test]
    fn the_hosts_own_address_is_refused_without_allow_private() {
        // A public-range address on one of the host's interfaces: the
        // guard alone passes it, yet it reaches the host's services.
        let reg = Registry::of(vec![], vec!["203.0.113.7".parse().unwrap()]);
        let strict: Rules = Rules::default();
        let open: Rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            check_addr(&strict, &reg, a("203.0.113.7:5432")),
            Err(Refusal::Guard("this host"))
        );
        assert_eq!(
            check_addr(&strict, &reg, a("[::ffff:203.0.113.7]:5432")),
            Err(Refusal::Guard("this host"))
        );
        assert!(check_addr(&strict, &reg, a("203.0.113.8:5432")).is_ok());
        assert!(check_addr(&open, &reg, a("203.0.113.7:5432")).is_ok());
    }

    #[test]
    fn the_allowlist_is_checked_before_any_lookup() {
        let rules: Rules = Rules {
            allow: Some(Allowlist::parse(&["pypi.org:443"]).unwrap()),
            ..Rules::default()
        };
        let h = |s: &str| Host::parse(s).unwrap();
        assert!(check_host(&rules, &h("pypi.org"), 443).is_ok());
        assert_eq!(
            check_host(&rules, &h("pypi.org"), 80),
            Err(Refusal::NotAllowed)
        );
        assert_eq!(
            check_host(&rules, &h("1.2.3.4"), 443),
            Err(Refusal::NotAllowed)
        );
        assert!(check_host(&Rules::<()>::default(), &h("evil.com"), 1).is_ok());
    }
}
