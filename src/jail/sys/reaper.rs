//! System calls of the namespace-free jail's reaper (the subreaper that
//! forks the tool and ends every descendant): signals, `fork`, `wait`,
//! and killing what `/proc/thread-self/children` lists. Async-signal-safe
//! too (the reaper is a fresh clone of a multi-threaded supervisor).

use std::ffi::CStr;
use std::os::fd::RawFd;

use super::*;

/// Blocks `sigs` in the calling thread (they stay pending for
/// [`wait_signal`]).
pub fn block_signals(sigs: &[i32]) -> SysResult<()> {
    let set = sigset(sigs);
    // SAFETY: a valid, initialised sigset is passed by pointer.
    let rc = unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Waits for one of the blocked `sigs` and returns it.
pub fn wait_signal(sigs: &[i32]) -> i32 {
    let set = sigset(sigs);
    loop {
        // SAFETY: a valid sigset; no siginfo is requested.
        let rc = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if rc > 0 {
            return rc;
        }
    }
}

/// `fork(2)` in a single-threaded process (the jail's first process).
/// Returns the child's pid in the parent and 0 in the child.
///
/// # Safety
///
/// The same rules as [`clone_process`] apply to the child.
unsafe fn fork_plain() -> SysResult<libc::pid_t> {
    // SAFETY: raw clone(2) with only SIGCHLD and a NULL stack is fork(2)
    // without glibc's fork wrapper: this runs in a process made by a raw
    // clone of a multi-threaded supervisor, where glibc's own locks
    // (malloc arenas, stdio) may be copied in the held state, and its
    // fork() takes them (atfork) and would wait forever. The caller
    // upholds async-signal-safety in the child.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if pid < 0 {
        Err(errno())
    } else {
        Ok(pid as libc::pid_t)
    }
}

/// The calling process's pid.
pub fn getpid() -> libc::pid_t {
    // SAFETY: no arguments, no memory effects.
    unsafe { libc::getpid() }
}

/// The calling process's parent pid.
pub fn getppid() -> libc::pid_t {
    // SAFETY: no arguments, no memory effects.
    unsafe { libc::getppid() }
}

/// Reaps one child: `Ok(Some((pid, status)))`, `Ok(None)` when none has
/// ended yet (with `WNOHANG`), `Err(ECHILD)` when there are none left.
pub fn reap(nohang: bool) -> SysResult<Option<(libc::pid_t, i32)>> {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid int for the call.
        let rc = unsafe {
            libc::waitpid(
                -1,
                &mut status,
                if nohang { libc::WNOHANG } else { 0 } | libc::__WALL,
            )
        };
        if rc > 0 {
            return Ok(Some((rc, status)));
        }
        if rc == 0 {
            return Ok(None);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

/// Sends `SIGKILL` to every child of the calling (single-threaded)
/// process, listed by `/proc/thread-self/children`. They are its children
/// and unreaped, so their pids cannot have been reused. Returns how many
/// were signalled.
pub fn kill_children() -> SysResult<usize> {
    const PATH: &CStr = c"/proc/thread-self/children";
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(PATH.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let mut buf = [0u8; 512];
    let mut pid: libc::pid_t = 0;
    let mut killed = 0;
    let r = loop {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            break Err(e);
        }
        if n == 0 {
            break Ok(());
        }
        for &b in &buf[..n as usize] {
            if b.is_ascii_digit() {
                pid = pid
                    .saturating_mul(10)
                    .saturating_add(libc::pid_t::from(b - b'0'));
            } else if pid > 0 {
                // SAFETY: kill(2) on a pid that is our unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed += 1;
                pid = 0;
            }
        }
    };
    if pid > 0 {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        killed += 1;
    }
    close(fd);
    r.map(|()| killed)
}

/// Ends the calling process the way a child's wait `status` says it ended:
/// the same exit code, or the same signal (with core dumps off).
pub fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let _ = setrlimit(libc::RLIMIT_CORE, 0);
        reset_signals();
        // SAFETY: raising a default-disposition signal at ourselves.
        unsafe { libc::raise(sig) };
        exit_now(128 + sig)
    }
    exit_now(libc::WEXITSTATUS(status))
}

/// Closes every descriptor from `first` up.
pub fn close_from(first: RawFd) {
    // SAFETY: close_range(2) on a range of our own descriptors.
    unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, u32::MAX, 0u32) };
}

/// Makes this process the call's reaper and forks the tool under it.
/// Returns in the tool's process; the reaper itself never returns: it waits
/// for the tool to end (or for `SIGTERM`: timeout, cancel, the supervisor
/// gone), then kills every descendant it has inherited — double-forked,
/// `setsid` daemons included, since orphans reparent to a subreaper — and
/// exits the way the tool did. The tool cannot signal its reaper: its
/// Landlock domain scopes signals to the jail. Called between clone and
/// exec (a step of `jail::child::main`).
pub fn fork_under_reaper(report: RawFd) -> SysResult<()> {
    const WAKE: [i32; 2] = [libc::SIGTERM, libc::SIGCHLD];
    prctl(libc::PR_SET_CHILD_SUBREAPER, 1)?;
    block_signals(&WAKE)?;
    prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong)?;
    if pipe_reader_gone(report) {
        exit_now(127);
    }
    let reaper = getpid();
    // SAFETY: this process is single-threaded (a fresh clone of the
    // supervisor, before exec); the tool's side returns to the child's
    // steps between clone and exec (`jail::child::main`, the only caller),
    // async-signal-safe like every step; the reaper's side below makes
    // only the async-signal-safe calls of this module and never returns.
    let tool = unsafe { fork_plain() }?;
    if tool == 0 {
        prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)?;
        if getppid() != reaper {
            exit_now(127);
        }
        reset_signals();
        return Ok(());
    }
    // The reaper holds nothing of the call's: the supervisor sees end of
    // file on the report pipe and the outputs when the tool's side closes.
    close_from(0);
    let mut status = None;
    while status.is_none() {
        if wait_signal(&WAKE) == libc::SIGTERM {
            break;
        }
        while let Ok(Some((pid, st))) = reap(true) {
            if pid == tool {
                status = Some(st);
            }
        }
    }
    loop {
        let _ = kill_children();
        match reap(false) {
            Ok(Some((pid, st))) if pid == tool && status.is_none() => status = Some(st),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    exit_like(status.unwrap_or(libc::SIGKILL))
}
