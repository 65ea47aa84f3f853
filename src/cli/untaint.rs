//! `glovebox untaint`: lets glovebox load a tainted project again, once the
//! files a call planted (and glovebox could not remove) are gone.

use std::process::ExitCode;

use super::{Cli, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(cli: &Cli, _args: &Args) -> anyhow::Result<ExitCode> {
    // The root as discovery finds it, without loading the project (which
    // a taint refuses).
    let root = match glovebox::manifest::discover::find_root(cli.root.as_deref()) {
        Ok(root) => root,
        Err(e) => match &cli.root {
            Some(r) if r.is_dir() => {
                glovebox::manifest::discover::normalize(&std::path::absolute(r)?)
            }
            _ => return Err(e.into()),
        },
    };
    match glovebox::planted::untaint(&root) {
        Ok(files) if files.is_empty() => {
            println!("{} is not tainted", root.display());
            Ok(ExitCode::SUCCESS)
        }
        Ok(files) => {
            for f in &files {
                println!("gone: {}", f.display());
            }
            println!("{} is no longer tainted", root.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("glovebox: {}", glovebox::run::error_chain(&e));
            Ok(ExitCode::from(EXIT_USAGE))
        }
    }
}
