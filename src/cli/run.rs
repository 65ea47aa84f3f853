//! `glovebox run NAME`: call one tool through `Engine::call`.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use glovebox::engine::{Caller, Engine};
use glovebox::run::{ErrorKind, Outcome, SecretSource};
use serde_json::{Map, Value};

use super::{Cli, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to run.
    pub name: String,
    /// Parameters as `key=value` (a value is parsed as JSON unless the
    /// input schema says the key is a string).
    #[arg(value_name = "KEY=VALUE")]
    pub pairs: Vec<String>,
    /// Parameters as one JSON object.
    #[arg(long, conflicts_with_all = ["params_file", "pairs"])]
    pub params: Option<String>,
    /// Parameters from a JSON file (`-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "pairs")]
    pub params_file: Option<PathBuf>,
    /// Print the Outcome as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Approve this call of a tool that requires approval.
    #[arg(long)]
    pub yes: bool,
}

fn parse_pairs(engine: &Engine, name: &str, pairs: &[String]) -> anyhow::Result<Value> {
    let schema = engine
        .tool(name)
        .ok()
        .map(|t| t.manifest.inputs.schema.clone())
        .unwrap_or(Value::Null);
    let mut map = Map::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("parameter {pair:?} is not KEY=VALUE"))?;
        let declared_string = schema
            .pointer(&format!("/properties/{k}/type"))
            .and_then(Value::as_str)
            == Some("string");
        let value = if declared_string {
            Value::String(v.to_string())
        } else {
            serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()))
        };
        map.insert(k.to_string(), value);
    }
    Ok(Value::Object(map))
}

fn read_params(engine: &Engine, args: &Args) -> anyhow::Result<Value> {
    if let Some(text) = &args.params {
        return serde_json::from_str(text).context("--params is not valid JSON");
    }
    if let Some(file) = &args.params_file {
        let mut text = String::new();
        if file.as_os_str() == "-" {
            std::io::stdin().read_to_string(&mut text)?;
        } else {
            text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
        }
        return serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", file.display()));
    }
    parse_pairs(engine, &args.name, &args.pairs)
}

/// Asks y/N on the terminal, showing the reason and the policy.
fn ask_approval(engine: &Engine, name: &str) -> bool {
    let Ok(tool) = engine.tool(name) else {
        return false;
    };
    if !tool.manifest.approval.required || !std::io::stdin().is_terminal() {
        return false;
    }
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "tool `{name}` requires approval: {}",
        tool.manifest
            .approval
            .reason
            .as_deref()
            .unwrap_or("(no reason given)")
    );
    if let Ok(policy) = engine.policy(name) {
        let _ = write!(err, "{}", policy.explain());
    }
    let _ = write!(err, "run it? [y/N] ");
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes")
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let engine = Engine::open(cli.root.as_deref())?;
    let params = match read_params(&engine, args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("glovebox: {e:#}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let caller = Caller {
        id: "cli".into(),
        approved: args.yes || ask_approval(&engine, &args.name),
        secrets: SecretSource::Environment,
    };
    let outcome = engine.call(&args.name, params, &caller);
    print(&outcome, args.json)?;
    Ok(ExitCode::from(outcome.exit_status()))
}

fn print(outcome: &Outcome, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(outcome)?);
        return Ok(());
    }
    for w in &outcome.warnings {
        eprintln!("glovebox: warning: {w}");
    }
    match (&outcome.output, &outcome.error) {
        (Some(Value::String(s)), _) => {
            print!("{s}");
            if !s.ends_with('\n') {
                println!();
            }
        }
        (Some(v), _) => println!("{}", serde_json::to_string_pretty(v)?),
        (None, Some(e)) => {
            if e.kind == ErrorKind::PythonException {
                if let Some(tb) = e.details.get("traceback").and_then(Value::as_str) {
                    eprint!("{tb}");
                }
            }
            let kind = serde_json::to_value(e.kind)?;
            eprintln!(
                "glovebox: {}: {}: {}",
                outcome.tool,
                kind.as_str().unwrap_or("error"),
                e.message
            );
        }
        (None, None) => {}
    }
    Ok(())
}
