//! `glovebox audit`: read the audit log back, verify it, or reseal it.

use std::process::ExitCode;

use glovebox::audit::{self, Log};

use super::Cli;

/// `audit --verify`'s exit status when the state directory holds no key:
/// nothing could be checked (0 is intact, 1 not intact).
pub const EXIT_KEY_MISSING: u8 = 4;

/// `audit --verify`'s exit status when the log read is not the one this
/// state's head describes (none there, or the server's `--audit-dir` log
/// is elsewhere): pass the server's `--audit-dir` / `GLOVEBOX_AUDIT_DIR`.
pub const EXIT_NOT_THIS_LOG: u8 = 5;

/// `audit --verify --exported`'s exit status when every stream is intact
/// up to its last checkpoint and some have an unsealed tail (a replica
/// killed, or its tail cut): not "tampered" (1).
pub const EXIT_UNSEALED: u8 = 6;

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
    /// With --verify: check exported audit streams instead (`glovebox
    /// serve --audit-export`, one or several replicas', merged in any
    /// order; `-` reads stdin): every line there, each once, in order, up
    /// to a signed final checkpoint. Repeatable.
    #[arg(long, value_name = "FILE", requires_all = ["verify", "checkpoint_key"])]
    pub exported: Vec<std::path::PathBuf>,
    /// The public key the exported checkpoints must verify with.
    #[arg(long, value_name = "PUBKEY", requires = "exported")]
    pub checkpoint_key: Option<std::path::PathBuf>,
    /// The directory of the audit log, as `glovebox serve --audit-dir`
    /// (a replica's log is not in the project).
    #[arg(long, value_name = "DIR", env = "GLOVEBOX_AUDIT_DIR")]
    pub audit_dir: Option<std::path::PathBuf>,
}

/// `audit --verify --exported`: each stream intact and sealed, or exit 1.
fn verify_exported(args: &Args, key: &std::path::Path) -> anyhow::Result<ExitCode> {
    let key = glovebox::signing::load_verifying(key)?;
    let mut text = String::new();
    let mut cut_short = Vec::new();
    for f in &args.exported {
        let mut one = String::new();
        if f.as_os_str() == "-" {
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut one)?;
        } else {
            one = std::fs::read_to_string(f)?;
        }
        // A process killed while writing leaves its last record cut
        // short: no line of any stream, said apart.
        if !one.is_empty() && !one.ends_with('\n') {
            let start = one.rfind('\n').map_or(0, |i| i + 1);
            if serde_json::from_str::<serde_json::Value>(&one[start..]).is_err() {
                cut_short.push(format!(
                    "{}: its last record is cut short ({} bytes, no newline): a replica killed while writing it",
                    f.display(),
                    one.len() - start
                ));
                one.truncate(start);
            }
        }
        text.push_str(&one);
        text.push('\n');
    }
    let (streams, stray) = audit::checkpoint::verify(text.lines(), &key);
    let intact = stray.is_empty()
        && cut_short.is_empty()
        && !streams.is_empty()
        && streams.iter().all(|s| s.intact());
    // Every stream intact or intact to its last checkpoint: killed
    // replicas, not tampering.
    let to_checkpoints = !intact
        && stray.is_empty()
        && !streams.is_empty()
        && streams
            .iter()
            .all(|s| s.intact() || s.intact_to_checkpoint());
    if args.json {
        println!(
            "{}",
            serde_json::json!({"intact": intact, "intact_to_checkpoints": to_checkpoints, "streams": streams, "problems": stray, "cut_short": cut_short})
        );
    } else {
        // The replica and stream ids are the records' text (a record may
        // be forged): shown escaped.
        for s in &streams {
            let verdict = if s.intact() {
                "intact and sealed".to_string()
            } else if s.intact_to_checkpoint() {
                format!(
                    "intact up to its last checkpoint (line {}); UNSEALED TAIL: {} line(s) after it, and no final checkpoint (the replica was killed, or its tail was cut)",
                    s.verified_to, s.unsealed
                )
            } else {
                "NOT INTACT".to_string()
            };
            println!(
                "replica {} (stream {}): {} line(s), {} checkpoint(s) verified, {verdict}",
                audit::display(&s.replica),
                audit::display(&s.stream),
                s.lines,
                s.checkpoints,
            );
            for p in &s.problems {
                println!("  {p}");
            }
        }
        for p in stray.iter().chain(&cut_short) {
            println!("{p}");
        }
        if streams.is_empty() {
            println!("no exported audit stream found");
        }
    }
    Ok(if intact {
        ExitCode::SUCCESS
    } else if to_checkpoints {
        ExitCode::from(EXIT_UNSEALED)
    } else {
        ExitCode::from(1)
    })
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
    if let Some(key) = &args.checkpoint_key {
        return verify_exported(args, key);
    }
    let root = super::project(cli)?.root;
    if let Some(dir) = &args.audit_dir {
        // Where `glovebox serve --audit-dir` (GLOVEBOX_AUDIT_DIR) wrote it.
        glovebox::replica::set(glovebox::replica::Settings {
            audit_dir: Some(std::path::absolute(dir).unwrap_or_else(|_| dir.clone())),
            ..Default::default()
        });
    }
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
        if let Some(key) = &v.key_missing {
            if args.json {
                println!("{}", serde_json::to_string(&v)?);
            } else {
                println!(
                    "{}: the audit key {} is missing; lines cannot be verified, neither as intact nor as tampered (glovebox never makes a key to verify with)",
                    log.path().display(),
                    key.display()
                );
                if !v.other_key_ids.is_empty() {
                    println!(
                        "  the lines are signed with key {}",
                        v.other_key_ids.join(", ")
                    );
                }
                println!(
                    "  restore the state directory {} (or its audit.key) from a backup, or verify with --state-dir DIR of the state that signed them",
                    v.state_dir.display()
                );
                for p in &v.interrupted {
                    println!("  interrupted: {p}");
                }
                for p in &v.unfinished {
                    println!("  unfinished: {p}");
                }
            }
            return Ok(ExitCode::from(EXIT_KEY_MISSING));
        }
        if args.json {
            println!("{}", serde_json::to_string(&v)?);
        } else {
            if v.not_this_log() {
                match &v.head_describes {
                    Some(other) => println!(
                        "{}: not the audit log this state's head describes ({}, {} line(s)): the server writes its log there (glovebox serve --audit-dir / GLOVEBOX_AUDIT_DIR); verify it with --audit-dir {}",
                        log.path().display(),
                        other.display(),
                        v.head_lines.unwrap_or(0),
                        other.parent().map(|d| d.display().to_string()).unwrap_or_default(),
                    ),
                    None => println!(
                        "{}: no audit log here, and this state's head says its log holds {} line(s): if the server ran with --audit-dir DIR (or GLOVEBOX_AUDIT_DIR), pass the same",
                        log.path().display(),
                        v.head_lines.unwrap_or(0),
                    ),
                }
                if !v.log_missing {
                    println!(
                        "  this log, line by line: {} line(s) of key {} verified{}",
                        v.valid_lines,
                        v.key_id,
                        if v.problems.is_empty() {
                            ""
                        } else {
                            "; problems:"
                        }
                    );
                }
                for p in &v.problems {
                    println!("  {p}");
                }
            } else if v.intact() {
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
                    "  signed with a different key ({}), not the key of state {}: {} {} (written by glovebox with another state directory, or with this state's key before it was lost; verify them with --state-dir DIR of that state)",
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
        } else if v.not_this_log() && !v.tampered() {
            ExitCode::from(EXIT_NOT_THIS_LOG)
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
                .map(|(k, v)| (k.clone(), serde_json::Value::String(audit::display(v))))
                .collect();
            println!(
                "{}",
                serde_json::json!({"ts": audit::display(&e.ts), "event": audit::display(&e.event), "fields": fields})
            );
        } else {
            // Control characters a foreign line may hold are shown escaped.
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|(k, v)| format!("{}={}", audit::display(k), audit::display(v)))
                .collect();
            println!(
                "[{}] {} {}",
                audit::display(&e.ts),
                audit::display(&e.event),
                fields.join(" ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
