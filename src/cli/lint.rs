//! `glovebox lint`: check every tool manifest and the config file.

use std::process::ExitCode;

use glovebox::manifest::Severity;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object: {"ok", "errors", "warnings", "diagnostics": [...]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let project = super::project(cli)?;
    let count = |severity| {
        project
            .diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    if args.json {
        let report = serde_json::json!({
            "ok": errors == 0,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": project.diagnostics,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for diagnostic in &project.diagnostics {
            println!("{diagnostic}");
        }
        // The built-ins ship with glovebox: there is no file of theirs to check.
        let own = project
            .tools
            .iter()
            .filter(|t| t.origin != glovebox::manifest::Origin::Builtin)
            .count();
        let tools = own + project.rejected.len();
        eprintln!("{tools} tool(s) checked: {errors} error(s), {warnings} warning(s)");
    }
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
