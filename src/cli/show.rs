//! `glovebox show NAME`: one tool's manifest, normalised (defaults filled).

use std::process::ExitCode;

use glovebox::manifest::{yaml, ProjectError};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Name of the tool (its directory under .glee/tools/).
    pub name: String,
    /// Print JSON instead of YAML.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let project = super::project_with_servers(cli)?;
    let tool = match project.tool(&args.name) {
        Ok(tool) => tool,
        Err(ProjectError::ToolInvalid { name, diagnostics }) => {
            for diagnostic in &diagnostics {
                eprintln!("{diagnostic}");
            }
            anyhow::bail!("tool `{name}` has an invalid manifest; fix the errors above")
        }
        Err(e) => return Err(e.into()),
    };
    let value = serde_json::to_value(&tool.manifest)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        // YAML escapes control characters; the code points nobody sees
        // (tag characters, bidi controls) are shown escaped too.
        print!("{}", glovebox::invisible::escape(&yaml::emit(&value)?));
    }
    Ok(ExitCode::SUCCESS)
}
