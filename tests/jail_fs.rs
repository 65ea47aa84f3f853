//! Invariant 1 (deny by default filesystem): real reads, writes, links and
//! renames from inside the jail, judged by their effect on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::fs;

const SECRET: &str = "TOP-SECRET-CANARY-7f3a";

struct Dirs {
    _tmp: tempfile::TempDir,
    allowed: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn dirs() -> Dirs {
    dirs_in(tempdir())
}

/// `allowed` (holding `ok.txt`) and `outside` (holding the canary) in `tmp`.
fn dirs_in(tmp: tempfile::TempDir) -> Dirs {
    let allowed = tmp.path().join("allowed");
    let outside = tmp.path().join("outside");
    fs::create_dir(&allowed).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(allowed.join("ok.txt"), "allowed content").unwrap();
    fs::write(outside.join("canary.txt"), SECRET).unwrap();
    Dirs {
        _tmp: tmp,
        allowed,
        outside,
    }
}

#[test]
fn canary_outside_the_read_set_is_not_returned() {
    require_jail!();
    let d = dirs();
    let canary = d.outside.join("canary.txt");
    let r = attack(
        &["--read", path_str(&d.allowed)],
        &["read", path_str(&canary)],
    );
    r.assert_blocked();
    assert!(!r.stdout.contains(SECRET) && !r.stderr.contains(SECRET));
    // The legitimate side of the same probe works.
    let ok = attack(
        &["--read", path_str(&d.allowed)],
        &["read", path_str(&d.allowed.join("ok.txt"))],
    );
    ok.assert_probe_ran();
    assert!(ok.stdout.contains("allowed content"), "{ok:#?}");
}

#[test]
fn system_secrets_and_other_homes_are_not_readable() {
    require_jail!();
    for path in ["/etc/passwd", "/etc/shadow", "/root/.bashrc"] {
        attack(&[], &["read", path]).assert_blocked();
    }
    for dir in ["/tmp", "/root", "/home", "/var", "/run"] {
        attack(&[], &["listdir", dir]).assert_blocked();
    }
}

#[test]
fn file_outside_the_write_set_is_not_created() {
    require_jail!();
    let d = dirs();
    let target = d.outside.join("created.txt");
    attack(
        &["--write", path_str(&d.allowed)],
        &["write", path_str(&target)],
    )
    .assert_blocked();
    assert!(!target.exists(), "file was created outside");
    // A read-only path is not writable either.
    let ro = d.allowed.join("new.txt");
    attack(&["--read", path_str(&d.allowed)], &["write", path_str(&ro)]).assert_blocked();
    assert!(!ro.exists());
    // /tmp is not writable.
    let m = marker("tmpwrite");
    let tmp_target = format!("/tmp/{m}");
    attack(&[], &["write", &tmp_target]).assert_blocked();
    assert!(!std::path::Path::new(&tmp_target).exists());
    // Writing inside the write set works.
    let inside = d.allowed.join("written.txt");
    let r = attack(
        &["--write", path_str(&d.allowed)],
        &["write", path_str(&inside)],
    );
    r.assert_probe_ran();
    assert!(inside.exists(), "{r:#?}");
}

#[test]
fn read_only_file_cannot_be_truncated() {
    require_jail!();
    let d = dirs();
    let f = d.allowed.join("ok.txt");
    attack(
        &["--read", path_str(&d.allowed)],
        &["truncate", path_str(&f)],
    )
    .assert_blocked();
    assert_eq!(fs::read_to_string(&f).unwrap(), "allowed content");
}

#[test]
fn symlink_inside_pointing_outside_does_not_widen_access() {
    require_jail!();
    let d = dirs();
    let link = d.allowed.join("link");
    std::os::unix::fs::symlink(d.outside.join("canary.txt"), &link).unwrap();
    let dirlink = d.allowed.join("dirlink");
    std::os::unix::fs::symlink(&d.outside, &dirlink).unwrap();
    let r = attack(
        &["--write", path_str(&d.allowed)],
        &["read", path_str(&link)],
    );
    r.assert_blocked();
    assert!(!r.stdout.contains(SECRET));
    let r = attack(
        &["--write", path_str(&d.allowed)],
        &["write", path_str(&dirlink.join("via-link.txt"))],
    );
    r.assert_blocked();
    assert!(!d.outside.join("via-link.txt").exists());
}

#[test]
fn link_and_rename_out_of_the_allowed_set_fail() {
    require_jail!();
    let d = dirs();
    let src = d.allowed.join("ok.txt");
    let dst = d.outside.join("moved.txt");
    attack(
        &["--write", path_str(&d.allowed)],
        &["rename", path_str(&src), path_str(&dst)],
    )
    .assert_blocked();
    assert!(src.exists() && !dst.exists());
    attack(
        &["--write", path_str(&d.allowed)],
        &["link", path_str(&src), path_str(&dst)],
    )
    .assert_blocked();
    assert!(!dst.exists());
    // Linking a file from outside into the writable dir (to read it there)
    // fails too.
    let stolen = d.allowed.join("stolen.txt");
    attack(
        &["--write", path_str(&d.allowed)],
        &[
            "link",
            path_str(&d.outside.join("canary.txt")),
            path_str(&stolen),
        ],
    )
    .assert_blocked();
    assert!(!stolen.exists());
}

#[test]
fn proc_shows_only_the_jails_own_processes() {
    require_jail!();
    if namespace_free() {
        // No private /proc: Landlock keeps the host's closed (no listing,
        // no other process's entry) and opens only the tool's own.
        let r = sandbox(
            &[],
            &[
                "sh",
                "-c",
                "ls /proc >/dev/null 2>&1 && echo LISTED; cat /proc/1/cmdline >/dev/null 2>&1 && echo READ-OTHER; \
                 exec grep NoNewPrivs /proc/self/status",
            ],
        );
        assert_eq!(r.code, Some(0), "{r:#?}");
        assert!(!r.stdout.contains("LISTED"), "{r:#?}");
        assert!(!r.stdout.contains("READ-OTHER"), "{r:#?}");
        assert!(r.stdout.contains("NoNewPrivs:\t1"), "{r:#?}");
        return;
    }
    let r = sandbox(
        &[],
        &[
            "sh",
            "-c",
            "ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/self/status | grep NoNewPrivs",
        ],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    let count: u32 = r.stdout.lines().next().unwrap().trim().parse().unwrap();
    assert!(count <= 4, "the jail sees {count} processes: {r:#?}");
    assert!(r.stdout.contains("NoNewPrivs:\t1"));
}

/// A project kept in the host's `/dev/shm` (a tmpfs, where CI jobs and
/// scratch checkouts sometimes live) is shown as granted: the jail's own
/// `/dev` holds only the baseline devices, and its private `/dev/shm` is
/// left out when a grant lies there (it would hide the grant, and its
/// writable Landlock rule would cover it). Nothing else of the host's
/// `/dev/shm` is readable or writable.
#[test]
fn a_grant_in_the_hosts_dev_shm_is_shown_and_nothing_else_there() {
    require_jail!();
    let d = dirs_in(
        tempfile::Builder::new()
            .prefix("gbx-test-")
            .tempdir_in("/dev/shm")
            .unwrap(),
    );
    let (allowed, outside) = (d.allowed.clone(), d.outside.clone());
    let ok = attack(
        &["--read", path_str(&allowed)],
        &["read", path_str(&allowed.join("ok.txt"))],
    );
    ok.assert_probe_ran();
    assert!(ok.stdout.contains("allowed content"), "{ok:#?}");
    let inside = allowed.join("written.txt");
    let w = attack(
        &["--write", path_str(&allowed)],
        &["write", path_str(&inside)],
    );
    w.assert_probe_ran();
    assert!(inside.exists(), "{w:#?}");
    let r = attack(
        &["--write", path_str(&allowed)],
        &["read", path_str(&outside.join("canary.txt"))],
    );
    r.assert_blocked();
    assert!(!r.stdout.contains(SECRET) && !r.stderr.contains(SECRET));
    let planted = outside.join("created.txt");
    attack(
        &["--write", path_str(&allowed)],
        &["write", path_str(&planted)],
    )
    .assert_blocked();
    assert!(!planted.exists());
    let ro = allowed.join("new.txt");
    attack(&["--read", path_str(&allowed)], &["write", path_str(&ro)]).assert_blocked();
    assert!(!ro.exists());
}
