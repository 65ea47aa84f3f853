//! `glovebox __prove` (hidden): `doctor --prove`'s battery, which the
//! prover starts in each tool's jail in place of its code (and its own
//! children and canary). Not meant to be run by hand.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The mode and its argument (none: the battery, reading its request
    /// from stdin).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub fn run(args: &Args) -> ExitCode {
    glovebox::prove::inside::main(&args.args)
}
