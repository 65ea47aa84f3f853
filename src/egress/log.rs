//! The egress log of one call: every connection the tool asked the proxy
//! for, allowed or refused, with the bytes moved each way.
//!
//! The proxy adds an [`Entry`] when it has decided and updates its byte
//! counters as data flows, so the log is right even for connections cut
//! when the call ends. [`Log::connections`] is the snapshot the engine
//! writes into the audit line (`egress=[…]`) and turns into the Outcome's
//! warnings ([`Log::refusals`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// Connections recorded one by one per call; beyond this they are only
/// counted (a tool opening connections in a loop cannot grow the log).
pub const MAX_ENTRIES: usize = 256;

/// One connection, as the log keeps it while it runs.
#[derive(Debug)]
pub struct Entry {
    host: String,
    port: u16,
    via: &'static str,
    refused: Option<String>,
    sent: AtomicU64,
    received: AtomicU64,
}

impl Entry {
    /// Counts bytes sent by the tool.
    pub fn add_sent(&self, n: u64) {
        self.sent.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts bytes sent to the tool.
    pub fn add_received(&self, n: u64) {
        self.received.fetch_add(n, Ordering::Relaxed);
    }
}

/// One connection, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    /// The host as the tool named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// How the tool asked: `connect`, `http` or `socks5`.
    pub via: &'static str,
    /// Whether the proxy connected it.
    pub allowed: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the tool to the destination.
    pub sent: u64,
    /// Bytes from the destination to the tool.
    pub received: u64,
}

impl Connection {
    /// "refused connect to 10.0.0.5:22 (private)", for refusals.
    pub fn refusal(&self) -> Option<String> {
        let why = self.reason.as_deref()?;
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        Some(format!("refused connect to {host}:{} ({why})", self.port))
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<Arc<Entry>>,
    unrecorded: u64,
}

/// The log of one call, shared by the proxy's connections.
#[derive(Debug, Clone, Default)]
pub struct Log {
    inner: Arc<Mutex<Inner>>,
}

impl Log {
    /// Records a decision about a connection to `host`:`port`; `refused`
    /// names why when it was refused.
    pub fn record(
        &self,
        host: &str,
        port: u16,
        via: &'static str,
        refused: Option<String>,
    ) -> Arc<Entry> {
        let entry = Arc::new(Entry {
            host: host.to_string(),
            port,
            via,
            refused,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        });
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.entries.len() < MAX_ENTRIES {
            inner.entries.push(entry.clone());
        } else {
            inner.unrecorded += 1;
        }
        entry
    }

    /// The connections so far, and how many more were not recorded.
    pub fn connections(&self) -> (Vec<Connection>, u64) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let list = inner
            .entries
            .iter()
            .map(|e| Connection {
                host: e.host.clone(),
                port: e.port,
                via: e.via,
                allowed: e.refused.is_none(),
                reason: e.refused.clone(),
                sent: e.sent.load(Ordering::Relaxed),
                received: e.received.load(Ordering::Relaxed),
            })
            .collect();
        (list, inner.unrecorded)
    }

    /// One line per refused connection (duplicates folded, with a count).
    pub fn refusals(&self) -> Vec<String> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for c in self.connections().0 {
            if let Some(r) = c.refusal() {
                match out.iter_mut().find(|(s, _)| *s == r) {
                    Some((_, n)) => *n += 1,
                    None => out.push((r, 1)),
                }
            }
        }
        out.into_iter()
            .map(|(s, n)| if n > 1 { format!("{s} ×{n}") } else { s })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_counts_and_refusals() {
        let log = Log::default();
        let e = log.record("example.com", 443, "connect", None);
        e.add_sent(10);
        e.add_received(2000);
        log.record("10.0.0.5", 22, "connect", Some("private".into()));
        log.record("10.0.0.5", 22, "connect", Some("private".into()));
        log.record("::1", 80, "http", Some("loopback".into()));
        let (list, more) = log.connections();
        assert_eq!(more, 0);
        assert_eq!(list[0].sent, 10);
        assert_eq!(list[0].received, 2000);
        assert!(list[0].allowed);
        assert_eq!(
            log.refusals(),
            [
                "refused connect to 10.0.0.5:22 (private) ×2",
                "refused connect to [::1]:80 (loopback)"
            ]
        );
        let json = serde_json::to_string(&list[1]).unwrap();
        assert!(json.contains("\"allowed\":false") && json.contains("\"reason\":\"private\""));
    }

    #[test]
    fn the_log_is_bounded() {
        let log = Log::default();
        for i in 0..(MAX_ENTRIES + 5) {
            log.record("h", i as u16, "connect", None);
        }
        let (list, more) = log.connections();
        assert_eq!(list.len(), MAX_ENTRIES);
        assert_eq!(more, 5);
    }
}
