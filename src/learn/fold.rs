//! Folding observed paths into the grants a person would write: a
//! toolchain directory, not the 4,000 files read under it; the project's
//! own top-level entries; nothing the baseline already grants; nothing of
//! glovebox's own.
//!
//! Pure: the observed record in, the grants out (tested without a jail).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use super::sensitive::{Places, Why};
use crate::jail::observe::Op;

/// One observed access, mapped back to the real paths and checked against
/// the filesystem after the run (see [`super::observe::settle`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// What was done.
    pub op: Op,
    /// The real path (a path in the throw-away copy is spelled in the
    /// original).
    pub path: PathBuf,
    /// The program that did it.
    pub program: String,
    /// It is a directory (in the copy, after the run).
    pub dir: bool,
    /// It exists in the original (before any write of the run).
    pub existed: bool,
}

/// Read (and execute) or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// `fs.read`, `--read`.
    Read,
    /// `fs.write`, `--write`.
    Write,
}

/// One proposed grant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// Read or write.
    pub access: Access,
    /// The path granted (absolute).
    pub path: PathBuf,
    /// The programs whose accesses it covers.
    pub programs: BTreeSet<String>,
    /// The first few paths it covers, as observed.
    pub examples: Vec<PathBuf>,
    /// How many distinct observed paths it covers.
    pub covers: usize,
    /// A directory that does not exist yet (the run created it):
    /// `--apply` creates it, since a grant can only name what exists; a
    /// read grant's is also made by glovebox before a call whose write
    /// grant holds it (a fresh checkout has no `target/` yet).
    pub create: bool,
    /// A read grant covering a program that was executed: a write grant
    /// does not cover it (write grants carry no execute, see
    /// [`crate::jail::fs`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exec: bool,
}

/// What folding needs to know.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The project root (or the sandbox's working directory).
    pub root: PathBuf,
    /// The user's home directory, for the folding anchors.
    pub home: Option<PathBuf>,
    /// What the jail's baseline already grants for reading.
    pub baseline_read: Vec<PathBuf>,
    /// What the jail grants this tool anyway, beside the baseline (its
    /// interpreter and venv, its own directory): not proposed.
    pub granted: Vec<PathBuf>,
    /// What it already grants for writing (`/dev/null`, …).
    pub baseline_write: Vec<PathBuf>,
    /// glovebox's own files: never proposed, not even when named.
    pub hidden: Vec<PathBuf>,
    /// The secret and run-later places ([`Places`]), and the concrete
    /// places the learning view left out (files not every user may read,
    /// key files): a grant on one is withheld unless named.
    pub places: Places,
    /// What the learning view left out besides `hidden` (existing paths).
    pub secret: Vec<PathBuf>,
    /// The learning view's read grants (both spellings): a read outside
    /// it was refused in the run, so it is not proposed (the person is
    /// told to learn again with `--read`). `None`: no such bound.
    pub view: Option<Vec<PathBuf>>,
    /// Grants the person made (the tool's declared grants, `--read`,
    /// `--write`): an access under one is granted as named, withheld
    /// nothing.
    pub named: Vec<(Access, PathBuf)>,
    /// Withheld grants the person takes in (`learn --include PATH`): an
    /// access under one is granted as that path.
    pub include: Vec<PathBuf>,
    /// The learning run succeeded. Its writes outside the root were
    /// refused (only the copy of the root is writable there), so a run
    /// that succeeded did not need them: they are noted, not proposed;
    /// a run that failed may have failed for one, but a write outside the
    /// project is never proposed from it either (it is withheld: the
    /// tool may have failed on purpose to get it).
    pub succeeded: bool,
}

/// A grant the proposal withholds: the person adds it by hand, or takes
/// it in with `learn --include PATH`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Withheld {
    /// Read or write.
    pub access: Access,
    /// The grant it would be (what `--include` names).
    pub path: PathBuf,
    /// Why it is withheld.
    pub why: Why,
    /// The first paths observed under it.
    pub examples: Vec<PathBuf>,
    /// The programs that tried.
    pub programs: BTreeSet<String>,
}

/// The folded proposal.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Folded {
    /// The grants, reads then writes, each sorted.
    pub grants: Vec<Grant>,
    /// Observed paths under glovebox's own files (never proposed; the
    /// learning run could not read them either).
    pub kept_out: Vec<PathBuf>,
    /// Grants withheld: a place secrets live (or a directory holding
    /// one), something run later (a shell start-up file, cron, `.envrc`,
    /// a hook), a write outside the project from a run that failed.
    pub withheld: Vec<Withheld>,
    /// Reads outside the learning view (refused in the run): not
    /// proposed; learn again with `--read` to observe them.
    pub outside_view: Vec<PathBuf>,
    /// Writes outside the root that the learning run was refused and
    /// succeeded without (a lock or cache a tool tries and does without).
    pub unneeded_writes: Vec<PathBuf>,
    /// Reads of the user databases (`/etc/passwd`, `/etc/group`): lookups
    /// programs make and run without in every jail (which leaves them
    /// out); noted, not proposed.
    pub lookups: Vec<PathBuf>,
    /// Listings of a directory that holds the baseline (`/etc`, which
    /// pip's platform probe lists): the jail shows such a directory with
    /// the baseline's entries, and granting it would grant all of it;
    /// noted, not proposed.
    pub listings: Vec<PathBuf>,
    /// Distinct observed paths that needed a grant (after dropping the
    /// baseline, the jail's own files and glovebox's).
    pub observed: usize,
}

const EXAMPLES: usize = 3;

/// The user databases: not proposed (see [`Folded::lookups`]).
const LOOKUPS: [&str; 2] = ["/etc/passwd", "/etc/group"];

/// Top-level names below the project root that are never writable in any
/// jail (the control surface): a write there is proposed as a read.
const PROTECTED: [&str; 2] = [".git", ".glee"];

/// Folds `seen` under `ctx`.
pub fn fold(seen: &[Seen], ctx: &Context) -> Folded {
    let mut groups: BTreeMap<(Access, PathBuf), Grant> = BTreeMap::new();
    let mut withheld: BTreeMap<(Access, PathBuf), Withheld> = BTreeMap::new();
    let mut kept_out = BTreeSet::new();
    let mut unneeded = BTreeSet::new();
    let mut lookups = BTreeSet::new();
    let mut listings = BTreeSet::new();
    let mut outside_view = BTreeSet::new();
    let mut distinct = BTreeSet::new();
    for s in seen {
        if jails_own(&s.path) {
            continue;
        }
        if glovebox_s(ctx, &s.path) {
            kept_out.insert(s.path.clone());
            continue;
        }
        let mut access = match s.op {
            Op::Read | Op::Exec => Access::Read,
            Op::Write | Op::Create | Op::Remove => Access::Write,
        };
        let under_root = s.path.strip_prefix(&ctx.root).ok();
        if s.op == Op::Read
            && s.dir
            && under_root.is_none()
            && ctx
                .baseline_read
                .iter()
                .any(|b| b.starts_with(&s.path) && *b != s.path)
        {
            listings.insert(s.path.clone());
            continue;
        }
        if access == Access::Write
            && under_root
                .and_then(|r| r.components().next())
                .is_some_and(|c| PROTECTED.iter().any(|p| c.as_os_str() == *p))
        {
            access = Access::Read;
        }
        if access == Access::Read && LOOKUPS.iter().any(|l| s.path == Path::new(l)) {
            lookups.insert(s.path.clone());
            continue;
        }
        let base = match access {
            Access::Read => &ctx.baseline_read,
            Access::Write => &ctx.baseline_write,
        };
        if base.iter().any(|b| s.path.starts_with(b)) {
            continue;
        }
        if access == Access::Read && ctx.granted.iter().any(|b| s.path.starts_with(b)) {
            continue;
        }
        // Named by the person: granted exactly as named — as the view
        // showed it: a secret place inside a named path is not named
        // (unless the named path lies in it), nor glovebox's own ever.
        let named = named(ctx, access, &s.path)
            .filter(|n| secret(ctx, &s.path).is_none() || secret(ctx, n).is_some());
        let (path, create) = if let Some(n) = named {
            let in_secret = secret(ctx, &n).is_some();
            match narrowed(ctx, n, s, false, |p| {
                !in_secret && ctx.places.holds_secret(p, &ctx.secret)
            }) {
                Decision::Grant(path, create) => (path, create),
                _ => {
                    kept_out.insert(s.path.clone());
                    continue;
                }
            }
        } else {
            match decide(ctx, s, access, under_root) {
                Decision::Grant(path, create) => (path, create),
                Decision::Withhold(path, why) => {
                    let w = withheld
                        .entry((access, path.clone()))
                        .or_insert_with(|| Withheld {
                            access,
                            path,
                            why,
                            examples: Vec::new(),
                            programs: BTreeSet::new(),
                        });
                    if w.examples.len() < EXAMPLES && !w.examples.contains(&s.path) {
                        w.examples.push(s.path.clone());
                    }
                    if !s.program.is_empty() {
                        w.programs.insert(s.program.clone());
                    }
                    continue;
                }
                Decision::Unneeded => {
                    unneeded.insert(s.path.clone());
                    continue;
                }
                Decision::OutsideView(p) => {
                    outside_view.insert(p);
                    continue;
                }
                Decision::KeptOut => {
                    kept_out.insert(s.path.clone());
                    continue;
                }
            }
        };
        distinct.insert((access, s.path.clone()));
        let g = groups
            .entry((access, path.clone()))
            .or_insert_with(|| Grant {
                access,
                path,
                programs: BTreeSet::new(),
                examples: Vec::new(),
                covers: 0,
                create,
                exec: false,
            });
        g.create &= create;
        g.exec |= s.op == Op::Exec;
        if !s.program.is_empty() {
            g.programs.insert(s.program.clone());
        }
        if !g.examples.contains(&s.path) {
            if g.examples.len() < EXAMPLES {
                g.examples.push(s.path.clone());
            }
            g.covers += 1;
        }
    }
    // Drop what another grant covers: a path under a grant of the same
    // access, or a read under a write grant — unless it was executed (a
    // write grant carries no execute): then only a read grant that is
    // kept covers it.
    let all: Vec<Grant> = groups.into_values().collect();
    let mut grants: Vec<Grant> = Vec::new();
    for g in &all {
        if !covered(g, &all) {
            grants.push(g.clone());
        }
    }
    // Fold what the dropped ones covered into the grant that covers them.
    let dropped: Vec<&Grant> = all.iter().filter(|g| !grants.contains(g)).collect();
    for g in dropped {
        if let Some(k) = grants.iter_mut().find(|k| {
            g.path.starts_with(&k.path)
                && (k.access == g.access || (k.access == Access::Write && !g.exec))
        }) {
            k.covers += g.covers;
            k.exec |= g.exec;
            k.programs.extend(g.programs.iter().cloned());
        }
    }
    // A write directory to create is one under which nothing observed
    // existed before the run.
    for g in grants.iter_mut().filter(|g| g.create) {
        g.create = !seen
            .iter()
            .any(|s| s.existed && s.path.starts_with(&g.path));
    }
    grants.sort_by(|a, b| a.access.cmp(&b.access).then(a.path.cmp(&b.path)));
    Folded {
        grants,
        kept_out: kept_out.into_iter().collect(),
        withheld: withheld.into_values().collect(),
        outside_view: outside_view.into_iter().collect(),
        unneeded_writes: unneeded.into_iter().collect(),
        lookups: lookups.into_iter().collect(),
        listings: listings.into_iter().collect(),
        observed: distinct.len(),
    }
}

/// What becomes of one access no grant of the person's covers.
enum Decision {
    /// Granted (the path, and whether `--apply` creates it).
    Grant(PathBuf, bool),
    /// Withheld (the grant it would be, and why).
    Withhold(PathBuf, Why),
    /// A write outside the root the run succeeded without.
    Unneeded,
    /// A read outside the learning view (folded as a person names it).
    OutsideView(PathBuf),
    /// glovebox's own (a path holding its files).
    KeptOut,
}

/// Whether `path` is glovebox's own (its state, configuration, keys).
fn glovebox_s(ctx: &Context, path: &Path) -> bool {
    ctx.hidden
        .iter()
        .chain(&ctx.places.glovebox)
        .any(|h| path.starts_with(h))
}

/// The person's grant that covers `path` for `access` (the narrowest), or
/// the `--include` that takes it in.
fn named(ctx: &Context, access: Access, path: &Path) -> Option<PathBuf> {
    ctx.named
        .iter()
        .filter(|(a, n)| (*a == access || *a == Access::Write) && path.starts_with(n))
        .map(|(_, n)| n)
        .chain(ctx.include.iter().filter(|n| path.starts_with(n)))
        .max_by_key(|n| n.components().count())
        .cloned()
}

/// Whether a secret place is at or above `path` (the lists, or what the
/// view left out), and why.
fn secret(ctx: &Context, path: &Path) -> Option<Why> {
    ctx.places.secret(path).or_else(|| {
        ctx.secret
            .iter()
            .any(|h| path.starts_with(h))
            .then(|| Why::Secret("a file not every user may read, or a key file".into()))
    })
}

/// Decides one access that no grant of the person's covers.
fn decide(ctx: &Context, s: &Seen, access: Access, under_root: Option<&Path>) -> Decision {
    // The grant a withheld access would be: a read folded as usual; a
    // write to what runs later or to a secret place, that name itself;
    // another write outside, its directory.
    let withheld_at = |why: &Why| match (access, under_root) {
        (Access::Read, _) => fold_outside(&s.path, ctx.home.as_deref()),
        (Access::Write, Some(rel)) => match super::sensitive::hooks_path(&ctx.root) {
            Some(h) if rel.starts_with(&h) => ctx.root.join(h),
            _ => project_entry(&ctx.root, rel),
        },
        (Access::Write, None) if s.dir || *why != Why::Outside => s.path.clone(),
        (Access::Write, None) => s.path.parent().unwrap_or(&s.path).to_path_buf(),
    };
    match access {
        Access::Read => {
            if let Some(why) = secret(ctx, &s.path) {
                let at = withheld_at(&why);
                let at = if ctx.places.holds_secret(&at, &ctx.secret) && secret(ctx, &at).is_none()
                {
                    s.path.clone()
                } else {
                    at
                };
                return Decision::Withhold(at, why);
            }
            if under_root.is_none() {
                if let Some(view) = &ctx.view {
                    if !view.iter().any(|v| s.path.starts_with(v)) {
                        return Decision::OutsideView(beside_root(
                            fold_outside(&s.path, ctx.home.as_deref()),
                            &s.path,
                            &ctx.root,
                        ));
                    }
                }
            }
        }
        Access::Write => {
            if let Some(why) = ctx
                .places
                .runs_later(&s.path, &ctx.root)
                .or_else(|| secret(ctx, &s.path))
            {
                return Decision::Withhold(withheld_at(&why), why);
            }
            if under_root.is_none() {
                if ctx.succeeded {
                    return Decision::Unneeded;
                }
                return Decision::Withhold(withheld_at(&Why::Outside), Why::Outside);
            }
        }
    }
    let (path, create) = match under_root {
        Some(rel) => fold_in_root(&ctx.root, rel, s, access),
        None => (
            beside_root(
                fold_outside(&s.path, ctx.home.as_deref()),
                &s.path,
                &ctx.root,
            ),
            false,
        ),
    };
    narrowed(ctx, path, s, create, |p| {
        ctx.places.holds_secret(p, &ctx.secret)
    })
}

/// `path` (a grant for `s`), or, when it holds glovebox's own files or a
/// place `secret` says holds a secret, one level deeper toward `s`'s
/// path, as far as that path itself; if even that holds one, nothing.
fn narrowed(
    ctx: &Context,
    mut path: PathBuf,
    s: &Seen,
    mut create: bool,
    secret: impl Fn(&Path) -> bool,
) -> Decision {
    let holds = |p: &Path| {
        ctx.hidden
            .iter()
            .chain(&ctx.places.glovebox)
            .any(|h| h.starts_with(p))
    };
    while holds(&path) || secret(&path) {
        create = false;
        let Some(next) = s
            .path
            .strip_prefix(&path)
            .ok()
            .and_then(|rest| rest.components().next())
            .map(|c| path.join(c))
        else {
            if holds(&path) {
                return Decision::KeptOut;
            }
            return Decision::Withhold(
                path,
                Why::Secret("a directory that holds places secrets live".into()),
            );
        };
        path = next;
    }
    Decision::Grant(path, create)
}

/// Another grant of `all` covers `g` (see [`fold`]). Terminates: each
/// step goes to a shorter path, or from a read to a write of the same.
fn covered(g: &Grant, all: &[Grant]) -> bool {
    all.iter().any(|o| {
        if std::ptr::eq(o, g)
            || !g.path.starts_with(&o.path)
            || (o.path == g.path && o.access != Access::Write)
        {
            return false;
        }
        match (g.access, o.access) {
            (Access::Write, Access::Read) => false,
            (Access::Read, Access::Write) => !g.exec,
            (Access::Read, Access::Read) if g.exec => !covered(o, all),
            _ => true,
        }
    })
}

/// Paths the jail makes itself or that are the learning run's own: `/`,
/// `/proc`, `/sys`, `/dev`, the private home, the throw-away copy's
/// directory.
fn jails_own(p: &Path) -> bool {
    if p == Path::new("/") {
        return true;
    }
    if ["/proc", "/sys", "/dev"].iter().any(|d| p.starts_with(d)) {
        return true;
    }
    p.components().any(|c| {
        let s = c.as_os_str().to_string_lossy();
        s == ".glovebox-home" || s.starts_with("glovebox-home-") || s.starts_with("glovebox-learn-")
    })
}

/// Below the root: its top-level entry. A file the run created directly
/// in the root (it cannot be granted before it exists) makes the root
/// itself writable.
fn fold_in_root(root: &Path, rel: &Path, s: &Seen, access: Access) -> (PathBuf, bool) {
    if rel.as_os_str().is_empty() {
        return (root.to_path_buf(), false);
    }
    let top = project_entry(root, rel);
    let is_top = rel.components().count() == 1;
    if access == Access::Read {
        // A directory the run created (a build's `target/`) is created
        // before the enforcing call too: by `--apply`, or by glovebox
        // under a write grant of the call (`crate::jail::hold::make_missing`).
        return (top, !s.existed && (!is_top || s.dir));
    }
    if is_top && !s.dir && !s.existed {
        return (root.to_path_buf(), false);
    }
    (top, !(is_top && s.existed))
}

/// `folded`, unless it holds the root (a file beside the project must not
/// bring in the whole project): then `path` down to one level below the
/// deepest directory it shares with the root.
fn beside_root(folded: PathBuf, path: &Path, root: &Path) -> PathBuf {
    if !root.starts_with(&folded) {
        return folded;
    }
    let shared = path
        .components()
        .zip(root.components())
        .take_while(|(a, b)| a == b)
        .count();
    path.components().take(shared + 1).collect()
}

/// The entry a person names for `rel` below the root: its top-level
/// entry, or a tool's own directory (`.glee/tools/NAME`) rather than all
/// of `.glee`.
pub fn project_entry(root: &Path, rel: &Path) -> PathBuf {
    let parts: Vec<&std::ffi::OsStr> = rel.components().map(|c| c.as_os_str()).collect();
    let keep = match parts.as_slice() {
        [g, t, _, ..] if *g == ".glee" && *t == "tools" => 3,
        _ => 1,
    };
    let mut out = root.to_path_buf();
    for p in parts.iter().take(keep) {
        out.push(p);
    }
    out
}

/// How many components below `anchor` a grant keeps: containers of many
/// unrelated tools' files (`~/.config`, `~/.local/share`, `/var/lib`) get
/// one more level than the rest.
fn depth_below(rel: &Path, at_home: bool) -> usize {
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let first = parts.first().map(String::as_str).unwrap_or("");
    let second = parts.get(1).map(String::as_str).unwrap_or("");
    if at_home {
        match (first, second) {
            (".local", _) => 3,
            (".config" | ".cache", _) => 2,
            _ => 1,
        }
    } else {
        match (first, second) {
            ("usr" | "var" | "home" | "mnt" | "media" | "run", _) => 3,
            _ => 2,
        }
    }
}

/// A path outside the root folded to its directory the way a person
/// would name it: `~/.rustup`, `~/.config/tool`, `/opt/tool`,
/// `/tmp/data`; a file at that level stays a file.
pub fn fold_outside(p: &Path, home: Option<&Path>) -> PathBuf {
    let (anchor, rel, at_home) = match home.and_then(|h| p.strip_prefix(h).ok().map(|r| (h, r))) {
        Some((h, r)) if !r.as_os_str().is_empty() => (h.to_path_buf(), r.to_path_buf(), true),
        _ => (
            PathBuf::from("/"),
            p.strip_prefix("/").unwrap_or(p).to_path_buf(),
            false,
        ),
    };
    let keep = depth_below(&rel, at_home);
    let mut out = anchor;
    for c in rel.components().take(keep) {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;
