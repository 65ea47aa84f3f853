//! Naming what enforcement refused: when a call fails with "No such file
//! or directory", "Permission denied" or "Read-only file system" on a path
//! the grants do not cover, say which path, the manifest line (or sandbox
//! flag) that would allow it, and `glovebox learn`.
//!
//! It reads the tool's own error output, so it may miss a refusal (a tool
//! that prints no path) but never grants anything: it only advises. It
//! looks at the host's files (whether the path exists outside the
//! jail), so it is shown only to a person at the terminal (`glovebox run`
//! and `glovebox sandbox` without `--json`), never to a tool's caller.

use std::path::{Path, PathBuf};

/// The error texts that mean the jail may have refused a path.
const REFUSALS: [&str; 4] = [
    "No such file or directory",
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
];

/// What the grants allow, and where the call ran.
pub struct Grants<'a> {
    /// Whether the call could read `path`.
    pub readable: &'a dyn Fn(&Path) -> bool,
    /// Whether it could write there.
    pub writable: &'a dyn Fn(&Path) -> bool,
    /// Whether `path` exists on the host.
    pub exists: &'a dyn Fn(&Path) -> bool,
    /// The working directory, for relative paths.
    pub cwd: &'a Path,
    /// The project root (manifest entries are relative to it), if any.
    pub root: Option<&'a Path>,
    /// The user's home, for `~`.
    pub home: Option<&'a Path>,
}

/// One line of advice per refused path found in `stderr` (at most five).
/// `learn` is the command to suggest (`glovebox learn NAME`, or
/// `glovebox sandbox --learn -- …`).
pub fn refusals(stderr: &str, g: &Grants<'_>, learn: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for line in stderr
        .lines()
        .filter(|l| REFUSALS.iter().any(|r| l.contains(r)))
    {
        let read_only = line.contains("Read-only file system");
        let denied = line.contains("Permission denied") || line.contains("Operation not permitted");
        for word in candidates(line) {
            let p = Path::new(&word);
            let path = crate::manifest::discover::normalize(&g.cwd.join(p));
            if seen.contains(&path) || path == Path::new("/") {
                continue;
            }
            seen.push(path.clone());
            let readable = (g.readable)(&path);
            let exists = (g.exists)(&path);
            let parent_exists = path.parent().is_some_and(|d| (g.exists)(d));
            let advice = if !readable && exists {
                Some(("fs.read", "--read", suggest(&path, g), ""))
            } else if (read_only || (denied && (readable || !exists)))
                && !(g.writable)(&path)
                && (exists || parent_exists)
            {
                let note = if exists {
                    ""
                } else {
                    " (a write grant names only what exists: create it first, mkdir -p)"
                };
                Some(("fs.write", "--write", suggest(&path, g), note))
            } else {
                None
            };
            if let Some((key, flag, entry, note)) = advice {
                out.push(format!(
                    "{}: not in {key} — add `{entry}` to permissions.{key} (sandbox: {flag} {entry}){note}, or run `{learn}` to learn what the tool needs",
                    shown(&path, g)
                ));
            }
            if out.len() >= 5 {
                return out;
            }
        }
    }
    out
}

fn shown(p: &Path, g: &Grants<'_>) -> String {
    match g.home.and_then(|h| p.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => p.display().to_string(),
    }
}

/// The entry a person would write for `p`: its top-level entry in the
/// project, else the folded directory (`~/.cargo`).
fn suggest(p: &Path, g: &Grants<'_>) -> String {
    if let Some((root, rest)) = g
        .root
        .and_then(|r| p.strip_prefix(r).ok().map(|rest| (r, rest)))
    {
        if rest.as_os_str().is_empty() {
            return ".".into();
        }
        let entry = super::fold::project_entry(root, rest);
        return entry
            .strip_prefix(root)
            .map(|e| e.display().to_string())
            .unwrap_or_else(|_| ".".into());
    }
    shown(&super::fold::fold_outside(p, g.home), g)
}

/// The path-like words of an error line: absolute paths, and quoted
/// words (`'out'`, `"x/y"`, `` `z` ``).
fn candidates(line: &str) -> Vec<String> {
    let mut v = Vec::new();
    for q in ['\'', '"', '`'] {
        let parts: Vec<&str> = line.split(q).collect();
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() && !part.is_empty() && !part.contains(' ') {
                v.push(part.to_string());
            }
        }
    }
    for word in line.split(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == '`') {
        let w = word.trim_end_matches([':', ',', ';', ')', '.']);
        if w.starts_with('/') && w.len() > 1 && !v.iter().any(|x| x == w) {
            v.push(w.to_string());
        }
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn grants<'a>(
        readable: &'a dyn Fn(&Path) -> bool,
        writable: &'a dyn Fn(&Path) -> bool,
        exists: &'a dyn Fn(&Path) -> bool,
    ) -> Grants<'a> {
        Grants {
            readable,
            writable,
            exists,
            cwd: Path::new("/p"),
            root: Some(Path::new("/p")),
            home: Some(Path::new("/home/u")),
        }
    }

    #[test]
    fn a_program_outside_the_grants_is_named_with_the_line_that_allows_it() {
        let r = |p: &Path| p.starts_with("/p/src");
        let w = |_: &Path| false;
        let e = |p: &Path| p.starts_with("/home/u/.cargo") || p.starts_with("/p");
        let g = grants(&r, &w, &e);
        let hints = refusals(
            "sh: 1: /home/u/.cargo/bin/cargo: No such file or directory\nunrelated line\n",
            &g,
            "glovebox learn build",
        );
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(
            hints[0].starts_with("~/.cargo/bin/cargo: not in fs.read — add `~/.cargo`"),
            "{hints:?}"
        );
        assert!(hints[0].contains("glovebox learn build"));
    }

    #[test]
    fn a_write_refused_names_the_directory_to_grant() {
        let r = |p: &Path| p.starts_with("/p");
        let w = |_: &Path| false;
        let e = |p: &Path| p.starts_with("/p") && !p.starts_with("/p/target/debug");
        let g = grants(&r, &w, &e);
        let hints = refusals(
            "error: failed to create directory `/p/target/debug`: Read-only file system (os error 30)",
            &g,
            "glovebox learn check",
        );
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(
            hints[0].contains("not in fs.write — add `target`"),
            "{hints:?}"
        );
        // Nothing to say about a path that is granted, or that does not
        // exist anywhere.
        let hints = refusals("cat: /p/src/x: No such file or directory", &g, "x");
        assert!(hints.is_empty(), "{hints:?}");
        let hints = refusals("cat: /nowhere/x: No such file or directory", &g, "x");
        assert!(hints.is_empty(), "{hints:?}");
    }

    #[test]
    fn relative_quoted_paths_are_taken_from_the_working_directory() {
        let r = |_: &Path| true;
        let w = |_: &Path| false;
        let e = |p: &Path| p == Path::new("/p");
        let g = grants(&r, &w, &e);
        let hints = refusals(
            "PermissionError: [Errno 13] Permission denied: 'out'",
            &g,
            "glovebox learn t",
        );
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(
            hints[0].starts_with("/p/out: not in fs.write — add `out`"),
            "{hints:?}"
        );
    }
}
