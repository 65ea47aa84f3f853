//! The proposal: the folded grants written the way a person writes them —
//! a `permissions` block for `tool.yml` with a comment on each line, the
//! flags of `glovebox sandbox`, the difference with the current manifest —
//! and `--apply`, which writes the block into `tool.yml`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::fold::{Access, Folded, Grant};
use super::LearnError;

/// What a learning run found, ready to print or apply.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Proposal {
    /// The folded grants.
    #[serde(flatten)]
    pub folded: Folded,
    /// The hosts reached through the egress proxy (`host:port`).
    pub hosts: Vec<String>,
    /// The variables the run was given, each explained (kept in the
    /// proposal: a read of a variable is not observable).
    pub env: Vec<super::env::EnvSeen>,
    /// The declared secrets the run sent, per host (names and counts).
    pub secrets: Vec<crate::jail::observe::SecretSent>,
    /// The project root (or the sandbox's working directory).
    pub root: PathBuf,
    /// The user's home, for `~` in what is shown.
    #[serde(skip)]
    pub home: Option<PathBuf>,
    /// Accesses the observer could not keep (past its bound).
    pub unrecorded: u64,
    /// Every learning call succeeded. When one failed the proposal is
    /// what was used up to the failure: said plainly, never "learned".
    pub succeeded: bool,
}

/// A host pattern for `host` and `port` (`[v6]:port` for an IPv6
/// literal).
pub fn host_pattern(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl Proposal {
    /// `path` as a manifest entry: relative to the root inside it (`.`
    /// for the root), `~/…` below the home (as the proposal shows it and
    /// a person writes it), absolute elsewhere.
    pub fn manifest_path(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rest) if rest.as_os_str().is_empty() => ".".into(),
            Ok(rest) => rest.display().to_string(),
            Err(_) => self.home_path(path),
        }
    }

    /// `path` as `~/…` below the home, else as it is.
    fn home_path(&self, path: &Path) -> String {
        match self.home.as_deref().and_then(|h| path.strip_prefix(h).ok()) {
            Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
            _ => path.display().to_string(),
        }
    }

    /// `path` for a person (and a shell): `~/…` under the home.
    pub fn shown(&self, path: &Path) -> String {
        self.manifest_path(path)
    }

    fn why(&self, g: &Grant) -> String {
        let note = match self.write_holding(g) {
            Some(w) if g.create => format!(
                "; the run created it: glovebox makes it before each call (the write grant {} holds it)",
                json_str(&self.manifest_path(&w.path))
            ),
            _ => "; created by --apply (a grant names only what exists)".into(),
        };
        self.why_with(g, &note)
    }

    /// The other grant that is a write grant holding `g` (`g` a read
    /// grant): glovebox makes a missing read grant there before the call.
    fn write_holding(&self, g: &Grant) -> Option<&Grant> {
        if g.access != Access::Read {
            return None;
        }
        self.of(Access::Write).find(|w| g.path.starts_with(&w.path))
    }

    /// The directories to make before the enforcing run (`mkdir -p`):
    /// those the run created that no write grant of the proposal holds
    /// (glovebox makes those itself).
    pub fn to_make(&self) -> Vec<PathBuf> {
        self.folded
            .grants
            .iter()
            .filter(|g| g.create && self.write_holding(g).is_none())
            .filter(|g| {
                !self
                    .of(Access::Write)
                    .any(|w| g.path.starts_with(&w.path) && w.path != g.path)
            })
            .map(|g| g.path.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    fn why_with(&self, g: &Grant, create_note: &str) -> String {
        let verb = match g.access {
            Access::Read => "read by",
            Access::Write => "written by",
        };
        let who: Vec<&str> = g.programs.iter().map(String::as_str).take(3).collect();
        let who = if who.is_empty() {
            "the tool".to_string()
        } else {
            who.join(", ")
        };
        let first = g
            .examples
            .first()
            .map(|e| self.shown(e))
            .unwrap_or_default();
        let more = if g.covers > 1 {
            format!(" (+{} more)", g.covers - 1)
        } else {
            String::new()
        };
        let create = if g.create { create_note } else { "" };
        format!("{verb} {who}: {first}{more}{create}")
    }

    fn of(&self, access: Access) -> impl Iterator<Item = &Grant> {
        self.folded
            .grants
            .iter()
            .filter(move |g| g.access == access)
    }

    /// The `network` value: `false`, or the hosts reached.
    fn network_yaml(&self) -> String {
        if self.hosts.is_empty() {
            "false".into()
        } else {
            format!("{{allow: {}}}", json_list(&self.hosts))
        }
    }

    /// The `permissions:` block, each line explained; `secrets` is the
    /// current manifest's (learn never adds one: it cannot see which a
    /// tool needs, and never proposes a value).
    pub fn manifest_block(&self, secrets: Option<&str>) -> String {
        let mut s = String::from("permissions:\n");
        let _ = writeln!(
            s,
            "  network: {}{}",
            self.network_yaml(),
            if self.hosts.is_empty() {
                "   # no host reached in the learning run"
            } else {
                "   # the hosts reached in the learning run"
            }
        );
        s.push_str("  fs:\n");
        for (key, access) in [("read", Access::Read), ("write", Access::Write)] {
            let items: Vec<&Grant> = self.of(access).collect();
            if items.is_empty() {
                let _ = writeln!(s, "    {key}: []");
                continue;
            }
            let _ = writeln!(s, "    {key}:");
            for g in items {
                let _ = writeln!(
                    s,
                    "      - {}   # {}",
                    json_str(&self.manifest_path(&g.path)),
                    self.why(g)
                );
            }
        }
        if let Some(secrets) = secrets {
            let _ = writeln!(s, "  secrets: {secrets}");
            self.secret_lines(secrets, &mut s);
        }
        s
    }

    /// One comment per declared secret (`declared`: the manifest's
    /// `secrets` as JSON): the hosts its real value went to, those that
    /// got only its placeholder, or that the run never sent it.
    fn secret_lines(&self, declared: &str, s: &mut String) {
        let names: Vec<String> =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(declared)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
        for name in names {
            let uses: Vec<&crate::jail::observe::SecretSent> =
                self.secrets.iter().filter(|u| u.secret == name).collect();
            if uses.is_empty() {
                let _ = writeln!(
                    s,
                    "  # secret {name}: never sent in the learning run (remove it if the tool does not need it)"
                );
                continue;
            }
            let mut parts = Vec::new();
            for u in uses {
                let at = host_pattern(&u.host, u.port);
                if u.delivered > 0 {
                    parts.push(format!("its real value went to {at} (×{})", u.delivered));
                }
                if u.refused > 0 {
                    parts.push(format!(
                        "only its placeholder went to {at} (×{}: not one of its hosts)",
                        u.refused
                    ));
                }
            }
            let _ = writeln!(s, "  # secret {name}: {}", parts.join("; "));
        }
    }

    /// The flags of `glovebox sandbox` that allow what was observed.
    pub fn sandbox_flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        for g in &self.folded.grants {
            let flag = match g.access {
                Access::Read => "--read",
                Access::Write => "--write",
            };
            v.push(format!("{flag} {}", shell_word(&self.shown(&g.path))));
        }
        if !self.hosts.is_empty() {
            v.push("--net".into());
            for h in &self.hosts {
                v.push(format!("--allow-host {}", shell_word(h)));
            }
        }
        v
    }

    /// [`Proposal::sandbox_flags`] as arguments (absolute paths, nothing
    /// quoted): what a program passes to `glovebox sandbox`.
    pub fn sandbox_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for g in &self.folded.grants {
            v.push(match g.access {
                Access::Read => "--read".into(),
                Access::Write => "--write".into(),
            });
            v.push(g.path.display().to_string());
        }
        if !self.hosts.is_empty() {
            v.push("--net".into());
            for h in &self.hosts {
                v.push("--allow-host".into());
                v.push(h.clone());
            }
        }
        v
    }

    /// The proposal as text for `glovebox sandbox --learn`: the flags,
    /// one per line with its reason; `env`: the `--env` items as typed
    /// (`NAME` or `NAME=VALUE`), kept as typed in the one-command line so
    /// that it can be pasted.
    pub fn sandbox_text(&self, env: &[String]) -> String {
        let mut s = if self.succeeded {
            String::from("glovebox learned (proposed flags for `glovebox sandbox`):\n")
        } else {
            String::from("glovebox: the learning run FAILED, so nothing was learned for sure: the flags below are what it used before it failed, not a working set (a write outside the project is never proposed from a failed run); fix what failed (its output is above) and learn again:\n")
        };
        let reasons: Vec<String> = self
            .folded
            .grants
            .iter()
            .map(|g| {
                let note = match self.write_holding(g) {
                    Some(w) if g.create => format!(
                        "; the run created it: glovebox makes it before the call (under --write {})",
                        shell_word(&self.shown(&w.path))
                    ),
                    _ => "; the run created it: mkdir -p it first (the line below does)".into(),
                };
                self.why_with(g, &note)
            })
            .chain(
                self.hosts
                    .iter()
                    .map(|_| "reached in the learning run".to_string()),
            )
            .collect();
        let flags = self.sandbox_flags();
        let mut reasons = reasons.into_iter();
        for f in &flags {
            if f == "--net" {
                let _ = writeln!(s, "  {f}");
                continue;
            }
            let _ = writeln!(s, "  {f}   # {}", reasons.next().unwrap_or_default());
        }
        for e in env {
            let name = e.split_once('=').map_or(e.as_str(), |(n, _)| n);
            let why = self
                .env
                .iter()
                .find(|x| x.name == name)
                .map_or("passed in the learning run", |x| x.why.as_str());
            let _ = writeln!(s, "  --env {}   # {why}", shell_word(e));
        }
        self.notes(&mut s);
        let mut line = String::new();
        let make = self.to_make();
        if !make.is_empty() {
            line.push_str("mkdir -p");
            for m in &make {
                line.push(' ');
                line.push_str(&shell_word(&self.shown(m)));
            }
            line.push_str(" && ");
        }
        line.push_str("glovebox sandbox");
        for f in flags
            .iter()
            .cloned()
            .chain(env.iter().map(|e| format!("--env {}", shell_word(e))))
        {
            line.push(' ');
            line.push_str(&f);
        }
        let _ = writeln!(s, "as one command:\n  {line} -- …");
        s
    }

    /// What was seen but is not proposed.
    pub fn notes(&self, s: &mut String) {
        for w in &self.folded.withheld {
            let flag = match w.access {
                Access::Read => "read",
                Access::Write => "write",
            };
            let by: Vec<&str> = w.programs.iter().map(String::as_str).take(3).collect();
            let first = w
                .examples
                .first()
                .map(|e| self.shown(e))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  withheld: {flag} {}   # tried by {}: {first} — {}; never proposed: add it yourself if the tool really needs it (learn: --include {})",
                self.shown(&w.path),
                if by.is_empty() { "the tool".to_string() } else { by.join(", ") },
                w.why,
                shell_word(&self.shown(&w.path)),
            );
        }
        for o in &self.folded.outside_view {
            let _ = writeln!(
                s,
                "  not proposed: {} (outside the learning view, so refused while learning; learn again with --read {} if the tool needs it)",
                self.shown(o),
                shell_word(&self.shown(o)),
            );
        }
        for k in &self.folded.kept_out {
            let _ = writeln!(
                s,
                "  not proposed: {} (glovebox's own state; no jail may read it)",
                self.shown(k)
            );
        }
        for w in &self.folded.unneeded_writes {
            let _ = writeln!(
                s,
                "  not proposed: a write to {} (refused in the learning run, which succeeded without it)",
                self.shown(w)
            );
        }
        for l in &self.folded.lookups {
            let _ = writeln!(
                s,
                "  not proposed: {} (a user-database lookup programs run without; add it by hand if the tool needs it)",
                l.display()
            );
        }
        for l in &self.folded.listings {
            let _ = writeln!(
                s,
                "  not proposed: the listing of {} (it holds the baseline: the jail shows it with the baseline's entries; granting it grants all of it)",
                l.display()
            );
        }
        if self.unrecorded > 0 {
            let _ = writeln!(
                s,
                "  note: {} more accesses were not recorded (the observer's bound); run fewer calls per learning run",
                self.unrecorded
            );
        }
    }

    /// The difference between the current grants (`read`, `write`,
    /// `network` as written) and the proposal, one `+`/`-` line each.
    pub fn diff(&self, read: &[String], write: &[String], network: &str) -> String {
        let mut s = String::new();
        for (key, access, current) in [
            ("fs.read", Access::Read, read),
            ("fs.write", Access::Write, write),
        ] {
            let proposed: Vec<String> = self
                .of(access)
                .map(|g| self.manifest_path(&g.path))
                .collect();
            for p in &proposed {
                if !current.iter().any(|c| same_entry(&self.root, c, p)) {
                    let _ = writeln!(s, "+ {key}: {p}");
                }
            }
            for c in current {
                if !proposed.iter().any(|p| same_entry(&self.root, c, p)) {
                    let _ = writeln!(s, "- {key}: {c}   (not used in the learning run)");
                }
            }
        }
        let proposed = self.network_yaml();
        if proposed != network {
            let _ = writeln!(s, "- network: {network}\n+ network: {proposed}");
        }
        if s.is_empty() {
            s.push_str("  (no change: the manifest already grants exactly this)\n");
        }
        s
    }

    /// Writes the proposal into the manifest file `file` (its top-level
    /// `permissions:` block replaced, or added) and creates the
    /// directories the run made. Returns the directories created.
    pub fn apply(&self, file: &Path, secrets: Option<&str>) -> Result<Vec<PathBuf>, LearnError> {
        let text = std::fs::read_to_string(file).map_err(|source| LearnError::Manifest {
            path: file.to_path_buf(),
            source,
        })?;
        let updated = rewritten(&text, &self.manifest_block(secrets)).map_err(|message| {
            LearnError::Unwritable {
                path: file.to_path_buf(),
                message,
            }
        })?;
        let mut made = Vec::new();
        for g in self.folded.grants.iter().filter(|g| g.create) {
            std::fs::create_dir_all(&g.path).map_err(|source| LearnError::Manifest {
                path: g.path.clone(),
                source,
            })?;
            made.push(g.path.clone());
        }
        let tmp = file.with_extension("yml.learn");
        std::fs::write(&tmp, updated)
            .and_then(|()| std::fs::rename(&tmp, file))
            .map_err(|source| LearnError::Manifest {
                path: file.to_path_buf(),
                source,
            })?;
        Ok(made)
    }
}

fn same_entry(root: &Path, a: &str, b: &str) -> bool {
    let n = |s: &str| s.trim_end_matches('/').trim_start_matches("./").to_string();
    let (x, y) = (n(a), n(b));
    x == y
        || (x.is_empty() && y == ".")
        || (y.is_empty() && x == ".")
        || crate::manifest::discover::resolve(root, a)
            == crate::manifest::discover::resolve(root, b)
}

/// `text` with `block` (a `permissions:` block) as its permissions. The
/// block's lines take the old block's place ([`replace_block`]: comments
/// and order kept) where the result reads back with exactly the block's
/// permissions; where it does not (a flow-style or JSON document, whose
/// keys are not lines of their own) the document is written again whole
/// with them — as JSON if it was JSON, else as YAML.
pub fn rewritten(text: &str, block: &str) -> Result<String, String> {
    let wanted = crate::yaml::parse(block)
        .map_err(|e| format!("the proposal does not read back: {e}"))?
        .value["permissions"]
        .clone();
    let in_place = replace_block(text, block);
    if crate::yaml::parse(&in_place).is_ok_and(|d| d.value["permissions"] == wanted) {
        return Ok(in_place);
    }
    let mut doc = crate::yaml::parse(text).map_err(|e| e.to_string())?.value;
    let Some(map) = doc.as_object_mut() else {
        return Err("its top level is not a mapping".into());
    };
    map.insert("permissions".into(), wanted);
    let json = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
        .is_some_and(|l| l.starts_with('{'));
    if json {
        serde_json::to_string_pretty(&doc)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())
    } else {
        crate::yaml::emit(&doc).map_err(|e| e.to_string())
    }
}

/// `text` with its top-level `permissions:` block (the key at column 0
/// and every following line that is indented, blank or a comment)
/// replaced by `block`, or `block` appended.
pub fn replace_block(text: &str, block: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| {
        l.strip_prefix("permissions")
            .is_some_and(|r| r.trim_start().starts_with(':'))
    });
    let Some(start) = start else {
        let mut out = text.to_string();
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(block);
        return out;
    };
    let mut end = start + 1;
    while end < lines.len() {
        let l = lines[end];
        if l.is_empty() || l.starts_with(' ') || l.starts_with('\t') || l.starts_with('#') {
            end += 1;
        } else {
            break;
        }
    }
    // Trailing blank and comment lines belong to what follows.
    while end > start + 1 && (lines[end - 1].trim().is_empty() || lines[end - 1].starts_with('#')) {
        end -= 1;
    }
    let mut out = String::new();
    for l in &lines[..start] {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(block);
    for l in &lines[end..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// `s` quoted for a POSIX shell when it needs it; a leading `~/` stays
/// outside the quotes so the shell still expands it.
fn shell_word(s: &str) -> String {
    let plain = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-:+@%=,[]".contains(&b))
    };
    if plain(s) {
        return s.to_string();
    }
    if let Some(rest) = s.strip_prefix("~/") {
        if plain(rest) {
            return s.to_string();
        }
        return format!("~/'{}'", rest.replace('\'', "'\\''"));
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn grant(access: Access, path: &str) -> Grant {
        Grant {
            access,
            path: path.into(),
            programs: BTreeSet::from(["rustc".to_string()]),
            examples: vec![format!("{path}/x").into()],
            covers: 2,
            create: false,
            exec: false,
        }
    }

    fn proposal() -> Proposal {
        Proposal {
            folded: Folded {
                grants: vec![
                    grant(Access::Read, "/home/u/.rustup"),
                    grant(Access::Read, "/p/src"),
                    grant(Access::Write, "/p/target"),
                ],
                kept_out: vec![],
                withheld: vec![],
                outside_view: vec![],
                unneeded_writes: vec![],
                lookups: vec![],
                listings: vec![],
                observed: 5,
            },
            hosts: vec!["pypi.org:443".into()],
            env: vec![],
            secrets: vec![],
            root: "/p".into(),
            home: Some("/home/u".into()),
            unrecorded: 0,
            succeeded: true,
        }
    }

    #[test]
    fn the_block_explains_each_line_and_parses_as_a_manifest() {
        let p = proposal();
        let block = p.manifest_block(None);
        assert!(
            block.contains("- \"~/.rustup\"   # read by rustc: ~/.rustup/x (+1 more)"),
            "{block}"
        );
        assert!(block.contains("- \"src\""));
        assert!(block.contains("network: {allow: [\"pypi.org:443\"]}"));
        let doc = format!("name: t\n{block}");
        let v = crate::manifest::yaml::parse(&doc).unwrap().value;
        assert_eq!(v["permissions"]["fs"]["write"][0], "target");
    }

    #[test]
    fn the_flags_use_the_home_and_quote_what_needs_it() {
        let mut p = proposal();
        p.folded.grants.push(grant(Access::Read, "/home/u/a b"));
        let f = p.sandbox_flags();
        assert!(f.contains(&"--read ~/.rustup".to_string()), "{f:?}");
        assert!(f.contains(&"--read ~/'a b'".to_string()), "{f:?}");
        assert!(f.contains(&"--write target".to_string()), "{f:?}");
        assert!(f.contains(&"--allow-host pypi.org:443".to_string()));
    }

    #[test]
    fn a_flow_style_or_json_manifest_gets_the_proposal_whole() {
        let block =
            "permissions:\n  # read by cat\n  fs: {read: [docs], write: []}\n  network: false\n";
        let json = "{\"name\": \"t\", \"permissions\": {\"network\": true}, \"exec\": {\"command\": {\"entrypoint\": \"cat\"}}}\n";
        let out = rewritten(json, block).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["permissions"]["fs"]["read"][0], "docs");
        assert_eq!(v["permissions"]["network"], false);
        assert_eq!(v["exec"]["command"]["entrypoint"], "cat");
        // Block style: in place, the comment kept.
        let yaml = "name: t\npermissions:\n  network: true\nexec:\n  command: {entrypoint: cat}\n";
        let out = rewritten(yaml, block).unwrap();
        assert!(
            out.contains("# read by cat") && out.starts_with("name: t\n"),
            "{out}"
        );
        // Neither: refused, the file untouched by the caller.
        assert!(rewritten("- a list\n", block).is_err());
    }

    #[test]
    fn the_block_replaces_only_the_permissions_block() {
        let text = "name: t\npermissions:\n  fs: {read: [docs]}\n  # old\n\n# next\nexec:\n  command: [x]\n";
        let out = replace_block(text, "permissions:\n  network: false\n");
        assert_eq!(
            out,
            "name: t\npermissions:\n  network: false\n\n# next\nexec:\n  command: [x]\n"
        );
        let added = replace_block("name: t\n", "permissions: {}\n");
        assert_eq!(added, "name: t\npermissions: {}\n");
    }

    #[test]
    fn the_diff_names_what_is_added_and_what_went_unused() {
        let p = proposal();
        let d = p.diff(&["src/".into(), "docs".into()], &[], "false");
        assert!(d.contains("+ fs.read: ~/.rustup"), "{d}");
        assert!(d.contains("- fs.read: docs"), "{d}");
        assert!(!d.contains("fs.read: src"), "{d}");
        assert!(d.contains("+ fs.write: target"));
        assert!(d.contains("+ network: {allow"));
    }
}
