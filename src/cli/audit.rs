//! `glovebox audit`: read the audit log back, verify it, or reseal it.

use std::process::ExitCode;

use glovebox::audit::Log;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print entries as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Only entries about this tool.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Only entries at or after this time (RFC 3339 prefix, e.g. 2026-11-22).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Check that no line was edited, inserted, reordered or removed, and
    /// list the calls that never finished.
    #[arg(long, conflicts_with = "reseal")]
    pub verify: bool,
    /// Accept the log as it now is, after looking at what --verify reports:
    /// logged as an AUDIT_RESEALED event; --verify passes again until the
    /// next break.
    #[arg(long)]
    pub reseal: bool,
}

/// `1-3, 7` for `[1, 2, 3, 7]`.
fn ranges(lines: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        while i + 1 < lines.len() && lines[i + 1] == lines[i] + 1 {
            i += 1;
        }
        out.push(if lines[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", lines[i])
        });
        i += 1;
    }
    out.join(", ")
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let root = super::project(cli)?.root;
    let log = Log::for_project(&root)?;
    if args.reseal {
        let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
        let before = log.reseal(&format!("cli:{user}"))?;
        if args.json {
            println!("{}", serde_json::to_string(&before)?);
        } else {
            println!(
                "{}: resealed; {} problem(s) acknowledged (logged as AUDIT_RESEALED)",
                log.path().display(),
                before.problems.len()
            );
            for p in &before.problems {
                println!("  {p}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.verify {
        let v = log.verify()?;
        if args.json {
            println!("{}", serde_json::to_string(&v)?);
        } else {
            if v.intact() {
                println!(
                    "{}: intact ({} lines, key {} of state {})",
                    log.path().display(),
                    v.valid_lines,
                    v.key_id,
                    v.state_dir.display()
                );
            } else if v.tampered() {
                println!(
                    "{}: TAMPERED OR DAMAGED (checked with key {} of state {})",
                    log.path().display(),
                    v.key_id,
                    v.state_dir.display()
                );
                for p in &v.problems {
                    println!("  {p}");
                }
                println!("  once you have looked: glovebox audit --reseal");
            } else {
                println!(
                    "{}: {} lines intact with key {} of state {}",
                    log.path().display(),
                    v.valid_lines,
                    v.key_id,
                    v.state_dir.display()
                );
            }
            if !v.other_key_lines.is_empty() {
                println!(
                    "  signed with a different key ({}), not the key of state {}: {} {} (written by glovebox with another state directory; verify them with --state-dir DIR of that state)",
                    v.other_key_ids.join(", "),
                    v.state_dir.display(),
                    if v.other_key_lines.len() == 1 { "line" } else { "lines" },
                    ranges(&v.other_key_lines),
                );
            }
            if v.acknowledged > 0 {
                println!("  {} problem(s) acknowledged by a reseal", v.acknowledged);
            }
            for p in &v.interrupted {
                println!("  interrupted: {p}");
            }
            for p in &v.unfinished {
                println!("  unfinished: {p}");
            }
        }
        return Ok(if v.intact() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    for e in log.entries()? {
        if let Some(t) = &args.tool {
            if !e.fields.iter().any(|(k, v)| k == "name" && v == t) {
                continue;
            }
        }
        if let Some(since) = &args.since {
            if e.ts.as_str() < since.as_str() {
                continue;
            }
        }
        if args.json {
            let fields: serde_json::Map<String, serde_json::Value> = e
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            println!(
                "{}",
                serde_json::json!({"ts": e.ts, "event": e.event, "fields": fields})
            );
        } else {
            let fields: Vec<String> = e.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("[{}] {} {}", e.ts, e.event, fields.join(" "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
