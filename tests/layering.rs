//! The layering the README's "Layout" promises, checked: a module of
//! `src/` uses only the modules listed above it there (the list is read
//! from README.md, so the map and the check cannot drift apart).
//!
//! An edge is a `crate::NAME` path in a module's production code (not in a
//! comment, a `#[cfg(test)] mod`, or a `*_tests.rs` file). Every edge
//! that points up fails, unless it is one of [`KNOWN`] — the debts still
//! to carve out, each named with why — and a debt that is gone fails too,
//! so the list only ever shrinks. A module of `src/` the Layout does not
//! list fails as well: a new module gets its line (and its place).
//!
//! Also: no `unsafe` outside `src/jail/sys/` (its safe wrappers carry
//! every SAFETY argument).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Upward edges not yet carved out: (from, to, why).
const KNOWN: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The top-level modules in the README's Layout, bottom first.
fn layout() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("## Layout").expect("README has a Layout")..];
    let start = section.find("```\n").expect("the Layout's block") + 4;
    let block = &section[start..];
    let block = &block[..block.find("```").expect("the block ends")];
    let mut order: Vec<String> = Vec::new();
    for line in block.lines().filter(|l| l.starts_with("src/")) {
        for word in line.split_whitespace() {
            let Some(rest) = word.trim_end_matches(',').strip_prefix("src/") else {
                break;
            };
            let name = rest
                .trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_string();
            if !name.is_empty() && !order.contains(&name) {
                order.push(name);
            }
        }
    }
    order
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to.
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(root().join("src")).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// A file's production code: up to its `#[cfg(test)]` module.
fn production(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() == "#[cfg(test)]" {
            let next: Vec<&str> = lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .skip_while(|l| l.starts_with("#["))
                .take(1)
                .collect();
            if next.first().is_some_and(|n| n.starts_with("mod ")) {
                return lines[..i].to_vec();
            }
        }
    }
    lines
}

/// (from, to) → the files with such a path.
fn edges() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with("_tests.rs") {
            continue;
        }
        let from = module_of(&f);
        let text = std::fs::read_to_string(&f).unwrap();
        for line in production(&text) {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (at, _) in line.match_indices("crate::") {
                let to: String = line[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !to.is_empty() && to != from {
                    let shown = f.strip_prefix(root()).unwrap().display().to_string();
                    edges.entry((from.clone(), to)).or_default().insert(shown);
                }
            }
        }
    }
    edges
}

#[test]
fn every_module_uses_only_the_layers_listed_below_it() {
    let order = layout();
    assert!(
        order.len() > 20,
        "the Layout lists too few modules: {order:?}"
    );
    let rank = |m: &str| order.iter().position(|o| o == m);
    let mut problems = Vec::new();
    let mut debts_seen = BTreeSet::new();
    // `lib` and `main` are the crate's roots: they name every module.
    let roots = ["lib", "main", "cli"];
    for ((from, to), files) in edges() {
        if roots.contains(&from.as_str()) {
            continue;
        }
        let (Some(f), Some(t)) = (rank(&from), rank(&to)) else {
            problems.push(format!(
                "{from} -> {to}: a module README's Layout does not list ({files:?})"
            ));
            continue;
        };
        if t > f {
            if KNOWN.iter().any(|(a, b, _)| *a == from && *b == to) {
                debts_seen.insert((from.clone(), to.clone()));
            } else {
                problems.push(format!(
                    "{from} -> {to} points up the Layout ({files:?}): move what it uses down, or the module up"
                ));
            }
        }
    }
    for (a, b, why) in KNOWN {
        if !debts_seen.contains(&(a.to_string(), b.to_string())) {
            problems.push(format!("{a} -> {b} is gone ({why}): remove it from KNOWN"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself: an upward edge in a module is found (the parser
/// reads code, skips comments and test modules).
#[test]
fn the_parser_finds_code_edges_and_skips_comments_and_tests() {
    let text = "use crate::jail::Spec;\n// crate::engine in a comment\nfn f() { crate::kind::x() }\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n use crate::engine::Caller;\n}\n";
    let code = production(text);
    assert_eq!(code.len(), 3);
    let found: Vec<&str> = code
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .flat_map(|l| l.match_indices("crate::").map(move |(i, _)| &l[i + 7..]))
        .collect();
    assert_eq!(found.len(), 2);
    assert!(found[0].starts_with("jail") && found[1].starts_with("kind"));
}

/// The `unsafe` keyword in `text`'s code (comments skipped): the line
/// numbers where it appears.
fn unsafe_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == "unsafe")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Every `unsafe` block of glovebox is in `src/jail/sys/`, each with its
/// `SAFETY:` note (clippy's `undocumented_unsafe_blocks` checks those):
/// anything else calls the safe wrappers there.
#[test]
fn unsafe_code_lives_only_in_jail_sys() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    let sys = root().join("src/jail/sys");
    assert!(
        files.iter().any(|f| f.starts_with(&sys)),
        "no source found in src/jail/sys"
    );
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&sys)) {
        let text = std::fs::read_to_string(f).unwrap();
        for line in unsafe_lines(&text) {
            let shown = f.strip_prefix(root()).unwrap().display();
            found.push(format!("{shown}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "`unsafe` outside src/jail/sys/ (add a safe wrapper there, whose SAFETY note is argued there): {found:?}"
    );
}

/// The check itself: code is found, comments and longer words are not.
#[test]
fn the_unsafe_check_finds_code_and_skips_comments() {
    let text = "let x = unsafe { f() };\n// unsafe in a comment\n#![deny(unsafe_code)]\nunsafe fn g() {}\nlet y = 1; // unsafe\n";
    assert_eq!(unsafe_lines(text), vec![1, 4]);
}
