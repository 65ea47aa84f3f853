//! Signed checkpoints over exported audit streams ([`super::export`]),
//! and their verification across replicas.
//!
//! Each stream (one replica's process) keeps a running SHA-256 chain over
//! its exported lines, seeded with its replica id and stream id. A
//! checkpoint signs (Ed25519) the replica, the stream, how many lines it
//! covers, the chain at that line and whether it is the final one
//! (written at shutdown). [`verify`] takes the records of any number of
//! streams, in any order a collector merged them, and for each stream
//! requires lines `1..=N` each once, the chain to match every checkpoint,
//! every signature to verify, and the last line to be covered by a final
//! checkpoint. So a line cut out, edited or moved breaks the chain at the
//! next checkpoint, and a missing tail (lines or the final checkpoint
//! gone) is reported as such. The record around a line is signed with
//! it: each of its fields is derived from what the chain covers, and
//! [`verify`] recomputes the record and requires the same text, so a
//! record relabelled (`"event":"TOOL_EXECUTED"` on a refusal), given a
//! field or reordered is refused too. A stream dropped whole is not detectable
//! from the others: count the replicas you expect.
//!
//! A replica killed (SIGKILL, an OOM kill, a node lost) writes no final
//! checkpoint: its stream verifies up to its last checkpoint, and the
//! lines after it are its *unsealed tail* ([`StreamReport::unsealed`]),
//! reported apart from problems — nothing vouches for them, and a tail
//! cut by someone looks the same, but nothing before it was touched.

use std::collections::BTreeMap;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::signing;

/// The running chain of one stream.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Lines pushed so far.
    pub lines: u64,
    hash: [u8; 32],
}

impl Chain {
    /// The chain of a new stream.
    pub fn start(replica: &str, stream: &str) -> Chain {
        let mut h = Sha256::new();
        h.update(b"glovebox audit export v1\n");
        h.update(replica.as_bytes());
        h.update(b"\n");
        h.update(stream.as_bytes());
        Chain {
            lines: 0,
            hash: h.finalize().into(),
        }
    }

    /// Takes in the next line.
    pub fn push(&mut self, line: &str) {
        let mut h = Sha256::new();
        h.update(self.hash);
        h.update(line.as_bytes());
        self.hash = h.finalize().into();
        self.lines += 1;
    }

    /// The chain's value, in hex.
    pub fn value(&self) -> String {
        hex::encode(self.hash)
    }
}

fn message(replica: &str, stream: &str, lines: u64, chain: &str, last: bool, at: &str) -> Vec<u8> {
    format!(
        "glovebox audit checkpoint v1\nreplica={replica}\nstream={stream}\nlines={lines}\nchain={chain}\nfinal={last}\nat={at}\n"
    )
    .into_bytes()
}

/// A checkpoint record of `chain`, signed with `key`.
pub fn signed(key: &SigningKey, replica: &str, stream: &str, chain: &Chain, last: bool) -> Value {
    let at = super::now();
    let value = chain.value();
    let sig = signing::sign(
        key,
        &message(replica, stream, chain.lines, &value, last, &at),
    );
    let key_id = signing::key_id(&key.verifying_key());
    checkpoint_record(
        replica,
        stream,
        chain.lines,
        &value,
        last,
        &at,
        &key_id,
        &sig,
    )
}

/// A checkpoint record: what [`signed`] exports and [`verify`]
/// recomputes from the signed values, the verifying key's id and the
/// signature.
#[allow(clippy::too_many_arguments)]
fn checkpoint_record(
    replica: &str,
    stream: &str,
    lines: u64,
    chain: &str,
    last: bool,
    at: &str,
    key_id: &str,
    sig: &str,
) -> Value {
    json!({
        "replica": replica,
        "stream": stream,
        "seq": lines,
        "checkpoint": {"lines": lines, "chain": chain, "final": last, "at": at},
        "key_id": key_id,
        "sig": sig,
    })
}

/// The exported record of line `seq` of a stream, exactly as the
/// exporter writes it (one JSON object, no newline): every field is
/// derived from what the chain and the checkpoints sign (the replica and
/// the stream seed the chain, `seq` is the line's place in it, `event`
/// is the line's own), so [`verify`] recomputes the record whole and
/// refuses one whose text differs in any way.
pub fn line_record(replica: &str, stream: &str, seq: u64, line: &str) -> String {
    json!({
        "replica": replica,
        "stream": stream,
        "seq": seq,
        "event": event_of(line),
        "line": line,
    })
    .to_string()
}

/// The event a log line records (`[time] EVENT …`).
fn event_of(line: &str) -> &str {
    line.split_once("] ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .unwrap_or("")
}

/// What verifying one stream found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StreamReport {
    /// The replica's id.
    pub replica: String,
    /// The stream (one start of the replica).
    pub stream: String,
    /// Lines seen.
    pub lines: u64,
    /// Checkpoints that verified.
    pub checkpoints: u64,
    /// Whether a verified final checkpoint covers the last line.
    pub sealed: bool,
    /// The last line a verified checkpoint covers.
    pub verified_to: u64,
    /// With no final checkpoint (a replica killed, or a tail cut): the
    /// lines after the last verified checkpoint, which nothing vouches
    /// for (0 when the stream ends on a checkpoint, or is sealed).
    pub unsealed: u64,
    /// What is wrong, one line each.
    pub problems: Vec<String>,
}

impl StreamReport {
    /// Nothing wrong, and sealed.
    pub fn intact(&self) -> bool {
        self.problems.is_empty() && self.sealed
    }

    /// Nothing wrong up to its last checkpoint, and no final checkpoint:
    /// what a killed replica leaves ([`StreamReport::unsealed`] lines
    /// after it).
    pub fn intact_to_checkpoint(&self) -> bool {
        self.problems.is_empty() && !self.sealed
    }
}

#[derive(Default)]
struct Collected {
    lines: BTreeMap<u64, Vec<String>>,
    checkpoints: Vec<(u64, Value)>,
    /// Records whose text is not the one exported.
    altered: Vec<String>,
}

/// Verifies exported records (one JSON object each, as
/// [`super::export`] writes them; other lines are counted as problems of
/// no stream) with the checkpoint key `key`. Returns a report per stream
/// and the problems of records that belong to none.
///
/// A record is verified whole: its text must be exactly the one
/// recomputed from what is signed ([`line_record`]; a checkpoint's from
/// its signed values, `key`'s id and its signature), so a field altered
/// (`"event"` relabelled), added, removed or moved makes its stream not
/// intact even where the line it carries is.
pub fn verify<'a>(
    records: impl IntoIterator<Item = &'a str>,
    key: &VerifyingKey,
) -> (Vec<StreamReport>, Vec<String>) {
    let mut streams: BTreeMap<(String, String), Collected> = BTreeMap::new();
    let mut stray = Vec::new();
    for (i, raw) in records.into_iter().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(raw) else {
            stray.push(format!("record {}: not JSON", i + 1));
            continue;
        };
        let (Some(replica), Some(stream), Some(seq)) = (
            v["replica"].as_str(),
            v["stream"].as_str(),
            v["seq"].as_u64(),
        ) else {
            stray.push(format!("record {}: not an exported audit record", i + 1));
            continue;
        };
        let c = streams
            .entry((replica.to_string(), stream.to_string()))
            .or_default();
        let exported = if v.get("checkpoint").is_some() {
            let cp = &v["checkpoint"];
            let again = checkpoint_record(
                replica,
                stream,
                seq,
                cp["chain"].as_str().unwrap_or_default(),
                cp["final"].as_bool().unwrap_or_default(),
                cp["at"].as_str().unwrap_or_default(),
                &signing::key_id(key),
                v["sig"].as_str().unwrap_or_default(),
            );
            // Compared as text: `Value == str` would compare a string value.
            let same = serde_json::to_string(&again).is_ok_and(|t| t == raw);
            c.checkpoints.push((seq, v.clone()));
            same
        } else if let Some(line) = v["line"].as_str() {
            c.lines.entry(seq).or_default().push(line.to_string());
            line_record(replica, stream, seq, line) == raw
        } else {
            stray.push(format!("record {}: neither a line nor a checkpoint", i + 1));
            continue;
        };
        if !exported {
            c.altered.push(format!(
                "record {} (seq {seq}) is not the record glovebox exported: a field was altered, added, removed or reordered (records are verified whole, as written)",
                i + 1
            ));
        }
    }
    let reports = streams
        .into_iter()
        .map(|((replica, stream), c)| verify_stream(&replica, &stream, c, key))
        .collect();
    (reports, stray)
}

fn verify_stream(replica: &str, stream: &str, c: Collected, key: &VerifyingKey) -> StreamReport {
    let mut problems = c.altered;
    let last = c.lines.keys().next_back().copied().unwrap_or(0);
    // Each line once, 1..=last.
    let mut missing = Vec::new();
    for seq in 1..=last {
        match c.lines.get(&seq).map(Vec::as_slice) {
            None => missing.push(seq),
            Some([_]) => {}
            Some(_) => problems.push(format!(
                "line {seq} appears more than once with different content"
            )),
        }
    }
    if !missing.is_empty() {
        problems.push(format!(
            "{} line(s) missing (cut): {}",
            missing.len(),
            missing
                .iter()
                .take(20)
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // The chain at each line.
    let mut chain = Chain::start(replica, stream);
    let mut at = BTreeMap::new();
    at.insert(0, chain.value());
    for seq in 1..=last {
        if let Some([line]) = c.lines.get(&seq).map(Vec::as_slice) {
            chain.push(line);
        } else {
            chain.push("");
        }
        at.insert(seq, chain.value());
    }
    let mut checkpoints = 0;
    let mut sealed_at = None;
    let mut verified_to = 0;
    let mut seen = std::collections::BTreeSet::new();
    for (seq, v) in &c.checkpoints {
        let cp = &v["checkpoint"];
        let (Some(lines), Some(value), Some(is_final), Some(when), Some(sig)) = (
            cp["lines"].as_u64(),
            cp["chain"].as_str(),
            cp["final"].as_bool(),
            cp["at"].as_str(),
            v["sig"].as_str(),
        ) else {
            problems.push(format!("checkpoint at line {seq} is malformed"));
            continue;
        };
        if !signing::verify(
            key,
            &message(replica, stream, lines, value, is_final, when),
            sig,
        ) {
            problems.push(format!(
                "checkpoint at line {seq}: its signature does not verify with the checkpoint key {} (forged or edited)",
                signing::key_id(key)
            ));
            continue;
        }
        if lines != *seq {
            problems.push(format!(
                "checkpoint at line {seq} says it covers {lines} line(s)"
            ));
            continue;
        }
        // A final checkpoint may fall on the line of a periodic one.
        if !seen.insert((lines, is_final)) {
            continue;
        }
        match at.get(&lines) {
            None => problems.push(format!(
                "checkpoint at line {lines}: the stream ends at line {last} (its tail is missing)"
            )),
            Some(mine) if mine != value => problems.push(format!(
                "checkpoint at line {lines}: the lines up to it do not match what was signed (a line was cut, edited or reordered before it)"
            )),
            Some(_) => {
                checkpoints += 1;
                verified_to = verified_to.max(lines);
                if is_final {
                    sealed_at = Some(lines);
                }
            }
        }
    }
    let sealed = sealed_at == Some(last);
    // No final checkpoint: the tail past the last verified one is
    // unsealed (reported apart, not as a problem).
    let mut unsealed = 0;
    if let Some(s) = sealed_at {
        if s < last {
            problems.push(format!(
                "{} line(s) follow the final checkpoint at line {s}",
                last - s
            ));
        }
    } else {
        unsealed = last.saturating_sub(verified_to);
    }
    StreamReport {
        replica: replica.to_string(),
        stream: stream.to_string(),
        lines: last,
        checkpoints,
        sealed,
        verified_to,
        unsealed,
        problems,
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
