//! `glovebox sandbox`: run an ad-hoc command in the jail (for CI steps).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use std::sync::Arc;

use glovebox::egress::{Gateway, Rules};
use glovebox::jail::{self, JailError, Limits, Output, Spec, Stdin};
use glovebox::net::Allowlist;
use glovebox::run::StartError;

use super::{Cli, EXIT_SANDBOX_UNAVAILABLE, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Allow reading (and executing) under this path (repeatable). A path
    /// that does not exist is refused, unless a `--write` holds it: then
    /// glovebox makes it (a build's `target/`) before the command runs.
    #[arg(long, value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Allow reading and writing under this path (repeatable).
    #[arg(long, value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// Allow executing (and reading) under this path (repeatable).
    #[arg(long, value_name = "PATH")]
    pub exec: Vec<PathBuf>,
    /// Allow network access: `--net` is the internet through glovebox's
    /// egress proxy, in the command's own network namespace (the SSRF
    /// guard refuses loopback, private and link-local addresses and
    /// glovebox's own servers); `--net=direct` is the host's network as it
    /// is, with no namespace and no proxy (reported as a warning).
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "proxy", value_parser = ["proxy", "direct"])]
    pub net: Option<String>,
    /// With `--net`: only these hosts (`host`, `host:port`, `*.suffix`, an
    /// IP literal, `[::1]:port`; repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub allow_host: Vec<String>,
    /// With `--net`: let the proxy reach loopback and private addresses
    /// (link-local, cloud metadata and glovebox's own servers stay refused).
    #[arg(long)]
    pub allow_private: bool,
    /// Pass this variable of the caller's environment into the jail
    /// (`NAME` or `NAME=VALUE`, repeatable). An unset toolchain variable
    /// with a default below the home (`RUSTUP_HOME`, `CARGO_HOME`,
    /// `GOPATH`, `PYENV_ROOT`, `NVM_DIR`, `BUN_INSTALL`) gets that
    /// default where it exists.
    #[arg(long, value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Wall-clock limit in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub timeout: f64,
    /// Memory limit for the whole tree (bytes, or with K/M/G suffix).
    #[arg(long, value_name = "SIZE", default_value = "2G")]
    pub memory: String,
    /// Processes alive at once.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub pids: u64,
    /// Bytes of stdout (and of stderr) passed through; the rest is dropped.
    #[arg(long, value_name = "SIZE", default_value = "64M")]
    pub max_output: String,
    /// Largest file the command may write (bytes, or with K/M/G suffix).
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub file_size: String,
    /// Working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Also put the command in an empty network namespace when the network
    /// is off (an extra layer; about 0.6 ms).
    #[arg(long)]
    pub netns: bool,
    /// Run even where a restriction cannot be enforced (each gap is
    /// reported as a warning).
    #[arg(long)]
    pub degraded: bool,
    /// Capture the output and print one JSON object with the result.
    #[arg(long)]
    pub json: bool,
    /// Learn mode: run the command in an observing jail (readable: the
    /// system's directories as every user may read them, the toolchains
    /// and caches below your home, `--read` paths and the directories the
    /// `--env` variables name — never keys, credentials, browser profiles,
    /// other users' homes or glovebox's own state; writes going to a
    /// throw-away copy of the working directory; with `--net`, any public
    /// host through the egress proxy, logged) and print the `--read`,
    /// `--write`, `--allow-host` and `--env` flags that keep it working.
    #[arg(long)]
    pub learn: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Parses `512`, `64K`, `10M`, `2G` (powers of 1024).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'B' => 1,
                _ => anyhow::bail!("invalid size {text:?}: use bytes or a K/M/G suffix"),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .with_context(|| format!("invalid size {text:?}: use bytes or a K/M/G suffix"))?;
    n.checked_mul(mult)
        .with_context(|| format!("size {text:?} is too large"))
}

/// One `--env` item: `NAME=VALUE` as given; `NAME` from the caller's
/// environment, or, when it is unset and names a toolchain's home with a
/// default below the home directory that exists (`RUSTUP_HOME` →
/// `~/.rustup`, a default rustup install), that default — said on
/// stderr; else nothing (the variable stays unset in the jail too).
pub fn env_item(item: &str) -> Option<(OsString, OsString)> {
    if let Some((k, v)) = item.split_once('=') {
        return Some((OsString::from(k), OsString::from(v)));
    }
    if let Some(v) = std::env::var_os(item) {
        return Some((OsString::from(item), v));
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .or_else(glovebox::state::home)?;
    let default = glovebox::learn::env::toolchain_default(item, &home)?;
    eprintln!(
        "glovebox: {item} is not set: passing its default, {} (where a default install keeps it)",
        default.display()
    );
    Some((OsString::from(item), default.into_os_string()))
}

fn absolute(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = absolute(&here, args.cwd.as_deref().unwrap_or(&here));
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout must be a positive number of seconds");
    }
    let mut spec = Spec::new(args.command.iter().cloned());
    spec.cwd = cwd.clone();
    // Paths are relative to where the command was typed, like --cwd.
    spec.fs.read = args.read.iter().map(|p| absolute(&here, p)).collect();
    spec.fs.write = args.write.iter().map(|p| absolute(&here, p)).collect();
    // A grant on a path that does not exist grants nothing (the jail can
    // only grant what is there): say so instead of running without it.
    if let Some(missing) = spec
        .fs
        .write
        .iter()
        .find(|p| std::fs::symlink_metadata(p).is_err())
    {
        anyhow::bail!(
            "--write {}: no such file or directory, so nothing would be writable there: create it first (mkdir -p for a directory, touch for a file), or grant the directory that will hold it",
            missing.display()
        );
    }
    spec.fs.exec = args.exec.iter().map(|p| absolute(&here, p)).collect();
    spec.network = args.net.is_some();
    spec.direct_network = args.net.as_deref() == Some("direct");
    if (!args.allow_host.is_empty() || args.allow_private) && args.net.as_deref() != Some("proxy") {
        anyhow::bail!("--allow-host and --allow-private need --net (the egress proxy)");
    }
    let gateway = (args.net.as_deref() == Some("proxy"))
        .then(|| -> anyhow::Result<Arc<Gateway>> {
            let allow = if args.allow_host.is_empty() {
                None
            } else {
                Some(Allowlist::parse(&args.allow_host)?)
            };
            Ok(Arc::new(Gateway::new(Rules {
                allow,
                allow_private: args.allow_private,
                intercept: None,
            })))
        })
        .transpose()?;
    if let Some(g) = &gateway {
        spec.gateway = Some(g.clone() as Arc<dyn jail::Gateway>);
    }
    spec.netns = args.netns;
    spec.degraded = args.degraded;
    spec.limits = Limits {
        wall: Duration::from_secs_f64(args.timeout),
        memory_bytes: parse_size(&args.memory)?,
        pids: args.pids,
        output_bytes: parse_size(&args.max_output)?,
        file_size_bytes: parse_size(&args.file_size)?,
        ..Limits::default()
    };
    for item in &args.env {
        if let Some((k, v)) = env_item(item) {
            spec.env.push((k, v));
        }
    }
    // Inside a project (`--root`, or a `.glee/` above the working
    // directory), its control surface stays read-only here too, and a
    // control name the command creates is invisible while it runs and
    // removed afterwards (glovebox::planted).
    let mut absent = Vec::new();
    let mut here_root = None;
    let here = glovebox::manifest::project::Project::discover_with(
        cli.root.as_deref(),
        cli.tools_json.as_deref(),
    );
    if let Err(e @ glovebox::manifest::ProjectError::Planted(_)) = &here {
        eprintln!(
            "glovebox: the command was not run: {}",
            glovebox::run::error_chain(e)
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    if let Ok(project) = here.map(glovebox::builtin::add_to) {
        let names;
        (spec.protect, names) = glovebox::surface::guard(&project, &spec.fs.write);
        absent.push((project.root.clone(), names));
        here_root = Some(project.root);
    }
    // A write grant inside another project (typed from outside it): that
    // project's surface too.
    let (more, more_absent) =
        glovebox::surface::of_write_grants(&spec.fs.write, here_root.as_deref());
    spec.protect.extend(more);
    // Projects and repositories nested under the write grants, wherever
    // the command was typed.
    let nested = glovebox::surface::nested(Path::new("/"), &spec.fs.write);
    spec.protect.extend(nested.paths);
    for w in &nested.warnings {
        eprintln!("glovebox: warning: {w}");
    }
    spec.protect.sort();
    spec.protect.dedup();
    absent.extend(more_absent);
    // A --read that does not exist yet under a --write of the same
    // command (a build's target/ on a fresh checkout: the command could
    // make it itself) is made now, never at a protected or control name;
    // any other missing --read is refused, naming the fix.
    let keep: Vec<PathBuf> = spec
        .protect
        .iter()
        .cloned()
        .chain(absent.iter().flat_map(|(_, names)| names.iter().cloned()))
        .collect();
    for (w, rel) in jail::hold::missing_under(&spec.fs.read, &spec.fs.write, &keep) {
        if let Err(e) = jail::hold::make_beneath(w, &rel, &jail::hold::Links::Follow) {
            eprintln!("glovebox: warning: {}", glovebox::run::error_chain(&e));
        }
    }
    if let Some((typed, _)) = args
        .read
        .iter()
        .zip(&spec.fs.read)
        .find(|(_, p)| std::fs::symlink_metadata(p).is_err())
    {
        anyhow::bail!(
            "--read {}: no such file or directory, so nothing would be readable there: create it first (mkdir -p for a directory), or also grant --write on a directory that holds it (glovebox then makes it before the command runs)",
            typed.display()
        );
    }
    spec.stdin = Stdin::InheritIfSafe;
    spec.output = if args.json {
        Output::Capture
    } else {
        Output::Stream
    };

    // A tainted project under the grants is not written to at all.
    for (root, _) in &absent {
        if let Err(e) = glovebox::planted::hidden(root) {
            eprintln!(
                "glovebox: the command was not run: {}",
                glovebox::run::error_chain(&e)
            );
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    }
    let mut watches = Vec::new();
    for (root, names) in &absent {
        match glovebox::planted::Watch::begin(root, names) {
            Ok(w) => watches.extend(w),
            Err(e) => {
                // Those already written are dropped unused.
                for w in watches {
                    w.finish();
                }
                eprintln!("glovebox: the command was not run: the control names it could create cannot be recorded: {}", glovebox::run::error_chain(&e));
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        }
    }
    let result = glovebox::run::start(&spec);
    let mut planted = Vec::new();
    let mut left = Vec::new();
    for w in watches {
        let undone = w.finish();
        planted.extend(undone.removed);
        left.extend(undone.left);
    }
    let mut result = match result {
        Ok(r) => r,
        Err(StartError::State(e)) => {
            eprintln!("glovebox: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(StartError::Jail(e @ jail::JailError::KeptOut { .. })) => {
            eprintln!("glovebox: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(StartError::Jail(e)) => return Ok(report_error(&e, args.json)),
    };
    let (egress, refusals) = match &gateway {
        Some(g) => (Some(g.log().connections().0), g.log().refusals()),
        None => (None, Vec::new()),
    };
    result.warnings.extend(refusals);
    let planted_failure = !planted.is_empty() || !left.is_empty();
    for p in &planted {
        result.warnings.push(format!(
            "the command created {}, part of the project's control surface; glovebox removed it (pass --write for it to allow this)",
            p.display()
        ));
    }
    for (p, why) in &left {
        result.warnings.push(format!(
            "the command created {}, part of the project's control surface, and glovebox could not remove it ({why}): the project is refused until you remove it and run `glovebox untaint`",
            p.display()
        ));
    }
    for w in &result.warnings {
        eprintln!("glovebox: warning: {w}");
    }
    let code = result.status.code();
    // What the jail may have refused, for the person who typed the
    // command (it looks at the host's files outside the grants).
    let hints = if code != 0 {
        refusal_hints(&spec, &String::from_utf8_lossy(&result.stderr))
    } else {
        Vec::new()
    };
    if args.json {
        let out = serde_json::json!({
            "ok": code == 0 && !result.timed_out() && !planted_failure,
            "exit_code": match result.status { jail::Status::Exited(c) => Some(c), _ => None },
            "signal": match result.status { jail::Status::Signaled(s) => Some(s), _ => None },
            "stdout": String::from_utf8_lossy(&result.stdout),
            "stderr": String::from_utf8_lossy(&result.stderr),
            "stdout_bytes": result.stdout_bytes,
            "stderr_bytes": result.stderr_bytes,
            "limits_hit": result.limits_hit,
            "duration_ms": result.duration.as_millis() as u64,
            "enforcement": result.enforcement,
            "warnings": result.warnings,
            "egress": egress,
            "hints": hints,
        });
        println!("{out}");
    } else {
        for hit in &result.limits_hit {
            let what = match hit {
                jail::LimitHit::Timeout => {
                    format!("timed out after {}s; the command was killed", args.timeout)
                }
                jail::LimitHit::Memory => "memory limit reached; a process was killed".into(),
                jail::LimitHit::Pids => "process limit reached; a fork was refused".into(),
                jail::LimitHit::Output => "output limit reached; the rest was dropped".into(),
            };
            eprintln!("glovebox: {what}");
        }
    }
    if !args.json && code != 0 {
        eprintln!("glovebox: the command failed (exit status {code}); if the jail refused something it needs, `glovebox sandbox --learn [--net] -- CMD…` runs it observed and prints the flags that allow it");
    }
    for h in &hints {
        if !args.json {
            eprintln!("glovebox: hint: {h}");
        }
    }
    if result.timed_out() {
        return Ok(ExitCode::from(124));
    }
    if planted_failure && code == 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The refusals named in `stderr` (captured with `--json` only).
fn refusal_hints(spec: &Spec, stderr: &str) -> Vec<String> {
    let baseline = jail::profile::baseline(spec.network).unwrap_or_default();
    let readable = |p: &Path| {
        [
            &spec.fs.read,
            &spec.fs.write,
            &spec.fs.exec,
            &baseline.read,
            &baseline.exec,
            &baseline.read_only,
            &baseline.write,
        ]
        .iter()
        .any(|l| jail::fs::covered(p, l))
    };
    let writable = |p: &Path| jail::fs::covered(p, &spec.fs.write);
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let home = glovebox::state::home();
    let g = glovebox::learn::hint::Grants {
        readable: &readable,
        writable: &writable,
        exists: &exists,
        cwd: &spec.cwd,
        root: Some(&spec.cwd),
        home: home.as_deref(),
    };
    glovebox::learn::hint::refusals(stderr, &g, "glovebox sandbox --learn -- …")
}

fn report_error(e: &JailError, json: bool) -> ExitCode {
    let (kind, code) = match e {
        _ if e.is_unavailable() => ("sandbox_unavailable", EXIT_SANDBOX_UNAVAILABLE),
        JailError::NotFound { .. } => ("not_found", 127),
        JailError::ExecDenied { .. } | JailError::Exec { .. } => ("exec_denied", 126),
        JailError::InvalidSpec { .. } => ("invalid", EXIT_USAGE),
        _ => ("internal", EXIT_USAGE),
    };
    let mut message = glovebox::run::error_chain(e);
    if let JailError::NotFound { program } | JailError::ExecDenied { program, .. } = e {
        // The person who typed the command may learn about the host's
        // files (a tool's caller never gets this).
        message.push_str(&jail::not_found_hint(
            program,
            "grant its directory (--read DIR, or --exec DIR; in a manifest, permissions.fs.read)",
        ));
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"ok": false, "error": {"kind": kind, "message": message}})
        );
    } else {
        eprintln!("glovebox: {message}");
    }
    ExitCode::from(code)
}
