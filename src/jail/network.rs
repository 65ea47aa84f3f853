//! How a call reaches the network, decided before clone (pure, tested
//! without privileges; [`super::spawn`] carries it out).
//!
//! - no network: nothing (or an empty namespace with `Spec::netns`);
//! - `network` with a [`Gateway`]: the call's own network namespace, the
//!   proxy variables in its environment, the proxy listener handed to the
//!   gateway;
//! - `network` with a [`Gateway`] where no network namespace can be made
//!   but the namespace-free jail runs: the host's network, reachable only
//!   through the connect broker ([`super::broker`]), which carries each
//!   `connect` to the call's proxy or refuses it;
//! - `network` with `direct_network`: the host's network, explicitly;
//! - `network` with neither: refused (a caller that forgot the gateway
//!   never gets the host network by accident).

use std::ffi::OsString;
use std::sync::Arc;

use super::seccomp::Sockets;
use super::spec::{Gateway, Spec, PROXY_URL};
use super::JailError;

/// How a call reaches the network, decided before clone.
#[derive(Clone)]
pub enum NetPlan {
    /// No network (or an empty namespace, with `netns`).
    Off,
    /// Its own namespace, egress through the gateway.
    Proxied(Arc<dyn Gateway>),
    /// No namespace: every `connect` decided and made by the supervisor
    /// (the connect broker), egress through the gateway.
    Brokered(Arc<dyn Gateway>),
    /// The host's network (explicit opt-in).
    Direct,
}

/// Decides the network of a call: refuses `network` without a gateway
/// unless `direct_network`, and a gateway where neither a network
/// namespace nor the connect broker can hold it (never degraded: a direct
/// network is only ever explicit).
///
/// `brokered` is whether the call runs in the namespace-free jail, whose
/// supervisor answers seccomp notifications (the broker's mechanism).
/// `netns_possible` is whether this jail makes namespaces at all; whether
/// a network namespace in particular can be made is found out by the
/// launch itself (no probe clone on every call): when that launch fails
/// at a namespace step and [`super::probe::net_ns`] then says no, the call
/// is refused with [`no_namespace`].
pub fn plan(spec: &Spec, netns_possible: bool, brokered: bool) -> Result<NetPlan, JailError> {
    if !spec.network {
        return Ok(NetPlan::Off);
    }
    match (&spec.gateway, spec.direct_network) {
        (_, true) => Ok(NetPlan::Direct),
        (Some(g), false) if netns_possible => Ok(NetPlan::Proxied(g.clone())),
        (Some(g), false) if brokered => Ok(NetPlan::Brokered(g.clone())),
        (Some(_), false) => Err(no_namespace()),
        (None, false) => Err(JailError::InvalidSpec {
            message: "network access needs the egress gateway, or an explicit direct network"
                .into(),
        }),
    }
}

/// The refusal of a proxied call where no network namespace can be made.
pub fn no_namespace() -> JailError {
    JailError::Unavailable {
        feature: "network namespaces or the connect broker (network: true runs in its own namespace behind glovebox's egress proxy, or, in the namespace-free jail, with each connect made by the supervisor); \
                  enable user and network namespaces, or run where the namespace-free jail works (landlock abi 3+, seccomp user notification), or opt into the host network explicitly \
                  (`sandbox.direct_network: true` in .glee/config.yml, `glovebox sandbox --net=direct`)"
            .into(),
    }
}

/// The sockets a call may create: none without network, no unix socket
/// behind the proxy (the host's unix sockets stay out of reach), only TCP
/// behind the connect broker, all with the explicit direct network.
pub fn sockets(net: &NetPlan) -> Sockets {
    match net {
        NetPlan::Off => Sockets::None,
        NetPlan::Proxied(_) => Sockets::NoUnix,
        NetPlan::Brokered(_) => Sockets::Brokered,
        NetPlan::Direct => Sockets::All,
    }
}

/// The proxy variables a networked tool gets (set last: nothing overrides
/// them). `NODE_USE_ENV_PROXY=1` makes Node's built-in `fetch` and `http`
/// use them (Node 22.21 and 24.5 on; older Node ignores it, and its `fetch`
/// has no route out).
pub fn proxy_environment(env: &mut Vec<(OsString, OsString)>) {
    let socks = PROXY_URL.replacen("http://", "socks5h://", 1);
    for (k, v) in [
        ("HTTP_PROXY", PROXY_URL),
        ("HTTPS_PROXY", PROXY_URL),
        ("ALL_PROXY", socks.as_str()),
        ("http_proxy", PROXY_URL),
        ("https_proxy", PROXY_URL),
        ("all_proxy", socks.as_str()),
        ("NO_PROXY", ""),
        ("no_proxy", ""),
        ("NODE_USE_ENV_PROXY", "1"),
    ] {
        env.retain(|(ek, _)| ek != k);
        env.push((k.into(), v.into()));
    }
}

/// Loopback addresses a call's resolver may send its DNS questions to,
/// at most this many.
pub const MAX_LOOPBACK_DNS: usize = 4;

/// The loopback DNS addresses of a call's own network namespace: where
/// its resolver asks when the host's `resolv.conf` names a loopback
/// server (systemd-resolved's `127.0.0.53`, a local dnsmasq) or when the
/// jail has no usable `resolv.conf` (a link into `/run` the tree does not
/// hold: resolvers then ask `127.0.0.1`). The child binds UDP port 53 on
/// each, in its own namespace, and hands the sockets to the supervisor,
/// which answers them as it answers DNS through the TUN device: a
/// loopback address never leaves the namespace, so nothing else would.
/// Prepared before clone (the child does not allocate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopbackDns {
    addrs: [[u8; 4]; MAX_LOOPBACK_DNS],
    len: usize,
}

impl LoopbackDns {
    /// `127.0.0.1` and every IPv4 loopback `nameserver` of `resolv_conf`
    /// (the host's, read by the supervisor), without repeats, in order.
    pub fn from_resolv_conf(resolv_conf: &str) -> LoopbackDns {
        let mut dns = LoopbackDns::default();
        dns.push([127, 0, 0, 1]);
        for line in resolv_conf.lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("nameserver") {
                continue;
            }
            if let Some(Ok(addr)) = words.next().map(str::parse::<std::net::Ipv4Addr>) {
                if addr.is_loopback() {
                    dns.push(addr.octets());
                }
            }
        }
        dns
    }

    fn push(&mut self, addr: [u8; 4]) {
        if self.len < MAX_LOOPBACK_DNS && !self.addrs().contains(&addr) {
            self.addrs[self.len] = addr;
            self.len += 1;
        }
    }

    /// The addresses.
    pub fn addrs(&self) -> &[[u8; 4]] {
        &self.addrs[..self.len]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fake;
    impl Gateway for Fake {
        fn attach(
            &self,
            _: std::net::TcpListener,
            _: Option<std::sync::Arc<crate::jail::broker::Admission>>,
        ) -> std::io::Result<Box<dyn super::super::spec::Attached>> {
            Err(std::io::Error::other("fake"))
        }
    }

    fn spec(network: bool, gateway: bool, direct: bool, degraded: bool) -> Spec {
        let mut s = Spec::new(["true"]);
        s.network = network;
        s.gateway = gateway.then(|| Arc::new(Fake) as Arc<dyn Gateway>);
        s.direct_network = direct;
        s.degraded = degraded;
        s
    }

    #[test]
    fn the_network_fails_closed() {
        assert!(matches!(
            plan(&spec(false, true, true, false), false, false),
            Ok(NetPlan::Off)
        ));
        assert!(matches!(
            plan(&spec(true, true, false, false), true, false),
            Ok(NetPlan::Proxied(_))
        ));
        // The namespace-free jail: the broker.
        assert!(matches!(
            plan(&spec(true, true, false, false), false, true),
            Ok(NetPlan::Brokered(_))
        ));
        // Neither: refused, degraded mode or not.
        for degraded in [false, true] {
            let e = plan(&spec(true, true, false, degraded), false, false)
                .err()
                .unwrap();
            assert!(e.is_unavailable(), "{e}");
            assert!(e.to_string().contains("direct_network"), "{e}");
        }
        // No gateway and no explicit opt-in: never the host network.
        for brokered in [false, true] {
            let e = plan(&spec(true, false, false, true), !brokered, brokered)
                .err()
                .unwrap();
            assert!(matches!(e, JailError::InvalidSpec { .. }), "{e}");
        }
        assert!(matches!(
            plan(&spec(true, false, true, false), false, false),
            Ok(NetPlan::Direct)
        ));
    }

    #[test]
    fn proxy_variables_override_the_callers() {
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HTTPS_PROXY".into(), "http://evil:1".into()),
            ("no_proxy".into(), "*".into()),
        ];
        proxy_environment(&mut env);
        let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone());
        assert_eq!(get("HTTPS_PROXY").unwrap(), PROXY_URL);
        assert_eq!(get("http_proxy").unwrap(), PROXY_URL);
        assert_eq!(get("ALL_PROXY").unwrap(), "socks5h://127.0.0.1:3128");
        assert_eq!(get("no_proxy").unwrap(), "");
        assert_eq!(get("NODE_USE_ENV_PROXY").unwrap(), "1");
        assert_eq!(env.iter().filter(|(k, _)| k == "HTTPS_PROXY").count(), 1);
    }

    #[test]
    fn loopback_dns_is_127_0_0_1_and_the_loopback_servers_of_resolv_conf() {
        let dns = LoopbackDns::from_resolv_conf(
            "# systemd-resolved\nnameserver 127.0.0.53\noptions edns0 trust-ad\n\
             nameserver 10.0.0.2\nnameserver ::1\nnameserver 127.0.0.1\n\
             search example.com\nnameserver\nnameserver 127.0.1.1 # dnsmasq\n",
        );
        assert_eq!(
            dns.addrs(),
            &[[127, 0, 0, 1], [127, 0, 0, 53], [127, 0, 1, 1]]
        );
        assert_eq!(LoopbackDns::from_resolv_conf("").addrs(), &[[127, 0, 0, 1]]);
        let many: String = (1..=9)
            .map(|i| format!("nameserver 127.0.0.{i}\n"))
            .collect();
        assert_eq!(
            LoopbackDns::from_resolv_conf(&many).addrs().len(),
            MAX_LOOPBACK_DNS
        );
    }
}
