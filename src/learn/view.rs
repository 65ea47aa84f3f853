//! The learning run's view: what a tool being learned may read (invariant
//! 15: learning is a jail like any other).
//!
//! An allow-list, not the whole filesystem:
//!
//! - the jail's baseline (the system's programs and libraries: `/usr`,
//!   `/bin`, `/lib`, …), which every jail has;
//! - the system directories a tool plausibly reads beyond it: `/etc` and
//!   `/opt`, *only what every user of the machine may read* (a file
//!   without the others' read bit — `/etc/shadow`, sudo's rules, host
//!   keys — is left out, so root learns no more than `nobody` could see),
//!   and `/nix/store`, `/snap`;
//! - below the user's home, the places toolchains and caches live
//!   ([`HOME_TOOLCHAINS`]: `~/.cargo`, `~/.rustup`, `~/.pyenv`, `~/.nvm`,
//!   `~/.cache`, `~/.m2`, …) — never the home itself;
//! - what the person names: `--read DIR`, the tool's declared grants, the
//!   directories the variables they pass name (`PATH`'s, `RUSTUP_HOME`);
//! - the original project, read-only (a venv's scripts name their
//!   interpreter by its absolute path), less the key files left out of
//!   its copy; the throw-away copy itself is writable (not this
//!   module's).
//!
//! On top of it a deny-list ([`super::sensitive`]): the places secrets
//! live, other users' homes, glovebox's own state, configuration, keys
//! and approvals are carved out of every grant above — a directory that
//! holds one is granted as its entries, recursively, less that one. A
//! place the person names itself (`--read ~/.aws`) is visible as named;
//! glovebox's own places never are (the jail refuses them by identity as
//! well).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::sensitive::Places;

/// Below a home directory: where toolchains, package managers and caches
/// keep what a build or a test run reads.
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".rbenv",
    ".nvm",
    ".nodenv",
    ".goenv",
    ".jenv",
    ".tfenv",
    ".npm",
    ".node-gyp",
    ".yarn",
    ".pnpm-store",
    ".bun",
    ".deno",
    ".volta",
    ".cache",
    ".local/bin",
    ".local/lib",
    ".local/pipx",
    ".local/share/pipx",
    ".local/share/virtualenvs",
    ".local/share/pnpm",
    ".local/share/uv",
    ".local/share/mise",
    ".local/share/fnm",
    ".local/share/pypoetry",
    ".rye",
    ".pixi",
    ".conda",
    "miniconda3",
    "anaconda3",
    "miniforge3",
    "mambaforge",
    "go",
    "sdk",
    ".m2",
    ".gradle",
    ".ivy2",
    ".sbt",
    ".jdks",
    ".sdkman",
    ".asdf",
    ".dotnet",
    ".nuget/packages",
    ".ghcup",
    ".cabal",
    ".stack",
    ".opam",
    ".elan",
    ".nimble",
    ".pub-cache",
    ".gem",
    ".bundle",
    ".julia",
    ".juliaup",
    ".swiftpm",
    ".mix",
    ".hex",
    ".konan",
    ".platformio",
    ".luarocks",
    "perl5",
    ".cpanm",
    ".wasmtime",
    ".foundry",
];

/// System directories walked: only what every user may read is in the
/// view (with the depth walked: below it a directory is taken whole).
const WALKED: &[(&str, u32)] = &[("/etc", 16), ("/opt", 2)];

/// System directories in the view whole (read-only stores of packages).
const WHOLE: &[&str] = &["/nix/store", "/nix/var/nix/profiles", "/snap"];

/// The most entries one walk looks at; past it, what is left unwalked is
/// left out of the view (fail closed: a tool that needs it is refused and
/// the proposal says to learn again with `--read`).
const WALK_BUDGET: u64 = 50_000;

/// What the view is built from.
#[derive(Debug)]
pub struct Ask<'a> {
    /// The machine's and user's places ([`Places::current`]).
    pub places: &'a Places,
    /// Named by the person (`--read`, the tool's declared grants): in
    /// the view as named.
    pub named: &'a [PathBuf],
    /// Named by the values of the variables given (`PATH`'s directories,
    /// `RUSTUP_HOME`): in the view, secret places carved out.
    pub env_dirs: &'a [PathBuf],
    /// Places left out besides the lists (a key file found in the
    /// project while copying it).
    pub also_hidden: &'a [PathBuf],
    /// The original project, read-only (a venv's scripts name its
    /// interpreter by the original's absolute path), less `also_hidden`.
    pub project: Option<&'a Path>,
}

impl<'a> Ask<'a> {
    /// The view of `places` alone (nothing named).
    pub fn of(places: &'a Places) -> Ask<'a> {
        Ask {
            places,
            named: &[],
            env_dirs: &[],
            also_hidden: &[],
            project: None,
        }
    }
}

/// The learning run's read grants and what was left out of them.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The read grants (the jail adds its baseline).
    pub read: Vec<PathBuf>,
    /// The places left out (existing ones): never readable, never
    /// proposed.
    pub hidden: Vec<PathBuf>,
}

impl View {
    /// Whether a read of `path` was possible in this view.
    pub fn covers(&self, path: &Path) -> bool {
        self.read.iter().any(|r| path.starts_with(r))
            && !self.hidden.iter().any(|h| path.starts_with(h))
    }
}

/// Builds the view for `ask`.
pub fn build(ask: &Ask<'_>) -> View {
    let mut hidden = ask.places.existing();
    hidden.extend(ask.also_hidden.iter().cloned());
    let mut found = Vec::new();
    let mut read = Vec::new();
    for (dir, depth) in WALKED {
        let mut budget = WALK_BUDGET;
        let mut w = Walk {
            hidden: &hidden,
            found: &mut found,
            out: &mut read,
            budget: &mut budget,
            max_depth: *depth,
        };
        w.entry(Path::new(dir), 0);
    }
    hidden.extend(found);
    for p in WHOLE.iter().map(Path::new).filter(|p| p.exists()) {
        around(p, &hidden, &mut read, 0);
    }
    for h in &ask.places.homes {
        for t in HOME_TOOLCHAINS {
            let p = h.join(t);
            if std::fs::symlink_metadata(&p).is_ok() {
                around(&p, &hidden, &mut read, 0);
            }
        }
    }
    for d in ask.env_dirs {
        if std::fs::symlink_metadata(d).is_err()
            || d == Path::new("/")
            || ask.places.homes.iter().any(|h| h.starts_with(d))
        {
            continue;
        }
        around(d, &hidden, &mut read, 0);
    }
    if let Some(p) = ask.project {
        around(p, &hidden, &mut read, 0);
    }
    for n in ask.named {
        // What the person names is visible as named: a secret place it
        // lies in is not carved out of it (glovebox's own always is).
        let keep: Vec<PathBuf> = hidden
            .iter()
            .filter(|h| !n.starts_with(h) || ask.places.glovebox.iter().any(|g| h.starts_with(g)))
            .cloned()
            .collect();
        around(n, &keep, &mut read, 0);
    }
    // What the person named is not hidden (glovebox's own still is).
    hidden.retain(|h| {
        !ask.named.iter().any(|n| n.starts_with(h))
            || ask.places.glovebox.iter().any(|g| h.starts_with(g))
    });
    read.sort();
    read.dedup();
    hidden.sort();
    hidden.dedup();
    View { read, hidden }
}

/// One walk of a system directory: what every user may read, less the
/// hidden places; key files left out too.
struct Walk<'a> {
    hidden: &'a [PathBuf],
    /// What the walk left out (files not every user may read, key files).
    found: &'a mut Vec<PathBuf>,
    out: &'a mut Vec<PathBuf>,
    budget: &'a mut u64,
    max_depth: u32,
}

impl Walk<'_> {
    /// Grants what of `p` may be granted; true when that is all of it
    /// (the caller may then grant its parent whole instead).
    fn entry(&mut self, p: &Path, depth: u32) -> bool {
        let mut sub = Vec::new();
        let clean = self.collect(p, depth, &mut sub);
        if clean {
            self.out.push(p.to_path_buf());
        } else {
            self.out.extend(sub);
        }
        clean
    }

    /// Fills `sub` with the grants for `p`'s parts; true when all of `p`
    /// may be granted (then `sub` is not used).
    fn collect(&mut self, p: &Path, depth: u32, sub: &mut Vec<PathBuf>) -> bool {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return false;
        };
        if self.hidden.iter().any(|h| p.starts_with(h)) {
            return false;
        }
        if meta.file_type().is_symlink() {
            // A link is granted with its target: only when every user may
            // read that, and no hidden place is in it or holds it. One
            // into the jail's own `/proc`, `/sys`, `/dev` (`/etc/mtab`)
            // is not granted: the jail makes those itself.
            let real = crate::manifest::discover::resolved(p);
            if ["/proc", "/sys", "/dev"]
                .iter()
                .any(|d| real.starts_with(d))
            {
                return false;
            }
            let ok = std::fs::metadata(p).is_ok_and(|t| everyone_reads(&t))
                && !self
                    .hidden
                    .iter()
                    .any(|h| h.starts_with(&real) || real.starts_with(h));
            if !ok {
                self.found.push(p.to_path_buf());
            }
            return ok;
        }
        if !everyone_reads(&meta) {
            self.found.push(p.to_path_buf());
            return false;
        }
        if !meta.is_dir() {
            if crate::signing::is_key_file(p) {
                self.found.push(p.to_path_buf());
                return false;
            }
            return true;
        }
        if depth >= self.max_depth {
            return !self.hidden.iter().any(|h| h.starts_with(p));
        }
        let Ok(entries) = std::fs::read_dir(p) else {
            return false;
        };
        let mut names: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        names.sort();
        let mut clean = true;
        for e in names {
            if *self.budget == 0 {
                // Past the bound: the rest is left out (fail closed).
                clean = false;
                break;
            }
            *self.budget -= 1;
            let mut below = Vec::new();
            if self.collect(&e, depth + 1, &mut below) {
                sub.push(e);
            } else {
                clean = false;
                sub.extend(below);
            }
        }
        clean
    }
}

/// Every user may read it: the others' read bit (and search, for a
/// directory).
fn everyone_reads(m: &std::fs::Metadata) -> bool {
    let mode = m.permissions().mode();
    if m.is_dir() {
        mode & 0o005 == 0o005
    } else {
        mode & 0o004 != 0
    }
}

/// Grants `p`, or, when it holds a hidden path, each of its entries
/// (recursively); a hidden path itself, and a link that leads to or into
/// one, is left out.
pub fn around(p: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>, depth: u32) {
    let real = crate::manifest::discover::resolved(p);
    if hidden
        .iter()
        .any(|h| real.starts_with(h) || p.starts_with(h))
    {
        return;
    }
    let holds = hidden
        .iter()
        .any(|h| h.starts_with(p) || h.starts_with(&real));
    if !holds {
        out.push(p.to_path_buf());
        return;
    }
    // A link to a directory holding a hidden path: left out (its target
    // is reached by its own spelling).
    let is_link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    if is_link || depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(p) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    names.sort();
    for e in names {
        around(&e, hidden, out, depth + 1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn the_view_holds_no_hidden_path_and_keeps_its_siblings() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("home/.local/state/glovebox");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(d.path().join("home/.cargo")).unwrap();
        std::fs::create_dir_all(d.path().join("home/.local/share")).unwrap();
        let mut out = Vec::new();
        around(
            &d.path().join("home"),
            std::slice::from_ref(&state),
            &mut out,
            0,
        );
        assert!(
            out.iter()
                .all(|p| !state.starts_with(p) && !p.starts_with(&state)),
            "{out:?}"
        );
        assert!(out.contains(&d.path().join("home/.cargo")));
        assert!(out.contains(&d.path().join("home/.local/share")));
    }

    #[test]
    fn a_walk_keeps_what_everyone_reads_and_leaves_the_rest_out() {
        let d = tempfile::tempdir().unwrap();
        let etc = d.path().join("etc");
        std::fs::create_dir_all(etc.join("ssl/private")).unwrap();
        std::fs::create_dir_all(etc.join("apt")).unwrap();
        std::fs::write(etc.join("apt/sources.list"), "deb x\n").unwrap();
        std::fs::write(etc.join("shadow"), "root:$6$x\n").unwrap();
        std::fs::write(etc.join("ssl/cert.pem"), "cert\n").unwrap();
        std::fs::write(etc.join("ssl/private/key.pem"), "key\n").unwrap();
        std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n").unwrap();
        crate::signing::generate(&etc.join("approve.key")).unwrap();
        for p in [&etc, &etc.join("ssl"), &etc.join("apt")] {
            mode(p, 0o755);
        }
        mode(&etc.join("apt/sources.list"), 0o644);
        mode(&etc.join("ssl/cert.pem"), 0o644);
        mode(&etc.join("hosts"), 0o644);
        mode(&etc.join("shadow"), 0o640);
        mode(&etc.join("ssl/private"), 0o700);
        // A key file everyone may read is still left out (by its text).
        mode(&etc.join("approve.key"), 0o644);
        let (mut found, mut out, mut budget) = (Vec::new(), Vec::new(), 1000);
        let mut w = Walk {
            hidden: &[],
            found: &mut found,
            out: &mut out,
            budget: &mut budget,
            max_depth: 16,
        };
        assert!(!w.entry(&etc, 0));
        let view = View {
            read: out.clone(),
            hidden: found.clone(),
        };
        for secret in ["shadow", "ssl/private/key.pem", "approve.key"] {
            assert!(!view.covers(&etc.join(secret)), "{secret}: {out:?}");
            for g in &out {
                assert!(!etc.join(secret).starts_with(g), "{g:?} holds {secret}");
            }
        }
        for open in [
            "hosts",
            "ssl/cert.pem",
            "apt/sources.list",
            "approve.key.pub",
        ] {
            assert!(view.covers(&etc.join(open)), "{open}: {out:?}");
        }
        // A clean directory is one grant, not its files.
        assert!(out.contains(&etc.join("apt")), "{out:?}");
        assert!(found.contains(&etc.join("shadow")), "{found:?}");
    }

    #[test]
    fn past_its_bound_a_walk_leaves_the_rest_out() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(d.path().join(format!("f{i}")), "x").unwrap();
            mode(&d.path().join(format!("f{i}")), 0o644);
        }
        mode(d.path(), 0o755);
        let (mut found, mut out, mut budget) = (Vec::new(), Vec::new(), 4);
        let mut w = Walk {
            hidden: &[],
            found: &mut found,
            out: &mut out,
            budget: &mut budget,
            max_depth: 16,
        };
        assert!(!w.entry(d.path(), 0));
        assert_eq!(out.len(), 4, "{out:?}");
    }

    #[test]
    fn the_home_shows_its_toolchains_only_and_named_places_as_named() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        for p in [
            ".cargo/bin",
            ".ssh",
            ".config/gcloud",
            "notes",
            ".cache/pip",
        ] {
            std::fs::create_dir_all(home.join(p)).unwrap();
        }
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        let places = Places::new(vec![home.clone()], vec![], vec![]);
        let v = build(&Ask::of(&places));
        assert!(v.covers(&home.join(".cargo/bin/cargo")), "{:?}", v.read);
        assert!(v.covers(&home.join(".cache/pip/x")));
        for no in [
            ".ssh/id_rsa",
            ".config/gcloud/x",
            "notes/a",
            ".cargo/credentials.toml",
        ] {
            assert!(!v.covers(&home.join(no)), "{no}: {:?}", v.read);
        }
        // --read ~: the home, less its secret places.
        let named = [home.clone()];
        let v = build(&Ask {
            named: &named,
            ..Ask::of(&places)
        });
        assert!(v.covers(&home.join("notes/a")));
        assert!(!v.covers(&home.join(".ssh/id_rsa")), "{:?}", v.read);
        // --read ~/.ssh: as named.
        let named = [home.join(".ssh")];
        let v = build(&Ask {
            named: &named,
            ..Ask::of(&places)
        });
        assert!(v.covers(&home.join(".ssh/id_rsa")));
        // glovebox's own: never, even named.
        let state = home.join("state");
        std::fs::create_dir_all(&state).unwrap();
        let places = Places::new(vec![home.clone()], vec![], vec![state.clone()]);
        let named = [home.clone()];
        let v = build(&Ask {
            named: &named,
            ..Ask::of(&places)
        });
        assert!(!v.covers(&state.join("audit.key")), "{:?}", v.read);
        let named = [state.clone()];
        let v = build(&Ask {
            named: &named,
            ..Ask::of(&places)
        });
        assert!(!v.covers(&state.join("audit.key")), "{:?}", v.read);
    }

    #[test]
    fn the_real_view_holds_no_secret_place() {
        let places = Places::current();
        let v = build(&Ask::of(&places));
        for g in &v.read {
            for h in &v.hidden {
                assert!(!h.starts_with(g), "{g:?} holds {h:?}");
            }
        }
        for p in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"] {
            assert!(!v.covers(Path::new(p)), "{p}");
        }
    }
}
