//! `glovebox explain NAME`: the effective policy of a tool.

use std::process::ExitCode;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool.
    pub name: String,
    /// Print the policy as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let engine = super::engine_for(cli, &args.name)?;
    match engine.policy(&args.name) {
        Ok(policy) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&policy)?);
            } else {
                print!("{}", policy.explain());
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(outcome) => {
            let message = outcome
                .error
                .as_ref()
                .map(|e| e.message.as_str())
                .unwrap_or_default();
            eprintln!("glovebox: {}: {message}", args.name);
            Ok(ExitCode::from(outcome.exit_status()))
        }
    }
}
