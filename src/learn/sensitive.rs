//! The places a learning run never sees and a proposal never grants on
//! its own (invariant 15): where secrets live, what people run later, and
//! glovebox's own state.
//!
//! One list, used twice: [`super::view`] leaves every secret place out of
//! the learning run's view, and [`super::fold`] withholds every grant on
//! one — a read of a secret place, a write to a place something runs
//! later — unless the person named it (`--read`, a declared grant,
//! `learn --include`).
//!
//! Pure: paths in, reasons out (the homes and glovebox's own places are
//! gathered once by [`Places::current`]).

use std::path::{Path, PathBuf};

/// Where secrets live below a home directory: credentials, keys, keyrings,
/// browser profiles, shell histories and the agents' own configuration.
/// A learning run never sees them (not even under `--read ~`) and a
/// proposal never grants them.
pub const HOME_SECRETS: &[&str] = &[
    // keys and keyrings
    ".ssh",
    ".gnupg",
    ".pki",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".config/op",
    ".vault-token",
    // cloud and cluster credentials
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".oci",
    ".docker",
    ".config/doctl",
    ".config/hcloud",
    ".config/rclone",
    ".s3cfg",
    ".boto",
    ".databrickscfg",
    ".terraform.d",
    ".fly",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".config/netlify",
    ".config/configstore",
    ".cache/gcloud",
    // registry and package credentials
    ".netrc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".git-credentials",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".bundle/config",
    ".cabal/config",
    ".pub-cache/credentials.json",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".nuget/NuGet",
    ".config/NuGet",
    ".config/pypoetry/auth.toml",
    ".local/share/pypoetry/auth.toml",
    ".huggingface",
    ".cache/huggingface/token",
    ".dotnet/corefx",
    ".pgpass",
    ".my.cnf",
    // browser profiles and mail
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".cache/google-chrome",
    ".cache/chromium",
    ".cache/mozilla",
    // what was typed
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".lesshst",
    ".local/share/fish/fish_history",
    // the agents' own configuration (and their keys)
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".cursor",
    ".continue",
    ".aider.conf.yml",
    ".config/claude",
    ".config/github-copilot",
    ".config/gemini",
    ".config/openai",
    // glovebox's own (its state and configuration, wherever they are,
    // are added by `Places::current`)
    ".config/glovebox",
    ".local/state/glovebox",
];

/// Directory names that hold keys wherever they are (an `authorized_keys`
/// planted in any of them lets someone in).
pub const KEY_DIRS: &[&str] = &[".ssh", ".gnupg"];

/// Files of the system where secrets live (the password hashes, sudo's
/// rules, host keys, private TLS keys, cluster credentials). The learning
/// view also leaves out every file of `/etc` that not every user may read
/// ([`super::view`]), which covers these where the modes are the usual
/// ones; this list holds where they are not.
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/krb5.keytab",
    "/etc/ipsec.secrets",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
    "/etc/letsencrypt",
    "/etc/libvirt/secrets",
    "/etc/kubernetes",
    "/etc/rancher",
    "/etc/gitlab-runner",
    "/etc/docker/key.json",
    "/var/lib/kubelet",
    "/var/lib/docker",
    "/var/lib/sss",
    "/var/spool/cron",
];

/// Below a home directory: what a person's shell, desktop, editor or git
/// runs later. A write there is never proposed unless named.
pub const HOME_RUNS_LATER: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".kshrc",
    ".config/fish",
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".xsessionrc",
    ".pam_environment",
    ".config/environment.d",
    ".config/autostart",
    ".config/systemd",
    ".local/share/systemd",
    ".local/share/applications",
    ".gitconfig",
    ".config/git",
    ".vimrc",
    ".vim",
    ".config/nvim",
    ".emacs",
    ".emacs.d",
    ".config/Code/User",
    ".config/direnv",
    ".direnvrc",
    ".inputrc",
    ".tmux.conf",
    ".config/tmux",
    ".local/bin",
    "bin",
    ".cargo/bin",
    ".cargo/config.toml",
    ".cargo/config",
];

/// Outside the home: what the system runs later (its configuration,
/// cron, systemd units, start-up scripts).
pub const SYSTEM_RUNS_LATER: &[&str] = &[
    "/etc",
    "/var/spool/cron",
    "/var/spool/anacron",
    "/usr/lib/systemd",
    "/lib/systemd",
    "/run/systemd",
    "/usr/local/bin",
    "/usr/local/sbin",
];

/// Names below a project (or working directory) that a person or their
/// tools run later: git hooks and configuration, hook managers, direnv,
/// editor tasks and dev containers, pre-commit, git's filters. A write to
/// one is never proposed unless named (the jail's own protection of them
/// is `crate::surface`'s; the repository's `core.hooksPath` is added by
/// [`run_surface`]).
pub const PROJECT_RUNS_LATER: &[&str] = &[
    ".git",
    ".glee",
    "tools.json",
    ".envrc",
    ".husky",
    ".lefthook",
    ".lefthook-local",
    "lefthook.yml",
    "lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".pre-commit-config.yaml",
    ".gitattributes",
];

/// Why a grant is withheld.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "what")]
pub enum Why {
    /// glovebox's own state, configuration, keys or approvals.
    Glovebox,
    /// A place secrets live (what kind).
    Secret(String),
    /// Another user's home directory.
    OtherHome,
    /// Something a person or the system runs later (what).
    RunsLater(String),
    /// A write outside the project (the learning run wrote only to its
    /// copy, and failed).
    Outside,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Glovebox => {
                f.write_str("glovebox's own state, keys or approvals: no jail may read it")
            }
            Why::Secret(what) => write!(f, "a place secrets live ({what})"),
            Why::OtherHome => f.write_str("another user's home directory"),
            Why::RunsLater(what) => write!(f, "{what} runs it later"),
            Why::Outside => f.write_str(
                "a write outside the project, refused while learning, and the run failed",
            ),
        }
    }
}

/// The places of this machine and user: the homes, the other users'
/// homes, glovebox's own places.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// The user's home directories (the passwd entry's and `$HOME`, with
    /// links resolved too).
    pub homes: Vec<PathBuf>,
    /// Other users' home directories.
    pub other_homes: Vec<PathBuf>,
    /// glovebox's state and configuration directories, the keys it made
    /// or used ([`crate::state::known_keys`]) and the signed-approvals
    /// directory in use.
    pub glovebox: Vec<PathBuf>,
}

impl Places {
    /// The places of the user running glovebox now.
    pub fn current() -> Places {
        let mut homes: Vec<PathBuf> = crate::state::home().into_iter().collect();
        if let Some(h) = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h.is_dir() && *h != Path::new("/"))
        {
            homes.push(h);
        }
        let mut glovebox: Vec<PathBuf> = crate::state::dir().into_iter().collect();
        if let Some(dir) =
            crate::state::user_config_file().and_then(|f| f.parent().map(Path::to_path_buf))
        {
            glovebox.push(dir);
        }
        glovebox.extend(crate::state::known_keys());
        if let Some(s) = crate::approval::signed::source() {
            glovebox.push(s.dir.clone());
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let mut others = user_homes(&passwd);
        if let Ok(entries) = std::fs::read_dir("/home") {
            others.extend(entries.filter_map(Result::ok).map(|e| e.path()));
        }
        Places::new(homes, others, glovebox)
    }

    /// Places from the lists given (both spellings of each: as given and
    /// with links resolved); `others` less the user's own homes.
    pub fn new(homes: Vec<PathBuf>, others: Vec<PathBuf>, glovebox: Vec<PathBuf>) -> Places {
        let both = |v: Vec<PathBuf>| {
            let mut out: Vec<PathBuf> = v
                .iter()
                .flat_map(|p| [p.clone(), crate::manifest::discover::resolved(p)])
                .collect();
            out.sort();
            out.dedup();
            out
        };
        let homes = both(homes);
        let other_homes = both(others)
            .into_iter()
            .filter(|o| !homes.iter().any(|h| h.starts_with(o) || o.starts_with(h)))
            .filter(|o| *o != Path::new("/"))
            .collect();
        Places {
            homes,
            other_homes,
            glovebox: both(glovebox),
        }
    }

    /// Why `path` must never be read in a learning run nor proposed:
    /// glovebox's own, a secret place, another user's home.
    pub fn secret(&self, path: &Path) -> Option<Why> {
        if self.glovebox.iter().any(|g| path.starts_with(g)) {
            return Some(Why::Glovebox);
        }
        for h in &self.homes {
            if let Ok(rel) = path.strip_prefix(h) {
                if let Some(s) = HOME_SECRETS.iter().find(|s| rel.starts_with(s)) {
                    return Some(Why::Secret(format!("~/{s}")));
                }
            }
        }
        // A key directory wherever it is (another account's, a copy).
        if let Some(c) = path
            .components()
            .find(|c| KEY_DIRS.iter().any(|k| c.as_os_str() == *k))
        {
            return Some(Why::Secret(format!(
                "keys ({})",
                c.as_os_str().to_string_lossy()
            )));
        }
        if let Some(s) = SYSTEM_SECRETS.iter().find(|s| path.starts_with(s)) {
            return Some(Why::Secret((*s).to_string()));
        }
        if is_system_key(path) {
            return Some(Why::Secret("a host's private key".into()));
        }
        if self.other_homes.iter().any(|o| path.starts_with(o)) {
            return Some(Why::OtherHome);
        }
        None
    }

    /// Why a write to `path` must not be proposed (`root`: the project):
    /// a secret place, or something run later — a shell start-up file,
    /// autostart, cron, a systemd unit, the system's configuration, a
    /// project's hooks, `.envrc`, editor tasks ([`run_surface`]).
    pub fn runs_later(&self, path: &Path, root: &Path) -> Option<Why> {
        if let Some(w) = self.secret(path) {
            return Some(w);
        }
        if let Ok(rel) = path.strip_prefix(root) {
            return run_surface(root, rel).map(Why::RunsLater);
        }
        for h in &self.homes {
            if let Ok(rel) = path.strip_prefix(h) {
                if let Some(s) = HOME_RUNS_LATER.iter().find(|s| rel.starts_with(s)) {
                    return Some(Why::RunsLater(format!("whatever reads ~/{s}")));
                }
            }
        }
        SYSTEM_RUNS_LATER
            .iter()
            .find(|s| path.starts_with(s))
            .map(|s| Why::RunsLater(format!("the system (it reads {s})")))
    }

    /// A grant of `path` would hold a secret place that exists (one of
    /// the lists, or one of `hidden`, the concrete places the view left
    /// out): the grant must be narrower.
    pub fn holds_secret(&self, path: &Path, hidden: &[PathBuf]) -> bool {
        let below = |p: &Path| p.starts_with(path) && p != path;
        if hidden.iter().any(|h| h.starts_with(path)) {
            return true;
        }
        if self
            .glovebox
            .iter()
            .chain(&self.other_homes)
            .any(|g| g.starts_with(path))
        {
            return true;
        }
        let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        if self.homes.iter().any(|h| {
            HOME_SECRETS
                .iter()
                .map(|s| h.join(s))
                .any(|p| below(&p) && exists(&p))
        }) {
            return true;
        }
        SYSTEM_SECRETS
            .iter()
            .map(Path::new)
            .any(|p| below(p) && exists(p))
    }

    /// The secret places that exist on this machine: what the view must
    /// leave out (both spellings).
    pub fn existing(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.glovebox.clone();
        out.extend(self.other_homes.iter().cloned());
        for h in &self.homes {
            out.extend(HOME_SECRETS.iter().map(|s| h.join(s)));
        }
        out.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
        out.retain(|p| std::fs::symlink_metadata(p).is_ok());
        let resolved: Vec<PathBuf> = out
            .iter()
            .map(|p| crate::manifest::discover::resolved(p))
            .collect();
        out.extend(resolved);
        out.sort();
        out.dedup();
        out
    }
}

/// A host's private key by its name: `/etc/ssh/ssh_host_*_key`.
fn is_system_key(path: &Path) -> bool {
    path.starts_with("/etc/ssh")
        && path.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("ssh_host_") && n.ends_with("_key")
        })
}

/// The home directories of `/etc/passwd`'s people: root's and those of
/// uid 1000 and up (system accounts' "homes" are `/bin`, `/nonexistent`,
/// `/var/www`: not a person's).
pub fn user_homes(passwd: &str) -> Vec<PathBuf> {
    passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let uid: u32 = f.get(2)?.parse().ok()?;
            let home = f.get(5)?;
            let person = uid == 0 || (1000..60000).contains(&uid);
            (person && home.starts_with('/') && *home != "/").then(|| PathBuf::from(home))
        })
        .collect()
}

/// The name below `root` that `rel` runs later through, for a person:
/// one of [`PROJECT_RUNS_LATER`], or the directory the repository's
/// `core.hooksPath` names.
pub fn run_surface(root: &Path, rel: &Path) -> Option<String> {
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    if PROJECT_RUNS_LATER.contains(&first.as_str()) {
        return Some(format!(
            "git, an editor or a hook manager (it reads {first})"
        ));
    }
    let hooks = hooks_path(root)?;
    rel.starts_with(&hooks)
        .then(|| format!("git (core.hooksPath names {})", hooks.display()))
}

/// The repository's `core.hooksPath` below `root`, from `.git/config`
/// (relative to the root; `None` when unset or outside it).
pub fn hooks_path(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join(".git/config")).ok()?;
    let value = hooks_path_in(&text)?;
    let p = Path::new(&value);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    let clean = crate::jail::hold::clean(&abs)?;
    clean
        .strip_prefix(root)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// `core.hooksPath`'s value in the git config text `text` (the last one
/// set; sections and keys are case-insensitive, as git reads them).
fn hooks_path_in(text: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            let name = l
                .trim_start_matches('[')
                .split([']', ' ', '"'])
                .next()
                .unwrap_or("");
            in_core = name.eq_ignore_ascii_case("core");
            continue;
        }
        if !in_core {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            if k.trim().eq_ignore_ascii_case("hookspath") {
                let v = v.trim();
                let v = v.split([';', '#']).next().unwrap_or("").trim();
                found = Some(v.trim_matches('"').to_string());
            }
        }
    }
    found.filter(|v| !v.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn places() -> Places {
        Places {
            homes: vec!["/home/u".into()],
            other_homes: vec!["/home/v".into(), "/root".into()],
            glovebox: vec!["/home/u/.local/state/glovebox".into(), "/keys/a.key".into()],
        }
    }

    #[test]
    fn secret_places_are_named_and_toolchains_are_not() {
        let p = places();
        for s in [
            "/home/u/.ssh/id_ed25519",
            "/home/u/.aws/credentials",
            "/home/u/.docker/config.json",
            "/home/u/.cargo/credentials.toml",
            "/home/u/.netrc",
            "/home/u/.claude.json",
            "/etc/shadow",
            "/etc/ssh/ssh_host_ed25519_key",
            "/tmp/x/.ssh/authorized_keys",
        ] {
            assert!(
                matches!(p.secret(Path::new(s)), Some(Why::Secret(_))),
                "{s}"
            );
        }
        assert_eq!(p.secret(Path::new("/home/v/x")), Some(Why::OtherHome));
        assert_eq!(p.secret(Path::new("/keys/a.key")), Some(Why::Glovebox));
        for s in [
            "/home/u/.cargo/bin/cargo",
            "/home/u/.rustup/toolchains",
            "/etc/ssh/ssh_config",
            "/etc/passwd",
            "/usr/bin/git",
        ] {
            assert_eq!(p.secret(Path::new(s)), None, "{s}");
        }
    }

    #[test]
    fn writes_that_run_later_are_named() {
        let p = places();
        let root = Path::new("/p");
        for s in [
            "/home/u/.bashrc",
            "/home/u/.config/autostart/x.desktop",
            "/home/u/.config/systemd/user/x.service",
            "/etc/cron.d/x",
            "/p/.envrc",
            "/p/.husky/pre-commit",
            "/p/.vscode/tasks.json",
            "/p/.git/hooks/pre-commit",
            "/home/u/.ssh/authorized_keys",
        ] {
            assert!(p.runs_later(Path::new(s), root).is_some(), "{s}");
        }
        for s in ["/p/src/x.rs", "/p/target", "/home/u/.cache/pip/x", "/tmp/x"] {
            assert_eq!(p.runs_later(Path::new(s), root), None, "{s}");
        }
    }

    #[test]
    fn a_grant_holding_a_secret_place_that_exists_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("u");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        let p = Places::new(
            vec![home.clone()],
            vec!["/home/v".into()],
            vec!["/keys/a.key".into()],
        );
        assert!(p.holds_secret(&home, &[]));
        assert!(p.holds_secret(Path::new("/home"), &[]));
        assert!(p.holds_secret(Path::new("/keys"), &[]));
        assert!(!p.holds_secret(&home.join(".cargo"), &[]));
        // Only when it exists: ~/.cargo with a registry token in it.
        std::fs::write(home.join(".cargo/credentials.toml"), "t").unwrap();
        assert!(p.holds_secret(&home.join(".cargo"), &[]));
        assert!(!p.holds_secret(&home.join(".cargo/bin"), &[]));
        assert!(p.holds_secret(Path::new("/opt"), &["/opt/x/secret".into()]));
    }

    #[test]
    fn only_people_s_homes_are_other_homes() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nproxy:x:13:13:proxy:/bin:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nv:x:1001:1001::/home/v:/bin/sh\n";
        assert_eq!(
            user_homes(passwd),
            vec![PathBuf::from("/root"), PathBuf::from("/home/v")]
        );
        let p = Places::new(vec!["/root".into()], user_homes(passwd), vec![]);
        assert_eq!(p.other_homes, vec![PathBuf::from("/home/v")]);
    }

    #[test]
    fn the_hooks_path_is_read_from_the_repository_config() {
        assert_eq!(
            hooks_path_in("[core]\n\tbare = false\n\thooksPath = .husky/_\n"),
            Some(".husky/_".into())
        );
        assert_eq!(
            hooks_path_in("[Core]\nHooksPath = \"ci/hooks\" # x\n[user]\nhooksPath = no\n"),
            Some("ci/hooks".into())
        );
        assert_eq!(hooks_path_in("[user]\nhooksPath = x\n"), None);
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git")).unwrap();
        std::fs::write(
            d.path().join(".git/config"),
            "[core]\nhooksPath = ci/hooks\n",
        )
        .unwrap();
        assert!(run_surface(d.path(), Path::new("ci/hooks/pre-commit")).is_some());
        assert!(run_surface(d.path(), Path::new("ci/other")).is_none());
    }
}
