//! Sandbox profiles: the baseline paths a runtime needs (files under
//! `sandbox-profiles/`, embedded at build time).

use std::path::PathBuf;

use super::fs::FsAccess;

/// A profile's name and its rules text.
const PROFILES: &[(&str, &str)] = &[
    (
        "system",
        include_str!("../../sandbox-profiles/system.rules"),
    ),
    (
        "network",
        include_str!("../../sandbox-profiles/network.rules"),
    ),
];

/// Errors in a profile file.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// No profile of that name.
    #[error("unknown sandbox profile {name:?}")]
    Unknown { name: String },
    /// A rule line that does not parse.
    #[error("sandbox profile {name}: line {line}: {message}")]
    Syntax {
        name: String,
        line: usize,
        message: String,
    },
}

/// Parses one profile into `out`.
pub fn add(name: &str, out: &mut FsAccess) -> Result<(), ProfileError> {
    let text = PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| ProfileError::Unknown {
            name: name.to_string(),
        })?;
    parse(name, text, out)
}

fn parse(name: &str, text: &str, out: &mut FsAccess) -> Result<(), ProfileError> {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: &str| ProfileError::Syntax {
            name: name.to_string(),
            line: i + 1,
            message: message.to_string(),
        };
        let (access, path) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| err("expected `ACCESS PATH`"))?;
        let path = PathBuf::from(path.trim());
        if !path.is_absolute() {
            return Err(err("profile paths must be absolute"));
        }
        match access {
            "ro" => out.read_only.push(path),
            "rx" => out.exec.push(path),
            "rw" => out.write.push(path),
            _ => return Err(err("access must be ro, rx or rw")),
        }
    }
    Ok(())
}

/// The baseline for a call: `system`, plus `network` when it has network.
pub fn baseline(network: bool) -> Result<FsAccess, ProfileError> {
    let mut out = FsAccess::default();
    add("system", &mut out)?;
    if network {
        add("network", &mut out)?;
    }
    Ok(out)
}

/// Names of the profiles that apply to a call.
pub fn names(network: bool) -> &'static [&'static str] {
    if network {
        &["system", "network"]
    } else {
        &["system"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse() {
        for (name, _) in PROFILES {
            let mut a = FsAccess::default();
            add(name, &mut a).unwrap();
        }
        let b = baseline(false).unwrap();
        assert!(b.exec.contains(&PathBuf::from("/usr")));
        assert!(!b.read_only.iter().any(|p| p.starts_with("/etc/passwd")));
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let mut a = FsAccess::default();
        let e = parse("t", "ro /a\nzz /b\n", &mut a).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(parse("t", "ro relative", &mut a).is_err());
    }
}
