//! The `glovebox` binary: parses the command line and hands off to the
//! library. Everything a command decides lives in `glovebox::*`; the files
//! under `src/cli/` only translate flags into library calls and results into
//! output and exit statuses.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
