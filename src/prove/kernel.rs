//! The kernel's other doors: new namespaces and mounts (tried in a child
//! process of the battery, so that one that worked changes nothing the
//! other probes see), `io_uring`, the kernel keyrings; the controlling
//! terminal (`/dev/tty`, `tty_nr`, `TIOCSTI`); the capability sets and
//! `no_new_privs`.

use std::path::PathBuf;

use super::battery::{how, Ctx, Plan};
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply};

/// Plans the kernel, terminal and capability probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::Kernel;
    plan.control(
        inv,
        "start a child of the battery (where namespaces and mounts are tried)".into(),
        Action::Nothing,
    );
    plan.refused(inv, "unshare a user namespace".into(), Action::UnshareUser);
    plan.refused(
        inv,
        "unshare mount and network namespaces".into(),
        Action::UnshareMount,
    );
    plan.refused(
        inv,
        "mount a tmpfs on the private HOME".into(),
        Action::Mount {
            at: PathBuf::from("~"),
        },
    );
    plan.refused(inv, "set up an io_uring".into(), Action::IoUring);
    plan.refused(inv, "add a key to a kernel keyring".into(), Action::AddKey);
    plan.refused(
        inv,
        "find the user's kernel keyring (shared by every process of the uid)".into(),
        Action::UserKeyring,
    );

    let inv = Invariant::Terminal;
    plan.refused(
        inv,
        "open /dev/tty (a controlling terminal)".into(),
        Action::OpenTty,
    );
    plan.attack(
        inv,
        "its controlling terminal (tty_nr of /proc/self/stat)".into(),
        Action::TtyNumber,
        Box::new(|r: &Reply, _: &_| match (r.ok, r.data.as_str()) {
            (true, "0") => Verdict::held("tty_nr 0: no controlling terminal"),
            (true, n) => Verdict::broken(format!("it has a controlling terminal (tty_nr {n})")),
            (false, _) => Verdict::inconclusive(format!("cannot read it: {}", how(r.errno))),
        }),
    );
    for fd in 0..3 {
        plan.refused(
            inv,
            format!("push input into descriptor {fd}'s terminal (TIOCSTI)"),
            Action::Tiocsti { fd },
        );
    }

    let inv = Invariant::Capabilities;
    let root = ctx.euid == 0;
    plan.attack(
        inv,
        "its capability sets and no_new_privs (/proc/self/status)".into(),
        Action::Status,
        Box::new(move |r: &Reply, _: &_| capabilities(r, root)),
    );
}

/// Judges `/proc/self/status`'s capability lines: no effective,
/// permitted or ambient capability, `no_new_privs`, and (a root
/// supervisor) an empty bounding set.
fn capabilities(r: &Reply, root: bool) -> Verdict {
    if !r.ok {
        return Verdict::inconclusive(format!("cannot read it: {}", how(r.errno)));
    }
    let field = |name: &str| {
        r.data
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let mut wrong = Vec::new();
    let mut names = vec!["CapEff:", "CapPrm:", "CapAmb:"];
    if root {
        names.push("CapBnd:");
    }
    for name in names {
        match field(name) {
            Some(v) if u64::from_str_radix(&v, 16) == Ok(0) => {}
            Some(v) => wrong.push(format!("{name} {v}")),
            None => return Verdict::inconclusive(format!("no {name} line")),
        }
    }
    match field("NoNewPrivs:").as_deref() {
        Some("1") => {}
        other => wrong.push(format!("NoNewPrivs: {}", other.unwrap_or("missing"))),
    }
    if wrong.is_empty() {
        Verdict::held(if root {
            "no capability in any set, bounding set empty, no_new_privs"
        } else {
            "no capability, no_new_privs"
        })
    } else {
        Verdict::broken(wrong.join(", "))
    }
}

// ---------------------------------------------------- in the jail

/// Tries a kernel, terminal or capability action; `None` for another
/// family's. Namespaces and mounts are tried in a child process.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    use crate::jail::attempt as sys;
    Some(match action {
        Action::UnshareUser | Action::UnshareMount | Action::Mount { .. } | Action::Nothing => {
            super::inside::in_child(id, action)
        }
        Action::IoUring => match sys::io_uring_setup(1) {
            Ok(()) => Reply::ok(id, "set up (and closed)"),
            Err(e) => Reply::failed(id, e, ""),
        },
        Action::AddKey => match sys::add_key(c"glovebox-prove", b"x") {
            Ok(k) => Reply::ok(id, format!("key {k}")),
            Err(e) => Reply::failed(id, e, ""),
        },
        Action::UserKeyring => match sys::user_keyring() {
            Ok(k) => Reply::ok(id, format!("keyring {k}")),
            Err(e) => Reply::failed(id, e, ""),
        },
        Action::OpenTty => match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            Ok(_) => Reply::ok(id, "opened its controlling terminal"),
            Err(e) => Reply::failed(id, e.raw_os_error().unwrap_or(libc::EIO), ""),
        },
        Action::TtyNumber => match std::fs::read_to_string("/proc/self/stat") {
            // Field 7; the command name (field 2) may hold spaces, so count
            // from its closing parenthesis.
            Ok(stat) => {
                let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
                Reply::ok(id, rest.split_whitespace().nth(4).unwrap_or("?"))
            }
            Err(e) => Reply::failed(id, e.raw_os_error().unwrap_or(libc::EIO), ""),
        },
        Action::Tiocsti { fd } => {
            // Never into a real terminal: one would be the evidence itself.
            use std::io::IsTerminal;
            let tty = match fd {
                0 => std::io::stdin().is_terminal(),
                1 => std::io::stdout().is_terminal(),
                2 => std::io::stderr().is_terminal(),
                _ => false,
            };
            if tty {
                Reply::ok(id, "the descriptor is a terminal")
            } else {
                match sys::tiocsti(*fd, b' ') {
                    Ok(()) => Reply::ok(id, "pushed a byte"),
                    Err(e) => Reply::failed(id, e, ""),
                }
            }
        }
        Action::Status => match std::fs::read_to_string("/proc/self/status") {
            Ok(s) => Reply::ok(
                id,
                s.lines()
                    .filter(|l| l.starts_with("Cap") || l.starts_with("NoNewPrivs"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Err(e) => Reply::failed(id, e.raw_os_error().unwrap_or(libc::EIO), ""),
        },
        _ => return None,
    })
}

/// Tries a namespace or mount action in this process (the battery's
/// child, `__prove one`).
pub fn attempt_here(id: usize, action: &Action) -> Reply {
    use nix::sched::{unshare, CloneFlags};
    let r = match action {
        Action::UnshareUser => unshare(CloneFlags::CLONE_NEWUSER),
        Action::UnshareMount => unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWNET),
        Action::Mount { at } => {
            let at = super::files::expand(at);
            let r = nix::mount::mount(
                Some("tmpfs"),
                &at,
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            );
            if r.is_ok() {
                // Never leave it (without a mount namespace it would be
                // the host's).
                let _ = nix::mount::umount2(&at, nix::mount::MntFlags::MNT_DETACH);
            }
            r
        }
        Action::Nothing => Ok(()),
        _ => Err(nix::errno::Errno::EINVAL),
    };
    match r {
        Ok(()) => Reply::ok(id, ""),
        Err(e) => Reply::failed(id, e as i32, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(lines: &str) -> Reply {
        Reply::ok(0, lines)
    }

    #[test]
    fn capabilities_are_judged_from_the_status_lines() {
        let clean = "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1";
        assert!(matches!(
            capabilities(&status(clean), true),
            Verdict::Held { .. }
        ));
        let kept = clean.replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff");
        match capabilities(&status(&kept), true) {
            Verdict::Broken { evidence } => assert!(evidence.contains("CapEff: 000001ffffffffff")),
            v => panic!("{v:?}"),
        }
        // An unprivileged jail keeps the default bounding set.
        let bounded = clean.replace("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff");
        assert!(matches!(
            capabilities(&status(&bounded), false),
            Verdict::Held { .. }
        ));
        assert!(matches!(
            capabilities(&status(&bounded), true),
            Verdict::Broken { .. }
        ));
        let privs = clean.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        assert!(matches!(
            capabilities(&status(&privs), false),
            Verdict::Broken { .. }
        ));
    }
}
