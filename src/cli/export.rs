//! `glovebox export --format F [--out FILE]`: the tools as another client's
//! tool list (see `glovebox::export`). Tools a format does not accept are
//! reported on stderr and nothing is written (exit 2).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use glovebox::export::{self, ExportError, Target};

use super::{Cli, EXIT_USAGE};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// OpenAI Chat Completions: `{"type":"function","function":{…}}`.
    Openai,
    /// OpenAI Responses API: `{"type":"function", name, …, "strict": false}`.
    OpenaiResponses,
    /// Anthropic Messages API: `{name, description, input_schema, input_examples}`.
    Anthropic,
    /// MCP `tools/list` result: `{"tools": […]}`.
    Mcp,
}

impl From<Format> for Target {
    fn from(f: Format) -> Target {
        match f {
            Format::Openai => Target::OpenAi,
            Format::OpenaiResponses => Target::OpenAiResponses,
            Format::Anthropic => Target::Anthropic,
            Format::Mcp => Target::Mcp,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The client format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let project = super::project_with_servers(cli)?;
    let document = match export::export(&project, args.format.into()) {
        Ok(d) => d,
        Err(ExportError::Rejected { target, problems }) => {
            for p in &problems {
                eprintln!("glovebox: export {target}: {p}");
            }
            eprintln!(
                "glovebox: export {target}: {} tool(s) rejected; nothing was written",
                problems.len()
            );
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(e) => return Err(e.into()),
    };
    let text = export::render(&document);
    match &args.out {
        Some(path) => export::write_atomic(path, &text)?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}
