//! Warming the proxy's path once per process, before a tool's first
//! connection needs it.
//!
//! The first connection a process's proxy serves pays for everything the
//! process has not touched yet: page faults on the code of the proxy, the
//! parser, the decision and the relay, the egress threads' first
//! allocations. Measured under real-time priority (bench/RESULTS.md,
//! "Egress"): a one-shot call's first fetch reached its first byte 0.22 ms
//! later than the same call's second fetch (direct: 0.07 ms). So when the
//! egress runtime starts, one request goes through the very same path
//! ([`super::forward::serve`]: read, parse, decide with the SSRF guard,
//! connect, relay with `splice(2)`) in the background, while the call's
//! tool is still starting:
//!
//! - its client and its destination are two listeners of its own on
//!   `127.0.0.1` of the supervisor's network, on ports the kernel picks;
//! - the proxy side serves only a connection whose peer is the warm-up's
//!   own client socket (another local process that connects first is
//!   dropped unserved: the warm-up's rules allow loopback, a call's do
//!   not), and its log is thrown away;
//! - the destination answers every connection with an empty `200` and
//!   nothing else;
//! - all of it gives up after [`WARM_TIMEOUT`], and every socket it
//!   opened is closed when it ends; the first call to end waits for that
//!   ([`wait`]), so what the process holds after one call is settled.

use std::net::SocketAddr;
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::connect::Rules;
use super::forward;
use super::log::Log;

/// How long the warm-up may take in all.
pub const WARM_TIMEOUT: Duration = Duration::from_secs(2);

/// What the warm-up's destination answers.
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// The end of the warm-up, for [`wait`] (disconnected when it is over).
static RUNNING: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);

/// Starts the warm-up on `handle`, in the background.
pub fn start(handle: &tokio::runtime::Handle) {
    let (over, running) = mpsc::channel::<()>();
    if let Ok(mut slot) = RUNNING.lock() {
        *slot = Some(running);
    }
    handle.spawn(async move {
        let _over = over;
        let _ = warm_up().await;
    });
}

/// Waits, at most [`WARM_TIMEOUT`], until a started warm-up is over.
pub fn wait() {
    let running = RUNNING.lock().ok().and_then(|mut slot| slot.take());
    if let Some(r) = running {
        let _ = r.recv_timeout(WARM_TIMEOUT);
    }
}

/// Runs one request through the proxy's path; returns the bytes its client
/// received (the answer of the destination, relayed), or `None` when it
/// could not run (no loopback, a timeout).
pub async fn warm_up() -> Option<Vec<u8>> {
    tokio::time::timeout(WARM_TIMEOUT, run())
        .await
        .ok()
        .and_then(Result::ok)
}

async fn run() -> std::io::Result<Vec<u8>> {
    let proxy = TcpListener::bind("127.0.0.1:0").await?;
    let upstream = TcpListener::bind("127.0.0.1:0").await?;
    let target = upstream.local_addr()?;
    let mut client = TcpStream::connect(proxy.local_addr()?).await?;
    let own = client.local_addr()?;
    // One connection at a time, inline: nothing outlives the warm-up.
    let destination = async {
        loop {
            let Ok((mut s, _)) = upstream.accept().await else {
                return;
            };
            let mut buf = [0u8; 1024];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 8192 {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(ANSWER).await;
            let _ = s.shutdown().await;
        }
    };
    let served = async {
        let rules = Rules {
            allow_private: true,
            ..Rules::default()
        };
        loop {
            let (s, peer) = proxy.accept().await?;
            if is_own(peer, own) {
                forward::serve(s, &rules, &Log::default()).await;
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let ask = async {
        let request = format!("GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n");
        client.write_all(request.as_bytes()).await?;
        // Half-closed, as a client that has sent all it will: the relay
        // ends when both directions have.
        client.shutdown().await?;
        let mut got = Vec::new();
        client.read_to_end(&mut got).await?;
        Ok::<Vec<u8>, std::io::Error>(got)
    };
    tokio::select! {
        _ = destination => Err(std::io::ErrorKind::Other.into()),
        r = async { tokio::join!(served, ask) } => {
            r.0?;
            r.1
        }
    }
}

/// True when the proxy's peer is the warm-up's own client socket.
fn is_own(peer: SocketAddr, own: SocketAddr) -> bool {
    peer == own
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_request_goes_through_the_proxy_path_and_is_answered() {
        let got = warm_up().await.expect("the warm-up ran");
        assert_eq!(got, ANSWER, "the destination's answer, relayed whole");
    }

    #[test]
    fn only_the_warm_ups_own_client_is_served() {
        let own: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert!(is_own(own, own));
        assert!(!is_own("127.0.0.1:40001".parse().unwrap(), own));
    }
}
