//! `glovebox run NAME`: call one tool through `Engine::call`.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use glovebox::builtin;
use glovebox::engine::{Caller, Engine};
use glovebox::invisible;
use glovebox::manifest::config::SafetyMode;
use glovebox::manifest::project::Origin;
use glovebox::run::{ErrorKind, Outcome, SecretSource};
use glovebox::terminal;
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
    /// Print the tool's output and messages as they are, control and
    /// escape sequences included (on a terminal they are shown escaped,
    /// `\x1b`, so a tool cannot set the clipboard or the title, move the
    /// cursor or hide lines).
    #[arg(long, conflicts_with = "json")]
    pub raw: bool,
}

/// The JSON types `inputs.schema` declares for property `key` (empty: any).
fn declared_types<'a>(schema: &'a Value, key: &str) -> Vec<&'a str> {
    match schema
        .get("properties")
        .and_then(|p| p.get(key))
        .and_then(|p| p.get("type"))
    {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether `v` is of one of the JSON Schema `types`.
fn is_of_type(types: &[&str], v: &Value) -> bool {
    types.iter().any(|t| match (*t, v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    })
}

/// One `key=value` value: where the schema allows a string, the text as it
/// is unless it is JSON of another allowed type (`label=123` stays "123"
/// for `type: [string, null]`); otherwise parsed as JSON when it is JSON.
fn pair_value(types: &[&str], text: &str) -> Value {
    let parsed = serde_json::from_str::<Value>(text).ok();
    match parsed {
        Some(v) if types.contains(&"string") => {
            if !v.is_string() && is_of_type(types, &v) {
                v
            } else {
                Value::String(text.to_string())
            }
        }
        Some(v) => v,
        None => Value::String(text.to_string()),
    }
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
        map.insert(k.to_string(), pair_value(&declared_types(&schema, k), v));
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

/// Asks y/N on the terminal, showing the reason and the policy, for a tool
/// that needs approval and has none. The stored approvals are read (and
/// the tool's files hashed) only then: for a tool without
/// `approval.required`, or with no terminal to ask on, nothing here could
/// change the call (the engine checks the approval itself), and doing it
/// anyway cost every `run` about 0.1–0.2 ms.
fn ask_approval(engine: &Engine, name: &str) -> bool {
    let Ok(tool) = engine.tool(name) else {
        return false;
    };
    if !tool.manifest.approval.required
        || !std::io::stdin().is_terminal()
        || engine.is_approved(name)
    {
        return false;
    }
    // The reason and the grants' paths are the manifest's text, which an
    // agent may have written (`glee_tool_create`): shown with every
    // control character but newline and tab, and every invisible code
    // point, escaped, so no escape sequence can hide or redraw what is
    // being approved, and no text hides in it.
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "tool `{name}` requires approval: {}",
        invisible::escape(
            tool.manifest
                .approval
                .reason
                .as_deref()
                .unwrap_or("(no reason given)")
        )
    );
    if let Ok(policy) = engine.policy(name) {
        let _ = write!(err, "{}", invisible::escape(&policy.explain()));
    }
    let _ = write!(err, "run it? [y/N] ");
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes")
}

/// For the built-in `write_file` under `safety_mode: ask` on a terminal:
/// shows the diff and asks `Allow write? [y/N]:`.
fn confirm_write(engine: &Engine, name: &str, params: &Value) -> bool {
    let Ok(tool) = engine.tool(name) else {
        return false;
    };
    let Ok(config) = engine.project().config() else {
        return false;
    };
    if tool.origin != Origin::Builtin
        || name != builtin::write_file::NAME
        || config.safety_mode != SafetyMode::Ask
        || !std::io::stdin().is_terminal()
    {
        return false;
    }
    let Some(params) = params.as_object() else {
        return false;
    };
    let caller = Caller {
        id: "cli".into(),
        approves_once: true,
        ..Caller::default()
    };
    let surface = glovebox::surface::for_writes(engine.project());
    let ctx = builtin::Context {
        root: &engine.project().root,
        config,
        caller: &caller,
        surface: &surface,
    };
    // A call that cannot be previewed fails the same way in the engine.
    let Ok(plan) = builtin::write_file::preview(params, &ctx) else {
        return false;
    };
    let mut err = std::io::stderr();
    let _ = write!(err, "{}Allow write? [y/N]: ", plan.diff);
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "Yes" | "YES")
}

/// A usage error: with `--json` still exactly one Outcome on stdout.
fn usage_error(args: &Args, kind: ErrorKind, message: String) -> anyhow::Result<ExitCode> {
    if args.json {
        let outcome = Outcome::failure(&args.name, kind, message, Value::Object(Map::new()));
        print(&outcome, true)?;
    } else {
        eprintln!("glovebox: {message}");
    }
    Ok(ExitCode::from(EXIT_USAGE))
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let engine = match super::engine_for(cli, &args.name) {
        Ok(e) => e,
        Err(e) => return usage_error(args, e.kind(), format!("{e:#}")),
    };
    let params = match read_params(&engine, args) {
        Ok(p) => p,
        Err(e) => return usage_error(args, ErrorKind::InputInvalid, format!("{e:#}")),
    };
    let caller = Caller {
        id: "cli".into(),
        approved: args.yes
            || ask_approval(&engine, &args.name)
            || confirm_write(&engine, &args.name, &params),
        approves_once: true,
        prints_to_stderr: !args.json,
        secrets: SecretSource::Environment,
        cancel: None,
        ..Caller::default()
    };
    let outcome = engine.call(&args.name, params, &caller);
    let safe = Safe {
        out: !args.raw && std::io::stdout().is_terminal(),
        err: !args.raw && std::io::stderr().is_terminal(),
    };
    if args.json {
        print(&outcome, true)?;
    } else {
        print_for_person(&outcome, safe)?;
    }
    if !args.json && !outcome.ok {
        for hint in refusal_hints(&engine, &args.name, &outcome) {
            eprintln!("glovebox: hint: {}", terminal::shown(&hint, safe.err));
        }
    }
    Ok(ExitCode::from(outcome.exit_status()))
}

/// What the jail may have refused the failed call, named with the line
/// that would allow it (for the person at the terminal only: it looks at
/// the host's files, see `glovebox::learn::hint`).
fn refusal_hints(engine: &Engine, name: &str, outcome: &Outcome) -> Vec<String> {
    let Ok(policy) = engine.policy(name) else {
        return Vec::new();
    };
    let stderr = outcome
        .stderr
        .clone()
        .or_else(|| {
            outcome
                .error
                .as_ref()
                .and_then(|e| e.details.get("stderr"))
                .and_then(Value::as_str)
                .map(String::from)
        })
        .unwrap_or_default();
    let root = engine.project().root.clone();
    let home = glovebox::state::home();
    let readable = |p: &std::path::Path| policy.can_read(p);
    let writable = |p: &std::path::Path| policy.write.iter().any(|w| p.starts_with(w));
    let exists = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
    let g = glovebox::learn::hint::Grants {
        readable: &readable,
        writable: &writable,
        exists: &exists,
        cwd: &root,
        root: Some(&root),
        home: home.as_deref(),
    };
    glovebox::learn::hint::refusals(&stderr, &g, &format!("glovebox learn {name}"))
}

/// Where a tool's text is shown escaped ([`terminal::escaped`]): on
/// stdout, on stderr (each when it is a terminal, unless `--raw`).
#[derive(Debug, Clone, Copy)]
struct Safe {
    out: bool,
    err: bool,
}

/// The Outcome as one JSON object (`--json`: JSON escapes every control
/// character).
fn print(outcome: &Outcome, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(outcome)?);
        return Ok(());
    }
    print_for_person(
        outcome,
        Safe {
            out: false,
            err: false,
        },
    )
}

/// The Outcome for a person: the output on stdout, warnings and the error
/// on stderr, each escaped where `safe` says (every part of it may be the
/// tool's own text: its output, a warning quoting it, its traceback, an
/// error quoting its stderr).
fn print_for_person(outcome: &Outcome, safe: Safe) -> anyhow::Result<()> {
    let err = |text: &str| terminal::shown(text, safe.err).into_owned();
    for w in &outcome.warnings {
        eprintln!("glovebox: warning: {}", err(w));
    }
    match (&outcome.output, &outcome.error) {
        (Some(Value::String(s)), _) => {
            print!("{}", terminal::shown(s, safe.out));
            if !s.ends_with('\n') {
                println!();
            }
        }
        (Some(v), _) => println!(
            "{}",
            terminal::shown(&serde_json::to_string_pretty(v)?, safe.out)
        ),
        (None, Some(e)) => {
            if e.kind == ErrorKind::PythonException {
                if let Some(tb) = e.details.get("traceback").and_then(Value::as_str) {
                    eprint!("{}", err(tb));
                }
            }
            let kind = serde_json::to_value(e.kind)?;
            eprintln!(
                "glovebox: {}: {}: {}",
                outcome.tool,
                kind.as_str().unwrap_or("error"),
                err(&e.message)
            );
        }
        (None, None) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pair_values_follow_the_declared_types() {
        assert_eq!(pair_value(&["integer"], "5"), json!(5));
        assert_eq!(pair_value(&["integer"], "five"), json!("five"));
        assert_eq!(pair_value(&["string"], "123"), json!("123"));
        assert_eq!(pair_value(&["string"], "\"q\""), json!("\"q\""));
        assert_eq!(pair_value(&["string", "null"], "123"), json!("123"));
        assert_eq!(pair_value(&["string", "null"], "null"), json!(null));
        assert_eq!(pair_value(&["string", "integer"], "7"), json!(7));
        assert_eq!(pair_value(&[], "true"), json!(true));
        assert_eq!(pair_value(&[], "a b"), json!("a b"));
    }
}
