//! Learn mode: run a tool (or a sandboxed command) in an observing jail
//! and propose the narrowest `permissions` that keep it working.
//!
//! 1. [`observe`]: the learning run's world — the user's view of the
//!    filesystem readable (less glovebox's own state and configuration,
//!    [`observe::hidden`]), writes going to a throw-away copy of the
//!    project ([`observe::Workspace`]), the network through the egress
//!    proxy with any public host allowed and logged (the SSRF guard still
//!    refuses loopback, private and metadata addresses). The jail records
//!    every open, exec, create, remove and rename of the whole process
//!    tree ([`crate::jail::observe`]) and refuses a learning run where it
//!    cannot.
//! 2. [`fold`]: the record folded into the grants a person would write,
//!    the baseline and the jail's own files dropped.
//! 3. [`mod@propose`]: the `permissions` block (each line explained), the
//!    `sandbox` flags, the difference with the manifest, `--apply`.
//!
//! A proposal is only a proposal: nothing learned widens any call until a
//! person applies it, and the enforcing re-run decides as always.

pub mod env;
pub mod fold;
pub mod hint;
pub mod observe;
pub mod propose;

use std::path::PathBuf;

pub use fold::{Access, Folded, Grant, Seen};
pub use observe::Workspace;
pub use propose::Proposal;

/// Errors of a learning run.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// The throw-away copy could not be made.
    #[error("failed to copy {path:?} for the learning run (it writes to a copy, never to the original); free some space in the temporary directory or set TMPDIR")]
    Copy {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory is too large to copy for a learning run.
    #[error("{path:?} is too large for a learning copy (more than 200,000 entries or 4 GiB); learn from a smaller working directory (--cwd, or `glovebox learn` in the project)")]
    TooLarge { path: PathBuf },
    /// The manifest could not be read or written.
    #[error("failed to update {path:?}; check its permissions")]
    Manifest {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not YAML glovebox can write the proposal into.
    #[error("cannot write the proposal into {path:?}: {message}; fix the manifest (`glovebox lint`) and apply again, or copy the proposal printed above into it")]
    Unwritable { path: PathBuf, message: String },
}

/// The folding context for a learning run rooted at `root` (the
/// original, not the copy): the user's home, the baseline for `network`,
/// glovebox's own files.
pub fn context(
    root: &std::path::Path,
    network: bool,
    succeeded: bool,
    granted: &[PathBuf],
) -> fold::Context {
    let baseline = crate::jail::profile::baseline(network).unwrap_or_default();
    let mut baseline_read = baseline.read.clone();
    baseline_read.extend(baseline.exec.iter().cloned());
    baseline_read.extend(baseline.read_only.iter().cloned());
    baseline_read.extend(baseline.write.iter().cloned());
    // Both spellings of each (`/lib` is `/usr/lib` here).
    let resolved: Vec<PathBuf> = baseline_read
        .iter()
        .map(|p| crate::manifest::discover::resolved(p))
        .collect();
    baseline_read.extend(resolved);
    fold::Context {
        root: root.to_path_buf(),
        home: crate::state::home(),
        baseline_read,
        baseline_write: baseline.write.clone(),
        granted: granted.to_vec(),
        hidden: observe::hidden(),
        succeeded,
    }
}

/// Builds the proposal from what `observer` recorded in a run rooted at
/// `root` (`workspace`: its throw-away copy); `succeeded`: every learning
/// call succeeded; `granted`: what the jail grants the tool anyway
/// ([`fold::Context::granted`]).
/// `env`: the variables the run was given beside the jail's own (their
/// uses explained, [`env::explain`]).
pub fn propose(
    observer: &crate::jail::observe::Observer,
    workspace: Option<&Workspace>,
    root: &std::path::Path,
    network: bool,
    succeeded: bool,
    granted: &[PathBuf],
    env: &[(String, std::ffi::OsString)],
) -> Proposal {
    let (accesses, unrecorded) = observer.accesses();
    let seen = observe::settle(&accesses, workspace);
    let ctx = context(root, network, succeeded, granted);
    let env = env::explain(env, &seen, ctx.home.as_deref());
    let mut folded = fold::fold(&seen, &ctx);
    for g in folded.grants.iter_mut().filter(|g| g.create) {
        g.create = !g.path.exists();
    }
    let hosts = observer
        .hosts()
        .into_iter()
        .filter(|(_, port)| *port != 0)
        .map(|(h, p)| propose::host_pattern(&h, p))
        .collect();
    Proposal {
        folded,
        hosts,
        env,
        secrets: observer.secrets(),
        root: root.to_path_buf(),
        home: ctx.home,
        unrecorded,
    }
}
