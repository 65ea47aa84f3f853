//! The prover can fail: with one layer of the jail switched off
//! (`crate::jail::weaken`, compiled into this unit-test binary only), the
//! battery reports the invariants that layer holds as broken, naming
//! each with its evidence, and the exit status is not 0; with the whole
//! jail, every applicable invariant holds.
//!
//! The battery is the glovebox binary cargo built beside this test binary
//! (`target/<profile>/glovebox`): the weakened layer is in the supervisor
//! (this process), which prepares every jail; the battery only attacks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::verdict::{Invariant, Report, Verdict};
use super::{prove, Options, EXIT_BROKEN, EXIT_HELD};
use crate::engine::Engine;
use crate::jail::probe::{self, Mode};
use crate::jail::weaken::{self, Layer};
use crate::manifest::project::Project;

/// The glovebox binary beside this test binary (`deps/..`), or
/// `GLOVEBOX_BIN` (a CI stage that runs copies).
fn battery_exe() -> PathBuf {
    if let Some(bin) = std::env::var_os("GLOVEBOX_BIN") {
        return PathBuf::from(bin);
    }
    let me = std::env::current_exe().unwrap();
    let exe = me
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("glovebox"))
        .unwrap();
    assert!(
        exe.is_file(),
        "the battery is the glovebox binary, {} is missing: build it first (cargo build, or cargo test, which builds it)",
        exe.display()
    );
    exe
}

/// Whether a jail can be made here; else says why (and fails under
/// `GLOVEBOX_REQUIRE_KERNEL=1`).
fn jail_here() -> bool {
    let k = probe::kernel();
    if k.mode != Mode::None {
        return true;
    }
    let why = format!(
        "no jail mode here ({})",
        k.namespaces_error.as_deref().unwrap_or("unknown")
    );
    if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
        panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
    }
    eprintln!("SKIPPED (set GLOVEBOX_REQUIRE_KERNEL=1 to fail instead): {why}");
    false
}

/// A project with one command tool that reads `data/`, writes `out/`,
/// has no network and small limits, a second tool, and `.git/hooks`.
fn project() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::Builder::new()
        .prefix("gbx-prove-")
        .tempdir()
        .unwrap();
    let root = dir.path();
    for d in [
        "data",
        "out",
        ".git/hooks",
        ".glee/tools/target",
        ".glee/tools/other",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("data/notes.txt"), "notes\n").unwrap();
    std::fs::write(root.join("secret.txt"), "not granted\n").unwrap();
    std::fs::write(
        root.join(".glee/config.yml"),
        "limits:\n  memory_mb: 64\n  pids: 32\n  output_bytes: 65536\n",
    )
    .unwrap();
    let tool = |name: &str| {
        format!(
            "name: {name}\ndescription: a target for the prover\nkind: command\nversion: 1\n\
             inputs:\n  schema:\n    type: object\n    properties: {{}}\n\
             outputs:\n  format: text\n\
             exec:\n  command:\n    entrypoint: cat\n    args: [data/notes.txt]\n\
             permissions:\n  network: false\n  fs:\n    read: [data]\n    write: [out]\n  secrets: {{}}\n"
        )
    };
    for name in ["target", "other"] {
        std::fs::write(
            root.join(format!(".glee/tools/{name}/tool.yml")),
            tool(name),
        )
        .unwrap();
    }
    let engine = Engine::new(Project::discover(Some(root)).unwrap());
    (dir, engine)
}

/// A variable of this process's environment that glovebox does not set in
/// a jail itself (cargo gives tests several).
fn env_canary() -> (String, String) {
    std::env::vars()
        .find(|(k, v)| {
            !v.is_empty() && !["PATH", "HOME", "TMPDIR", "LANG", "TZ"].contains(&k.as_str())
        })
        .expect("the test process has a variable of its own to use as the canary")
}

/// `doctor --prove` of the tool `target`, with `layer` off.
fn prove_target(engine: &Engine, layer: Option<Layer>) -> Report {
    let options = Options {
        tools: vec!["target".into()],
        exe: battery_exe(),
        env_canary: Some(env_canary()),
    };
    match layer {
        Some(l) => weaken::with(l, || prove(engine, &options)),
        None => prove(engine, &options),
    }
}

/// The invariants of `report` neither held nor not applicable.
fn not_held(report: &Report) -> BTreeSet<Invariant> {
    let tool = &report.tools[0];
    assert!(tool.not_run.is_none(), "{tool:#?}");
    tool.invariants
        .iter()
        .filter(|i| {
            !matches!(
                i.verdict,
                Verdict::Held { .. } | Verdict::NotApplicable { .. }
            )
        })
        .map(|i| i.invariant)
        .collect()
}

fn evidence(report: &Report, inv: Invariant) -> String {
    report.tools[0]
        .invariants
        .iter()
        .find(|i| i.invariant == inv)
        .map(|i| i.verdict.text().to_string())
        .unwrap_or_default()
}

fn assert_weakened(
    engine: &Engine,
    layer: Layer,
    signature: Invariant,
    evidence_says: &str,
    allowed: &[Invariant],
) {
    let report = prove_target(engine, Some(layer));
    for i in &report.tools[0].invariants {
        eprintln!(
            "{layer:?} off: [{}] {}: {}",
            i.verdict.label(),
            i.name,
            i.verdict.text()
        );
    }
    let text = evidence(&report, signature);
    let inv = &report.tools[0].invariants;
    let got: BTreeSet<Invariant> = inv
        .iter()
        .filter(|i| matches!(i.verdict, Verdict::Broken { .. }))
        .map(|i| i.invariant)
        .collect();
    assert!(
        got.contains(&signature),
        "{layer:?} off: {} not reported broken: {inv:#?}",
        signature.name()
    );
    assert!(
        text.contains(evidence_says),
        "{layer:?} off: the evidence of {} does not say {evidence_says:?}: {text}",
        signature.name()
    );
    let outside: Vec<&Invariant> = got.iter().filter(|i| !allowed.contains(i)).collect();
    assert!(
        outside.is_empty(),
        "{layer:?} off: {outside:?} reported broken, which that layer does not hold: {inv:#?}"
    );
    assert_eq!(report.exit_status(), EXIT_BROKEN, "{layer:?} off");
}

#[test]
fn the_whole_jail_holds_and_each_layer_switched_off_is_reported_broken() {
    if !jail_here() {
        return;
    }
    let (_dir, engine) = project();
    let mode = probe::kernel().mode;
    let root = probe::kernel().euid == 0;

    // The whole jail: every applicable invariant held.
    let report = prove_target(&engine, None);
    assert!(not_held(&report).is_empty(), "{report:#?}");
    assert_eq!(report.exit_status(), EXIT_HELD, "{report:#?}");

    // The environment inherited: exactly the environment is broken.
    assert_weakened(
        &engine,
        Layer::Environment,
        Invariant::Environment,
        "reached the jail",
        &[Invariant::Environment],
    );
    // No limits: exactly the resources are broken.
    assert_weakened(
        &engine,
        Layer::Limits,
        Invariant::Resources,
        "past the",
        &[Invariant::Resources],
    );
    // No seccomp: a UDP datagram reaches the canary (Landlock governs
    // TCP and abstract sockets, not UDP); the other doors seccomp alone
    // closes may break with it.
    assert_weakened(
        &engine,
        Layer::Seccomp,
        Invariant::NoNetwork,
        "canary listener",
        &[
            Invariant::NoNetwork,
            Invariant::Kernel,
            Invariant::Terminal,
            Invariant::ReadOnly,
            Invariant::ControlSurface,
            Invariant::Processes,
            Invariant::Resources,
        ],
    );
    if root {
        // Capabilities kept: exactly the capabilities are broken (every
        // other layer holds against root too).
        assert_weakened(
            &engine,
            Layer::Capabilities,
            Invariant::Capabilities,
            "CapEff",
            &[Invariant::Capabilities],
        );
    }
    match mode {
        Mode::Namespaces if probe::kernel().landlock_abi >= crate::jail::fs::TREE_MIN_ABI => {
            // No tree: Landlock still hides and refuses writes, but not a
            // chmod or new times on a read-only grant.
            assert_weakened(
                &engine,
                Layer::Tree,
                Invariant::ReadOnly,
                "the call worked",
                &[Invariant::ReadOnly, Invariant::ControlSurface],
            );
            // No Landlock: the tree holds everything alone.
            let report = prove_target(&engine, Some(Layer::Landlock));
            assert!(not_held(&report).is_empty(), "{report:#?}");
            assert_eq!(report.exit_status(), EXIT_HELD);
        }
        Mode::Namespaces => {
            // No Landlock on this kernel: the tree is the only filesystem
            // layer, and without it nothing hides or protects a file.
            assert_weakened(
                &engine,
                Layer::Tree,
                Invariant::DenyByDefault,
                "read the contents of",
                &[
                    Invariant::DenyByDefault,
                    Invariant::ReadOnly,
                    Invariant::ControlSurface,
                    Invariant::State,
                ],
            );
        }
        Mode::NamespaceFree => {
            // No Landlock: nothing hides the files outside the grants.
            assert_weakened(
                &engine,
                Layer::Landlock,
                Invariant::DenyByDefault,
                "read the contents of",
                &[
                    Invariant::DenyByDefault,
                    Invariant::ReadOnly,
                    Invariant::ControlSurface,
                    Invariant::State,
                    Invariant::NoNetwork,
                    Invariant::Processes,
                ],
            );
        }
        Mode::None => unreachable!("jail_here"),
    }
}

/// `report`'s tool: every invariant unproven or not applicable, none held.
fn assert_nothing_proven(report: &Report, what: &str) {
    let tool = &report.tools[0];
    assert!(tool.not_run.is_none(), "{what}: {tool:#?}");
    for i in &tool.invariants {
        assert!(
            matches!(
                i.verdict,
                Verdict::Inconclusive { .. } | Verdict::NotApplicable { .. }
            ),
            "{what}: {} was {}: {i:#?}",
            i.name,
            i.verdict.label()
        );
    }
    assert_eq!(report.exit_status(), EXIT_BROKEN, "{what}");
}

#[test]
fn a_battery_that_does_not_prove_it_ran_proves_nothing() {
    if !jail_here() {
        return;
    }
    let (dir, engine) = project();
    let prove_with = |exe: PathBuf| {
        let options = Options {
            tools: vec!["target".into()],
            exe,
            env_canary: Some(env_canary()),
        };
        prove(&engine, &options)
    };
    // A program that prints nothing, in the battery's place.
    let truth = std::fs::canonicalize("/bin/true").unwrap();
    assert_nothing_proven(&prove_with(truth), "a silent battery");
    // A forged battery: a first line with another nonce, then every
    // attempt refused.
    let forged = |nonce: &str| {
        format!(
            "#!/bin/sh\n{nonce}\necho \"{{\\\"alive\\\":{{\\\"nonce\\\":\\\"$nonce\\\",\\\"pid\\\":1}}}}\"\n\
             i=0\nwhile [ $i -lt 400 ]; do\n\
             echo \"{{\\\"reply\\\":{{\\\"id\\\":$i,\\\"ok\\\":false,\\\"errno\\\":1}}}}\"\n\
             i=$((i+1))\ndone\necho '{{\"done\":{{\"count\":400}}}}'\n"
        )
    };
    let script = dir.path().join("forged.sh");
    let write = |body: String| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(forged("nonce=0123456789abcdef"));
    assert_nothing_proven(&prove_with(script.clone()), "a battery of another run");
    // The right nonce (read from its request), every attempt "refused":
    // refusals alone prove nothing (each family's control fails, and the
    // checks that read a fact find none).
    write(forged(
        "nonce=$(head -c 100 | sed -n 's/.*\"nonce\":\"\\([0-9a-f]*\\)\".*/\\1/p')",
    ));
    assert_nothing_proven(&prove_with(script), "a battery that refuses everything");
}
