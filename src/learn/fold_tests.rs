#![allow(clippy::unwrap_used)]
use super::*;
use crate::learn::sensitive::{Places, Why};

fn seen(op: Op, path: &str, program: &str) -> Seen {
    Seen {
        op,
        path: path.into(),
        program: program.into(),
        dir: false,
        existed: true,
    }
}

fn ctx() -> Context {
    Context {
        root: "/p".into(),
        home: Some("/home/u".into()),
        baseline_read: vec!["/usr".into(), "/etc/ssl".into()],
        baseline_write: vec!["/dev/null".into()],
        granted: vec!["/usr/lib/python3/venv".into()],
        hidden: vec!["/home/u/.local/state/glovebox".into()],
        places: Places::new(vec!["/home/u".into()], vec!["/home/v".into()], vec![]),
        succeeded: false,
        ..Context::default()
    }
}

fn paths(f: &Folded) -> Vec<(Access, String)> {
    f.grants
        .iter()
        .map(|g| (g.access, g.path.display().to_string()))
        .collect()
}

#[test]
fn a_toolchain_folds_to_its_directory_and_the_baseline_is_dropped() {
    let mut v: Vec<Seen> = (0..4000)
        .map(|i| {
            seen(
                Op::Read,
                &format!("/home/u/.rustup/toolchains/x/lib/f{i}.rlib"),
                "rustc",
            )
        })
        .collect();
    v.push(seen(Op::Exec, "/usr/bin/git", "sh"));
    v.push(seen(Op::Read, "/etc/ssl/certs/a.pem", "curl"));
    v.push(seen(Op::Read, "/home/u/.config/tool/cfg.toml", "tool"));
    v.push(seen(Op::Read, "/home/u/.gitconfig", "git"));
    let f = fold(&v, &ctx());
    assert_eq!(
        paths(&f),
        vec![
            (Access::Read, "/home/u/.config/tool".into()),
            (Access::Read, "/home/u/.gitconfig".into()),
            (Access::Read, "/home/u/.rustup".into()),
        ]
    );
    let rustup = &f.grants[2];
    assert_eq!(rustup.covers, 4000);
    assert!(rustup.programs.contains("rustc"));
    assert_eq!(rustup.examples.len(), 3);
}

#[test]
fn the_project_folds_to_its_top_level_entries_and_writes_imply_reads() {
    let mut out = seen(Op::Create, "/p/out/result.json", "python3");
    out.existed = false;
    let v = vec![
        seen(Op::Read, "/p/data/a.csv", "python3"),
        seen(Op::Read, "/p/data/sub/b.csv", "python3"),
        seen(Op::Read, "/p/out/old.json", "python3"),
        out,
        seen(Op::Write, "/p/.git/index.lock", "git"),
    ];
    let f = fold(&v, &ctx());
    assert_eq!(
        paths(&f),
        vec![
            (Access::Read, "/p/.git".into()),
            (Access::Read, "/p/data".into()),
            (Access::Write, "/p/out".into()),
        ]
    );
    // out/ existed (old.json was read there): nothing to create.
    assert!(!f.grants[2].create);
}

#[test]
fn a_missing_output_directory_is_marked_for_creation_and_a_new_root_file_needs_the_root() {
    let mut a = seen(Op::Create, "/p/out", "mkdir");
    a.existed = false;
    a.dir = true;
    let mut b = seen(Op::Create, "/p/out/r.json", "python3");
    b.existed = false;
    let f = fold(&[a, b], &ctx());
    assert_eq!(paths(&f), vec![(Access::Write, "/p/out".into())]);
    assert!(f.grants[0].create);
    let mut c = seen(Op::Create, "/p/report.txt", "sh");
    c.existed = false;
    let f = fold(&[c], &ctx());
    assert_eq!(paths(&f), vec![(Access::Write, "/p".into())]);
}

#[test]
fn glovebox_state_is_never_proposed_even_through_a_folded_parent() {
    let v = vec![
        seen(Op::Read, "/home/u/.local/state/glovebox/audit.key", "cat"),
        seen(Op::Read, "/home/u/.local/state/other/x", "cat"),
        seen(Op::Read, "/home/u/.local/state", "ls"),
    ];
    let f = fold(&v, &ctx());
    // Listing the directory that holds the state is not proposed either.
    assert_eq!(
        f.kept_out,
        vec![
            PathBuf::from("/home/u/.local/state"),
            PathBuf::from("/home/u/.local/state/glovebox/audit.key")
        ]
    );
    for g in &f.grants {
        assert!(
            !Path::new("/home/u/.local/state/glovebox").starts_with(&g.path),
            "{g:?}"
        );
    }
    assert_eq!(
        paths(&f),
        vec![(Access::Read, "/home/u/.local/state/other".into())]
    );
}

#[test]
fn the_jails_own_files_are_dropped() {
    let v = vec![
        seen(Op::Read, "/proc/self/status", "x"),
        seen(Op::Write, "/.glovebox-home/.cache/x", "x"),
        seen(Op::Write, "/tmp/glovebox-home-1-abc/x", "x"),
        seen(Op::Write, "/dev/null", "x"),
        seen(Op::Read, "/", "ls"),
        seen(Op::Read, "/etc/passwd", "bash"),
        seen(Op::Read, "/usr/lib/python3/venv/x.py", "python3"),
    ];
    let f = fold(&v, &ctx());
    assert!(f.grants.is_empty(), "{f:?}");
    assert_eq!(f.lookups, vec![PathBuf::from("/etc/passwd")]);
}

#[test]
fn outside_paths_keep_a_readable_depth() {
    let h = Some(Path::new("/home/u"));
    assert_eq!(
        fold_outside(Path::new("/opt/tool/bin/x"), h),
        PathBuf::from("/opt/tool")
    );
    assert_eq!(
        fold_outside(Path::new("/tmp/data/a/b"), h),
        PathBuf::from("/tmp/data")
    );
    assert_eq!(
        fold_outside(Path::new("/srv/x"), h),
        PathBuf::from("/srv/x")
    );
    assert_eq!(
        fold_outside(Path::new("/home/u/.local/share/app/db/x"), h),
        PathBuf::from("/home/u/.local/share/app")
    );
    assert_eq!(
        fold_outside(Path::new("/home/u/.cargo/bin/cargo"), h),
        PathBuf::from("/home/u/.cargo")
    );
}

#[test]
fn a_file_beside_the_project_does_not_bring_the_project_in() {
    let c = Context {
        root: "/tmp/lt/proj".into(),
        ..ctx()
    };
    let v = vec![
        seen(Op::Read, "/tmp/lt/canary.txt", "cat"),
        seen(Op::Read, "/tmp/lt/proj/data/a", "cat"),
        seen(Op::Read, "/tmp/lt/other/x/y", "cat"),
    ];
    let f = fold(&v, &c);
    assert_eq!(
        paths(&f),
        vec![
            (Access::Read, "/tmp/lt/canary.txt".into()),
            (Access::Read, "/tmp/lt/other".into()),
            (Access::Read, "/tmp/lt/proj/data".into()),
        ]
    );
}

#[test]
fn a_write_outside_the_run_succeeded_without_is_noted_not_proposed() {
    let v = vec![
        seen(Op::Create, "/home/u/.cargo/.package-cache", "cargo"),
        seen(Op::Read, "/home/u/.cargo/bin/cargo", "sh"),
    ];
    let f = fold(
        &v,
        &Context {
            succeeded: true,
            ..ctx()
        },
    );
    assert_eq!(paths(&f), vec![(Access::Read, "/home/u/.cargo".into())]);
    assert_eq!(
        f.unneeded_writes,
        vec![PathBuf::from("/home/u/.cargo/.package-cache")]
    );
    // A failed run: never proposed either (the tool may have failed on
    // purpose to get it), but withheld, with its directory to name.
    let f = fold(&v, &ctx());
    assert_eq!(paths(&f), vec![(Access::Read, "/home/u/.cargo".into())]);
    assert_eq!(f.withheld.len(), 1, "{f:?}");
    assert_eq!(f.withheld[0].path, PathBuf::from("/home/u/.cargo"));
    assert_eq!(f.withheld[0].why, Why::Outside);
    // Named by the person (`--write`, a declared grant, `--include`):
    // granted exactly as named.
    let c = Context {
        include: vec!["/home/u/.cargo/.package-cache".into()],
        ..ctx()
    };
    let f = fold(&v, &c);
    assert!(
        paths(&f).contains(&(Access::Write, "/home/u/.cargo/.package-cache".into())),
        "{f:?}"
    );
}

#[test]
fn a_failed_run_never_gets_a_write_outside_nor_on_what_runs_later_proposed() {
    let mut envrc = seen(Op::Create, "/p/.envrc", "sh");
    envrc.existed = false;
    let v = vec![
        seen(Op::Write, "/tmp/outside/.ssh/authorized_keys", "sh"),
        seen(Op::Create, "/etc/cron.d/x", "sh"),
        seen(Op::Write, "/home/u/.bashrc", "sh"),
        seen(Op::Create, "/p/.husky/pre-commit", "sh"),
        envrc,
        seen(Op::Write, "/p/.vscode/tasks.json", "sh"),
        seen(Op::Write, "/p/src/a.rs", "sh"),
    ];
    for succeeded in [false, true] {
        let f = fold(&v, &Context { succeeded, ..ctx() });
        assert_eq!(paths(&f), vec![(Access::Write, "/p/src".into())], "{f:?}");
        let held: Vec<&Path> = f.withheld.iter().map(|w| w.path.as_path()).collect();
        for p in [
            "/etc/cron.d/x",
            "/home/u/.bashrc",
            "/tmp/outside/.ssh/authorized_keys",
            "/p/.husky",
            "/p/.envrc",
            "/p/.vscode",
        ] {
            assert!(held.contains(&Path::new(p)), "{p}: {held:?}");
        }
    }
    // A manifest that names one keeps it as named.
    let c = Context {
        named: vec![(Access::Write, "/p/.husky".into())],
        ..ctx()
    };
    let f = fold(&v, &c);
    assert!(paths(&f).contains(&(Access::Write, "/p/.husky".into())));
}

#[test]
fn a_secret_place_is_never_proposed_and_a_fold_stops_short_of_one() {
    let v = vec![
        seen(Op::Read, "/home/u/.ssh/id_ed25519", "cat"),
        seen(Op::Read, "/home/u/.aws/credentials", "cat"),
        seen(Op::Read, "/home/v/notes.txt", "cat"),
        seen(Op::Read, "/etc/shadow", "cat"),
        seen(Op::Read, "/etc/ssh/ssh_config", "ssh"),
        seen(Op::Read, "/opt/app/secret.key", "cat"),
    ];
    let c = Context {
        secret: vec![
            "/opt/app/secret.key".into(),
            "/etc/ssh/ssh_host_ed25519_key".into(),
        ],
        ..ctx()
    };
    let f = fold(&v, &c);
    // /etc/ssh would hold the host keys: the file itself is proposed.
    assert_eq!(
        paths(&f),
        vec![(Access::Read, "/etc/ssh/ssh_config".into())],
        "{f:?}"
    );
    assert_eq!(f.withheld.len(), 5, "{f:?}");
    // Read outside the learning view: not proposed, named to learn again.
    let c = Context {
        view: Some(vec!["/home/u/.cargo".into()]),
        ..ctx()
    };
    let f = fold(
        &[
            seen(Op::Read, "/data/corpus/a.txt", "cat"),
            seen(Op::Read, "/home/u/.cargo/bin/cargo", "sh"),
        ],
        &c,
    );
    assert_eq!(paths(&f), vec![(Access::Read, "/home/u/.cargo".into())]);
    assert_eq!(f.outside_view, vec![PathBuf::from("/data/corpus")]);
}

#[test]
fn a_tools_own_files_fold_to_its_directory_not_all_of_glee() {
    let v = vec![
        seen(Op::Read, "/p/.glee/tools/t/run.py", "python3"),
        seen(Op::Read, "/p/.glee/tools/t/conf/a.txt", "python3"),
    ];
    let f = fold(&v, &ctx());
    assert_eq!(paths(&f), vec![(Access::Read, "/p/.glee/tools/t".into())]);
}

#[test]
fn a_program_run_from_under_a_write_grant_keeps_its_read_grant() {
    // pytest in the project's venv, writing .pytest_cache in the root: a
    // write grant carries no execute, so the venv stays a read grant.
    let mut cache = seen(Op::Create, "/p/.pytest_cache", "python3");
    cache.existed = false;
    let v = vec![
        seen(Op::Exec, "/p/.venv/bin/pytest", "sh"),
        // The root's own listing: a read of the root, which the write
        // grant covers (it must not take the venv's execute with it).
        seen(Op::Read, "/p", "python3"),
        seen(Op::Read, "/p/.venv/lib/site.py", "python3"),
        seen(Op::Read, "/p/tests/test_a.py", "python3"),
        cache,
    ];
    let f = fold(&v, &ctx());
    assert_eq!(
        paths(&f),
        vec![
            (Access::Read, "/p/.venv".into()),
            (Access::Write, "/p".into())
        ]
    );
    assert!(f.grants[0].exec && f.grants[0].covers == 2);
    // Without the exec the read is covered by the write grant.
    let f = fold(&v[1..], &ctx());
    assert_eq!(paths(&f), vec![(Access::Write, "/p".into())]);
}

#[test]
fn a_listing_of_a_directory_holding_the_baseline_is_noted_not_proposed() {
    let mut etc = seen(Op::Read, "/etc", "python3");
    etc.dir = true;
    let mut tool = seen(Op::Read, "/etc/tool", "python3");
    tool.dir = true;
    let mut c = ctx();
    c.baseline_read.push("/etc/ssl".into());
    let f = fold(&[etc, tool], &c);
    assert_eq!(paths(&f), vec![(Access::Read, "/etc/tool".into())]);
    assert_eq!(f.listings, vec![PathBuf::from("/etc")]);
}
