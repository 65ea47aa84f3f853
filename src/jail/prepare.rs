//! Everything a call's child needs, made in the supervisor before the
//! clone from the call's [`Plan`]: the private home, the Landlock ruleset
//! and the mount tree's operations from the held grants, the seccomp
//! programs, the call's cgroups, the program, argv and environment as C
//! strings, the stdio pipes, the id maps and the hand-off sockets. Nothing
//! of the call runs here.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::cgroup::CallGroup;
use super::child::{Exec, IdMaps, NetHandoff, Prepared};
use super::fs as jfs;
use super::hold::{self, Held, Links};
use super::home::{self, Home};
use super::network::{self as net, NetPlan};
use super::plan::Plan;
use super::probe::Kernel;
use super::seccomp::{self, Filter};
use super::spawn::{Grants, JAIL_PATH};
use super::spec::{Spec, Stdin};
use super::sys;
use super::tree::{MetadataGuard, MountOps, TreeError};
use super::JailError;

/// A call ready to launch: the child's [`Prepared`] data and what the
/// supervisor keeps of the call.
pub(super) struct Call {
    pub(super) prepared: Prepared,
    /// The program found in the jail's `PATH` (named in errors).
    pub(super) program: PathBuf,
    /// The private home; a host directory is removed when this drops.
    pub(super) home: Home,
    /// The call's cgroups, removed when this drops.
    pub(super) group: Option<CallGroup>,
    /// The write grants where they really are (the metadata supervisor's).
    pub(super) write_grants: Vec<PathBuf>,
    /// The bytes to feed the child's stdin, and the pipe's write end.
    pub(super) stdin_feed: Option<(OwnedFd, Vec<u8>)>,
    /// The read ends of the child's stdout and stderr.
    pub(super) out_r: OwnedFd,
    pub(super) err_r: OwnedFd,
}

/// Prepares the call `plan` decided for `spec`, from its held `grants`
/// (whose descriptors are closed before it returns).
pub(super) fn prepare(
    spec: &Spec,
    kernel: &Kernel,
    plan: &Plan,
    grants: Grants,
) -> Result<Call, JailError> {
    let Grants {
        held,
        mut write,
        protect,
        split,
        tree,
    } = grants;
    // --- the private HOME: a tmpfs in the jail's own tree, else a host
    // directory granted like a write path.
    let mut home_held = Vec::new();
    let home = match plan.guard {
        MetadataGuard::Tree => Home::Jail,
        MetadataGuard::Seccomp => {
            let dir = home::host_home()?;
            home::write_home_files(spec, dir.path())?;
            home_held =
                hold::hold(dir.path(), &Links::Checked { root: None }).map_err(TreeError::from)?;
            write.push(dir.path().to_path_buf());
            Home::Host(dir)
        }
    };
    let landlock = match plan.landlock_abi {
        Some(abi) => {
            let rules = match &split {
                Some(split) => jfs::Rules {
                    read_only: held.read_only.iter().chain(&split.read_only).collect(),
                    read_exec: held.read.iter().chain(&held.exec).collect(),
                    write: split.write.iter().chain(&home_held).collect(),
                },
                None => jfs::Rules {
                    read_only: held.read_only.iter().collect(),
                    read_exec: held.read.iter().chain(&held.exec).collect(),
                    write: held.write.iter().chain(&home_held).collect(),
                },
            };
            // Behind the connect broker the tool holds no TCP right of its
            // own: the supervisor connects for it.
            let own_tcp = spec.network && !matches!(plan.net, NetPlan::Brokered(_));
            Option::<OwnedFd>::from(jfs::ruleset_held(abi, &rules, own_tcp)?)
        }
        None => None,
    };
    let mount_ops = match plan.guard {
        MetadataGuard::Tree => Some(mount_ops(spec, &tree)?),
        MetadataGuard::Seccomp => None,
    };
    // Every decision about the held paths is made (the tree's nodes and
    // identities, the Landlock rules, which hold the inodes themselves):
    // their descriptors go now, not at the call's end, so that calls in
    // flight do not pile them up (each child inherits the supervisor's
    // table until its exec). The child still compares each bind source
    // with the identity decided here; an inode freed and its number
    // reused meanwhile could only be found at the same path.
    drop::<(_, Vec<Held>, _, Vec<Held>)>((held, protect, split, home_held));
    // The Landlock rule of the home and of /dev/shm, added in the child
    // once their tmpfs exist.
    let home_rule = match (&home, plan.landlock_abi) {
        (Home::Jail, Some(abi)) => Some(jfs::write_access_bits(abi)),
        _ => None,
    };
    let seccomp = seccomp_filter(spec, kernel, plan)?;
    let group = if plan.memory_cgroup || plan.pids_cgroup {
        Some(CallGroup::create(
            plan.memory_cgroup.then_some(spec.limits.memory_bytes),
            plan.pids_cgroup.then_some(spec.limits.pids),
        )?)
    } else {
        None
    };
    let stdio = stdio(spec)?;
    let (program, exec) = command(spec, &home, plan)?;
    let prepared = Prepared {
        exec,
        standby: None,
        cwd: cstring(spec.cwd.as_os_str(), "the working directory")?,
        stdin: high(stdio.stdin)?,
        stdout: high(stdio.stdout)?,
        stderr: high(stdio.stderr)?,
        report: -1,
        report_read_end: -1,
        keep: Vec::new(),
        gate: None,
        landlock,
        home_rule,
        private_shm: mount_ops.is_some() && tree.private_shm(),
        seccomp,
        tree: mount_ops,
        cgroup_procs: group
            .as_ref()
            .map(|g| g.procs.iter().map(AsRawFd::as_raw_fd).collect())
            .unwrap_or_default(),
        id_maps: plan.id_maps.then(|| id_maps(kernel)),
        private_proc: plan.private_proc,
        mask_proc: kernel.euid == 0,
        rlimits: plan.rlimits.clone(),
        drop_caps: plan.drop_caps.then(sys::last_cap),
        reaper: plan.reaper,
        notify: if kernel.seccomp {
            Some(handoff(
                "creating the metadata supervisor's hand-off socket",
                Default::default(),
            )?)
        } else {
            None
        },
        net: match plan.net {
            NetPlan::Proxied(_) => {
                // The host's resolver configuration, as the jail sees it
                // (the tree binds the host's `/etc`); unreadable is none.
                let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
                Some(handoff(
                    "creating the egress hand-off socket",
                    net::LoopbackDns::from_resolv_conf(&resolv),
                )?)
            }
            _ => None,
        },
    };
    // Test builds only: one layer switched off (`super::weaken`).
    #[cfg(test)]
    let prepared = {
        let mut prepared = prepared;
        super::weaken::prepared(&mut prepared);
        prepared
    };
    Ok(Call {
        prepared,
        program,
        home,
        group,
        write_grants: write,
        stdin_feed: stdio.feed,
        out_r: stdio.out_r,
        err_r: stdio.err_r,
    })
}

/// The mount tree's operations: the held grants' binds, then the private
/// home (a tmpfs holding the spec's home files) and `/dev/shm`.
fn mount_ops(spec: &Spec, tree: &super::tree::Tree) -> Result<MountOps, TreeError> {
    let mut ops = tree.mount_ops()?;
    let files: Vec<(&str, &[u8])> = spec
        .home_files
        .iter()
        .map(|f| (f.name.as_str(), f.contents.as_slice()))
        .collect();
    ops.ops
        .extend(super::tree::home_ops(spec.limits.memory_bytes, &files)?);
    if tree.private_shm() {
        ops.ops
            .extend(super::tree::shm_ops(spec.limits.memory_bytes)?);
    }
    Ok(ops)
}

/// The call's seccomp programs (`None`: degraded, no seccomp); in learn
/// mode the same filter, with the observer's calls handed to the
/// supervisor too — no learning run without it (it would miss what it
/// cannot see).
fn seccomp_filter(
    spec: &Spec,
    kernel: &Kernel,
    plan: &Plan,
) -> Result<Option<&'static Filter>, JailError> {
    let filter = match plan.seccomp {
        Some(sockets) => Some(seccomp::filter_with(
            sockets,
            plan.guard == MetadataGuard::Seccomp,
            plan.count_forks,
        )?),
        None => None,
    };
    match (&spec.observe, plan.seccomp) {
        (None, _) => Ok(filter),
        (Some(_), Some(sockets)) if kernel.seccomp => Ok(filter
            .map(|f| {
                let metadata = plan.guard == MetadataGuard::Seccomp;
                seccomp::observing(f, sockets, metadata, plan.count_forks)
            })
            .transpose()?),
        (Some(_), _) => Err(super::observe::unavailable()),
    }
}

/// The program found in the jail's `PATH` (named in errors), and what
/// `execve` takes: the program, argv and the call's environment with its
/// private home at `home`.
pub(super) fn command(spec: &Spec, home: &Home, plan: &Plan) -> Result<(PathBuf, Exec), JailError> {
    let proxied = matches!(plan.net, NetPlan::Proxied(_) | NetPlan::Brokered(_));
    let env = call_env(spec, home.path(), proxied);
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| JAIL_PATH.into());
    // The plan refused an empty argv (`plan::check_spec`).
    let program = resolve_program(spec.argv.first().map_or(OsStr::new(""), |a| a), &path_var)?;
    let argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| cstring(a, "an argument"))
        .collect::<Result<_, _>>()?;
    let exec = Exec {
        program: cstring(program.as_os_str(), "the program path")?,
        argv: sys::CArray::new(argv),
        envp: sys::CArray::new(env_cstrings(&env)?),
    };
    Ok((program, exec))
}

/// The child's stdin, stdout and stderr, and the supervisor's ends.
struct Stdio {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    feed: Option<(OwnedFd, Vec<u8>)>,
    out_r: OwnedFd,
    err_r: OwnedFd,
}

fn stdio(spec: &Spec) -> Result<Stdio, JailError> {
    let (stdin, feed) = match &spec.stdin {
        Stdin::Null => (open_null()?, None),
        Stdin::Bytes(data) => {
            let (r, w) = pipe()?;
            (high(r)?, Some((w, data.clone())))
        }
        Stdin::InheritIfSafe => match inherit_stdin()? {
            Some(fd) => (fd, None),
            None => (open_null()?, None),
        },
        Stdin::Channel(channel) | Stdin::Duplex(channel) => (
            high(channel.take().ok_or_else(|| JailError::InvalidSpec {
                message: "the control channel was already given to another process".into(),
            })?)?,
            None,
        ),
    };
    let (out_r, mut stdout) = pipe()?;
    if matches!(spec.stdin, Stdin::Duplex(_)) {
        // The channel is the child's stdout too; the pipe gets no writer.
        stdout = stdin.try_clone().map_err(|source| JailError::Prepare {
            what: "duplicating a descriptor",
            source,
        })?;
    }
    let (err_r, stderr) = pipe()?;
    Ok(Stdio {
        stdin,
        stdout,
        stderr,
        feed,
        out_r,
        err_r,
    })
}

/// The user namespace's id maps: the supervisor's own ids, mapped to
/// themselves.
fn id_maps(kernel: &Kernel) -> IdMaps {
    let (uid, gid) = (kernel.euid, kernel.egid);
    IdMaps {
        setgroups: c"/proc/self/setgroups".into(),
        uid_map: c"/proc/self/uid_map".into(),
        gid_map: c"/proc/self/gid_map".into(),
        uid_line: format!("{uid} {uid} 1\n").into_bytes(),
        gid_line: format!("{gid} {gid} 1\n").into_bytes(),
    }
}

/// A socketpair for a descriptor the child hands to the supervisor.
fn handoff(what: &'static str, dns: net::LoopbackDns) -> Result<NetHandoff, JailError> {
    let (parent_end, child_end) =
        sys::socketpair().map_err(|source| JailError::Prepare { what, source })?;
    Ok(NetHandoff {
        child_end,
        parent_end,
        dns,
    })
}

fn cstring(s: &OsStr, what: &str) -> Result<CString, JailError> {
    CString::new(s.as_bytes()).map_err(|_| JailError::InvalidSpec {
        message: format!("{what} contains a NUL byte"),
    })
}

/// Finds `program` in the jail's PATH (the supervisor's own PATH never
/// matters: a jail sees only its own).
fn resolve_program(program: &OsStr, path_var: &OsStr) -> Result<PathBuf, JailError> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    for dir in std::env::split_paths(path_var) {
        let candidate = dir.join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(JailError::NotFound {
        program: program.to_string_lossy().into_owned(),
    })
}

fn open_null() -> Result<OwnedFd, JailError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|source| JailError::Prepare {
            what: "opening /dev/null",
            source,
        })
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), JailError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| JailError::Prepare {
        what: "creating a pipe",
        source: e.into(),
    })
}

/// An fd numbered 3 or above, so that moving it onto 0/1/2 in the child
/// never clobbers another of them.
fn high(fd: OwnedFd) -> Result<OwnedFd, JailError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    fd.try_clone().map_err(|source| JailError::Prepare {
        what: "duplicating a descriptor",
        source,
    })
}

/// The supervisor's stdin, when it is safe to hand over (a pipe or a
/// regular file: never a terminal, whose ioctls could inject keystrokes, nor
/// a socket, which would be a network channel).
fn inherit_stdin() -> Result<Option<OwnedFd>, JailError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let Ok(stat) = nix::sys::stat::fstat(stdin.as_fd()) else {
        return Ok(None);
    };
    let kind = stat.st_mode & libc::S_IFMT;
    if (kind == libc::S_IFIFO || kind == libc::S_IFREG) && !sys::is_tty(0) {
        // try_clone_to_owned uses F_DUPFD_CLOEXEC from 3 upwards.
        let fd = stdin
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| JailError::Prepare {
                what: "duplicating stdin",
                source,
            })?;
        return Ok(Some(fd));
    }
    Ok(None)
}

/// Builds the jail's environment: the minimal base, then the caller's
/// explicit variables.
fn environment(spec: &Spec, home: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), JAIL_PATH.into()),
        ("HOME".into(), home.as_os_str().to_owned()),
        ("TMPDIR".into(), home.as_os_str().to_owned()),
        (
            "LANG".into(),
            std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
        ),
        (
            "TZ".into(),
            std::env::var_os("TZ").unwrap_or_else(|| "UTC".into()),
        ),
    ];
    // Test builds only: the environment inherited (`super::weaken`).
    #[cfg(test)]
    super::weaken::inherit(&mut env);
    for (k, v) in &spec.env {
        if k == "HOME" || k == "TMPDIR" {
            continue;
        }
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// The call's environment with its private home at `home`: the minimal
/// base, the caller's variables, the proxy's (a call behind the egress
/// proxy), then the variables naming the spec's home files.
fn call_env(spec: &Spec, home: &Path, proxied: bool) -> Vec<(OsString, OsString)> {
    let mut env = environment(spec, home);
    if proxied {
        net::proxy_environment(&mut env);
    }
    for f in &spec.home_files {
        for v in &f.variables {
            env.retain(|(k, _)| k != v.as_str());
            env.push((v.into(), home.join(&f.name).into_os_string()));
        }
    }
    env
}

/// The environment as `KEY=value` C strings.
fn env_cstrings(env: &[(OsString, OsString)]) -> Result<Vec<CString>, JailError> {
    env.iter()
        .map(|(k, v)| {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                return Err(JailError::InvalidSpec {
                    message: format!("invalid environment variable name {k:?}"),
                });
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| JailError::InvalidSpec {
                message: format!("environment variable {k:?} contains a NUL byte"),
            })
        })
        .collect()
}
