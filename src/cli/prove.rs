//! `glovebox doctor --prove [TOOL…]`: each tool's jail attacked by the
//! battery, the report printed (or its JSON), and the exit status it
//! decides: 0 every applicable invariant held, 1 one is broken or
//! unproven, 3 a tool's jail cannot be made here.

use std::process::ExitCode;

use glovebox::prove::verdict::{Report, Verdict};

use super::Cli;

pub fn run(cli: &Cli, tools: &[String], json: bool) -> anyhow::Result<ExitCode> {
    // The environment probe's canary: in glovebox's own environment, never
    // in a jail's. Set before any thread starts.
    let canary = (
        glovebox::prove::ENV_CANARY.to_string(),
        glovebox::prove::nonce(16),
    );
    std::env::set_var(&canary.0, &canary.1);
    let engine =
        glovebox::engine::Engine::open_with(cli.root.as_deref(), cli.tools_json.as_deref())?;
    for name in tools {
        if engine.tool(name).is_err() {
            anyhow::bail!("no tool `{name}` in this project; `glovebox list` shows them");
        }
    }
    let options = glovebox::prove::Options {
        tools: tools.to_vec(),
        exe: std::env::current_exe()?,
        env_canary: Some(canary),
    };
    let report = glovebox::prove::prove(&engine, &options);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(ExitCode::from(report.exit_status()))
}

fn print(report: &Report) {
    let k = glovebox::jail::probe::kernel();
    println!(
        "proving the tools of {} (jail mode {}, landlock abi {}, uid {})",
        report.root.display(),
        k.mode.label(),
        k.landlock_abi,
        k.euid
    );
    for t in &report.tools {
        println!();
        if t.not_run.is_some() {
            println!("{} ({}): not run: {}", t.tool, t.kind, t.note);
            continue;
        }
        println!("{} ({}), {} ms", t.tool, t.kind, t.duration_ms);
        if !t.note.is_empty() {
            println!("  note: {}", t.note);
        }
        for i in &t.invariants {
            println!(
                "  [{:<8}] {:<42} {}",
                i.verdict.label(),
                i.name,
                i.verdict.text()
            );
            if matches!(
                i.verdict,
                Verdict::Held { .. } | Verdict::NotApplicable { .. }
            ) {
                continue;
            }
            for c in i.checks.iter().filter(|c| {
                !matches!(
                    c.verdict,
                    Verdict::Held { .. } | Verdict::NotApplicable { .. }
                )
            }) {
                println!(
                    "             {}{}: {} {}",
                    if c.control { "control: " } else { "" },
                    c.what,
                    c.verdict.label(),
                    c.verdict.text()
                );
            }
        }
    }
    println!();
    println!("summary  {}", report.summary_line());
}
