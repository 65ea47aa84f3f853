//! System calls for the child between `clone` and `execve` (and the
//! supervisor's own uses of the same primitives): each an
//! async-signal-safe wrapper over one call on prepared data, allocating
//! nothing and taking no lock (the supervisor may have had other threads).

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::*;

/// Ends the calling process at once, without running destructors or atexit
/// handlers (the only correct exit between clone and exec).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Writes all of `buf` to `fd`, retrying on EINTR.
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> SysResult<()> {
    while !buf.is_empty() {
        // SAFETY: buf is a valid readable slice of buf.len() bytes.
        let rc = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if rc < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        buf = &buf[rc as usize..];
    }
    Ok(())
}

/// Reads one byte from `fd`, retrying on `EINTR`: `Some(byte)`, or `None`
/// at end of file. Child-side: no allocation.
pub fn read_byte(fd: RawFd) -> SysResult<Option<u8>> {
    let mut byte = 0u8;
    loop {
        // SAFETY: one writable byte at a valid address.
        let rc = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
        if rc < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok((rc == 1).then_some(byte));
    }
}

/// `setsid()`: a new session without a controlling terminal.
pub fn setsid() -> SysResult<()> {
    // SAFETY: no arguments, no memory effects.
    check_int(unsafe { libc::setsid() }).map(drop)
}

/// `prctl` with integer arguments only.
pub fn prctl(option: libc::c_int, arg2: libc::c_ulong) -> SysResult<()> {
    // SAFETY: every option used by glovebox takes integer arguments only.
    check_int(unsafe {
        libc::prctl(
            option,
            arg2,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
    .map(drop)
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
pub fn clear_ambient_caps() -> SysResult<()> {
    // SAFETY: integer arguments only.
    check_int(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
    .map(drop)
}

/// Clears the permitted, effective and inheritable capability sets.
pub fn clear_caps() -> SysResult<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) reads one header and two data structs (version 3),
    // both valid for the duration of the call.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) })
        .map(drop)
}

/// `chdir(path)`.
pub fn chdir(path: &CStr) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// Sets both the soft and hard value of one resource limit.
pub fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> SysResult<()> {
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: lim is a valid rlimit struct for the duration of the call.
    check_int(unsafe { libc::setrlimit(resource, &lim) }).map(drop)
}

/// The hard value of one resource limit.
pub fn hard_rlimit(resource: libc::__rlimit_resource_t) -> SysResult<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid, writable rlimit struct for the call.
    check_int(unsafe { libc::getrlimit(resource, &mut lim) })?;
    Ok(lim.rlim_max)
}

/// Opens `path` write-only (close-on-exec) and writes `data` to it.
pub fn write_file(path: &CStr, data: &[u8]) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string.
    let fd = check_int(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    let r = write_all(fd, data);
    close(fd);
    r
}

/// Puts every signal back to its default disposition and unblocks all of
/// them, so the tool does not inherit the supervisor's signal state.
pub fn reset_signals() {
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: signal(2) with SIG_DFL touches no memory of ours.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    // SAFETY: an empty, initialised sigset is passed by pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// True when the pipe whose write end is `fd` has lost every reader.
pub fn pipe_reader_gone(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
    rc > 0 && (pfd.revents & libc::POLLERR) != 0
}

/// `mount(2)` with optional strings (`data` is the option string of a
/// new filesystem, e.g. `mode=0755` for a tmpfs).
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> SysResult<()> {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is NULL or a valid NUL-terminated string.
    check_int(unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) })
        .map(drop)
}

/// `mkdir(path, 0755)`; an existing entry is not an error.
pub fn mkdir(path: &CStr) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string.
    match check_int(unsafe { libc::mkdir(path.as_ptr(), 0o755) }) {
        Ok(_) | Err(libc::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates an empty file (mode 0644) at `path` to mount a file on; an
/// existing entry is not an error.
pub fn touch(path: &CStr) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string; the fd is closed here.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644 as libc::c_uint,
        )
    };
    match check_int(fd) {
        Ok(fd) => {
            close(fd);
            Ok(())
        }
        Err(libc::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the new file `path` (mode 0644 whatever the umask, never
/// through a link) holding `data`.
pub fn create_file(path: &CStr, data: &[u8]) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string; the fd is closed here.
    let fd = check_int(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644 as libc::c_uint,
        )
    })?;
    // SAFETY: fchmod on an fd we own has no memory effects.
    let r = check_int(unsafe { libc::fchmod(fd, 0o644) })
        .map(drop)
        .and_then(|()| write_all(fd, data));
    close(fd);
    r
}

/// `symlink(target, at)`; an existing entry is not an error.
pub fn symlink(target: &CStr, at: &CStr) -> SysResult<()> {
    // SAFETY: both are valid NUL-terminated strings.
    match check_int(unsafe { libc::symlink(target.as_ptr(), at.as_ptr()) }) {
        Ok(_) | Err(libc::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `rmdir(path)`.
pub fn rmdir(path: &CStr) -> SysResult<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::rmdir(path.as_ptr()) }).map(drop)
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> SysResult<()> {
    // SAFETY: both are valid NUL-terminated strings.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

/// `umount2(target, MNT_DETACH)`.
pub fn detach(target: &CStr) -> SysResult<()> {
    // SAFETY: target is a valid NUL-terminated string.
    check_int(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// Makes the directory `path` of the jail's own tree traversable only
/// (mode 0111), after checking it is on the staging tmpfs (`stage_dev`):
/// never a mount of host content. Child side.
pub fn seal_dir(path: &CStr, stage_dev: u64) -> SysResult<()> {
    // SAFETY: path is NUL-terminated.
    let fd = check_int(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if fstat(fd.as_raw_fd())?.st_dev != stage_dev {
        return Err(libc::EXDEV);
    }
    // SAFETY: fchmod(2) on an open descriptor.
    check_int(unsafe { libc::fchmod(fd.as_raw_fd(), 0o111) }).map(drop)
}

/// `openat2(dir, path, O_PATH | O_CLOEXEC | O_NOFOLLOW, resolve)`: a
/// handle on what `path` names, resolved with `resolve` (`RESOLVE_*`
/// flags); a trailing link is returned itself, never followed.
/// `ENOSYS` on kernels before 5.6.
pub fn openat2_path(dir: RawFd, path: &CStr, resolve: u64) -> SysResult<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: path is NUL-terminated; how is a valid open_how of the size
    // passed, read during the call only.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })?;
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS` (openat2).
pub const RESOLVE_NO_LINKS: u64 = 0x02 | 0x04;

/// Binds the object at `src` onto `dst` — only when it is the object the
/// supervisor resolved and checked (`dev`, `ino`): `src` is opened without
/// following a trailing link (`openat2` refusing every link on the way
/// where the kernel has it), compared, and that very descriptor bound: a
/// plain `MS_BIND` naming it as `fd_dir/N` (this process's own
/// `/proc/self/fd`, which resolves to exactly that object), else the mount
/// cloned from it (`open_tree(AT_EMPTY_PATH | OPEN_TREE_CLONE)` +
/// `move_mount`, Linux 5.2) — so nothing swapped in by name after the
/// check is bound. A different object is `ESTALE`. `recursive` binds the
/// mounts under it too; a link (`src` a symbolic link, never `fd_dir`) is
/// bound itself. `check_dst` (the staging tmpfs's device) also opens and
/// checks the mountpoint, for one inside host content. `Ok(false)`: `src`
/// no longer exists (removed since it was held), nothing bound. Child
/// side.
pub fn bind_checked(
    src: &CStr,
    dst: &CStr,
    dev: u64,
    ino: u64,
    recursive: bool,
    check_dst: Option<u64>,
    fd_dir: Option<&CStr>,
) -> SysResult<bool> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
    let open = |path: &CStr| match openat2_path(libc::AT_FDCWD, path, RESOLVE_NO_LINKS) {
        // No openat2 (before 5.6, or a profile refusing it): the identity
        // check below is what counts.
        Err(libc::ENOSYS | libc::EPERM) => open_path(libc::AT_FDCWD, path, libc::O_NOFOLLOW),
        Err(libc::ELOOP) => Err(libc::ESTALE),
        other => other,
    };
    let held = match open(src) {
        Err(libc::ENOENT) => return Ok(false),
        other => other?,
    };
    let st = fstat(held.as_raw_fd())?;
    if st.st_dev != dev || st.st_ino != ino {
        return Err(libc::ESTALE);
    }
    // The mountpoint, where it lies in host content bound earlier
    // (`check_dst`: the staging tmpfs's device): the same object seen
    // through that bind (a rebind), or one the tree made; never what a
    // link planted on the way would lead to. A mountpoint on the tree's
    // own tmpfs needs no check: nothing else can change it.
    let at = match check_dst {
        Some(stage_dev) => {
            let at = open(dst)?;
            let st = fstat(at.as_raw_fd())?;
            if st.st_dev != stage_dev && (st.st_dev != dev || st.st_ino != ino) {
                return Err(libc::ESTALE);
            }
            Some(at)
        }
        None => None,
    };
    let (to_dir, to_path, to_flags) = match &at {
        Some(at) => (at.as_raw_fd(), c"", MOVE_MOUNT_T_EMPTY_PATH),
        None => (libc::AT_FDCWD, dst, 0),
    };
    // The cheap way first: a plain bind whose source (and checked
    // mountpoint) are named through the process's own descriptors
    // (`fd_dir`: where the host's `/proc/self/fd` is seen), which resolve
    // to exactly the objects checked above; no detached tree to make.
    if let (true, Some(dir)) = (recursive, fd_dir) {
        let mut src_buf = [0u8; 96];
        let mut dst_buf = [0u8; 96];
        let from = fd_name(dir, held.as_raw_fd(), &mut src_buf);
        let to = match &at {
            Some(at) => fd_name(dir, at.as_raw_fd(), &mut dst_buf),
            None => Some(dst),
        };
        if let (Some(from), Some(to)) = (from, to) {
            match mount(Some(from), to, None, libc::MS_BIND | libc::MS_REC, None) {
                Ok(()) => return Ok(true),
                // No /proc there: the detached tree below.
                Err(libc::ENOENT | libc::EACCES | libc::ENOTDIR) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let mut flags = OPEN_TREE_CLONE | libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: held is an open descriptor; "" is NUL-terminated; the call
    // returns a new descriptor or an error.
    let tree = check(unsafe {
        libc::syscall(libc::SYS_open_tree, held.as_raw_fd(), c"".as_ptr(), flags)
    })? as RawFd;
    // SAFETY: tree is the descriptor open_tree just returned; to_dir is
    // AT_FDCWD or an open descriptor; "" and to_path are NUL-terminated,
    // read during the call only.
    let moved = check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            to_dir,
            to_path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | to_flags,
        )
    });
    close(tree);
    match moved {
        Ok(_) => Ok(true),
        // Removed after it was opened: gone, as if before.
        Err(libc::ENOENT) if fstat(held.as_raw_fd()).is_ok_and(|st| st.st_nlink == 0) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `dir` followed by the decimal `fd`, NUL-terminated, in `buf` (no
/// allocation); `None` when it does not fit.
fn fd_name<'a>(dir: &CStr, fd: RawFd, buf: &'a mut [u8; 96]) -> Option<&'a CStr> {
    let prefix = dir.to_bytes();
    let mut digits = [0u8; 12];
    let mut n = u32::try_from(fd).ok()?;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let total = prefix.len() + len;
    if total + 1 > buf.len() {
        return None;
    }
    buf[..prefix.len()].copy_from_slice(prefix);
    for i in 0..len {
        buf[prefix.len() + i] = digits[len - 1 - i];
    }
    buf[total] = 0;
    CStr::from_bytes_with_nul(&buf[..=total]).ok()
}

/// Makes the mount at `path` and every mount under it read-only with
/// `mount_setattr(2)` (which only adds the flag, so flags a user namespace
/// locks on the source stay as they are). Kernels before 5.12 lack it:
/// there the top mount alone is remounted read-only, keeping its current
/// `nosuid`/`nodev`/`noexec`/atime flags (read with `statvfs`), without
/// which a user namespace refuses the remount.
pub fn make_read_only(path: &CStr) -> SysResult<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: path is a valid NUL-terminated string; attr is a valid
    // mount_attr of the size passed, read during the call only.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    });
    match rc {
        Ok(_) => Ok(()),
        Err(libc::ENOSYS) => {
            // SAFETY: statvfs is plain data; zeroed is a valid initial value.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: path is valid; st is writable for the call (glibc
            // fills f_flag from statfs(2), no allocation).
            check_int(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
            let kept = [
                (libc::ST_NOSUID, libc::MS_NOSUID),
                (libc::ST_NODEV, libc::MS_NODEV),
                (libc::ST_NOEXEC, libc::MS_NOEXEC),
                (libc::ST_NOATIME, libc::MS_NOATIME),
                (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
                (libc::ST_RELATIME, libc::MS_RELATIME),
            ]
            .iter()
            .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
            .fold(0, |acc, (_, ms)| acc | ms);
            mount(
                None,
                path,
                None,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept,
                None,
            )
        }
        Err(e) => Err(e),
    }
}

/// Landlock rule type `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// Adds a path-beneath rule for the directory at `path` to the Landlock
/// ruleset `ruleset_fd` (used for mounts made in the child itself).
pub fn landlock_allow_path(ruleset_fd: RawFd, path: &CStr, access: u64) -> SysResult<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    // SAFETY: path is a valid NUL-terminated string.
    let fd = check_int(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: landlock_add_rule(2) reads one path_beneath_attr, valid here.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0 as libc::c_uint,
        )
    });
    close(fd);
    rc.map(drop)
}

/// `execve(path, argv, envp)`; returns only on failure.
///
/// `argv` and `envp` must be NULL-terminated arrays of pointers to
/// NUL-terminated strings that outlive the call (prepared before clone).
pub fn execve(path: &CStr, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> i32 {
    if argv.last().is_some_and(|p| !p.is_null()) || envp.last().is_some_and(|p| !p.is_null()) {
        return libc::EINVAL;
    }
    // SAFETY: path is NUL-terminated; argv/envp are NULL-terminated arrays of
    // valid C strings (checked above for the terminator, guaranteed by the
    // caller for the strings).
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    errno()
}

/// `landlock_restrict_self(ruleset_fd, 0)`: confines the calling thread.
/// `no_new_privs` must already be set (or the caller have CAP_SYS_ADMIN).
pub fn landlock_restrict_self(ruleset_fd: RawFd) -> SysResult<()> {
    // SAFETY: integer arguments only.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset_fd,
            0 as libc::c_uint,
        )
    })
    .map(drop)
}

/// Drops every capability for good: clears the ambient set, empties the
/// bounding set (capabilities `0..=last_cap`), locks the securebits so that
/// uid 0 regains nothing on exec, then clears the permitted, effective and
/// inheritable sets. Needs CAP_SETPCAP at the start (a root supervisor).
pub fn drop_all_caps(last_cap: u32) -> SysResult<()> {
    clear_ambient_caps()?;
    for cap in 0..=last_cap {
        // EINVAL: a capability this kernel does not know; nothing to drop.
        match prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong) {
            Ok(()) | Err(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    // SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
    // SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
    // SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
    const SECURE_BITS: libc::c_ulong = 0x01 | 0x02 | 0x04 | 0x08 | 0x40 | 0x80;
    prctl(libc::PR_SET_SECUREBITS, SECURE_BITS)?;
    clear_caps()
}

/// Brings the loopback interface of the calling process's (new, empty)
/// network namespace up. Child-side: no allocation.
pub fn loopback_up() -> SysResult<()> {
    // SAFETY: socket(2) with integer arguments.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads one ifreq, valid for the call.
    let rc = check_int(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req as *const libc::ifreq) });
    close(fd);
    rc.map(drop)
}

/// A close-on-exec TCP socket listening on `addr`:`port` (IPv4).
/// Child-side: no allocation.
pub fn listen_tcp4(addr: [u8; 4], port: u16) -> SysResult<RawFd> {
    let fd = bound4(libc::SOCK_STREAM, addr, port)?;
    // SAFETY: listen(2) with integer arguments.
    match check_int(unsafe { libc::listen(fd, 1024) }) {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// A UDP socket bound to `addr`:`port` (close-on-exec). Child-side: no
/// allocation.
pub fn bind_udp4(addr: [u8; 4], port: u16) -> SysResult<RawFd> {
    bound4(libc::SOCK_DGRAM, addr, port)
}

/// An IPv4 socket of `kind` bound to `addr`:`port` (close-on-exec).
fn bound4(kind: libc::c_int, addr: [u8; 4], port: u16) -> SysResult<RawFd> {
    // SAFETY: socket(2) with integer arguments.
    let fd = check_int(unsafe { libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0) })?;
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: bind(2) reads one sockaddr_in of the given size.
    let r = check_int(unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    });
    match r {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// Sends `fd` over the unix socket `sock` (`SCM_RIGHTS`, one byte of data).
/// Child-side: no allocation.
pub fn send_fd(sock: RawFd, fd: RawFd) -> SysResult<()> {
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
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    if space > control.0.len() {
        return Err(libc::EINVAL);
    }
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` writable, aligned bytes, so the
    // first header and its data (one int) are inside the buffer.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(libc::EINVAL);
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    loop {
        // SAFETY: msg and everything it points to live for the call.
        let rc = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if rc >= 0 {
            return Ok(());
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

// --- seccomp user notification (the namespace-free jail's metadata
// family, decided by the supervisor: see `super::metadata`).

/// Installs `prog` as a seccomp filter on the calling thread with a new
/// notification listener, and returns the listener fd (close-on-exec).
/// Child-side: no allocation (`prog` is prepared before clone).
pub fn seccomp_listener(prog: &[seccompiler::sock_filter]) -> SysResult<RawFd> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| libc::EINVAL)?,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(2) reads the `sock_fprog` and the `len` instructions
    // it points to (seccompiler's `sock_filter` has the kernel's layout),
    // which outlive the call.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    })?;
    RawFd::try_from(rc).map_err(|_| libc::EBADF)
}

/// `openat(dir, path, O_PATH | O_CLOEXEC | extra)`: a handle on a file
/// that opens nothing for reading or writing (`dir` may be `AT_FDCWD`).
pub fn open_path(dir: RawFd, path: &CStr, extra: libc::c_int) -> SysResult<OwnedFd> {
    // SAFETY: path is NUL-terminated.
    let fd = check_int(unsafe {
        libc::openat(dir, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | extra)
    })?;
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat(fd)`.
pub fn fstat(fd: RawFd) -> SysResult<libc::stat> {
    // SAFETY: stat is plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat(2) with AT_EMPTY_PATH writes one stat for `fd`.
    check_int(unsafe { libc::fstatat(fd, c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH) })?;
    Ok(st)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names_are_made_without_allocating() {
        let mut buf = [0u8; 96];
        assert_eq!(fd_name(c"/x/fd/", 1234, &mut buf).unwrap(), c"/x/fd/1234");
        assert_eq!(fd_name(c"/x/", 0, &mut buf).unwrap(), c"/x/0");
        let long = std::ffi::CString::new("a".repeat(90)).unwrap();
        assert!(fd_name(&long, 123456, &mut buf).is_none());
        assert!(fd_name(c"/x/", -1, &mut buf).is_none());
    }
}
