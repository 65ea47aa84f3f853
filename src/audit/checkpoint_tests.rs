//! The checkpoints' tests: a cut, two lines swapped, one edited, a
//! missing tail, a forged checkpoint are each found.

#![allow(clippy::unwrap_used)]

use super::super::export::{Exporter, Sink};
use super::*;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Two replicas' streams, merged line by line as a collector would.
fn two_streams(key: &SigningKey) -> Vec<String> {
    let mut all = Vec::new();
    // web-1's final checkpoint falls on the line of a periodic one.
    for (r, n) in [("web-0", 10), ("web-1", 8)] {
        let buf = Buf::default();
        let e = Exporter::new(r, Sink::Writer(Box::new(buf.clone())), Some(key.clone()), 4);
        for i in 0..n {
            e.lines(&format!("[t] TOOL_EXECUTED n={i} replica={r} mac=x\n"));
        }
        e.finish();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        all.push(text.lines().map(String::from).collect::<Vec<_>>());
    }
    let (a, b) = (&all[0], &all[1]);
    let mut merged = Vec::new();
    for i in 0..a.len().max(b.len()) {
        merged.extend(a.get(i).cloned());
        merged.extend(b.get(i).cloned());
    }
    merged
}

fn keys() -> (SigningKey, VerifyingKey) {
    let k = SigningKey::from_bytes(&[7u8; 32]);
    let v = k.verifying_key();
    (k, v)
}

fn check(records: &[String], v: &VerifyingKey) -> Vec<StreamReport> {
    let (r, stray) = verify(records.iter().map(String::as_str), v);
    assert!(stray.is_empty(), "{stray:?}");
    r
}

#[test]
fn intact_streams_of_several_replicas_verify_in_any_merge_order() {
    let (k, v) = keys();
    let mut records = two_streams(&k);
    let r = check(&records, &v);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(StreamReport::intact), "{r:?}");
    assert_eq!(
        r.iter()
            .map(|s| (s.lines, s.checkpoints))
            .collect::<Vec<_>>(),
        [(10, 3), (8, 3)]
    );
    records.reverse(); // a collector's order is not the stream's
    assert!(check(&records, &v).iter().all(StreamReport::intact));
}

fn line_index(records: &[String], replica: &str, seq: u64) -> usize {
    records
        .iter()
        .position(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["replica"] == replica && v["seq"] == seq && v.get("line").is_some()
        })
        .unwrap()
}

#[test]
fn a_cut_a_reorder_an_edit_and_a_missing_tail_are_each_found() {
    let (k, v) = keys();
    let good = two_streams(&k);
    let broken = |r: &[StreamReport], want: &str| {
        let web0 = r.iter().find(|s| s.replica == "web-0").unwrap();
        let web1 = r.iter().find(|s| s.replica == "web-1").unwrap();
        assert!(web1.intact(), "the other replica stays intact: {web1:?}");
        assert!(!web0.intact(), "{want}: not detected");
        assert!(
            web0.problems.iter().any(|p| p.contains(want)),
            "{want}: {:?}",
            web0.problems
        );
    };

    // A cut: line 3 of web-0 removed.
    let mut cut = good.clone();
    cut.remove(line_index(&cut, "web-0", 3));
    broken(&check(&cut, &v), "missing (cut)");

    // A reorder: lines 2 and 3 swap their content (seq kept).
    let mut swapped = good.clone();
    let (i, j) = (line_index(&good, "web-0", 2), line_index(&good, "web-0", 3));
    let li: Value = serde_json::from_str(&good[i]).unwrap();
    let lj: Value = serde_json::from_str(&good[j]).unwrap();
    let mut ni = li.clone();
    ni["line"] = lj["line"].clone();
    let mut nj = lj.clone();
    nj["line"] = li["line"].clone();
    swapped[i] = ni.to_string();
    swapped[j] = nj.to_string();
    broken(&check(&swapped, &v), "do not match what was signed");

    // An edit of one line.
    let mut edited = good.clone();
    let e = line_index(&good, "web-0", 5);
    edited[e] = edited[e].replace("n=4", "n=99");
    assert_ne!(edited[e], good[e]);
    broken(&check(&edited, &v), "do not match what was signed");

    // A missing tail: everything of web-0 past line 9 (line 10 and the
    // final checkpoint): not intact, reported as an unsealed tail past
    // the checkpoint at line 8 (what a kill leaves too).
    let tail: Vec<String> = good
        .iter()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            !(v["replica"] == "web-0" && v["seq"].as_u64().unwrap() > 9)
        })
        .cloned()
        .collect();
    let r = check(&tail, &v);
    let web0 = r.iter().find(|s| s.replica == "web-0").unwrap();
    assert!(!web0.intact() && web0.intact_to_checkpoint(), "{web0:?}");
    assert_eq!((web0.verified_to, web0.unsealed), (8, 1), "{web0:?}");

    // A forged checkpoint (another key) does not count.
    let other = SigningKey::from_bytes(&[9u8; 32]);
    let forged = two_streams(&other);
    let r = check(&forged, &v);
    assert!(r.iter().all(|s| !s.intact()));
    assert!(r[0].problems.iter().any(|p| p.contains("does not verify")));
}

/// The exported record is the signed unit: a refusal relabelled as a
/// success (its `line` untouched), a field added, the fields reordered,
/// a checkpoint given another key id — each makes its stream not intact;
/// on main only `line` was checked, and the relabelled record verified.
#[test]
fn a_record_relabelled_extended_or_reordered_is_refused() {
    let (k, v) = keys();
    let buf = Buf::default();
    let e = Exporter::new("web-0", Sink::Writer(Box::new(buf.clone())), Some(k), 2);
    e.lines("[t] TOOL_DENIED name=x reason=approval_required caller=http key_id=k mac=m\n");
    e.lines("[t] TOOL_EXECUTED name=y status=success caller=http key_id=k mac=m\n");
    e.finish();
    let good: Vec<String> = String::from_utf8(buf.0.lock().unwrap().clone())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(
        check(&good, &v).iter().all(StreamReport::intact),
        "the probe: intact as written"
    );
    let denied = line_index(&good, "web-0", 1);
    let record: Value = serde_json::from_str(&good[denied]).unwrap();
    assert_eq!(record["event"], "TOOL_DENIED");

    let mut relabelled = record.clone();
    relabelled["event"] = json!("TOOL_EXECUTED");
    relabelled["status"] = json!("success");
    let mut added = record.clone();
    added["admin"] = json!(true);
    let mut reordered = serde_json::Map::new();
    for key in ["line", "event", "seq", "stream", "replica"] {
        reordered.insert(key.to_string(), record[key].clone());
    }
    let spaced = good[denied].replace("\",\"", "\", \"");
    let edits = [
        ("relabelled", relabelled.to_string()),
        ("added", added.to_string()),
        ("reordered", Value::Object(reordered).to_string()),
        ("re-serialised", spaced),
    ];
    for (what, text) in edits {
        assert_ne!(text, good[denied], "{what}");
        let mut edited = good.clone();
        edited[denied] = text;
        let r = check(&edited, &v);
        assert!(!r[0].intact(), "{what}: verified: {r:?}");
        assert!(
            r[0].problems
                .iter()
                .any(|p| p.contains("is not the record glovebox exported")),
            "{what}: {:?}",
            r[0].problems
        );
    }

    let cp = good
        .iter()
        .position(|l| l.contains("\"checkpoint\""))
        .unwrap();
    let mut other_id = good.clone();
    let mut c: Value = serde_json::from_str(&good[cp]).unwrap();
    c["key_id"] = json!("someone-else");
    other_id[cp] = c.to_string();
    assert!(
        !check(&other_id, &v)[0].intact(),
        "a checkpoint's key_id changed"
    );
}

/// A replica killed mid-stream (no final checkpoint): its stream verifies
/// up to its last checkpoint and the lines after it are its unsealed
/// tail, not a problem; a line cut inside that tail still is one.
#[test]
fn a_killed_stream_verifies_to_its_last_checkpoint() {
    let (k, v) = keys();
    let buf = Buf::default();
    let e = Exporter::new("web-0", Sink::Writer(Box::new(buf.clone())), Some(k), 4);
    for i in 0..10 {
        e.lines(&format!("[t] TOOL_EXECUTED n={i} replica=web-0 mac=x\n"));
    }
    // No e.finish(): killed.
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let records: Vec<String> = text.lines().map(String::from).collect();
    let r = check(&records, &v);
    assert_eq!(r.len(), 1);
    let s = &r[0];
    assert!(s.problems.is_empty(), "{s:?}");
    assert!(!s.sealed && !s.intact() && s.intact_to_checkpoint());
    assert_eq!(
        (s.lines, s.verified_to, s.unsealed, s.checkpoints),
        (10, 8, 2, 2)
    );
    // A line of the tail cut: a problem, not a kill.
    let mut cut = records.clone();
    cut.remove(line_index(&cut, "web-0", 9));
    let r = check(&cut, &v);
    assert!(!r[0].intact_to_checkpoint(), "{:?}", r[0]);
    // A line before the checkpoint edited: a problem too.
    let mut edited = records.clone();
    let i = line_index(&edited, "web-0", 2);
    edited[i] = edited[i].replace("n=1", "n=77");
    let r = check(&edited, &v);
    assert!(!r[0].intact_to_checkpoint(), "{:?}", r[0]);
}
