//! The project's control surface: every path that decides which tools
//! exist, what they run and what they may do. No jail may change any of
//! it, inside write grants too (invariant 3): the jail binds these paths
//! read-only over the write grants that cover them
//! ([`crate::jail::tree`]), and the built-ins refuse to write them.
//!
//! The surface of a project is:
//! - `.glee/` (manifests, config, everything under it);
//! - a root `tools.json`, and the agentcli file given with `--tools-json`;
//! - `.git/` (a `.git` file: also the git directory and common directory
//!   it names), unless the call's own `fs.write` names `.git` or a path
//!   inside it (a tool whose job is git);
//! - what each tool of the project runs (every tool, whichever one is
//!   called): its [`crate::footprint`] (manifest, entrypoint,
//!   script arguments, the python module with its package chain and every
//!   name that could shadow it, venv links and start-up files), plus the
//!   whole of a venv inside the root.
//!
//! Only paths that exist are listed (a mount needs something to cover);
//! names that do not exist yet are covered elsewhere: a planted sibling
//! package never runs because the python shim loads the exact files
//! glovebox resolved ([`crate::run::python`]) and never reads the
//! project's `__pycache__`; a planted root `tools.json`, `.git` or `.glee`,
//! or code a tool would run, is invisible to every loader while the call
//! runs and removed (and checked gone) after it, or the project is
//! tainted ([`crate::planted`]); and approvals record which shadowing
//! names exist, so one appearing voids the approval.

use std::path::{Path, PathBuf};

use crate::manifest::project::Project;

/// The protected paths of `project` for a call whose write grants are
/// `write` (absolute), sorted, existing paths only. Empty when no write
/// grant reaches into the root (nothing there could be changed anyway), so
/// a read-only call does not pay for working out every tool's footprint.
pub fn paths(project: &Project, write: &[PathBuf]) -> Vec<PathBuf> {
    guard(project, write).0
}

/// What one call with write grants `write` must keep as it is: the
/// protected paths ([`paths`]: bound read-only) and the absent names
/// ([`absent`]: undone after the call). The project is loaded whole and
/// each tool's footprint worked out once for both.
pub fn guard(project: &Project, write: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let g = guard_full(project, write);
    (g.protected, g.absent)
}

/// What [`guard_full`] decides for one call.
#[derive(Debug, Default)]
pub struct Guard {
    /// Bound read-only in the jail ([`paths`]), the control names of
    /// projects and repositories nested under the write grants included
    /// ([`nested`]).
    pub protected: Vec<PathBuf>,
    /// Names the call could plant ([`absent`]).
    pub absent: Vec<PathBuf>,
    /// What the call should be told (a nested scan that hit its bound).
    pub warnings: Vec<String>,
    /// Files people run by hand that the call's write grants reach
    /// ([`RUN_BY_HAND`]): writable, and reported when the call changed
    /// one ([`crate::byhand`]).
    pub reported: Vec<PathBuf>,
}

/// Files and directories that programs a person uses run on their own,
/// without being asked to run the project's code: git hooks (husky's
/// `.husky/`, lefthook's files), direnv's `.envrc` (run on `cd`), editors'
/// task and run configurations (`.vscode/`, `.idea/`: tasks can run on
/// folder open), dev containers (`.devcontainer/`, their commands run on
/// open), `pre-commit`'s configuration and `.gitattributes` (filters and
/// diff drivers git runs). Each is read-only in every jail, and never
/// created by one (a call that creates one has it removed and fails:
/// [`crate::planted`]), unless the call's own `fs.write` names it or a
/// path inside it — like `.git`. The directory `core.hooksPath` names
/// joins them ([`run_surfaces`]). This is the one list (learning's
/// proposals use it too).
pub const RUN_SURFACES: &[&str] = &[
    ".husky",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".lefthook",
    ".lefthook-local",
    ".envrc",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".devcontainer.json",
    ".pre-commit-config.yaml",
    ".gitattributes",
];

/// Files a person runs by hand, by path relative to the root: build files
/// (`Makefile`, `justfile`, `Taskfile.yml`, `build.rs`, `Cargo.toml`,
/// `.cargo/config.toml`), package scripts and build settings
/// (`package.json`, `pyproject.toml`, `setup.py`, `setup.cfg`, `tox.ini`,
/// `noxfile.py`, `conftest.py`, `Gemfile`, `Rakefile`) and CI
/// configurations (`.github/workflows/`, `.gitlab-ci.yml`, `.circleci/`,
/// `Jenkinsfile`, `.travis.yml`, `azure-pipelines.yml`). A tool may change
/// them where its write grants reach (editing the build is ordinary
/// work), and a call that did says so ([`crate::byhand`]).
pub const RUN_BY_HAND: &[&str] = &[
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
    "Justfile",
    ".justfile",
    "Taskfile.yml",
    "Taskfile.yaml",
    "build.rs",
    "Cargo.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    "conftest.py",
    "Gemfile",
    "Rakefile",
    ".github/workflows",
    ".gitlab-ci.yml",
    ".circleci",
    "Jenkinsfile",
    ".travis.yml",
    "azure-pipelines.yml",
];

/// The run surfaces of the project at `root` (absolute, existing or
/// not): [`RUN_SURFACES`], and the directory the repository's
/// `core.hooksPath` names ([`crate::gitconfig::hooks_path`]; not when it
/// lies in `.git`, which is protected whole) — and where it leads when it
/// is spelt through a link.
pub fn run_surfaces(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = RUN_SURFACES.iter().map(|n| root.join(n)).collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(hooks) = crate::gitconfig::hooks_path(root, home.as_deref()) {
        if !hooks.starts_with(root.join(".git")) && hooks != root {
            if let Ok(real) = std::fs::canonicalize(&hooks) {
                if real != hooks {
                    out.push(real);
                }
            }
            out.push(hooks);
        }
    }
    out
}

/// What the run surfaces of `root` ([`run_surfaces`]) and the files
/// people run by hand ([`RUN_BY_HAND`]) mean for a call with write grants
/// `write`: the existing surfaces to keep read-only, the absent ones it
/// could create (the top-most of each), the hand-run files to report on.
/// A surface the grants name (a grant is it or inside it) is the tool's.
fn run_guard(root: &Path, write: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>) {
    let named = |p: &Path| write.iter().any(|w| w.starts_with(p));
    let surfaces: Vec<PathBuf> = run_surfaces(root)
        .into_iter()
        .filter(|p| !named(p))
        .collect();
    let (mut protect, mut absent) = (Vec::new(), Vec::new());
    for p in &surfaces {
        if p.symlink_metadata().is_ok() {
            protect.push(p.clone());
        } else if write.iter().any(|w| p.starts_with(w))
            && !surfaces.iter().any(|q| q != p && p.starts_with(q))
        {
            absent.push(p.clone());
        }
    }
    let reported = RUN_BY_HAND
        .iter()
        .map(|n| root.join(n))
        .filter(|p| write.iter().any(|w| p.starts_with(w) || w.starts_with(p)))
        .collect();
    (protect, absent, reported)
}

/// [`guard`] with the warnings of the nested scan.
pub fn guard_full(project: &Project, write: &[PathBuf]) -> Guard {
    let root = &project.root;
    let mut planted = absent_root_names(root, write);
    let found = nested(root, write);
    let mut g = Guard {
        warnings: found.warnings,
        ..Guard::default()
    };
    if !write.iter().any(|w| reaches(root, w)) {
        g.protected = found.paths;
        g.absent = planted;
        return g;
    }
    let code = Code::of(project);
    let granted = |p: &PathBuf| write.iter().any(|w| p.starts_with(w));
    planted.extend(code.missing.iter().filter(|p| granted(p)).cloned());
    let (run_protect, run_absent, reported) = run_guard(root, write);
    planted.extend(run_absent);
    g.reported = reported;
    // What a call still running may have planted is this call's to undo
    // too: the first call may end (and remove it) while this one runs,
    // and this one could then plant it again.
    if let Ok(hidden) = crate::planted::hidden(root) {
        planted.extend(hidden.into_iter().filter(|p| granted(p)));
    }
    planted.sort();
    planted.dedup();
    let mut protected = surface_of(project, &code, write);
    protected.extend(found.paths);
    protected.extend(run_protect);
    protected.sort();
    protected.dedup();
    g.protected = protected;
    g.absent = planted;
    g
}

/// How deep below a write grant the scan for nested projects and
/// repositories looks (the grant itself is depth 0): control names are
/// found in every directory up to this depth (the directories above it
/// are listed; those at it are asked for the three names).
pub const NESTED_DEPTH: usize = 4;

/// How many directory entries the scan reads for one call, over all its
/// write grants.
pub const NESTED_ENTRIES: usize = 20_000;

/// What the nested scan found.
#[derive(Debug, Default)]
pub struct Nested {
    /// The control names (`.glee`, `tools.json`, `.git` and the
    /// directories a `.git` file names) of projects and repositories below
    /// the write grants, other than the root's own; a `.git` the grants
    /// name (or hold a path inside) is left out: the tool's to write.
    pub paths: Vec<PathBuf>,
    /// A scan that hit [`NESTED_ENTRIES`]: which grant, and what to do.
    pub warnings: Vec<String>,
}

/// The projects and git repositories nested below the write grants
/// `write` of a call on `root`, found breadth first, at most
/// [`NESTED_DEPTH`] directories down and [`NESTED_ENTRIES`] entries in
/// all. Links are never followed; the inside of a `.git` or `.glee`
/// directory is not listed (it is protected whole).
///
/// At the bound the scan stops and says so (a warning on the call): what
/// it found is protected, and a deeper repository is not. Refusing the
/// call instead would refuse ordinary work in any large tree (a build
/// directory alone holds tens of thousands of entries), and a grant that
/// wide is already the manifest's choice.
pub fn nested(root: &Path, write: &[PathBuf]) -> Nested {
    let mut out = Nested::default();
    let mut budget = NESTED_ENTRIES;
    let named = |p: &Path| write.iter().any(|w| w.starts_with(p));
    for grant in write {
        let mut level = vec![grant.clone()];
        let mut exhausted = false;
        'scan: for depth in 0..=NESTED_DEPTH {
            let mut next = Vec::new();
            for dir in &level {
                // A control name found in `dir` (the root's own are
                // protected by the surface already).
                let mut found = |path: PathBuf, is_dir: bool| {
                    if dir == root || (path.ends_with(".git") && named(&path)) {
                        return;
                    }
                    if path.ends_with(".git") && !is_dir {
                        out.paths.extend(git_dirs(&path));
                    }
                    out.paths.push(path);
                };
                if depth == NESTED_DEPTH {
                    // The last level is only asked for its control names
                    // (three lookups instead of a listing: the big leaf
                    // directories are there).
                    if budget < ROOT_NAMES.len() {
                        exhausted = true;
                        break 'scan;
                    }
                    budget -= ROOT_NAMES.len();
                    for n in ROOT_NAMES {
                        let path = dir.join(n);
                        if let Ok(meta) = path.symlink_metadata() {
                            found(path, meta.is_dir());
                        }
                    }
                    continue;
                }
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if budget == 0 {
                        exhausted = true;
                        break 'scan;
                    }
                    budget -= 1;
                    let name = entry.file_name();
                    let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                    if ROOT_NAMES.iter().any(|n| name == *n) {
                        // Protected whole: its inside is not listed.
                        found(entry.path(), is_dir);
                    } else if is_dir {
                        next.push(entry.path());
                    }
                }
            }
            level = next;
        }
        if exhausted {
            out.warnings.push(format!(
                "the scan for projects and git repositories nested under the write grant {} stopped after {NESTED_ENTRIES} entries: those it did not reach are not protected from this call; narrow permissions.fs.write",
                grant.display()
            ));
        }
    }
    out.paths.sort();
    out.paths.dedup();
    out
}

/// True when the write grant `w` is inside `root` or holds it, as
/// written or as it resolves.
fn reaches(root: &PathBuf, w: &PathBuf) -> bool {
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
    let real = std::fs::canonicalize(w).unwrap_or_else(|_| w.clone());
    [root, &real_root].iter().any(|r| {
        w.starts_with(r) || r.starts_with(w) || real.starts_with(r) || r.starts_with(&real)
    })
}

/// What the tools of a project run, worked out once per call from the
/// project loaded whole (a project loaded for one tool,
/// [`Project::load_one`] as `glovebox run` does, is loaded whole here).
struct Code {
    /// The existing and shadowing paths every tool runs ([`runs`]);
    /// `None` when the project cannot be loaded whole.
    runs: Option<Vec<PathBuf>>,
    /// The code some tool would run that does not exist yet
    /// ([`crate::footprint::Footprint::missing`]).
    missing: Vec<PathBuf>,
}

impl Code {
    fn of(project: &Project) -> Code {
        let whole;
        let project = if project.whole {
            project
        } else {
            match Project::load(&project.root) {
                Ok(p) => {
                    whole = p;
                    &whole
                }
                Err(_) => {
                    return Code {
                        runs: None,
                        missing: Vec::new(),
                    }
                }
            }
        };
        let (mut runs_all, mut missing) = (Vec::new(), Vec::new());
        for tool in &project.tools {
            let footprint = crate::footprint::of(&project.root, tool);
            missing.extend(footprint.missing.iter().cloned());
            missing.extend(footprint.absent_imports.iter().cloned());
            runs_all.extend(runs(&project.root, footprint));
        }
        Code {
            runs: Some(runs_all),
            missing,
        }
    }
}

/// The protected paths, given what the tools run. A project that could not
/// be loaded whole protects its whole root (fail closed: a call that
/// could change an unknown tool's script gets no write access to the
/// project).
fn surface_of(project: &Project, code: &Code, write: &[PathBuf]) -> Vec<PathBuf> {
    let root = &project.root;
    let Some(runs) = &code.runs else {
        return vec![root.clone()];
    };
    let mut out = vec![root.join(".glee"), root.join("tools.json")];
    out.extend(project.tools_json.iter().cloned());
    let git = root.join(".git");
    if !write.iter().any(|w| w.starts_with(&git)) {
        out.extend(git_dirs(&git));
        out.push(git);
    }
    out.extend(runs.iter().cloned());
    out.retain(|p| p.symlink_metadata().is_ok());
    out.sort();
    out.dedup();
    out
}

/// Where a `.git` *file* (a worktree, a submodule) points: the `gitdir:`
/// it names and that directory's `commondir` (where hooks and config
/// live), which git uses as the repository's own.
fn git_dirs(git: &Path) -> Vec<PathBuf> {
    crate::gitconfig::git_file_dirs(git)
}

/// What a tool runs, inside `root`: its footprint's `paths`
/// ([`crate::footprint`]) and the whole of a venv inside the root whose
/// interpreter it runs (its `site-packages` is code the tool imports).
fn runs(root: &Path, footprint: crate::footprint::Footprint) -> Vec<PathBuf> {
    let mut files = footprint.paths;
    files.extend(footprint.venvs);
    // A file run through a link: the file it leads to is what runs.
    let targets: Vec<PathBuf> = files
        .iter()
        .filter(|f| {
            f.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        })
        .filter_map(|f| std::fs::canonicalize(f).ok())
        .collect();
    files.extend(targets);
    files.retain(|f| f.starts_with(root) && f != root);
    files
}

/// For a command run outside any project (`glovebox sandbox`): the
/// projects at or above each of the write grants `write` (other than
/// `skip`, the one already protected), each protected as [`paths`] and
/// [`absent`] say. Returns the protected paths and, per project root, the
/// absent names. A project that cannot be loaded keeps at least its root
/// control names (fail closed).
pub fn of_write_grants(write: &[PathBuf], skip: Option<&Path>) -> (Vec<PathBuf>, Absent) {
    let mut roots: Vec<PathBuf> = Vec::new();
    for w in write {
        if let Ok(root) = crate::manifest::discover::find_root_from(w) {
            if Some(root.as_path()) != skip && !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    let (mut protect, mut planted) = (Vec::new(), Vec::new());
    for root in roots {
        match Project::load(&root) {
            Ok(p) => {
                let (more_protect, more_planted) = guard(&p, write);
                protect.extend(more_protect);
                planted.push((root, more_planted));
            }
            Err(_) => {
                protect.extend(
                    ROOT_NAMES
                        .iter()
                        .map(|n| root.join(n))
                        .filter(|p| p.symlink_metadata().is_ok()),
                );
                let (run_protect, run_absent, _) = run_guard(&root, write);
                protect.extend(run_protect);
                let mut names = absent_root_names(&root, write);
                names.extend(run_absent);
                planted.push((root, names));
            }
        }
    }
    (protect, planted)
}

/// Absent names per project root.
pub type Absent = Vec<(PathBuf, Vec<PathBuf>)>;

/// The control names at the root of a project (`.glee`, `tools.json`,
/// `.git`).
const ROOT_NAMES: [&str; 3] = [".glee", "tools.json", ".git"];

/// What the built-ins may never write: [`paths`] plus the root control
/// names whether they exist or not (a write would create them), and the
/// code a tool would run that is not there yet.
pub fn for_writes(project: &Project) -> Vec<PathBuf> {
    let code = Code::of(project);
    let mut out = surface_of(project, &code, &[]);
    out.extend(ROOT_NAMES.iter().map(|n| project.root.join(n)));
    out.extend(run_surfaces(&project.root));
    out.extend(code.missing);
    out.extend(nested(&project.root, std::slice::from_ref(&project.root)).paths);
    out.sort();
    out.dedup();
    out
}

/// The root control names missing from `root` that a call with write
/// grants `write` could create (`.git` not when the grants name it).
fn absent_root_names(root: &Path, write: &[PathBuf]) -> Vec<PathBuf> {
    ROOT_NAMES
        .iter()
        .map(|n| root.join(n))
        .filter(|p| p.symlink_metadata().is_err())
        .filter(|p| write.iter().any(|w| p.starts_with(w)))
        .filter(|p| !(p.ends_with(".git") && write.iter().any(|w| w.starts_with(p))))
        .collect()
}

/// The names that do not exist yet but that a call with write grants
/// `write` could create and that would change what tools exist or run:
/// the root control names, and the code a tool would run that is not
/// there yet ([`crate::footprint::Footprint::missing`]: an entrypoint, a
/// script given to an interpreter, a python module). A mount cannot
/// cover a name that does not exist, and glovebox does not litter the
/// project with placeholders: they are recorded before the call and
/// removed after it ([`crate::planted::Watch`]).
pub fn absent(project: &Project, write: &[PathBuf]) -> Vec<PathBuf> {
    guard(project, write).1
}

/// True when `path` (absolute) is `p` or inside one of `protected`.
pub fn is_protected(path: &Path, protected: &[PathBuf]) -> bool {
    protected.iter().any(|p| path.starts_with(p))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;

    fn project(tools: &[(&str, &str)]) -> (tempfile::TempDir, Project) {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        for (name, yml) in tools {
            let d = root.join(".glee/tools").join(name);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("tool.yml"), yml).unwrap();
        }
        fs::create_dir_all(root.join(".glee/tools")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("pkg/sub")).unwrap();
        fs::write(root.join("pkg/__init__.py"), "").unwrap();
        fs::write(root.join("pkg/sub/__init__.py"), "").unwrap();
        fs::write(root.join("pkg/sub/mod.py"), "def f(): return 1\n").unwrap();
        fs::write(root.join("run.sh"), "echo hi\n").unwrap();
        fs::write(root.join("helper.py"), "").unwrap();
        let p = Project::load(&root).unwrap();
        for (name, _) in tools {
            assert!(
                p.tools.iter().any(|t| t.name == *name),
                "{:?}",
                p.diagnostics
            );
        }
        (t, p)
    }

    const CMD: &str = "name: c\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema:\n    type: object\n    properties:\n      x: {type: string}\nexec:\n  command:\n    entrypoint: ./run.sh\n    args: [helper.py, \"${x}\"]\n    cwd: .\noutputs:\n  format: text\npermissions:\n  network: false\n";
    const PY: &str = "name: p\ndescription: d\nkind: python\nversion: 1\ninputs:\n  schema:\n    type: object\nexec:\n  python:\n    module: pkg.sub.mod\n    function: f\n    cwd: .\noutputs:\n  format: text\npermissions:\n  network: false\n";

    #[test]
    fn surface_holds_control_files_and_what_tools_run() {
        let (_t, p) = project(&[("c", CMD), ("p", PY)]);
        let root = &p.root;
        let s = paths(&p, std::slice::from_ref(&p.root));
        assert!(
            paths(&p, &[]).is_empty(),
            "nothing writable: nothing to protect"
        );
        for want in [
            root.join(".glee"),
            root.join(".git"),
            root.join("run.sh"),
            root.join("helper.py"),
            root.join("pkg"),
            root.join("pkg/sub"),
            root.join("pkg/sub/mod.py"),
        ] {
            assert!(s.contains(&want), "{want:?} not in {s:?}");
        }
        // A script run through a link: the link and its target.
        fs::write(root.join("real.sh"), "echo\n").unwrap();
        std::os::unix::fs::symlink("real.sh", root.join("linked.sh")).unwrap();
        let yml = CMD
            .replace("./run.sh", "./linked.sh")
            .replace("name: c", "name: l");
        fs::create_dir_all(root.join(".glee/tools/l")).unwrap();
        fs::write(root.join(".glee/tools/l/tool.yml"), yml).unwrap();
        let p2 = Project::load(root).unwrap();
        let s2 = paths(&p2, std::slice::from_ref(root));
        assert!(s2.contains(&root.join("linked.sh")), "{s2:?}");
        assert!(s2.contains(&root.join("real.sh")), "{s2:?}");
        // tools.json does not exist: nothing to cover.
        assert!(!s.contains(&root.join("tools.json")));
        assert!(is_protected(&root.join(".glee/tools/new/tool.yml"), &s));
        assert!(!is_protected(&root.join("out/x"), &s));
    }

    /// `names` without the run surfaces ([`RUN_SURFACES`]).
    fn control(names: &[PathBuf]) -> Vec<PathBuf> {
        names
            .iter()
            .filter(|p| {
                !RUN_SURFACES
                    .iter()
                    .any(|n| p.file_name().is_some_and(|f| f == *n))
            })
            .cloned()
            .collect()
    }

    #[test]
    fn run_surfaces_are_protected_unless_named_and_hand_run_files_reported() {
        let (_t, p) = project(&[]);
        let root = p.root.clone();
        fs::create_dir_all(root.join(".husky")).unwrap();
        fs::write(root.join(".envrc"), "x\n").unwrap();
        fs::write(root.join("Makefile"), "all:\n").unwrap();
        fs::write(
            root.join(".git/config"),
            "[core]\n\thooksPath = tools/hooks\n",
        )
        .unwrap();
        let g = guard_full(&p, std::slice::from_ref(&root));
        for want in [".husky", ".envrc"] {
            assert!(g.protected.contains(&root.join(want)), "{want}: {g:?}");
        }
        // Absent: recorded, to be removed after the call (the top-most).
        for want in [".vscode", "lefthook.yml", ".gitattributes", "tools/hooks"] {
            assert!(g.absent.contains(&root.join(want)), "{want}: {g:?}");
        }
        assert!(g.reported.contains(&root.join("Makefile")), "{g:?}");
        assert!(
            g.reported.contains(&root.join(".github/workflows")),
            "{g:?}"
        );
        // Named in fs.write: the tool's to write.
        let g = guard_full(
            &p,
            &[root.clone(), root.join(".husky"), root.join(".vscode")],
        );
        assert!(!g.protected.contains(&root.join(".husky")), "{g:?}");
        assert!(!g.absent.contains(&root.join(".vscode")), "{g:?}");
        assert!(g.protected.contains(&root.join(".envrc")), "{g:?}");
        // A grant elsewhere: nothing to record or report at the root.
        fs::create_dir_all(root.join("out")).unwrap();
        let g = guard_full(&p, &[root.join("out")]);
        assert!(g.absent.is_empty() && g.reported.is_empty(), "{g:?}");
        // The built-ins never write them, present or not.
        let w = for_writes(&p);
        for n in [".envrc", ".vscode/tasks.json", "tools/hooks/pre-commit"] {
            assert!(is_protected(&root.join(n), &w), "{n}");
        }
    }

    #[test]
    fn planted_control_names_are_found_and_removed() {
        let (_t, p) = project(&[]);
        let root = p.root.clone();
        fs::remove_dir_all(root.join(".git")).unwrap();
        // Only under a write grant that covers the root.
        assert!(absent(&p, &[root.join("out")]).is_empty());
        let a = absent(&p, std::slice::from_ref(&root));
        assert_eq!(control(&a), [root.join(".git"), root.join("tools.json")]);
        // Named explicitly: .git is the tool's to create.
        assert_eq!(
            control(&absent(&p, &[root.clone(), root.join(".git")])),
            [root.join("tools.json")]
        );
        let a = control(&a);
        fs::write(root.join("tools.json"), "[]").unwrap();
        fs::create_dir_all(root.join(".git/hooks")).unwrap();
        assert_eq!(crate::planted::undo(&a).removed, a);
        assert!(!root.join("tools.json").exists() && !root.join(".git").exists());
        assert!(for_writes(&p).contains(&root.join("tools.json")));
    }

    #[test]
    fn code_a_tool_would_run_that_is_missing_is_watched_under_write_grants() {
        let later = CMD
            .replace("name: c", "name: later")
            .replace("entrypoint: ./run.sh", "entrypoint: sh")
            .replace(
                "args: [helper.py, \"${x}\"]",
                "args: [scripts/later.sh, \"${x}\"]",
            );
        let gone = PY
            .replace("name: p", "name: gone")
            .replace("module: pkg.sub.mod", "module: made");
        let (_t, p) = project(&[("later", &later), ("gone", &gone)]);
        let root = p.root.clone();
        let a = absent(&p, std::slice::from_ref(&root));
        assert!(a.contains(&root.join("scripts/later.sh")), "{a:?}");
        assert!(a.contains(&root.join("made.py")), "{a:?}");
        // Existing code is protected by a mount instead, and a grant
        // elsewhere watches nothing.
        assert!(!a.contains(&root.join("run.sh")), "{a:?}");
        assert!(absent(&p, &[root.join("out")]).is_empty());
        // The built-ins refuse to create them too.
        let w = for_writes(&p);
        assert!(is_protected(&root.join("scripts/later.sh"), &w), "{w:?}");
        assert!(is_protected(&root.join("made.py"), &w), "{w:?}");
    }

    #[test]
    fn a_project_loaded_for_one_tool_protects_every_tools_files() {
        let (_t, p) = project(&[("c", CMD), ("p", PY)]);
        let one = Project::load_one(&p.root, "p").unwrap();
        assert!(!one.whole && one.tools.len() == 1);
        let s = paths(&one, std::slice::from_ref(&one.root));
        for want in ["run.sh", "helper.py", "pkg/sub/mod.py"] {
            assert!(s.contains(&p.root.join(want)), "{want} not in {s:?}");
        }
    }

    #[test]
    fn a_git_file_protects_the_directories_it_names() {
        let (t, p) = project(&[]);
        let root = p.root.clone();
        fs::remove_dir_all(root.join(".git")).unwrap();
        let main = fs::canonicalize(t.path()).unwrap().join("main.git");
        fs::create_dir_all(main.join("worktrees/w")).unwrap();
        fs::write(main.join("worktrees/w/commondir"), "../..\n").unwrap();
        fs::write(
            root.join(".git"),
            format!("gitdir: {}\n", main.join("worktrees/w").display()),
        )
        .unwrap();
        let s = paths(&p, std::slice::from_ref(&root));
        assert!(s.contains(&root.join(".git")), "{s:?}");
        assert!(s.contains(&main.join("worktrees/w")), "{s:?}");
        assert!(s.contains(&main), "{s:?}");
    }

    #[test]
    fn a_write_grant_inside_a_project_finds_it() {
        let (_t, p) = project(&[("c", CMD)]);
        let root = p.root.clone();
        fs::create_dir_all(root.join("out")).unwrap();
        let (protect, planted) = of_write_grants(&[root.join("out")], None);
        // Only the out/ grant: nothing of the surface lies under it, but
        // the surface is what it is.
        assert!(protect.contains(&root.join(".glee")), "{protect:?}");
        assert!(planted.iter().all(|(_, names)| names.is_empty()));
        let (protect, planted) = of_write_grants(std::slice::from_ref(&root), None);
        assert!(protect.contains(&root.join("run.sh")), "{protect:?}");
        assert_eq!(planted.len(), 1);
        assert_eq!(planted[0].0, root);
        assert_eq!(control(&planted[0].1), [root.join("tools.json")]);
        // Already protected by the caller: skipped.
        assert_eq!(
            of_write_grants(std::slice::from_ref(&root), Some(&root)).0,
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn nested_projects_and_repositories_under_a_write_grant_are_protected() {
        let (_t, p) = project(&[]);
        let root = p.root.clone();
        for d in [
            "sub/b/.glee/tools/x",
            "vendor/lib/.git",
            "a/b/c/.git",
            "a/b/c/d/e/.git",
            "node/x/.git/objects",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("sub/b/tools.json"), "[]").unwrap();
        fs::write(root.join("vendor/sm.git-file"), "").unwrap();
        fs::create_dir_all(root.join("vendor/sm")).unwrap();
        fs::write(
            root.join("vendor/sm/.git"),
            "gitdir: ../../.git/modules/sm\n",
        )
        .unwrap();
        fs::create_dir_all(root.join(".git/modules/sm")).unwrap();
        let s = paths(&p, std::slice::from_ref(&root));
        for want in [
            "sub/b/.glee",
            "sub/b/tools.json",
            "vendor/lib/.git",
            "vendor/sm/.git",
            ".git/modules/sm",
            "a/b/c/.git",
            "node/x/.git",
        ] {
            assert!(s.contains(&root.join(want)), "{want} not in {s:?}");
        }
        // Deeper than the bound: not reached.
        assert!(!s.contains(&root.join("a/b/c/d/e/.git")), "{s:?}");
        // A nested .git the grants name is the tool's to write.
        let w = [root.clone(), root.join("vendor/lib/.git")];
        assert!(!paths(&p, &w).contains(&root.join("vendor/lib/.git")));
        // A grant elsewhere: its own nested repositories only.
        let g = guard_full(&p, &[root.join("vendor")]);
        assert!(g.protected.contains(&root.join("vendor/lib/.git")), "{g:?}");
        assert!(g.warnings.is_empty());
        // The built-ins may not write them either.
        assert!(is_protected(
            &root.join("sub/b/.glee/tools/x/tool.yml"),
            &for_writes(&p)
        ));
    }

    #[test]
    fn a_nested_scan_past_its_bound_protects_what_it_found_and_says_so() {
        let (_t, p) = project(&[]);
        let root = p.root.clone();
        fs::create_dir_all(root.join("a/.git")).unwrap();
        let many = root.join("x/many");
        fs::create_dir_all(&many).unwrap();
        for i in 0..NESTED_ENTRIES {
            fs::write(many.join(i.to_string()), "").unwrap();
        }
        let g = guard_full(&p, std::slice::from_ref(&root));
        assert!(g.protected.contains(&root.join("a/.git")), "{g:?}");
        assert_eq!(g.warnings.len(), 1, "{:?}", g.warnings);
        assert!(g.warnings[0].contains("narrow permissions.fs.write"));
    }

    #[test]
    fn git_is_writable_only_when_named_explicitly() {
        let (_t, p) = project(&[]);
        let root = p.root.clone();
        assert!(paths(&p, std::slice::from_ref(&root)).contains(&root.join(".git")));
        assert!(!paths(&p, &[root.join(".git")]).contains(&root.join(".git")));
        assert!(!paths(&p, &[root.join(".git/hooks")]).contains(&root.join(".git")));
    }
}
