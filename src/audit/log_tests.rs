//! The writer's tests: heads made before first lines, recovery, torn
//! heads, breaks, group commit, concurrent appends.

use super::*;
use crate::audit::verify::unverifiable;
use crate::audit::{Durable, Who, SIGNAL_DURABLE};

/// `log.append_keyed`, its sync (if durable) waited for.
fn append_now(log: &Log, key: &[u8], event: &Event, durable: bool) {
    if let Some(pending) = log.append_keyed(key, event, durable).unwrap() {
        pending.wait().unwrap();
    }
}

#[test]
fn a_first_line_is_never_written_without_its_head() {
    let dir = tempfile::tempdir().unwrap();
    // The head cannot be made (its directory is a file: as a full
    // state directory, and for root too).
    std::fs::write(dir.path().join("state"), "").unwrap();
    let log = Log {
        path: dir.path().join("tools.log"),
        head: dir.path().join("state/x.head"),
        dir: None,
    };
    let key = vec![7u8; 32];
    for durable in [false, true] {
        let e = log.append_keyed(&key, &call(0), durable).unwrap_err();
        assert!(!e.written(), "{e:?}");
        assert!(matches!(e, AuditError::State(_)), "{e:?}");
        assert_eq!(std::fs::read(&log.path).unwrap(), b"", "nothing written");
    }
    // Made possible again: the first line goes in, and nothing reads
    // as a break or tampering.
    std::fs::remove_file(dir.path().join("state")).unwrap();
    append_now(&log, &key, &call(1), true);
    append_now(&log, &key, &call(2), false);
    let v = verify_with(&log, &key);
    assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
    let text = std::fs::read_to_string(&log.path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains("AUDIT_"), "{text}");
    // A log of other states' lines gets this state's head before its
    // first line too, and its lines are taken in as they are.
    let other = tempfile::tempdir().unwrap();
    let (theirs, _) = log_in(other.path());
    append_now(&theirs, &[8u8; 32], &call(3), false);
    let ours = Log {
        path: theirs.path.clone(),
        head: dir.path().join("state/y.head"),
        dir: None,
    };
    append_now(&ours, &key, &call(4), true);
    let v = verify_with(&ours, &key);
    assert!(v.problems.is_empty(), "{v:?}");
    assert_eq!(v.other_key_lines, vec![1], "{v:?}");
    assert_eq!(ours.read_head().unwrap().unwrap().own, Some(1));
}

#[test]
fn without_a_key_nothing_is_verified_nor_called_edited() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    let started = Event::call_started("t", "c1", "{}", Who::default());
    append_now(&log, &key, &started, true);
    append_now(&log, &key, &call(1), false);
    let bytes = std::fs::read(&log.path).unwrap();
    let v = unverifiable(&bytes, dir.path().into());
    assert!(!v.intact() && !v.tampered(), "{v:?}");
    assert_eq!(v.key_missing, Some(dir.path().join("audit.key")));
    assert_eq!(v.other_key_ids, vec![key_id(&key)]);
    assert_eq!(v.unfinished.len(), 1, "{v:?}");
    assert_eq!(v.valid_lines, 0);
}

#[test]
fn recent_entries_read_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log {
        path: dir.path().join("tools.log"),
        head: dir.path().join("head"),
        dir: None,
    };
    let text: String = (0..1000)
        .map(|i| format!("[t{i:04}] TOOL_EXECUTED name=x n={i:04} mac=ab\n"))
        .collect();
    std::fs::write(&log.path, &text).unwrap();
    let line_len = text.lines().next().unwrap().len() as u64 + 1;
    let recent = log.recent_entries(10 * line_len + 5).unwrap();
    assert_eq!(recent.len(), 10, "{recent:?}");
    assert_eq!(recent.last().unwrap().ts, "t0999");
    assert_eq!(log.recent_entries(1 << 30).unwrap().len(), 1000);
}

/// `call(n)` appended durably, its sync on the syncer thread.
fn in_background(log: &Log, key: &[u8], n: usize) -> std::sync::Arc<Durable> {
    let pending = log.append_keyed(key, &call(n), true).unwrap().unwrap();
    pending.in_background()
}

#[test]
fn a_background_sync_says_when_the_line_is_durable_and_when_it_failed() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    let durable = in_background(&log, &key, 1);
    assert!(durable.wait().is_ok());
    assert!(matches!(durable.decided(), Some(Ok(()))));
    // The line is written before the sync is known: it is in the log.
    let pending = log.append_keyed(&key, &call(2), true).unwrap().unwrap();
    assert!(std::fs::read_to_string(&log.path)
        .unwrap()
        .contains("call=2"));
    // The head gone before its sync: the sync fails, and says so to
    // every asker.
    std::fs::remove_file(&log.head).unwrap();
    let durable = pending.in_background();
    let e = durable.wait().unwrap_err();
    assert!(matches!(*e, AuditError::NotDurable { .. }), "{e:?}");
    assert!(durable.wait().is_err());
    assert!(matches!(durable.decided(), Some(Err(_))));
}

#[test]
fn a_background_sync_signals_its_answer_through_a_pipe() {
    use std::io::Read;
    let byte = |fd: std::os::fd::OwnedFd| {
        let mut b = [9u8];
        std::fs::File::from(fd).read_exact(&mut b).unwrap();
        b[0]
    };
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    // Asked before and after the answer: the same byte.
    let durable = in_background(&log, &key, 1);
    let early = durable.signal(false).unwrap();
    durable.wait().unwrap();
    assert_eq!(byte(early), SIGNAL_DURABLE);
    assert_eq!(byte(durable.signal(false).unwrap()), SIGNAL_DURABLE);
    // A failed sync: another byte, unless the failure is tolerated.
    let pending = log.append_keyed(&key, &call(2), true).unwrap().unwrap();
    std::fs::remove_file(&log.head).unwrap();
    let durable = pending.in_background();
    assert!(durable.wait().is_err());
    assert_ne!(byte(durable.signal(false).unwrap()), SIGNAL_DURABLE);
    assert_eq!(byte(durable.signal(true).unwrap()), SIGNAL_DURABLE);
}

#[test]
fn concurrent_durable_appends_keep_one_intact_chain() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(Log {
        path: dir.path().join("tools.log"),
        head: dir.path().join("head"),
        dir: None,
    });
    let key = vec![7u8; 32];
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (log, key) = (log.clone(), key.clone());
            std::thread::spawn(move || {
                for i in 0..25 {
                    let e = Event {
                        kind: if i % 2 == 0 {
                            "TOOL_STARTED"
                        } else {
                            "TOOL_EXECUTED"
                        },
                        fields: vec![("call", format!("{t}-{i}"))],
                    };
                    append_now(&log, &key, &e, i % 2 == 0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let bytes = std::fs::read(&log.path).unwrap();
    let v = check(
        &key,
        &bytes,
        log.read_head().unwrap().as_ref(),
        dir.path().into(),
    );
    assert!(v.intact(), "{v:?}");
    assert_eq!(String::from_utf8_lossy(&bytes).lines().count(), 200);
    let head = log.read_head().unwrap().unwrap();
    assert_eq!(head.lines, Some(200));
    assert_eq!(head.bytes, Some(bytes.len() as u64));
}

#[test]
fn a_pinned_log_is_reached_whatever_happened_to_its_path() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    std::fs::create_dir_all(root.join(".glee/audit")).unwrap();
    let log = Log {
        path: root.join(".glee/audit/tools.log"),
        head: d.path().join("head"),
        dir: None,
    }
    .pinned();
    let key = vec![7u8; 32];
    append_now(&log, &key, &call(0), false);
    // The path no longer leads there (a tool may take the search bit
    // off the root it may write; moving it away is the same to a
    // path): the next line still lands in the same log.
    std::fs::rename(&root, d.path().join("moved")).unwrap();
    append_now(&log, &key, &call(1), false);
    let text = std::fs::read_to_string(d.path().join("moved/.glee/audit/tools.log")).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!root.exists());
}

/// A log in `dir` and the key its tests sign with.
fn log_in(dir: &Path) -> (Log, Vec<u8>) {
    let log = Log {
        path: dir.join("tools.log"),
        head: dir.join("head"),
        dir: None,
    };
    (log, vec![7u8; 32])
}

fn call(n: usize) -> Event {
    Event {
        kind: "TOOL_EXECUTED",
        fields: vec![("call", n.to_string())],
    }
}

fn verify_with(log: &Log, key: &[u8]) -> Verification {
    let bytes = std::fs::read(&log.path).unwrap_or_default();
    let head = log.read_head().unwrap();
    check(
        key,
        &bytes,
        head.as_ref(),
        log.head.parent().unwrap().into(),
    )
}

/// The head file is in the slot format (both records' magic checked
/// by reading it back as such).
fn slotted(log: &Log) -> bool {
    matches!(
        log.load_head().unwrap().layout,
        Layout::Slots {
            newest: Some(_),
            ..
        }
    )
}

#[test]
fn older_heads_are_read_and_upgraded_on_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    for n in 0..3 {
        append_now(&log, &key, &call(n), n == 0);
    }
    // The JSON object alone, as the glovebox before this format wrote
    // it; then the bare mac of the one before that: each the head as
    // the last append left it, in the old form.
    for json in [true, false] {
        let head = log.read_head().unwrap().unwrap();
        let old = if json {
            head.to_text()
        } else {
            format!("{}\n", head.mac)
        };
        std::fs::write(&log.head, &old).unwrap();
        assert!(!slotted(&log));
        let v = verify_with(&log, &key);
        assert!(v.intact(), "{old}: {v:?}");
        append_now(&log, &key, &call(9), true);
        assert!(slotted(&log), "{old}: upgraded");
        let meta = std::fs::metadata(&log.head).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let v = verify_with(&log, &key);
        assert!(v.intact(), "{old}: {v:?}");
        assert!(!std::fs::read_to_string(&log.path)
            .unwrap()
            .contains("AUDIT_BREAK"));
        let head = log.read_head().unwrap().unwrap();
        assert_eq!(
            head.lines,
            Some(std::fs::read_to_string(&log.path).unwrap().lines().count() as u64)
        );
    }
}

#[test]
fn a_torn_head_write_falls_back_to_the_previous_record() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    for n in 0..5 {
        append_now(&log, &key, &call(n), false);
    }
    // A crash tore the last head write: its slot's record is garbled.
    let Layout::Slots {
        size,
        newest: Some((slot, _)),
    } = log.load_head().unwrap().layout
    else {
        panic!("not slotted");
    };
    let mut bytes = std::fs::read(&log.head).unwrap();
    bytes[(slot * size) as usize + 40] ^= 0x20;
    std::fs::write(&log.head, &bytes).unwrap();
    // The record before it stands: the last line is past the head, and
    // chains, so it is taken in, not a break.
    assert_eq!(log.read_head().unwrap().unwrap().lines, Some(4));
    let v = verify_with(&log, &key);
    assert!(v.intact(), "{v:?}");
    assert_eq!(v.interrupted.len(), 1, "{v:?}");
    append_now(&log, &key, &call(5), true);
    let v = verify_with(&log, &key);
    assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
    assert_eq!(log.read_head().unwrap().unwrap().lines, Some(6));
}

#[test]
fn an_unreadable_head_is_a_break() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    for n in 0..3 {
        append_now(&log, &key, &call(n), false);
    }
    let mut bytes = std::fs::read(&log.head).unwrap();
    let half = bytes.len() / 2;
    bytes[40] ^= 1;
    bytes[half + 40] ^= 1;
    std::fs::write(&log.head, &bytes).unwrap();
    let v = verify_with(&log, &key);
    assert!(!v.intact(), "{v:?}");
    assert!(format!("{v:?}").contains("could not be read"), "{v:?}");
    append_now(&log, &key, &call(3), true);
    assert!(std::fs::read_to_string(&log.path)
        .unwrap()
        .contains("AUDIT_BREAK"));
    let v = verify_with(&log, &key);
    assert!(!v.intact(), "still a break after an append: {v:?}");
}

#[test]
fn a_cut_after_many_appends_is_still_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = log_in(dir.path());
    for n in 0..301 {
        append_now(&log, &key, &call(n), n % 2 == 0);
    }
    assert!(verify_with(&log, &key).intact());
    let text = std::fs::read_to_string(&log.path).unwrap();
    let cut: String = text.lines().take(300).map(|l| format!("{l}\n")).collect();
    std::fs::write(&log.path, cut).unwrap();
    let v = verify_with(&log, &key);
    assert!(!v.intact(), "the last line cut: {v:?}");
    append_now(&log, &key, &call(301), true);
    assert!(std::fs::read_to_string(&log.path)
        .unwrap()
        .contains("AUDIT_BREAK"));
    assert!(!verify_with(&log, &key).intact());
    assert_eq!(log.read_head().unwrap().unwrap().broken.len(), 1);
}

/// Set in the copies of the test binary that
/// `concurrent_appends_from_two_processes_keep_one_intact_chain` starts:
/// the directory of the shared log.
const CHILD_DIR: &str = "GLOVEBOX_TEST_AUDIT_CHILD_DIR";

#[test]
fn concurrent_appends_from_two_processes_keep_one_intact_chain() {
    const PER_PROCESS: usize = 3 * 40;
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        // A child: three threads appending to the shared log.
        let (log, key) = log_in(Path::new(&dir));
        std::thread::scope(|s| {
            for t in 0..3 {
                let (log, key) = (&log, &key);
                s.spawn(move || {
                    for i in 0..PER_PROCESS / 3 {
                        log.append_keyed(key, &call(t * 1000 + i), i % 2 == 0)
                            .unwrap();
                    }
                });
            }
        });
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "audit::log::tests::concurrent_appends_from_two_processes_keep_one_intact_chain",
                    "--test-threads=1",
                ])
                .env(CHILD_DIR, dir.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}{out:?}");
        // The child really ran the test (not filtered out).
        assert!(said.contains("1 passed"), "{said}");
    }
    let (log, key) = log_in(dir.path());
    let v = verify_with(&log, &key);
    assert!(v.intact() && v.interrupted.is_empty(), "{v:?}");
    let text = std::fs::read_to_string(&log.path).unwrap();
    assert_eq!(text.lines().count(), 2 * PER_PROCESS);
    assert!(!text.contains("AUDIT_"), "no break, no repair: {text}");
    let head = log.read_head().unwrap().unwrap();
    assert_eq!(head.lines, Some(2 * PER_PROCESS as u64));
    assert_eq!(head.own, Some(2 * PER_PROCESS as u64));
    assert_eq!(head.bytes, Some(text.len() as u64));
}
