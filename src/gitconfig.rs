//! What a repository's git config says, read without running git.
//!
//! glovebox needs one value of it: `core.hooksPath`, the directory git
//! runs hooks from when it is set (husky and lefthook point it into the
//! working tree, say `.husky/_`), so that the files there are protected
//! like `.git/hooks` ([`crate::surface`]). Running `git config` would run
//! whatever the repository configures (`core.fsmonitor`), so the files
//! are read and parsed here: the repository's own `config` (for a `.git`
//! file — a worktree, a submodule — the common directory's) and the
//! worktree's `config.worktree`, each opened without following a link
//! (`O_NOFOLLOW`) and read up to [`MAX_BYTES`]. `include` and `includeIf`
//! are not followed, and the user's and system's config are not read: a
//! `core.hooksPath` set there points to a directory of the person's own
//! choosing, outside the project as a rule.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::manifest::discover::resolve;

/// How many bytes of one config file are read, at most.
pub const MAX_BYTES: u64 = 1 << 20;

/// The directory `core.hooksPath` names for the repository whose working
/// tree is `root` (whose `.git` directory or file is `root/.git`),
/// resolved as git resolves it (relative to the working tree, `~/` to
/// `home`), without following links; `None` when it is not set or the
/// config cannot be read.
pub fn hooks_path(root: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let git = root.join(".git");
    let meta = git.symlink_metadata().ok()?;
    let files: Vec<PathBuf> = if meta.is_dir() {
        vec![git.join("config"), git.join("config.worktree")]
    } else if meta.is_file() {
        // A worktree or submodule: its own directory, and the common
        // one (the last named wins, as in git: the worktree's file is
        // read after the shared one).
        let dirs = git_file_dirs(&git);
        let mut out = Vec::new();
        if let Some(common) = dirs.last() {
            out.push(common.join("config"));
        }
        if let Some(own) = dirs.first() {
            out.push(own.join("config.worktree"));
        }
        out
    } else {
        return None;
    };
    let mut value = None;
    for f in files {
        if let Some(text) = read_nofollow(&f) {
            if let Some(v) = core_hooks_path(&text) {
                value = Some(v);
            }
        }
    }
    let value = value.filter(|v| !v.is_empty())?;
    Some(match value.strip_prefix("~/") {
        Some(rest) => resolve(home?, rest),
        None => resolve(root, &value),
    })
}

/// Where a `.git` *file* (a worktree, a submodule) points: the `gitdir:`
/// it names and that directory's `commondir` (where hooks and config
/// live), links resolved; the git directory first.
pub fn git_file_dirs(git: &Path) -> Vec<PathBuf> {
    let Some(text) = read_nofollow(git) else {
        return Vec::new();
    };
    let Some(dir) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let base = git.parent().unwrap_or(Path::new("/"));
    let dir = resolve(base, dir.trim());
    let mut out = vec![dir.clone()];
    if let Some(common) = read_nofollow(&dir.join("commondir")) {
        out.push(resolve(&dir, common.trim()));
    }
    out.into_iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect()
}

/// The text of the regular file `path`, opened without following a final
/// link, up to [`MAX_BYTES`].
fn read_nofollow(path: &Path) -> Option<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last `core.hooksPath` value set in `text` (git's config syntax:
/// sections in brackets, case-insensitive names, `#`/`;` comments, quoted
/// values with `\` escapes, a `\` at the end of a line continuing it).
pub fn core_hooks_path(text: &str) -> Option<String> {
    let mut section = String::new();
    let mut found = None;
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.trim_start().to_string();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                continue;
            };
            let header = &rest[..end];
            // `[core]`, `[Core]`; a subsection (`[core "x"]`) is another.
            section = header.trim().to_ascii_lowercase();
            line = rest[end + 1..].trim_start().to_string();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.to_string()),
            None => (line.trim().to_ascii_lowercase(), String::new()),
        };
        if section != "core" || key != "hookspath" {
            continue;
        }
        let mut value = value;
        // A value continued on the next line.
        while value.trim_end().ends_with('\\') && !value.trim_end().ends_with("\\\\") {
            let cut = value.trim_end().len() - 1;
            value.truncate(cut);
            match lines.next() {
                Some(next) => value.push_str(next),
                None => break,
            }
        }
        found = Some(unquote(&value));
    }
    found
}

/// A config value as git reads it: surrounding blanks dropped, a comment
/// outside quotes cut, quotes removed, `\"`, `\\`, `\n`, `\t` unescaped.
fn unquote(value: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = value.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => {
                    out.pop();
                }
                Some(other) => out.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hooks_path_is_read_as_git_reads_it() {
        assert_eq!(
            core_hooks_path("[core]\n\tbare = false\n\thooksPath = .husky/_\n"),
            Some(".husky/_".into())
        );
        assert_eq!(
            core_hooks_path("[Core]\nHOOKSPATH=\"my hooks\" ; a comment\n"),
            Some("my hooks".into())
        );
        assert_eq!(
            core_hooks_path("[core] hooksPath = a\n[core]\nhookspath = b # last wins\n"),
            Some("b".into())
        );
        assert_eq!(
            core_hooks_path("[core \"x\"]\nhooksPath = no\n[alias]\nhooksPath = no\n"),
            None
        );
        assert_eq!(
            core_hooks_path("[core]\n\thooksPath = .git\\\nhooks2\n"),
            Some(".githooks2".into())
        );
    }

    #[test]
    fn the_repositorys_config_is_read_without_following_links() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        assert_eq!(hooks_path(root, None), None);
        std::fs::write(root.join(".git/config"), "[core]\nhooksPath = .husky\n").unwrap();
        assert_eq!(hooks_path(root, None), Some(root.join(".husky")));
        std::fs::write(root.join(".git/config"), "[core]\nhooksPath = ~/hooks\n").unwrap();
        assert_eq!(
            hooks_path(root, Some(Path::new("/home/u"))),
            Some(PathBuf::from("/home/u/hooks"))
        );
        // A config that is a link is not read.
        std::fs::write(root.join("elsewhere"), "[core]\nhooksPath = x\n").unwrap();
        std::fs::remove_file(root.join(".git/config")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join(".git/config")).unwrap();
        assert_eq!(hooks_path(root, None), None);
        // A worktree: the common directory's config.
        let main = root.join("main.git");
        std::fs::create_dir_all(main.join("worktrees/w")).unwrap();
        std::fs::write(main.join("worktrees/w/commondir"), "../..\n").unwrap();
        std::fs::write(main.join("config"), "[core]\nhooksPath = hooks-dir\n").unwrap();
        let wt = root.join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join("worktrees/w").display()),
        )
        .unwrap();
        assert_eq!(hooks_path(&wt, None), Some(wt.join("hooks-dir")));
    }
}
