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

/// Allowed connections recorded one by one per call, and refused ones
/// (each bound on its own, so that a tool opening allowed connections
/// in a loop can neither grow the log nor push its refusals out of it);
/// beyond this they are only counted, and the refusals' count is a
/// warning of its own.
pub const MAX_ENTRIES: usize = 256;

/// Longest host name kept in the log, in bytes (a DNS name is at most
/// 253); a longer one is cut and says how long it was.
pub const MAX_HOST: usize = 255;

/// A host as the tool sent it, made safe to keep and to print: printable
/// ASCII stays, anything else (line breaks, escapes, other scripts) is
/// escaped, and the result is at most about [`MAX_HOST`] bytes — a tool
/// cannot forge lines in the warnings nor grow the audit line with its
/// request.
pub fn printable_host(host: &str) -> String {
    let mut out = String::with_capacity(host.len().min(MAX_HOST));
    for c in host.chars() {
        if out.len() >= MAX_HOST {
            out.push_str(&format!("…({} bytes)", host.len()));
            break;
        }
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}

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
    /// How the tool asked: `connect`, `http`, `socks5` or `socks4` (always
    /// refused) through the proxy; `tcp`, `dns` (a lookup, port 0) or `udp`
    /// (always refused) through transparent egress; `direct` (a connection
    /// to an address, refused by the namespace-free jail's connect broker).
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
        if self.via == super::transparent::VIA_DNS {
            return Some(format!("refused lookup of {host} ({why})"));
        }
        Some(format!("refused connect to {host}:{} ({why})", self.port))
    }
}

/// How a placeholder secret was used on one host, as reported (never a
/// value: names and counts only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretUse {
    /// The secret's name.
    pub secret: String,
    /// The host as the tool named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Placeholders swapped for the real value (the secret's own hosts).
    #[serde(skip_serializing_if = "is_zero")]
    pub swapped: u64,
    /// Requests the real value was added to as a header (`inject`).
    #[serde(skip_serializing_if = "is_zero")]
    pub injected: u64,
    /// Placeholders sent on unchanged (any other host, or a body when the
    /// secret did not opt into bodies).
    #[serde(skip_serializing_if = "is_zero")]
    pub refused: u64,
    /// Real values turned back into the placeholder in a response.
    #[serde(skip_serializing_if = "is_zero")]
    pub hidden: u64,
    /// Responses refused because they carried the real value in a form
    /// that could not be turned into the placeholder exactly.
    #[serde(skip_serializing_if = "is_zero")]
    pub withheld: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What happened to a placeholder secret (see [`Log::secret_use`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Swapped for the real value.
    Swapped,
    /// The real value set as a header.
    Injected,
    /// Sent on as a placeholder.
    Refused,
    /// A real value in a response turned into the placeholder.
    Hidden,
    /// A response refused: it carried the real value in a form that
    /// could not be turned into the placeholder.
    Withheld,
}

/// Notes kept per call (TLS interception failures); more are counted.
pub const MAX_NOTES: usize = 32;

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<Arc<Entry>>,
    /// Of `entries`, how many are refusals.
    refused: usize,
    unrecorded: u64,
    /// Of `unrecorded`, how many are refusals.
    unrecorded_refused: u64,
    uses: Vec<SecretUse>,
    notes: Vec<String>,
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
            host: printable_host(host),
            port,
            via,
            refused,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        });
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let refused = entry.refused.is_some();
        let same_kind = if refused {
            inner.refused
        } else {
            inner.entries.len() - inner.refused
        };
        if same_kind < MAX_ENTRIES {
            inner.entries.push(entry.clone());
            inner.refused += usize::from(refused);
        } else {
            inner.unrecorded += 1;
            inner.unrecorded_refused += u64::from(refused);
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

    /// Counts `n` uses of placeholder secret `secret` on `host`:`port`.
    pub fn secret_use(&self, secret: &str, host: &str, port: u16, what: Use, n: u64) {
        if n == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let at = inner
            .uses
            .iter()
            .position(|u| u.secret == secret && u.host == host && u.port == port);
        let at = match at {
            Some(i) => i,
            None if inner.uses.len() < MAX_ENTRIES => {
                inner.uses.push(SecretUse {
                    secret: secret.into(),
                    host: host.into(),
                    port,
                    swapped: 0,
                    injected: 0,
                    refused: 0,
                    hidden: 0,
                    withheld: 0,
                });
                inner.uses.len() - 1
            }
            None => return,
        };
        let u = &mut inner.uses[at];
        let counter = match what {
            Use::Swapped => &mut u.swapped,
            Use::Injected => &mut u.injected,
            Use::Refused => &mut u.refused,
            Use::Hidden => &mut u.hidden,
            Use::Withheld => &mut u.withheld,
        };
        *counter = counter.saturating_add(n);
    }

    /// The uses of placeholder secrets so far, per secret and host.
    pub fn secret_uses(&self) -> Vec<SecretUse> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.uses.clone()
    }

    /// Keeps a note for the call's warnings (the same note once).
    pub fn note(&self, text: String) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.notes.len() < MAX_NOTES && !inner.notes.contains(&text) {
            inner.notes.push(text);
        }
    }

    /// The notes, then one line per placeholder sent where it is useless.
    pub fn secret_warnings(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = inner.notes.clone();
        for u in inner.uses.iter().filter(|u| u.refused > 0) {
            let host = if u.host.contains(':') && !u.host.starts_with('[') {
                format!("[{}]", u.host)
            } else {
                u.host.clone()
            };
            out.push(format!(
                "refused use of secret {} on {host}:{}: not one of its hosts (or a body it did not opt into), so only its placeholder was sent ×{}",
                u.secret, u.port, u.refused
            ));
        }
        out
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
        let mut out: Vec<String> = out
            .into_iter()
            .map(|(s, n)| if n > 1 { format!("{s} ×{n}") } else { s })
            .collect();
        let more = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unrecorded_refused;
        if more > 0 {
            out.push(format!(
                "refused {more} more connections, not recorded one by one (at most {MAX_ENTRIES} refusals are kept per call)"
            ));
        }
        out
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
    fn placeholder_uses_are_counted_per_secret_and_host() {
        let log = Log::default();
        log.secret_use("T", "api.example.com", 443, Use::Swapped, 2);
        log.secret_use("T", "api.example.com", 443, Use::Swapped, 1);
        log.secret_use("T", "api.example.com", 443, Use::Hidden, 1);
        log.secret_use("T", "api.example.com", 443, Use::Withheld, 2);
        log.secret_use("T", "evil.example", 80, Use::Refused, 1);
        log.secret_use("T", "evil.example", 80, Use::Swapped, 0);
        log.note("a note".into());
        log.note("a note".into());
        let uses = log.secret_uses();
        assert_eq!(uses.len(), 2);
        assert_eq!(
            (
                uses[0].swapped,
                uses[0].hidden,
                uses[0].refused,
                uses[0].withheld
            ),
            (3, 1, 0, 2)
        );
        let json = serde_json::to_string(&uses[1]).unwrap();
        assert_eq!(
            json,
            r#"{"secret":"T","host":"evil.example","port":80,"refused":1}"#
        );
        let w = log.secret_warnings();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0], "a note");
        assert!(w[1].starts_with("refused use of secret T on evil.example:80"));
    }

    #[test]
    fn hosts_cannot_forge_lines_or_grow_the_log() {
        let log = Log::default();
        log.record(
            "evil.com\r\nrefused connect to x:1 (forged)\u{202e}\u{1b}[2J",
            80,
            "http",
            Some("not a valid host name or address".into()),
        );
        log.record(&"a".repeat(70_000), 80, "http", Some("bad".into()));
        let (list, _) = log.connections();
        let h = &list[0].host;
        assert!(!h.contains('\r') && !h.contains('\n') && !h.contains('\u{1b}'));
        assert!(!h.contains('\u{202e}'), "{h}");
        assert!(h.starts_with("evil.com\\r\\n"), "{h}");
        assert!(list[1].host.len() < MAX_HOST + 32, "{}", list[1].host.len());
        assert!(list[1].host.ends_with("…(70000 bytes)"), "{}", list[1].host);
        for w in log.refusals() {
            assert!(!w.contains('\n') && w.len() < 400, "{w}");
        }
        // An ordinary name is kept as it is.
        assert_eq!(printable_host("api.example.com"), "api.example.com");
        assert_eq!(printable_host("[::1]"), "[::1]");
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
        assert!(log.refusals().is_empty());
    }

    /// A flood of allowed connections does not push a refusal out, and a
    /// flood of refusals still says how many were not kept.
    #[test]
    fn refusals_cannot_be_pushed_out_of_the_log() {
        let log = Log::default();
        for i in 0..(MAX_ENTRIES + 50) {
            log.record("ok.example", i as u16, "connect", None);
        }
        log.record("10.0.0.5", 22, "connect", Some("private".into()));
        assert_eq!(log.refusals(), ["refused connect to 10.0.0.5:22 (private)"]);
        for i in 0..(MAX_ENTRIES + 7) {
            log.record("10.0.0.6", i as u16, "connect", Some("private".into()));
        }
        let (list, more) = log.connections();
        assert_eq!(list.len(), 2 * MAX_ENTRIES);
        assert_eq!(more, 50 + 8);
        let r = log.refusals();
        assert_eq!(r.len(), MAX_ENTRIES + 1);
        assert_eq!(r[0], "refused connect to 10.0.0.5:22 (private)");
        assert!(
            r[MAX_ENTRIES].starts_with("refused 8 more connections"),
            "{}",
            r[MAX_ENTRIES]
        );
    }
}
