use super::*;

fn grants() -> Grants {
    Grants {
        write: vec![PathBuf::from("/w")],
        protected: vec![PathBuf::from("/w/.glee")],
        uid: 1000,
        groups: vec![1000, 27],
    }
}

fn file(path: &str) -> Found<'_> {
    Found {
        path: Path::new(path),
        uid: 1000,
        gid: 1000,
        kind: Kind::File,
    }
}

#[test]
fn changes_inside_a_write_grant_are_allowed() {
    let g = grants();
    assert_eq!(decide(&g, &file("/w/a.sh"), &Change::Mode(0o755)), Ok(()));
    assert_eq!(
        decide(&g, &file("/w/d/x"), &Change::Times { explicit: true }),
        Ok(())
    );
    assert_eq!(
        decide(
            &g,
            &file("/w/x"),
            &Change::Owner {
                uid: Some(1000),
                gid: Some(27)
            }
        ),
        Ok(())
    );
    assert_eq!(
        decide(&g, &file("/w/x"), &Change::Xattr { name: b"user.k" }),
        Ok(())
    );
}

#[test]
fn outside_the_grants_or_in_the_control_surface_is_refused() {
    let g = grants();
    for p in [
        "/etc/passwd",
        "/wx/a",
        "/w/.glee/tools/t/tool.yml",
        "/w/.glee",
        "/",
        "w/a",
    ] {
        assert_eq!(
            decide(&g, &file(p), &Change::Mode(0o644)),
            Err(libc::EPERM),
            "{p}"
        );
    }
    // A lexical escape never matches a grant.
    assert_eq!(
        decide(&g, &file("/w/../etc/passwd"), &Change::Mode(0o644)),
        Err(libc::EPERM)
    );
}

#[test]
fn setuid_setgid_other_owners_and_devices_are_refused() {
    let g = grants();
    let f = file("/w/a");
    assert_eq!(decide(&g, &f, &Change::Mode(0o4755)), Err(libc::EPERM));
    assert_eq!(decide(&g, &f, &Change::Mode(0o2755)), Err(libc::EPERM));
    assert_eq!(decide(&g, &f, &Change::Mode(0o1777)), Ok(()));
    assert_eq!(
        decide(
            &g,
            &f,
            &Change::Owner {
                uid: Some(0),
                gid: None
            }
        ),
        Err(libc::EPERM)
    );
    assert_eq!(
        decide(
            &g,
            &f,
            &Change::Owner {
                uid: None,
                gid: Some(0)
            }
        ),
        Err(libc::EPERM)
    );
    let other = Found {
        uid: 1001,
        ..file("/w/b")
    };
    assert_eq!(decide(&g, &other, &Change::Mode(0o644)), Err(libc::EPERM));
    assert_eq!(
        decide(&g, &other, &Change::Times { explicit: true }),
        Err(libc::EPERM)
    );
    // "Now" only needs write access, which the kernel checks itself.
    assert_eq!(
        decide(&g, &other, &Change::Times { explicit: false }),
        Ok(())
    );
    let dev = Found {
        kind: Kind::Device,
        ..file("/w/null")
    };
    assert_eq!(
        decide(&g, &dev, &Change::Times { explicit: false }),
        Err(libc::EPERM)
    );
    assert_eq!(
        decide(
            &g,
            &f,
            &Change::Xattr {
                name: b"security.capability"
            }
        ),
        Err(libc::EOPNOTSUPP)
    );
    assert_eq!(
        decide(&g, &f, &Change::Xattr { name: b"trusted.x" }),
        Err(libc::EOPNOTSUPP)
    );
    let link = Found {
        kind: Kind::Link,
        ..file("/w/l")
    };
    assert_eq!(
        decide(&g, &link, &Change::Mode(0o644)),
        Err(libc::EOPNOTSUPP)
    );
}

#[test]
fn a_root_supervisor_still_needs_the_owner() {
    let g = Grants {
        uid: 0,
        groups: vec![0],
        ..grants()
    };
    let theirs = file("/w/a");
    assert_eq!(decide(&g, &theirs, &Change::Mode(0o644)), Err(libc::EPERM));
    assert_eq!(
        decide(&g, &theirs, &Change::Times { explicit: false }),
        Err(libc::EPERM)
    );
    let mine = Found {
        uid: 0,
        gid: 0,
        ..file("/w/a")
    };
    assert_eq!(decide(&g, &mine, &Change::Mode(0o644)), Ok(()));
}

#[test]
fn calls_decode_to_their_target_and_change() {
    let c = decode(
        libc::SYS_fchmodat,
        [libc::AT_FDCWD as u64, 0x1000, 0o755, 0, 0, 0],
    )
    .unwrap();
    assert_eq!(c.request, Request::Mode(0o755));
    let typed = decode(libc::SYS_fchmod, [3, 0o100644, 0, 0, 0, 0]).unwrap();
    assert_eq!(typed.request, Request::Mode(0o644));
    assert!(matches!(
        c.target,
        Target::Path {
            follow: true,
            addr: 0x1000,
            ..
        }
    ));
    let c = decode(
        libc::SYS_fchownat,
        [
            3,
            0x10,
            u32::MAX as u64,
            5,
            libc::AT_SYMLINK_NOFOLLOW as u64,
            0,
        ],
    )
    .unwrap();
    assert_eq!(
        c.request,
        Request::Owner {
            uid: None,
            gid: Some(5)
        }
    );
    assert!(matches!(
        c.target,
        Target::Path {
            dir: 3,
            follow: false,
            ..
        }
    ));
    let c = decode(libc::SYS_utimensat, [4, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(c.target, Target::Fd(4));
    assert_eq!(c.request, Request::Times(TimesAt::Now));
    // Unknown flags are refused, not guessed.
    assert!(decode(libc::SYS_fchownat, [3, 0x10, 0, 0, 0x8000_0000, 0]).is_none());
    assert!(decode(libc::SYS_openat, [0; 6]).is_none());
    for nr in notified_calls() {
        assert!(decode(nr, [3, 0x10, 0x20, 0, 0, 0]).is_some(), "{nr}");
    }
}

#[test]
fn the_callers_own_descriptor_paths_name_its_descriptors() {
    assert_eq!(callers_fd(42, b"/proc/self/fd/3"), Some(3));
    assert_eq!(callers_fd(42, b"/dev/fd/17"), Some(17));
    assert_eq!(callers_fd(42, b"/proc/42/fd/5"), Some(5));
    assert_eq!(callers_fd(42, b"/proc/43/fd/5"), None);
    assert_eq!(callers_fd(42, b"/proc/self/fd/3/x"), None);
    assert_eq!(callers_fd(42, b"/proc/self/cwd"), None);
    assert_eq!(callers_fd(42, b"rel/x"), None);
}
