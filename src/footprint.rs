//! What a tool runs: every path inside the project root whose content or
//! existence decides which code a call executes.
//!
//! [`of`] works this out from a loaded [`Tool`] alone (nothing runs, no
//! template is expanded). Two lists come back:
//!
//! - [`Footprint::files`]: the existing regular files whose *content*
//!   decides what runs; approvals hash them ([`crate::approval`]).
//! - [`Footprint::paths`]: every path, existing or not, that must stay as
//!   it is — the files above, plus the names that would *shadow* them if
//!   they appeared (a package directory beside a module, a native
//!   extension, a sourceless `.pyc`), the package directories and the
//!   venv's interpreter links. The jail keeps these read-only; approvals
//!   record which of them exist and of what kind.
//!
//! What is covered, per kind:
//!
//! - every tool: its manifest file (`tool.yml`, the v1 file or the
//!   agentcli `tools.json`);
//! - `command`: an entrypoint with a `/` inside the root (and the
//!   interpreter its `#!` line names, when inside the root); every argument
//!   without a `${…}` placeholder that names an existing file inside the
//!   root, relative to `cwd` or the root (also the value part of
//!   `--opt=value`), and one that looks like a path and names nothing yet;
//!   for a `python…` entrypoint, the module after `-m` (or `-mNAME`) as
//!   for `python`, and a package's `__main__`, and the `__main__` of a
//!   directory given as the script; for a `node…` entrypoint, a directory
//!   given as the script: its `package.json`, the `main` it names and its
//!   `index.*` files;
//! - the project-local modules python code imports, read statically
//!   ([`crate::pyimports`]) from the python tool's module chain, a
//!   `python…` command's script or a script whose `#!` line runs a Python
//!   (searched in the script's directory) or
//!   `-m` module (searched in `cwd`), and followed from file to file:
//!   for each imported name, every file it could be found under in the
//!   directory Python searches (`N.py`, `N/__init__.py`, `N.pyc`,
//!   `N.so`, `N.*.so`; the package directory when it is one) that
//!   exists, hashed; one that appears later is new to the fingerprint, so
//!   a planted `csv.py` beside a module that imports `csv` voids its
//!   approval;
//! - `python`: for module `a.b.c` imported from `cwd`: the package chain
//!   `a/__init__.py`, `a/b/__init__.py` and, for every level, the module
//!   file `N.py`, the package `N/` with `N/__init__.py`, sourceless `N.pyc`
//!   and native extensions `N.so` / `N.*.so` (byte-code caches in
//!   `__pycache__` are never read: the shim compiles every `.py` outside
//!   the Python installation from source, see [`crate::run::python`]); the
//!   venv's `pyvenv.cfg`, its `bin/python*` links and the `.pth` files and
//!   `sitecustomize.py` / `usercustomize.py` of its `site-packages`, which
//!   Python runs at start-up, and the module's names in that
//!   `site-packages` and in the directories its `.pth` files add (an
//!   installed or editable module, when the venv is inside the root); the
//!   same for a `command` whose entrypoint is a venv's `bin/python…`;
//! - `agentcli`: `command[0]` and every other argument naming an existing
//!   file inside the root (relative to the directory of `tools.json`),
//!   and for a `python…` or `node…` program what it runs as for
//!   `command`.
//!
//! [`Footprint::missing`] lists the code a tool would run that does not
//! exist yet (a command's entrypoint, the script an interpreter is given,
//! a python tool's module): no mount can cover a missing name, so a call
//! that creates one is undone instead ([`crate::surface::absent`]).
//!
//! What is *not* covered: files the code itself opens (data,
//! configuration) — those are data, like any file the tool reads;
//! modules imported under a computed name (`importlib.import_module(x)`,
//! `__import__`), which the static reader cannot see (a python tool's
//! recorded imports cover those it was seen loading, see
//! [`crate::imports_seen`]); paths outside the root
//! (system interpreters, PATH programs), which no tool can write; and
//! anything an argument template names only after expansion.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::manifest::discover::{normalize, resolve};
pub use crate::manifest::discover::{resolved, resolved_under};
use crate::manifest::model::{Exec, PythonExec};
use crate::manifest::project::{Origin, Tool};

/// What a tool runs, inside the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Existing regular files whose content decides what runs (sorted,
    /// deduplicated, absolute).
    pub files: Vec<PathBuf>,
    /// Every path inside the root, existing or not, that must stay
    /// unchanged: `files`, shadowing names, package directories, venv
    /// links (sorted, deduplicated, absolute).
    pub paths: Vec<PathBuf>,
    /// Code the tool would run that does not exist yet, inside the root:
    /// a command's entrypoint, the script given to an interpreter (`sh`,
    /// `bash`, `python…`, `node`, …), or a python tool's module file
    /// when no file of that module exists (sorted, deduplicated,
    /// absolute). Whoever creates one decides what the tool runs.
    pub missing: Vec<PathBuf>,
    /// What the call execs first and cannot work without, absent now: a
    /// command's entrypoint given as a path, or the script an interpreter
    /// is given when it is spelt as a path (a `/` or `.` in it: a bare
    /// word may be an option's value). The call cannot have created it
    /// before it starts, so one that appears between glovebox's check and
    /// the exec was put there by someone else — a second call with a
    /// write grant, whose clean-up comes too late for this one: such a
    /// call is refused ([`crate::engine`]). A python tool's module is not
    /// listed: the shim never imports it from `cwd` unless glovebox
    /// resolved it there.
    pub absent_runs: Vec<PathBuf>,
    /// The names an imported module absent from the directory Python
    /// searches for it would appear under there (`N`, `N.py`, `N.pyc`,
    /// `N.so`, `N.abi3.so`): a call whose write grants cover one records
    /// it and has it removed after it, as for [`Footprint::missing`]
    /// ([`crate::surface`]); a call of this tool is not refused for them
    /// while that call runs (the name is read lazily, by the shim, see
    /// [`crate::run::python`]).
    pub absent_imports: Vec<PathBuf>,
    /// The venvs inside the root whose interpreter the tool runs (a python
    /// tool's `venv`, a command's `VENV/bin/python…`): protected whole
    /// ([`crate::surface`]), so the approved-code check of a call
    /// ([`crate::run::pins`]) leaves their files to that.
    pub venvs: Vec<PathBuf>,
}

/// What `tool` runs, inside `root`.
pub fn of(root: &Path, tool: &Tool) -> Footprint {
    let mut b = Builder {
        root,
        files: Vec::new(),
        paths: Vec::new(),
        missing: Vec::new(),
        absent_runs: Vec::new(),
        absent_imports: Vec::new(),
        venvs: Vec::new(),
        listed: HashMap::new(),
    };
    if tool.origin != Origin::Builtin {
        b.file(&tool.file);
    }
    match &tool.manifest.exec {
        Exec::Command(c) => {
            let cwd = resolve(root, &c.cwd);
            if c.entrypoint.contains('/') {
                b.program(&cwd, &resolve(root, &c.entrypoint), 4);
                b.runs_first(&resolve(root, &c.entrypoint));
            }
            for a in &c.args {
                b.argument(&cwd, a);
            }
            b.interpreted(&cwd, &c.entrypoint, &c.args);
        }
        Exec::AgentCli(a) => {
            let dir = PathBuf::from(&a.dir);
            if let Some(first) = a.command.first() {
                b.program(&dir, &resolve(&dir, first), 4);
                if first.contains('/') {
                    b.runs_first(&resolve(&dir, first));
                }
            }
            for arg in a.command.iter().skip(1) {
                b.argument(&dir, arg);
            }
            if let Some((first, rest)) = a.command.split_first() {
                b.interpreted(&dir, first, rest);
            }
        }
        Exec::Python(p) => b.python(&tool.name, p),
        Exec::Mcp(m) => {
            let cwd = resolve(root, &m.cwd);
            if m.entrypoint.contains('/') {
                b.program(&cwd, &resolve(root, &m.entrypoint), 4);
                b.runs_first(&resolve(root, &m.entrypoint));
            }
            for a in &m.args {
                b.argument(&cwd, a);
            }
            b.interpreted(&cwd, &m.entrypoint, &m.args);
        }
        Exec::Http(_) => {}
    }
    if !matches!(tool.manifest.exec, Exec::Python(_)) {
        // What the approved-code check saw a python command load
        // ([`crate::imports_seen`]; a python tool's are followed with its
        // module, above).
        for source in b.seen(&tool.name, None) {
            let dir = source.parent().unwrap_or(root).to_path_buf();
            b.imports(&[dir], vec![source]);
        }
    }
    b.files.sort();
    b.files.dedup();
    b.paths.sort();
    b.paths.dedup();
    b.missing.sort();
    b.missing.dedup();
    b.absent_runs.sort();
    b.absent_runs.dedup();
    b.absent_imports.sort();
    b.absent_imports.dedup();
    b.venvs.sort();
    b.venvs.dedup();
    Footprint {
        files: b.files,
        paths: b.paths,
        missing: b.missing,
        absent_runs: b.absent_runs,
        absent_imports: b.absent_imports,
        venvs: b.venvs,
    }
}

struct Builder<'a> {
    root: &'a Path,
    files: Vec<PathBuf>,
    paths: Vec<PathBuf>,
    missing: Vec<PathBuf>,
    absent_runs: Vec<PathBuf>,
    absent_imports: Vec<PathBuf>,
    venvs: Vec<PathBuf>,
    /// The entry names of directories already listed (for imports).
    listed: HashMap<PathBuf, Vec<String>>,
}

impl Builder<'_> {
    /// Code that would run from `p`, when nothing is there yet.
    fn missing(&mut self, p: &Path) {
        if self.inside(p) && std::fs::symlink_metadata(p).is_err() {
            self.missing.push(p.to_path_buf());
        }
    }

    /// Code the call execs first, when nothing is there yet.
    fn runs_first(&mut self, p: &Path) {
        if self.inside(p) && std::fs::symlink_metadata(p).is_err() {
            self.absent_runs.push(p.to_path_buf());
        }
    }

    fn inside(&self, p: &Path) -> bool {
        p.starts_with(self.root)
    }

    /// A path that must stay as it is (whether or not it exists).
    fn path(&mut self, p: &Path) {
        if self.inside(p) {
            self.paths.push(p.to_path_buf());
        }
    }

    /// A path whose content, when it is a file, decides what runs.
    fn file(&mut self, p: &Path) {
        if !self.inside(p) {
            return;
        }
        self.path(p);
        if p.is_file() {
            self.files.push(p.to_path_buf());
        }
    }

    /// A program the kernel executes: the file, and the interpreter its
    /// `#!` line names when that is inside the root too (relative to the
    /// working directory, as the kernel reads it), `depth` levels deep.
    fn program(&mut self, cwd: &Path, p: &Path, depth: u8) {
        self.file(p);
        self.missing(p);
        if depth == 0 || !self.inside(p) {
            return;
        }
        if p.is_file() && crate::interpreter::python_shebang(p).is_some() {
            // A Python script: what it imports from its own directory.
            let real = std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
            let dir = real.parent().unwrap_or(cwd).to_path_buf();
            self.imports(&[dir], vec![real]);
        }
        if p.is_file() && crate::shsource::has_shell_shebang(p) {
            // A shell script: the files it sources.
            self.shell_script(cwd, p);
        }
        let Some(interpreter) = shebang(p) else {
            return;
        };
        let next = resolve(cwd, &interpreter);
        if next != p {
            self.program(cwd, &next, depth - 1);
        }
    }

    /// A literal argument naming an existing file inside the root (hashed);
    /// one that looks like a path (`/` or `.` in it) but names nothing yet
    /// is kept as a path, so a script that appears there later counts as
    /// a change.
    fn argument(&mut self, cwd: &Path, arg: &str) {
        if arg.contains("${") || arg.is_empty() {
            return;
        }
        let mut candidates = vec![arg];
        if let Some((_, value)) = arg.split_once('=') {
            candidates.push(value);
        }
        for c in candidates {
            if c.is_empty() || c.starts_with('-') {
                continue;
            }
            for base in [cwd, self.root] {
                let p = resolve(base, c);
                if p.is_file() {
                    self.file(&p);
                } else if (c.contains('/') || c.contains('.'))
                    && std::fs::symlink_metadata(&p).is_err()
                {
                    self.path(&p);
                }
            }
        }
    }

    /// What an interpreter `program` runs from `args` beyond the files
    /// they name: for `python…`, the module after `-m` (`-m pkg.mod` or
    /// `-mpkg.mod`) and, for a package, its `__main__`; a directory given
    /// as the script runs its `__main__` too. For `node…`, a directory
    /// given as the script runs its `package.json` `main`, or `index.js`.
    fn interpreted(&mut self, cwd: &Path, program: &str, args: &[String]) {
        let name = Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let literal = |a: &str| !a.contains("${") && !a.is_empty();
        if let Some(script) = interpreter_script(name, args).filter(|s| literal(s)) {
            let p = resolve(cwd, script);
            self.missing(&p);
            if script.contains('/') || script.contains('.') {
                self.runs_first(&p);
            }
            if crate::shsource::is_shell(name) && self.inside(&p) {
                self.shell_script(cwd, &p);
            }
        }
        if crate::shsource::is_shell(name) {
            // `sh -c TEXT`: what the literal text sources.
            if let Some(text) = shell_command_text(args).filter(|t| literal(t)) {
                let found = crate::shsource::of_source(text);
                self.sourced(cwd, vec![(cwd.to_path_buf(), found)]);
            }
        }
        if name.starts_with("python") {
            let target = python_target(args);
            // A venv's interpreter runs the venv's start-up files, and
            // finds a module in its site-packages.
            if let Some(venv) = self.venv_of(program) {
                let module = match target {
                    Some(PythonTarget::Module(m)) if literal(m) => Some(m),
                    _ => None,
                };
                self.venv(&venv, module);
            }
            let before = self.files.len();
            match target {
                Some(PythonTarget::Module(m)) if literal(m) => {
                    self.module(cwd.to_path_buf(), m);
                    // Not in `cwd` (an installed module, or nothing yet):
                    // a module or package planted there is found last, and
                    // runs where nothing else has the name.
                    let file = m.split('.').fold(cwd.to_path_buf(), |d, p| d.join(p));
                    if self.files.len() == before && !file.exists() {
                        self.missing(&file.with_extension("py"));
                        self.missing(&file);
                    }
                    // `-m pkg` runs `pkg/__main__.py`.
                    self.module_names(&file, "__main__");
                    // What it imports from `cwd` (searched after the
                    // standard library: see `crate::run::safepath`).
                    let sources = self.sources_since(before);
                    self.imports(&[cwd.to_path_buf()], sources);
                }
                Some(PythonTarget::Script(s)) if literal(s) => {
                    let script = resolve(cwd, s);
                    if script.is_dir() {
                        self.module_names(&script, "__main__");
                        let sources = self.sources_since(before);
                        self.imports(std::slice::from_ref(&script), sources);
                    } else if script.is_file() {
                        // What it imports from its own directory (searched
                        // after the standard library, links resolved as
                        // Python resolves them).
                        let real = std::fs::canonicalize(&script).unwrap_or(script.clone());
                        let dir = real.parent().unwrap_or(cwd).to_path_buf();
                        self.imports(&[dir], vec![real]);
                    }
                }
                _ => {}
            }
        } else if name.starts_with("node") {
            let script = args.iter().find(|a| !a.starts_with('-'));
            if let Some(s) = script.filter(|s| literal(s)) {
                for base in [cwd, self.root] {
                    let dir = resolve(base, s);
                    if dir.is_dir() {
                        self.node_directory(&dir);
                    }
                }
            }
        }
    }

    /// The files shell script `script` sources ([`crate::shsource`]).
    fn shell_script(&mut self, cwd: &Path, script: &Path) {
        let Some(found) = crate::shsource::of_file(script) else {
            return;
        };
        let dir = script.parent().unwrap_or(cwd).to_path_buf();
        self.sourced(cwd, vec![(dir, found)]);
    }

    /// The files sourced with a literal path by scripts in `queue` (each
    /// with its script's directory), followed from file to file (at most
    /// [`SCAN_FILES`] files read): a path is found from `cwd`, where the
    /// shell runs, or, spelt from the script's own directory
    /// (`"$(dirname "$0")/lib.sh"`), from that. One that exists is hashed
    /// and read in turn; one that does not is code whoever creates it
    /// would decide ([`Footprint::missing`]).
    fn sourced(&mut self, cwd: &Path, mut queue: Vec<(PathBuf, Vec<crate::shsource::Sourced>)>) {
        let mut seen: HashSet<PathBuf> = HashSet::new();
        while let Some((dir, found)) = queue.pop() {
            for s in found {
                let base = if s.from_script { &dir } else { cwd };
                let p = resolve(base, &s.path);
                if !self.inside(&p) || !seen.insert(p.clone()) {
                    continue;
                }
                self.file(&p);
                self.missing(&p);
                if seen.len() <= SCAN_FILES && p.is_file() {
                    if let Some(more) = crate::shsource::of_file(&p) {
                        let next = p.parent().unwrap_or(cwd).to_path_buf();
                        queue.push((next, more));
                    }
                }
            }
        }
    }

    /// What `node DIR` runs: `package.json` (its `main`) or `index.*`.
    fn node_directory(&mut self, dir: &Path) {
        let manifest = dir.join("package.json");
        self.file(&manifest);
        let main = std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("main").and_then(|m| m.as_str()).map(String::from));
        if let Some(main) = main {
            let target = normalize(&dir.join(&main));
            self.file(&target);
            for ext in ["js", "mjs", "cjs", "json", "node"] {
                self.file(&PathBuf::from(format!("{}.{ext}", target.display())));
                self.file(&target.join(format!("index.{ext}")));
            }
        }
        for ext in ["js", "mjs", "cjs", "json", "node"] {
            self.file(&dir.join(format!("index.{ext}")));
        }
    }

    /// Every name under which Python may find module `name` in `dir`.
    fn module_names(&mut self, dir: &Path, name: &str) {
        let package = dir.join(name);
        self.path(&package);
        self.file(&package.join("__init__.py"));
        self.file(&package.join("__init__.pyc"));
        self.file(&dir.join(format!("{name}.py")));
        self.file(&dir.join(format!("{name}.pyc")));
        self.file(&dir.join(format!("{name}.so")));
        // Native extensions: `name.cpython-311-x86_64-linux-gnu.so`, `name.abi3.so`.
        for entry in list(dir) {
            let Some(file) = entry.file_name().and_then(|f| f.to_str()) else {
                continue;
            };
            if file.starts_with(&format!("{name}.")) && file.ends_with(".so") {
                self.file(&entry);
            }
        }
    }

    /// Every name under which Python may find dotted `module` from `dir`.
    fn module(&mut self, mut dir: PathBuf, module: &str) {
        for part in module.split('.') {
            // Every level may be a module file shadowing the package, and
            // the other way round (an `a.py` beside `a/` runs before
            // `a.b` fails to import): every name of every level counts.
            self.module_names(&dir, part);
            dir = dir.join(part);
        }
    }

    fn python(&mut self, name: &str, p: &PythonExec) {
        let cwd = resolve(self.root, &p.cwd);
        let before = self.files.len();
        self.module(cwd.clone(), &p.module);
        // No file of the module exists yet: the module file its name
        // gives is code whoever writes it first would decide.
        let file = p
            .module
            .split('.')
            .fold(cwd.clone(), |d, part| d.join(part));
        if self.files.len() == before && !file.exists() {
            self.missing(&file.with_extension("py"));
            // A package planted under the name runs as well.
            self.missing(&file);
        }
        // What the module chain imports from the tool's directory (the
        // shim searches it last, after the standard library and the
        // venv), and what its warm workers were seen importing (outside
        // its venv, which is protected whole).
        let mut sources = self.sources_since(before);
        let venv = p.venv.as_ref().map(|v| resolve(self.root, v));
        sources.extend(self.seen(name, venv.as_deref()));
        self.imports(std::slice::from_ref(&cwd), sources);
        if let Some(venv) = &p.venv {
            self.venv(&resolve(self.root, venv), Some(&p.module));
        }
    }

    /// The project files the tool was seen loading ([`crate::imports_seen`]:
    /// by its warm workers, or refused by the approved-code check) that
    /// exist, outside `venv` (protected whole); returns the `.py` ones, to
    /// be followed. One that is gone is left out (a plant refused, then
    /// removed, is nothing the tool runs; one the approval hashed still
    /// voids it by its absence from `files`).
    fn seen(&mut self, name: &str, venv: Option<&Path>) -> Vec<PathBuf> {
        let mut sources = Vec::new();
        for seen in crate::imports_seen::of(self.root, name) {
            if seen.symlink_metadata().is_ok() && venv.is_none_or(|v| !seen.starts_with(v)) {
                self.file(&seen);
                if seen.extension().is_some_and(|x| x == "py") {
                    sources.push(seen);
                }
            }
        }
        sources
    }

    /// The `.py` files added to `files` since there were `before` of them.
    fn sources_since(&self, before: usize) -> Vec<PathBuf> {
        self.files[before..]
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == "py"))
            .cloned()
            .collect()
    }

    /// The project-local modules `sources` import, followed from file to
    /// file (at most [`SCAN_FILES`] files read, each up to
    /// [`crate::pyimports::MAX_BYTES`]): each import statement ([`crate::pyimports`]) is
    /// looked up in `search` (absolute imports) or in the importing
    /// file's package (relative ones). Every name it could be found under
    /// there counts ([`Builder::import_names`]): the files that exist are
    /// hashed and followed, and one that appears later is new to the
    /// fingerprint, so a module planted under an imported name (`csv.py`
    /// beside a tool that imports `csv`) voids the approval even where it
    /// could never run.
    fn imports(&mut self, search: &[PathBuf], sources: Vec<PathBuf>) {
        let mut queue: VecDeque<PathBuf> = sources.into();
        let mut read: HashSet<PathBuf> = HashSet::new();
        while let Some(file) = queue.pop_front() {
            if read.len() >= SCAN_FILES || !self.inside(&file) || read.contains(&file) {
                continue;
            }
            read.insert(file.clone());
            let Some(imports) = crate::pyimports::of_file(&file) else {
                continue;
            };
            let package = file.parent().unwrap_or(self.root).to_path_buf();
            for imp in imports.iter() {
                let bases: Vec<PathBuf> = if imp.level == 0 {
                    search.to_vec()
                } else {
                    package
                        .ancestors()
                        .nth(imp.level - 1)
                        .map(Path::to_path_buf)
                        .into_iter()
                        .collect()
                };
                for base in bases {
                    let mut dir = base;
                    let mut found = Vec::new();
                    for part in imp.module.split('.').filter(|p| !p.is_empty()) {
                        found.extend(self.import_names(&dir, part));
                        dir = dir.join(part);
                    }
                    // `from M import x`: x may be a submodule of M.
                    if dir.is_dir() {
                        for name in &imp.names {
                            found.extend(self.import_names(&dir, name));
                        }
                    }
                    queue.extend(found);
                }
            }
        }
    }

    /// Every name under which Python may import `name` from `dir` that
    /// exists: the module `name.py`, the package `name/__init__.py` (the
    /// directory too, when it is one), sourceless `.pyc` and native
    /// extensions (`name.so`, `name.*.so`). Names that do not exist are
    /// not listed: one that appears later is a new entry of the
    /// fingerprint, which voids the approval all the same, and a mount
    /// needs something to cover. Unlike [`Builder::module_names`], a
    /// directory without `__init__.py` is not kept (a data directory named
    /// like a standard module, say `json/`, stays the project's). Returns
    /// the `.py` files that exist, to be read in turn.
    fn import_names(&mut self, dir: &Path, name: &str) -> Vec<PathBuf> {
        if !self.inside(dir) {
            return Vec::new();
        }
        // One listing per directory answers which names exist (a stat only
        // for those that do): most imported names are the standard
        // library's, absent from the project.
        let prefix = format!("{name}.");
        let present: Vec<String> = self
            .listed
            .entry(dir.to_path_buf())
            .or_insert_with(|| names_in(dir))
            .iter()
            .filter(|f| *f == name || f.starts_with(&prefix))
            .cloned()
            .collect();
        if present.is_empty() {
            // Nothing of that name here: whoever creates one decides what
            // the import runs where nothing else has the name (an optional
            // dependency, `try: import x`), so a call that plants one has
            // it removed after it ([`Footprint::absent_imports`]).
            for p in [
                dir.join(name),
                dir.join(format!("{name}.py")),
                dir.join(format!("{name}.pyc")),
                dir.join(format!("{name}.so")),
                dir.join(format!("{name}.abi3.so")),
            ] {
                self.absent_imports.push(p);
            }
            return Vec::new();
        }
        let has = |f: &str| present.iter().any(|p| p == f);
        let package = dir.join(name);
        let init = package.join("__init__.py");
        let module = dir.join(format!("{name}.py"));
        for f in present.iter().filter(|f| {
            **f == format!("{name}.py") || **f == format!("{name}.pyc") || f.ends_with(".so")
        }) {
            self.file(&dir.join(f));
        }
        let mut found = Vec::new();
        if has(name) {
            self.file(&init);
            self.file(&package.join("__init__.pyc"));
            if init.is_file() {
                self.path(&package);
                found.push(init);
            }
        }
        if has(&format!("{name}.py")) && module.is_file() {
            found.push(module);
        }
        found
    }

    /// A venv's start-up: `pyvenv.cfg`, its `bin/python*` links, and the
    /// `.pth` files and `sitecustomize.py` / `usercustomize.py` of its
    /// `site-packages`, which Python runs at start-up; and `module` (when
    /// given) as Python finds it there: in `site-packages` and in the
    /// directories its `.pth` files add (an editable install).
    fn venv(&mut self, v: &Path, module: Option<&str>) {
        if self.inside(v) {
            self.venvs.push(v.to_path_buf());
        }
        self.file(&v.join("pyvenv.cfg"));
        for link in ["python", "python3"] {
            self.path(&v.join("bin").join(link));
        }
        for entry in list(&v.join("bin")) {
            if entry
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with("python"))
            {
                self.path(&entry);
            }
        }
        for lib in ["lib", "lib64"] {
            // `lib64` is usually a link to `lib`: one name for each file.
            let same = |a: &str, b: &str| {
                let real = |n: &str| std::fs::canonicalize(v.join(n)).ok();
                real(a).is_some() && real(a) == real(b)
            };
            if lib == "lib64" && same("lib", "lib64") {
                continue;
            }
            for py in list(&v.join(lib)) {
                let site = py.join("site-packages");
                for name in ["sitecustomize.py", "usercustomize.py"] {
                    self.file(&site.join(name));
                }
                let mut search = vec![site.clone()];
                for entry in list(&site) {
                    if entry.extension().is_some_and(|x| x == "pth") {
                        self.file(&entry);
                        search.extend(pth_directories(&site, &entry));
                    }
                }
                if let Some(m) = module {
                    let root = self.root;
                    for dir in search.into_iter().filter(|d| d.starts_with(root)) {
                        self.module(dir, m);
                    }
                }
            }
        }
    }

    /// The venv a program path lies in (`VENV/bin/python…` beside a
    /// `VENV/pyvenv.cfg`), when inside the root.
    fn venv_of(&self, program: &str) -> Option<PathBuf> {
        if !program.contains('/') {
            return None;
        }
        let bin = resolve(self.root, program).parent()?.to_path_buf();
        let venv = bin.parent()?;
        (bin.file_name().is_some_and(|n| n == "bin")
            && self.inside(venv)
            && venv.join("pyvenv.cfg").is_file())
        .then(|| venv.to_path_buf())
    }
}

/// The directories a `.pth` file adds to `sys.path` (its lines that are
/// neither comments nor `import` statements), relative to `site`.
fn pth_directories(site: &Path, pth: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(pth)
        .unwrap_or_default()
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("import"))
        .map(|l| normalize(&site.join(l)))
        .collect()
}

/// How many files the import scan of one tool reads, at most.
const SCAN_FILES: usize = 256;

/// What a Python command line runs besides its options.
#[derive(Clone, Copy)]
enum PythonTarget<'a> {
    /// `-m NAME`.
    Module(&'a str),
    /// The script: a file, or a directory (or zip) with a `__main__`.
    Script(&'a str),
}

/// The module after `-m` or the script argument of a Python command line
/// (`None` for `-c` or when there is neither).
fn python_target(args: &[String]) -> Option<PythonTarget<'_>> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" => return None,
            "-m" => return it.next().map(|m| PythonTarget::Module(m)),
            // Options that take the next argument as their value.
            "-W" | "-X" => {
                it.next();
            }
            _ if a.starts_with("-m") => return Some(PythonTarget::Module(&a[2..])),
            _ if a.starts_with('-') => {}
            _ => return Some(PythonTarget::Script(a)),
        }
    }
    None
}

/// The script `program` (an interpreter, by its file name) runs from
/// `args`: the first argument that is not an option, for shells, `node`,
/// `perl`, `ruby` and `python…` (not with `-c`/`-e` or `-m`).
fn interpreter_script<'a>(program: &str, args: &'a [String]) -> Option<&'a str> {
    if program.starts_with("python") {
        return match python_target(args) {
            Some(PythonTarget::Script(s)) => Some(s),
            _ => None,
        };
    }
    let known = crate::shsource::is_shell(program)
        || ["fish", "node", "nodejs", "perl", "ruby", "deno", "bun"].contains(&program);
    if !known {
        return None;
    }
    for a in args {
        match a.as_str() {
            "-c" | "-e" | "--eval" | "-p" | "--print" => return None,
            _ if a.starts_with('-') => {}
            _ => return Some(a),
        }
    }
    None
}

/// The text a shell runs with `-c TEXT` (the first argument after `-c`;
/// `None` without one).
fn shell_command_text(args: &[String]) -> Option<&str> {
    let at = args.iter().position(|a| a == "-c")?;
    args.get(at + 1).map(String::as_str)
}

/// The interpreter a `#!` line names, if `path` starts with one.
fn shebang(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    text.split_whitespace().next().map(String::from)
}

/// The entry names of `dir` that are UTF-8 (a module name always is;
/// none when it is not a readable directory).
fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The entries of `dir` (none when it is not a readable directory).
fn list(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
#[path = "footprint_tests.rs"]
mod tests;
