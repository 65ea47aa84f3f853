//! The head of an audit log: where glovebox last left it. It lives in the
//! state directory (out of every jail's and the project's reach) as one
//! JSON object:
//!
//! ```json
//! {"lines": 12, "bytes": 2048, "mac": "…", "own": 10, "broken": [], "acknowledged": null}
//! ```
//!
//! `lines` and `bytes` say how long the log was after the last write and
//! `mac` what its last line's mac was. A log shorter than that, or whose
//! line ending at `bytes` does not carry `mac`, was cut, emptied, deleted
//! or replaced. `own` counts the lines up to `bytes` this state's key
//! signed (the others came from gloveboxes with another state
//! directory): fewer of them than that means lines of this key were made
//! to claim another key's id, an edit that must not pass for a foreign
//! line. `broken` holds every such break an append found (the
//! append records it in the log as an `AUDIT_BREAK` event too); `--verify`
//! fails while it is not empty, until a person runs `glovebox audit
//! --reseal`, which clears it and acknowledges the damage then present
//! (`acknowledged`: the line of the reseal and a digest of the problems
//! before it, so any later change to those lines fails again). A head
//! written by an older glovebox holds just the mac.

use serde::{Deserialize, Serialize};

/// Damage a person acknowledged with `glovebox audit --reseal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledged {
    /// The 1-based line of the `AUDIT_RESEALED` event.
    pub line: u64,
    /// SHA-256 of the problems found before that line, one per line.
    pub digest: String,
    /// How many problems that was.
    pub count: usize,
}

/// The head of one log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Head {
    /// Complete lines in the log; `None` in a head of an older glovebox.
    #[serde(default)]
    pub lines: Option<u64>,
    /// Bytes in the log; `None` in a head of an older glovebox.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// The mac of the last line (empty for an empty log).
    pub mac: String,
    /// Lines up to `bytes` signed with this state's key; `None` in a head
    /// of an older glovebox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<u64>,
    /// Breaks of continuity found by appends, not yet resealed.
    #[serde(default)]
    pub broken: Vec<String>,
    /// The damage the last reseal acknowledged.
    #[serde(default)]
    pub acknowledged: Option<Acknowledged>,
}

impl Head {
    /// Reads a head: the JSON object, or an older glovebox's bare mac.
    pub fn parse(text: &str) -> Head {
        match serde_json::from_str::<Head>(text) {
            Ok(h) => h,
            Err(_) => Head {
                mac: text.trim().to_string(),
                ..Head::default()
            },
        }
    }

    /// The head as written to disk.
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn heads_round_trip_and_read_old_ones() {
        let h = Head {
            lines: Some(3),
            bytes: Some(300),
            mac: "ab".into(),
            own: Some(2),
            broken: vec!["x".into()],
            acknowledged: None,
        };
        assert_eq!(Head::parse(&h.to_text()), h);
        let old = Head::parse("abcdef\n");
        assert_eq!(old.mac, "abcdef");
        assert_eq!(old.lines, None);
    }
}
