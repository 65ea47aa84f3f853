//! The unit tests of [`super`]: registrations seen and removed, entries
//! that count and those that do not.

#![allow(clippy::unwrap_used)]

use super::*;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

#[test]
fn a_registration_is_seen_and_removed() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reg = register(addr).unwrap();
    assert!(load().is_own(addr));
    drop(reg);
    assert!(!load().is_own(addr));
}

#[test]
fn the_current_registry_sees_a_new_registration_at_once() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // Load (and perhaps cache) before the registration.
    assert!(!current().is_own(addr));
    let reg = register(addr).unwrap();
    assert!(current().is_own(addr));
    drop(reg);
    assert!(!current().is_own(addr));
}

#[test]
fn a_server_between_its_record_and_its_listen_counts_once_it_listens() {
    use nix::sys::socket::{
        bind, getsockname, listen, socket, AddressFamily, Backlog, SockFlag, SockType, SockaddrIn,
    };
    // Bound, recorded, and only then listening, as `serve` does.
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
    let bound: SockaddrIn = getsockname(fd.as_raw_fd()).unwrap();
    let addr = SocketAddr::from(std::net::SocketAddrV4::from(bound));
    let reg = register(addr).unwrap();
    // Long enough for the directory's change to be settled: a load
    // now could be reused, were it not pending.
    std::thread::sleep(RACY * 2);
    assert!(!current().is_own(addr), "not listening yet");
    listen(&fd, Backlog::new(1).unwrap()).unwrap();
    assert!(current().is_own(addr), "a stale load was reused");
    drop(reg);
}

/// A pid that was alive and is not any more.
fn dead_pid() -> i32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    pid
}

#[test]
fn an_entry_counts_only_for_its_live_process_run_by_its_owner() {
    let me = std::process::id() as i32;
    let p = Process::read(me).unwrap();
    assert_eq!(p.euid, nix::unistd::geteuid().as_raw());
    let entry = format!("127.0.0.1:1\nstart={}\n", p.start);
    assert!(entry_counts(&entry, p.euid, Some(p)));
    // Root's entry counts for any live process it names.
    assert!(entry_counts(&entry, 0, Some(Process { euid: 1000, ..p })));
    // Written by an older process that had the pid.
    let older = format!("127.0.0.1:1\nstart={}\n", p.start + 1);
    assert!(!entry_counts(&older, p.euid, Some(p)));
    // No start time recorded: nothing proves whose entry it is.
    assert!(!entry_counts("127.0.0.1:1\n", p.euid, Some(p)));
    // A dead (or unreadable) pid.
    assert!(!entry_counts(&entry, p.euid, None));
    assert_eq!(Process::read(dead_pid()), None);
    // Another user's file naming this process; a user's file naming
    // another user's process.
    let stranger = if p.euid == 12345 { 12346 } else { 12345 };
    assert!(!entry_counts(&entry, stranger, Some(p)));
    let strangers = Process {
        euid: stranger + 1,
        ..p
    };
    assert!(!entry_counts(&entry, stranger, Some(strangers)));
}

#[test]
fn entries_that_no_longer_count_are_swept() {
    let me = std::process::id() as i32;
    let start = start_time(me).unwrap();
    let dead = dead_pid();
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join(format!("{me}-1-a"));
    let reused = dir.path().join(format!("{me}-1-b"));
    let gone = dir.path().join(format!("{dead}-1-c"));
    let unstarted = dir.path().join(format!("{me}-1-d"));
    let nameless = dir.path().join("x-1-e");
    fs::write(&keep, format!("127.0.0.1:1\nstart={start}\n")).unwrap();
    fs::write(&reused, format!("127.0.0.1:1\nstart={}\n", start + 1)).unwrap();
    fs::write(&gone, format!("127.0.0.1:1\nstart={start}\n")).unwrap();
    fs::write(&unstarted, "127.0.0.1:1\n").unwrap();
    fs::write(&nameless, format!("127.0.0.1:1\nstart={start}\n")).unwrap();
    sweep(dir.path());
    assert!(keep.exists());
    for p in [reused, gone, unstarted, nameless] {
        assert!(!p.exists(), "{} was kept", p.display());
    }
}

/// A process of another user (`sleep`, as uid `uid`), killed on drop.
struct Other(std::process::Child);

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), None).unwrap();
}

/// Whether an entry named `name` holding `text` (owned by `owner`
/// when given) counts for `addr`, alone in a fresh directory.
fn counts_alone(name: &str, text: &str, owner: Option<u32>, addr: SocketAddr) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    fs::write(&p, text).unwrap();
    if let Some(uid) = owner {
        chown(&p, uid);
    }
    load_from(&[dir.path()]).is_own(addr)
}

#[test]
fn forged_entries_and_untrusted_directories_are_not_read() {
    let me = std::process::id() as i32;
    let start = start_time(me).unwrap();
    let euid = nix::unistd::geteuid().as_raw();
    let mine = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = mine.local_addr().unwrap();
    let text = format!("{addr}\nstart={start}\n");
    // The probe: a genuine entry is read.
    assert!(counts_alone(&format!("{me}-1-a"), &text, None, addr));
    // Forged: a dead pid, no start time, no pid, an address nobody
    // listens on, a remote address.
    let dead = dead_pid();
    assert!(!counts_alone(&format!("{dead}-1-a"), &text, None, addr));
    let unstarted = format!("{addr}\n");
    assert!(!counts_alone(&format!("{me}-1-a"), &unstarted, None, addr));
    assert!(!counts_alone("x-1-a", &text, None, addr));
    let idle = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let text_idle = format!("{idle}\nstart={start}\n");
    assert!(!counts_alone(&format!("{me}-1-a"), &text_idle, None, idle));
    let remote: SocketAddr = "93.184.216.34:443".parse().unwrap();
    let text_remote = format!("{remote}\nstart={start}\n");
    assert!(!counts_alone(
        &format!("{me}-1-a"),
        &text_remote,
        None,
        remote
    ));
    // A link to a genuine entry elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let real = elsewhere.path().join("real");
    fs::write(&real, &text).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join(format!("{me}-1-a"))).unwrap();
    assert!(!load_from(&[dir.path()]).is_own(addr));
    if euid != 0 {
        eprintln!("SKIPPED (needs root to make files of other users): entries owned by another user, untrusted directories");
        return;
    }
    // A file owned by another user naming this (root's) process.
    assert!(!counts_alone(
        &format!("{me}-1-a"),
        &text,
        Some(65534),
        addr
    ));
    // Another user's live process with a listener of its own.
    let mut child = std::process::Command::new("python3")
        .args(["-c", "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint(s.getsockname()[1], flush=True)\ntime.sleep(30)\n"])
        .uid(65534)
        .gid(65534)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    {
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
    }
    let other = Other(child);
    let pid = other.0.id() as i32;
    let theirs: SocketAddr = format!("127.0.0.1:{}", line.trim()).parse().unwrap();
    let p = Process::read(pid).unwrap();
    assert_eq!(p.euid, 65534);
    let text_theirs = format!("{theirs}\nstart={}\n", p.start);
    // The control: their entry, owned by them, counts.
    assert!(counts_alone(
        &format!("{pid}-1-a"),
        &text_theirs,
        Some(65534),
        theirs
    ));
    // Owned by a third user; or naming their listener from an entry
    // of root's own process (root does not listen there).
    assert!(!counts_alone(
        &format!("{pid}-1-a"),
        &text_theirs,
        Some(1),
        theirs
    ));
    let text_root = format!("{theirs}\nstart={start}\n");
    assert!(!counts_alone(
        &format!("{me}-1-a"),
        &text_root,
        None,
        theirs
    ));
    drop(other);
    // A world-writable directory of another user is not read at all,
    // not even root's genuine entry in it; the same directory owned
    // by root, or not world-writable, is.
    let shared = tempfile::tempdir().unwrap();
    let s = shared.path();
    fs::write(s.join(format!("{me}-1-a")), &text).unwrap();
    fs::set_permissions(s, fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(load_from(&[s]).is_own(addr));
    chown(s, 65534);
    assert!(!load_from(&[s]).is_own(addr));
    fs::set_permissions(s, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(load_from(&[s]).is_own(addr));
    drop(mine);
}

#[test]
fn listening_sockets_are_read_from_the_kernel_tables() {
    let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1EC6 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0\n   1: 0100007F:1EC7 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n";
    let want: SocketAddr = "127.0.0.1:7878".parse().unwrap();
    if cfg!(target_endian = "little") {
        assert_eq!(parse_tcp_table(v4, false), vec![(want, 1000)]);
    }
    let l = std::net::TcpListener::bind("[::1]:0")
        .or_else(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let a = l.local_addr().unwrap();
    let euid = nix::unistd::geteuid().as_raw();
    assert!(listening_sockets().contains(&(a, euid)), "{a} of {euid}");
    // Both ways of asking agree on it.
    let diag = diag_listening().unwrap();
    assert!(diag.contains(&(a, euid)), "{a} of {euid}: {diag:?}");
    let mut tables = Vec::new();
    for (file, v6) in [("/proc/self/net/tcp", false), ("/proc/self/net/tcp6", true)] {
        tables.extend(parse_tcp_table(&fs::read_to_string(file).unwrap(), v6));
    }
    assert!(tables.contains(&(a, euid)), "{a} of {euid}: {tables:?}");
}

#[test]
fn a_recent_change_is_not_trusted_to_stay_put() {
    let now = SystemTime::now();
    let at = |t: SystemTime| {
        let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        Some((1, 1, d.as_secs() as i64, i64::from(d.subsec_nanos())))
    };
    assert!(settled(&at(now - Duration::from_secs(5)), now));
    assert!(!settled(&at(now - RACY / 2), now));
    assert!(!settled(&at(now + Duration::from_secs(1)), now));
    assert!(settled(&None, now));
}
