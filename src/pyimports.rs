//! What a Python source file imports, read statically: the `import` and
//! `from … import` statements of its text, without running anything.
//!
//! [`crate::footprint`] uses this to follow a python tool's module (and a
//! `python3 SCRIPT` command's script) to the project-local modules it
//! imports, so that those are part of the approval fingerprint and of the
//! protected surface ([`crate::surface`]).
//!
//! The reader is deliberately generous: string literals and comments are
//! skipped, bracketed and backslash-continued statements are joined, and
//! every statement anywhere in the file counts (inside functions, `if`,
//! `try`), whether or not it would run. It does not see imports made by
//! computed names (`importlib.import_module(name)`, `__import__(x)`,
//! `exec`): those are covered only where a warm worker recorded them
//! ([`crate::footprint`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// One imported name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// Leading dots of a relative import (`0`: absolute).
    pub level: usize,
    /// The dotted module (`a.b` of `import a.b` or `from a.b import c`;
    /// empty for `from . import c`).
    pub module: String,
    /// For `from M import x, y`: `x` and `y` (each may be a submodule);
    /// empty for `import M` and for `from M import *`.
    pub names: Vec<String>,
}

/// The logical statements of `text`: strings and comments removed,
/// bracketed and continued lines joined, split at `;` and `:`.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        let s = cur.trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
        cur.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\'' | '"' => {
                let triple = i + 2 < chars.len() && chars[i + 1] == c && chars[i + 2] == c;
                i += if triple { 3 } else { 1 };
                while i < chars.len() {
                    if chars[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if triple {
                        if i + 2 < chars.len()
                            && chars[i] == c
                            && chars[i + 1] == c
                            && chars[i + 2] == c
                        {
                            i += 3;
                            break;
                        }
                    } else if chars[i] == c || chars[i] == '\n' {
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                // A placeholder keeps `x = "a" import` from joining words.
                cur.push_str(" '' ");
                continue;
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                cur.push(' ');
                i += 2;
                continue;
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '\n' | ';' | ':' if depth == 0 => {
                flush(&mut cur, &mut out);
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(if c == '\n' { ' ' } else { c });
        i += 1;
    }
    flush(&mut cur, &mut out);
    out
}

/// A dotted name, or `None` when `s` is not one.
fn dotted(s: &str) -> Option<&str> {
    let ok = !s.is_empty()
        && s.split('.').all(|p| {
            let mut ch = p.chars();
            ch.next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && ch.all(|c| c.is_alphanumeric() || c == '_')
        });
    ok.then_some(s)
}

/// `name` or `name as alias` → `name`.
fn unaliased(part: &str) -> Option<&str> {
    dotted(part.split_whitespace().next()?)
}

/// Every import statement of `text`.
pub fn of_source(text: &str) -> Vec<Import> {
    let mut out = Vec::new();
    for s in statements(text) {
        let s = s.replace(['(', ')'], " ");
        let words: Vec<&str> = s.split_whitespace().collect();
        match words.first() {
            Some(&"import") => {
                let rest = s.trim_start()["import".len()..].to_string();
                for part in rest.split(',') {
                    if let Some(m) = unaliased(part) {
                        out.push(Import {
                            level: 0,
                            module: m.to_string(),
                            names: Vec::new(),
                        });
                    }
                }
            }
            Some(&"from") => {
                let Some(at) = words.iter().position(|w| *w == "import") else {
                    continue;
                };
                let source: String = words[1..at].concat();
                let level = source.chars().take_while(|c| *c == '.').count();
                let module = &source[level..];
                if (level == 0 || !module.is_empty()) && dotted(module).is_none() {
                    continue;
                }
                let rest = words[at + 1..].join(" ");
                let names = rest
                    .split(',')
                    .filter_map(unaliased)
                    .filter(|n| !n.contains('.'))
                    .map(String::from)
                    .collect();
                out.push(Import {
                    level,
                    module: module.to_string(),
                    names,
                });
            }
            _ => {}
        }
    }
    out
}

/// A larger file is not read for its imports.
pub const MAX_BYTES: u64 = 1 << 20;

/// What identifies a file's content without reading it: device, inode,
/// size, mtime and ctime to the nanosecond.
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    m.is_file().then(|| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

/// Files whose imports are remembered: at most this many.
const CACHED_MAX: usize = 4096;

/// The imports of the regular file `path` (at most [`MAX_BYTES`]; `None`
/// when it is not one or cannot be read). A file's imports are
/// remembered while its stamp is the one it was read under (the surface
/// and a warm worker's key work them out at every call), and only when
/// the stamp was the same before and after reading.
pub fn of_file(path: &Path) -> Option<Arc<Vec<Import>>> {
    type Cache = Mutex<HashMap<PathBuf, (Stamp, Arc<Vec<Import>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let before = stamp(path)?;
    if before.2 > MAX_BYTES {
        return None;
    }
    if let Some((was, imports)) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(path)
    {
        if *was == before {
            return Some(imports.clone());
        }
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() as u64 > MAX_BYTES {
        return None;
    }
    let imports = Arc::new(of_source(&String::from_utf8_lossy(&bytes)));
    if stamp(path) == Some(before) {
        let mut known = cache.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= CACHED_MAX {
            known.clear();
        }
        known.insert(path.to_path_buf(), (before, imports.clone()));
    }
    Some(imports)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn absolute(m: &str) -> Import {
        Import {
            level: 0,
            module: m.into(),
            names: Vec::new(),
        }
    }

    #[test]
    fn every_form_of_import_is_read() {
        let text = r#"
"""Docstring: import notthis"""
import os, csv as c
import a.b.c
from json import loads, dumps as d
from . import helper
from ..pkg.mod import (x,
    y as z,  # comment import nope
)
def f():
    import inner; from lazy import thing
try: import ujson
except ImportError: pass
s = "import stringy"
from big import \
    cont
from star import *
"#;
        let got = of_source(text);
        let want = vec![
            absolute("os"),
            absolute("csv"),
            absolute("a.b.c"),
            Import {
                level: 0,
                module: "json".into(),
                names: vec!["loads".into(), "dumps".into()],
            },
            Import {
                level: 1,
                module: String::new(),
                names: vec!["helper".into()],
            },
            Import {
                level: 2,
                module: "pkg.mod".into(),
                names: vec!["x".into(), "y".into()],
            },
            absolute("inner"),
            Import {
                level: 0,
                module: "lazy".into(),
                names: vec!["thing".into()],
            },
            absolute("ujson"),
            Import {
                level: 0,
                module: "big".into(),
                names: vec!["cont".into()],
            },
            Import {
                level: 0,
                module: "star".into(),
                names: Vec::new(),
            },
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_file_read_again_after_a_rewrite_gives_its_new_imports() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("m.py");
        std::fs::write(&f, "import a\n").unwrap();
        assert_eq!(*of_file(&f).unwrap(), vec![absolute("a")]);
        assert_eq!(*of_file(&f).unwrap(), vec![absolute("a")], "cached");
        std::fs::write(&f, "import b\n").unwrap();
        assert_eq!(*of_file(&f).unwrap(), vec![absolute("b")]);
        assert!(of_file(d.path()).is_none(), "a directory");
    }

    #[test]
    fn text_that_is_not_python_yields_nothing_harmful() {
        assert!(of_source("\u{0}\u{1}import\n'''unterminated").is_empty());
        assert!(of_source("from import x\nimport 3x\n").is_empty());
    }
}
