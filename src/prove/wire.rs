//! What the prover sends the battery in the jail and what comes back: one
//! [`Request`] on the battery's stdin (the nonce and the attempts, in the
//! order they run), then one JSON line per attempt on its stdout, after a
//! first line that proves the battery ran ([`Line::Alive`], with the
//! request's nonce) and before a last one that says it finished
//! ([`Line::Done`]).
//!
//! The battery decides nothing: each [`Action`] is one thing to try, and
//! its [`Reply`] says what the kernel answered (the call worked, or its
//! errno) and what came back (a digest of what was read, a count). What
//! that proves is the supervisor's to judge, with the effects it sees
//! itself (a canary listener, a file, a process).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The hidden subcommand that runs the battery (`glovebox __prove`).
pub const SUBCOMMAND: &str = "__prove";

/// Bytes the battery sends to a canary listener, so that what it received
/// can be told from anything else.
pub const PAYLOAD: &str = "GLOVEBOX-PROVE-CANARY";

/// How a reply's data starts when the attempt could not be made at all
/// (its link, its child, its program): it proves nothing either way.
pub const NOT_TRIED: &str = "not tried: ";

/// The battery's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// Echoed in [`Line::Alive`]: the battery that answers is this run's.
    pub nonce: String,
    /// What to try, in order.
    pub attempts: Vec<Attempt>,
}

/// One thing to try.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    /// Its number in the request (the reply carries it back).
    pub id: usize,
    /// What to do.
    pub action: Action,
}

/// Everything the battery knows how to try. Paths are as the jail sees
/// them (the host's absolute paths: a grant is mounted at its own path);
/// one that starts with `~/` is in the jail's private `HOME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Action {
    // --- files
    /// Open and read (the reply's data: a digest of the first bytes).
    Read { path: PathBuf },
    /// List a directory (data: the digest of the sorted names).
    List { path: PathBuf },
    /// Create a new file (`O_CREAT | O_EXCL`), write the payload.
    Create { path: PathBuf },
    /// Open an existing file for writing (no `O_TRUNC`; nothing written).
    OpenWrite { path: PathBuf },
    /// `chmod` to the mode it already has.
    ChmodSame { path: PathBuf },
    /// Set its access and modification times to those it already has.
    UtimeSame { path: PathBuf },
    /// Set the extended attribute `user.glovebox-prove` (removed at once
    /// when that worked).
    SetXattr { path: PathBuf },
    /// Make `link` a symbolic link to `target`, then read through it.
    ReadVia { link: PathBuf, target: PathBuf },
    /// Make `link` a symbolic link to `target` (which does not exist),
    /// then create through it.
    CreateVia { link: PathBuf, target: PathBuf },
    /// Create a file with the setuid and setgid bits (data: the mode the
    /// file got, when it was created).
    CreateSetId { path: PathBuf },
    /// Create a plain file, then `chmod` it setuid (data: the mode it got).
    ChmodSetId { path: PathBuf },
    // --- network
    /// Connect over TCP and send the payload.
    Tcp { addr: SocketAddr },
    /// Send the payload in a UDP datagram.
    Udp { addr: SocketAddr },
    /// Connect to a unix socket by path and send the payload.
    Unix { path: PathBuf },
    /// Connect to an abstract unix socket and send the payload.
    Abstract { name: String },
    /// Make a netlink (route) socket.
    Netlink,
    /// A unix socket pair carries a byte (a control: the jail allows it).
    SocketPair,
    /// Ask the egress proxy (`HTTP_PROXY`) to `CONNECT` to `target`
    /// (`host:port`); when it agrees, send `send` through the tunnel,
    /// followed by the value of the variable `with_env` when named
    /// (data: the proxy's status line).
    Proxy {
        target: String,
        send: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        with_env: Option<String>,
    },
    // --- processes
    /// Send `signal` to `pid` (0 only asks whether it could).
    Signal { pid: i32, signal: i32 },
    /// `PTRACE_ATTACH` to `pid` (detached at once when it worked).
    Ptrace { pid: i32 },
    /// Read `len` bytes of `pid`'s memory at `addr` (data: their hex).
    VmRead { pid: i32, addr: u64, len: usize },
    /// Read `pid`'s open-file limit (`prlimit`).
    Prlimit { pid: i32 },
    // --- the kernel's other doors, each in a child process of its own
    /// `unshare` a new user namespace.
    UnshareUser,
    /// `unshare` new mount and network namespaces.
    UnshareMount,
    /// Mount a tmpfs on `at`.
    Mount { at: PathBuf },
    /// Set up an `io_uring`.
    IoUring,
    /// Add a key to the process keyring.
    AddKey,
    /// Find the user's keyring (shared by every process of the uid).
    UserKeyring,
    // --- terminal
    /// Open `/dev/tty` (the controlling terminal).
    OpenTty,
    /// The controlling terminal's number (data: `tty_nr` of
    /// `/proc/self/stat`).
    TtyNumber,
    /// Push a byte into the input of descriptor `fd`'s terminal.
    Tiocsti { fd: i32 },
    // --- capabilities and environment
    /// The capability sets and `NoNewPrivs` (data: those lines of
    /// `/proc/self/status`).
    Status,
    /// The environment (data: `NAME=value` lines).
    Environ,
    /// Nothing (a control: in a child, it shows children start).
    Nothing,
    // --- resources (bounded bombs)
    /// A child process allocates and touches memory up to `bytes` (data:
    /// the bytes it reached, and how it ended).
    Memory { bytes: u64 },
    /// Threads up to `count` (data: how many were made).
    Threads { count: u64 },
    /// Write `bytes` to stderr (data: how many were written).
    Output { bytes: u64 },
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The attempt's number.
    pub id: usize,
    /// The call (every step of the attempt) worked.
    pub ok: bool,
    /// The errno of the step that failed (`ok` false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// What came back, by action (see [`Action`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// How long it took, in microseconds (set by the battery).
    #[serde(default)]
    pub micros: u64,
}

impl Reply {
    /// A reply that worked, with `data`.
    pub fn ok(id: usize, data: impl Into<String>) -> Reply {
        Reply {
            id,
            ok: true,
            errno: None,
            data: data.into(),
            micros: 0,
        }
    }

    /// An attempt that could not be made: `why` (failed with `errno`).
    pub fn not_tried(id: usize, errno: i32, why: &str) -> Reply {
        Reply::failed(id, errno, format!("{NOT_TRIED}{why}"))
    }

    /// Whether the attempt could not be made at all.
    pub fn was_not_tried(&self) -> bool {
        !self.ok && self.data.starts_with(NOT_TRIED)
    }

    /// A reply that failed with `errno` (data: where, when useful).
    pub fn failed(id: usize, errno: i32, data: impl Into<String>) -> Reply {
        Reply {
            id,
            ok: false,
            errno: Some(errno),
            data: data.into(),
            micros: 0,
        }
    }
}

/// One line of the battery's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// The first line: the battery runs (the request's nonce, its pid as
    /// it sees it).
    Alive { nonce: String, pid: u32 },
    /// One attempt's reply.
    Reply(Reply),
    /// The last line: every attempt was made.
    Done { count: usize },
}

/// The battery's lines read back from its stdout: the nonce it echoed,
/// the replies by attempt, whether it finished. Lines that do not parse
/// are ignored (a probe's stray output cannot forge a reply: each needs
/// its attempt's number, and the nonce is checked).
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The nonce of the first line, when it was [`Line::Alive`].
    pub alive: Option<String>,
    /// The replies, by attempt number (the first reply of each).
    pub replies: std::collections::BTreeMap<usize, Reply>,
    /// The battery reached its end ([`Line::Done`]).
    pub done: bool,
}

impl Transcript {
    /// Reads `stdout`.
    pub fn read(stdout: &[u8]) -> Transcript {
        let mut t = Transcript::default();
        let text = String::from_utf8_lossy(stdout);
        for (i, line) in text.lines().enumerate() {
            match serde_json::from_str::<Line>(line) {
                Ok(Line::Alive { nonce, .. }) if i == 0 => t.alive = Some(nonce),
                Ok(Line::Reply(r)) if t.alive.is_some() => {
                    t.replies.entry(r.id).or_insert(r);
                }
                Ok(Line::Done { .. }) if t.alive.is_some() => t.done = true,
                _ => {}
            }
        }
        t
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_counts_only_after_proof_of_life() {
        let alive = serde_json::to_string(&Line::Alive {
            nonce: "n1".into(),
            pid: 1,
        })
        .unwrap();
        let reply =
            serde_json::to_string(&Line::Reply(Reply::failed(3, libc::EACCES, ""))).unwrap();
        let done = serde_json::to_string(&Line::Done { count: 1 }).unwrap();
        let t = Transcript::read(format!("{alive}\n{reply}\nnoise\n{done}\n").as_bytes());
        assert_eq!(t.alive.as_deref(), Some("n1"));
        assert_eq!(t.replies[&3].errno, Some(libc::EACCES));
        assert!(t.done);
        // Replies before the proof of life (or without one) do not count.
        let t = Transcript::read(format!("{reply}\n{alive}\n{done}\n").as_bytes());
        assert_eq!(t.alive, None);
        assert!(t.replies.is_empty() && !t.done);
    }

    #[test]
    fn actions_round_trip_as_tagged_json() {
        let a = Action::Proxy {
            target: "169.254.169.254:80".into(),
            send: PAYLOAD.into(),
            with_env: None,
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("\"do\":\"proxy\""), "{text}");
        assert_eq!(serde_json::from_str::<Action>(&text).unwrap(), a);
    }
}
