//! The network probes. With `network: false`: TCP (IPv4, IPv6), UDP, a
//! unix socket by path and an abstract one, each to a canary listener
//! glovebox opened on the host, and a netlink socket. With the network
//! through the egress proxy: the same canaries reached around the proxy
//! (raw TCP and UDP, unix sockets), and through it a `CONNECT` to
//! loopback, to the cloud metadata address, to a glovebox server (a
//! canary recorded as one) and to a host outside the allowlist.
//!
//! The evidence is the canary's: a listener that received anything. A
//! proxy's `200` is evidence too (the tunnel was opened); its `403` is the
//! refusal by policy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::battery::{how, Ctx, Judge, Observed, Plan};
use super::canary::Listener;
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply, PAYLOAD};

/// A host no allowlist names and no resolver answers (RFC 2606).
const OUTSIDE_HOST: &str = "glovebox-prove.invalid";

/// The metadata address of the clouds (link-local: never reachable).
const METADATA: &str = "169.254.169.254:80";

const TIMEOUT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------- plan

/// Which canary listener an attempt aims at.
#[derive(Clone, Copy)]
enum Canary {
    Tcp4,
    Tcp6,
    Udp,
    Unix,
    Abstract,
    Own,
}

fn listener<'a>(o: &'a Observed<'_>, c: Canary) -> Option<&'a Listener> {
    let k = o.canaries;
    match c {
        Canary::Tcp4 => Some(&k.tcp4.0),
        Canary::Tcp6 => k.tcp6.as_ref().map(|t| &t.0),
        Canary::Udp => Some(&k.udp.0),
        Canary::Unix => k.unix.as_ref().map(|u| &u.0),
        Canary::Abstract => Some(&k.abstract_socket.0),
        Canary::Own => k.own.as_ref().map(|o| &o.0),
    }
}

/// Judges an attempt on canary `c`: broken when the listener received
/// anything, or (`ok_is_reach`) when the call itself worked.
fn reach_judge(c: Canary, ok_is_reach: bool) -> Judge {
    Box::new(move |r: &Reply, o: &Observed<'_>| {
        if let Some(e) = listener(o, c).and_then(Listener::evidence) {
            return Verdict::broken(e);
        }
        if r.ok && ok_is_reach {
            return Verdict::broken(format!("the call worked: {}", r.data));
        }
        if r.ok {
            return Verdict::held("sent, but nothing reached the host's canary");
        }
        Verdict::held(how(r.errno))
    })
}

/// Judges a `CONNECT` through the proxy: broken when the tunnel opened
/// (or the canary `c` received anything), held on the proxy's refusal.
fn proxy_judge(c: Option<Canary>, by_policy_only: bool) -> Judge {
    Box::new(move |r: &Reply, o: &Observed<'_>| {
        if let Some(e) = c.and_then(|c| listener(o, c)).and_then(Listener::evidence) {
            return Verdict::broken(e);
        }
        if r.ok {
            return Verdict::broken(format!("the proxy opened the tunnel ({})", r.data));
        }
        if r.data.contains(" 403 ") {
            return Verdict::held(format!("the proxy refused it ({})", r.data.trim()));
        }
        if r.data.starts_with("HTTP/") && by_policy_only {
            return Verdict::broken(format!(
                "the proxy did not refuse it by policy: it tried ({})",
                r.data.trim()
            ));
        }
        if r.data.starts_with("HTTP/") {
            return Verdict::held(format!("the proxy did not connect ({})", r.data.trim()));
        }
        Verdict::inconclusive(format!("the proxy did not answer: {}", how(r.errno)))
    })
}

/// Plans the network probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    let p = ctx.policy;
    if !p.network {
        plan.skip(
            Invariant::EgressProxy,
            "reach around the proxy",
            "the tool's network is off",
        );
        off(ctx, plan);
    } else if p.direct_network {
        plan.skip(
            Invariant::NoNetwork,
            "open a socket",
            "the tool's network is on",
        );
        plan.skip(
            Invariant::EgressProxy,
            "reach around the proxy",
            "sandbox.direct_network: the config gives tools the host's network, without the proxy",
        );
    } else {
        plan.skip(
            Invariant::NoNetwork,
            "open a socket",
            "the tool's network is on",
        );
        proxied(ctx, plan);
    }
}

/// The direct attempts on every canary, for `inv`.
fn around(ctx: &Ctx<'_>, plan: &mut Plan, inv: Invariant, unix_ok_is_reach: bool) {
    let k = ctx.canaries;
    plan.attack(
        inv,
        format!("tcp connect to the canary {}", k.tcp4.1),
        Action::Tcp { addr: k.tcp4.1 },
        reach_judge(Canary::Tcp4, true),
    );
    if let Some((_, addr)) = &k.tcp6 {
        plan.attack(
            inv,
            format!("tcp connect to the canary {addr}"),
            Action::Tcp { addr: *addr },
            reach_judge(Canary::Tcp6, true),
        );
    }
    plan.attack(
        inv,
        format!("udp datagram to the canary {}", k.udp.1),
        Action::Udp { addr: k.udp.1 },
        reach_judge(Canary::Udp, false),
    );
    if let Some((_, path)) = &k.unix {
        plan.attack(
            inv,
            format!("connect to the canary unix socket {}", path.display()),
            Action::Unix { path: path.clone() },
            reach_judge(Canary::Unix, unix_ok_is_reach),
        );
    }
    plan.attack(
        inv,
        format!(
            "connect to the canary abstract socket @{}",
            k.abstract_socket.1
        ),
        Action::Abstract {
            name: k.abstract_socket.1.clone(),
        },
        reach_judge(Canary::Abstract, unix_ok_is_reach),
    );
}

fn off(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::NoNetwork;
    plan.control(
        inv,
        "a unix socket pair carries a byte".into(),
        Action::SocketPair,
    );
    around(ctx, plan, inv, true);
    plan.refused(inv, "make a netlink socket".into(), Action::Netlink);
}

fn proxied(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::EgressProxy;
    let p = ctx.policy;
    plan.attack(
        inv,
        "the proxy answers".into(),
        Action::Proxy {
            target: format!("{OUTSIDE_HOST}:80"),
            send: String::new(),
            with_env: None,
        },
        Box::new(|r: &Reply, _: &_| {
            if r.data.starts_with("HTTP/") {
                Verdict::held("it answered")
            } else {
                Verdict::broken(format!("no answer: {}", how(r.errno)))
            }
        }),
    );
    // That first attempt is the family's control.
    plan.mark_last_control();
    around(ctx, plan, inv, true);
    let k = ctx.canaries;
    if p.allow_private {
        plan.skip(
            inv,
            "CONNECT to loopback through the proxy",
            "security.http.allow_private: the config lets tools reach loopback and private addresses",
        );
    } else {
        plan.attack(
            inv,
            format!(
                "CONNECT to the canary {} (loopback) through the proxy",
                k.tcp4.1
            ),
            Action::Proxy {
                target: k.tcp4.1.to_string(),
                send: PAYLOAD.into(),
                with_env: None,
            },
            proxy_judge(Some(Canary::Tcp4), true),
        );
    }
    plan.attack(
        inv,
        format!("CONNECT to the cloud metadata address {METADATA} through the proxy"),
        Action::Proxy {
            target: METADATA.into(),
            send: PAYLOAD.into(),
            with_env: None,
        },
        proxy_judge(None, true),
    );
    match &k.own {
        Some((_, addr, _)) => plan.attack(
            inv,
            format!(
                "CONNECT to a glovebox server ({addr}, a canary recorded as one) through the proxy"
            ),
            Action::Proxy {
                target: addr.to_string(),
                send: PAYLOAD.into(),
                with_env: None,
            },
            proxy_judge(Some(Canary::Own), true),
        ),
        None => plan.skip(
            inv,
            "CONNECT to a glovebox server",
            "no canary could be recorded as a glovebox server here",
        ),
    }
    if p.allowlist.is_some() {
        plan.attack(
            inv,
            format!("CONNECT to {OUTSIDE_HOST}:443, outside the allowlist"),
            Action::Proxy {
                target: format!("{OUTSIDE_HOST}:443"),
                send: PAYLOAD.into(),
                with_env: None,
            },
            proxy_judge(None, true),
        );
    } else {
        plan.skip(
            inv,
            "CONNECT to a host outside the allowlist",
            "the tool's network has no allowlist (any public host)",
        );
    }
}

// ---------------------------------------------------- in the jail

fn failed(id: usize, e: &std::io::Error) -> Reply {
    Reply::failed(id, e.raw_os_error().unwrap_or(libc::EIO), "")
}

fn send(id: usize, mut s: impl Write) -> Reply {
    match s.write_all(PAYLOAD.as_bytes()) {
        Ok(()) => Reply::ok(id, "connected and sent the payload"),
        Err(e) => failed(id, &e),
    }
}

/// The proxy's address, from `HTTP_PROXY` (`http://HOST:PORT`).
fn proxy_addr() -> Option<SocketAddr> {
    let url = std::env::var("HTTP_PROXY")
        .or_else(|_| std::env::var("http_proxy"))
        .ok()?;
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// `CONNECT target` through the proxy; `send` (and `with_env`'s value)
/// through the tunnel when it opened.
fn proxy(id: usize, target: &str, send: &str, with_env: Option<&str>) -> Reply {
    let Some(addr) = proxy_addr() else {
        return Reply::failed(id, libc::ENOENT, "no HTTP_PROXY in the environment");
    };
    let mut s = match TcpStream::connect_timeout(&addr, TIMEOUT) {
        Ok(s) => s,
        Err(e) => return failed(id, &e),
    };
    let _ = s.set_read_timeout(Some(TIMEOUT));
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    if let Err(e) = s.write_all(request.as_bytes()) {
        return failed(id, &e);
    }
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while head.len() < 4096 && !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let status = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    if !status.contains(" 200 ") {
        return Reply {
            ok: false,
            errno: None,
            ..Reply::ok(id, status)
        };
    }
    let mut payload = send.to_string();
    if let Some(v) = with_env.and_then(|n| std::env::var(n).ok()) {
        payload.push_str("\r\nX-Glovebox-Prove: ");
        payload.push_str(&v);
        payload.push_str("\r\n\r\n");
    }
    let _ = s.write_all(payload.as_bytes());
    Reply::ok(id, status)
}

/// Tries a network action; `None` for another family's.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    Some(match action {
        Action::Tcp { addr } => match TcpStream::connect_timeout(addr, TIMEOUT) {
            Ok(s) => send(id, s),
            Err(e) => failed(id, &e),
        },
        Action::Udp { addr } => {
            let any: SocketAddr = if addr.is_ipv4() {
                ([0, 0, 0, 0], 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            match UdpSocket::bind(any).and_then(|s| s.send_to(PAYLOAD.as_bytes(), addr)) {
                Ok(_) => Reply::ok(id, "sent the datagram"),
                Err(e) => failed(id, &e),
            }
        }
        Action::Unix { path } => match UnixStream::connect(path) {
            Ok(s) => send(id, s),
            Err(e) => failed(id, &e),
        },
        Action::Abstract { name } => {
            use std::os::linux::net::SocketAddrExt;
            match std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .and_then(|a| UnixStream::connect_addr(&a))
            {
                Ok(s) => send(id, s),
                Err(e) => failed(id, &e),
            }
        }
        Action::Netlink => {
            let s = socket2::Socket::new(
                socket2::Domain::from(libc::AF_NETLINK),
                socket2::Type::RAW,
                Some(socket2::Protocol::from(0)),
            );
            match s {
                Ok(_) => Reply::ok(id, "made a netlink socket"),
                Err(e) => failed(id, &e),
            }
        }
        Action::SocketPair => {
            let r = UnixStream::pair().and_then(|(mut a, mut b)| {
                a.write_all(b"x")?;
                let mut got = [0u8; 1];
                b.read_exact(&mut got)
            });
            match r {
                Ok(()) => Reply::ok(id, ""),
                Err(e) => failed(id, &e),
            }
        }
        Action::Proxy {
            target,
            send,
            with_env,
        } => proxy(id, target, send, with_env.as_deref()),
        _ => return None,
    })
}
