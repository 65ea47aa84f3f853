//! One connection from the tool to the proxy: HTTP `CONNECT`, plain HTTP
//! with an absolute URL, or SOCKS5 (told apart by the first byte), then
//! bytes relayed both ways ([`super::relay`]) and counted in the call's
//! log.
//!
//! - `CONNECT host:port` answers `200` and relays (TLS stays end to end);
//! - `GET http://host[:port]/path` (any method) is sent to the host in
//!   origin form with `Connection: close` and without the `Proxy-*`
//!   headers, then the response relayed: one request per connection;
//! - SOCKS5 without authentication, `CONNECT` only, by name (`socks5h`),
//!   IPv4 or IPv6 address.
//!
//! A destination one of the call's placeholder secrets is meant for is
//! handed, after the decision, to [`super::intercept`] instead of being
//! relayed; a placeholder seen in plain HTTP to any other host is sent on
//! as it is and logged as a refused use.
//!
//! A refused destination gets a `403` (SOCKS5: "not allowed by ruleset")
//! whose body says why, so the tool's own error message carries the reason.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::connect::{self, Rules};
use super::intercept;
use super::log::{Entry, Log};
use super::relay::relay;
use crate::net::decide::Refusal;
use crate::net::Host;

/// Largest request head read from the tool.
const MAX_HEAD: usize = 64 * 1024;
/// How long the tool may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one connection from the tool until either side is done.
pub async fn serve(client: TcpStream, rules: &Rules, log: &Log) {
    let _ = client.set_nodelay(true);
    let mut first = [0u8; 1];
    match tokio::time::timeout(HEAD_TIMEOUT, client.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        _ => return,
    }
    if first[0] == 5 {
        socks5(client, rules, log).await;
    } else if first[0] == 4 {
        socks4(client, log).await;
    } else {
        http(client, rules, log).await;
    }
}

/// Why no request head was read.
#[derive(Debug, PartialEq, Eq)]
enum NoHead {
    /// The tool closed, failed or took longer than [`HEAD_TIMEOUT`].
    Gone,
    /// The head grew past [`MAX_HEAD`].
    TooLong,
}

/// Reads up to the end of the head; returns the head and whatever came
/// after it.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), NoHead> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            let n = client.read(&mut chunk).await.map_err(|_| NoHead::Gone)?;
            if n == 0 {
                return Err(NoHead::Gone);
            }
            let from = buf.len().saturating_sub(3);
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                let end = from + i + 4;
                let rest = buf.split_off(end);
                return Ok((buf, rest));
            }
            if buf.len() > MAX_HEAD {
                return Err(NoHead::TooLong);
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read)
        .await
        .unwrap_or(Err(NoHead::Gone))
}

async fn reply(client: &mut TcpStream, status: &str, body: &str) {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(msg.as_bytes()).await;
    let _ = client.shutdown().await;
}

fn refusal_text(host: &str, port: u16, r: &Refusal) -> String {
    format!(
        "glovebox: refused connect to {host}:{port} ({})\n",
        r.reason()
    )
}

/// Splits `host:port` (IPv6 in brackets) from a CONNECT target.
fn authority(text: &str) -> Option<(Host, u16)> {
    let (h, p) = text.rsplit_once(':')?;
    let port: u16 = p.parse().ok().filter(|p| *p > 0)?;
    if h.contains(':') && !h.starts_with('[') {
        return None;
    }
    Some((Host::parse(h)?, port))
}

/// Serves a connection the connect broker carried here for a raw TCP
/// client that connected to `addr` itself: decided again like a
/// `CONNECT` to that address (allowlist, SSRF guard, glovebox's own
/// listeners), logged (`via: tcp`, as transparent egress logs its
/// connections), and relayed untouched — no placeholder is swapped on
/// this path. A refusal closes the connection without a byte.
pub async fn direct(client: TcpStream, rules: &Rules, log: &Log, addr: std::net::SocketAddr) {
    let _ = client.set_nodelay(true);
    let host = Host::Ip(addr.ip());
    let shown = addr.ip().to_string();
    if let Ok((upstream, entry)) = dial(
        rules,
        log,
        &shown,
        Some(&host),
        addr.port(),
        super::transparent::VIA_TCP,
    )
    .await
    {
        relay(client, upstream, &entry).await;
    }
}

/// Decides, logs and connects; `Err` carries the log entry of the refusal.
async fn dial(
    rules: &Rules,
    log: &Log,
    shown: &str,
    host: Option<&Host>,
    port: u16,
    via: &'static str,
) -> Result<(TcpStream, std::sync::Arc<Entry>), Refusal> {
    let result = match host {
        Some(h) => connect::open(rules, h, port).await,
        None => Err(Refusal::BadHost),
    };
    match result {
        Ok(s) => Ok((s, log.record(shown, port, via, None))),
        Err(r) => {
            log.record(shown, port, via, Some(r.reason()));
            Err(r)
        }
    }
}

/// Logs a request the proxy does not serve and answers it with `400`.
async fn unserved(
    client: &mut TcpStream,
    log: &Log,
    shown: &str,
    port: u16,
    via: &'static str,
    why: &'static str,
) {
    log.record(shown, port, via, Some(Refusal::Protocol(why).reason()));
    reply(client, "400 Bad Request", &format!("glovebox: {why}\n")).await
}

/// What a CONNECT target that does not parse is shown as: its host part
/// and port when it has a numeric one, else all of it.
fn shown_target(target: &str) -> (String, u16) {
    match target.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(port) => (h.to_string(), port),
            Err(_) => (target.to_string(), 0),
        },
        None => (target.to_string(), 0),
    }
}

async fn http(mut client: TcpStream, rules: &Rules, log: &Log) {
    let (head, rest) = match read_head(&mut client).await {
        Ok(x) => x,
        Err(NoHead::Gone) => return,
        Err(NoHead::TooLong) => {
            return unserved(
                &mut client,
                log,
                "(oversized request)",
                0,
                "http",
                "request head over 64 KiB",
            )
            .await
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let (method, target, version) =
        match req.parse(&head) {
            Ok(httparse::Status::Complete(_)) => (
                req.method.unwrap_or("").to_string(),
                req.path.unwrap_or("").to_string(),
                req.version.unwrap_or(1),
            ),
            _ => return unserved(
                &mut client,
                log,
                "(unreadable request)",
                0,
                "http",
                "malformed request: send HTTP/1.1 with an absolute http:// URL, CONNECT, or SOCKS5",
            )
            .await,
        };
    if method.eq_ignore_ascii_case("CONNECT") {
        let parsed = authority(&target);
        let (shown, port) = match &parsed {
            Some((h, p)) => (h.to_string(), *p),
            None => shown_target(&target),
        };
        match dial(
            rules,
            log,
            &shown,
            parsed.as_ref().map(|(h, _)| h),
            port,
            "connect",
        )
        .await
        {
            Ok((mut upstream, entry)) => {
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                if let Some((h, i)) = parsed
                    .as_ref()
                    .and_then(|(h, _)| rules.interception_for(h, port).map(|i| (h, i)))
                {
                    let (host, log) = (h.clone(), log.clone());
                    return intercept::tunnel(
                        i, client, rest, upstream, host, shown, port, log, entry,
                    )
                    .await;
                }
                if !rest.is_empty() {
                    if upstream.write_all(&rest).await.is_err() {
                        return;
                    }
                    entry.add_sent(rest.len() as u64);
                }
                relay(client, upstream, &entry).await;
            }
            Err(r) => {
                let status = if r.by_policy() {
                    "403 Forbidden"
                } else {
                    "502 Bad Gateway"
                };
                reply(&mut client, status, &refusal_text(&shown, port, &r)).await;
            }
        }
        return;
    }
    let Ok(url) = url::Url::parse(&target) else {
        // Origin-form: the destination is only in the Host header, which
        // is never where the proxy connects to.
        let host = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
            .unwrap_or_else(|| "(no host)".into());
        let (shown, port) = shown_target(&host);
        return unserved(
            &mut client,
            log,
            &shown,
            if port == 0 { 80 } else { port },
            "http",
            "not a proxy request: this is an egress proxy; send absolute http:// URLs or use CONNECT",
        )
        .await;
    };
    if url.scheme() != "http" {
        let port = url.port_or_known_default().unwrap_or(0);
        return unserved(
            &mut client,
            log,
            url.host_str().unwrap_or("(no host)"),
            port,
            "http",
            "only http:// URLs are forwarded; use CONNECT for https",
        )
        .await;
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().and_then(Host::parse);
    let shown = host
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| url.host_str().unwrap_or("").to_string());
    let (mut upstream, entry) = match dial(rules, log, &shown, host.as_ref(), port, "http").await {
        Ok(x) => x,
        Err(r) => {
            let status = if r.by_policy() {
                "403 Forbidden"
            } else {
                "502 Bad Gateway"
            };
            return reply(&mut client, status, &refusal_text(&shown, port, &r)).await;
        }
    };
    let mut out = Vec::with_capacity(head.len() + 32);
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    out.extend_from_slice(format!("{method} {path} HTTP/1.{version}\r\n").as_bytes());
    let mut has_host = false;
    for h in req.headers.iter() {
        let n = h.name.to_ascii_lowercase();
        if n.starts_with("proxy-") || n == "connection" || n == "keep-alive" {
            continue;
        }
        has_host |= n == "host";
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        let authority = match url.port() {
            Some(p) => format!("{shown}:{p}"),
            None => shown.clone(),
        };
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    if let Some((h, i)) = host
        .as_ref()
        .and_then(|h| rules.interception_for(h, port).map(|i| (h.clone(), i)))
    {
        out.extend_from_slice(&rest);
        let log = log.clone();
        return intercept::forward_plain(i, client, out, upstream, h, shown, port, log, entry)
            .await;
    }
    if let Some(i) = &rules.intercept {
        intercept::watch(i, &[&out, &rest], &shown, port, log);
    }
    out.extend_from_slice(&rest);
    if upstream.write_all(&out).await.is_err() {
        return;
    }
    entry.add_sent(out.len() as u64);
    relay(client, upstream, &entry).await;
}

async fn socks5(mut client: TcpStream, rules: &Rules, log: &Log) {
    let fut = async {
        let mut hdr = [0u8; 2];
        client.read_exact(&mut hdr).await.ok()?;
        let mut methods = vec![0u8; hdr[1] as usize];
        client.read_exact(&mut methods).await.ok()?;
        if !methods.contains(&0) {
            let _ = client.write_all(&[5, 0xff]).await;
            return None;
        }
        client.write_all(&[5, 0]).await.ok()?;
        let mut req = [0u8; 4];
        client.read_exact(&mut req).await.ok()?;
        if req[0] != 5 {
            return None;
        }
        let host = match req[3] {
            1 => {
                let mut a = [0u8; 4];
                client.read_exact(&mut a).await.ok()?;
                Some(Host::Ip(std::net::Ipv4Addr::from(a).into()))
            }
            4 => {
                let mut a = [0u8; 16];
                client.read_exact(&mut a).await.ok()?;
                Some(Host::Ip(std::net::Ipv6Addr::from(a).into()))
            }
            3 => {
                let mut len = [0u8; 1];
                client.read_exact(&mut len).await.ok()?;
                let mut name = vec![0u8; len[0] as usize];
                client.read_exact(&mut name).await.ok()?;
                std::str::from_utf8(&name).ok().and_then(Host::parse)
            }
            _ => None,
        };
        let mut port = [0u8; 2];
        client.read_exact(&mut port).await.ok()?;
        Some((req[1], host, u16::from_be_bytes(port)))
    };
    let Ok(Some((cmd, host, port))) = tokio::time::timeout(HEAD_TIMEOUT, fut).await else {
        return;
    };
    // Reply codes: 0 ok, 2 not allowed by ruleset, 4 host unreachable,
    // 7 command not supported.
    let answer = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
    let shown = host
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| "(invalid)".into());
    if cmd != 1 {
        log.record(
            &shown,
            port,
            "socks5",
            Some(
                Refusal::Protocol("only the SOCKS5 CONNECT command is served (no BIND, no UDP)")
                    .reason(),
            ),
        );
        let _ = client.write_all(&answer(7)).await;
        return;
    }
    match dial(rules, log, &shown, host.as_ref(), port, "socks5").await {
        Ok((upstream, entry)) => {
            if client.write_all(&answer(0)).await.is_err() {
                return;
            }
            if let Some((h, i)) = host
                .as_ref()
                .and_then(|h| rules.interception_for(h, port).map(|i| (h, i)))
            {
                let (h, log) = (h.clone(), log.clone());
                return intercept::tunnel(
                    i,
                    client,
                    Vec::new(),
                    upstream,
                    h,
                    shown,
                    port,
                    log,
                    entry,
                )
                .await;
            }
            relay(client, upstream, &entry).await;
        }
        Err(r) => {
            let _ = client
                .write_all(&answer(if r.by_policy() { 2 } else { 4 }))
                .await;
        }
    }
}

/// SOCKS4 (and 4a) is refused at once, not left waiting for an HTTP
/// head: logged with the destination it named, answered "rejected".
async fn socks4(mut client: TcpStream, log: &Log) {
    let mut req = [0u8; 8];
    let read = tokio::time::timeout(HEAD_TIMEOUT, client.read_exact(&mut req)).await;
    let (shown, port) = match read {
        Ok(Ok(_)) => {
            let ip = std::net::Ipv4Addr::new(req[4], req[5], req[6], req[7]);
            (ip.to_string(), u16::from_be_bytes([req[2], req[3]]))
        }
        _ => ("(invalid)".to_string(), 0),
    };
    log.record(
        &shown,
        port,
        "socks4",
        Some(
            Refusal::Protocol("SOCKS4 is not served; use SOCKS5 (socks5h://) or HTTP CONNECT")
                .reason(),
        ),
    );
    let _ = client.write_all(&[0, 0x5b, 0, 0, 0, 0, 0, 0]).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Sends `request` through a proxy connection served with `rules`;
    /// returns what the tool got back.
    async fn through(rules: &Rules, log: &Log, request: &[u8]) -> Vec<u8> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut tool = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (proxied, _) = l.accept().await.unwrap();
        let served = serve(proxied, rules, log);
        let talk = async {
            tool.write_all(request).await.unwrap();
            let mut got = Vec::new();
            let _ = tool.read_to_end(&mut got).await;
            got
        };
        let (_, got) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(served, talk) })
                .await
                .expect("the proxy answered at once");
        got
    }

    /// Requests the proxy does not serve — SOCKS4, SOCKS5 BIND, origin
    /// form, another scheme, HTTP/2 prior knowledge, garbage — are
    /// answered at once, reach nothing (even with `allow_private`) and
    /// are each in the log.
    #[tokio::test]
    async fn unserved_requests_reach_nothing_and_are_logged() {
        let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        target.set_nonblocking(true).unwrap();
        let port = target.local_addr().unwrap().port();
        let pb = port.to_be_bytes();
        let rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        let log = Log::default();
        let socks4 = [4, 1, pb[0], pb[1], 127, 0, 0, 1, 0];
        let got = through(&rules, &log, &socks4).await;
        assert_eq!(got, [0, 0x5b, 0, 0, 0, 0, 0, 0]);
        let bind = [5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, pb[0], pb[1]];
        let got = through(&rules, &log, &bind).await;
        assert_eq!(&got[..4], &[5, 0, 5, 7]);
        for request in [
            format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"),
            format!("GET ftp://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"),
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_string(),
            "\x16\x03\x01garbage\r\n\r\n".to_string(),
            format!(
                "GET http://127.0.0.1:{port}/{} HTTP/1.1\r\n",
                "a".repeat(MAX_HEAD)
            ),
        ] {
            let got = through(&rules, &log, request.as_bytes()).await;
            assert!(got.starts_with(b"HTTP/1.1 400"), "{request:?}");
        }
        assert!(target.accept().is_err(), "the target got a connection");
        let (list, _) = log.connections();
        let vias: Vec<_> = list.iter().map(|c| c.via).collect();
        assert_eq!(
            vias,
            ["socks4", "socks5", "http", "http", "http", "http", "http"]
        );
        assert_eq!(list[6].host, "(oversized request)");
        assert!(list.iter().all(|c| !c.allowed), "{list:?}");
        assert_eq!(list[0].host, "127.0.0.1");
        assert_eq!(list[0].port, port);
        assert_eq!((list[2].host.as_str(), list[2].port), ("127.0.0.1", port));
        assert!(list[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("not a proxy request"));
        assert!(list[3].reason.as_deref().unwrap().contains("only http://"));
    }

    /// A CONNECT target that is no host is logged as its parts.
    #[tokio::test]
    async fn a_disguised_address_is_refused_and_shown_by_its_parts() {
        let log = Log::default();
        let got = through(
            &Rules::default(),
            &log,
            b"CONNECT 0x7f000001:8080 HTTP/1.1\r\n\r\n",
        )
        .await;
        assert!(got.starts_with(b"HTTP/1.1 403"));
        let (list, _) = log.connections();
        assert_eq!((list[0].host.as_str(), list[0].port), ("0x7f000001", 8080));
        assert_eq!(
            list[0].refusal().unwrap(),
            "refused connect to 0x7f000001:8080 (not a valid host name or address)"
        );
    }

    #[test]
    fn connect_targets_parse() {
        let (h, p) = authority("example.com:443").unwrap();
        assert_eq!((h.to_string(), p), ("example.com".into(), 443));
        let (h, p) = authority("[::1]:8080").unwrap();
        assert_eq!((h.to_string(), p), ("[::1]".into(), 8080));
        assert!(authority("::1:8080").is_none());
        assert!(authority("example.com").is_none());
        assert!(authority("example.com:0").is_none());
        assert!(authority("2130706433:80").is_none());
    }
}
