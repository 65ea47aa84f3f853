//! A call's private `HOME` (and `TMPDIR`): a tmpfs in the jail's own
//! tree, or, without a tree (the namespace-free jail), a directory on the
//! host made for the call, holding the spec's home files, and removed
//! after it (those of supervisors killed before their clean-up are swept
//! by the next one).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::spec::Spec;
use super::JailError;

/// Writes the spec's files into a host home directory (mode 0644).
pub(super) fn write_home_files(spec: &Spec, home: &Path) -> Result<(), JailError> {
    use std::os::unix::fs::OpenOptionsExt;
    for f in &spec.home_files {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(home.join(&f.name))
            .and_then(|mut file| {
                std::io::Write::write_all(&mut file, &f.contents)?;
                file.set_permissions(std::fs::Permissions::from_mode(0o644))
            })
            .map_err(|source| JailError::Prepare {
                what: "writing a file into the private home directory",
                source,
            })?;
    }
    Ok(())
}

/// The prefix of a host home directory's name; the supervisor's pid
/// follows, so that [`sweep_host_homes`] knows whose it is.
pub(super) const HOST_HOME_PREFIX: &str = "glovebox-home-";

/// A private home directory on the host, for a jail without a mount tree
/// (the namespace-free jail): `$TMPDIR/glovebox-home-<pid>-<random>`,
/// mode 0700, removed when dropped. The first one of a process first
/// removes those that supervisors killed before their cleanup left.
pub(super) fn host_home() -> Result<tempfile::TempDir, JailError> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_host_homes(&std::env::temp_dir()));
    tempfile::Builder::new()
        .prefix(&format!("{HOST_HOME_PREFIX}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|source| JailError::Prepare {
            what: "creating the private home directory",
            source,
        })
}

/// Removes the host home directories in `dir` that belong to this user and
/// to a supervisor that is gone (killed with SIGKILL: its calls ended with
/// it, `PDEATHSIG`). Links are never followed.
pub(crate) fn sweep_host_homes(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let euid = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(HOST_HOME_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != euid || pid == std::process::id() {
            continue;
        }
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where a call's private `HOME` (and `TMPDIR`) is.
pub(super) enum Home {
    /// A tmpfs the child mounts in its own tree at [`super::tree::HOME`]:
    /// nothing on the host to make, remove or leak.
    Jail,
    /// A directory on the host (no mount tree), removed after the call.
    Host(tempfile::TempDir),
}

impl Home {
    pub(super) fn path(&self) -> &Path {
        match self {
            Home::Jail => Path::new(super::tree::HOME),
            Home::Host(dir) => dir.path(),
        }
    }
}
