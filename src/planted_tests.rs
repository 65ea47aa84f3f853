#![allow(clippy::unwrap_used)]

use super::*;
use std::os::unix::fs::symlink;

#[test]
fn removal_never_follows_a_link_and_verifies_the_name_is_gone() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let outside = root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("keep"), "k").unwrap();
    let proj = root.join("proj");
    fs::create_dir_all(proj.join(".git/hooks")).unwrap();
    fs::write(proj.join(".git/hooks/pre-commit"), "x").unwrap();
    symlink(&outside, proj.join(".git/link")).unwrap();
    symlink(&outside, proj.join("tools.json")).unwrap();
    let names = [
        proj.join(".git"),
        proj.join("tools.json"),
        proj.join(".glee"),
    ];
    let undone = undo(&names);
    assert!(undone.left.is_empty(), "{undone:?}");
    assert_eq!(undone.removed, [proj.join(".git"), proj.join("tools.json")]);
    assert!(!proj.join(".git").exists() && proj.join("tools.json").symlink_metadata().is_err());
    assert_eq!(fs::read_to_string(outside.join("keep")).unwrap(), "k");
}

#[test]
fn a_directory_the_tool_closed_is_opened_again_and_its_mode_put_back() {
    if unistd::geteuid().is_root() {
        // Root needs no bits; the same path is taken without the chmod.
        eprintln!("as root: mode bits do not stop the removal");
    }
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    fs::create_dir_all(proj.join("tools.json/a/b")).unwrap();
    fs::write(proj.join("tools.json/a/b/f"), "x").unwrap();
    fs::set_permissions(proj.join("tools.json/a"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(&proj, fs::Permissions::from_mode(0o555)).unwrap();
    let undone = undo(&[proj.join("tools.json")]);
    assert!(undone.left.is_empty(), "{undone:?}");
    let mode = fs::metadata(&proj).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o555, "the tool's mode is put back");
    fs::set_permissions(&proj, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(proj.join("tools.json").symlink_metadata().is_err());
    // A closed project root (chmod 000) too.
    fs::write(proj.join("tools.json"), "[]").unwrap();
    fs::set_permissions(&proj, fs::Permissions::from_mode(0o000)).unwrap();
    let undone = undo(&[proj.join("tools.json")]);
    fs::set_permissions(&proj, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(undone.left.is_empty(), "{undone:?}");
    assert!(proj.join("tools.json").symlink_metadata().is_err());
}

#[test]
fn a_tree_deeper_than_the_bound_is_left_and_reported() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    let mut deep = proj.join(".git");
    for _ in 0..MAX_DEPTH + 2 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    let undone = undo(&[proj.join(".git")]);
    assert!(undone.removed.is_empty());
    assert_eq!(undone.left.len(), 1, "{undone:?}");
    assert!(undone.left[0].1.contains("deeper"), "{undone:?}");
    assert!(proj.join(".git").exists());
}

#[test]
fn live_records_hide_their_names_and_dead_ones_are_finished() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    let dir = t.path().join("state");
    fs::create_dir_all(&proj).unwrap();
    fs::create_dir_all(&dir).unwrap();
    assert!(view(&proj, &t.path().join("none"))
        .unwrap()
        .hidden
        .is_empty());
    let live = Record {
        root: proj.clone(),
        pid: std::process::id(),
        start: own_start(),
        names: vec![proj.join("tools.json")],
    };
    fs::write(dir.join("call-1.json"), serde_json::to_vec(&live).unwrap()).unwrap();
    assert_eq!(view(&proj, &dir).unwrap().hidden, [proj.join("tools.json")]);
    // The same pid with another start time is a dead call: finished.
    let dead = Record {
        start: own_start() + 1,
        names: vec![proj.join(".git")],
        ..live.clone()
    };
    fs::create_dir_all(proj.join(".git/hooks")).unwrap();
    fs::write(dir.join("call-2.json"), serde_json::to_vec(&dead).unwrap()).unwrap();
    let v = view(&proj, &dir).unwrap();
    assert_eq!(v.hidden, [proj.join("tools.json")]);
    assert!(
        !proj.join(".git").exists(),
        "the dead call's plant is removed"
    );
    assert!(!dir.join("call-2.json").exists());
    // One that cannot be removed taints the project.
    let mut deep = proj.join(".git");
    for _ in 0..MAX_DEPTH + 2 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(dir.join("call-3.json"), serde_json::to_vec(&dead).unwrap()).unwrap();
    let e = view(&proj, &dir).unwrap_err();
    assert!(
        matches!(&e, PlantedError::Tainted { files, .. } if files == &[proj.join(".git")]),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains(".git") && text.contains("glovebox untaint"),
        "{text}"
    );
    assert!(view(&proj, &dir).is_err(), "still tainted");
}

#[test]
fn a_load_that_raced_a_new_record_loads_again_and_sees_it() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    let dir = t.path().join("state");
    fs::create_dir_all(&proj).unwrap();
    fs::create_dir_all(&dir).unwrap();
    let record = Record {
        root: proj.clone(),
        pid: std::process::id(),
        start: own_start(),
        names: vec![proj.join("tools.json")],
    };
    // The first load runs while a call records itself (the record, then
    // the number, as `Watch::begin` writes them).
    let mut loads = Vec::new();
    let out = guarded_in(&dir, &proj, |hidden| {
        if loads.is_empty() {
            fs::write(
                dir.join("call-1.json"),
                serde_json::to_vec(&record).unwrap(),
            )
            .unwrap();
            fs::write(dir.join(SEQ), "1").unwrap();
        }
        loads.push(hidden.to_vec());
        hidden.len()
    })
    .unwrap();
    assert_eq!(out, 1);
    assert_eq!(loads, [vec![], vec![proj.join("tools.json")]]);
    // Records that never stop changing: refused, not loaded blind.
    let mut n = 1;
    let e = guarded_in(&dir, &proj, |_| {
        n += 1;
        fs::write(dir.join(SEQ), n.to_string()).unwrap();
    })
    .unwrap_err();
    assert!(matches!(e, PlantedError::Busy { .. }), "{e}");
}
