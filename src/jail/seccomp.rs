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
//! Without a mount namespace (and so without a PID namespace), also
//! `prlimit64`, `setpriority` and `ioprio_set` aimed at any process but
//! the caller (`other_process_rules`: the host's processes of the same
//! uid are in reach there, and Landlock does not scope these calls).
//!
//! Without a mount namespace (no read-only tree), also the watches
//! (`inotify`, `fanotify`), `setxattrat`/`removexattrat`, `file_setattr`
//! and the inode-flag `ioctl`s (`METADATA_IOCTLS`: `chattr`) for every
//! path,
//! and the host's IPC ([`host_ipc_calls`]); the rest of the metadata family
//! (chmod, chown, utimes, xattrs: [`super::metadata::notified_calls`]) goes
//! to the supervisor instead, through a second filter ([`notify_program_with`])
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
//! `O_CREAT`/`O_TMPFILE` on its flags alone, decides `clone` and `unshare`
//! on their `CLONE_NEW*` flags alone, answers the `ENOSYS` calls, and after
//! a binary search refuses the calls denied whatever their arguments and
//! allows every number the deny list has no rule for, instead of a walk
//! down the whole list, which then holds only the calls with argument
//! rules (see `insert_guard`; the kernel makes that walk once per system
//! call number at every install, to cache the calls a filter always
//! allows; calls whose result depends on an argument, like `openat`, are
//! never cached and run the program every time).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

mod container;
mod guard;
pub use container::{container_program, no_landlock_programs};
use guard::{insert_guard, Shortcut};

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
    /// `connect` handed to the supervisor ([`notify_program_with`]).
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

/// [`filter_for`]; with `count_forks` (root without a pids cgroup) the
/// notify program hands the calls that make processes to the supervisor
/// too, or alone where the metadata family is not handed to it
/// ([`super::forks`]).
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

/// The mount family: every call that mounts, unmounts, moves or changes
/// a mount, or enters another root (the old API and the new mount API).
/// Refused in every jail (the deny list) and by the container-like
/// filter of `container-profile` ([`container_program`]) alike.
pub const MOUNT_CALLS: [libc::c_long; 10] = [
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
];

fn always_denied() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_chroot,
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
    v.extend(MOUNT_CALLS);
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

/// The program that hands calls to the supervisor
/// (`SECCOMP_RET_USER_NOTIF`; every other call allowed — the deny list is
/// a separate filter), compiled once per process and combination:
/// `metadata` (the metadata family: a jail without a mount namespace),
/// `connect` (the connect broker's, [`Sockets::Brokered`]) and `forks`
/// (`clone`, `fork`, `vfork`: a root call's process limit where no pids
/// cgroup exists, [`super::forks`]; with namespaces, alone).
pub fn notify_program_with(
    metadata: bool,
    connect: bool,
    forks: bool,
) -> Result<&'static BpfProgram, SeccompError> {
    static CELLS: [OnceLock<Result<BpfProgram, String>>; 8] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    CELLS[usize::from(connect) + 2 * usize::from(forks) + 4 * usize::from(metadata)]
        .get_or_init(|| build_notify(metadata, connect, forks).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|message| SeccompError::Compile {
            message: message.clone(),
        })
}

/// The calls the notify program hands to the supervisor.
fn notified_calls(metadata: bool, connect: bool, forks: bool) -> Vec<libc::c_long> {
    let mut v = if metadata {
        super::metadata::notified_calls()
    } else {
        Vec::new()
    };
    if connect {
        v.push(libc::SYS_connect);
    }
    if forks {
        v.extend(super::forks::counted_calls());
    }
    v
}

fn build_notify(metadata: bool, connect: bool, forks: bool) -> Result<BpfProgram, SeccompError> {
    build_notify_of(notified_calls(metadata, connect, forks))
}

/// `base` with learn mode's observer ([`super::observe`]): the same deny
/// program, and a notify program that hands the observed calls to the
/// supervisor besides whatever `base`'s handed it (the metadata family
/// with `metadata`, `connect` behind the broker, the counted calls with
/// `forks`): `sockets`, `metadata` and `forks` are those `base` was built
/// with. Compiled once per combination, kept for the process's life.
pub fn observing(
    base: &'static Filter,
    sockets: Sockets,
    metadata: bool,
    forks: bool,
) -> Result<&'static Filter, SeccompError> {
    let connect = sockets == Sockets::Brokered;
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

/// `ioprio_set`'s `which` for one process (`IOPRIO_WHO_PROCESS`).
const IOPRIO_WHO_PROCESS: u64 = 1;

/// Without a PID namespace (the namespace-free jail) every host process
/// of the jail's uid can be named by its pid, and the kernel lets a
/// process of the same uid change another one's limits and priorities
/// with no check Landlock's scopes (ptrace, signals) take part in: a tool
/// could lower the supervisor's `RLIMIT_CPU` (the server killed),
/// `RLIMIT_FSIZE` or `RLIMIT_NOFILE` (its audit writes and calls
/// refused), or renice and ionice every process of its uid. So these
/// calls may name the caller only: `prlimit64` with pid 0, `setpriority`
/// with `PRIO_PROCESS` and 0, `ioprio_set` with `IOPRIO_WHO_PROCESS` and
/// 0 (what `setrlimit`, `nice` and `ionice CMD` pass); any other target
/// is `EPERM`. With a PID namespace nothing outside the jail has a pid
/// there, so a tool may still tune its own children.
fn other_process_rules() -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, SeccompError> {
    let not = |arg: u8, value: u64| -> Result<SeccompRule, SeccompError> {
        rule(vec![cond(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            value,
        )?])
    };
    Ok(vec![
        (libc::SYS_prlimit64, vec![not(0, 0)?]),
        (
            libc::SYS_setpriority,
            vec![not(0, libc::PRIO_PROCESS as u64)?, not(1, 0)?],
        ),
        (
            libc::SYS_ioprio_set,
            vec![not(0, IOPRIO_WHO_PROCESS)?, not(1, 0)?],
        ),
    ])
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
        // No PID namespace either: the host's processes can be named.
        for (nr, rules) in other_process_rules()? {
            deny.insert(nr, rules);
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
        // pairs ignore a destination address on send. Every other type in
        // five masked comparisons: 0, 2–3, 4, 6–7, 8–15.
        for (mask, ty) in [(0xf, 0), (0xe, 2), (0xf, 4), (0xe, 6), (0x8, 8)] {
            pair.push(rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(mask),
                ty,
            )?])?);
        }
        deny.insert(libc::SYS_socketpair, pair);
    }
    let shortcuts = if fast { shortcuts() } else { Vec::new() };
    // The calls the guard's shortcuts decide alone (`clone`, `unshare`)
    // are left out of the list; the calls refused whatever their
    // arguments are decided by the guard's search (one `JEQ` each) instead
    // of seccompiler's list (five instructions each): the program the
    // kernel converts, JITs and walks for its cache at every install
    // shrinks by half.
    for s in shortcuts.iter().filter(|s| s.refuse) {
        deny.remove(&s.nr);
    }
    let keys: Vec<i64> = deny.keys().copied().collect();
    let (denied, chain): (Vec<i64>, BTreeMap<i64, Vec<SeccompRule>>) = if fast {
        let (outright, chain): (BTreeMap<_, _>, BTreeMap<_, _>) =
            deny.into_iter().partition(|(_, rules)| rules.is_empty());
        (outright.into_keys().collect(), chain)
    } else {
        (Vec::new(), deny)
    };
    let filter = SeccompFilter::new(
        chain,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(compile_err)?;
    let mut deny_prog: BpfProgram = filter.try_into().map_err(compile_err)?;
    if let Err(e) = insert_guard(
        &mut deny_prog,
        fast.then_some(&keys[..]),
        &denied,
        &NOSYS,
        &shortcuts,
    ) {
        if denied.is_empty() && !shortcuts.iter().any(|s| s.refuse) {
            return Err(e);
        }
        // The search does not fit (never with today's lists): the whole
        // list, as seccompiler compiles it.
        return build_with(sockets, deny_metadata, false, count_forks);
    }
    // The broker's `connect` goes to the supervisor whatever else does:
    // without it a brokered call would connect by itself; and the forks of
    // a counted call, with namespaces too.
    let notify = if deny_metadata || sockets == Sockets::Brokered || count_forks {
        Some(notify_program_with(
            deny_metadata,
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

/// The guard's shortcuts in a jail's deny list. Each holds because of the
/// rules [`build_with`] gives the call: `openat` (and x86_64's `open`) is
/// refused only with `O_CREAT` or `O_TMPFILE` in its flags
/// ([`set_id_mode_rules`]), `clone` and `unshare` exactly when a
/// `CLONE_NEW*` flag is set ([`namespace_rules`]; every such flag is in
/// the low word), so those two are decided by the guard alone. The tests
/// compare the program with and without them, call by call.
fn shortcuts() -> Vec<Shortcut> {
    let creating = libc::O_CREAT as u32 | O_TMPFILE_BIT as u32;
    let namespaces = NAMESPACE_FLAGS.iter().fold(0u64, |m, f| m | f);
    let mut v = vec![Shortcut {
        nr: libc::SYS_openat,
        arg: 2,
        mask: creating,
        refuse: false,
    }];
    if let Ok(mask) = u32::try_from(namespaces) {
        for nr in [libc::SYS_clone, libc::SYS_unshare] {
            v.push(Shortcut {
                nr,
                arg: 0,
                mask,
                refuse: true,
            });
        }
    }
    #[cfg(target_arch = "x86_64")]
    v.push(Shortcut {
        nr: libc::SYS_open,
        arg: 1,
        mask: creating,
        refuse: false,
    });
    v
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

/// Installs `filter.notify` (when there is one) with a notification
/// listener and returns the listener's fd. Child-side, like [`install`].
pub fn install_notify(filter: &Filter) -> Result<Option<std::os::fd::RawFd>, i32> {
    match filter.notify {
        Some(prog) => super::sys::seccomp_listener(prog).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
