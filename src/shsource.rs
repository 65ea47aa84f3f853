//! What a shell script sources, read statically: the `.` and `source`
//! commands of its text whose file is a literal path, without running
//! anything.
//!
//! [`crate::footprint`] uses this to follow a shell tool's script (a
//! command's entrypoint whose `#!` line runs a shell, a script given to
//! `sh`/`bash`/…, or the literal text of `sh -c`) to the project files it
//! sources, so that those are part of the approval fingerprint and of the
//! protected surface ([`crate::surface`]), like the modules python code
//! imports ([`crate::pyimports`]).
//!
//! The reader is generous: every `.`/`source` command anywhere in the
//! text counts (inside functions, `if`, after `&&`), whether or not it
//! would run. A path counts when it is literal after quote removal (no
//! `$`, backquote, glob or `~`), or when it starts with the script's own
//! directory spelt as scripts spell it (`"$(dirname "$0")/lib.sh"`,
//! `${0%/*}/lib.sh`, the same with `${BASH_SOURCE[0]}`): the first is
//! found from the working directory, the second from the script's
//! directory. Anything else (`. "$CONFIG"`) is a computed path the reader
//! cannot see.

use std::path::Path;

/// How many bytes of a script are read, at most.
pub const MAX_BYTES: u64 = 1 << 20;

/// One sourced file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced {
    /// The path as written (quotes removed, the script-directory prefix
    /// removed when `from_script` is set).
    pub path: String,
    /// True when the path is relative to the sourcing script's directory
    /// (`"$(dirname "$0")/x"`), false when relative to the working
    /// directory (or absolute).
    pub from_script: bool,
}

/// The shells whose scripts are read (by the interpreter's file name).
pub const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ksh", "ash"];

/// True when `name` (an interpreter's file name) is one of [`SHELLS`].
pub fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// True when `script` starts with a `#!` line running a shell
/// (`#!/bin/sh`, `#!/usr/bin/env bash`).
pub fn has_shell_shebang(script: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    let Ok(n) = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return false;
    };
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    let mut words = text.split_whitespace();
    let name = |w: &str| {
        Path::new(w)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    match words.next().map(name).as_deref() {
        Some("env") => words.next().is_some_and(|w| is_shell(&name(w))),
        Some(n) => is_shell(n),
        None => false,
    }
}

/// The prefixes a script spells its own directory with (after quote
/// removal: `"$(dirname "$0")/x"` is `$(dirname $0)/x`).
const SCRIPT_DIR: [&str; 7] = [
    "$(dirname $0)/",
    "${0%/*}/",
    "$(dirname ${BASH_SOURCE[0]})/",
    "$(dirname $BASH_SOURCE)/",
    "${BASH_SOURCE%/*}/",
    "${BASH_SOURCE[0]%/*}/",
    "$(dirname $(realpath $0))/",
];

/// The files `text` sources (see the module documentation).
pub fn of_source(text: &str) -> Vec<Sourced> {
    let mut out = Vec::new();
    for line in text.lines() {
        let words = words(line);
        let mut command_start = true;
        let mut i = 0;
        while i < words.len() {
            let w = words[i].as_str();
            if is_separator(w) || w == "then" || w == "do" || w == "else" || w == "{" {
                command_start = true;
                i += 1;
                continue;
            }
            if command_start && (w == "." || w == "source") {
                if let Some(arg) = words.get(i + 1) {
                    if let Some(s) = sourced(arg) {
                        out.push(s);
                    }
                }
            }
            command_start = false;
            i += 1;
        }
    }
    out.dedup();
    out
}

/// The files the script at `path` sources (`None` when it is not a
/// readable regular file of at most [`MAX_BYTES`]).
pub fn of_file(path: &Path) -> Option<Vec<Sourced>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(of_source(&String::from_utf8_lossy(&bytes)))
}

fn is_separator(w: &str) -> bool {
    matches!(w, ";" | "&&" | "||" | "|" | "&" | "(" | ")" | "!")
}

/// The words of one line, as the shell would split them for this
/// purpose: quotes kept (removed later), comments dropped, `;`, `&&`,
/// `||`, `|`, `&` and parentheses outside quotes and `$(…)` as words of
/// their own.
fn words(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut single, mut double, mut subst) = (false, false, 0usize);
    let mut i = 0;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if single {
            cur.push(c);
            single = c != '\'';
            continue;
        }
        match c {
            '\\' => {
                cur.push(c);
                if let Some(&n) = chars.get(i) {
                    cur.push(n);
                    i += 1;
                }
                continue;
            }
            '$' if chars.get(i) == Some(&'(') => {
                cur.push_str("$(");
                i += 1;
                subst += 1;
                continue;
            }
            ')' if subst > 0 => {
                cur.push(c);
                subst -= 1;
                continue;
            }
            '"' => {
                cur.push(c);
                double = !double;
                continue;
            }
            '\'' if !double => {
                cur.push(c);
                single = true;
                continue;
            }
            _ => {}
        }
        if double || subst > 0 {
            cur.push(c);
            continue;
        }
        match c {
            '#' if cur.is_empty() => break,
            ' ' | '\t' => flush(&mut cur, &mut out),
            ';' | '|' | '&' | '(' | ')' => {
                flush(&mut cur, &mut out);
                if (c == '&' || c == '|') && chars.get(i) == Some(&c) {
                    i += 1;
                    out.push(format!("{c}{c}"));
                } else {
                    out.push(c.to_string());
                }
            }
            _ => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// The sourced file a `.`/`source` argument names, when it is literal or
/// relative to the script's own directory.
fn sourced(word: &str) -> Option<Sourced> {
    let unquoted = unquote(word);
    for prefix in SCRIPT_DIR {
        if let Some(rest) = unquoted.strip_prefix(prefix) {
            return literal(rest).map(|path| Sourced {
                path,
                from_script: true,
            });
        }
    }
    literal(&unquoted).map(|path| Sourced {
        path,
        from_script: false,
    })
}

/// `word` without its quotes (`"a"b'c'` → `abc`); a backslash keeps the
/// next character.
fn unquote(word: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (Some('\''), _) => out.push(c),
            (_, '\\') => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// `path` when nothing in it is expanded by the shell.
fn literal(path: &str) -> Option<String> {
    let computed =
        path.is_empty() || path.starts_with('~') || path.contains(['$', '`', '*', '?', '[', '{']);
    (!computed).then(|| path.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<(String, bool)> {
        of_source(text)
            .into_iter()
            .map(|s| (s.path, s.from_script))
            .collect()
    }

    #[test]
    fn literal_sources_are_found_wherever_they_are() {
        let text = "#!/bin/sh\n. scripts/lib.sh\nsource ./more.sh # comment\nif true; then . 'quoted dir/x.sh'; fi\n[ -f opt.sh ] && . opt.sh\nf() { . \"in fn.sh\"; }\n";
        assert_eq!(
            paths(text),
            [
                ("scripts/lib.sh".into(), false),
                ("./more.sh".into(), false),
                ("quoted dir/x.sh".into(), false),
                ("opt.sh".into(), false),
                ("in fn.sh".into(), false),
            ]
        );
    }

    #[test]
    fn the_scripts_own_directory_is_followed_and_computed_paths_are_not() {
        let text = ". \"$(dirname \"$0\")/lib/a.sh\"\n. ${0%/*}/b.sh\nsource \"$(dirname \"${BASH_SOURCE[0]}\")/c.sh\"\n. \"$CONFIG\"\n. ~/.bashrc\n. lib/*.sh\n. `which x`\n";
        assert_eq!(
            paths(text),
            [
                ("lib/a.sh".into(), true),
                ("b.sh".into(), true),
                ("c.sh".into(), true),
            ]
        );
    }

    #[test]
    fn dots_that_are_not_the_command_do_not_count() {
        let text = "echo . not.sh\ncp a . ; ls .\n# . commented.sh\necho 'x; . quoted.sh'\n";
        assert_eq!(paths(text), Vec::<(String, bool)>::new());
    }

    #[test]
    fn a_shell_shebang_is_told_from_others() {
        let d = tempfile::tempdir().unwrap();
        let write = |n: &str, t: &str| {
            let p = d.path().join(n);
            std::fs::write(&p, t).unwrap();
            p
        };
        assert!(has_shell_shebang(&write("a", "#!/bin/sh\n")));
        assert!(has_shell_shebang(&write("b", "#!/usr/bin/env bash\n")));
        assert!(!has_shell_shebang(&write("c", "#!/usr/bin/python3\n")));
        assert!(!has_shell_shebang(&write("d", "echo hi\n")));
    }
}
