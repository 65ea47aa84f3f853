//! What a call's egress may hold (issue 43, items 2 and 3): descriptors
//! (each connection's sockets and the relay's pipes, on both sides) and
//! the memory of transparent egress's user-space TCP (each connection's
//! buffers in [`super::stack`]), bounded per call and for the whole
//! process.
//!
//! Every connection is charged to its call's [`Account`] before anything
//! is opened for it, and the charge is returned when the connection is
//! over ([`Charge`] is dropped with it). A connection that would go past
//! a bound is refused — the tool sees a refused or reset connection, and
//! its call's egress log says which bound ([`Over::reason`]) — so one
//! call's connections can never take the descriptors or the memory other
//! calls need: they are held back by their own call's bound first.
//!
//! The bounds ([`Bounds`]) are set once by the process that serves calls
//! (`glovebox serve` partitions its open-file limit, see
//! `crate::serve::limits`); any other process (`glovebox run`,
//! `sandbox`, `mcp`) gets [`Bounds::for_open_files`] of its own limit.
//!
//! Where the call's tool has a memory limit in a cgroup, the memory is
//! charged to that limit too ([`ToolMemory`], `crate::jail::cgroup`):
//! the tool and its connections' buffers together stay within what its
//! manifest allows.

use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::jail::ToolMemory;

/// Descriptors one proxied connection holds: the tool's socket, the
/// upstream socket, and the relay's two pipes (two ends each).
pub const PROXIED_FDS: usize = 6;
/// Descriptors one transparent connection holds: its upstream socket (the
/// tool's side is a socket of the user-space stack, no descriptor).
pub const TRANSPARENT_FDS: usize = 1;

/// Descriptors a call's egress may hold at most, however many the
/// process has: as many as [`super::MAX_CONNECTIONS`] proxied connections.
pub const MAX_FDS_PER_CALL: usize = super::MAX_CONNECTIONS * PROXIED_FDS;

/// Descriptors a process that only runs its own calls (`run`, `sandbox`,
/// `mcp`) keeps for itself besides its calls' egress: its jails, its
/// runtime, the audit log.
pub const FD_RESERVE: usize = 128;

/// Default memory of one call's transparent connections: 64 MiB (128
/// connections at full buffers).
pub const DEFAULT_BYTES_PER_CALL: u64 = 64 << 20;
/// Default memory of every call's transparent connections together:
/// 256 MiB.
pub const DEFAULT_BYTES_TOTAL: u64 = 256 << 20;

/// The bounds of every call's egress in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Descriptors one call's connections may hold.
    pub fds_per_call: usize,
    /// Descriptors every call's connections may hold together.
    pub fds_total: usize,
    /// Bytes one call's transparent connections may hold.
    pub bytes_per_call: u64,
    /// Bytes every call's transparent connections may hold together.
    pub bytes_total: u64,
}

impl Bounds {
    /// The bounds of a process with `open_files` descriptors that runs
    /// its calls itself, one at a time as far as descriptors go: what is
    /// left after [`FD_RESERVE`], at most [`MAX_FDS_PER_CALL`]; the
    /// default memory bounds.
    pub fn for_open_files(open_files: u64) -> Bounds {
        let left = usize::try_from(open_files)
            .unwrap_or(usize::MAX)
            .saturating_sub(FD_RESERVE)
            .min(MAX_FDS_PER_CALL);
        Bounds {
            fds_per_call: left,
            fds_total: left,
            bytes_per_call: DEFAULT_BYTES_PER_CALL,
            bytes_total: DEFAULT_BYTES_TOTAL,
        }
    }
}

fn configured() -> &'static RwLock<Option<Bounds>> {
    static BOUNDS: RwLock<Option<Bounds>> = RwLock::new(None);
    &BOUNDS
}

/// Sets the bounds of every call's egress from now on (a server, at its
/// start: accounts made before keep theirs).
pub fn set(bounds: Bounds) {
    *configured()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(bounds);
}

/// The bounds in force: those [`set`], else those of this process's
/// open-file limit (its soft limit first raised to the hard one, as
/// `glovebox serve` does: the supervisor's own table, not the jail's,
/// whose limit is set apart).
pub fn bounds() -> Bounds {
    if let Some(b) = *configured()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return b;
    }
    static DEFAULT: OnceLock<Bounds> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let open_files = match getrlimit(Resource::RLIMIT_NOFILE) {
            Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            {
                Ok(()) => hard,
                Err(_) => soft,
            },
            Ok((soft, _)) => soft,
            Err(_) => 1024,
        };
        Bounds::for_open_files(open_files)
    })
}

/// What is held: descriptors and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Descriptors.
    pub fds: usize,
    /// Bytes.
    pub bytes: u64,
}

/// What every call's egress holds in this process.
static PROCESS: Mutex<Held> = Mutex::new(Held { fds: 0, bytes: 0 });

/// What every call's egress holds now (for `/metrics` and the tests).
pub fn held() -> Held {
    *PROCESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// The call's connections hold this many descriptors already (its
    /// bound).
    CallFds(usize),
    /// Every call's connections hold this many descriptors (the
    /// process's bound).
    ServerFds(usize),
    /// The call's transparent connections hold this many bytes (its
    /// bound).
    CallBytes(u64),
    /// Every call's transparent connections hold this many bytes.
    ServerBytes(u64),
    /// The tool's memory limit (bytes) holds the tool and its
    /// connections' buffers: this connection would pass it.
    ToolMemory(u64),
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

impl Over {
    /// Why, as the egress log and the Outcome's warnings show it.
    pub fn reason(&self) -> String {
        match self {
            Over::CallFds(n) => format!(
                "the call's connections hold {n} descriptors, the most one call may: close connections it no longer uses (a proxied connection holds {PROXIED_FDS}, a transparent one {TRANSPARENT_FDS}), or raise the server's open-file limit (ulimit -n)"
            ),
            Over::ServerFds(n) => format!(
                "every call's connections hold {n} descriptors, the most the server gives them: retry later, or raise the server's open-file limit (ulimit -n)"
            ),
            Over::CallBytes(n) => format!(
                "the call's transparent connections hold {} MiB of buffers, the most one call may (glovebox serve --egress-memory-per-call): close connections it no longer uses",
                mib(*n)
            ),
            Over::ServerBytes(n) => format!(
                "every call's transparent connections hold {} MiB of buffers, the most the server gives them (glovebox serve --egress-memory): retry later",
                mib(*n)
            ),
            Over::ToolMemory(limit) => format!(
                "the tool's memory limit ({} MiB) holds the tool and its connections' buffers, and this connection's would pass it: close connections it no longer uses, or raise the manifest's memory limit",
                mib(*limit)
            ),
        }
    }
}

/// The egress of one call: what it holds, within its bounds.
#[derive(Debug)]
pub struct Account {
    bounds: Bounds,
    held: Mutex<Held>,
    tool: OnceLock<Arc<dyn ToolMemory>>,
}

impl Default for Account {
    fn default() -> Self {
        Account::new(bounds())
    }
}

impl Account {
    /// An account holding nothing, within `bounds`.
    pub fn new(bounds: Bounds) -> Account {
        Account {
            bounds,
            held: Mutex::new(Held::default()),
            tool: OnceLock::new(),
        }
    }

    /// Charges the memory of this account's connections to the tool's
    /// memory limit too, from now on (set once: the call's jail).
    pub fn charge_tool(&self, tool: Arc<dyn ToolMemory>) {
        let _ = self.tool.set(tool);
    }

    /// What the call's connections hold now.
    pub fn held(&self) -> Held {
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Charges one connection's `fds` descriptors and `bytes` of buffers,
    /// or says which bound it would pass (nothing charged then).
    pub fn charge(self: &Arc<Self>, fds: usize, bytes: u64) -> Result<Charge, Over> {
        let mut call = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if call.fds + fds > self.bounds.fds_per_call {
            return Err(Over::CallFds(call.fds));
        }
        if call.bytes + bytes > self.bounds.bytes_per_call {
            return Err(Over::CallBytes(call.bytes));
        }
        {
            let mut all = PROCESS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if all.fds + fds > self.bounds.fds_total {
                return Err(Over::ServerFds(all.fds));
            }
            if all.bytes + bytes > self.bounds.bytes_total {
                return Err(Over::ServerBytes(all.bytes));
            }
            if bytes > 0 {
                if let Some(tool) = self.tool.get() {
                    tool.take(bytes).map_err(Over::ToolMemory)?;
                }
            }
            all.fds += fds;
            all.bytes += bytes;
        }
        call.fds += fds;
        call.bytes += bytes;
        Ok(Charge {
            account: self.clone(),
            fds,
            bytes,
        })
    }

    fn release(&self, fds: usize, bytes: u64) {
        {
            let mut call = self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            call.fds = call.fds.saturating_sub(fds);
            call.bytes = call.bytes.saturating_sub(bytes);
        }
        {
            let mut all = PROCESS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            all.fds = all.fds.saturating_sub(fds);
            all.bytes = all.bytes.saturating_sub(bytes);
        }
        if bytes > 0 {
            if let Some(tool) = self.tool.get() {
                tool.give(bytes);
            }
        }
    }
}

/// One connection's charge, returned when dropped.
#[derive(Debug)]
pub struct Charge {
    account: Arc<Account>,
    fds: usize,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.account.release(self.fds, self.bytes);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Tool {
        limit: u64,
        taken: Mutex<u64>,
    }

    impl ToolMemory for Tool {
        fn take(&self, bytes: u64) -> Result<(), u64> {
            let mut t = self.taken.lock().unwrap();
            if *t + bytes > self.limit {
                return Err(self.limit);
            }
            *t += bytes;
            Ok(())
        }

        fn give(&self, bytes: u64) {
            *self.taken.lock().unwrap() -= bytes;
        }
    }

    fn bounds(fds: usize, bytes: u64) -> Bounds {
        Bounds {
            fds_per_call: fds,
            fds_total: usize::MAX / 2,
            bytes_per_call: bytes,
            bytes_total: u64::MAX / 2,
        }
    }

    #[test]
    fn a_call_is_held_to_its_own_bounds_and_gets_them_back() {
        let a = Arc::new(Account::new(bounds(12, 1000)));
        let c1 = a.charge(PROXIED_FDS, 0).unwrap();
        let c2 = a.charge(PROXIED_FDS, 0).unwrap();
        assert_eq!(a.charge(1, 0).unwrap_err(), Over::CallFds(12));
        drop(c1);
        let c3 = a.charge(1, 600).unwrap();
        assert_eq!(a.charge(1, 600).unwrap_err(), Over::CallBytes(600));
        assert_eq!(a.held(), Held { fds: 7, bytes: 600 });
        drop((c2, c3));
        assert_eq!(a.held(), Held::default());
        // Another call's account is its own.
        let b = Arc::new(Account::new(bounds(12, 1000)));
        let _full: Vec<_> = (0..12).map(|_| a.charge(1, 0).unwrap()).collect();
        assert!(b.charge(PROXIED_FDS, 0).is_ok());
    }

    #[test]
    fn the_tools_memory_limit_holds_its_connections_too() {
        let a = Arc::new(Account::new(bounds(100, 1 << 30)));
        let tool = Arc::new(Tool {
            limit: 1000,
            ..Tool::default()
        });
        a.charge_tool(tool.clone());
        let c = a.charge(1, 700).unwrap();
        assert_eq!(a.charge(1, 400).unwrap_err(), Over::ToolMemory(1000));
        // Refused: nothing charged anywhere.
        assert_eq!(a.held(), Held { fds: 1, bytes: 700 });
        assert_eq!(*tool.taken.lock().unwrap(), 700);
        drop(c);
        assert_eq!(*tool.taken.lock().unwrap(), 0);
        // Descriptors alone are not the tool's memory.
        let _c = a.charge(1, 0).unwrap();
        assert_eq!(*tool.taken.lock().unwrap(), 0);
    }

    #[test]
    fn every_reason_names_what_to_do() {
        for over in [
            Over::CallFds(6),
            Over::ServerFds(6),
            Over::CallBytes(1 << 20),
            Over::ServerBytes(1 << 20),
            Over::ToolMemory(1 << 30),
        ] {
            let r = over.reason();
            assert!(r.contains(':'), "{r}");
            assert!(r.chars().next().unwrap().is_lowercase(), "{r}");
        }
    }

    #[test]
    fn a_process_keeps_its_reserve() {
        let b = Bounds::for_open_files(1024);
        assert_eq!(b.fds_per_call, 1024 - FD_RESERVE);
        assert_eq!(Bounds::for_open_files(64).fds_per_call, 0);
        assert_eq!(
            Bounds::for_open_files(1 << 20).fds_per_call,
            MAX_FDS_PER_CALL
        );
    }
}
