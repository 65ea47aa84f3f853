//! System calls of the supervisor: creating the child (`clone`, a
//! vfork-style clone), waiting for it through its pidfd, the seccomp
//! notification listener's protocol (the metadata supervisor), the kernel
//! probe, and the file operations the supervisor performs on a jail's
//! behalf. These may allocate.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::*;

/// What `clone_process` returned.
enum Forked {
    /// In the parent: a pidfd for the child.
    Parent { pidfd: OwnedFd },
    /// In the child.
    Child,
}

/// Creates a child process like `fork`, in the namespaces named by `flags`
/// (`CLONE_NEW*`), with a pidfd for the parent.
///
/// # Safety
///
/// In the child, only async-signal-safe operations may be performed until
/// `execve` or `_exit`: no allocation, no locks, no thread-local state.
unsafe fn clone_process(flags: libc::c_ulong) -> io::Result<Forked> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: raw clone(2) with a NULL stack behaves like fork(2): the child
    // gets a copy of the address space and continues here. CLONE_PIDFD makes
    // the kernel store a pidfd in `pidfd` (the parent_tid argument on
    // x86_64/aarch64), which is a valid writable int. The caller upholds the
    // async-signal-safety of the child.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::CLONE_PIDFD as libc::c_ulong | libc::SIGCHLD as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            &mut pidfd as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if rc == 0 {
        return Ok(Forked::Child);
    }
    // SAFETY: the kernel returned a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Forked::Parent { pidfd })
}

/// The child's stack for [`clone_vfork`]: the steps between clone and exec
/// are flat system calls on prepared data.
const VFORK_STACK: usize = 256 * 1024;

/// Creates a child in the namespaces named by `flags` (`CLONE_NEW*`) that
/// shares this process's memory until it calls `execve` or exits, the
/// calling thread suspended meanwhile (`CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does): no page table is copied and nothing is
/// copied-on-write afterwards, however large the supervisor. `child` runs
/// in the child on a stack of its own and must not return (the child
/// exits with 127 if it does). Returns a pidfd
/// once the child has exec'd or exited.
///
/// # Safety
///
/// `child` runs with the parent's memory while the parent's other threads
/// keep running: it may only make async-signal-safe system calls on data
/// prepared before the call, must not allocate, lock or write memory the
/// parent uses, and must end in `execve` or `_exit`. The child's signal
/// handlers, fds, working directory and credentials are its own (no
/// `CLONE_SIGHAND`, `CLONE_FILES`, `CLONE_FS`, `CLONE_THREAD`).
unsafe fn clone_vfork<F>(flags: libc::c_ulong, child: &mut F) -> io::Result<OwnedFd>
where
    F: FnMut(),
{
    extern "C" fn trampoline<F: FnMut()>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut F` given to `clone_vfork`, whose frame
        // (and so the closure) stays alive while the parent is suspended.
        let f = unsafe { &mut *arg.cast::<F>() };
        f();
        // `child` must not return; should it, the child ends here.
        exit_now(127)
    }
    let mut stack = vec![0u8; VFORK_STACK];
    // The stack grows down: its top, 16-byte aligned.
    let top = (stack.as_mut_ptr() as usize + VFORK_STACK) & !15;
    let mut pidfd: libc::c_int = -1;
    let all = flags
        | (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_ulong;
    let Ok(all) = libc::c_int::try_from(all) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: `top` is the top of a writable buffer that outlives the child's
    // use of it (the parent resumes only when the child has exec'd or
    // exited); `child` is a valid `&mut F` for `trampoline::<F>`; with
    // CLONE_PIDFD the kernel stores a pidfd through the parent_tid argument,
    // a valid writable int. The caller upholds the child's restrictions.
    let rc = unsafe {
        libc::clone(
            trampoline::<F>,
            top as *mut libc::c_void,
            all,
            (child as *mut F).cast::<libc::c_void>(),
            &mut pidfd as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(stack);
    // SAFETY: the kernel returned a fresh pidfd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd) })
}

/// Creates the jail's child in the namespaces named by `flags`
/// (`CLONE_NEW*`), running [`crate::jail::child::main`] on `p` (the
/// steps between clone and exec), and returns its pidfd. Vfork-style
/// ([`clone_vfork`]: the calling thread suspended until the child has
/// exec'd or exited), except for the namespace-free jail's reaper
/// (`p.reaper`), which never execs: fork-style ([`clone_process`]), so
/// that the supervisor is not suspended for the call.
pub(in crate::jail) fn clone_child(
    flags: libc::c_ulong,
    p: &mut crate::jail::child::Prepared,
) -> io::Result<OwnedFd> {
    if p.reaper {
        // SAFETY: the child branch runs only `child::main`, which never
        // returns: its steps call only the wrappers of `sys::child` and
        // `sys::reaper` (one async-signal-safe system call each, on data
        // `p` prepared before the clone: no allocation, no lock) and it
        // ends in `execve` or `_exit`.
        match unsafe { clone_process(flags) }? {
            Forked::Child => crate::jail::child::main(p),
            Forked::Parent { pidfd } => Ok(pidfd),
        }
    } else {
        // SAFETY: as above, and `child::main` writes no memory of the
        // supervisor's (it shares the address space until exec): its
        // steps read `p` and write only on their own stack and into the
        // kernel.
        unsafe { clone_vfork(flags, &mut || crate::jail::child::main(p)) }
    }
}

/// The target of the symbolic link `fd` (an `O_PATH | O_NOFOLLOW` handle
/// on it): `readlinkat(fd, "")`. Supervisor side (allocates).
pub fn read_link_fd(fd: RawFd) -> io::Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf is writable for its length; "" is NUL-terminated.
    let n = unsafe {
        libc::readlinkat(
            fd,
            c"".as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    buf.truncate(n);
    Ok(std::ffi::OsString::from_vec(buf).into())
}

/// The pid (in this process's namespace) of the process behind `pidfd`,
/// from `/proc/self/fdinfo` (`None` when it is gone).
pub fn pidfd_pid(pidfd: RawFd) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{pidfd}")).ok()?;
    let pid: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()?;
    u32::try_from(pid).ok()
}

/// Sends `SIGKILL` to the process behind `pidfd`.
pub fn pidfd_kill(pidfd: RawFd) -> io::Result<()> {
    pidfd_signal(pidfd, libc::SIGKILL)
}

/// Sends `sig` to the process behind `pidfd`.
pub fn pidfd_signal(pidfd: RawFd, sig: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal(2) with a NULL siginfo and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Reaps the child behind `pidfd` (blocking) and reports how it ended.
pub fn pidfd_wait(pidfd: RawFd) -> io::Result<Exit> {
    loop {
        // SAFETY: siginfo_t is plain data; zeroed is a valid initial value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(P_PIDFD) writes into `info`, valid for the call.
        let rc =
            unsafe { libc::waitid(libc::P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // SAFETY: after a successful waitid with WEXITED the kernel filled
        // si_code and si_status.
        let (code, status) = unsafe { (info.si_code, info.si_status()) };
        return Ok(if code == libc::CLD_EXITED {
            Exit::Code(status)
        } else {
            Exit::Signal(status)
        });
    }
}

/// Sets `O_NONBLOCK` on an fd the parent owns.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd number has no memory effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The effective uid and gid of this process.
pub fn ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// True when `fd` refers to a terminal.
pub fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty on an fd number has no memory effects.
    unsafe { libc::isatty(fd) == 1 }
}

/// The number of the highest capability this kernel knows.
pub fn last_cap() -> u32 {
    // The kernel's, fixed while it runs: read once per process.
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// The Landlock ABI version the kernel offers (0 when Landlock is absent or
/// disabled).
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr, size 0 and the VERSION flag the call only
    // returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        0
    } else {
        rc as i32
    }
}

/// Landlock's errata bits (`LANDLOCK_CREATE_RULESET_ERRATA`, Linux 6.15),
/// or `None` where the kernel does not report them.
pub fn landlock_errata() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_ERRATA: libc::c_uint = 1 << 1;
    // SAFETY: with a NULL attr, size 0 and the ERRATA flag the call only
    // returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_ERRATA,
        )
    };
    u32::try_from(rc).ok()
}

/// `prctl(PR_GET_SECCOMP)`: the calling thread's seccomp mode, or `None`
/// when the kernel has no seccomp.
pub fn seccomp_mode() -> Option<i32> {
    // SAFETY: integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0 as libc::c_ulong) };
    (rc >= 0).then_some(rc)
}

/// A connected pair of close-on-exec unix stream sockets.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: socketpair(2) writes two ints into `fds`.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned two fresh fds that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Receives one fd sent with [`send_fd`], without waiting.
pub fn recv_fd(sock: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdControl([0; 24]);
    // SAFETY: msghdr is plain data; zeroed is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: msg points at valid buffers for the call.
    let rc = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful recvmsg, msg_control/msg_controllen
    // describe the control data the kernel wrote into `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS
        {
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            if fd >= 0 {
                return Ok(OwnedFd::from_raw_fd(fd));
            }
        }
    }
    Err(io::Error::other("no descriptor received"))
}

/// Runs `f` in a forked child and returns its exit status (tests only:
/// lets a unit test install a filter without touching the test process).
#[cfg(test)]
pub fn in_child(f: fn() -> i32) -> i32 {
    // SAFETY: the child runs only `f` (system calls on stack data in the
    // tests that use this) and leaves with _exit; the parent only waits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        exit_now(f());
    }
    let mut status = 0;
    // SAFETY: status is a valid int for the call.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    }
}

/// `chmod(path, mode)`, returning the errno (0 on success); tests only.
#[cfg(test)]
pub fn try_chmod(path: &CStr, mode: libc::mode_t) -> i32 {
    // SAFETY: path is a valid NUL-terminated string.
    if unsafe { libc::chmod(path.as_ptr(), mode) } == 0 {
        0
    } else {
        errno()
    }
}

/// Creates a child in the namespaces named by `flags` that exits at once,
/// and reports whether the kernel allowed it (the errno when not): the
/// only reliable test of what this process may create.
pub fn probe_clone(flags: libc::c_ulong) -> Result<(), i32> {
    // SAFETY: the child branch only calls close_range(2) and `_exit`.
    match unsafe { clone_process(flags) } {
        Ok(Forked::Child) => {
            // Holding none of this process's descriptors while its
            // namespaces are torn down (see `close_all_but`).
            let _ = close_all_but(&[]);
            exit_now(0)
        }
        Ok(Forked::Parent { pidfd }) => match pidfd_wait(pidfd.as_raw_fd()) {
            Ok(Exit::Code(0)) => Ok(()),
            Ok(_) => Err(libc::ECHILD),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::ECHILD)),
        },
        Err(e) => Err(e.raw_os_error().unwrap_or(libc::EINVAL)),
    }
}

/// Whether a seccomp filter with a notification listener can be
/// installed here (gVisor and some container profiles refuse
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`): a child sets `no_new_privs`,
/// installs a one-instruction "allow" filter with a listener and exits
/// with the result; this process is untouched.
pub fn probe_seccomp_listener() -> bool {
    const BPF_RET_K: u16 = 0x06;
    let allow = [seccompiler::sock_filter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    // SAFETY: the child branch only makes system calls on `allow` (built
    // before the clone, on this stack) and calls `_exit`.
    match unsafe { clone_process(0) } {
        Ok(Forked::Child) => {
            let ok =
                prctl(libc::PR_SET_NO_NEW_PRIVS, 1).is_ok() && seccomp_listener(&allow).is_ok();
            exit_now(if ok { 0 } else { 1 })
        }
        Ok(Forked::Parent { pidfd }) => {
            matches!(pidfd_wait(pidfd.as_raw_fd()), Ok(Exit::Code(0)))
        }
        Err(_) => false,
    }
}

/// Like [`probe_clone`] with a mount namespace in `flags`, and the child
/// also mounts a fresh `/proc` (its mount tree made private first, so
/// nothing propagates out; the namespace dies with it): a container that
/// masks parts of the host's `/proc` (podman, Docker) lets the namespaces
/// be created yet refuses that mount, which every jail with a tree needs.
pub fn probe_clone_proc(flags: libc::c_ulong) -> Result<(), i32> {
    // SAFETY: the child branch only calls close_range(2), mount(2) and
    // `_exit`.
    match unsafe { clone_process(flags) } {
        Ok(Forked::Child) => {
            let _ = close_all_but(&[]);
            let errno = || {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EPERM)
            };
            // SAFETY: mount(2) with static C strings (or NULL where the
            // kernel ignores the argument), in the child's own mount
            // namespace.
            let private = unsafe {
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            };
            if private != 0 {
                exit_now(errno());
            }
            // SAFETY: as above.
            let proc = unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            };
            exit_now(if proc == 0 { 0 } else { errno() })
        }
        Ok(Forked::Parent { pidfd }) => match pidfd_wait(pidfd.as_raw_fd()) {
            Ok(Exit::Code(0)) => Ok(()),
            Ok(Exit::Code(errno)) => Err(errno),
            Ok(_) => Err(libc::ECHILD),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::ECHILD)),
        },
        Err(e) => Err(e.raw_os_error().unwrap_or(libc::EINVAL)),
    }
}

/// The symbolic name of an errno value, for messages ("ENOSPC").
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOSPC => "ENOSPC",
        libc::EUSERS => "EUSERS",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::ENOENT => "ENOENT",
        libc::ENOSYS => "ENOSYS",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::EROFS => "EROFS",
        libc::EMFILE => "EMFILE",
        libc::ECHILD => "ECHILD",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// One pending notification: who asked for which system call.
#[derive(Debug, Clone, Copy)]
pub struct Notice {
    /// The notification's id (for the answer and validity checks).
    pub id: u64,
    /// The calling thread's id (in the supervisor's PID namespace).
    pub pid: u32,
    /// The system call number.
    pub nr: i32,
    /// Its six arguments.
    pub args: [u64; 6],
}

/// Receives the next notification from `listener` (blocks until one is
/// pending: call after `poll` reported it readable). `Ok(None)` when the
/// caller died before it could be received.
pub fn notif_recv(listener: RawFd) -> io::Result<Option<Notice>> {
    // SAFETY: seccomp_notif is plain data; zeroed is a valid value, and
    // the kernel requires the buffer to be zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `n`, whose size is
    // the kernel's (checked by `notif_sizes_match`).
    let rc = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(Notice {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    }))
}

/// Whether the kernel's notification structures have the sizes this
/// build was compiled with (`SECCOMP_GET_NOTIF_SIZES`).
pub fn notif_sizes_match() -> bool {
    // SAFETY: seccomp_notif_sizes is plain data.
    let mut s: libc::seccomp_notif_sizes = unsafe { std::mem::zeroed() };
    // SAFETY: seccomp(2) writes one seccomp_notif_sizes into `s`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut s as *mut libc::seccomp_notif_sizes,
        )
    };
    rc == 0
        && usize::from(s.seccomp_notif) == std::mem::size_of::<libc::seccomp_notif>()
        && usize::from(s.seccomp_notif_resp) == std::mem::size_of::<libc::seccomp_notif_resp>()
        && usize::from(s.seccomp_data) == std::mem::size_of::<libc::seccomp_data>()
}

/// True while notification `id` is still pending (its caller alive and
/// waiting): after opening anything under `/proc/PID`, this proves the
/// pid still names the caller.
pub fn notif_id_valid(listener: RawFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
}

/// Answers notification `id`: `errno` 0 means the call succeeded (returns
/// 0), otherwise it fails with that errno. A caller gone meanwhile is not
/// an error.
pub fn notif_send(listener: RawFd, id: u64, errno: i32) -> io::Result<()> {
    notif_respond(
        listener,
        libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno,
            flags: 0,
        },
    )
}

/// Sends `resp`; a caller gone meanwhile is not an error.
fn notif_respond(listener: RawFd, resp: libc::seccomp_notif_resp) -> io::Result<()> {
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    let rc = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(());
        }
        return Err(e);
    }
    Ok(())
}

/// Waits until `a` or `b` is readable or hung up; returns `a`'s
/// `revents` and whether `b` is ready, retrying on `EINTR`.
pub fn poll_two(a: RawFd, b: RawFd) -> io::Result<(libc::c_short, bool)> {
    let mut fds = [
        libc::pollfd {
            fd: a,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: poll(2) on two valid pollfd entries.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc >= 0 {
            return Ok((fds[0].revents, fds[1].revents != 0));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Reads `buf.len()` bytes at `addr` in process `pid`'s memory
/// (`process_vm_readv`); returns how many were read.
pub fn read_process(pid: u32, addr: u64, buf: &mut [u8]) -> SysResult<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec covers `buf`, writable for its length; the
    // remote one is only an address in the other process, which the kernel
    // checks.
    let rc = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    usize::try_from(rc).map_err(|_| errno())
}

/// The socket (or any file) a caller holds at descriptor `fd`, as a
/// descriptor of the supervisor's (`pidfd_getfd`): the very object, which
/// no later `dup2` of the caller can swap. `tid` is the calling thread
/// (a notification's pid); its process is found through
/// `/proc/TID/status` (a pidfd names a thread-group leader), so the
/// caller must confirm afterwards that the notification is still valid.
pub fn take_callers_fd(tid: u32, fd: i32) -> SysResult<OwnedFd> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| libc::ESRCH)?;
    let tgid: libc::pid_t = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(libc::ESRCH)?;
    // SAFETY: pidfd_open(2) with no flags returns a new descriptor or -1.
    let pidfd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) })?;
    // SAFETY: the kernel returned a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd(2) with no flags returns a new descriptor (with
    // close-on-exec set) or -1.
    let got = check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })?;
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// Lets the call of notification `id` go on as the caller made it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): only for calls whose arguments
/// are all registers, which no other thread can change.
pub fn notif_continue(listener: RawFd, id: u64) -> io::Result<()> {
    notif_respond(
        listener,
        libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        },
    )
}

/// Installs the supervisor's `src` in the caller of notification `id` as
/// its descriptor `target`, replacing whatever was there, as `dup2` would
/// (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SETFD`, Linux 5.9).
pub fn notif_replace_fd(
    listener: RawFd,
    id: u64,
    src: RawFd,
    target: i32,
    cloexec: bool,
) -> SysResult<()> {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: u32::try_from(src).map_err(|_| libc::EBADF)?,
        newfd: u32::try_from(target).map_err(|_| libc::EBADF)?,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd.
    let rc = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) };
    check_int(rc).map(|_| ())
}

/// `lstat(path)`.
pub fn lstat(path: &CStr) -> SysResult<libc::stat> {
    // SAFETY: stat is plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; one stat is written.
    check_int(unsafe { libc::lstat(path.as_ptr(), &mut st) })?;
    Ok(st)
}

/// `chmod(path, mode)` (follows a final link: used on `/proc/self/fd/N`).
pub fn chmod(path: &CStr, mode: u32) -> SysResult<()> {
    // SAFETY: path is NUL-terminated.
    check_int(unsafe { libc::chmod(path.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: the file `fd` is a handle
/// on (a link itself when it is one); `u32::MAX` leaves an id unchanged.
pub fn fchown_handle(fd: RawFd, uid: u32, gid: u32) -> SysResult<()> {
    // SAFETY: an empty NUL-terminated path and integer ids.
    check_int(unsafe { libc::fchownat(fd, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) }).map(drop)
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)`: the
/// file `fd` is a handle on; `None` sets both times to now.
pub fn utimens_handle(fd: RawFd, times: Option<&[libc::timespec; 2]>) -> SysResult<()> {
    let ptr = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: an empty NUL-terminated path; `ptr` is NULL or two timespecs.
    check_int(unsafe {
        libc::utimensat(
            fd,
            c"".as_ptr(),
            ptr,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `setxattr(path, name, value, flags)` (follows a final link: used on
/// `/proc/self/fd/N`).
pub fn setxattr(path: &CStr, name: &CStr, value: &[u8], flags: i32) -> SysResult<()> {
    // SAFETY: path and name are NUL-terminated; value is valid for its
    // length.
    check_int(unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
    .map(drop)
}

/// `removexattr(path, name)` (follows a final link, as [`setxattr`]).
pub fn removexattr(path: &CStr, name: &CStr) -> SysResult<()> {
    // SAFETY: path and name are NUL-terminated.
    check_int(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }).map(drop)
}

/// The supervisor's supplementary groups.
pub fn groups() -> Vec<u32> {
    // SAFETY: getgroups(0, NULL) only returns the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(len) = usize::try_from(n) else {
        return Vec::new();
    };
    let mut v = vec![0 as libc::gid_t; len];
    // SAFETY: `v` has room for `len` gids.
    let got = unsafe { libc::getgroups(n, v.as_mut_ptr()) };
    v.truncate(usize::try_from(got).unwrap_or(0));
    v
}
