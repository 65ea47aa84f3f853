//! Invariants 5, 6, 8, 9 and 10: other processes, the environment, ending
//! whole, limits and the terminal. Each attack is real and judged by its effect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;

use common::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A neighbour outside the jail holding a secret in its environment.
struct Neighbour {
    child: std::process::Child,
    secret: String,
}

impl Neighbour {
    fn start() -> Neighbour {
        let secret = marker("neighbour-secret");
        let child = Command::new("sleep")
            .arg("60")
            .env("NEIGHBOUR_SECRET", &secret)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Neighbour { child, secret }
    }
    fn pid(&self) -> String {
        self.child.id().to_string()
    }
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn neighbour_cannot_be_read_traced_or_killed() {
    require_jail!();
    let mut n = Neighbour::start();
    let pid = n.pid();
    let r = attack(&[], &["environ", &pid]);
    r.assert_blocked();
    assert!(!r.stdout.contains(&n.secret));
    attack(&[], &["ptrace", &pid]).assert_blocked();
    attack(&[], &["vmread", &pid]).assert_blocked();
    attack(&[], &["kill", &pid]);
    std::thread::sleep(Duration::from_millis(100));
    assert!(n.alive(), "the neighbour was killed from inside the jail");
    let r = attack(&[], &["find_canary_env", &n.secret]);
    r.assert_blocked();
}

/// What another process of the same uid could change of `pid` with no
/// ptrace or signal check: its open-files limit, nice value and I/O
/// priority.
fn tunables(pid: &str) -> (String, String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Field 19 (nice), counted after the command's closing parenthesis.
    let nice = stat
        .rsplit_once(") ")
        .unwrap()
        .1
        .split(' ')
        .nth(16)
        .unwrap();
    let io = Command::new("ionice").args(["-p", pid]).output().unwrap();
    assert!(io.status.success(), "ionice -p: {io:?}");
    (
        nofile,
        nice.to_string(),
        String::from_utf8_lossy(&io.stdout).trim().to_string(),
    )
}

#[test]
fn neighbour_limits_and_priorities_cannot_be_changed() {
    require_jail!();
    // Without a PID namespace the neighbour (same uid as the jail) can be
    // named by its pid; prlimit, setpriority and ioprio_set ask nothing
    // Landlock's scopes take part in. Before the filter refused them, the
    // namespace-free jail set its open-files limit to 7 and its nice
    // value to 19 (and so could the supervisor's: RLIMIT_CPU kills it).
    let mut n = Neighbour::start();
    let pid = n.pid();
    let before = tunables(&pid);
    let r = attack(&[], &["retune", &pid]);
    assert!(r.stdout.contains("SELF-OK"), "{r:#?}");
    r.assert_blocked();
    assert_eq!(tunables(&pid), before, "the neighbour was retuned: {r:#?}");
    assert!(n.alive());
}

#[test]
fn supervisor_secrets_are_out_of_reach() {
    require_jail!();
    // The supervisor's environment holds every secret the user exported.
    let secret = marker("supervisor-secret");
    let probes = probes();
    let probe = probe();
    let r = sandbox_env(
        &["--read", path_str(&probes)],
        &["python3", path_str(&probe), "find_canary_env", &secret],
        &[("SUPERVISOR_SECRET", &secret)],
    );
    r.assert_blocked();
    assert!(!r.stdout.contains(&secret));
    if namespace_free() {
        // No PID namespace: the parent is the call's reaper, and no
        // process's /proc entry outside the jail can be read.
        let r = sandbox(
            &[],
            &[
                "sh",
                "-c",
                "cat /proc/$PPID/cmdline /proc/$PPID/environ /proc/1/cmdline 2>/dev/null | tr '\\0' ' '; echo DONE",
            ],
        );
        assert!(r.stdout.contains("DONE"), "{r:#?}");
        assert!(!r.stdout.contains("glovebox"), "{r:#?}");
        assert!(!r.stdout.contains("init"), "{r:#?}");
        return;
    }
    // Its parent (the supervisor) is invisible: pid 1 is the probe itself.
    let r = sandbox(
        &[],
        &[
            "sh",
            "-c",
            "echo ppid=$PPID; cat /proc/1/cmdline | tr '\\0' ' '",
        ],
    );
    assert!(r.stdout.contains("ppid=0"), "{r:#?}");
    assert!(!r.stdout.contains("glovebox"), "{r:#?}");
}

#[test]
fn environment_starts_empty() {
    require_jail!();
    let secret = marker("inherited");
    let r = sandbox_env(
        &[],
        &["/usr/bin/env"],
        &[("SHOULD_NOT_PASS", &secret), ("PASSED", "yes")],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    let mut keys: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    keys.sort();
    assert_eq!(keys, ["HOME", "LANG", "PATH", "TMPDIR", "TZ"], "{r:#?}");
    assert!(!r.stdout.contains(&secret));
    // Explicitly passed variables do arrive.
    let r = sandbox_env(
        &["--env", "PASSED", "--env", "SET=1"],
        &["/usr/bin/env"],
        &[("PASSED", "yes")],
    );
    assert!(
        r.stdout.contains("PASSED=yes") && r.stdout.contains("SET=1"),
        "{r:#?}"
    );
}

#[test]
fn home_is_private_writable_and_removed_afterwards() {
    require_jail!();
    let r = sandbox(
        &[],
        &[
            "sh",
            "-c",
            "ls -A \"$HOME\" | wc -l; echo data > \"$HOME/f\" && cat \"$HOME/f\"; echo $HOME",
        ],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0].trim(), "0", "HOME was not empty: {r:#?}");
    assert_eq!(lines[1], "data");
    assert!(
        !std::path::Path::new(lines[2]).exists(),
        "HOME survived the call"
    );
}

/// The private HOME leaves nothing on the host, even when the supervisor is
/// killed with SIGKILL mid-call: with a mount tree it is a tmpfs of the
/// jail (no host path at all); without one (the namespace-free jail) the
/// host directory a killed supervisor left is removed by the next
/// supervisor that makes one.
#[test]
fn home_leaves_nothing_on_the_host_when_the_supervisor_is_killed() {
    use std::io::BufRead;
    require_jail!();
    let m = marker("home-kill");
    let mut child = Command::new(bin())
        .args(["sandbox", "--", "sh", "-c"])
        .arg(format!(
            "echo \"$HOME\"; echo {m} > \"$HOME/proof\"; echo \"fs:$(grep \" $HOME \" /proc/self/mounts | cut -d' ' -f3)\"; sleep 60"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let home = lines.next().unwrap().unwrap();
    let fstype = lines.next().map(|l| l.unwrap()).unwrap_or_default();
    child.kill().unwrap();
    child.wait().unwrap();
    let host = std::path::Path::new(&home);
    if namespace_free() {
        assert!(home.contains("glovebox-home-"), "a host directory: {home}");
        // The killed supervisor left its home (unless a supervisor of a
        // test running beside this one swept it already).
        if let Ok(proof) = std::fs::read_to_string(host.join("proof")) {
            assert_eq!(proof.trim(), m, "the probe wrote into its home");
        }
        let r = sandbox(&[], &["true"]);
        assert_eq!(r.code, Some(0), "{r:#?}");
        assert!(!host.exists(), "the next supervisor removed {home}");
    } else {
        assert_eq!(home, "/.glovebox-home");
        assert_eq!(fstype, "fs:tmpfs", "the home is a tmpfs of the jail");
        assert!(!host.exists(), "nothing was made on the host for the home");
    }
}

#[test]
fn double_forked_daemon_is_gone_after_the_call() {
    require_jail!();
    let dir = tempdir();
    let m = marker("daemon");
    let r = attack(
        &["--write", path_str(dir.path())],
        &["daemon", &m, path_str(dir.path())],
    );
    r.assert_probe_ran();
    assert!(
        dir.path().join("daemon-started").exists(),
        "the daemon never started: {r:#?}"
    );
    assert!(
        pids_with(&m).is_empty(),
        "a daemon survived: {:?}",
        pids_with(&m)
    );
}

#[test]
fn supervisor_death_takes_the_jail_down() {
    require_jail!();
    let m = marker("orphan");
    let mut gb = Command::new(bin())
        .args([
            "sandbox",
            "--",
            "python3",
            "-c",
            "import time; time.sleep(120)",
            &m,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The marker is in glovebox's own argv too: wait for the jailed
    // process, which is any other process carrying it.
    let gb_pid = gb.id();
    let start = Instant::now();
    while !pids_with(&m).iter().any(|p| *p != gb_pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "jailed process never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The call's cgroups (root uses them): seen while it runs, so that the
    // check after the next glovebox below has something to find gone. (A
    // test running beside this one may sweep them as soon as the
    // supervisor is dead, so they are not looked for in between.)
    let prefix = format!("glovebox-{gb_pid}-");
    // cgroup v1 (pids, memory, and v2 beside them), or v2 alone.
    let bases = [
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/unified",
    ];
    let bases: &[&str] = if std::path::Path::new("/sys/fs/cgroup/cgroup.procs").exists() {
        &["/sys/fs/cgroup"]
    } else {
        &bases
    };
    if nix::unistd::geteuid().is_root() {
        let made: usize = bases
            .iter()
            .map(|b| walk_names(std::path::Path::new(b), &prefix, 6).len())
            .sum();
        assert!(made > 0, "the running call has no cgroup of its supervisor");
    }
    gb.kill().unwrap();
    gb.wait().unwrap();
    let start = Instant::now();
    while !pids_with(&m).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "jailed process outlived the supervisor: {:?}",
            pids_with(&m)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The killed supervisor could not remove its call's cgroups; the next
    // glovebox sweeps them (a reused pid must never collide with them).
    let r = sandbox(&[], &["true"]);
    assert_eq!(r.code, Some(0), "{r:#?}");
    for base in bases {
        let leaked = walk_names(std::path::Path::new(base), &prefix, 6);
        assert!(
            leaked.is_empty(),
            "cgroups of a dead supervisor left behind: {leaked:?}"
        );
    }
}

#[test]
fn timeout_kills_the_whole_tree() {
    require_jail!();
    let m = marker("timeout");
    let started = Instant::now();
    let r = sandbox(
        &["--timeout", "1"],
        &[
            "sh",
            "-c",
            &format!("python3 -c 'import time; time.sleep(60)' {m} & sleep 60"),
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.code, Some(124), "{r:#?}");
    assert!(r.limits_hit().contains(&"timeout".to_string()), "{r:#?}");
    assert!(pids_with(&m).is_empty());
}

/// The fork bomb's `FORKS n FAILED m` line: fewer than `limit` forks got
/// through, some were refused, and no bomb process outlived the call.
fn assert_bomb_bounded(r: &Run, marker_dir: &std::path::Path, limit: u64) {
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("FORKS"))
        .expect("FORKS line");
    let parts: Vec<&str> = line.split_whitespace().collect();
    let forks: u64 = parts[1].parse().unwrap();
    let refused: u64 = parts[3].parse().unwrap();
    assert!(
        forks < limit,
        "{forks} forks got through a limit of {limit}"
    );
    assert!(refused > 0, "no fork was refused: {r:#?}");
    assert!(
        pids_with(path_str(marker_dir)).is_empty(),
        "bomb processes survived"
    );
}

#[test]
fn fork_bomb_is_contained() {
    require_jail!();
    let dir = tempdir();
    let r = attack(
        &[
            "--pids",
            "32",
            "--timeout",
            "20",
            "--write",
            path_str(dir.path()),
        ],
        &["forkbomb", path_str(dir.path())],
    );
    r.assert_probe_ran();
    assert!(dir.path().join("bomb-started").exists());
    assert_bomb_bounded(&r, dir.path(), 32);
    // The limit hit is said where glovebox sees it (a pids cgroup, its
    // own count; not RLIMIT_NPROC, which refuses silently).
    if r.json["enforcement"]["pids_limit"] != "rlimit-nproc" {
        assert!(r.limits_hit().contains(&"pids".to_string()), "{r:#?}");
    }
}

/// Where no cgroup can be made (a container's read-only cgroup file
/// system; `GLOVEBOX_NO_CGROUPS=1` here) the process limit still holds:
/// `RLIMIT_NPROC` for a uid other than root, and for root the
/// supervisor's count of the call's tasks (`jail::forks`), which
/// `RLIMIT_NPROC` cannot give uid 0: below the namespace-free jail's
/// subreaper, or the PID namespace's first process; its refusal is said
/// (`limits_hit: pids`, the call's `resource_limit`) as under a pids
/// cgroup. Where no seccomp notification listener can be made
/// (gVisor-like: the no-Landlock stage's profile refuses it) root has
/// neither and is refused by name.
#[test]
fn fork_bomb_is_contained_without_cgroups() {
    require_jail!();
    let dir = tempdir();
    let probes = probes();
    let probe = probe();
    let r = sandbox_env(
        &[
            "--read",
            path_str(&probes),
            "--pids",
            "32",
            "--timeout",
            "20",
            "--write",
            path_str(dir.path()),
        ],
        &[
            "python3",
            path_str(&probe),
            "forkbomb",
            path_str(dir.path()),
        ],
        &[("GLOVEBOX_NO_CGROUPS", "1")],
    );
    let root = nix::unistd::geteuid().is_root();
    let no_listener = std::env::var("GLOVEBOX_EXPECT_NOTIFY").as_deref() == Ok("0");
    if root && no_listener {
        assert_eq!(r.code, Some(3), "{r:#?}");
        assert!(r.json.to_string().contains("a process limit"), "{r:#?}");
        assert!(!dir.path().join("bomb-started").exists());
        return;
    }
    r.assert_probe_ran();
    let how = if root {
        "seccomp-count"
    } else {
        "rlimit-nproc"
    };
    assert_eq!(r.json["enforcement"]["pids_limit"], how, "{r:#?}");
    assert_bomb_bounded(&r, dir.path(), 32);
    if root {
        assert!(r.limits_hit().contains(&"pids".to_string()), "{r:#?}");
    }
}

#[test]
fn memory_bomb_is_contained() {
    require_jail!();
    let r = attack(&["--memory", "64M"], &["membomb", "1024"]);
    r.assert_probe_ran();
    assert!(
        !r.stdout.contains("ESCAPED"),
        "allocated 1 GiB under a 64 MiB limit"
    );
    assert_ne!(r.code, Some(0));
}

/// Runs `cmd` and samples its own resident set size (not its children's)
/// from /proc every few milliseconds; returns the peak in KiB.
fn peak_rss_kib_of(mut cmd: Command) -> (u64, std::process::ExitStatus) {
    let mut child = cmd.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            for key in ["VmRSS:", "VmHWM:"] {
                if let Some(kib) = text
                    .lines()
                    .find(|l| l.starts_with(key))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    peak = peak.max(kib);
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (peak, status);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn huge_output_leaves_the_supervisor_small() {
    require_jail!();
    let probes = probes();
    let probe = probe();
    let mut cmd = Command::new(bin());
    cmd.args([
        "sandbox",
        "--json",
        "--max-output",
        "1M",
        "--read",
        path_str(&probes),
        "--",
    ])
    .args(["python3", path_str(&probe), "output", "500"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let (rss_kib, status) = peak_rss_kib_of(cmd);
    assert!(status.success(), "{status:?}");
    assert!(
        rss_kib < 40 * 1024,
        "supervisor grew to {rss_kib} KiB on 500 MiB of output"
    );
    // And the result says what happened.
    let r = attack(&["--max-output", "1M"], &["output", "50"]);
    // 50 MiB plus the probe's PROBE-START line, all counted, 1 MiB kept.
    assert_eq!(r.json["stdout_bytes"], (50u64 << 20) + 12, "{r:#?}");
    assert!(r.stdout.len() <= 1 << 20);
    assert!(r.limits_hit().contains(&"output".to_string()));
}

#[test]
fn tiocsti_under_a_pty_injects_nothing() {
    require_jail!();
    use nix::pty::openpty;
    use nix::sys::termios;
    use std::io::Read;
    let pty = openpty(None, None).unwrap();
    // Raw mode, so an injected byte would be readable at once.
    let mut t = termios::tcgetattr(&pty.slave).unwrap();
    termios::cfmakeraw(&mut t);
    termios::tcsetattr(&pty.slave, termios::SetArg::TCSANOW, &t).unwrap();
    let probes = probes();
    let probe = probe();
    let slave = || Stdio::from(pty.slave.try_clone().unwrap());
    let status = Command::new(bin())
        .args(["sandbox", "--read", path_str(&probes), "--"])
        .args(["python3", path_str(&probe), "tiocsti"])
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .status()
        .unwrap();
    assert!(status.success());
    // What the probe printed reached the terminal...
    let mut master = std::fs::File::from(pty.master);
    nix::fcntl::fcntl(
        &master,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut screen = vec![0u8; 4096];
    let n = master.read(&mut screen).unwrap_or(0);
    let screen = String::from_utf8_lossy(&screen[..n]).into_owned();
    assert!(screen.contains("PROBE-START"), "{screen}");
    assert!(
        screen.contains("BLOCKED") && !screen.contains("ESCAPED"),
        "{screen}"
    );
    // ...and nothing was pushed into the terminal's input queue.
    let mut input = std::fs::File::from(pty.slave);
    nix::fcntl::fcntl(
        &input,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut buf = [0u8; 64];
    match input.read(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("terminal input after the call: {other:?} {:?}", &buf),
    }
}

/// Runs python3 with `code` outside any jail and returns its stdout.
fn host_python(code: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const SHM_CREATE: &str = "import ctypes, sys\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
libc.shmat.restype = ctypes.c_void_p\n\
i = libc.shmget(ctypes.c_int(int(sys.argv[1])), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o600))\n\
assert i >= 0, ctypes.get_errno()\n\
a = libc.shmat(ctypes.c_int(i), None, ctypes.c_int(0))\n\
ctypes.memmove(a, sys.argv[2].encode(), len(sys.argv[2]))\n\
print(i)";

const SHM_REMOVE: &str = "import ctypes, sys\n\
libc = ctypes.CDLL(None)\n\
libc.shmctl(ctypes.c_int(int(sys.argv[1])), ctypes.c_int(0), None)";

#[test]
fn host_ipc_is_out_of_reach() {
    require_jail!();
    // A System V segment of the host, same uid, holding a canary.
    let canary = marker("shm");
    let key = (0x4742_0000 | (std::process::id() & 0xffff)).to_string();
    let id = host_python(SHM_CREATE, &[&key, &canary]);
    let id = id.trim().to_string();
    // The probe works: outside the jail it reads the canary.
    let outside = host_python(
        &std::fs::read_to_string(probe()).unwrap(),
        &["sysv_shm", &key],
    );
    let probes = probes();
    let r = sandbox(
        &["--read", path_str(&probes)],
        &["python3", path_str(&probe()), "sysv_shm", &key],
    );
    host_python(SHM_REMOVE, &[&id]);
    assert!(outside.contains(&canary), "the probe is broken: {outside}");
    r.assert_blocked();
    assert!(!r.stdout.contains(&canary), "{r:#?}");
    // An IPC namespace hides it (ENOENT); without namespaces seccomp
    // refuses the call (EPERM).
    let errno = if namespace_free() { "EPERM" } else { "ENOENT" };
    assert!(r.stdout.contains(errno), "{r:#?}");
}

#[test]
fn foreign_architecture_syscalls_kill_the_process() {
    require_jail!();
    let r = attack(&[], &["i386"]);
    r.assert_probe_ran();
    assert!(r.stdout.contains("CALLING-INT80"), "{r:#?}");
    assert!(!r.stdout.contains("ESCAPED"), "{r:#?}");
    assert_eq!(r.json["signal"], libc::SIGSYS, "{r:#?}");
}

#[test]
fn clone3_is_answered_enosys_and_fork_still_works() {
    require_jail!();
    // clone3(NULL, 0) is EINVAL on any kernel that has it; the jail answers
    // ENOSYS so libc falls back to clone, whose flags the filter checks.
    let code = "import ctypes, os\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                print('PROBE-START', flush=True)\n\
                r = libc.syscall(435, None, 0)\n\
                print('clone3', r, ctypes.get_errno(), flush=True)\n\
                pid = os.fork()\n\
                if pid == 0:\n    os._exit(0)\n\
                os.waitpid(pid, 0)\n\
                print('fork-ok')\n";
    let r = sandbox(&[], &["python3", "-c", code]);
    r.assert_probe_ran();
    assert!(
        r.stdout.contains(&format!("clone3 -1 {}", libc::ENOSYS)),
        "{r:#?}"
    );
    assert!(r.stdout.contains("fork-ok"), "{r:#?}");
}

#[test]
fn namespaces_and_mounts_are_refused() {
    require_jail!();
    attack(&[], &["unshare", "0x10000000"]).assert_blocked(); // CLONE_NEWUSER
    attack(&[], &["unshare", "0x40000000"]).assert_blocked(); // CLONE_NEWNET
    attack(&[], &["mount"]).assert_blocked();
    // clone(2) itself with a namespace flag (seccomp's guard decides
    // clone on its flags alone, before the deny list). The probe first:
    // the same raw clone without one forks.
    let plain = attack(&[], &["clone", "0"]);
    plain.assert_probe_ran();
    assert!(plain.stdout.contains("ESCAPED clone 0"), "{plain:#?}");
    attack(&[], &["clone", "0x10000000"]).assert_blocked(); // CLONE_NEWUSER
    attack(&[], &["clone", "0x20000"]).assert_blocked(); // CLONE_NEWNS
}

#[test]
fn exit_status_and_streams_come_back() {
    require_jail!();
    let r = sandbox(&[], &["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(r.code, Some(7));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");
    // Streamed mode (no --json) passes them through.
    let out = Command::new(bin())
        .args(["sandbox", "--", "sh", "-c", "echo streamed; exit 3"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "streamed\n");
    // stdin from a pipe reaches the command.
    let mut child = Command::new(bin())
        .args(["sandbox", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"piped input")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "piped input");
}

#[test]
fn unknown_command_is_a_clear_error() {
    let out = Command::new(bin())
        .args(["sandbox", "--", "no-such-command-gbx"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found"));
}

#[test]
fn file_size_limit_stops_a_disk_filler() {
    require_jail!();
    let dir = tempdir();
    let r = sandbox(
        &["--write", path_str(dir.path()), "--file-size", "1M"],
        &[
            "sh",
            "-c",
            &format!(
                "echo started; head -c 20000000 /dev/zero > {}/big",
                path_str(dir.path())
            ),
        ],
    );
    assert!(r.stdout.contains("started"), "{r:#?}");
    assert_ne!(r.code, Some(0), "{r:#?}");
    let size = std::fs::metadata(dir.path().join("big")).unwrap().len();
    assert!(size <= 1 << 20, "wrote {size} bytes past a 1 MiB limit");
}

#[test]
fn no_capabilities_and_no_new_privs_inside() {
    require_jail!();
    let r = sandbox(&[], &["cat", "/proc/self/status"]);
    assert_eq!(r.code, Some(0), "{r:#?}");
    for field in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let line = r.stdout.lines().find(|l| l.starts_with(field)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    // As root the bounding set is emptied too; unprivileged, the user
    // namespace's full bounding set grants nothing outside it.
    if nix::unistd::geteuid().is_root() {
        let line = r.stdout.lines().find(|l| l.starts_with("CapBnd")).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(r.stdout.contains("NoNewPrivs:\t1"));
    assert!(r.stdout.contains("Seccomp:\t2"));
}

/// Directories under `dir` (to `depth` levels) whose name starts with
/// `prefix`.
fn walk_names(dir: &std::path::Path, prefix: &str, depth: u32) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if depth == 0 {
        return found;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if e.file_name().to_string_lossy().starts_with(prefix) {
            found.push(p);
        } else {
            found.extend(walk_names(&p, prefix, depth - 1));
        }
    }
    found
}

/// What a hostile tool prints to reach the terminal: the clipboard (OSC
/// 52), the window title (OSC 0), a link that lies (OSC 8), cursor-up and
/// erase-line (hiding the line before), a C1 CSI, a bare carriage return;
/// on stdout and, for a failed call, in what glovebox quotes on stderr.
const HOSTILE_PRINT: &str = r#"import sys
seq = "\x1b]52;c;cHduZWQ=\x07\x1b]0;TITLEMARK\x07\x1b]8;;http://evil.test/\x1b\\safe\x1b]8;;\x1b\\\x1b[1A\x1b[2K\u009b2Jcovered\rover"
print("PROBE-RAN " + seq)
if len(sys.argv) > 1:
    sys.stderr.write("PROBE-ERR " + seq + "\n")
    raise SystemExit(3)
"#;

/// `glovebox run ARGS…` of `f` with stdin, stdout and stderr on a new
/// pty: everything that reached the terminal, as bytes.
fn run_on_a_pty(f: &runkit::Fixture, args: &[&str]) -> Vec<u8> {
    use std::io::Read;
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = || Stdio::from(pty.slave.try_clone().unwrap());
    let status = Command::new(bin())
        .arg("--root")
        .arg(&f.root)
        .arg("run")
        .args(args)
        .env("GLOVEBOX_STATE_DIR", f.state())
        .current_dir(&f.cwd)
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .status()
        .unwrap();
    drop(pty.slave);
    let _ = status;
    let mut master = std::fs::File::from(pty.master);
    let mut screen = Vec::new();
    let mut buf = [0u8; 4096];
    // The slave is closed: read until EIO (the pty's end of file).
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        screen.extend_from_slice(&buf[..n]);
    }
    screen
}

/// A hostile tool's escape sequences reach the person's terminal shown,
/// not acted on: `glovebox run` on a pty writes no ESC, BEL or C1 byte
/// of the tool's (its output on stdout, its stderr quoted in the error),
/// and shows them as `\x1b`; `--raw` passes them through. On main the
/// sequences reached the terminal raw: the clipboard was written, the
/// title set, the line before erased.
#[test]
fn a_tools_escape_sequences_reach_a_terminal_escaped_unless_raw() {
    require_jail!();
    let f = runkit::Fixture::new();
    f.file("hostile.py", HOSTILE_PRINT);
    f.tool(&runkit::command_tool(
        "hostile",
        runkit::schema(json!({"fail": {"type": "string"}})),
        json!({"entrypoint": "python3", "args": ["hostile.py"]}),
        runkit::read_root(),
    ));
    f.tool(&runkit::command_tool(
        "hostile_fails",
        runkit::schema(json!({})),
        json!({"entrypoint": "python3", "args": ["hostile.py", "fail"]}),
        runkit::read_root(),
    ));
    let raw_bytes = |screen: &[u8]| {
        let text = String::from_utf8_lossy(screen);
        screen.contains(&0x1b) || screen.contains(&0x07) || text.contains('\u{9b}')
    };
    // Its output on stdout; a failed call's stderr quoted in the error.
    for (tool, probe) in [("hostile", "PROBE-RAN"), ("hostile_fails", "PROBE-ERR")] {
        let screen = run_on_a_pty(&f, &[tool]);
        let text = String::from_utf8_lossy(&screen).into_owned();
        // The probe ran, and what it printed is on the screen, escaped.
        assert!(
            text.contains(&format!("{probe} \\x1b]52;c;cHduZWQ=\\x07")),
            "{tool}: {text:?}"
        );
        assert!(text.contains("TITLEMARK"), "{tool}: {text:?}");
        assert!(
            !raw_bytes(&screen),
            "{tool}: a raw escape reached the terminal: {text:?}"
        );
    }
    // --raw: the person asked for the bytes as they are.
    let screen = run_on_a_pty(&f, &["hostile", "--raw"]);
    assert!(
        raw_bytes(&screen) && screen.windows(6).any(|w| w == b"\x1b]52;c"),
        "--raw did not pass the tool's output through: {:?}",
        String::from_utf8_lossy(&screen)
    );
}
