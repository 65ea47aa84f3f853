//! The head of an audit log: where glovebox last left it. It lives in the
//! state directory (out of every jail's and the project's reach); what it
//! says is one JSON object:
//!
//! ```json
//! {"lines": 12, "bytes": 2048, "mac": "…", "own": 10, "broken": [], "acknowledged": null, "log": "/var/lib/glovebox/audit/tools.log"}
//! ```
//!
//! `log` is the path of the log the head describes (a server's
//! `--audit-dir` puts it outside the project): `glovebox audit --verify`
//! of another path says so, and never calls that log cut or advises a
//! reseal for it.
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
//! before it, so any later change to those lines fails again).
//!
//! # On disk: two slots, updated in place
//!
//! The file is two slots of the same size (4 KiB, or a larger power of two
//! once the object outgrows that: the size is the file's length halved,
//! and the file only ever gets its length when it is created whole).
//! Each slot holds one record:
//!
//! ```text
//! "GBHEAD02" | seq: u64 LE | len: u32 LE | JSON text (len bytes) | SHA-256 of everything before it
//! ```
//!
//! A write goes to the slot *not* holding the newest valid record, with
//! the next `seq`, in one `pwrite` at that slot's offset ([`Stored::plan`]);
//! a reader takes the valid record with the highest `seq`
//! ([`Stored::decode`]). A write torn by a crash fails its checksum and
//! leaves the previous record, which is what renaming a new file over the
//! old one gave, without the rename's cost (a new inode per append). Both
//! records invalid (not something a crash leaves: the file is created
//! whole and synced) is an unreadable head, [`Stored::head`] `None`: the
//! caller treats it as a break, never as a clean log.
//!
//! A record that does not fit its slot, a head still in an older format
//! (the JSON object alone, or before it the bare mac of the last line),
//! or no head yet: the file is written whole ([`Plan::Whole`], a new
//! file renamed over the old one) with slots big enough, and the next
//! writes go in place again. Nothing in the object is ever cut to fit.

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
    /// The log this head describes; `None` in a head of an older
    /// glovebox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<std::path::PathBuf>,
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

/// Each record starts with this (the format's version in its last two
/// bytes). No older head starts with it: a JSON object starts with `{`,
/// a bare mac with a hex digit.
const MAGIC: &[u8; 8] = b"GBHEAD02";
/// A slot's size until a record outgrows it: one page.
pub const SLOT: u64 = 4096;
/// Bytes of a record around its text: magic, seq, length, checksum.
const FRAME: usize = 8 + 8 + 4 + 32;

/// A head file as read: what it says, and where the next write goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The newest valid record; `None` when the file is in the slot
    /// format but neither record is valid (an unreadable head).
    pub head: Option<Head>,
    /// How the file is laid out.
    pub layout: Layout,
}

/// How a head file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// No head file.
    Absent,
    /// A head of an older glovebox (the JSON object or a bare mac).
    Text,
    /// Two slots of `size` bytes; `newest` is the slot (0 or 1) holding the
    /// valid record with the highest seq, and that seq.
    Slots {
        /// Bytes per slot.
        size: u64,
        /// The newest valid record's slot and seq.
        newest: Option<(u64, u64)>,
    },
}

/// How to write a head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// One `pwrite` of `bytes` at `offset` of the existing file.
    InPlace {
        /// Where the slot starts.
        offset: u64,
        /// The record.
        bytes: Vec<u8>,
    },
    /// A new file, these bytes, renamed over the old one.
    Whole(Vec<u8>),
}

/// One record: the frame around `text`.
fn record(seq: u64, text: &str) -> Vec<u8> {
    use sha2::Digest;
    let mut r = Vec::with_capacity(FRAME + text.len());
    r.extend_from_slice(MAGIC);
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&(text.len() as u32).to_le_bytes());
    r.extend_from_slice(text.as_bytes());
    let sum = sha2::Sha256::digest(&r);
    r.extend_from_slice(&sum);
    r
}

/// The record in `slot` if it is whole: its seq and head.
fn read_record(slot: &[u8]) -> Option<(u64, Head)> {
    use sha2::Digest;
    if slot.len() < FRAME || &slot[..8] != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(slot[8..16].try_into().ok()?);
    let len = u32::from_le_bytes(slot[16..20].try_into().ok()?) as usize;
    let end = 20usize.checked_add(len)?;
    let sum = slot.get(end..end.checked_add(32)?)?;
    if sha2::Sha256::digest(&slot[..end]).as_slice() != sum {
        return None;
    }
    let head = serde_json::from_slice::<Head>(&slot[20..end]).ok()?;
    Some((seq, head))
}

impl Stored {
    /// No head file.
    pub fn absent() -> Stored {
        Stored {
            head: None,
            layout: Layout::Absent,
        }
    }

    /// Reads the bytes of a head file.
    pub fn decode(bytes: &[u8]) -> Stored {
        let half = bytes.len() / 2;
        // Either slot's magic marks the format: a torn first slot must
        // not make the file read as an older head.
        let slotted = bytes.len() >= 2 * FRAME
            && bytes.len().is_multiple_of(2)
            && (bytes.starts_with(MAGIC) || bytes[half..].starts_with(MAGIC));
        if !slotted {
            return Stored {
                head: Some(Head::parse(&String::from_utf8_lossy(bytes))),
                layout: Layout::Text,
            };
        }
        let size = half as u64;
        let newest = [0u64, 1]
            .into_iter()
            .filter_map(|i| {
                let at = i as usize * half;
                read_record(&bytes[at..at + half]).map(|(seq, h)| (i, seq, h))
            })
            .max_by_key(|(_, seq, _)| *seq);
        match newest {
            Some((slot, seq, head)) => Stored {
                head: Some(head),
                layout: Layout::Slots {
                    size,
                    newest: Some((slot, seq)),
                },
            },
            None => Stored {
                head: None,
                layout: Layout::Slots { size, newest: None },
            },
        }
    }

    /// How to write `head` over this file: in place in the slot not
    /// holding the newest record when it fits, else the file whole.
    pub fn plan(&self, head: &Head) -> Plan {
        let text = head.to_text();
        let need = (FRAME + text.len()) as u64;
        let (size, newest) = match self.layout {
            Layout::Slots { size, newest } => (size, newest),
            Layout::Absent | Layout::Text => (0, None),
        };
        let seq = newest.map_or(1, |(_, seq)| seq.saturating_add(1));
        if need <= size {
            let slot = newest.map_or(0, |(slot, _)| 1 - slot);
            return Plan::InPlace {
                offset: slot * size,
                bytes: record(seq, &text),
            };
        }
        let size = need.next_power_of_two().max(SLOT).max(size);
        let mut whole = record(seq, &text);
        whole.resize(2 * size as usize, 0);
        Plan::Whole(whole)
    }
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
