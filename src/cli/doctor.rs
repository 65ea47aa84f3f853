//! `glovebox doctor`.

use std::process::ExitCode;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_cli: &Cli, _args: &Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
