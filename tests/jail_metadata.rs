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

/// Files under `dir` (recursively, links not followed) that are set-id or
/// carry a file capability (`security.capability`, read on the host).
fn privileged_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            if m.mode() & 0o6000 != 0 {
                found.push(format!("{} is set-id", p.display()));
            }
        }
    }
    let caps = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import os, sys\n\
             for top, dirs, files in os.walk(sys.argv[1]):\n\
             \x20   for n in dirs + files:\n\
             \x20       p = os.path.join(top, n)\n\
             \x20       try:\n\
             \x20           os.getxattr(p, 'security.capability', follow_symlinks=False)\n\
             \x20           print(p)\n\
             \x20       except OSError:\n\
             \x20           pass\n\
             print('WALKED')\n",
        )
        .arg(dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&caps.stdout).into_owned();
    assert!(out.contains("WALKED"), "the capability walk ran: {caps:?}");
    found.extend(
        out.lines()
            .filter(|l| *l != "WALKED")
            .map(|l| format!("{l} has a file capability")),
    );
    found
}

/// Every way to a set-id or file-capability file inside a write grant,
/// beyond the plain ones above: `openat2` (its mode is in memory, where
/// seccomp cannot look: the call is ENOSYS), raw `open`/`creat`/`openat`,
/// `O_TMPFILE` then `fchmod` then `linkat`, `mknodat`, `fchmod` on a
/// descriptor, `fchmodat` by directory descriptor, `fchmodat2`, a hard
/// link of a set-id file outside the grant (by path and through
/// `/proc/self/fd`), a rename of it into the grant, `io_uring`,
/// `security.capability`, and the copies that preserve modes (`cp -p`,
/// `cp -a`, `tar xp`, `copy_file_range`) and an ACL write, which may work
/// but without the bits. Each attempt that must fail prints BLOCKED or
/// ESCAPED; the verdict is the host's `stat` and `getxattr` of every file.
#[test]
fn no_creation_path_leaves_a_set_id_or_capability_file() {
    require_jail!();
    let s = Setup::new();
    let w = s.work.path();
    // A set-id file outside the write grant, on the same filesystem, owned
    // by the test's user (so no hard-link protection but Landlock or the
    // mount tree stands in the way).
    let suid = s.other.path().join("suid");
    fs::copy("/bin/true", &suid).unwrap();
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(mode(&suid), 0o4755, "the test made its set-id file");
    let probe = format!(
        r#"import ctypes, errno, os, struct, sys
print("PROBE-START", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
x86 = os.uname().machine == "x86_64"
SUID = {suid:?}

def sys_(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, (bytes, ctypes.Array)) else ctypes.c_long(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def must_fail(what, fn):
    try:
        fn()
        print("ESCAPED", what, flush=True)
    except OSError as e:
        print("BLOCKED", what, e.errno, errno.errorcode.get(e.errno, ""), flush=True)

def may(what, fn):
    try:
        fn()
        print("DONE", what, flush=True)
    except OSError as e:
        print("REFUSED", what, e.errno, flush=True)

AT_FDCWD = -100
def openat2(path, flags, mode):
    how = ctypes.create_string_buffer(struct.pack("=QQQ", flags, mode, 0), 24)
    return sys_(437, AT_FDCWD, path.encode() + b"\0", how, 24)

if len(sys.argv) > 1:
    # On the host: the proof that this kernel has openat2 and that the
    # probe's call is right (a file is created).
    try:
        openat2(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
        print("HOST-OPENAT2-OK", flush=True)
    except OSError as e:
        print("HOST-OPENAT2", e.errno, flush=True)
    sys.exit(0)
must_fail("openat2-creat-04755", lambda: openat2("o2", os.O_CREAT | os.O_WRONLY, 0o4755))
must_fail("openat2-tmpfile-06755", lambda: openat2(".", os.O_TMPFILE | os.O_WRONLY, 0o6755))
must_fail("openat-04755", lambda: sys_(257, AT_FDCWD, b"oa\0", os.O_CREAT | os.O_WRONLY, 0o4755))
if x86:
    must_fail("open-04755", lambda: sys_(2, b"op\0", os.O_CREAT | os.O_WRONLY, 0o4755))
    must_fail("creat-02755", lambda: sys_(85, b"cr\0", 0o2755))
must_fail("libc-creat-04755", lambda: (libc.creat(b"lc\0", 0o4755) >= 0) or (_ for _ in ()).throw(OSError(ctypes.get_errno(), "creat")))
tmp = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o755)
must_fail("tmpfile-fchmod-04755", lambda: os.fchmod(tmp, 0o4755))
may("tmpfile-linkat", lambda: os.link("/proc/self/fd/%d" % tmp, "tmpf", follow_symlinks=True))
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
must_fail("mknodat-04755", lambda: os.mknod("nod", 0o104755, dir_fd=d))
open("plain", "w").close()
fd = os.open("plain", os.O_RDWR)
must_fail("fchmod-04755", lambda: os.fchmod(fd, 0o4755))
must_fail("fchmodat-dirfd-02755", lambda: os.chmod("plain", 0o2755, dir_fd=d))
must_fail("chmod-proc-fd-04755", lambda: os.chmod("/proc/self/fd/%d" % fd, 0o4755))
must_fail("fchmodat2-04755", lambda: sys_(452, AT_FDCWD, b"plain\0", 0o4755, 0))
must_fail("fchmodat2-empty-path-04755", lambda: sys_(452, fd, b"\0", 0o4755, 0x1000))
must_fail("link-suid", lambda: os.link(SUID, "su"))
sfd = os.open(SUID, os.O_RDONLY)
must_fail("link-suid-proc-fd", lambda: os.link("/proc/self/fd/%d" % sfd, "su-fd", follow_symlinks=True))
must_fail("rename-suid", lambda: os.rename(SUID, "su-moved"))
for host in ("/usr/bin/su", "/bin/su", "/usr/bin/passwd"):
    if os.path.exists(host):
        must_fail("link-" + host, lambda: os.link(host, "host-" + os.path.basename(host)))
params = ctypes.create_string_buffer(120)
must_fail("io_uring_setup", lambda: sys_(425, 8, params))
cap = struct.pack("<5I", 0x02000001, 1 << 7, 0, 0, 0)
must_fail("setxattr-security.capability", lambda: os.setxattr("plain", "security.capability", cap))
must_fail("fsetxattr-security.capability", lambda: os.setxattr(fd, "security.capability", cap))
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, 0xFFFFFFFF) for t, p in ((1, 7), (4, 5), (32, 5)))
may("setxattr-acl", lambda: os.setxattr("plain", "system.posix_acl_access", acl))
def cfr():
    src = os.open(SUID, os.O_RDONLY)
    dst = os.open("cfr", os.O_CREAT | os.O_WRONLY, 0o755)
    os.copy_file_range(src, dst, 1 << 20)
    os.fchmod(dst, os.fstat(src).st_mode & 0o7777)
must_fail("copy_file_range-then-fchmod", cfr)
print("PY-DONE", flush=True)
"#,
        suid = path_str(&suid)
    );
    fs::write(w.join("setid.py"), probe).unwrap();
    let control = tempdir();
    let made = control.path().join("made");
    let host = std::process::Command::new("python3")
        .arg(w.join("setid.py"))
        .arg(&made)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&host.stdout);
    // This kernel has openat2 and the probe calls it right (a file is
    // made), or the host itself answers ENOSYS (an old kernel, a runtime's
    // filter) and a jail cannot have it either.
    assert!(
        (said.contains("HOST-OPENAT2-OK") && made.exists()) || said.contains("HOST-OPENAT2 38"),
        "the probe's openat2 on the host: {host:?}"
    );
    let r = s.run(&format!(
        "echo RAN; python3 setid.py; \
         cp -p {suid} cpp && echo CP-P-RAN; cp -a {suid} cpa; \
         tar cf t.tar -C {other} suid && mkdir x && tar xpf t.tar -C x && echo TAR-RAN; \
         mv {suid} moved && echo ESCAPED-mv; ln {suid} ln-su && echo ESCAPED-ln; \
         setcap cap_setuid+ep plain 2>/dev/null && echo ESCAPED-setcap; true",
        suid = path_str(&suid),
        other = path_str(s.other.path()),
    ));
    assert!(
        r.stdout.contains("RAN") && r.stdout.contains("PROBE-START"),
        "{r:#?}"
    );
    assert!(
        r.stdout.contains("PY-DONE"),
        "the probe ran to its end: {r:#?}"
    );
    assert!(
        r.stdout.contains("BLOCKED openat2-creat-04755 38 ENOSYS"),
        "openat2 is ENOSYS in the jail: {r:#?}"
    );
    assert!(
        r.stdout.contains("CP-P-RAN") || r.stdout.contains("TAR-RAN") || r.stderr.contains("cp"),
        "{r:#?}"
    );
    assert!(!r.stdout.contains("ESCAPED"), "{r:#?}");
    assert!(!w.join("o2").exists(), "openat2 left a file");
    assert!(
        !w.join("su").exists() && !w.join("su-moved").exists(),
        "{r:#?}"
    );
    assert_eq!(mode(&suid), 0o4755, "the file outside is still there");
    let bad = privileged_files(w);
    assert!(bad.is_empty(), "{bad:?}\n{r:#?}");
}
