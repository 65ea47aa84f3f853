//! System-call filtering with seccomp (programs compiled by `seccompiler`).
//!
//! The filter is a deny list over the native architecture; a call from any
//! other architecture (32-bit `int 0x80`, x32 numbers) kills the process.
//! Denied with `EPERM` always:
//! - reaching other processes: `ptrace`, `process_vm_readv/writev`, `kcmp`,
//!   `pidfd_getfd`;
//! - changing the filesystem view or namespaces: `mount` and the new mount
//!   API, `umount2`, `pivot_root`, `chroot`, `setns`, and `unshare` / `clone`
//!   with any `CLONE_NEW*` flag;
//! - kernel attack surface and host state: `bpf`, `perf_event_open`,
//!   `userfaultfd`, `keyctl`/`add_key`/`request_key`, `kexec_*`, module
//!   loading, `reboot`, `swapon/off`, `acct`, `quotactl`, `syslog`,
//!   `open_by_handle_at`, `name_to_handle_at`, clock setting, host names,
//!   `iopl`/`ioperm`;
//! - terminal injection: `ioctl` with `TIOCSTI` or `TIOCLINUX` (only the low
//!   32 bits of the request are compared, as the kernel does);
//! - set-id programs: a mode with the setuid or setgid bit in `chmod` and
//!   its variants, and in the creating calls that take a mode (`open`,
//!   `openat` with `O_CREAT`/`O_TMPFILE`, `creat`, `mknod`); `openat2`,
//!   whose mode a filter cannot read, is `ENOSYS` (below). The other ways
//!   to a set-id or file-capability file are closed by other layers: a
//!   hard link or a rename of a set-id file from outside a write grant
//!   crosses a mount, or lacks Landlock's `REFER` right there (`EXDEV`
//!   either way); `security.capability` needs `CAP_SETFCAP`, which no jail
//!   holds (dropped as root, never granted otherwise); a copy (`cp -p`,
//!   `copy_file_range`) creates a plain file, then needs one of the calls
//!   above for the bits.
//!
//! Without a mount namespace (no read-only tree), also the watches
//! (`inotify`, `fanotify`), `setxattrat`/`removexattrat`, `file_setattr`
//! and the inode-flag `ioctl`s (`METADATA_IOCTLS`: `chattr`) for every
//! path,
//! and the host's IPC ([`host_ipc_calls`]); the rest of the metadata family
//! (chmod, chown, utimes, xattrs: [`super::metadata::notified_calls`]) goes
//! to the supervisor instead, through a second filter ([`notify_program`])
//! whose calls are answered by [`super::metadata`] (a refusal from the
//! deny list takes precedence over a notification).
//!
//! With the network off, also: `socket` for every family, and `socketpair`
//! except `AF_UNIX` stream/seqpacket pairs (a datagram pair could `sendto`
//! a named socket outside). With the network through glovebox's egress
//! proxy ([`Sockets::NoUnix`]): `socket` of every family but inet and
//! route netlink, and the same `socketpair` rule — no unix socket of the
//! host, pathname or abstract, is reachable (Landlock does not govern a
//! unix `connect`), nor a family the network namespace does not confine
//! (`AF_VSOCK` reaches the hypervisor and the host).
//!
//! `ENOSYS` answers `clone3` (whose flags live in memory a filter cannot
//! read, so libc falls back to `clone`, which is checked), `openat2` (its
//! flags and mode live in memory too: an `O_CREAT` with mode 04755 would
//! leave a setuid file; callers fall back to `openat`, whose mode is
//! checked) and `io_uring_*` (which could open sockets or files behind the
//! filter's back). Nothing glovebox runs inside a jail calls `openat2`
//! (the supervisor's own `openat2` calls run outside every filter).
//!
//! All of it is one program (one filter to attach and to run on every
//! system call): seccompiler compiles the deny list, whose rules share one
//! action, and a short hand-written guard spliced in after its architecture
//! check kills x32 numbers, allows an `openat` (or `open`) without
//! `O_CREAT`/`O_TMPFILE` and a `clone` without `CLONE_NEW*` on their flags
//! alone, answers the `ENOSYS` calls and allows every number the deny list
//! has no rule for after a binary search, instead of a walk down the whole
//! list (see `insert_guard`; the kernel makes that walk once per system
//! call number at every install, to cache the calls a filter always
//! allows; calls whose result depends on an argument, like `openat`, are
//! never cached and run the program every time).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Errors while compiling the filter.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// This CPU architecture has no filter definition.
    #[error("seccomp filtering is not available for this cpu architecture")]
    UnsupportedArch,
    /// seccompiler refused the rules.
    #[error("failed to compile the seccomp filter: {message}")]
    Compile { message: String },
}

fn compile_err(e: impl std::fmt::Display) -> SeccompError {
    SeccompError::Compile {
        message: e.to_string(),
    }
}

/// The compiled filter for one network setting: the deny-list program and,
/// without a mount namespace, the notify program installed after it.
#[derive(Debug)]
pub struct Filter {
    /// The deny list (EPERM) with the architecture and x32 guards and the
    /// ENOSYS answers (clone3, openat2, io_uring).
    pub deny: BpfProgram,
    /// Without a mount namespace: the filter that hands the metadata family
    /// to the supervisor (installed with a notification listener).
    pub notify: Option<&'static BpfProgram>,
}

/// Which sockets a call may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// None (the network off): only unix stream/seqpacket socketpairs.
    None,
    /// Inet sockets (to the egress proxy in the call's own namespace) and
    /// route netlink, nothing else: the host's unix sockets and the
    /// families no network namespace confines stay out of reach.
    NoUnix,
    /// Every family (the host network, explicitly).
    All,
    /// Without a network namespace, behind the connect broker
    /// ([`super::broker`]): inet *stream* sockets (TCP) and route netlink
    /// only, no `listen`, no `MSG_FASTOPEN` (a send that connects), and
    /// `connect` handed to the supervisor ([`notify_program_for`]).
    Brokered,
}

/// Returns the filter for `network` (`true`: [`Sockets::All`]),
/// compiled once per process. `deny_metadata` adds the metadata family
/// ([`metadata_calls`]), for a jail without a mount namespace (no
/// read-only tree to refuse them), and the host IPC calls
/// ([`host_ipc_calls`]: no IPC namespace there either).
pub fn filter(network: bool, deny_metadata: bool) -> Result<&'static Filter, SeccompError> {
    filter_for(
        if network { Sockets::All } else { Sockets::None },
        deny_metadata,
    )
}

/// Returns the filter for `sockets` (and `deny_metadata`, as in
/// [`filter`]), compiled once per process.
pub fn filter_for(sockets: Sockets, deny_metadata: bool) -> Result<&'static Filter, SeccompError> {
    filter_with(sockets, deny_metadata, false)
}

/// [`filter_for`]; with `count_forks` (a jail without a mount namespace,
/// whose metadata supervisor runs anyway) the notify program hands the
/// calls that make processes to the supervisor too ([`super::forks`]).
pub fn filter_with(
    sockets: Sockets,
    deny_metadata: bool,
    count_forks: bool,
) -> Result<&'static Filter, SeccompError> {
    static CELLS: [OnceLock<Result<Filter, String>>; 16] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let count_forks = count_forks && deny_metadata;
    let kind = match sockets {
        Sockets::None => 0,
        Sockets::NoUnix => 1,
        Sockets::All => 2,
        Sockets::Brokered => 3,
    };
    let cell = &CELLS[kind * 4 + usize::from(deny_metadata) * 2 + usize::from(count_forks)];
    cell.get_or_init(|| {
        build_with(sockets, deny_metadata, true, count_forks).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|message| SeccompError::Compile {
        message: message.clone(),
    })
}

fn arch() -> Result<TargetArch, SeccompError> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err(SeccompError::UnsupportedArch)
    }
}

/// `CLONE_NEW*` flags: creating any namespace is refused.
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    0x80, // CLONE_NEWTIME
];

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

fn always_denied() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_syslog,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_vhangup,
        libc::SYS_fanotify_init,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_iopl,
        libc::SYS_ioperm,
        libc::SYS_uselib,
        libc::SYS_lookup_dcookie,
    ]);
    v
}

/// `setxattrat(2)` and `removexattrat(2)` (Linux 6.13; one number on
/// every architecture, not yet in `libc`).
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
/// `file_setattr(2)` (Linux 6.17): sets a file's inode flags and `fsxattr`
/// by path, with no open for Landlock to see.
const SYS_FILE_SETATTR: libc::c_long = 469;

/// `ioctl` requests that change a file's inode flags or version through
/// any descriptor, a read-only one included (the kernel asks only for
/// ownership): `FS_IOC_SETFLAGS` and its 32-bit twin (`chattr`),
/// `FS_IOC_FSSETXATTR`, `FS_IOC_SETVERSION` and its 32-bit twin, and
/// `FS_IOC_ENABLE_VERITY` (makes a file read-only for ever). Landlock does
/// not govern them; a read-only bind refuses them (`EROFS`), so they are
/// refused only where there is no tree.
const METADATA_IOCTLS: [u64; 6] = [
    0x4008_6602, // FS_IOC_SETFLAGS
    0x4004_6602, // FS_IOC32_SETFLAGS
    0x401c_5820, // FS_IOC_FSSETXATTR
    0x4008_7602, // FS_IOC_SETVERSION
    0x4004_7602, // FS_IOC32_SETVERSION
    0x4080_6685, // FS_IOC_ENABLE_VERITY
];

/// System V and POSIX message-queue IPC. A jail without namespaces has no
/// IPC namespace either (the probe makes both or neither), so these would
/// reach the host's segments, semaphores and queues — other processes'
/// memory and a channel out — and are refused there. (POSIX shared memory
/// and semaphores are files in `/dev/shm`, which Landlock keeps closed.)
pub fn host_ipc_calls() -> Vec<libc::c_long> {
    vec![
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ]
}

/// The metadata family: every call that changes a file's mode, owner,
/// times or extended attributes, or watches it. Without a mount namespace
/// nothing else keeps them off paths the jail may not change (Landlock does
/// not govern them): the deny list refuses those the supervisor does not
/// decide ([`refused_metadata_calls`]), the others go to the supervisor.
pub fn metadata_calls() -> Vec<libc::c_long> {
    let mut v = super::metadata::notified_calls();
    v.extend(refused_metadata_calls());
    v
}

/// The metadata calls refused for every path without a mount namespace:
/// [`metadata_calls`] less those the supervisor decides
/// ([`super::metadata::notified_calls`]).
pub fn refused_metadata_calls() -> Vec<libc::c_long> {
    vec![
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
        SYS_FILE_SETATTR,
        libc::SYS_inotify_add_watch,
        libc::SYS_fanotify_init,
        libc::SYS_fanotify_mark,
    ]
}

/// A `SECCOMP_RET_TRACE` data value no rule of glovebox uses: the notify
/// program is compiled by seccompiler with it as the match action, then
/// every such return becomes `SECCOMP_RET_USER_NOTIF` (seccompiler has no
/// action for it).
const NOTIFY_MARK: u32 = 0x6b17;

/// The filter that hands the metadata family to the supervisor
/// (`SECCOMP_RET_USER_NOTIF`; every other call allowed — the deny list is
/// a separate filter), compiled once per process.
pub fn notify_program() -> Result<&'static BpfProgram, SeccompError> {
    notify_program_for(false)
}

/// [`notify_program`], and with `connect` also `connect` (the connect
/// broker's, [`Sockets::Brokered`]).
pub fn notify_program_for(connect: bool) -> Result<&'static BpfProgram, SeccompError> {
    notify_program_with(connect, false)
}

/// [`notify_program_for`], and with `forks` also the calls that make a
/// process or thread (`clone`, `fork`, `vfork`: a root call's process
/// limit where no pids cgroup exists, [`super::forks`]).
pub fn notify_program_with(
    connect: bool,
    forks: bool,
) -> Result<&'static BpfProgram, SeccompError> {
    static CELLS: [OnceLock<Result<BpfProgram, String>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    CELLS[usize::from(connect) + 2 * usize::from(forks)]
        .get_or_init(|| build_notify(connect, forks).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|message| SeccompError::Compile {
            message: message.clone(),
        })
}

/// The calls the notify program hands to the supervisor.
pub fn notified_calls(connect: bool, forks: bool) -> Vec<libc::c_long> {
    let mut v = super::metadata::notified_calls();
    if connect {
        v.push(libc::SYS_connect);
    }
    if forks {
        v.extend(super::forks::counted_calls());
    }
    v
}

fn build_notify(connect: bool, forks: bool) -> Result<BpfProgram, SeccompError> {
    build_notify_of(notified_calls(connect, forks))
}

/// `base` with learn mode's observer ([`super::observe`]): the same deny
/// program, and a notify program that hands the observed calls to the
/// supervisor besides whatever `base`'s handed it (the metadata family
/// when it had a notify program, `connect` behind the broker, the counted
/// calls with `forks`): `sockets` and `forks` are those `base` was built
/// with. Compiled once per combination, kept for the process's life.
pub fn observing(
    base: &'static Filter,
    sockets: Sockets,
    forks: bool,
) -> Result<&'static Filter, SeccompError> {
    let metadata = base.notify.is_some();
    let connect = sockets == Sockets::Brokered;
    let forks = forks && metadata;
    type Cache = Mutex<Vec<(usize, u8, &'static Filter)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (
        base as *const Filter as usize,
        u8::from(metadata) | u8::from(connect) << 1 | u8::from(forks) << 2,
    );
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, f)) = cache.iter().find(|(b, k, _)| (*b, *k) == key) {
        return Ok(f);
    }
    let mut calls = super::observe::observed_calls();
    if metadata {
        calls.extend(super::metadata::notified_calls());
    }
    if connect {
        calls.push(libc::SYS_connect);
    }
    if forks {
        calls.extend(super::forks::counted_calls());
    }
    let notify: &'static BpfProgram = Box::leak(Box::new(build_notify_of(calls)?));
    let filter: &'static Filter = Box::leak(Box::new(Filter {
        deny: base.deny.clone(),
        notify: Some(notify),
    }));
    cache.push((key.0, key.1, filter));
    Ok(filter)
}

fn build_notify_of(calls: Vec<libc::c_long>) -> Result<BpfProgram, SeccompError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        calls.into_iter().map(|nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Trace(NOTIFY_MARK),
        arch()?,
    )
    .map_err(compile_err)?;
    let mut prog: BpfProgram = filter.try_into().map_err(compile_err)?;
    const BPF_RET_K: u16 = 0x06;
    let mark = libc::SECCOMP_RET_TRACE | NOTIFY_MARK;
    let mut rewritten = 0;
    for insn in prog.iter_mut() {
        if insn.code == BPF_RET_K && insn.k == mark {
            insn.k = libc::SECCOMP_RET_USER_NOTIF;
            rewritten += 1;
        }
    }
    if rewritten == 0 {
        return Err(SeccompError::Compile {
            message: "the notify program has no notifying return".into(),
        });
    }
    Ok(prog)
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SeccompError> {
    SeccompCondition::new(arg, len, op, value).map_err(compile_err)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conds).map_err(compile_err)
}

/// The families a call behind the egress proxy may create sockets of:
/// inet (to the proxy, in the call's own namespace) and route netlink
/// (its own namespace's interfaces, which libc's lookups read). Every
/// other family is refused: unix sockets reach the host's, and families
/// the kernel does not confine to a network namespace (`AF_VSOCK` to the
/// hypervisor or the host, Bluetooth, …) would be a way out around the
/// proxy.
const PROXIED_FAMILIES: [libc::c_int; 3] = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// `socket` rules refusing what [`PROXIED_FAMILIES`] does not name, and
/// netlink sockets of any protocol but `NETLINK_ROUTE`.
fn proxied_socket_rules() -> Result<Vec<SeccompRule>, SeccompError> {
    let other_family = PROXIED_FAMILIES
        .iter()
        .map(|f| cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *f as u64))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![
        rule(other_family)?,
        rule(vec![
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::AF_NETLINK as u64,
            )?,
            cond(
                2,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::NETLINK_ROUTE as u64,
            )?,
        ])?,
    ])
}

/// `socket` rules of the connect broker's jail ([`Sockets::Brokered`]):
/// those of [`proxied_socket_rules`], and inet sockets of any type but
/// `SOCK_STREAM` (no UDP, no raw socket: nothing that sends to an address
/// without `connect`) or of a protocol but TCP (SCTP and MPTCP set up
/// associations of their own).
fn brokered_socket_rules() -> Result<Vec<SeccompRule>, SeccompError> {
    let mut v = proxied_socket_rules()?;
    for family in [libc::AF_INET, libc::AF_INET6] {
        let fam = || cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64);
        for ty in (0u64..16).filter(|t| *t != libc::SOCK_STREAM as u64) {
            v.push(rule(vec![
                fam()?,
                cond(1, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(0xf), ty)?,
            ])?);
        }
        v.push(rule(vec![
            fam()?,
            cond(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)?,
            cond(
                2,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::IPPROTO_TCP as u64,
            )?,
        ])?);
    }
    Ok(v)
}

/// The send calls and the argument holding their flags: with
/// `MSG_FASTOPEN` a send on an unconnected TCP socket connects it, to the
/// address the call names, past the broker.
fn fastopen_rules() -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, SeccompError> {
    let flag = libc::MSG_FASTOPEN as u64;
    let on = |arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        Ok(vec![rule(vec![cond(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?])
    };
    Ok(vec![
        (libc::SYS_sendto, on(3)?),
        (libc::SYS_sendmsg, on(2)?),
        (libc::SYS_sendmmsg, on(3)?),
    ])
}

/// `__O_TMPFILE` (`O_TMPFILE` without `O_DIRECTORY`).
const O_TMPFILE_BIT: u64 = 0o20000000;

/// Rules refusing a setuid or setgid bit in a mode: `chmod` and its
/// variants, and the creating calls that take a mode (`open`/`openat` with
/// `O_CREAT` or `O_TMPFILE`, `creat`, `mknod`). A tool must never leave a
/// set-id program behind (a root supervisor's would be setuid root).
fn set_id_mode_rules() -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, SeccompError> {
    let bits = [libc::S_ISUID as u64, libc::S_ISGID as u64];
    let mode_in = |arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        bits.iter()
            .map(|&b| {
                rule(vec![cond(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(b),
                    b,
                )?])
            })
            .collect()
    };
    let creating = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        let mut v = Vec::new();
        for f in [libc::O_CREAT as u64, O_TMPFILE_BIT] {
            for &b in &bits {
                v.push(rule(vec![
                    cond(flags, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(f), f)?,
                    cond(mode, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(b), b)?,
                ])?);
            }
        }
        Ok(v)
    };
    let mut v = vec![
        (libc::SYS_fchmod, mode_in(1)?),
        (libc::SYS_fchmodat, mode_in(2)?),
        (libc::SYS_fchmodat2, mode_in(2)?),
        (libc::SYS_mknodat, mode_in(2)?),
        (libc::SYS_openat, creating(2, 3)?),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_chmod, mode_in(1)?),
        (libc::SYS_creat, mode_in(1)?),
        (libc::SYS_mknod, mode_in(1)?),
        (libc::SYS_open, creating(1, 2)?),
    ]);
    Ok(v)
}

/// One rule per flag: the call matches if any namespace flag is set in `arg`.
fn namespace_rules(arg: u8) -> Result<Vec<SeccompRule>, SeccompError> {
    NAMESPACE_FLAGS
        .iter()
        .map(|&bit| {
            rule(vec![cond(
                arg,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )?])
        })
        .collect()
}

#[cfg(test)]
fn build(sockets: Sockets, deny_metadata: bool) -> Result<Filter, SeccompError> {
    build_with(sockets, deny_metadata, true, false)
}

/// [`build`]; `fast: false` leaves out the guard's search (the tests
/// compare both programs call by call).
fn build_with(
    sockets: Sockets,
    deny_metadata: bool,
    fast: bool,
    count_forks: bool,
) -> Result<Filter, SeccompError> {
    let arch = arch()?;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in always_denied() {
        deny.insert(nr, Vec::new());
    }
    if deny_metadata {
        // No mount namespace means no namespaces at all here: no IPC
        // namespace to hide the host's IPC objects either.
        for nr in refused_metadata_calls().into_iter().chain(host_ipc_calls()) {
            deny.insert(nr, Vec::new());
        }
    }
    #[cfg(target_arch = "x86_64")]
    deny.insert(libc::SYS_clone, namespace_rules(0)?);
    #[cfg(target_arch = "aarch64")]
    deny.insert(libc::SYS_clone, namespace_rules(0)?);
    deny.insert(libc::SYS_unshare, namespace_rules(0)?);
    for (nr, rules) in set_id_mode_rules()? {
        match deny.get_mut(&nr) {
            // Refused outright already (an empty rule list matches always).
            Some(existing) if existing.is_empty() => {}
            Some(existing) => existing.extend(rules),
            None => {
                deny.insert(nr, rules);
            }
        }
    }
    let mut ioctls = vec![TIOCSTI, TIOCLINUX];
    if deny_metadata {
        ioctls.extend(METADATA_IOCTLS);
    }
    deny.insert(
        libc::SYS_ioctl,
        ioctls
            .into_iter()
            .map(|request| {
                rule(vec![cond(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    request,
                )?])
            })
            .collect::<Result<_, _>>()?,
    );
    if sockets != Sockets::All {
        deny.insert(
            libc::SYS_socket,
            match sockets {
                Sockets::NoUnix => proxied_socket_rules()?,
                Sockets::Brokered => brokered_socket_rules()?,
                _ => Vec::new(),
            },
        );
        if sockets == Sockets::Brokered {
            // No server on the host's network.
            deny.insert(libc::SYS_listen, Vec::new());
            for (nr, rules) in fastopen_rules()? {
                deny.insert(nr, rules);
            }
        }
        let mut pair = vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?];
        // SOCK_TYPE_MASK is 0xf; only SOCK_STREAM (1) and SOCK_SEQPACKET (5)
        // pairs ignore a destination address on send.
        for ty in (0u64..16).filter(|t| *t != 1 && *t != 5) {
            pair.push(rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(0xf),
                ty,
            )?])?);
        }
        deny.insert(libc::SYS_socketpair, pair);
    }
    let keys: Vec<i64> = deny.keys().copied().collect();
    let filter = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(compile_err)?;
    let mut deny_prog: BpfProgram = filter.try_into().map_err(compile_err)?;
    let shortcuts = if fast { shortcuts() } else { Vec::new() };
    insert_guard(
        &mut deny_prog,
        fast.then_some(&keys[..]),
        &NOSYS,
        &shortcuts,
    );
    // The broker's `connect` goes to the supervisor whatever else does:
    // without it a brokered call would connect by itself.
    let notify = if deny_metadata || sockets == Sockets::Brokered {
        Some(notify_program_with(
            sockets == Sockets::Brokered,
            count_forks,
        )?)
    } else {
        None
    };
    Ok(Filter {
        deny: deny_prog,
        notify,
    })
}

/// System calls answered with `ENOSYS`: those whose decisive arguments
/// live in memory a filter cannot read. `clone3` (its flags: libc falls
/// back to `clone`, whose flags are checked), `openat2` (its `open_how`
/// holds the flags and the mode: an `O_CREAT` with a set-id mode would
/// pass unseen; libc and libraries fall back to `openat`, whose mode the
/// set-id rules see) and `io_uring_*` (whose submissions open files and
/// sockets behind the filter's back).
const NOSYS: [libc::c_long; 5] = [
    libc::SYS_clone3,
    libc::SYS_openat2,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The `ENOSYS` answers of [`container_program`]: what a container
/// runtime's default profile gives (`clone3`, `io_uring_*`). Not
/// `openat2`, which container runtimes allow and glovebox's supervisor
/// uses outside its jails.
const CONTAINER_NOSYS: [libc::c_long; 4] = [
    libc::SYS_clone3,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// A call the guard decides on one argument before its search: when the
/// low word of argument `arg` has none of the bits of `mask`, no rule of
/// the deny list can match the call, which is allowed there and then;
/// otherwise it goes on to the deny list. For the hot calls that have
/// argument rules (`openat` runs for every file a tool opens), whose
/// result the kernel cannot cache: they would walk the deny list's chain
/// (136 instructions for `openat`) on every call.
#[derive(Debug, Clone, Copy)]
struct Shortcut {
    nr: libc::c_long,
    arg: u8,
    mask: u32,
}

/// The guard's shortcuts in a jail's deny list. Each holds because of the
/// rules [`build_with`] gives the call: `openat` (and x86_64's `open`) is
/// refused only with `O_CREAT` or `O_TMPFILE` in its flags
/// ([`set_id_mode_rules`]), `clone` only with a `CLONE_NEW*` flag
/// ([`namespace_rules`]; every such flag is in the low word). The tests
/// compare the program with and without them, call by call.
fn shortcuts() -> Vec<Shortcut> {
    let creating = libc::O_CREAT as u32 | O_TMPFILE_BIT as u32;
    let namespaces = NAMESPACE_FLAGS.iter().fold(0u64, |m, f| m | f);
    let mut v = vec![Shortcut {
        nr: libc::SYS_openat,
        arg: 2,
        mask: creating,
    }];
    if let Ok(mask) = u32::try_from(namespaces) {
        v.push(Shortcut {
            nr: libc::SYS_clone,
            arg: 0,
            mask,
        });
    }
    #[cfg(target_arch = "x86_64")]
    v.push(Shortcut {
        nr: libc::SYS_open,
        arg: 1,
        mask: creating,
    });
    v
}

/// Classic BPF opcodes of the hand-written guard.
mod op {
    pub const LD_W_ABS: u16 = 0x20;
    pub const JEQ_K: u16 = 0x05 | 0x10;
    pub const JGE_K: u16 = 0x05 | 0x30;
    pub const JSET_K: u16 = 0x05 | 0x40;
    pub const JA: u16 = 0x05;
    pub const RET_K: u16 = 0x06;
}

/// Where a jump of the guard lands.
#[derive(Debug, Clone, Copy)]
enum To {
    /// The next instruction.
    Next,
    /// An instruction of the guard, by index.
    At(usize),
    /// The `RET ERRNO(ENOSYS)` after the guard.
    Nosys,
    /// The `RET ALLOW` after it.
    Allow,
    /// seccompiler's deny list, after both.
    Chain,
}

/// One guard instruction before its jumps are resolved (`JA` uses `jt`).
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: To,
    jf: To,
    k: u32,
}

impl Insn {
    fn new(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: To::Next,
            jf: To::Next,
            k,
        }
    }
    fn jump(code: u16, k: u32, jt: To, jf: To) -> Insn {
        Insn { code, jt, jf, k }
    }
}

/// Appends a binary search for the system call number (already loaded)
/// among `keys` (sorted): a number that is one of them goes on to the
/// deny list, any other is allowed there and then. Leaves of up to three
/// numbers compare each, then jump; the jumps to the deny list go through
/// a local `JA`, so every conditional jump stays short.
fn search(keys: &[u32], out: &mut Vec<Insn>) {
    if keys.len() <= 3 {
        let chain = out.len() + keys.len() + 1;
        for k in keys {
            out.push(Insn::jump(op::JEQ_K, *k, To::At(chain), To::Next));
        }
        out.push(Insn::jump(op::JA, 0, To::Allow, To::Next));
        out.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
        return;
    }
    let mid = keys.len() / 2;
    let node = out.len();
    out.push(Insn::jump(op::JGE_K, keys[mid], To::Next, To::Next));
    search(&keys[..mid], out);
    out[node].jt = To::At(out.len());
    search(&keys[mid..], out);
}

/// Splices a guard into seccompiler's program right after its 3-instruction
/// architecture check. The guard loads the system call number and:
/// - on x86_64, kills the process when the number is at or above
///   `0x4000_0000`: the x32 ABI shares the architecture value but sets bit
///   30 of the number, and a deny list keyed on native numbers would miss
///   those calls;
/// - decides the `shortcuts` ([`shortcuts`]) on one argument: allowed, or
///   on to the deny list;
/// - answers `ENOSYS` for `nosys` ([`NOSYS`] in a jail);
/// - with `keys` (every number the deny list has a rule for), allows any
///   other number at once, after a binary search. seccompiler's list is a
///   linear chain that such a number would walk to its end, to the same
///   `ALLOW`; the kernel walks it too, for every system call number, when
///   it caches which calls a new filter always allows (under a lock, at
///   every install: a third of the filter's cost per jail) and at every
///   call the tool makes that the cache does not cover.
///
/// Every number left falls through to the deny list, which loads the
/// number again itself. The guard jumps only within itself and to the
/// instruction after it, so the relative jumps of the rest of the program
/// stay valid.
fn insert_guard(
    prog: &mut BpfProgram,
    keys: Option<&[i64]>,
    nosys: &[libc::c_long],
    shortcuts: &[Shortcut],
) {
    const SECCOMP_DATA_NR_OFFSET: u32 = 0;
    const SECCOMP_DATA_ARGS_OFFSET: u32 = 16;
    let mut guard = vec![Insn::new(op::LD_W_ABS, SECCOMP_DATA_NR_OFFSET)];
    if cfg!(target_arch = "x86_64") {
        guard.push(Insn::jump(op::JGE_K, 0x4000_0000, To::Next, To::At(3)));
        guard.push(Insn::new(op::RET_K, libc::SECCOMP_RET_KILL_PROCESS));
    }
    for s in shortcuts {
        // nr == s.nr: the low word of the argument (little-endian), then
        // any bit of the mask → the deny list, none → allowed. The number
        // is not reloaded: the deny list loads it itself.
        let next = guard.len() + 3;
        guard.push(Insn::jump(op::JEQ_K, s.nr as u32, To::Next, To::At(next)));
        guard.push(Insn::new(
            op::LD_W_ABS,
            SECCOMP_DATA_ARGS_OFFSET + 8 * u32::from(s.arg),
        ));
        guard.push(Insn::jump(op::JSET_K, s.mask, To::Chain, To::Allow));
    }
    for &nr in nosys {
        guard.push(Insn::jump(op::JEQ_K, nr as u32, To::Nosys, To::Next));
    }
    let plain = guard.clone();
    let mut keys: Vec<u32> = keys
        .unwrap_or_default()
        .iter()
        .filter_map(|k| u32::try_from(*k).ok())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() {
        guard.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
    } else {
        search(&keys, &mut guard);
    }
    let resolved = resolve(&guard).or_else(|| {
        // A search too long for 8-bit jumps: the deny list alone, which is
        // correct, only slower.
        let mut plain = plain;
        plain.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
        resolve(&plain)
    });
    let Some(mut resolved) = resolved else {
        return;
    };
    resolved.push(seccompiler::sock_filter {
        code: op::RET_K,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    });
    resolved.push(seccompiler::sock_filter {
        code: op::RET_K,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    });
    let at = 3.min(prog.len());
    prog.splice(at..at, resolved);
}

/// The guard's jumps made relative (the two `RET`s follow it, then the
/// deny list); `None` when a conditional jump does not fit in 8 bits.
fn resolve(guard: &[Insn]) -> Option<Vec<seccompiler::sock_filter>> {
    let len = guard.len();
    let target = |to: To, i: usize| match to {
        To::Next => i + 1,
        To::At(n) => n,
        To::Nosys => len,
        To::Allow => len + 1,
        To::Chain => len + 2,
    };
    guard
        .iter()
        .enumerate()
        .map(|(i, insn)| {
            let jt = target(insn.jt, i).checked_sub(i + 1)?;
            let jf = target(insn.jf, i).checked_sub(i + 1)?;
            Some(if insn.code == op::JA {
                seccompiler::sock_filter {
                    code: insn.code,
                    jt: 0,
                    jf: 0,
                    k: u32::try_from(jt).ok()?,
                }
            } else {
                seccompiler::sock_filter {
                    code: insn.code,
                    jt: u8::try_from(jt).ok()?,
                    jf: u8::try_from(jf).ok()?,
                    k: insn.k,
                }
            })
        })
        .collect()
}

/// Installs `filter.deny` on the calling thread. Runs in the child
/// between clone and exec: `apply_filter` only builds a `sock_fprog` on the
/// stack and calls `prctl`/`seccomp`. The notify program is installed
/// separately ([`install_notify`]), after this one.
pub fn install(filter: &Filter) -> Result<(), i32> {
    seccompiler::apply_filter(&filter.deny).map_err(|e| match e {
        seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => {
            io.raw_os_error().unwrap_or(libc::EINVAL)
        }
        _ => libc::EINVAL,
    })
}

/// A filter like Docker's default seccomp profile for a process without
/// `CAP_SYS_ADMIN` or `CAP_SYS_PTRACE`: creating or joining namespaces
/// (`unshare`, `setns`, `clone` with a `CLONE_NEW*` flag), mounting, and
/// `kcmp`/`pidfd_getfd`/`process_madvise` are refused with EPERM,
/// `clone3` and `io_uring_*` are ENOSYS, foreign architectures are killed; everything else
/// is allowed. `glovebox __container` runs a command under it, so CI can
/// test the namespace-free jail the way a container gets it (also as
/// root).
pub fn container_program() -> Result<BpfProgram, SeccompError> {
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_process_madvise,
    ] {
        deny.insert(nr, Vec::new());
    }
    deny.insert(libc::SYS_clone, namespace_rules(0)?);
    let keys: Vec<i64> = deny.keys().copied().collect();
    let filter = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )
    .map_err(compile_err)?;
    let mut prog: BpfProgram = filter.try_into().map_err(compile_err)?;
    insert_guard(&mut prog, Some(&keys), &CONTAINER_NOSYS, &[]);
    Ok(prog)
}

/// A filter like gVisor's kernel as glovebox sees it: namespaces and
/// mounts work, but Landlock is missing (`landlock_*` → `ENOSYS`) and no
/// seccomp notification listener can be made (`SECCOMP_FILTER_FLAG_NEW_LISTENER`
/// → `EINVAL`). `glovebox __container --no-landlock` runs a command under
/// them (two programs, both installed), so CI tests the jail that holds the filesystem view with its mount
/// tree alone.
pub fn no_landlock_programs() -> Result<[BpfProgram; 2], SeccompError> {
    const SECCOMP_SET_MODE_FILTER: u64 = 1;
    const SECCOMP_FILTER_FLAG_NEW_LISTENER: u64 = 8;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ] {
        rules.insert(nr, Vec::new());
    }
    let landlock = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )
    .map_err(compile_err)?;
    let mut listener: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    listener.insert(
        libc::SYS_seccomp,
        vec![rule(vec![
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                SECCOMP_SET_MODE_FILTER,
            )?,
            cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(SECCOMP_FILTER_FLAG_NEW_LISTENER),
                SECCOMP_FILTER_FLAG_NEW_LISTENER,
            )?,
        ])?],
    );
    let listener = SeccompFilter::new(
        listener,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EINVAL as u32),
        arch()?,
    )
    .map_err(compile_err)?;
    Ok([
        landlock.try_into().map_err(compile_err)?,
        listener.try_into().map_err(compile_err)?,
    ])
}

/// Installs `filter.notify` (when there is one) with a notification
/// listener and returns the listener's fd. Child-side, like [`install`].
pub fn install_notify(filter: &Filter) -> Result<Option<std::os::fd::RawFd>, i32> {
    match filter.notify {
        Some(prog) => super::sys::seccomp_listener(prog).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
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
                assert!(fast.len() > slow.len(), "the search is in the program");
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
}
