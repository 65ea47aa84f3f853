//! Safe wrappers over the raw system calls the jail needs.
//!
//! Every `unsafe` block of glovebox lives in this directory, split by
//! who may call it: [`child`] (between clone and exec: async-signal-safe
//! only) with [`fds`] (its descriptor table), [`reaper`] (the namespace-free jail's subreaper), [`supervisor`]
//! (everything else), [`heap`] (the supervisor's allocator: memory freed
//! goes back to the kernel), and [`attempt`] (the calls `doctor --prove`'s
//! battery tries from inside a jail). The child's run between `clone` and `execve`, where
//! the parent may have had other threads: they must not allocate, lock or
//! touch thread-local state. Each one is a thin, async-signal-safe wrapper
//! over a single system call that takes already-prepared data (`&CStr`,
//! raw fds, plain integers) and reports `errno` as a plain `i32`.

use std::io;

mod argv;
pub mod attempt;
mod child;
mod fds;
pub mod heap;
mod reaper;
mod supervisor;
mod tun;

pub use argv::*;
pub use child::*;
pub use fds::*;
pub use reaper::*;
pub use supervisor::*;
pub use tun::*;

/// Result of a child-side call: `Err(errno)`.
pub type SysResult<T> = Result<T, i32>;

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

fn check(rc: libc::c_long) -> SysResult<libc::c_long> {
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc)
    }
}

fn check_int(rc: libc::c_int) -> SysResult<libc::c_int> {
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc)
    }
}

/// Space for one fd in a control message (`CMSG_SPACE(sizeof(int))` on
/// 64-bit Linux), 8-byte aligned.
#[repr(C, align(8))]
struct FdControl([u8; 24]);

/// A signal set holding `sigs`.
fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}
