//! `execve`'s argument and environment arrays, made in the supervisor
//! and read by a child: one of a standby jail ([`crate::jail::standby`])
//! reads them from another thread than the one that made them.

use std::ffi::CString;

/// C strings and the NULL-terminated array of pointers to them that
/// `execve` takes; the strings are owned here and never change.
#[derive(Debug)]
pub struct CArray {
    /// What `ptrs` points into.
    _strings: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl CArray {
    /// The array of `strings`, NULL-terminated.
    pub fn new(strings: Vec<CString>) -> CArray {
        let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        CArray {
            _strings: strings,
            ptrs,
        }
    }

    /// The NULL-terminated pointer array.
    pub fn ptrs(&self) -> &[*const libc::c_char] {
        &self.ptrs
    }
}

// SAFETY: the pointers point into the heap buffers of `_strings`, which
// `CArray` owns and never changes or drops before itself (moving a
// `CString` does not move its buffer); nothing writes through them. So
// the array may move to another thread and be read from several at once,
// as its `Vec<CString>` alone could.
unsafe impl Send for CArray {}
// SAFETY: as above: only reads go through the pointers.
unsafe impl Sync for CArray {}
