//! Who may call a `glovebox serve` that listens on loopback without a
//! token: the account that runs it, and the accounts named with
//! `--allow-uid`, no other (issue 43, item 1).
//!
//! Every local account can connect to a loopback port, so the address
//! says nothing about who is calling. The kernel knows: the other end of
//! a loopback connection is a socket on this machine, and socket
//! diagnostics ([`diag`], `NETLINK_SOCK_DIAG`) give the uid that made it.
//! Each connection's other end is looked up once, on its first request
//! ([`Connection::verdict`]), and the guard of [`super::http`] refuses
//! every request of a connection whose verdict is not
//! [`Verdict::Allowed`] (403 `unauthorized`). With a token
//! (`GLOVEBOX_API_TOKEN`) the token decides instead, on loopback and off
//! it.
//!
//! Fail closed ([`decide`], pure): a socket that is gone (its process
//! closed it before the lookup), held by no process (an orphan: inode 0),
//! in `TIME_WAIT` (the kernel keeps no owner for those: it reports uid 0),
//! a listener found in its place, or a lookup that failed, is refused like
//! another user. The owner of a socket is the account that created it and
//! cannot change while the connection lasts (a socket handed to another
//! process keeps its creator's uid), and while this side of the
//! connection is open no other socket can take the same pair of
//! addresses, so the one lookup holds for every request of the
//! connection.
//!
//! At start, [`check_works`] looks up a connection the server makes to
//! itself: where socket diagnostics are unavailable (a kernel without
//! `inet_diag`, a seccomp profile refusing netlink) the server does not
//! start without a token rather than serve everyone.

pub mod diag;

use std::net::SocketAddr;
use std::sync::OnceLock;

use netlink_packet_sock_diag::constants::{TCP_LISTEN, TCP_TIME_WAIT};

/// What socket diagnostics found at the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The uid that created the socket.
    pub uid: u32,
    /// Its inode; 0 once no process holds it.
    pub inode: u32,
    /// Its TCP state (`TCP_ESTABLISHED`, …).
    pub state: u8,
}

/// Whether a connection's caller may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its socket belongs to an allowed account.
    Allowed {
        /// That account.
        uid: u32,
    },
    /// Its socket belongs to another account.
    OtherUser {
        /// That account.
        uid: u32,
    },
    /// Who made it cannot be told: refused.
    Unknown {
        /// Why, for the message.
        why: String,
    },
}

/// The accounts that may call: the server's own (its effective uid) and
/// those given with `--allow-uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callers {
    uids: Vec<u32>,
}

impl Callers {
    /// The server's own account and `also`.
    pub fn own_and(also: &[u32]) -> Callers {
        let mut uids = vec![nix::unistd::geteuid().as_raw()];
        for u in also {
            if !uids.contains(u) {
                uids.push(*u);
            }
        }
        Callers { uids }
    }

    /// The accounts let in.
    pub fn uids(&self) -> &[u32] {
        &self.uids
    }
}

/// The verdict on what a lookup found (pure; see the module
/// documentation for each refusal).
pub fn decide(callers: &Callers, found: Result<Option<Found>, String>) -> Verdict {
    let found = match found {
        Err(why) => return Verdict::Unknown { why },
        Ok(None) => {
            return Verdict::Unknown {
                why: "its socket is gone (closed before it could be looked up)".into(),
            }
        }
        Ok(Some(f)) => f,
    };
    if found.state == TCP_TIME_WAIT {
        return Verdict::Unknown {
            why: "its socket is closed (TIME_WAIT keeps no owner)".into(),
        };
    }
    if found.state == TCP_LISTEN {
        return Verdict::Unknown {
            why: "a listener was found in place of its socket".into(),
        };
    }
    if found.inode == 0 {
        return Verdict::Unknown {
            why: "its socket is held by no process any more".into(),
        };
    }
    if callers.uids.contains(&found.uid) {
        Verdict::Allowed { uid: found.uid }
    } else {
        Verdict::OtherUser { uid: found.uid }
    }
}

/// One connection: its two ends, and the verdict on its caller once
/// looked up.
#[derive(Debug)]
pub struct Connection {
    local: SocketAddr,
    peer: SocketAddr,
    verdict: OnceLock<Verdict>,
}

impl Connection {
    /// The connection accepted at `local` from `peer`.
    pub fn new(local: SocketAddr, peer: SocketAddr) -> Connection {
        Connection {
            local,
            peer,
            verdict: OnceLock::new(),
        }
    }

    /// The verdict on this connection's caller, looked up the first time
    /// it is asked for (the other end is the socket whose local address
    /// is this connection's peer).
    pub fn verdict(&self, callers: &Callers) -> &Verdict {
        self.verdict.get_or_init(|| {
            decide(
                callers,
                diag::socket(self.peer, self.local).map_err(|e| crate::run::error_chain(&e)),
            )
        })
    }
}

/// Why the server cannot tell its callers apart.
#[derive(Debug, thiserror::Error)]
#[error("cannot tell which account a loopback connection comes from ({why}): set GLOVEBOX_API_TOKEN to require a token instead")]
pub struct Unidentifiable {
    why: String,
}

/// Makes a connection to `addr` (this server, listening) and looks its
/// caller up: [`Verdict::Allowed`] with this process's own uid, or why
/// not.
pub fn check_works(addr: SocketAddr) -> Result<(), Unidentifiable> {
    let unidentifiable = |why: String| Unidentifiable { why };
    let stream = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))
        .map_err(|e| unidentifiable(format!("connecting to itself at {addr}: {e}")))?;
    let local = stream
        .local_addr()
        .map_err(|e| unidentifiable(format!("its own connection's address: {e}")))?;
    let me = Callers::own_and(&[]);
    match decide(
        &me,
        diag::socket(local, addr).map_err(|e| crate::run::error_chain(&e)),
    ) {
        Verdict::Allowed { .. } => Ok(()),
        Verdict::OtherUser { uid } => Err(unidentifiable(format!(
            "its own connection was reported as uid {uid}"
        ))),
        Verdict::Unknown { why } => Err(unidentifiable(why)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use netlink_packet_sock_diag::constants::{TCP_CLOSE_WAIT, TCP_ESTABLISHED, TCP_FIN_WAIT2};

    fn callers() -> Callers {
        Callers {
            uids: vec![0, 1000],
        }
    }

    fn found(uid: u32, inode: u32, state: u8) -> Result<Option<Found>, String> {
        Ok(Some(Found { uid, inode, state }))
    }

    #[test]
    fn only_allowed_accounts_get_in() {
        let c = callers();
        assert_eq!(
            decide(&c, found(0, 7, TCP_ESTABLISHED)),
            Verdict::Allowed { uid: 0 }
        );
        assert_eq!(
            decide(&c, found(1000, 7, TCP_FIN_WAIT2)),
            Verdict::Allowed { uid: 1000 }
        );
        assert_eq!(
            decide(&c, found(65534, 7, TCP_ESTABLISHED)),
            Verdict::OtherUser { uid: 65534 }
        );
    }

    #[test]
    fn what_cannot_be_told_is_refused() {
        let c = callers();
        // TIME_WAIT reports uid 0 (root): refused all the same.
        for f in [
            found(0, 0, TCP_TIME_WAIT),
            found(0, 7, TCP_TIME_WAIT),
            found(0, 7, TCP_LISTEN),
            found(0, 0, TCP_ESTABLISHED),
            found(0, 0, TCP_CLOSE_WAIT),
            Ok(None),
            Err("no netlink".into()),
        ] {
            assert!(
                matches!(decide(&c, f.clone()), Verdict::Unknown { .. }),
                "{f:?}"
            );
        }
    }

    #[test]
    fn the_own_account_is_always_in() {
        let me = nix::unistd::geteuid().as_raw();
        let c = Callers::own_and(&[me, 5, 5]);
        assert_eq!(c.uids()[0], me);
        assert!(c.uids().contains(&5));
        assert_eq!(c.uids().len(), if me == 5 { 1 } else { 2 });
    }

    /// A real connection on loopback, v4 and v6: its caller is this
    /// process's own account; once the caller has closed its end, it is
    /// refused.
    #[test]
    fn a_loopback_connection_is_told_by_its_owner() {
        let me = nix::unistd::geteuid().as_raw();
        let callers = Callers::own_and(&[]);
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(bind) else {
                eprintln!("no {bind} here");
                continue;
            };
            let addr = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(addr).unwrap();
            let (server, peer) = listener.accept().unwrap();
            let conn = Connection::new(server.local_addr().unwrap(), peer);
            assert_eq!(conn.verdict(&callers), &Verdict::Allowed { uid: me });
            // Another account is not let in.
            let other = Callers { uids: vec![me + 1] };
            let later = Connection::new(server.local_addr().unwrap(), peer);
            assert_eq!(later.verdict(&other), &Verdict::OtherUser { uid: me });
            drop(client);
            std::thread::sleep(std::time::Duration::from_millis(50));
            let after = Connection::new(server.local_addr().unwrap(), peer);
            assert!(
                matches!(after.verdict(&callers), Verdict::Unknown { .. }),
                "{:?}",
                after.verdict(&callers)
            );
            check_works(addr).unwrap();
        }
    }
}
