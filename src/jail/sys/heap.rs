//! The allocator of a long-lived supervisor (glibc's malloc): buffers
//! freed are given back to the kernel, not kept by the process.
//!
//! glibc serves a large allocation (128 KiB and up) from a mapping of its
//! own, unmapped when freed, but raises that threshold to the size of
//! each such block freed: after the first connection's 256 KiB buffers
//! are freed, the next ones come from the heaps, and what is freed there
//! stays with the process (a server that held 1 GiB of connection
//! buffers once kept it). [`map_large_allocations`] fixes the threshold;
//! [`return_freed_memory`] gives back the free pages of every heap
//! (smaller blocks freed in the middle of one). Elsewhere (musl, which
//! returns large blocks itself) both do nothing.

/// Makes every allocation of `bytes` or more a mapping of its own,
/// unmapped when freed, from now on (glibc's `M_MMAP_THRESHOLD`, which
/// also stops glibc from raising the threshold by itself); whether it
/// was set.
pub fn map_large_allocations(bytes: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let Ok(bytes) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: mallopt only changes the allocator's parameters; it
        // takes two integers and touches no memory of the caller's.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = bytes;
        false
    }
}

/// Gives the free pages of every heap of the allocator back to the kernel
/// (glibc's `malloc_trim(0)`).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free;
    // it takes an integer and touches no memory of the caller's.
    unsafe {
        libc::malloc_trim(0);
    }
}
