//! The unit tests of [`super`]: what a tool runs, found for each kind of tool.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::manifest::project::Project;
use std::fs;

fn project(root: &Path, exec: &str) -> Tool {
    let dir = root.join(".glee/tools/t");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("tool.yml"),
        format!("name: t\ndescription: d\nkind: {}\nversion: 1\ninputs:\n  schema: {{type: object, properties: {{x: {{type: string}}}}}}\noutputs:\n  format: text\nexec:\n{exec}", if exec.contains("python:") {"python"} else {"command"}),
    )
    .unwrap();
    let p = Project::load(root).unwrap();
    assert!(!p.has_errors(), "{:?}", p.diagnostics);
    p.tool("t").unwrap().clone()
}

#[test]
fn command_covers_entrypoint_and_file_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("scripts")).unwrap();
    fs::write(root.join("scripts/run.sh"), "echo hi").unwrap();
    fs::write(root.join("conf.ini"), "x").unwrap();
    let tool = project(
        &root,
        "  command:\n    entrypoint: sh\n    args: [\"scripts/run.sh\", \"--config=conf.ini\", \"${x}\", \"missing.sh\"]\n",
    );
    let f = of(&root, &tool);
    assert!(f.files.contains(&root.join("scripts/run.sh")), "{f:?}");
    assert!(f.files.contains(&root.join("conf.ini")), "{f:?}");
    assert!(f.files.contains(&root.join(".glee/tools/t/tool.yml")));
    assert_eq!(f.files.len(), 3, "{f:?}");
}

#[test]
fn a_script_s_interpreter_inside_the_root_is_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("tools")).unwrap();
    fs::write(root.join("tools/interp"), "#!/bin/sh\nexec sh \"$@\"\n").unwrap();
    fs::write(root.join("run.sh"), "#!tools/interp -x\necho hi\n").unwrap();
    let tool = project(&root, "  command:\n    entrypoint: ./run.sh\n");
    let f = of(&root, &tool);
    assert!(f.files.contains(&root.join("run.sh")), "{f:?}");
    assert!(f.files.contains(&root.join("tools/interp")), "{f:?}");
}

#[test]
fn python_dash_m_covers_the_module() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::write(root.join("tool_main.py"), "print(1)").unwrap();
    let tool = project(
        &root,
        "  command:\n    entrypoint: python3\n    args: [\"-m\", \"tool_main\"]\n",
    );
    let f = of(&root, &tool);
    assert!(f.files.contains(&root.join("tool_main.py")), "{f:?}");
    assert!(
        f.paths.contains(&root.join("tool_main/__init__.py")),
        "{f:?}"
    );
}

#[test]
fn a_package_or_directory_run_as_a_program_covers_its_main() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("pkg")).unwrap();
    fs::write(root.join("pkg/__init__.py"), "").unwrap();
    fs::write(root.join("pkg/__main__.py"), "print(1)").unwrap();
    fs::create_dir_all(root.join("app")).unwrap();
    fs::write(root.join("app/__main__.py"), "print(1)").unwrap();
    fs::create_dir_all(root.join("web/lib")).unwrap();
    fs::write(root.join("web/package.json"), r#"{"main": "lib/start"}"#).unwrap();
    fs::write(root.join("web/lib/start.js"), "1").unwrap();
    for (args, main) in [
        ("[\"-m\", \"pkg\"]", "pkg/__main__.py"),
        ("[\"-I\", \"-mpkg\"]", "pkg/__main__.py"),
        ("[\"-X\", \"dev\", \"app\"]", "app/__main__.py"),
    ] {
        let tool = project(
            &root,
            &format!("  command:\n    entrypoint: python3\n    args: {args}\n"),
        );
        let f = of(&root, &tool);
        assert!(f.files.contains(&root.join(main)), "{args}: {f:?}");
    }
    // `-c` code names no script; a directory after it is data.
    let tool = project(
        &root,
        "  command:\n    entrypoint: python3\n    args: [\"-c\", \"pass\", \"app\"]\n",
    );
    assert!(!of(&root, &tool)
        .files
        .contains(&root.join("app/__main__.py")));
    let tool = project(
        &root,
        "  command:\n    entrypoint: node\n    args: [\"web\"]\n",
    );
    let f = of(&root, &tool);
    for p in ["web/package.json", "web/lib/start.js"] {
        assert!(f.files.contains(&root.join(p)), "{p}: {f:?}");
    }
    assert!(f.paths.contains(&root.join("web/index.js")), "{f:?}");
}

#[test]
fn a_module_installed_in_a_venv_is_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let site = root.join("venv/lib/python3.11/site-packages");
    fs::create_dir_all(&site).unwrap();
    fs::create_dir_all(root.join("venv/bin")).unwrap();
    fs::write(root.join("venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    fs::write(site.join("inst.py"), "def f(): pass").unwrap();
    fs::write(
        site.join("dev.pth"),
        format!("# editable\nimport sys\n{}\n", root.join("src").display()),
    )
    .unwrap();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::write(root.join("src/inst.py"), "def f(): pass").unwrap();
    for exec in [
        "  python:\n    module: inst\n    function: f\n    venv: venv\n",
        "  command:\n    entrypoint: venv/bin/python3\n    args: [\"-m\", \"inst\"]\n",
    ] {
        let f = of(&root, &project(&root, exec));
        for p in [
            "venv/lib/python3.11/site-packages/inst.py",
            "venv/lib/python3.11/site-packages/dev.pth",
            "src/inst.py",
            "venv/pyvenv.cfg",
        ] {
            assert!(f.files.contains(&root.join(p)), "{p}: {f:?}");
        }
        assert!(f.paths.contains(&site.join("inst/__init__.py")), "{f:?}");
    }
}

#[test]
fn python_covers_shadowing_names() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("pkg")).unwrap();
    fs::write(root.join("pkg/__init__.py"), "").unwrap();
    fs::write(root.join("pkg/mod.py"), "def f(): pass").unwrap();
    fs::write(root.join("pkg/mod.cpython-311-x86_64-linux-gnu.so"), "").unwrap();
    let tool = project(&root, "  python:\n    module: pkg.mod\n    function: f\n");
    let f = of(&root, &tool);
    for p in [
        "pkg/__init__.py",
        "pkg/mod.py",
        "pkg/mod.cpython-311-x86_64-linux-gnu.so",
    ] {
        assert!(f.files.contains(&root.join(p)), "{p}: {f:?}");
    }
    for p in ["pkg/mod", "pkg/mod/__init__.py", "pkg.py", "pkg/mod.pyc"] {
        assert!(f.paths.contains(&root.join(p)), "{p}: {f:?}");
    }
}

#[test]
fn what_python_code_imports_from_the_project_is_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("lib/pkg")).unwrap();
    fs::create_dir_all(root.join("lib/json")).unwrap();
    fs::write(
        root.join("lib/main.py"),
        "import csv, helper\nfrom pkg import sub\n\ndef f():\n    import json\n",
    )
    .unwrap();
    fs::write(root.join("lib/helper.py"), "from deep import x\n").unwrap();
    fs::write(root.join("lib/deep.py"), "x = 1\n").unwrap();
    fs::write(root.join("lib/pkg/__init__.py"), "from . import rel\n").unwrap();
    fs::write(root.join("lib/pkg/sub.py"), "").unwrap();
    fs::write(root.join("lib/pkg/rel.py"), "").unwrap();
    let tool = project(
        &root,
        "  python:\n    module: main\n    function: f\n    cwd: lib\n",
    );
    let f = of(&root, &tool);
    for p in [
        "lib/main.py",
        "lib/helper.py",
        "lib/deep.py",
        "lib/pkg/__init__.py",
        "lib/pkg/sub.py",
        "lib/pkg/rel.py",
    ] {
        assert!(f.files.contains(&root.join(p)), "{p}: {f:?}");
    }
    assert!(f.paths.contains(&root.join("lib/pkg")), "{f:?}");
    // A plain data directory named like a standard module is not the
    // tool's code; a module planted under an imported name is, and is
    // new to the footprint (which voids an approval).
    assert!(!f.paths.contains(&root.join("lib/json")), "{f:?}");
    assert!(!f.paths.contains(&root.join("lib/csv.py")), "{f:?}");
    fs::write(root.join("lib/csv.py"), "").unwrap();
    fs::write(root.join("lib/csv.cpython-311-x86_64-linux-gnu.so"), "").unwrap();
    let planted = of(&root, &tool);
    for p in ["lib/csv.py", "lib/csv.cpython-311-x86_64-linux-gnu.so"] {
        assert!(planted.files.contains(&root.join(p)), "{p}: {planted:?}");
    }
    // A python command's script and a `#!` python script: from their
    // own directory.
    fs::create_dir_all(root.join("scripts")).unwrap();
    fs::write(root.join("scripts/x.py"), "import json, own\n").unwrap();
    fs::write(root.join("scripts/own.py"), "").unwrap();
    fs::write(
        root.join("scripts/run"),
        "#!/usr/bin/env python3\nimport other\n",
    )
    .unwrap();
    fs::write(root.join("scripts/other.py"), "").unwrap();
    for exec in [
        "  command:\n    entrypoint: python3\n    args: [\"scripts/x.py\"]\n",
        "  command:\n    entrypoint: ./scripts/run\n",
    ] {
        let f = of(&root, &project(&root, exec));
        let want = if exec.contains("x.py") {
            "scripts/own.py"
        } else {
            "scripts/other.py"
        };
        assert!(f.files.contains(&root.join(want)), "{want}: {f:?}");
    }
}

#[test]
fn resolved_follows_links_as_far_as_they_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("data")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("data/cache")).unwrap();
    assert_eq!(resolved(&root.join("data/cache/x")), Path::new("/etc/x"));
    std::os::unix::fs::symlink("/nonexistent-gbx/a", root.join("data/dangling")).unwrap();
    assert_eq!(
        resolved(&root.join("data/dangling/b")),
        Path::new("/nonexistent-gbx/a/b")
    );
    assert_eq!(resolved(&root.join("data/new/b")), root.join("data/new/b"));
}

#[test]
fn absent_code_a_call_runs_first_is_listed_but_not_an_option_value() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    for (exec, absent) in [
        ("  command:\n    entrypoint: ./run.sh\n", vec!["run.sh"]),
        (
            "  command:\n    entrypoint: sh\n    args: [\"work/later.sh\"]\n",
            vec!["work/later.sh"],
        ),
        (
            "  command:\n    entrypoint: python3\n    args: [\"scripts/x.py\"]\n",
            vec!["scripts/x.py"],
        ),
        // A bare word may be an option's value (`-o pipefail`): not listed.
        (
            "  command:\n    entrypoint: bash\n    args: [\"-o\", \"pipefail\", \"-c\", \"true\"]\n",
            vec![],
        ),
        // A python tool's module is the shim's to refuse, not the engine's.
        (
            "  python:\n    module: later\n    function: run\n",
            vec![],
        ),
    ] {
        let tool = project(&root, exec);
        let f = of(&root, &tool);
        let want: Vec<PathBuf> = absent.iter().map(|p| root.join(p)).collect();
        assert_eq!(f.absent_runs, want, "{exec}");
    }
    // Once there, nothing is absent.
    fs::write(root.join("run.sh"), "echo hi").unwrap();
    let tool = project(&root, "  command:\n    entrypoint: ./run.sh\n");
    assert!(of(&root, &tool).absent_runs.is_empty());
}

#[test]
fn an_import_the_project_has_nothing_under_lists_the_names_a_plant_would_take() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("lib")).unwrap();
    fs::write(
        root.join("lib/victim.py"),
        "try:\n    import fastjsonx\nexcept ImportError:\n    pass\nimport helper\n\ndef run():\n    return 1\n",
    )
    .unwrap();
    fs::write(root.join("lib/helper.py"), "").unwrap();
    let tool = project(
        &root,
        "  python:\n    module: victim\n    function: run\n    cwd: lib\n",
    );
    let f = of(&root, &tool);
    for name in [
        "fastjsonx",
        "fastjsonx.py",
        "fastjsonx.pyc",
        "fastjsonx.so",
        "fastjsonx.abi3.so",
    ] {
        assert!(
            f.absent_imports.contains(&root.join("lib").join(name)),
            "{name}: {f:?}"
        );
    }
    // What is there is covered as code, never listed as absent.
    assert!(f.files.contains(&root.join("lib/helper.py")), "{f:?}");
    assert!(
        !f.absent_imports
            .iter()
            .any(|p| p.starts_with(root.join("lib/helper"))),
        "{f:?}"
    );
    // A missing module is recorded as a file and as a package.
    let tool = project(
        &root,
        "  python:\n    module: later\n    function: run\n    cwd: lib\n",
    );
    let f = of(&root, &tool);
    assert!(f.missing.contains(&root.join("lib/later.py")), "{f:?}");
    assert!(f.missing.contains(&root.join("lib/later")), "{f:?}");
}

#[test]
fn what_a_shell_script_sources_is_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("scripts")).unwrap();
    fs::write(
        root.join("scripts/main.sh"),
        "#!/bin/sh\n. scripts/lib.sh\n. \"$(dirname \"$0\")/near.sh\"\n. scripts/gone.sh\n. \"$CONF\"\n",
    )
    .unwrap();
    fs::write(root.join("scripts/lib.sh"), "source scripts/deeper.sh\n").unwrap();
    fs::write(root.join("scripts/deeper.sh"), "x=1\n").unwrap();
    fs::write(root.join("scripts/near.sh"), "y=1\n").unwrap();
    let run = |exec: &str| of(&root, &project(&root, exec));
    for exec in [
        "  command:\n    entrypoint: ./scripts/main.sh\n",
        "  command:\n    entrypoint: sh\n    args: [scripts/main.sh]\n",
    ] {
        let f = run(exec);
        for want in ["main.sh", "lib.sh", "deeper.sh", "near.sh"] {
            assert!(
                f.files.contains(&root.join("scripts").join(want)),
                "{want}: {f:?}"
            );
        }
        // Sourced but absent: code whoever creates it would decide.
        assert!(f.missing.contains(&root.join("scripts/gone.sh")), "{f:?}");
        assert!(f.paths.contains(&root.join("scripts/gone.sh")), "{f:?}");
    }
    // The literal text of `sh -c`.
    let f =
        run("  command:\n    entrypoint: bash\n    args: [\"-c\", \". scripts/lib.sh; run\"]\n");
    assert!(f.files.contains(&root.join("scripts/lib.sh")), "{f:?}");
    assert!(f.files.contains(&root.join("scripts/deeper.sh")), "{f:?}");
    // A template is not literal text.
    let f = run("  command:\n    entrypoint: sh\n    args: [\"-c\", \". scripts/lib.sh; ${x}\"]\n");
    assert!(!f.files.contains(&root.join("scripts/lib.sh")), "{f:?}");
}

#[test]
fn a_commands_venv_inside_the_root_is_listed_to_be_protected_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(root.join("venv/bin")).unwrap();
    fs::write(root.join("venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    fs::write(root.join("venv/bin/python3"), "").unwrap();
    fs::write(root.join("app.py"), "print(1)\n").unwrap();
    let tool = project(
        &root,
        "  command:\n    entrypoint: venv/bin/python3\n    args: [app.py]\n",
    );
    assert_eq!(of(&root, &tool).venvs, [root.join("venv")]);
}
