//! The child's descriptor table between `clone` and `execve` (and the
//! supervisor's own closes): stdio moved into place, every other
//! descriptor close-on-exec, the supervisor's closed but the call's own.
//! Async-signal-safe, allocating nothing, like [`super::child`].

use std::os::fd::RawFd;

use super::*;

/// `dup2(old, new)`, clearing close-on-exec on `new`.
pub fn dup2(old: RawFd, new: RawFd) -> SysResult<()> {
    if old == new {
        // dup2 would be a no-op and leave FD_CLOEXEC as it was: clear it.
        // SAFETY: fcntl on an fd number has no memory effects.
        return check_int(unsafe { libc::fcntl(new, libc::F_SETFD, 0) }).map(drop);
    }
    // SAFETY: dup2 on fd numbers has no memory effects.
    check_int(unsafe { libc::dup2(old, new) }).map(drop)
}

/// Marks every fd from `first` upwards close-on-exec: one
/// `close_range(CLOSE_RANGE_CLOEXEC)` (Linux 5.11), else each open
/// descriptor listed in `/proc/self/fd` (read with `getdents64` into a
/// buffer on the stack: no allocation).
pub fn cloexec_from(first: RawFd) -> SysResult<()> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets flags.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    });
    match rc {
        Ok(_) => Ok(()),
        Err(libc::ENOSYS | libc::EINVAL) => cloexec_listed(first),
        Err(e) => Err(e),
    }
}

/// [`cloexec_from`] for kernels without `CLOSE_RANGE_CLOEXEC`.
fn cloexec_listed(first: RawFd) -> SysResult<()> {
    for_each_listed(first, |fd| {
        // SAFETY: fcntl(2) on a descriptor number; one that is not open is
        // EBADF, ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    })
}

/// Closes every descriptor from 3 up except those in `keep` (sorted,
/// ascending): the supervisor's table (its listening sockets, other
/// calls' pipes and connections) is not the call's. Closed now, not at
/// `execve`: a child killed before it execs releases what it holds only
/// after its namespaces are torn down, which can take tens of
/// milliseconds, and meanwhile a dead server's listening socket would
/// still accept connections. `close_range(2)` per gap (Linux 5.9), else
/// each open descriptor listed in `/proc/self/fd`.
pub fn close_all_but(keep: &[RawFd]) -> SysResult<()> {
    let close_range = |lo: RawFd, hi: libc::c_uint| {
        // SAFETY: close_range(2) on descriptor numbers of this process's
        // own (unshared) table; no memory is touched.
        check(unsafe {
            libc::syscall(
                libc::SYS_close_range,
                lo as libc::c_uint,
                hi,
                0 as libc::c_uint,
            )
        })
    };
    let ranged = || -> SysResult<()> {
        let mut lo: RawFd = 3;
        for &k in keep.iter().filter(|&&k| k >= 3) {
            if lo < k {
                close_range(lo, (k - 1) as libc::c_uint)?;
            }
            lo = k.saturating_add(1);
        }
        close_range(lo, libc::c_uint::MAX).map(drop)
    };
    match ranged() {
        Ok(()) => Ok(()),
        Err(libc::ENOSYS | libc::EPERM) => for_each_listed(3, |fd| {
            if keep.binary_search(&fd).is_err() {
                close(fd);
            }
        }),
        Err(e) => Err(e),
    }
}

/// Calls `f` on each descriptor from `first` up that `/proc/self/fd`
/// lists (read with `getdents64` into a buffer on the stack: no
/// allocation), except the one reading it.
fn for_each_listed(first: RawFd, mut f: impl FnMut(RawFd)) -> SysResult<()> {
    // SAFETY: the path is NUL-terminated.
    let dir = check_int(unsafe {
        libc::open(
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    let mut buf = [0u8; 4096];
    let result = loop {
        // SAFETY: buf is writable for its length; getdents64(2) writes
        // whole records into it.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
        let Ok(n) = usize::try_from(n) else {
            break Err(errno());
        };
        if n == 0 {
            break Ok(());
        }
        let mut off = 0;
        while off + 19 < n {
            // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type
            // u8, then the NUL-terminated name.
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let mut fd: RawFd = 0;
            let mut digits = 0;
            for &b in &buf[off + 19..(off + reclen).min(n)] {
                if !b.is_ascii_digit() {
                    break;
                }
                fd = fd.saturating_mul(10).saturating_add(RawFd::from(b - b'0'));
                digits += 1;
            }
            if digits > 0 && fd >= first && fd != dir {
                f(fd);
            }
            off += reclen;
        }
    };
    close(dir);
    result
}

/// Closes `fd` (errors ignored: the fd is gone either way).
pub fn close(fd: RawFd) {
    // SAFETY: closing an fd number has no memory effects; callers pass fds
    // they own in this process.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The fallback for kernels before 5.11 marks exactly the open
    /// descriptors from `first` on.
    #[test]
    fn descriptors_listed_in_proc_are_marked_close_on_exec() {
        let flags = |fd: RawFd| {
            // SAFETY: F_GETFD on a descriptor of this test.
            unsafe { libc::fcntl(fd, libc::F_GETFD) }
        };
        let a = nix::unistd::dup(std::io::stdin()).unwrap();
        let b = nix::unistd::dup(std::io::stdin()).unwrap();
        let (a, b) = (
            a.as_raw_fd().min(b.as_raw_fd()),
            a.as_raw_fd().max(b.as_raw_fd()),
        );
        assert_eq!(flags(a) & libc::FD_CLOEXEC, 0);
        assert_eq!(flags(b) & libc::FD_CLOEXEC, 0);
        cloexec_listed(b).unwrap();
        assert_eq!(flags(a) & libc::FD_CLOEXEC, 0, "below first: untouched");
        assert_ne!(flags(b) & libc::FD_CLOEXEC, 0);
    }
}
