use super::*;

#[test]
fn without_a_tree_chmod_goes_to_the_supervisor_and_nowhere_else() {
    use crate::jail::sys;
    fn attempt(deny: bool) -> i32 {
        // The test's own file (the path is fixed: this runs in a child).
        let path = c"/tmp/glovebox-seccomp-metadata-test";
        if sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1).is_err() {
            return 100;
        }
        let Ok(p) = filter(false, deny) else {
            return 101;
        };
        if install(p).is_err() {
            return 102;
        }
        match install_notify(p) {
            // Nobody answers: the kernel fails the call (ENOSYS) once
            // the listener is gone; it never runs unchecked.
            Ok(Some(fd)) => sys::close(fd),
            Ok(None) => {}
            Err(_) => return 103,
        }
        sys::try_chmod(path, if deny { 0o640 } else { 0o600 })
    }
    let file = std::path::Path::new("/tmp/glovebox-seccomp-metadata-test");
    std::fs::write(file, "x").unwrap();
    // Build both filters here, not in the child: a fork taken while
    // another test thread is filling the same cache would leave the
    // child waiting on that thread forever.
    assert!(filter(false, false).is_ok() && filter(false, true).is_ok());
    // The probe: without the metadata rules the same chmod works.
    assert_eq!(sys::in_child(|| attempt(false)), 0);
    assert_eq!(sys::in_child(|| attempt(true)), libc::ENOSYS);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(file).unwrap().permissions().mode() & 0o777,
        0o600,
        "only the unfiltered child changed the mode"
    );
    std::fs::remove_file(file).unwrap();
}

/// Runs a classic BPF seccomp program on one call, as the kernel
/// does: the result and how many instructions ran.
/// The `AUDIT_ARCH_*` value of this build's architecture (what the
/// kernel puts in `seccomp_data.arch`).
fn native_arch() -> u32 {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
    if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    }
}

fn run(prog: &[seccompiler::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> (u32, usize) {
    let word = |off: u32| -> u32 {
        match off {
            0 => nr,
            4 => arch,
            16..=63 => {
                let a = args[((off - 16) / 8) as usize];
                if (off - 16).is_multiple_of(8) {
                    a as u32
                } else {
                    (a >> 32) as u32
                }
            }
            _ => panic!("load of seccomp_data offset {off}"),
        }
    };
    let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
    loop {
        let i = &prog[pc];
        steps += 1;
        pc += 1;
        match i.code {
            0x20 => acc = word(i.k),
            0x06 => return (i.k, steps),
            0x05 => pc += i.k as usize,
            0x54 => acc &= i.k,
            0x15 | 0x25 | 0x35 | 0x45 => {
                let taken = match i.code {
                    0x15 => acc == i.k,
                    0x25 => acc > i.k,
                    0x35 => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += if taken { i.jt } else { i.jf } as usize;
            }
            c => panic!("opcode {c:#x} not modelled"),
        }
    }
}

#[test]
fn the_fast_allow_search_decides_every_call_as_the_deny_list_does() {
    let arch = native_arch();
    // Arguments that hit the deny list's argument rules (terminal
    // ioctls, socket families and types, CLONE_NEW* flags, set-id modes
    // in every position) and pseudo-random ones.
    let mut vectors: Vec<[u64; 6]> = vec![[0; 6]];
    for v in [
        TIOCSTI,
        TIOCLINUX,
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_NETLINK as u64,
        libc::AF_VSOCK as u64,
        libc::CLONE_NEWUSER as u64,
        libc::CLONE_NEWNET as u64,
        0o4755,
        0o2755,
        libc::O_CREAT as u64,
        libc::O_TMPFILE as u64,
        // CLONE_NEWTIME; bits of the high word only; every flag at once.
        0x80,
        0xffff_ffff_0000_0000,
        u64::MAX,
        2,
    ] {
        for at in 0..4 {
            let mut a = [0u64; 6];
            a[at] = v;
            vectors.push(a);
            a[(at + 1) % 6] = 0o4777 | libc::O_CREAT as u64;
            vectors.push(a);
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..24 {
        let mut a = [0u64; 6];
        for v in &mut a {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x;
        }
        vectors.push(a);
    }
    let mut calls: Vec<u32> = (0..=600).collect();
    calls.extend([0x4000_0000, 0x4000_0001, u32::MAX]);
    for sockets in [
        Sockets::None,
        Sockets::NoUnix,
        Sockets::All,
        Sockets::Brokered,
    ] {
        for deny_metadata in [false, true] {
            let fast = build_with(sockets, deny_metadata, true, false)
                .unwrap()
                .deny;
            let slow = build_with(sockets, deny_metadata, false, false)
                .unwrap()
                .deny;
            // The calls refused outright and `clone`/`unshare` are decided
            // by the guard: the program is shorter than seccompiler's list
            // (which holds them all), search included; under 70 % of it
            // but behind the broker (whose socket and send rules are
            // conditional).
            let bound = if sockets == Sockets::Brokered { 10 } else { 7 };
            assert!(
                fast.len() * 10 < slow.len() * bound,
                "{} vs {}",
                fast.len(),
                slow.len()
            );
            for a in [arch, 0x4000_0003] {
                for nr in &calls {
                    for args in &vectors {
                        assert_eq!(
                            run(&fast, a, *nr, *args).0,
                            run(&slow, a, *nr, *args).0,
                            "{sockets:?} metadata={deny_metadata} arch={a:#x} nr={nr} args={args:?}"
                        );
                    }
                }
            }
            // The probe: `read` is allowed after a short search in the
            // fast program, after the whole chain in the other.
            let (allow, fast_steps) = run(&fast, arch, libc::SYS_read as u32, [0; 6]);
            let (_, slow_steps) = run(&slow, arch, libc::SYS_read as u32, [0; 6]);
            assert_eq!(allow, libc::SECCOMP_RET_ALLOW);
            assert!(fast_steps < 24, "{fast_steps} steps");
            assert!(slow_steps > 3 * fast_steps, "{slow_steps} vs {fast_steps}");
            // The hot calls with argument rules, which the kernel
            // cannot cache: an `openat` without O_CREAT and a `clone`
            // of a thread are allowed within a few instructions; the
            // same calls with the flags the rules look at go on to the
            // deny list (and are decided as it decides, above).
            let read_only = [
                0,
                0,
                libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64,
                0,
                0,
                0,
            ];
            let thread = [0x3d_0f00, 0, 0, 0, 0, 0];
            for (nr, args) in [(libc::SYS_openat, read_only), (libc::SYS_clone, thread)] {
                let (r, steps) = run(&fast, arch, nr as u32, args);
                assert_eq!(r, libc::SECCOMP_RET_ALLOW, "{nr}");
                assert!(steps <= 10, "{nr}: {steps} steps");
                let (_, slow_steps) = run(&slow, arch, nr as u32, args);
                assert!(slow_steps > 3 * steps, "{nr}: {slow_steps} vs {steps}");
            }
            let creating = [0, 0, libc::O_CREAT as u64, 0o644, 0, 0];
            let (r, steps) = run(&fast, arch, libc::SYS_openat as u32, creating);
            assert_eq!(r, libc::SECCOMP_RET_ALLOW);
            assert!(steps > 10, "O_CREAT goes on to the set-id rules");
            // And a refused call is still refused.
            let (ptrace, _) = run(&fast, arch, libc::SYS_ptrace as u32, [0; 6]);
            assert_eq!(ptrace, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        }
    }
}

#[test]
fn the_brokers_jail_makes_only_tcp_sockets_never_listens_and_notifies_connect() {
    let arch = native_arch();
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let allow = libc::SECCOMP_RET_ALLOW;
    let f = build(Sockets::Brokered, true).unwrap();
    let deny = |nr: libc::c_long, args: [u64; 6]| run(&f.deny, arch, nr as u32, args).0;
    let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
    let stream = libc::SOCK_STREAM as u64;
    let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u64;
    for fam in [inet, inet6] {
        assert_eq!(deny(libc::SYS_socket, [fam, stream, 0, 0, 0, 0]), allow);
        assert_eq!(
            deny(libc::SYS_socket, [fam, stream | flags, 6, 0, 0, 0]),
            allow
        );
        for ty in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
            assert_eq!(
                deny(libc::SYS_socket, [fam, ty as u64 | flags, 0, 0, 0, 0]),
                eperm
            );
        }
        for proto in [132u64, 262, 17] {
            assert_eq!(deny(libc::SYS_socket, [fam, stream, proto, 0, 0, 0]), eperm);
        }
    }
    let route = [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0];
    assert_eq!(deny(libc::SYS_socket, route), allow);
    let unix = [libc::AF_UNIX as u64, stream, 0, 0, 0, 0];
    assert_eq!(deny(libc::SYS_socket, unix), eperm);
    assert_eq!(deny(libc::SYS_listen, [3, 1, 0, 0, 0, 0]), eperm);
    let fo = libc::MSG_FASTOPEN as u64;
    assert_eq!(deny(libc::SYS_sendto, [3, 0, 1, fo, 0x1000, 16]), eperm);
    assert_eq!(deny(libc::SYS_sendto, [3, 0, 1, 0, 0, 0]), allow);
    assert_eq!(deny(libc::SYS_sendmsg, [3, 0, fo | 0x40, 0, 0, 0]), eperm);
    assert_eq!(deny(libc::SYS_sendmsg, [3, 0, 0x40, 0, 0, 0]), allow);
    assert_eq!(deny(libc::SYS_sendmmsg, [3, 0, 1, fo, 0, 0]), eperm);
    // `connect` goes to the supervisor; the metadata family too.
    let notify = f.notify.expect("a notify program");
    let notified = libc::SECCOMP_RET_USER_NOTIF;
    assert_eq!(
        run(notify, arch, libc::SYS_connect as u32, [0; 6]).0,
        notified
    );
    assert_eq!(
        run(notify, arch, libc::SYS_fchmod as u32, [0; 6]).0,
        notified
    );
    assert_eq!(run(notify, arch, libc::SYS_read as u32, [0; 6]).0, allow);
    // Elsewhere `connect` is the kernel's.
    for sockets in [Sockets::None, Sockets::NoUnix, Sockets::All] {
        for deny_metadata in [false, true] {
            let f = build(sockets, deny_metadata).unwrap();
            assert_eq!(f.notify.is_some(), deny_metadata, "{sockets:?}");
            if let Some(n) = f.notify {
                assert_eq!(run(n, arch, libc::SYS_connect as u32, [0; 6]).0, allow);
            }
        }
    }
    // A brokered filter always carries its notify program.
    assert!(build(Sockets::Brokered, false).unwrap().notify.is_some());
}

#[test]
fn openat2_is_enosys_in_every_program_whatever_its_arguments() {
    let arch = native_arch();
    let nosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let nr = libc::SYS_openat2 as u32;
    for sockets in [
        Sockets::None,
        Sockets::NoUnix,
        Sockets::All,
        Sockets::Brokered,
    ] {
        for deny_metadata in [false, true] {
            for fast in [true, false] {
                let prog = build_with(sockets, deny_metadata, fast, false)
                    .unwrap()
                    .deny;
                for args in [[0; 6], [u64::MAX; 6], [0, 0x1000, 0x2000, 24, 0, 0]] {
                    assert_eq!(run(&prog, arch, nr, args).0, nosys, "{sockets:?}");
                }
                // The control: `openat` itself is allowed, and refused
                // only with a set-id mode.
                let creat = libc::O_CREAT as u64;
                let openat = libc::SYS_openat as u32;
                let allowed = run(&prog, arch, openat, [0, 0, creat, 0o755, 0, 0]).0;
                assert_eq!(allowed, libc::SECCOMP_RET_ALLOW);
                let setuid = run(&prog, arch, openat, [0, 0, creat, 0o4755, 0, 0]).0;
                assert_eq!(setuid, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
            }
        }
    }
    // The container profile (which runs glovebox's supervisor, whose
    // own resolution uses openat2) allows it, as container runtimes do.
    let container = container_program().unwrap();
    assert_eq!(run(&container, arch, nr, [0; 6]).0, libc::SECCOMP_RET_ALLOW);
    let clone3 = run(&container, arch, libc::SYS_clone3 as u32, [0; 6]).0;
    assert_eq!(clone3, nosys);
}

#[test]
fn a_jailed_openat2_creating_a_setuid_file_gets_enosys_and_creates_nothing() {
    use crate::jail::sys;
    use nix::fcntl::{OFlag, OpenHow};
    use nix::sys::stat::Mode;
    // Paths are fixed: these run in forked children.
    const PLAIN: &str = "/tmp/glovebox-seccomp-openat2-plain";
    const SETUID: &str = "/tmp/glovebox-seccomp-openat2-setuid";
    fn create(path: &str, mode: u32) -> i32 {
        let how = OpenHow::new()
            .flags(OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_CLOEXEC)
            .mode(Mode::from_bits_truncate(mode));
        match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how) {
            Ok(_) => 0,
            Err(e) => e as i32,
        }
    }
    fn jailed(deny_metadata: bool) -> i32 {
        if sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1).is_err() {
            return 100;
        }
        let Ok(p) = filter(false, deny_metadata) else {
            return 101;
        };
        if install(p).is_err() {
            return 102;
        }
        match install_notify(p) {
            Ok(Some(fd)) => sys::close(fd),
            Ok(None) => {}
            Err(_) => return 103,
        }
        create(SETUID, 0o4755)
    }
    for p in [PLAIN, SETUID] {
        let _ = std::fs::remove_file(p);
    }
    assert!(filter(false, false).is_ok() && filter(false, true).is_ok());
    // The probe: openat2 works here without the filter.
    assert_eq!(sys::in_child(|| create(PLAIN, 0o644)), 0);
    assert!(std::path::Path::new(PLAIN).exists());
    assert_eq!(sys::in_child(|| jailed(false)), libc::ENOSYS);
    assert_eq!(sys::in_child(|| jailed(true)), libc::ENOSYS);
    assert!(!std::path::Path::new(SETUID).exists(), "a file was created");
    std::fs::remove_file(PLAIN).unwrap();
}

#[test]
fn compiles_for_both_network_settings() {
    let off = filter(false, false).unwrap();
    let on = filter(true, false).unwrap();
    assert!(off.deny.len() > on.deny.len(), "network off denies more");
    let proxied = filter_for(Sockets::NoUnix, false).unwrap();
    assert!(
        proxied.deny.len() > on.deny.len(),
        "no unix sockets behind the proxy"
    );
    let meta = filter(true, true).unwrap();
    assert!(
        meta.deny.len() > on.deny.len(),
        "the metadata family adds rules"
    );
    assert!(!std::ptr::eq(meta, on));
    // The x32 guard sits right after the architecture check.
    assert_eq!(off.deny[4].k, 0x4000_0000);
}

#[test]
fn a_guard_that_cannot_be_made_fails_the_program_instead_of_leaving_it_out() {
    // Too many ENOSYS numbers for 8-bit jumps, even without the search:
    // no guard fits, and a program without it would run them unchecked.
    let prog = build(Sockets::None, false).unwrap().deny;
    let mut p = prog.clone();
    let nosys: Vec<libc::c_long> = (1000..1300).collect();
    assert!(insert_guard(&mut p, None, &[], &nosys, &[]).is_err());
    assert_eq!(p, prog, "nothing spliced in");
    // A program without seccompiler's architecture check.
    let mut short = prog[..2].to_vec();
    assert!(insert_guard(&mut short, None, &[], &NOSYS, &[]).is_err());
    // The jail's own guard fits.
    let mut p = prog[..3].to_vec();
    assert!(insert_guard(&mut p, None, &[], &NOSYS, &[]).is_ok());
}

#[test]
fn the_jail_and_the_container_filter_refuse_the_same_mount_family() {
    let denied = always_denied();
    for nr in MOUNT_CALLS {
        assert!(denied.contains(&nr), "{nr} not refused in a jail");
    }
    // chroot stays the jail's own (container runtimes allow it).
    assert!(denied.contains(&libc::SYS_chroot));
    assert!(!MOUNT_CALLS.contains(&libc::SYS_chroot));
}

#[test]
fn socketpairs_are_unix_stream_or_seqpacket_only_whatever_the_flags() {
    let arch = native_arch();
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u64;
    for sockets in [Sockets::None, Sockets::NoUnix, Sockets::Brokered] {
        for fast in [true, false] {
            let prog = build_with(sockets, false, fast, false).unwrap().deny;
            let pair = |fam: u64, ty: u64| {
                run(
                    &prog,
                    arch,
                    libc::SYS_socketpair as u32,
                    [fam, ty, 0, 0, 0, 0],
                )
                .0
            };
            for ty in 0u64..16 {
                let allowed = ty == libc::SOCK_STREAM as u64 || ty == libc::SOCK_SEQPACKET as u64;
                for t in [ty, ty | flags] {
                    let want = if allowed {
                        libc::SECCOMP_RET_ALLOW
                    } else {
                        eperm
                    };
                    assert_eq!(
                        pair(libc::AF_UNIX as u64, t),
                        want,
                        "{sockets:?} type {t:#x}"
                    );
                    assert_eq!(
                        pair(libc::AF_INET as u64, t),
                        eperm,
                        "{sockets:?} type {t:#x}"
                    );
                }
            }
        }
    }
}

#[test]
fn without_a_pid_namespace_limits_and_priorities_name_only_the_caller() {
    let arch = native_arch();
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let (prlimit, setpriority, ioprio_set) = (
        libc::SYS_prlimit64 as u32,
        libc::SYS_setpriority as u32,
        libc::SYS_ioprio_set as u32,
    );
    let (process, pgrp, user) = (
        libc::PRIO_PROCESS as u64,
        libc::PRIO_PGRP as u64,
        libc::PRIO_USER as u64,
    );
    // (call, args, refused without a PID namespace)
    let cases: [(u32, [u64; 6], bool); 12] = [
        (prlimit, [0, 7, 0x1000, 0, 0, 0], false),
        (prlimit, [0, 7, 0, 0x1000, 0, 0], false),
        (prlimit, [4242, 7, 0x1000, 0, 0, 0], true),
        (prlimit, [4242, 7, 0, 0x1000, 0, 0], true),
        // Only the low 32 bits are the pid, as the kernel reads them.
        (prlimit, [0xffff_ffff, 7, 0, 0, 0, 0], true),
        (setpriority, [process, 0, 10, 0, 0, 0], false),
        (setpriority, [process, 4242, 10, 0, 0, 0], true),
        (setpriority, [pgrp, 0, 10, 0, 0, 0], true),
        (setpriority, [user, 0, 10, 0, 0, 0], true),
        (ioprio_set, [1, 0, 0x6007, 0, 0, 0], false),
        (ioprio_set, [1, 4242, 0x6007, 0, 0, 0], true),
        (ioprio_set, [3, 0, 0x6007, 0, 0, 0], true),
    ];
    for sockets in [Sockets::None, Sockets::NoUnix, Sockets::Brokered] {
        for fast in [true, false] {
            for no_pid_ns in [false, true] {
                let prog = build_with(sockets, no_pid_ns, fast, false).unwrap().deny;
                for (nr, args, refused) in cases {
                    let want = if refused && no_pid_ns {
                        eperm
                    } else {
                        libc::SECCOMP_RET_ALLOW
                    };
                    assert_eq!(
                        run(&prog, arch, nr, args).0,
                        want,
                        "{sockets:?} fast={fast} no_pid_ns={no_pid_ns} nr={nr} {args:?}"
                    );
                }
            }
        }
    }
}
