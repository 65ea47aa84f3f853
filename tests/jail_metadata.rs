//! Invariant 2 for the metadata family (chmod, chown, utimes, xattrs):
//! inside write grants they work — `chmod +x`, `touch -d`, `cp -p`,
//! `tar x` — and nowhere else, whatever the path, the link or the race;
//! and no call ever leaves a setuid or setgid file behind. In the
//! namespace-free jail the supervisor decides each call (seccomp user
//! notification); with namespaces the mount tree does. Judged by effect:
//! the mode and times on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn mtime(p: &Path) -> i64 {
    fs::symlink_metadata(p).unwrap().mtime()
}

/// A directory the jail may write and, beside it, a victim file the test
/// owns (mode 0644, an old mtime) in a directory it may only read.
struct Setup {
    work: tempfile::TempDir,
    other: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let s = Setup {
            work: tempdir(),
            other: tempdir(),
        };
        for d in [s.work.path(), s.other.path()] {
            fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let v = s.victim();
        fs::write(&v, "victim\n").unwrap();
        fs::set_permissions(&v, fs::Permissions::from_mode(0o644)).unwrap();
        let out = std::process::Command::new("touch")
            .args(["-d", "2001-02-03 04:05:06"])
            .arg(&v)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        s
    }

    fn victim(&self) -> std::path::PathBuf {
        self.other.path().join("victim")
    }

    fn run(&self, script: &str) -> Run {
        sandbox(
            &[
                "--write",
                path_str(self.work.path()),
                "--read",
                path_str(self.other.path()),
                "--cwd",
                path_str(self.work.path()),
            ],
            &["sh", "-c", script],
        )
    }

    fn assert_victim_unchanged(&self) {
        let v = self.victim();
        assert_eq!(mode(&v), 0o644, "the victim's mode changed");
        let year = std::process::Command::new("date")
            .args(["-u", "+%Y", "-r"])
            .arg(&v)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&year.stdout).trim(),
            "2001",
            "the victim's times changed"
        );
        assert_eq!(fs::read_to_string(&v).unwrap(), "victim\n");
    }
}

#[test]
fn chmod_touch_cp_p_and_tar_work_inside_a_write_grant() {
    require_jail!();
    let s = Setup::new();
    let w = s.work.path();
    let r = s.run(
        "set -e; echo '#!/bin/sh' > tool.sh; echo 'echo TOOL-RAN' >> tool.sh; \
         chmod +x tool.sh; test -x tool.sh && sh tool.sh; \
         echo x > old; touch -d '2001-01-01 00:00:00' old; \
         chmod 600 old; cp -p old kept; \
         mkdir -p d/e; echo y > d/e/f; chmod 700 d/e; touch -d '2002-01-01' d/e/f; \
         tar cf t.tar d; rm -rf d; tar xf t.tar; \
         python3 -c \"import os; os.utime('old', (0, 86400)); os.chmod('kept', 0o640)\"; \
         echo DONE",
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert!(
        r.stdout.contains("TOOL-RAN") && r.stdout.contains("DONE"),
        "{r:#?}"
    );
    assert_eq!(mode(&w.join("tool.sh")) & 0o111, 0o111);
    assert_eq!(mtime(&w.join("old")), 86400);
    assert_eq!(mode(&w.join("old")), 0o600);
    assert_eq!(mode(&w.join("kept")), 0o640);
    assert_eq!(mode(&w.join("d/e")), 0o700, "tar restored the mode");
    let year = |p: &Path| {
        let o = std::process::Command::new("date")
            .args(["-u", "+%Y", "-r"])
            .arg(p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(year(&w.join("d/e/f")), "2002", "tar restored the time");
    assert_eq!(year(&w.join("kept")), "2001", "cp -p kept the time");
}

#[test]
fn metadata_outside_the_write_grants_is_refused_and_changes_nothing() {
    require_jail!();
    let s = Setup::new();
    let v = s.victim();
    let v = path_str(&v);
    // Every spelling: the path, a link to it inside the grant, a relative
    // path, an open descriptor (read access is granted), /proc/self/fd.
    let script = format!(
        "echo RAN; chmod 600 mine && echo MINE-OK; \
         ln -s {v} link; rel=$(realpath --relative-to=. {v}); \
         for p in {v} link \"$rel\"; do \
           chmod 777 \"$p\" && echo ESCAPED-chmod; \
           touch -d 2020-01-01 \"$p\" && echo ESCAPED-touch; \
           touch \"$p\" && echo ESCAPED-touch-now; \
           chown \"$(id -u):$(id -g)\" \"$p\" && echo ESCAPED-chown; \
         done; \
         python3 attempts.py; true"
    );
    fs::write(s.work.path().join("mine"), "m").unwrap();
    let attempts = format!(
        "import os\n\
         fd = os.open('{v}', os.O_RDONLY)\n\
         tries = [lambda: os.fchmod(fd, 0o777), lambda: os.utime(fd, (5, 5)),\n\
         \x20   lambda: os.chmod('/proc/self/fd/%d' % fd, 0o777),\n\
         \x20   lambda: os.setxattr(fd, 'user.x', b'1'),\n\
         \x20   lambda: os.utime('{v}', (5, 5)), lambda: os.chmod('{v}', 0o600)]\n\
         for f in tries:\n\
         \x20   try:\n\
         \x20       f(); print('ESCAPED-py')\n\
         \x20   except OSError as e:\n\
         \x20       print('BLOCKED', e.errno)\n"
    );
    fs::write(s.work.path().join("attempts.py"), attempts).unwrap();
    let r = s.run(&script);
    assert!(
        r.stdout.contains("RAN") && r.stdout.contains("MINE-OK"),
        "{r:#?}"
    );
    assert!(r.stdout.contains("BLOCKED"), "{r:#?}");
    assert!(!r.stdout.contains("ESCAPED"), "{r:#?}");
    s.assert_victim_unchanged();
    assert_eq!(mode(&s.work.path().join("mine")), 0o600);
}

#[test]
fn no_setuid_or_setgid_file_is_ever_left_behind() {
    require_jail!();
    let s = Setup::new();
    let w = s.work.path();
    fs::write(
        w.join("attempts.py"),
        "import os\n\
         tries = [lambda: os.open('p', os.O_CREAT | os.O_WRONLY, 0o4755),\n\
         \x20   lambda: os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o6755),\n\
         \x20   lambda: os.mknod('n', 0o104755), lambda: os.chmod('sh', 0o6755)]\n\
         for f in tries:\n\
         \x20   try:\n\
         \x20       f(); print('ESCAPED-py')\n\
         \x20   except OSError as e:\n\
         \x20       print('BLOCKED', e.errno)\n",
    )
    .unwrap();
    let r = s.run(
        "echo RAN; cp /bin/sh sh; chmod 755 sh && echo PLAIN-OK; \
         chmod 4755 sh && echo ESCAPED-suid; chmod u+s sh && echo ESCAPED-u+s; \
         chmod g+s sh && echo ESCAPED-g+s; mkdir d; chmod 2775 d && echo ESCAPED-dir; \
         python3 attempts.py; install -m 4755 /bin/sh inst && echo ESCAPED-install; true",
    );
    assert!(
        r.stdout.contains("RAN") && r.stdout.contains("PLAIN-OK"),
        "{r:#?}"
    );
    assert!(r.stdout.contains("BLOCKED"), "{r:#?}");
    assert!(!r.stdout.contains("ESCAPED"), "{r:#?}");
    for e in fs::read_dir(w).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p) & 0o6000, 0, "{} is set-id", p.display());
    }
}

#[test]
fn a_symlink_race_cannot_redirect_a_change_outside() {
    require_jail!();
    let s = Setup::new();
    let v = s.victim();
    // One process flips `x` between a file of the grant and a link to the
    // victim (atomic renames); the other keeps changing `x`.
    let script = format!(
        "echo RAN; echo f > real; ln -s {v} evil; \
         (i=0; while [ $i -lt 400 ]; do cp -P real x.tmp 2>/dev/null; mv -fT x.tmp x; \
            ln -sfn {v} y.tmp; mv -fT y.tmp x; i=$((i+1)); done) & \
         ok=0; i=0; while [ $i -lt 400 ]; do \
            chmod 777 x 2>/dev/null && ok=$((ok+1)); touch -d 2020-01-01 x 2>/dev/null; \
            i=$((i+1)); done; wait; echo CHANGED $ok",
        v = path_str(&v)
    );
    let r = s.run(&script);
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert!(
        r.stdout.contains("RAN") && r.stdout.contains("CHANGED"),
        "{r:#?}"
    );
    s.assert_victim_unchanged();
}
