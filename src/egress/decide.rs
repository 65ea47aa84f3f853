//! Where a connection may go: the allowlist, then the SSRF guard on every
//! resolved address, then glovebox's own listeners — and a connection to
//! exactly an address that passed, never a name resolved a second time.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use super::allow::{Allowlist, Host};
use super::guard::{self, Class};
use super::listeners::Registry;

/// How long resolving and connecting may take, each.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a call's proxy lets through.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Only these hosts, when set (`permissions.network: {allow: […]}`).
    pub allow: Option<Allowlist>,
    /// `security.http.allow_private`: loopback and private ranges pass
    /// the guard (link-local, metadata and glovebox's own listeners never).
    pub allow_private: bool,
    /// The call's placeholder secrets: connections to their hosts are
    /// intercepted after this decision ([`super::intercept`]).
    pub intercept: Option<std::sync::Arc<super::intercept::Interception>>,
}

impl Rules {
    /// The interception for a connection to `host`:`port`, when one of
    /// the call's placeholder secrets is meant for it.
    pub fn interception_for(
        &self,
        host: &Host,
        port: u16,
    ) -> Option<std::sync::Arc<super::intercept::Interception>> {
        self.intercept
            .as_ref()
            .filter(|i| i.placeholders().any_for(host, port))
            .cloned()
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
pub fn check_addr(rules: &Rules, registry: &Registry, addr: SocketAddr) -> Result<(), Refusal> {
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
    Ok(())
}

/// The policy part of the decision that needs no lookup.
pub fn check_host(rules: &Rules, host: &Host, port: u16) -> Result<(), Refusal> {
    match &rules.allow {
        Some(list) if !list.permits(host, port) => Err(Refusal::NotAllowed),
        _ => Ok(()),
    }
}

/// The policy decision on a connection the tool made to `addr` itself
/// (the connect broker's raw TCP client): the allowlist on the address
/// as an IP literal, the SSRF guard and glovebox's own listeners — the
/// checks [`open`] makes again when it connects.
pub fn check_direct(rules: &Rules, addr: SocketAddr) -> Result<(), Refusal> {
    check_host(rules, &Host::Ip(addr.ip()), addr.port())?;
    check_addr(rules, &Registry::current(), addr)
}

/// Decides and connects: a stream to a checked address of `host`:`port`.
pub async fn open(rules: &Rules, host: &Host, port: u16) -> Result<TcpStream, Refusal> {
    open_with(rules, host, port, Registry::current).await
}

/// [`open`], with `registry` giving glovebox's listeners as of now (read
/// before each address is tried and again once it is connected).
async fn open_with(
    rules: &Rules,
    host: &Host,
    port: u16,
    registry: impl Fn() -> std::sync::Arc<Registry>,
) -> Result<TcpStream, Refusal> {
    check_host(rules, host, port)?;
    let found: Vec<SocketAddr> = match host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(name) => {
            match tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio::net::lookup_host((name.as_str(), port)),
            )
            .await
            {
                Ok(Ok(it)) => it.collect(),
                Ok(Err(e)) => return Err(Refusal::Resolve(e.to_string())),
                Err(_) => return Err(Refusal::Resolve("timed out".into())),
            }
        }
    };
    if found.is_empty() {
        return Err(Refusal::Resolve("no address found".into()));
    }
    let listeners = registry();
    let mut first_refusal = None;
    let mut last_error = None;
    for addr in found {
        if let Err(r) = check_addr(rules, &listeners, addr) {
            first_refusal.get_or_insert(r);
            continue;
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            // A glovebox server that started listening since the check
            // recorded itself before it listened: seen now, before any
            // byte is sent, and the connection dropped.
            Ok(Ok(_)) if registry().is_own(addr) => {
                first_refusal.get_or_insert(Refusal::Own);
            }
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last_error = Some(e.to_string()),
            Err(_) => last_error = Some("timed out".into()),
        }
    }
    Err(match (last_error, first_refusal) {
        (_, Some(Refusal::Own)) => Refusal::Own,
        (Some(e), _) => Refusal::Connect(e),
        (None, Some(r)) => r,
        (None, None) => Refusal::Resolve("no address found".into()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_and_own_listeners_refuse_even_with_allow_private() {
        let reg = Registry::of(vec!["127.0.0.1:7878".parse().unwrap()], vec![]);
        let strict = Rules::default();
        let open = Rules {
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

    /// A glovebox server that records itself between the check and the
    /// connect (it listens only once recorded) is refused after the
    /// connect, before any byte: its listener sees a connection that
    /// closes with nothing in it.
    #[tokio::test]
    async fn a_server_recorded_during_the_connect_gets_no_byte() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let registry = || {
            // Not recorded at the check, recorded by the connect.
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                std::sync::Arc::new(Registry::of(vec![], vec![]))
            } else {
                std::sync::Arc::new(Registry::of(vec![addr], vec![]))
            }
        };
        let rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        let got = open_with(&rules, &Host::Ip(addr.ip()), addr.port(), registry).await;
        assert_eq!(got.err(), Some(Refusal::Own));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        assert!(buf.is_empty(), "the server got {buf:?}");
        // Control: recorded at neither step, the same call connects.
        let got = open_with(&rules, &Host::Ip(addr.ip()), addr.port(), || {
            std::sync::Arc::new(Registry::of(vec![], vec![]))
        })
        .await;
        assert!(got.is_ok());
    }

    /// A server already recorded when the connection is decided is
    /// refused without a connection: its listener sees nothing at all.
    #[tokio::test]
    async fn a_known_server_gets_no_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        let got = open_with(&rules, &Host::Ip(addr.ip()), addr.port(), || {
            std::sync::Arc::new(Registry::of(vec![addr], vec![]))
        })
        .await;
        assert_eq!(got.err(), Some(Refusal::Own));
        l.set_nonblocking(true).unwrap();
        let pending = l.accept();
        assert!(
            matches!(&pending, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the server was connected to: {pending:?}"
        );
        // Control: not recorded, the same call connects.
        let got = open_with(&rules, &Host::Ip(addr.ip()), addr.port(), || {
            std::sync::Arc::new(Registry::of(vec![], vec![]))
        })
        .await;
        assert!(got.is_ok());
        l.set_nonblocking(false).unwrap();
        assert!(l.accept().is_ok());
    }

    #[test]
    fn the_allowlist_is_checked_before_any_lookup() {
        let rules = Rules {
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
        assert!(check_host(&Rules::default(), &h("evil.com"), 1).is_ok());
    }
}
