//! `glovebox create NAME --definition FILE`: an agent-created tool, under
//! the project's permission ceiling.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use glovebox::create::{self, CreateError};
use glovebox::manifest::yaml;

use super::{Cli, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The new tool's name.
    pub name: String,
    /// The definition: the fields of tool.yml, as JSON or YAML.
    #[arg(long, value_name = "FILE")]
    pub definition: PathBuf,
    /// Who creates it (recorded in the audit log).
    #[arg(long, default_value = "cli")]
    pub creator: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let project = super::project(cli)?;
    let text = std::fs::read_to_string(&args.definition)
        .with_context(|| format!("cannot read {}", args.definition.display()))?;
    let definition = yaml::parse(&text)
        .map(|d| d.value)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.definition.display()))?;
    match create::create(
        &project,
        &args.name,
        definition,
        &glovebox::audit::client_label(&args.creator),
    ) {
        Ok(c) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"ok": true, "tool": c.name, "file": c.file})
                );
            } else {
                println!(
                    "created {} ({}); it needs approval before it runs: glovebox approve {}",
                    c.name,
                    c.file.display(),
                    c.name
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let kind = match &e {
                CreateError::ExceedsCeiling { .. } => "permission_exceeds_ceiling",
                CreateError::InvalidName { .. }
                | CreateError::InvalidDefinition { .. }
                | CreateError::Lint { .. }
                | CreateError::Exists { .. }
                | CreateError::ServersName { .. }
                | CreateError::Config => "manifest_invalid",
                _ => "internal",
            };
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"ok": false, "tool": args.name, "error": {"kind": kind, "message": e.to_string()}})
                );
            } else {
                eprintln!("glovebox: {}: {kind}: {e}", args.name);
            }
            Ok(ExitCode::from(if kind == "permission_exceeds_ceiling" {
                1
            } else {
                EXIT_USAGE
            }))
        }
    }
}
