//! The decision carried out: a stream to exactly an address of the host
//! that [`crate::net::decide`] allowed — resolved here once, each address
//! checked, never a name resolved a second time — and glovebox's own
//! listeners read again once connected.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use super::intercept::Interception;
use super::listeners;
use crate::net::decide::{check_addr, check_host, Refusal};
use crate::net::{Host, Registry};

/// How long resolving and connecting may take, each.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a call's proxy lets through: the decision's rules, with the
/// call's placeholder secrets (connections to their hosts are
/// intercepted after the decision, [`super::intercept`]).
pub type Rules = crate::net::Rules<Arc<Interception>>;

impl Rules {
    /// The interception for a connection to `host`:`port`, when one of
    /// the call's placeholder secrets is meant for it.
    pub fn interception_for(&self, host: &Host, port: u16) -> Option<Arc<Interception>> {
        self.intercept
            .as_ref()
            .filter(|i| i.placeholders().any_for(host, port))
            .cloned()
    }
}

/// The policy decision on a connection the tool made to `addr` itself
/// (the connect broker's raw TCP client): the allowlist on the address
/// as an IP literal, the SSRF guard and glovebox's own listeners — the
/// checks [`open`] makes again when it connects.
pub fn check_direct(rules: &Rules, addr: SocketAddr) -> Result<(), Refusal> {
    check_host(rules, &Host::Ip(addr.ip()), addr.port())?;
    check_addr(rules, &listeners::current(), addr)
}

/// Decides and connects: a stream to a checked address of `host`:`port`.
pub async fn open(rules: &Rules, host: &Host, port: u16) -> Result<TcpStream, Refusal> {
    open_with(rules, host, port, listeners::current).await
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
}
