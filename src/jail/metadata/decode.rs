//! Which calls go to the metadata supervisor, and what each one asks
//! for, decoded from its number and registers alone (its path and values
//! are read from the caller's memory afterwards, once).

/// The calls handed to the supervisor: every call that changes a file's
/// mode, owner, times or extended attributes by path or by descriptor.
pub fn notified_calls() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    v
}

/// Which file a call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A path (at `addr` in the caller's memory) relative to `dir` (a
    /// descriptor of the caller, or `AT_FDCWD`).
    Path {
        dir: i32,
        addr: u64,
        /// Follow a final symbolic link.
        follow: bool,
        /// An empty path means `dir` itself (`AT_EMPTY_PATH`).
        empty_ok: bool,
    },
    /// An open descriptor of the caller.
    Fd(i32),
}

/// How the times are given in the caller's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimesAt {
    /// NULL: both set to now.
    Now,
    /// Two `timespec`s (`utimensat`).
    Timespec(u64),
    /// Two `timeval`s (`utimes`, `futimesat`).
    Timeval(u64),
    /// One `utimbuf` (`utime`): two whole seconds.
    Utimbuf(u64),
}

/// What a call changes, as decoded from its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The mode bits.
    Mode(u32),
    /// Owner and group (`None`: unchanged, the `-1` of the call).
    Owner { uid: Option<u32>, gid: Option<u32> },
    /// The access and modification times.
    Times(TimesAt),
    /// Set an extended attribute (name, value and size in memory).
    SetXattr {
        name: u64,
        value: u64,
        size: u64,
        flags: i32,
    },
    /// Remove an extended attribute.
    RemoveXattr { name: u64 },
}

/// A decoded call: which file, what change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The file.
    pub target: Target,
    /// The change.
    pub request: Request,
}

fn id(arg: u64) -> Option<u32> {
    let v = arg as u32;
    (v != u32::MAX).then_some(v)
}

/// Decodes system call `nr` with `args` (`None`: not one of
/// [`notified_calls`], or flags this supervisor does not know — refused).
pub fn decode(nr: i64, args: [u64; 6]) -> Option<Call> {
    let fd = |a: u64| a as i32;
    let at = |dir: u64, addr: u64, flags: u64| -> Option<Target> {
        let known = (libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) as u64;
        if flags & !known != 0 {
            return None;
        }
        Some(Target::Path {
            dir: fd(dir),
            addr,
            follow: flags & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            empty_ok: flags & libc::AT_EMPTY_PATH as u64 != 0,
        })
    };
    let path = |addr: u64, follow: bool| Target::Path {
        dir: libc::AT_FDCWD,
        addr,
        follow,
        empty_ok: false,
    };
    let call = |target, request| Some(Call { target, request });
    let owner = |u: u64, g: u64| Request::Owner {
        uid: id(u),
        gid: id(g),
    };
    let set = |a: [u64; 6]| Request::SetXattr {
        name: a[1],
        value: a[2],
        size: a[3],
        flags: a[4] as i32,
    };
    // The kernel ignores every bit above the permission bits.
    let mode = |m: u64| Request::Mode(m as u32 & 0o7777);
    match nr {
        libc::SYS_fchmod => call(Target::Fd(fd(args[0])), mode(args[1])),
        libc::SYS_fchmodat => call(at(args[0], args[1], 0)?, mode(args[2])),
        libc::SYS_fchmodat2 => call(at(args[0], args[1], args[3])?, mode(args[2])),
        libc::SYS_fchown => call(Target::Fd(fd(args[0])), owner(args[1], args[2])),
        libc::SYS_fchownat => call(at(args[0], args[1], args[4])?, owner(args[2], args[3])),
        libc::SYS_utimensat => {
            let times = if args[2] == 0 {
                TimesAt::Now
            } else {
                TimesAt::Timespec(args[2])
            };
            if args[1] == 0 {
                // futimens: the descriptor itself (no flags allowed).
                if args[3] != 0 {
                    return None;
                }
                call(Target::Fd(fd(args[0])), Request::Times(times))
            } else {
                call(at(args[0], args[1], args[3])?, Request::Times(times))
            }
        }
        libc::SYS_setxattr => call(path(args[0], true), set(args)),
        libc::SYS_lsetxattr => call(path(args[0], false), set(args)),
        libc::SYS_fsetxattr => call(Target::Fd(fd(args[0])), set(args)),
        libc::SYS_removexattr => call(path(args[0], true), Request::RemoveXattr { name: args[1] }),
        libc::SYS_lremovexattr => {
            call(path(args[0], false), Request::RemoveXattr { name: args[1] })
        }
        libc::SYS_fremovexattr => call(
            Target::Fd(fd(args[0])),
            Request::RemoveXattr { name: args[1] },
        ),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chmod => call(path(args[0], true), mode(args[1])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chown => call(path(args[0], true), owner(args[1], args[2])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_lchown => call(path(args[0], false), owner(args[1], args[2])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utime => {
            let t = if args[1] == 0 {
                TimesAt::Now
            } else {
                TimesAt::Utimbuf(args[1])
            };
            call(path(args[0], true), Request::Times(t))
        }
        #[cfg(target_arch = "x86_64")]
        libc::SYS_utimes => {
            let t = if args[1] == 0 {
                TimesAt::Now
            } else {
                TimesAt::Timeval(args[1])
            };
            call(path(args[0], true), Request::Times(t))
        }
        #[cfg(target_arch = "x86_64")]
        libc::SYS_futimesat => {
            let t = if args[2] == 0 {
                TimesAt::Now
            } else {
                TimesAt::Timeval(args[2])
            };
            call(at(args[0], args[1], 0)?, Request::Times(t))
        }
        _ => None,
    }
}
