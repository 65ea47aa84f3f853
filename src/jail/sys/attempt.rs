//! The forbidden calls `doctor --prove`'s battery tries from inside a jail
//! (`crate::prove`), each a thin safe wrapper: the jail itself never makes
//! them. Each answers `Err(errno)` as the kernel (or the jail's filter)
//! refused, and undoes what it did when it worked (a descriptor closed, a
//! tracee detached), so that a broken jail is reported, never left worse.

use std::ffi::CStr;

use super::{check, check_int, SysResult};

pub use super::supervisor::{removexattr, setxattr};

/// `io_uring_setup(entries, params)`; the ring is closed at once.
pub fn io_uring_setup(entries: u32) -> SysResult<()> {
    // The kernel's `struct io_uring_params` is 120 bytes; zeroed asks for
    // nothing special.
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup reads and writes `params`, a valid buffer of
    // the size the kernel expects, and returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_io_uring_setup,
            libc::c_ulong::from(entries),
            params.as_mut_ptr(),
        )
    })?;
    close_returned(fd);
    Ok(())
}

/// Closes a descriptor a system call just returned to us.
fn close_returned(fd: libc::c_long) {
    if let Ok(fd) = libc::c_int::try_from(fd) {
        // SAFETY: `fd` was just created by the kernel for this process and
        // nothing else owns it.
        unsafe { libc::close(fd) };
    }
}

/// `add_key("user", description, payload, KEY_SPEC_PROCESS_KEYRING)`: a
/// key in the process's own keyring (gone with the process).
pub fn add_key(description: &CStr, payload: &[u8]) -> SysResult<i64> {
    const KEY_SPEC_PROCESS_KEYRING: libc::c_long = -2;
    // SAFETY: the type and description are NUL-terminated; the payload is
    // valid for its length; the kernel copies them.
    check(unsafe {
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            description.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            KEY_SPEC_PROCESS_KEYRING,
        )
    })
}

/// `keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)`: the user's
/// keyring, shared by every process of the uid (not created).
pub fn user_keyring() -> SysResult<i64> {
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
    // SAFETY: plain integer arguments.
    check(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_USER_KEYRING,
            0 as libc::c_long,
        )
    })
}

/// `ioctl(fd, TIOCSTI, &byte)`: pushes `byte` into the input of `fd`'s
/// terminal.
pub fn tiocsti(fd: i32, byte: u8) -> SysResult<()> {
    // SAFETY: TIOCSTI reads one byte from the pointer, which points at a
    // live local.
    check_int(unsafe { libc::ioctl(fd, libc::TIOCSTI, &byte as *const u8) }).map(drop)
}

/// `ptrace(PTRACE_ATTACH, pid)`; when it worked, the tracee is waited for
/// and detached at once.
pub fn ptrace_attach(pid: i32) -> SysResult<()> {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_ATTACH takes no pointers (NULL addr and data).
    check(unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, null, null) })?;
    let mut status = 0;
    // SAFETY: `status` is a valid int to write; __WALL waits for the
    // tracee's stop whatever kind of task it is.
    unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    // SAFETY: PTRACE_DETACH with NULL addr and data (no signal).
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, null, null) };
    Ok(())
}

/// `process_vm_readv`: `len` bytes of `pid`'s memory at `addr`.
pub fn process_vm_read(pid: i32, addr: u64, len: usize) -> SysResult<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` describes `buf`, owned here and valid for `len`
    // bytes; the kernel only reads `remote`'s address, in the other
    // process.
    let n =
        check(unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) } as libc::c_long)?;
    buf.truncate(usize::try_from(n).unwrap_or(0));
    Ok(buf)
}

/// `prlimit(pid, RLIMIT_NOFILE, NULL, &old)`: another process's open-file
/// limit, read only.
pub fn prlimit_nofile(pid: i32) -> SysResult<(u64, u64)> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: no new limit (NULL); `old` is a valid rlimit to write.
    check_int(unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) })?;
    Ok((old.rlim_cur, old.rlim_max))
}

/// Whether `path` has the extended attribute `name` (`getxattr` asked
/// for its size; a final link followed).
pub fn has_xattr(path: &CStr, name: &CStr) -> bool {
    // SAFETY: path and name are NUL-terminated; a NULL buffer of size 0
    // asks only for the value's size, nothing is written.
    let rc = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    rc >= 0
}

/// Maps `bytes` of private anonymous memory (asking for transparent huge
/// pages, where the kernel offers them: fewer faults for the same bytes)
/// and writes a byte to every page of it, so that all of it is charged.
/// The mapping is never unmapped: it ends with the process (the memory
/// bomb's child, which exits once it has reached its target or failed).
pub fn touch_memory(bytes: usize) -> SysResult<()> {
    // SAFETY: a fresh private anonymous mapping at an address the kernel
    // chooses; nothing else refers to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(super::errno());
    }
    // SAFETY: `p` is the mapping just made, `bytes` long; the advice only
    // changes how it is backed (refused where THP is off: ignored).
    unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
    let base = p.cast::<u8>();
    let mut offset = 0;
    while offset < bytes {
        // SAFETY: `offset < bytes`, inside the writable mapping; a volatile
        // write so that the touch is not optimised away.
        unsafe { std::ptr::write_volatile(base.add(offset), 1) };
        offset += 4096;
    }
    Ok(())
}
