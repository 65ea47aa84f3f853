//! [`Cancel`]: how a caller stops a jailed call that is still running (an
//! MCP client's `notifications/cancelled`, a closed HTTP request).
//!
//! The jail runs synchronously on the caller's thread, so another thread
//! sets the flag and the pump loop, which wakes at least every
//! [`POLL_INTERVAL`] while a token is attached, kills the first process
//! through its pidfd. That ends the call's PID namespace: the kernel kills
//! every other process of the tree with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the pump checks a cancel token while the child runs.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A shared flag: once [`Cancel::cancel`] is called, the call it is attached
/// to (and every later call given the same token) is killed.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for the call to stop; its whole process tree is killed.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Cancel::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        a.cancel();
        assert!(b.is_cancelled());
    }
}
