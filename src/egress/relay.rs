//! Bytes both ways between the tool's connection and its destination,
//! counted in the call's log as they are delivered.
//!
//! Each direction moves with `splice(2)` through a pipe of its own
//! (socket → pipe → socket): the bytes never enter the supervisor's
//! memory, and a large transfer costs two system calls per pipe-full
//! instead of a copy in and a copy out. Where no pipe can be made (the
//! descriptor limit), that direction is copied through a 64 KiB buffer.
//! Either way, when one side has no more to send, the other side's
//! sending half is shut down (a half-closed connection stays usable the
//! other way), and the relay ends when both directions have.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags};
use nix::sys::socket::Shutdown;
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::log::Entry;

/// The capacity asked for each direction's pipe (the kernel's default is
/// 64 KiB; more moves a large transfer in fewer calls).
const PIPE_SIZE: i32 = 256 * 1024;
/// The buffer of the copying fallback.
const COPY_BUF: usize = 64 * 1024;

/// Relays until both directions are done; the connections close when it
/// returns.
pub async fn relay(client: TcpStream, upstream: TcpStream, entry: &Entry) {
    tokio::join!(
        one_way(&client, &upstream, |n| entry.add_sent(n)),
        one_way(&upstream, &client, |n| entry.add_received(n)),
    );
}

/// One direction, then the sending half of `to` shut down.
async fn one_way(from: &TcpStream, to: &TcpStream, count: impl Fn(u64)) {
    match pipe() {
        Ok((r, w)) => {
            let _ = spliced(from, to, &r, &w, &count).await;
        }
        Err(_) => {
            let _ = copied(from, to, &count).await;
        }
    }
    let _ = nix::sys::socket::shutdown(
        std::os::fd::AsRawFd::as_raw_fd(&to.as_fd()),
        Shutdown::Write,
    );
}

/// A non-blocking pipe, as large as the kernel grants up to [`PIPE_SIZE`].
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // Refused above /proc/sys/fs/pipe-max-size: the default size works.
    let _ = nix::fcntl::fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    Ok((r, w))
}

fn splice_flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
}

/// Socket → pipe → socket until end of stream or an error. The pipe is
/// empty whenever bytes are taken from `from`, so "would block" there
/// means the socket has nothing, and it is full-ish whenever bytes are
/// given to `to`, so "would block" there means the socket's buffer is
/// full: readiness is only ever cleared for the socket it concerns.
async fn spliced(
    from: &TcpStream,
    to: &TcpStream,
    r: &OwnedFd,
    w: &OwnedFd,
    count: &impl Fn(u64),
) -> io::Result<()> {
    loop {
        from.readable().await?;
        let n = match from.try_io(Interest::READABLE, || {
            nix::fcntl::splice(from, None, w, None, PIPE_SIZE as usize, splice_flags())
                .map_err(io::Error::from)
        }) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                nix::fcntl::splice(r, None, to, None, left, splice_flags()).map_err(io::Error::from)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => {
                    left -= m;
                    count(m as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The same through a buffer, for when no pipe could be made.
async fn copied(from: &TcpStream, to: &TcpStream, count: &impl Fn(u64)) -> io::Result<()> {
    let mut buf = vec![0u8; COPY_BUF];
    loop {
        from.readable().await?;
        let n = match from.try_read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        let mut done = 0;
        while done < n {
            to.writable().await?;
            match to.try_write(&buf[done..n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => {
                    done += m;
                    count(m as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connected pair of loopback streams.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap());
        let (a, b) = tokio::join!(a, l.accept());
        (a.unwrap(), b.unwrap().0)
    }

    /// Both directions arrive whole and in order, a half-close passes
    /// through, and every byte is counted once.
    async fn relays(copy: bool) {
        let (mut tool, client) = pair().await;
        let (upstream, mut server) = pair().await;
        let log = super::super::log::Log::default();
        let entry = log.record("example.com", 80, "connect", None);
        let up: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let down: Vec<u8> = (0..5_000_000u32).map(|i| (i % 241) as u8).collect();
        let relayed = {
            let entry = entry.clone();
            tokio::spawn(async move {
                if copy {
                    tokio::join!(
                        async {
                            let _ = copied(&client, &upstream, &|n| entry.add_sent(n)).await;
                            let _ = nix::sys::socket::shutdown(
                                std::os::fd::AsRawFd::as_raw_fd(&upstream),
                                Shutdown::Write,
                            );
                        },
                        async {
                            let _ = copied(&upstream, &client, &|n| entry.add_received(n)).await;
                            let _ = nix::sys::socket::shutdown(
                                std::os::fd::AsRawFd::as_raw_fd(&client),
                                Shutdown::Write,
                            );
                        },
                    );
                } else {
                    relay(client, upstream, &entry).await;
                }
            })
        };
        let (u, d) = (up.clone(), down.clone());
        let tool_side = async move {
            let (mut rd, mut wr) = tool.split();
            let send = async {
                wr.write_all(&u).await.unwrap();
                wr.shutdown().await.unwrap();
            };
            let mut got = Vec::new();
            let recv = rd.read_to_end(&mut got);
            let (_, n) = tokio::join!(send, recv);
            n.unwrap();
            got
        };
        let server_side = async move {
            let (mut rd, mut wr) = server.split();
            let mut got = Vec::new();
            let recv = rd.read_to_end(&mut got);
            let send = async {
                wr.write_all(&d).await.unwrap();
                wr.shutdown().await.unwrap();
            };
            let (n, _) = tokio::join!(recv, send);
            n.unwrap();
            got
        };
        let (at_tool, at_server) = tokio::join!(tool_side, server_side);
        relayed.await.unwrap();
        assert!(at_server == up, "upstream bytes differ");
        assert!(at_tool == down, "downstream bytes differ");
        let c = &log.connections().0[0];
        assert_eq!((c.sent, c.received), (up.len() as u64, down.len() as u64));
    }

    #[tokio::test]
    async fn splice_relays_both_ways_and_counts() {
        // The spliced path is the one taken (no silent fallback).
        assert!(pipe().is_ok());
        relays(false).await;
    }

    #[tokio::test]
    async fn the_copy_fallback_relays_both_ways_and_counts() {
        relays(true).await;
    }
}
