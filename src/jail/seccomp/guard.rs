//! The hand-written guard spliced into every seccomp program after its
//! architecture check (see [`insert_guard`]): x32 numbers killed, the hot
//! calls decided on one argument, the `ENOSYS` answers, and a binary
//! search that allows every number the deny list has no rule for.

use seccompiler::BpfProgram;

use super::SeccompError;

/// A call the guard decides on one argument before its search: when the
/// low word of argument `arg` has none of the bits of `mask`, no rule of
/// the deny list can match the call, which is allowed there and then;
/// otherwise it goes on to the deny list. For the hot calls that have
/// argument rules (`openat` runs for every file a tool opens), whose
/// result the kernel cannot cache: they would walk the deny list's chain
/// (136 instructions for `openat`) on every call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shortcut {
    pub(super) nr: libc::c_long,
    pub(super) arg: u8,
    pub(super) mask: u32,
    /// Any bit of the mask refuses the call there and then (`EPERM`)
    /// instead of sending it on: the deny list's rules for it are exactly
    /// "one of these bits in the low word" (`clone`'s and `unshare`'s
    /// `CLONE_NEW*` flags), so the call is decided here either way and
    /// the list need not hold it.
    pub(super) refuse: bool,
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
    /// The `RET ERRNO(EPERM)` after that: a number refused outright.
    Deny,
    /// seccompiler's deny list, after the three.
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
/// deny list, or is refused there and then when it is in `denied` (its
/// rule list would be empty: refused whatever its arguments); any other
/// is allowed there and then. Leaves of up to three numbers compare each,
/// then jump; the jumps to the deny list and to the refusal go through a
/// local `JA`, so every conditional jump stays short.
fn search(keys: &[u32], denied: &[u32], out: &mut Vec<Insn>) {
    if keys.len() <= 3 {
        let chain = out.len() + keys.len() + 1;
        let deny = chain + 1;
        for k in keys {
            let to = if denied.binary_search(k).is_ok() {
                deny
            } else {
                chain
            };
            out.push(Insn::jump(op::JEQ_K, *k, To::At(to), To::Next));
        }
        out.push(Insn::jump(op::JA, 0, To::Allow, To::Next));
        out.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
        if keys.iter().any(|k| denied.binary_search(k).is_ok()) {
            out.push(Insn::jump(op::JA, 0, To::Deny, To::Next));
        }
        return;
    }
    let mid = keys.len() / 2;
    let node = out.len();
    out.push(Insn::jump(op::JGE_K, keys[mid], To::Next, To::Next));
    search(&keys[..mid], denied, out);
    out[node].jt = To::At(out.len());
    search(&keys[mid..], denied, out);
}

/// Splices a guard into seccompiler's program right after its 3-instruction
/// architecture check, or fails (never a program without its guard). The
/// guard loads the system call number and:
/// - on x86_64, kills the process when the number is at or above
///   `0x4000_0000`: the x32 ABI shares the architecture value but sets bit
///   30 of the number, and a deny list keyed on native numbers would miss
///   those calls;
/// - decides the `shortcuts` ([`super::shortcuts`]) on one argument: allowed, or
///   on to the deny list;
/// - answers `ENOSYS` for `nosys` ([`super::NOSYS`] in a jail);
/// - with `keys` (every number the deny list has a rule for), allows any
///   other number at once, after a binary search, and refuses those of
///   `denied` (`EPERM`, as the deny list would: numbers refused whatever
///   their arguments, which the caller leaves out of seccompiler's list —
///   five instructions each there; a search that does not fit then fails
///   instead of falling back to the list). seccompiler's list is a
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
pub(super) fn insert_guard(
    prog: &mut BpfProgram,
    keys: Option<&[i64]>,
    denied: &[i64],
    nosys: &[libc::c_long],
    shortcuts: &[Shortcut],
) -> Result<(), SeccompError> {
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
        let any = if s.refuse { To::Deny } else { To::Chain };
        guard.push(Insn::jump(op::JSET_K, s.mask, any, To::Allow));
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
    let mut denied: Vec<u32> = denied
        .iter()
        .map(|k| u32::try_from(*k).ok())
        .collect::<Option<_>>()
        .ok_or_else(|| SeccompError::Compile {
            message: "a system call refused outright has no 32-bit number".into(),
        })?;
    denied.sort_unstable();
    denied.dedup();
    if shortcuts
        .iter()
        .any(|s| u32::try_from(s.nr).is_ok_and(|nr| denied.binary_search(&nr).is_ok()))
    {
        // A shortcut sends its call on to the list, which would not hold it.
        return Err(SeccompError::Compile {
            message: "a system call with a shortcut is refused outright".into(),
        });
    }
    if denied.iter().any(|d| keys.binary_search(d).is_err()) {
        return Err(SeccompError::Compile {
            message: "a system call refused outright is not among the searched numbers".into(),
        });
    }
    if keys.is_empty() {
        guard.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
    } else {
        search(&keys, &denied, &mut guard);
    }
    let resolved = resolve(&guard).or_else(|| {
        // A search too long for 8-bit jumps: the deny list alone, which is
        // correct, only slower — unless the search refuses numbers the
        // list does not hold (then no program: the caller builds the
        // whole list).
        if !denied.is_empty() {
            return None;
        }
        let mut plain = plain;
        plain.push(Insn::jump(op::JA, 0, To::Chain, To::Next));
        resolve(&plain)
    });
    // Fails closed: a program without its guard would allow x32 numbers
    // and run the `ENOSYS` calls (`openat2`, `io_uring_*`) unchecked.
    let Some(mut resolved) = resolved else {
        return Err(SeccompError::Compile {
            message: "the guard's jumps do not fit in classic bpf".into(),
        });
    };
    if prog.len() < 3 {
        return Err(SeccompError::Compile {
            message: "the program has no architecture check to put the guard after".into(),
        });
    }
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
    resolved.push(seccompiler::sock_filter {
        code: op::RET_K,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
    });
    prog.splice(3..3, resolved);
    Ok(())
}

/// The guard's jumps made relative (the three `RET`s follow it, then the
/// deny list); `None` when a conditional jump does not fit in 8 bits.
fn resolve(guard: &[Insn]) -> Option<Vec<seccompiler::sock_filter>> {
    let len = guard.len();
    let target = |to: To, i: usize| match to {
        To::Next => i + 1,
        To::At(n) => n,
        To::Nosys => len,
        To::Allow => len + 1,
        To::Deny => len + 2,
        To::Chain => len + 3,
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
