//! The other half of "it never gets in the way": ordinary tools run
//! normally inside the jail with their files in the read/write sets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::fs;

fn project() -> tempfile::TempDir {
    let dir = tempdir();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/a.py"), "# TODO: one\nprint('a')\n").unwrap();
    fs::write(
        dir.path().join("src/b.js"),
        "// TODO: two\nconsole.log(1)\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("run.sh"),
        "#!/bin/sh\nset -e\necho \"args: $*\"\ngrep -rc TODO src | sort\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn sh_script_find_and_grep_run_on_readable_files() {
    require_jail!();
    let p = project();
    let root = path_str(p.path());
    let r = sandbox(&["--read", root, "--cwd", root], &["./run.sh", "x y"]);
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert!(r.stdout.contains("args: x y"));
    assert!(
        r.stdout.contains("src/a.py:1") && r.stdout.contains("src/b.js:1"),
        "{r:#?}"
    );
    let r = sandbox(
        &["--read", root, "--cwd", root],
        &["find", "src", "-name", "*.py"],
    );
    assert_eq!(r.stdout.trim(), "src/a.py", "{r:#?}");
}

#[test]
fn python_runs_with_its_stdlib() {
    require_jail!();
    let p = project();
    let root = path_str(p.path());
    let code = "import json, os, subprocess, tempfile, pathlib\n\
        files = sorted(str(x) for x in pathlib.Path('src').rglob('*'))\n\
        with tempfile.NamedTemporaryFile('w') as f: f.write('x')\n\
        out = subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout\n\
        print(json.dumps({'files': files, 'child': out.strip(), 'cpus': os.cpu_count()}))";
    let r = sandbox(&["--read", root, "--cwd", root], &["python3", "-c", code]);
    assert_eq!(r.code, Some(0), "{r:#?}");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["files"], serde_json::json!(["src/a.py", "src/b.js"]));
    assert_eq!(v["child"], "child");
}

#[test]
fn node_runs() {
    require_jail!();
    if which("node").is_none() {
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("node is not installed (CI installs nodejs)");
        }
        eprintln!("SKIPPED: node is not installed");
        return;
    }
    let p = project();
    let root = path_str(p.path());
    let r = sandbox(
        &["--read", root, "--cwd", root],
        &["node", "-e", "const fs=require('fs'); console.log(fs.readdirSync('src').join(','), require('os').cpus().length > 0)"],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert_eq!(r.stdout.trim(), "a.py,b.js true");
}

#[test]
fn git_works_in_a_writable_repository() {
    require_jail!();
    let p = project();
    let root = path_str(p.path());
    // In every mode: without a mount namespace git's chmods and utimes
    // go to the supervisor, which performs them inside the write grant.
    let script = "set -e\n\
        git init -q .\n\
        git add src\n\
        git -c user.name=t -c user.email=t@example.com commit -qm init\n\
        git log --oneline | wc -l\n\
        git status --porcelain | wc -l";
    let r = sandbox(&["--write", root, "--cwd", root], &["sh", "-c", script]);
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["1", "1"],
        "{r:#?}"
    );
    assert!(p.path().join(".git/HEAD").exists());
}

#[test]
fn written_files_land_in_the_write_set() {
    require_jail!();
    let p = project();
    let out = p.path().join("out");
    fs::create_dir(&out).unwrap();
    let r = sandbox(
        &["--read", path_str(p.path()), "--write", path_str(&out), "--cwd", path_str(p.path())],
        &["sh", "-c", "cat src/*.py > out/all.txt && mkdir out/d && mv out/all.txt out/d/ && rm -r out/d && echo done > out/result"],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert_eq!(fs::read_to_string(out.join("result")).unwrap(), "done\n");
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.exists())
}

#[test]
fn relative_paths_are_relative_to_the_invocation_directory() {
    require_jail!();
    let p = project();
    let out = std::process::Command::new(bin())
        .current_dir(p.path())
        .args([
            "sandbox", "--read", ".", "--cwd", "src", "--", "cat", "a.py",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("print('a')"));
}

#[test]
fn awk_runs_through_debians_alternatives_link() {
    require_jail!();
    // /usr/bin/awk leads through /etc/alternatives on Debian and Ubuntu
    // (so do editor, pager, nc…): the link must resolve in every mode.
    let awk = std::path::Path::new("/usr/bin/awk");
    let via_alternatives = fs::read_link(awk)
        .map(|t| t.starts_with("/etc/alternatives"))
        .unwrap_or(false);
    let p = project();
    let root = path_str(p.path());
    let r = sandbox(
        &["--read", root, "--cwd", root],
        &["/bin/sh", "-c", "echo '2 3' | awk '{print $1 * $2}'"],
    );
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert_eq!(r.stdout.trim(), "6", "{r:#?}");
    if !via_alternatives {
        eprintln!("note: /usr/bin/awk is not an alternatives link here");
    }
}

#[test]
fn python_multiprocessing_gets_a_private_dev_shm() {
    require_jail!();
    let p = project();
    let root = path_str(p.path());
    // A marker in the host's /dev/shm that the jail must not see.
    let host_marker = std::path::Path::new("/dev/shm").join(marker("shm-host"));
    let _ = fs::write(&host_marker, "host");
    let code = "import multiprocessing as m, os, sys\n\
        print('ran')\n\
        with m.Pool(2) as p: print(sum(p.map(abs, [-1, -2, -3])))\n\
        q = m.Queue(); q.put(7); print(q.get())\n\
        from multiprocessing import shared_memory\n\
        s = shared_memory.SharedMemory(create=True, size=16); s.buf[0] = 9; print(s.buf[0]); s.close(); s.unlink()\n\
        print('host' if os.path.exists(sys.argv[1]) else 'private')";
    let r = sandbox(
        &["--read", root, "--cwd", root],
        &["python3", "-c", code, host_marker.to_str().unwrap()],
    );
    let _ = fs::remove_file(&host_marker);
    assert!(
        r.stdout.starts_with("ran\n"),
        "the probe did not run: {r:#?}"
    );
    if namespace_free() {
        // No mount tree: /dev/shm would be the host's, shared with every
        // process there; it stays out (invariant 1), so sem_open fails.
        assert_ne!(r.code, Some(0), "{r:#?}");
        assert!(!r.stdout.contains("host"), "{r:#?}");
        return;
    }
    assert_eq!(r.code, Some(0), "{r:#?}");
    assert_eq!(r.stdout, "ran\n6\n7\n9\nprivate\n", "{r:#?}");
    // Nothing the jail made is left in the host's /dev/shm.
    let leaked: Vec<_> = fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("psm_"))
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .map(|t| t.elapsed().map(|d| d.as_secs() < 5).unwrap_or(true))
                .unwrap_or(false)
        })
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
}
