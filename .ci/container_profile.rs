//! `container-profile [--no-landlock] -- CMD…` (CI and benches only:
//! `cargo build --example container-profile`, never part of the
//! `glovebox` binary): runs `CMD` under a seccomp filter like Docker's
//! default profile for a process without `CAP_SYS_ADMIN`
//! ([`glovebox::jail::seccomp::container_program`]): it cannot create or
//! join namespaces, nor mount. `.ci/nouserns` runs the jail's tests under
//! it (as root, as a container's root would be) besides bubblewrap's
//! `--disable-userns`, so the namespace-free jail is tested the way both
//! kinds of host refuse namespaces. With `--no-landlock` the filter is
//! gVisor's shape instead
//! ([`glovebox::jail::seccomp::no_landlock_programs`]): namespaces work,
//! Landlock does not (`.ci/nolandlock`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use clap::Parser;

/// `container-profile` arguments.
#[derive(clap::Parser, Debug)]
#[command(name = "container-profile")]
struct Args {
    /// Like gVisor instead: namespaces and mounts work, Landlock and
    /// seccomp notification listeners do not.
    #[arg(long)]
    no_landlock: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("container-profile: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let progs = if args.no_landlock {
        glovebox::jail::seccomp::no_landlock_programs()?.to_vec()
    } else {
        vec![glovebox::jail::seccomp::container_program()?]
    };
    let (program, rest) = args.command.split_first().ok_or_else(|| {
        anyhow::anyhow!("no command given; usage: container-profile [--no-landlock] -- CMD…")
    })?;
    // Docker installs its profile without no_new_privs for root (it holds
    // CAP_SYS_ADMIN); any other user needs it to install a filter.
    if !nix::unistd::geteuid().is_root() {
        nix::sys::prctl::set_no_new_privs()
            .map_err(|e| anyhow::anyhow!("cannot set no_new_privs: {e}; run as root"))?;
    }
    for prog in &progs {
        seccompiler::apply_filter(prog).map_err(|e| {
            anyhow::anyhow!(
                "cannot install the container filter: {e}; use a kernel with seccomp filters"
            )
        })?;
    }
    let err = std::process::Command::new(program).args(rest).exec();
    Err(anyhow::anyhow!(
        "cannot execute {}: {err}",
        program.to_string_lossy()
    ))
}
