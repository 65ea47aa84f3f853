//! `glovebox migrate [NAME…|--all] [--dry-run] [--remove|--keep]`: Glee v1
//! single-file tools → v2 tool directories (logic in `glovebox::migrate`).

use std::process::ExitCode;

use glovebox::manifest::discover;
use glovebox::migrate::{self, Options};

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tools to migrate: a v1 tool's name or its file stem.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Migrate every v1 file under .glee/tools/.
    #[arg(long)]
    pub all: bool,
    /// Check and print the v2 manifests; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete each v1 file instead of keeping it as `<file>.yml.v1-migrated`.
    #[arg(long, conflicts_with = "keep")]
    pub remove: bool,
    /// Keep each v1 file as `<file>.yml.v1-migrated` (the default).
    #[arg(long)]
    pub keep: bool,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    if cli.tools_json.is_some() {
        anyhow::bail!("migrate converts .glee/tools/<name>.yml files and does not read --tools-json; pass --root DIR instead");
    }
    let root = discover::find_root(cli.root.as_deref())?;
    let opts = Options {
        names: args.names.clone(),
        all: args.all,
        dry_run: args.dry_run,
        remove: args.remove,
    };
    let done = migrate::migrate(&root, &opts)?;
    for m in &done {
        if args.dry_run {
            println!("# --- would write {} (from {})", m.to, m.from);
            print!("{}", m.text);
        } else {
            match &m.backup {
                Some(b) => println!(
                    "migrated {}: {} -> {} (v1 file kept as {b})",
                    m.name, m.from, m.to
                ),
                None => println!(
                    "migrated {}: {} -> {} (v1 file removed)",
                    m.name, m.from, m.to
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
