//! Filters that make a machine look like a container runtime's or
//! gVisor's to glovebox, for CI (`container-profile`): the jail's tests
//! run under them so the namespace-free jail and the tree-alone jail are
//! tested the way those hosts give them.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompFilter, SeccompRule,
};

use super::{
    arch, compile_err, cond, insert_guard, namespace_rules, rule, SeccompError, MOUNT_CALLS,
};

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

/// A filter like Docker's default seccomp profile for a process without
/// `CAP_SYS_ADMIN` or `CAP_SYS_PTRACE`: creating or joining namespaces
/// (`unshare`, `setns`, `clone` with a `CLONE_NEW*` flag), mounting, and
/// `kcmp`/`pidfd_getfd`/`process_madvise` are refused with EPERM,
/// `clone3` and `io_uring_*` are ENOSYS, foreign architectures are killed; everything else
/// is allowed. `container-profile` runs a command under it, so CI can
/// test the namespace-free jail the way a container gets it (also as
/// root).
pub fn container_program() -> Result<BpfProgram, SeccompError> {
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let others = [
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_process_madvise,
    ];
    for nr in MOUNT_CALLS.into_iter().chain(others) {
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
    insert_guard(&mut prog, Some(&keys), &[], &CONTAINER_NOSYS, &[])?;
    Ok(prog)
}

/// A filter like gVisor's kernel as glovebox sees it: namespaces and
/// mounts work, but Landlock is missing (`landlock_*` → `ENOSYS`) and no
/// seccomp notification listener can be made (`SECCOMP_FILTER_FLAG_NEW_LISTENER`
/// → `EINVAL`). `container-profile --no-landlock` runs a command under
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
