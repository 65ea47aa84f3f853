#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::jail::spec::{Channel, HomeFile, Output};

/// A change to a spec.
type Change = Box<dyn Fn(&mut Spec)>;

fn spec_in(dir: &std::path::Path) -> Spec {
    let mut s = Spec::new(["echo", "hi"]);
    s.cwd = dir.to_path_buf();
    s.fs.read.push(dir.to_path_buf());
    s
}

#[test]
fn what_each_call_brings_is_not_part_of_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let a = spec_in(dir.path());
    let mut b = a.clone();
    b.argv = vec![OsString::from("cat"), OsString::from("x")];
    b.env.push(("SECRET".into(), "s3cr3t".into()));
    b.limits.wall = Duration::from_secs(1);
    b.limits.output_bytes = 7;
    b.output = Output::Stream;
    b.cancel = Some(crate::jail::Cancel::default());
    assert_eq!(Shape::of(&a, &[]), Shape::of(&b, &[]));
    assert!(Shape::of(&a, &[]).is_some());
    // stdin's bytes are the call's; a pipe or /dev/null is the jail's.
    let (mut c, mut d) = (a.clone(), a.clone());
    c.stdin = Stdin::Bytes(b"one".to_vec());
    d.stdin = Stdin::Bytes(b"two".to_vec());
    assert_eq!(Shape::of(&c, &[]), Shape::of(&d, &[]));
    assert_ne!(Shape::of(&a, &[]), Shape::of(&c, &[]));
}

#[test]
fn what_the_jail_is_made_of_is_part_of_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let a = spec_in(dir.path());
    let changes: Vec<Change> = vec![
        Box::new(|s| s.fs.write.push(s.cwd.clone())),
        Box::new(|s| s.fs.read_only.push("/etc".into())),
        Box::new(|s| s.cwd = "/".into()),
        Box::new(|s| s.protect.push(s.cwd.join(".glee"))),
        Box::new(|s| s.limits.memory_bytes /= 2),
        Box::new(|s| s.limits.pids = 3),
        Box::new(|s| s.limits.file_size_bytes = 1),
        Box::new(|s| s.limits.open_files = 9),
        Box::new(|s| s.netns = true),
        Box::new(|s| s.links = Links::Checked { root: None }),
        Box::new(|s| {
            s.home_files.push(HomeFile {
                name: "ca.pem".into(),
                contents: b"x".to_vec(),
                variables: vec!["SSL_CERT_FILE".into()],
            })
        }),
    ];
    for (i, change) in changes.iter().enumerate() {
        let mut b = a.clone();
        change(&mut b);
        assert_ne!(Shape::of(&a, &[]), Shape::of(&b, &[]), "change {i}");
    }
    assert_ne!(
        Shape::of(&a, &[]),
        Shape::of(&a, &["/var/lib/glovebox".into()]),
        "the state directory kept out"
    );
}

#[test]
fn network_learn_degraded_and_channels_get_no_standby() {
    let dir = tempfile::tempdir().unwrap();
    let a = spec_in(dir.path());
    let mut cases: Vec<Spec> = Vec::new();
    let mut s = a.clone();
    s.network = true;
    cases.push(s);
    let mut s = a.clone();
    s.direct_network = true;
    cases.push(s);
    let mut s = a.clone();
    s.degraded = true;
    cases.push(s);
    let mut s = a.clone();
    s.observe = Some(Arc::new(crate::jail::observe::Observer::default()));
    cases.push(s);
    let mut s = a.clone();
    s.stdin = Stdin::Channel(Channel::default());
    cases.push(s);
    let mut s = a.clone();
    s.stdin = Stdin::Duplex(Channel::default());
    cases.push(s);
    let mut s = a.clone();
    s.stdin = Stdin::InheritIfSafe;
    cases.push(s);
    for (i, s) in cases.iter().enumerate() {
        assert!(Shape::of(s, &[]).is_none(), "case {i}");
    }
}

#[test]
fn a_standby_is_made_with_nothing_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec_in(dir.path());
    s.env.push(("TOKEN".into(), "s3cr3t".into()));
    s.stdin = Stdin::Bytes(b"the call's request".to_vec());
    s.cancel = Some(crate::jail::Cancel::default());
    let t = template(&s);
    assert!(t.env.is_empty());
    assert!(matches!(&t.stdin, Stdin::Bytes(b) if b.is_empty()));
    assert!(t.cancel.is_none() && t.gate.is_none());
    assert_eq!(Shape::of(&t, &[]), Shape::of(&s, &[]));
}

/// Revalidation's comparison: the same paths held again compare equal;
/// a grant swapped for another directory, removed or created, or a
/// protected path created, does not.
#[test]
fn revalidation_sees_a_grant_swapped_removed_or_created() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut s = spec_in(base.path());
    s.fs.read.push(data.clone());
    s.fs.write.push(base.path().join("later"));
    s.protect.push(data.join(".glee"));
    let resolve = |s: &Spec| Resolved::of(&spawn::hold_grants(s, &[], true).unwrap());
    let first = resolve(&s);
    assert_eq!(first, resolve(&s), "held again, unchanged");

    std::fs::rename(&data, base.path().join("data.old")).unwrap();
    std::fs::create_dir(&data).unwrap();
    let swapped = resolve(&s);
    assert_ne!(first, swapped, "swapped for another directory");

    std::fs::create_dir(base.path().join("later")).unwrap();
    let created = resolve(&s);
    assert_ne!(swapped, created, "a grant created");

    std::fs::create_dir(data.join(".glee")).unwrap();
    let protected = resolve(&s);
    assert_ne!(created, protected, "a protected path created");

    std::fs::remove_dir(data.join(".glee")).unwrap();
    std::fs::remove_dir(&data).unwrap();
    assert_ne!(protected, resolve(&s), "a grant removed");
}

#[test]
fn standbys_are_made_only_once_enabled() {
    // Not enabled in this test binary: nothing is made or taken.
    let dir = tempfile::tempdir().unwrap();
    let s = spec_in(dir.path());
    match take(&s, &[], std::time::Instant::now()) {
        Taken::No(next) => {
            assert!(next.0.is_none());
            next.make();
        }
        Taken::Ran(_) => panic!("a standby ran a call where none is enabled"),
    }
    assert_eq!(ready(), 0);
}
