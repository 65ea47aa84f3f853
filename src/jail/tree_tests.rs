use super::*;
use std::fs;

fn access(ro: &[&Path], rw: &[&Path]) -> FsAccess {
    FsAccess {
        read: ro.iter().map(|p| p.to_path_buf()).collect(),
        write: rw.iter().map(|p| p.to_path_buf()).collect(),
        ..FsAccess::default()
    }
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("proj");
    fs::create_dir_all(root.join(".glee/tools/a")).unwrap();
    fs::create_dir_all(root.join(".git/hooks")).unwrap();
    fs::create_dir_all(root.join("out")).unwrap();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::write(root.join("tools.json"), "[]").unwrap();
    fs::write(root.join("run.sh"), "").unwrap();
    (t, root)
}

#[test]
fn private_shm_is_a_tmpfs_of_the_call() {
    let ops = shm_ops(64 << 20).unwrap();
    let at = CString::new("/dev/shm").unwrap();
    assert_eq!(
        ops,
        [
            Op::Mkdir(at.clone()),
            Op::Tmpfs {
                at,
                options: CString::new(format!("mode=0700,size={}", 64u64 << 20)).unwrap(),
            },
        ]
    );
    // A host /dev/shm granted by name is never bound (only DEVICES are).
    let tree = Tree::build(
        &FsAccess {
            write: vec!["/dev/shm".into()],
            ..FsAccess::default()
        },
        &[],
        &[],
    )
    .unwrap();
    let plan = tree.mount_ops().unwrap();
    assert!(!plan
        .ops
        .iter()
        .any(|o| matches!(o, Op::Bind { dst, .. } if dst.as_bytes().starts_with(b"/dev/shm"))));
    assert!(tree.private_shm());
}

#[test]
fn a_grant_under_the_hosts_dev_shm_is_bound_and_the_call_has_no_private_one() {
    let t = tempfile::Builder::new()
        .prefix("gbx-tree-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let tree = Tree::build(
        &FsAccess {
            read: vec![t.path().to_path_buf()],
            ..FsAccess::default()
        },
        &[],
        &[],
    )
    .unwrap();
    let dst = CString::new(t.path().as_os_str().as_bytes()).unwrap();
    let plan = tree.mount_ops().unwrap();
    assert!(plan
        .ops
        .iter()
        .any(|o| matches!(o, Op::Bind { dst: d, .. } if *d == dst)));
    assert!(!tree.private_shm());
}

#[test]
fn write_grant_is_writable_and_protected_paths_inside_are_not() {
    let (_t, root) = project();
    let protect = [
        root.join(".glee"),
        root.join("tools.json"),
        root.join("run.sh"),
    ];
    let tree = Tree::build(&access(&[], &[&root]), &protect, &[]).unwrap();
    assert!(tree.is_writable(&root.join("out/x")));
    assert!(tree.is_writable(&root.join("new.txt")));
    assert!(!tree.is_writable(&root.join(".glee/tools/a/tool.yml")));
    assert!(!tree.is_writable(&root.join("tools.json")));
    assert!(!tree.is_writable(&root.join("run.sh")));
    let prot: Vec<_> = tree.protected().collect();
    assert_eq!(prot.len(), 3, "{tree:#?}");
    // Protected rebinds come after the grant that covers them.
    let plan = tree.mount_ops().unwrap();
    let binds: Vec<_> = plan
        .ops
        .iter()
        .filter_map(|o| match o {
            Op::Bind { dst, .. } => Some(dst.to_str().unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(binds[0], root.to_str().unwrap());
    assert!(binds[1..]
        .iter()
        .all(|b| b.starts_with(root.to_str().unwrap())));
    // Every protected bind is made read-only right after.
    for w in plan.ops.windows(2) {
        if let [Op::Bind { dst, .. }, next] = w {
            if dst.to_str().unwrap().contains(".glee") {
                assert_eq!(next, &Op::ReadOnly(dst.clone()));
            }
        }
    }
}

#[test]
fn directories_holding_protected_paths_under_a_wider_grant_are_pinned() {
    let (t, root) = project();
    let base = t.path();
    let protect = [root.join(".glee"), root.join("src/deep")];
    fs::create_dir_all(root.join("src/deep")).unwrap();
    let tree = Tree::build(&access(&[], &[base]), &protect, &[]).unwrap();
    let pinned: Vec<_> = tree.pinned().collect();
    assert_eq!(
        pinned,
        [root.as_path(), root.join("src").as_path()],
        "{tree:#?}"
    );
    // Still writable, and not listed as grants of their own.
    assert!(tree.is_writable(&root.join("new")));
    assert_eq!(tree.writable().collect::<Vec<_>>(), [base]);
    // Bound after the grant, before the protected rebinds.
    let binds: Vec<_> = tree
        .mount_ops()
        .unwrap()
        .ops
        .iter()
        .filter_map(|o| match o {
            Op::Bind { dst, .. } => Some(PathBuf::from(dst.to_str().unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(
        binds,
        [
            base.to_path_buf(),
            root.clone(),
            root.join("src"),
            root.join(".glee"),
            root.join("src/deep")
        ]
    );
    // The grant on the root itself needs no pin (it is a mountpoint).
    let tree = Tree::build(&access(&[], &[&root]), &protect, &[]).unwrap();
    assert_eq!(
        tree.pinned().collect::<Vec<_>>(),
        [root.join("src").as_path()]
    );
}

#[test]
fn a_protected_link_is_bound_onto_itself_and_its_target_protected() {
    let (_t, root) = project();
    std::os::unix::fs::symlink("run.sh", root.join("go")).unwrap();
    let tree = Tree::build(&access(&[], &[&root]), &[root.join("go")], &[]).unwrap();
    let prot: Vec<_> = tree.protected().collect();
    assert_eq!(
        prot,
        [root.join("go").as_path(), root.join("run.sh").as_path()]
    );
    let plan = tree.mount_ops().unwrap();
    let go = CString::new(root.join("go").as_os_str().as_bytes()).unwrap();
    let at = plan
        .ops
        .iter()
        .position(|o| matches!(o, Op::BindLink { dst, .. } if *dst == go))
        .unwrap_or_else(|| panic!("no BindLink: {plan:#?}"));
    let root_bind = plan
        .ops
        .iter()
        .position(
            |o| matches!(o, Op::Bind { dst, .. } if dst.as_bytes() == root.as_os_str().as_bytes()),
        )
        .unwrap();
    assert!(root_bind < at, "{plan:#?}");
    assert!(!plan
        .ops
        .iter()
        .any(|o| matches!(o, Op::Symlink { at, .. } if *at == go)));
}

#[test]
fn protected_paths_are_found_through_a_linked_grant() {
    let (t, root) = project();
    fs::create_dir_all(root.join("sub/.glee")).unwrap();
    // The grant names the project through a link in its parent; the
    // protected path is in resolved form.
    let via = t.path().join("via");
    fs::create_dir(&via).unwrap();
    let linked_parent = via.join("p");
    std::os::unix::fs::symlink(&root, &linked_parent).unwrap();
    let grant = linked_parent.join("sub");
    let real_glee = fs::canonicalize(root.join("sub/.glee")).unwrap();
    let tree = Tree::build(&access(&[], &[&grant]), &[real_glee], &[]).unwrap();
    assert!(!tree.is_writable(&grant.join(".glee/x")), "{tree:#?}");
    assert!(tree.is_writable(&grant.join("out")));
}

#[test]
fn read_only_grant_needs_no_protected_rebind() {
    let (_t, root) = project();
    let tree = Tree::build(&access(&[&root], &[]), &[root.join(".glee")], &[]).unwrap();
    assert_eq!(tree.protected().count(), 0);
    assert!(!tree.is_writable(&root.join("out")));
    assert_eq!(tree.read_only().count(), 1);
}

#[test]
fn write_grant_inside_a_protected_path_becomes_read_only() {
    let (_t, root) = project();
    let inner = root.join(".glee/tools/a");
    let tree = Tree::build(&access(&[], &[&root, &inner]), &[root.join(".glee")], &[]).unwrap();
    assert!(!tree.is_writable(&inner.join("tool.yml")), "{tree:#?}");
    assert!(tree.is_writable(&root.join("out")));
}

#[test]
fn nested_grants_keep_the_wider_access() {
    let (_t, root) = project();
    // A read grant inside a write grant stays writable; a write grant
    // inside a read grant is writable.
    let tree = Tree::build(&access(&[&root.join("src")], &[&root]), &[], &[]).unwrap();
    assert!(tree.is_writable(&root.join("src/x")));
    assert_eq!(tree.entries.len(), 1, "{tree:#?}");
    let tree = Tree::build(&access(&[&root], &[&root.join("out")]), &[], &[]).unwrap();
    assert!(tree.is_writable(&root.join("out/x")));
    assert!(!tree.is_writable(&root.join("src/x")));
    // Same path in both: writable.
    let tree = Tree::build(&access(&[&root], &[&root]), &[], &[]).unwrap();
    assert_eq!(tree.entries.len(), 1);
    assert!(tree.entries[0].writable);
}

#[test]
fn missing_paths_are_left_out_and_ungranted_paths_are_absent() {
    let (t, root) = project();
    let tree = Tree::build(
        &access(&[&t.path().join("nope")], &[&root.join("out")]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(tree.entries.len(), 1);
    assert!(!tree.is_writable(&root.join("src")));
    assert!(!tree.is_writable(Path::new("/etc/passwd")));
}

#[test]
fn links_are_recreated_and_their_targets_granted() {
    let (t, root) = project();
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let tree = Tree::build(&access(&[&link], &[]), &[], &[]).unwrap();
    assert!(tree
        .entries
        .iter()
        .any(|e| e.path == link && matches!(e.node, Node::Link { .. })));
    assert!(tree
        .entries
        .iter()
        .any(|e| e.path == fs::canonicalize(&root).unwrap() && e.node == Node::Dir));
}

#[test]
fn plan_creates_mountpoints_once_and_only_outside_binds() {
    let (_t, root) = project();
    let tree = Tree::build(
        &access(&[&root, &root.join("run.sh")], &[&root.join("out")]),
        &[],
        &[root.join("src"), PathBuf::from("/nowhere/cwd")],
    )
    .unwrap();
    let plan = tree.mount_ops().unwrap();
    let mkdirs: Vec<_> = plan
        .ops
        .iter()
        .filter_map(|o| match o {
            Op::Mkdir(p) => Some(p.to_str().unwrap().to_string()),
            _ => None,
        })
        .collect();
    let mut sorted = mkdirs.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), mkdirs.len(), "no mkdir twice: {mkdirs:?}");
    // Nothing is created inside the bound project (host content).
    assert!(!mkdirs
        .iter()
        .any(|m| m.starts_with(&format!("{}/", root.display()))));
    assert!(mkdirs.contains(&"/nowhere/cwd".to_string()));
    assert!(!plan.ops.iter().any(|o| matches!(o, Op::Touch(_))));
    // out/ is writable: no ReadOnly op for it.
    let out = CString::new(root.join("out").as_os_str().as_bytes()).unwrap();
    assert!(!plan.ops.contains(&Op::ReadOnly(out)));
}

#[test]
fn only_the_trees_own_directories_are_sealed_never_a_mountpoint() {
    let (t, root) = project();
    let cwd = t.path().join("elsewhere/cwd");
    let tree = Tree::build(
        &access(&[&root], &[&root.join("out")]),
        &[],
        std::slice::from_ref(&cwd),
    )
    .unwrap();
    let plan = tree.mount_ops().unwrap();
    let sealed: Vec<PathBuf> = plan
        .sealed
        .iter()
        .map(|c| PathBuf::from(c.to_str().unwrap()))
        .collect();
    assert!(sealed.contains(&PathBuf::from("/")), "{sealed:?}");
    assert!(sealed.contains(&t.path().to_path_buf()), "{sealed:?}");
    assert!(sealed.contains(&t.path().join("elsewhere")), "{sealed:?}");
    for mountpoint in [&root, &root.join("out"), &cwd] {
        assert!(!sealed.contains(mountpoint), "{mountpoint:?} in {sealed:?}");
    }
}

#[test]
fn only_known_devices_are_bound() {
    let a = FsAccess {
        write: vec!["/dev/null".into(), "/dev/sda".into(), "/dev/tty".into()],
        ..FsAccess::default()
    };
    let plan = Tree::build(&a, &[], &[]).unwrap().mount_ops().unwrap();
    let binds: Vec<_> = plan
        .ops
        .iter()
        .filter_map(|o| match o {
            Op::Bind { dst, .. } => Some(dst.to_str().unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(binds, ["/dev/null"]);
    // Written to, yet bound read-only: a chmod or utime through it
    // would change the host's /dev/null.
    let null = CString::new("/dev/null").unwrap();
    assert!(plan.ops.contains(&Op::ReadOnly(null)), "{plan:#?}");
}

#[test]
fn granting_the_root_grants_its_entries() {
    let a = FsAccess {
        read: vec!["/".into()],
        ..FsAccess::default()
    };
    let tree = Tree::build(&a, &[], &[]).unwrap();
    assert!(tree.entries.iter().any(|e| e.path == Path::new("/usr")));
    assert!(!tree.entries.iter().any(|e| e.path == Path::new("/")));
    let plan = tree.mount_ops().unwrap();
    assert!(!plan
        .ops
        .iter()
        .any(|o| matches!(o, Op::Bind { dst, .. } if dst.to_bytes().starts_with(b"/proc"))));
}

#[test]
fn the_staging_directory_cannot_be_granted() {
    let t = Tree {
        entries: vec![Entry {
            path: PathBuf::from(OLD_ROOT).join("x"),
            source: PathBuf::from("/x"),
            node: Node::Empty,
            writable: false,
            protected: false,
            id: None,
        }],
    };
    assert!(t.mount_ops().is_err());
}

#[test]
fn nothing_is_bound_where_the_private_home_stands() {
    let t = Tree {
        entries: vec![Entry {
            path: PathBuf::from(HOME).join("x"),
            source: PathBuf::from(HOME).join("x"),
            node: Node::Dir,
            writable: true,
            protected: false,
            id: None,
        }],
    };
    assert!(!t.mount_ops().unwrap().ops.iter().any(
        |o| matches!(o, Op::Bind { dst, .. } | Op::Mkdir(dst) if dst.to_bytes().starts_with(HOME.as_bytes()))
    ));
}

#[test]
fn metadata_is_guarded_by_the_tree_or_by_seccomp() {
    assert_eq!(metadata_guard(true), MetadataGuard::Tree);
    assert_eq!(metadata_guard(false), MetadataGuard::Seccomp);
}
