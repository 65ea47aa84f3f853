//! `glovebox doctor`: which kernel features are enforced here (and, with
//! `--prove`, [`super::prove`]: each tool's jail attacked).

use std::process::ExitCode;

use glovebox::jail::doctor;

use super::{Cli, EXIT_SANDBOX_UNAVAILABLE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Prove it: run a battery of attacks in each tool's real jail (its
    /// grants, network, secrets as placeholders, limits) and report each
    /// invariant held, broken (with the evidence) or unproven; exit 0 only
    /// when every applicable one held.
    #[arg(long)]
    pub prove: bool,
    /// The tools to prove (default: every tool of the project).
    #[arg(value_name = "TOOL", requires = "prove")]
    pub tools: Vec<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    if args.prove {
        return super::prove::run(cli, &args.tools, args.json);
    }
    let report = doctor::examine();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let k = &report.kernel;
        println!("kernel        {}", k.release);
        println!(
            "running as    uid {}{}",
            k.euid,
            if k.euid == 0 { " (root)" } else { "" }
        );
        match glovebox::state::dir() {
            Ok(d) => println!("state dir     {}", d.display()),
            Err(e) => println!("state dir     none: {e}"),
        }
        match report.facts.landlock_errata {
            Some(errata) if k.landlock_abi > 0 => {
                println!("landlock      abi {} (errata {errata:#x})", k.landlock_abi)
            }
            _ => println!("landlock      abi {}", k.landlock_abi),
        }
        if let Some(why) = glovebox::jail::probe::landlock_absence(k) {
            println!("              {why}");
        }
        println!("seccomp       {}", if k.seccomp { "yes" } else { "no" });
        println!(
            "namespaces    user {} pid {} mount {} ipc {} net {}",
            yn(k.user_ns),
            yn(k.pid_ns),
            yn(k.mount_proc),
            yn(k.ipc_ns),
            yn(k.net_ns)
        );
        if let Some(e) = &k.user_ns_error {
            println!("              user namespace: {e}");
        }
        if let Some(e) = k.namespaces_error.as_ref().filter(|_| k.user_ns) {
            println!("              jail namespaces: {e}");
        }
        println!(
            "jail mode     {}{}",
            k.mode.label(),
            match k.mode {
                glovebox::jail::probe::Mode::Namespaces => " (pid, mount, ipc namespaces; the jail's own root)",
                glovebox::jail::probe::Mode::NamespaceFree => " (no namespaces here: landlock, seccomp, a subreaper that ends every descendant)",
                glovebox::jail::probe::Mode::None => " (neither namespaces nor landlock 6 + seccomp: only --degraded runs)",
            }
        );
        println!(
            "cgroups       memory {} pids {}",
            report.cgroup_memory, report.cgroup_pids
        );
        if !report.cgroup_fast_attach && report.cgroup_memory != "none" {
            println!(
                "note          the cgroup2 hierarchy is not mounted with favordynmods: each call waits\n              for an RCU grace period (~5-15 ms) when it joins its cgroup; remounting\n              it with -o favordynmods makes that cheap"
            );
        }
        let f = &report.facts;
        println!("runtime       {} ({})", f.runtime, f.runtime_evidence);
        if !f.userns_switches.is_empty() {
            println!("userns        {}", f.userns_switches.join(" "));
        }
        if let Some(why) = glovebox::jail::facts::userns_restriction(&f.userns_switches) {
            println!("              {why}");
        }
        match f.legacy_tiocsti {
            Some(true) => println!("tiocsti       allowed by this kernel (dev.tty.legacy_tiocsti=1): any process may push input into its terminal; jails refuse it by seccomp"),
            Some(false) => println!("tiocsti       refused by this kernel (dev.tty.legacy_tiocsti=0)"),
            None => println!("tiocsti       allowed by this kernel (no dev.tty.legacy_tiocsti before 6.2); jails refuse it by seccomp"),
        }
        match &report.enforcement {
            Ok(_) => println!("jailed run    ok"),
            Err(e) => println!("jailed run    FAILED: {e}"),
        }
        println!();
        for inv in &report.invariants {
            println!(
                "[{}] {:<34} {}",
                if inv.enforced { "ok" } else { "NO" },
                inv.name,
                inv.how
            );
        }
    }
    Ok(if report.all_enforced() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SANDBOX_UNAVAILABLE)
    })
}

fn yn(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
