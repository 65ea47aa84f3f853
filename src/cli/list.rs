//! `glovebox list`: the tools of the project.

use std::process::ExitCode;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print a JSON array of {"name", "kind", "description"}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let project = super::project_with_servers(cli)?;
    if args.json {
        let tools: Vec<_> = project
            .tools
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "kind": t.manifest.kind,
                    "description": glovebox::invisible::remove(&t.manifest.description),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&tools)?);
    } else {
        let width = project
            .tools
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(0);
        for tool in &project.tools {
            let m = &tool.manifest;
            // A description is the manifest's (or a server's) text:
            // shown with what nobody sees, or a terminal acts on, escaped.
            println!(
                "{:width$}  {:7}  {}",
                tool.name,
                m.kind.as_str(),
                glovebox::invisible::escape(m.description.lines().next().unwrap_or_default())
            );
        }
    }
    if !project.rejected.is_empty() {
        eprintln!(
            "glovebox: not listed, manifest has errors: {}; run `glovebox lint`",
            project.rejected.join(", ")
        );
    }
    if project.config.is_none() {
        eprintln!("glovebox: .glee/config.yml is invalid; run `glovebox lint`");
    }
    if let Some(notice) = project.unread_notice() {
        eprintln!("glovebox: {notice}");
    }
    Ok(ExitCode::SUCCESS)
}
