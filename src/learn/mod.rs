//! Learn mode: run a tool (or a sandboxed command) in an observing jail
//! and propose the narrowest `permissions` that keep it working.
//!
//! Learning is a jail like any other (invariant 15): the tool being
//! learned may be hostile, and what it does must not steer the proposal a
//! person then applies.
//!
//! 1. [`view`]: what the learning run may read — the baseline, `/etc` and
//!    `/opt` as every user may read them, the toolchains and caches below
//!    the home, what the person names (`--read`, declared grants, the
//!    variables passed) — never a place [`sensitive`] lists (keys,
//!    credentials, keyrings, browser profiles, other users' homes,
//!    glovebox's state, configuration and keys). Writes go to a
//!    throw-away copy of the project ([`observe::Workspace`], key files
//!    left out); anything outside it is read-only. Secrets are
//!    placeholders as in any call; the network goes through the egress
//!    proxy with any public host allowed and logged. The jail records
//!    every open, exec, create, remove and rename of the whole process
//!    tree ([`crate::jail::observe`]) and refuses a learning run where it
//!    cannot.
//! 2. [`fold`]: the record folded into the grants a person would write,
//!    the baseline and the jail's own files dropped; a grant on a secret
//!    place, on something run later (shell start-up files, cron, `.envrc`,
//!    hooks) or a write outside the project from a run that failed is
//!    *withheld*, never proposed unless the person names it.
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
pub mod sensitive;
pub mod view;

use std::path::PathBuf;

pub use fold::{Access, Folded, Grant, Seen, Withheld};
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

/// One learning run's bounds: what it may read, what the person named.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    /// The machine's secret and run-later places.
    pub places: sensitive::Places,
    /// The learning view ([`view::build`]).
    pub view: view::View,
    /// The person's grants (declared, `--read`, `--write`): in the view,
    /// and proposed as named.
    pub named: Vec<(Access, PathBuf)>,
    /// Withheld grants taken in (`learn --include`).
    pub include: Vec<PathBuf>,
}

impl Bounds {
    /// The bounds of a learning run on `workspace`'s copy: the view from
    /// the places of the user running glovebox, `named` (visible as
    /// named) and `env_dirs` (the directories the variables passed name).
    pub fn new(
        named: Vec<(Access, PathBuf)>,
        env_dirs: &[PathBuf],
        workspace: &Workspace,
        include: Vec<PathBuf>,
    ) -> Bounds {
        let places = sensitive::Places::current();
        // Inside the project the copy holds them (writable): only what
        // is outside it widens the view.
        let named_paths: Vec<PathBuf> = named
            .iter()
            .map(|(_, p)| p.clone())
            .filter(|p| !p.starts_with(&workspace.original))
            .collect();
        let view = view::build(&view::Ask {
            places: &places,
            named: &named_paths,
            env_dirs,
            also_hidden: &workspace.left_out,
            project: Some(&workspace.original),
        });
        Bounds {
            places,
            view,
            named,
            include,
        }
    }
}

/// The directories a variable's value names (a path, or a `:` list of
/// them): what `--env PATH` or `--env RUSTUP_HOME` widens the learning
/// view with.
pub fn env_dirs(env: &[(String, std::ffi::OsString)]) -> Vec<PathBuf> {
    env.iter()
        .filter_map(|(_, v)| v.to_str())
        .flat_map(|v| v.split(':'))
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// The folding context for a learning run rooted at `root` (the
/// original, not the copy): the user's home, the baseline for `network`,
/// glovebox's own files, the run's bounds.
pub fn context(
    root: &std::path::Path,
    network: bool,
    succeeded: bool,
    granted: &[PathBuf],
    bounds: &Bounds,
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
    let mut view = bounds.view.read.clone();
    view.extend(
        bounds
            .view
            .read
            .iter()
            .map(|p| crate::manifest::discover::resolved(p)),
    );
    fold::Context {
        root: root.to_path_buf(),
        home: crate::state::home(),
        baseline_read,
        baseline_write: baseline.write.clone(),
        granted: granted.to_vec(),
        hidden: bounds.places.glovebox.clone(),
        places: bounds.places.clone(),
        secret: bounds.view.hidden.clone(),
        view: Some(view),
        named: bounds.named.clone(),
        include: bounds.include.clone(),
        succeeded,
    }
}

/// One learning run, as recorded: what [`propose()`] folds.
pub struct Run<'a> {
    /// What the jail recorded.
    pub observer: &'a crate::jail::observe::Observer,
    /// The throw-away copy the run worked in (its paths are mapped back).
    pub workspace: Option<&'a Workspace>,
    /// The project root (or the sandbox's working directory), the
    /// original.
    pub root: &'a std::path::Path,
    /// The run had the network.
    pub network: bool,
    /// Every learning call succeeded.
    pub succeeded: bool,
    /// What the jail grants the tool anyway ([`fold::Context::granted`]).
    pub granted: &'a [PathBuf],
    /// The variables the run was given beside the jail's own (their uses
    /// explained, [`env::explain`]).
    pub env: &'a [(String, std::ffi::OsString)],
    /// The run's view and the person's grants.
    pub bounds: &'a Bounds,
}

/// Builds the proposal from what one learning run recorded.
pub fn propose(run: &Run<'_>) -> Proposal {
    let (accesses, unrecorded) = run.observer.accesses();
    let seen = observe::settle(&accesses, run.workspace);
    let ctx = context(
        run.root,
        run.network,
        run.succeeded,
        run.granted,
        run.bounds,
    );
    let env = env::explain(run.env, &seen, ctx.home.as_deref());
    let mut folded = fold::fold(&seen, &ctx);
    for g in folded.grants.iter_mut().filter(|g| g.create) {
        g.create = !g.path.exists();
    }
    let hosts = run
        .observer
        .hosts()
        .into_iter()
        .filter(|(_, port)| *port != 0)
        .map(|(h, p)| propose::host_pattern(&h, p))
        .collect();
    Proposal {
        folded,
        hosts,
        env,
        secrets: run.observer.secrets(),
        root: run.root.to_path_buf(),
        home: ctx.home,
        unrecorded,
        succeeded: run.succeeded,
    }
}
