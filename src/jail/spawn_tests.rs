#![allow(clippy::unwrap_used)]

use super::*;
use crate::jail::child::{below_hard, HOME, OLD_ROOT, OLD_ROOT_FDS, OLD_ROOT_NAME, STAGE};
use crate::jail::home::{sweep_host_homes, HOST_HOME_PREFIX};
use crate::jail::tree::{self, Op};
use std::path::Path;

#[test]
fn a_lower_hard_limit_binds_instead_of_failing() {
    assert_eq!(below_hard(4096, 1024, libc::EPERM), Some(1024));
    // Never looser than asked, and other failures stand.
    assert_eq!(below_hard(4096, 8192, libc::EPERM), None);
    assert_eq!(below_hard(4096, 1024, libc::EINVAL), None);
}

#[test]
fn set_up_errors_name_the_step_errno_cause_and_fix() {
    let e = JailError::child_failed(Step::Namespaces, libc::ENOSPC, Path::new("/bin/true"));
    let m = e.to_string();
    assert!(e.is_unavailable(), "{m}");
    for want in [
        "creating the jail's namespaces",
        "ENOSPC",
        "user.max_user_namespaces",
        "run as root",
        "namespace-free",
    ] {
        assert!(m.contains(want), "{want:?} missing: {m}");
    }
    let m = JailError::child_failed(Step::Cgroup, libc::EACCES, Path::new("/bin/true")).to_string();
    assert!(m.contains("joining the call's cgroups (EACCES"), "{m}");
    assert!(m.contains("delegate"), "{m}");
    let m = JailError::child_failed(Step::Reaper, libc::ENOENT, Path::new("/bin/true")).to_string();
    assert!(m.contains("subreaper") && m.contains("ENOENT"), "{m}");
}

#[test]
fn host_homes_of_dead_supervisors_are_swept_and_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    // A pid that no process has now.
    let dead = (100_000..4_000_000u32)
        .rev()
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let stale = t.path().join(format!("{HOST_HOME_PREFIX}{dead}-abc"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("f"), "x").unwrap();
    let live = t.path().join(format!("{HOST_HOME_PREFIX}1-abc"));
    std::fs::create_dir(&live).unwrap();
    let ours = t
        .path()
        .join(format!("{HOST_HOME_PREFIX}{}-abc", std::process::id()));
    std::fs::create_dir(&ours).unwrap();
    let old_style = t.path().join(format!("{HOST_HOME_PREFIX}Xy12ab"));
    std::fs::create_dir(&old_style).unwrap();
    // A link named like a stale home is never followed.
    let target = t.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), "x").unwrap();
    let link = t.path().join(format!("{HOST_HOME_PREFIX}{dead}-lnk"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    sweep_host_homes(t.path());
    assert!(!stale.exists(), "the dead supervisor's home was swept");
    for kept in [&live, &ours, &old_style, &target.join("keep")] {
        assert!(kept.exists(), "{kept:?} was kept");
    }
    assert!(link.symlink_metadata().is_ok(), "the link itself stays");
}

#[test]
fn the_jail_home_is_a_bounded_tmpfs_holding_the_spec_files() {
    let ops = tree::home_ops(64 << 20, &[("ca.pem", b"PEM")]).unwrap();
    assert_eq!(ops[0], Op::Mkdir(HOME.into()));
    let Op::Tmpfs { at, options } = &ops[1] else {
        panic!("{ops:?}")
    };
    assert_eq!(at.as_c_str(), HOME);
    let o = options.to_str().unwrap();
    assert!(
        o.contains("mode=0700")
            && o.contains(&format!("size={}", 64 << 20))
            && !o.contains("nr_inodes"),
        "{o}"
    );
    assert_eq!(
        ops[2],
        Op::File {
            path: c"/.glovebox-home/ca.pem".into(),
            contents: b"PEM".to_vec()
        }
    );
    for bad in ["", "a/b", ".", ".."] {
        assert!(tree::home_ops(1 << 20, &[(bad, b"")]).is_err(), "{bad:?}");
    }
}

#[test]
fn child_constants_match_the_tree() {
    assert_eq!(OLD_ROOT.to_str().unwrap(), tree::OLD_ROOT);
    assert_eq!(STAGE.to_str().unwrap(), tree::STAGE);
    assert_eq!(HOME.to_str().unwrap(), tree::HOME);
    assert_eq!(
        OLD_ROOT_FDS.to_str().unwrap(),
        format!("{}/proc/self/fd/", tree::OLD_ROOT)
    );
    assert_eq!(
        format!("/{}", OLD_ROOT_NAME.to_str().unwrap()),
        tree::OLD_ROOT
    );
}
