//! What every call's egress moved, summed over the process: connections
//! allowed and refused, bytes each way. Added once per call when its
//! egress log is reported ([`crate::run::egress::report`]); read by
//! `glovebox serve`'s `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::log::Connection;

static ALLOWED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// The sums so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Connections the proxy made.
    pub allowed: u64,
    /// Connections refused.
    pub refused: u64,
    /// Bytes from the tools out.
    pub sent: u64,
    /// Bytes back to the tools.
    pub received: u64,
}

/// Adds one call's connections (`unrecorded`: allowed ones counted past
/// the log's bound, their bytes unknown).
pub fn add(connections: &[Connection], unrecorded: u64) {
    let mut t = Totals::default();
    for c in connections {
        if c.allowed {
            t.allowed += 1;
        } else {
            t.refused += 1;
        }
        t.sent += c.sent;
        t.received += c.received;
    }
    ALLOWED.fetch_add(t.allowed + unrecorded, Ordering::Relaxed);
    REFUSED.fetch_add(t.refused, Ordering::Relaxed);
    SENT.fetch_add(t.sent, Ordering::Relaxed);
    RECEIVED.fetch_add(t.received, Ordering::Relaxed);
}

/// The sums so far.
pub fn get() -> Totals {
    Totals {
        allowed: ALLOWED.load(Ordering::Relaxed),
        refused: REFUSED.load(Ordering::Relaxed),
        sent: SENT.load(Ordering::Relaxed),
        received: RECEIVED.load(Ordering::Relaxed),
    }
}
