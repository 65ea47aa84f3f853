//! The head's tests: a write torn at every byte or garbled leaves the
//! previous record, both slots bad is unreadable, old heads upgraded, a
//! head outgrowing its slot keeps every break.

#![allow(clippy::unwrap_used)]

use super::*;

fn head(n: u64) -> Head {
    Head {
        lines: Some(n),
        bytes: Some(100 * n),
        mac: format!("{n:064x}"),
        own: Some(n),
        broken: Vec::new(),
        acknowledged: None,
        log: None,
    }
}

/// Applies `plan` to `file` as the writer does.
fn apply(file: &mut Vec<u8>, plan: Plan) {
    match plan {
        Plan::InPlace { offset, bytes } => {
            let at = offset as usize;
            file[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        Plan::Whole(bytes) => *file = bytes,
    }
}

#[test]
fn writes_alternate_slots_and_the_newest_wins() {
    let mut file = Vec::new();
    apply(&mut file, Stored::absent().plan(&head(1)));
    assert_eq!(file.len() as u64, 2 * SLOT);
    for n in 2..6 {
        let stored = Stored::decode(&file);
        assert_eq!(stored.head, Some(head(n - 1)));
        let plan = stored.plan(&head(n));
        let Plan::InPlace { offset, .. } = &plan else {
            panic!("not in place: {plan:?}");
        };
        // Never the slot holding the newest record.
        assert_eq!(*offset, if n % 2 == 0 { SLOT } else { 0 }, "{n}");
        apply(&mut file, plan);
    }
    assert_eq!(Stored::decode(&file).head, Some(head(5)));
}

#[test]
fn a_torn_write_leaves_the_previous_head() {
    let mut file = Vec::new();
    apply(&mut file, Stored::absent().plan(&head(1)));
    let plan = Stored::decode(&file).plan(&head(2));
    apply(&mut file, plan);
    let good = file.clone();
    // The third write goes to slot 0; a crash leaves only part of it
    // (at every length: magic only, seq, part of the text, all but the
    // checksum's last byte), or garbles one byte of it.
    let Plan::InPlace { offset, bytes } = Stored::decode(&file).plan(&head(3)) else {
        panic!("not in place");
    };
    assert_eq!(offset, 0);
    for cut in 1..bytes.len() {
        let mut torn = good.clone();
        torn[..cut].copy_from_slice(&bytes[..cut]);
        let stored = Stored::decode(&torn);
        assert_eq!(stored.head, Some(head(2)), "cut at {cut}");
        // The next write goes to the torn slot again, not over the
        // good one.
        let Plan::InPlace { offset, .. } = stored.plan(&head(3)) else {
            panic!("not in place");
        };
        assert_eq!(offset, 0, "cut at {cut}");
    }
    for flip in [0, 9, 17, 30, bytes.len() - 1] {
        let mut torn = good.clone();
        torn[..bytes.len()].copy_from_slice(&bytes);
        torn[flip] ^= 0x40;
        assert_eq!(Stored::decode(&torn).head, Some(head(2)), "flip {flip}");
    }
    // The second slot torn instead: the first one's record stands.
    let mut torn = good.clone();
    torn[SLOT as usize + 20] ^= 1;
    assert_eq!(Stored::decode(&torn).head, Some(head(1)));
}

#[test]
fn both_slots_invalid_is_an_unreadable_head() {
    let mut file = Vec::new();
    apply(&mut file, Stored::absent().plan(&head(1)));
    let plan = Stored::decode(&file).plan(&head(2));
    apply(&mut file, plan);
    file[30] ^= 1;
    file[SLOT as usize + 30] ^= 1;
    let stored = Stored::decode(&file);
    assert_eq!(stored.head, None);
    assert_eq!(
        stored.layout,
        Layout::Slots {
            size: SLOT,
            newest: None
        }
    );
    // An empty, zeroed or garbled file in no known format reads as an
    // older head whose mac matches no log: a break, never a clean log.
    for garbage in [&b""[..], &[0; 2 * SLOT as usize], b"GBHEAD02"] {
        let stored = Stored::decode(garbage);
        assert_eq!(stored.layout, Layout::Text);
        assert_eq!(stored.head.unwrap().lines, None);
    }
}

#[test]
fn older_heads_are_read_and_rewritten_whole() {
    for (text, want) in [
        (head(7).to_text(), head(7)),
        (
            "abcdef\n".to_string(),
            Head {
                mac: "abcdef".into(),
                ..Head::default()
            },
        ),
    ] {
        let stored = Stored::decode(text.as_bytes());
        assert_eq!(stored.layout, Layout::Text);
        assert_eq!(stored.head.as_ref(), Some(&want));
        let Plan::Whole(file) = stored.plan(&head(8)) else {
            panic!("an older head is upgraded by a whole new file");
        };
        assert_eq!(Stored::decode(&file).head, Some(head(8)));
    }
}

#[test]
fn a_head_that_outgrows_its_slot_keeps_every_break() {
    let mut file = Vec::new();
    let mut h = head(1);
    apply(&mut file, Stored::absent().plan(&h));
    let mut wholes = 0;
    for n in 0..200 {
        h.broken.push(format!(
            "2026-11-23T00:00:00Z: break {n}: the log is shorter than glovebox left it (lines were removed from its end)"
        ));
        let plan = Stored::decode(&file).plan(&h);
        if matches!(plan, Plan::Whole(_)) {
            wholes += 1;
        }
        apply(&mut file, plan);
        assert_eq!(Stored::decode(&file).head.as_ref(), Some(&h), "{n}");
    }
    assert!(file.len() as u64 > 2 * SLOT);
    assert_eq!(Stored::decode(&file).head.unwrap().broken.len(), 200);
    // Slots double: a few whole rewrites, not one per append.
    assert!(wholes <= 4, "{wholes} whole rewrites");
}

#[test]
fn heads_round_trip_and_read_old_ones() {
    let h = Head {
        lines: Some(3),
        bytes: Some(300),
        mac: "ab".into(),
        own: Some(2),
        broken: vec!["x".into()],
        acknowledged: None,
        log: Some("/var/lib/glovebox/audit/tools.log".into()),
    };
    assert_eq!(Head::parse(&h.to_text()), h);
    let old = Head::parse("abcdef\n");
    assert_eq!(old.mac, "abcdef");
    assert_eq!(old.lines, None);
}
