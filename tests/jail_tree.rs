//! Invariants 1 and 2 (the jail's own filesystem): a path that is not
//! granted does not exist (`ENOENT` for stat, open, chmod, inotify), and
//! nothing outside `fs.write` can change, metadata included (mode, owner,
//! times, xattrs: `EROFS`), whatever the uid. Each attack runs for real
//! and is judged by the file on disk; attacks on real system files only
//! *attempt* a change that would change nothing (same mode, same owner,
//! same times, removing an attribute that does not exist), so even an
//! escape could not harm the machine, and the probe reports it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Mode, owner, times, xattrs and inode flags (`lsattr`) of a file, as the
/// host sees them.
#[derive(Debug, PartialEq, Eq)]
struct Facts {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime_ns: i128,
    atime_ns: i128,
    xattrs: String,
}

/// Prints a file's xattr names and its inode flags (`FS_IOC_GETFLAGS`;
/// `-` where the file has none, as a device node).
const FACTS_PY: &str = r#"
import fcntl, os, struct, sys
p = sys.argv[1]
try:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        flags = hex(struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0])
    finally:
        os.close(fd)
except OSError:
    flags = "-"
print(sorted(os.listxattr(p)), flags)
"#;

fn facts(p: &Path) -> Facts {
    let m = fs::metadata(p).unwrap();
    let xattrs = Command::new("python3")
        .args(["-c", FACTS_PY, path_str(p)])
        .output()
        .unwrap();
    assert!(xattrs.status.success(), "{xattrs:?}");
    Facts {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        atime_ns: m.atime() as i128 * 1_000_000_000 + m.atime_nsec() as i128,
        xattrs: String::from_utf8_lossy(&xattrs.stdout).into_owned(),
    }
}

/// A directory with a 0644 file, and the file's path.
fn victim() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempdir();
    let dir = t.path().join("victim");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let f = dir.join("file.txt");
    fs::write(&f, "victim-content\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    (t, dir, f)
}

/// Asserts the probe ran and was refused with `errno`.
fn refused_with(r: &Run, errno: &str) {
    r.assert_blocked();
    assert!(r.stdout.contains(errno), "expected {errno}: {r:#?}");
}

/// The errno a metadata call gets: `EROFS`/`ENOENT` from the mount tree,
/// `EPERM` in the namespace-free jail (no mount namespace: the supervisor
/// refuses every change outside the write grants, seccomp every watch).
fn metadata_errno(tree: &'static str) -> &'static str {
    if namespace_free() {
        "EPERM"
    } else {
        tree
    }
}

const METADATA: [&[&str]; 6] = [
    &["chmod"],
    &["utime"],
    &["setxattr"],
    &["removexattr"],
    &["chown_same"],
    &["inotify"],
];

#[test]
fn ungranted_files_do_not_exist_for_metadata_calls() {
    require_jail!();
    let (_t, dir, f) = victim();
    let before = facts(&f);
    for attack in METADATA {
        let mut args = attack.to_vec();
        args.push(path_str(&f));
        refused_with(&attack_run(&[], &args), metadata_errno("ENOENT"));
    }
    if namespace_free() {
        // No mount tree: stat sees the path, Landlock refuses its content.
        refused_with(&attack_run(&[], &["read", path_str(&f)]), "EACCES");
        refused_with(&attack_run(&[], &["listdir", path_str(&dir)]), "EACCES");
        refused_with(&attack_run(&[], &["inotify", path_str(&dir)]), "EPERM");
    } else {
        // stat and inotify on the ungranted directory reveal nothing either.
        refused_with(&attack_run(&[], &["stat", path_str(&dir)]), "ENOENT");
        refused_with(&attack_run(&[], &["inotify", path_str(&dir)]), "ENOENT");
    }
    assert_eq!(facts(&f), before, "the file outside changed");
}

fn attack_run(extra: &[&str], args: &[&str]) -> Run {
    attack(extra, args)
}

#[test]
fn read_only_grants_refuse_every_metadata_change() {
    require_jail!();
    let (_t, dir, f) = victim();
    let before = facts(&f);
    let grant = ["--read", path_str(&dir)];
    // The probe: the file is there and readable.
    let ok = attack(&grant, &["stat", path_str(&f)]);
    ok.assert_probe_ran();
    assert!(ok.stdout.contains("STAT"), "{ok:#?}");
    for attack_args in METADATA.iter().take(5) {
        let mut args = attack_args.to_vec();
        args.push(path_str(&f));
        refused_with(&attack(&grant, &args), metadata_errno("EROFS"));
    }
    // Creating beside it fails too.
    let r = attack(&grant, &["write", path_str(&dir.join("new.txt"))]);
    r.assert_blocked();
    assert!(!dir.join("new.txt").exists());
    assert_eq!(facts(&f), before, "the read-only file changed");
}

#[test]
fn system_files_refuse_metadata_changes_whatever_the_uid() {
    require_jail!();
    // A root-owned file of the baseline. Each attempt would change nothing
    // even if it succeeded (same mode, owner, times; a missing attribute),
    // so the real file is safe; the kernel must still refuse each one.
    let target = fs::canonicalize("/usr/bin/env").unwrap();
    let before = facts(&target);
    for a in ["chmod_same", "chown_same", "utime_same", "removexattr"] {
        refused_with(
            &attack(&[], &[a, path_str(&target)]),
            metadata_errno("EROFS"),
        );
    }
    for a in ["chattr", "file_setattr"] {
        // Where the call or the file system's inode flags do not exist
        // (file_setattr before 6.17; 9p), the jail meets the same refusal.
        let r = attack(&[], &[a, path_str(&target), "same"]);
        match missing_outside(a, &target) {
            // Namespace-free, seccomp refuses the call by number; a
            // container's own filter may answer first for a call it does
            // not know (ENOSYS).
            Some(e) if namespace_free() => {
                r.assert_blocked();
                assert!(r.stdout.contains("EPERM") || r.stdout.contains(e), "{r:#?}");
            }
            Some(e) => refused_with(&r, e),
            None => refused_with(&r, metadata_errno("EROFS")),
        }
    }
    assert_eq!(facts(&target), before);
    // The jail's device nodes are the host's: every process there shares
    // their mode, owner and times. The baseline writes to /dev/null and
    // /dev/full, yet neither can be chmodded, chowned or touched.
    for dev in ["/dev/null", "/dev/full"] {
        let before = facts(Path::new(dev));
        for a in ["chmod_same", "chown_same", "utime_same"] {
            refused_with(&attack(&[], &[a, dev]), metadata_errno("EROFS"));
        }
        assert_eq!(facts(Path::new(dev)), before, "{dev} changed");
    }
    // Writing to them still works.
    let r = sandbox(
        &[],
        &[
            "sh",
            "-c",
            "echo x > /dev/null && echo NULL-OK; echo x > /dev/full || echo FULL-ENOSPC",
        ],
    );
    assert!(
        r.stdout.contains("NULL-OK") && r.stdout.contains("FULL-ENOSPC"),
        "{r:#?}"
    );
}

#[test]
fn inode_flags_never_change_outside_the_write_grants() {
    require_jail!();
    let (_t, dir, f) = victim();
    // The probe works here: outside any jail it sets the flag on a copy.
    let copy = dir.join("copy.txt");
    fs::write(&copy, "x").unwrap();
    let before_copy = facts(&copy);
    // Only the ways this kernel and file system have (file_setattr is
    // 6.17's; tmpfs has inode flags from 6.0): one that does not exist
    // cannot be tried, inside or out.
    let ways: Vec<&str> = ["chattr", "file_setattr"]
        .into_iter()
        .filter(|a| match missing_outside(a, &copy) {
            Some(e) => {
                eprintln!("{a}: {e} outside any jail, not tried");
                false
            }
            None => true,
        })
        .collect();
    for &a in &ways {
        let out = Command::new("python3")
            .args([path_str(&probe()), a, path_str(&copy)])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(out.contains("ESCAPED"), "{a} does not work here: {out}");
        assert_ne!(facts(&copy), before_copy, "{a} changed nothing");
        fs::remove_file(&copy).unwrap();
        fs::write(&copy, "x").unwrap();
    }
    let before = facts(&f);
    // Ungranted: the file does not exist (without a mount tree: Landlock
    // refuses the open, seccomp the path call).
    let ungranted = [
        ("chattr", metadata_errno_or("ENOENT", "EACCES")),
        ("file_setattr", metadata_errno("ENOENT")),
    ];
    for (a, errno) in ungranted.into_iter().filter(|(a, _)| ways.contains(a)) {
        refused_with(&attack(&[], &[a, path_str(&f)]), errno);
    }
    // Read-only grant: the file is there, its flags cannot change.
    let grant = ["--read", path_str(&dir)];
    for &a in &ways {
        refused_with(&attack(&grant, &[a, path_str(&f)]), metadata_errno("EROFS"));
    }
    assert_eq!(facts(&f), before, "the file's flags changed");
    // A write grant: the tree lets the owner set them; without a tree they
    // are refused for every path (no supervisor decides them).
    let grant = ["--write", path_str(&dir)];
    for &a in &ways {
        let r = attack(&grant, &[a, path_str(&f)]);
        if namespace_free() {
            refused_with(&r, "EPERM");
            assert_eq!(facts(&f), before, "{a} changed the flags: {r:#?}");
        } else {
            r.assert_probe_ran();
            assert!(
                r.stdout.contains("ESCAPED"),
                "{a} refused in a write grant: {r:#?}"
            );
        }
    }
}

/// How the probe's `ATTACK PATH get` fails outside any jail when this
/// kernel lacks the call (`ENOSYS`: file_setattr before 6.17) or the file
/// system has no inode flags (`ENOTTY`, `EOPNOTSUPP`: 9p, tmpfs before
/// 6.0); `None` when it works. Reads the flags only.
fn missing_outside(attack: &str, path: &Path) -> Option<&'static str> {
    let out = Command::new("python3")
        .args([path_str(&probe()), attack, path_str(path), "get"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("PROBE-START"), "the probe did not run: {out}");
    ["ENOSYS", "ENOTTY", "EOPNOTSUPP"]
        .into_iter()
        .find(|e| out.contains(&format!(" {e}")))
}

/// [`metadata_errno`], with `free` as the errno without a mount tree.
fn metadata_errno_or(tree: &'static str, free: &'static str) -> &'static str {
    if namespace_free() {
        free
    } else {
        tree
    }
}

#[test]
fn write_grants_allow_ordinary_file_work() {
    require_jail!();
    let t = tempdir();
    let out = t.path().join("out");
    fs::create_dir(&out).unwrap();
    let o = path_str(&out);
    let script = format!(
        "set -e; cd {o}; echo hi > a.sh; chmod +x a.sh; ./a.sh >/dev/null 2>&1 || true; \
         touch -d 2001-01-01 a.sh; mkdir -p d/e; mv a.sh d/e/b.sh; echo x > gone; rm gone; \
         ln -s b.sh d/e/link; echo DONE"
    );
    // The same in every mode: without a mount namespace the supervisor
    // performs chmod and utimes inside the write grant.
    let r = sandbox(&["--write", o], &["sh", "-c", &script]);
    assert!(r.stdout.contains("DONE"), "{r:#?}");
    let b = out.join("d/e/b.sh");
    assert_eq!(fs::read_to_string(&b).unwrap(), "hi\n");
    assert_eq!(fs::metadata(&b).unwrap().mode() & 0o111, 0o111);
    assert_eq!(fs::metadata(&b).unwrap().mtime(), 978_307_200);
    assert!(!out.join("gone").exists());
    assert!(out.join("d/e/link").symlink_metadata().is_ok());
}

#[test]
fn the_jail_has_a_minimal_dev_and_no_host_devices() {
    require_jail!();
    let script = "for d in null zero full random urandom; do test -e /dev/$d || echo MISSING $d; done; \
                  for d in kmsg mem port sda tty0 console; do test -e /dev/$d && echo PRESENT $d; done; \
                  echo x > /dev/null; head -c 8 /dev/urandom | wc -c; echo DONE";
    if namespace_free() {
        // The host's /dev (no mount tree): its devices are there to stat,
        // but Landlock opens none but the baseline's.
        let script = "for d in null zero full random urandom; do test -e /dev/$d || echo MISSING $d; done; \
                      for d in kmsg mem port tty0 console; do test -e /dev/$d && head -c 1 /dev/$d >/dev/null 2>&1 && echo OPENED $d; done; \
                      touch /dev/shm/gbx-planted 2>/dev/null && echo OPENED shm; \
                      echo x > /dev/null; head -c 8 /dev/urandom | wc -c; echo DONE";
        let r = sandbox(&[], &["sh", "-c", script]);
        assert!(r.stdout.contains("DONE"), "{r:#?}");
        assert!(!r.stdout.contains("MISSING"), "{r:#?}");
        assert!(!r.stdout.contains("OPENED"), "{r:#?}");
        assert!(r.stdout.contains("8\n"), "{r:#?}");
        assert!(!Path::new("/dev/shm/gbx-planted").exists());
        return;
    }
    let r = sandbox(&[], &["sh", "-c", script]);
    assert!(r.stdout.contains("DONE"), "{r:#?}");
    assert!(!r.stdout.contains("MISSING"), "{r:#?}");
    assert!(!r.stdout.contains("PRESENT"), "{r:#?}");
    assert!(r.stdout.contains("8\n"), "{r:#?}");
    // /dev/shm is the call's own: empty (the host's files are not there)
    // and what the call writes there never reaches the host's.
    let host = Path::new("/dev/shm").join(marker("host"));
    let planted = marker("planted");
    let _ = std::fs::write(&host, "host");
    let r = sandbox(
        &[],
        &[
            "sh",
            "-c",
            &format!("ls -A /dev/shm; echo x > /dev/shm/{planted} && echo WROTE"),
        ],
    );
    let _ = std::fs::remove_file(&host);
    assert_eq!(r.stdout, "WROTE\n", "{r:#?}");
    assert!(!Path::new("/dev/shm").join(&planted).exists());
}

#[test]
fn an_ungranted_working_directory_is_empty_not_the_host() {
    require_jail!();
    let (_t, dir, _f) = victim();
    let r = sandbox(
        &["--cwd", path_str(&dir)],
        &["sh", "-c", "pwd; cat file.txt || echo UNREADABLE"],
    );
    assert!(r.stdout.contains(path_str(&dir)), "{r:#?}");
    assert!(r.stdout.contains("UNREADABLE"), "{r:#?}");
    assert!(!r.stdout.contains("victim-content"), "{r:#?}");
}

#[test]
fn the_tree_is_reported_in_the_result() {
    require_jail!();
    let r = sandbox(&[], &["true"]);
    if namespace_free() {
        assert_eq!(r.json["enforcement"]["mode"], "namespace-free", "{r:#?}");
        assert_eq!(r.json["enforcement"]["mount_tree"], false, "{r:#?}");
        assert_eq!(r.json["enforcement"]["metadata_guard"], "seccomp", "{r:#?}");
        assert_eq!(r.json["enforcement"]["subreaper"], true, "{r:#?}");
        return;
    }
    assert_eq!(r.json["enforcement"]["mode"], "namespaces", "{r:#?}");
    assert_eq!(r.json["enforcement"]["mount_tree"], true, "{r:#?}");
    assert_eq!(r.json["enforcement"]["metadata_guard"], "tree", "{r:#?}");
}

#[test]
fn the_state_directory_is_not_in_the_jail() {
    require_jail!();
    let t = tempdir();
    let state = t.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::write(state.join("audit.key"), "KEY-CANARY").unwrap();
    let key = state.join("audit.key");
    let before = facts(&key);
    let probes = probes();
    let probe = probe();
    let run = |args: &[&str]| {
        let mut all = vec!["python3", path_str(&probe)];
        all.extend_from_slice(args);
        sandbox_env(
            &["--read", path_str(&probes)],
            &all,
            &[("GLOVEBOX_STATE_DIR", path_str(&state))],
        )
    };
    for a in ["stat", "chmod", "read", "inotify"] {
        let errno = match (namespace_free(), a) {
            // No mount tree: stat sees the file; its content and metadata
            // stay out of reach.
            (true, "stat") => continue,
            (true, "read") => "EACCES",
            (true, _) => "EPERM",
            (false, _) => "ENOENT",
        };
        let r = run(&[a, path_str(&key)]);
        refused_with(&r, errno);
        assert!(!r.stdout.contains("KEY-CANARY"), "{r:#?}");
    }
    assert_eq!(facts(&key), before);
    // A grant that covers it is refused before anything runs.
    let out = Command::new(bin())
        .args([
            "sandbox",
            "--json",
            "--read",
            path_str(t.path()),
            "--",
            "true",
        ])
        .env("GLOVEBOX_STATE_DIR", &state)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("state directory"));
}

/// Reads each masked kernel file from inside the jail and prints how many
/// bytes came back (or the errno); writes the host's domain name to itself
/// through `/proc/sys` (the same value: even an escape changes nothing).
const PROC_PY: &str = r#"
import errno, os, sys
print("PROBE-START", len(open("/proc/self/status").read()) > 0)
for p in sys.argv[1:]:
    try:
        with open(p, "rb") as f:
            data = f.read(65536)
        # Addresses shown as zeros (what a non-root reader gets) reveal
        # nothing.
        fields = [l.split()[0] for l in data.decode(errors="replace").splitlines() if l.split()]
        if data and all(set(x.replace("-", "")) <= {"0"} for x in fields):
            print(p, "read zeros")
        else:
            print(p, "read", len(data))
    except OSError as e:
        print(p, "refused", errno.errorcode.get(e.errno, e.errno))
try:
    with open("/proc/sys/kernel/domainname") as f:
        same = f.read()
    with open("/proc/sys/kernel/domainname", "w") as f:
        f.write(same)
    print("domainname written")
except OSError as e:
    print("domainname refused", errno.errorcode.get(e.errno, e.errno))
"#;

#[test]
fn kernel_files_container_runtimes_mask_are_unreadable_and_proc_sys_read_only() {
    require_jail!();
    let files = [
        "/proc/slabinfo",
        "/proc/pagetypeinfo",
        "/proc/timer_list",
        "/proc/vmallocinfo",
        "/proc/kpageflags",
        "/proc/kpagecount",
        "/proc/kmsg",
        "/proc/kallsyms",
        "/proc/iomem",
    ];
    let mut cmd = vec!["python3", "-c", PROC_PY];
    cmd.extend(files);
    let r = sandbox(&[], &cmd);
    assert!(r.stdout.contains("PROBE-START True"), "{r:#?}");
    for f in files {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{f} ")))
            .unwrap_or_else(|| panic!("no line for {f}: {r:#?}"));
        assert!(
            line.ends_with(" read 0")
                || line.ends_with(" read zeros")
                || line.contains(" refused "),
            "{f} gave content: {line}"
        );
    }
    assert!(r.stdout.contains("domainname refused"), "{r:#?}");
    // The jail's ordinary /proc still works (its own entry was read by
    // the probe above).
    let r = sandbox(&[], &["head", "-1", "/proc/meminfo"]);
    assert!(r.stdout.contains("MemTotal"), "{r:#?}");
}
