//! `glovebox lint`, `list` and `show` against fixture projects, through the
//! real binary. Each fixture under `tests/fixtures/lint/<rule>/` triggers
//! exactly one rule at a known line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn glovebox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_glovebox"))
        .args(args)
        .output()
        .expect("spawn glovebox")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (fixture = rule id, tool, line, expected exit status)
const CASES: &[(&str, &str, usize, i32)] = &[
    ("yaml-syntax", "broken", 2, 1),
    ("name-mismatch", "alpha", 1, 1),
    ("missing-field", "noentry", 14, 1),
    ("exec-block-count", "twoblocks", 17, 1),
    ("kind-mismatch", "wrongkind", 3, 1),
    ("unknown-kind", "shellkind", 3, 1),
    ("approval-reason-missing", "noreason", 21, 1),
    ("invalid-schema", "badschema", 10, 1),
    ("unknown-placeholder", "typo", 16, 1),
    ("input-shadows-secret", "shadow", 11, 1),
    ("url-authority-placeholder", "redirect", 16, 1),
    ("path-leaves-root", "outside", 19, 0),
    ("grant-through-link", "linked", 19, 0),
    ("unknown-field", "typofield", 2, 1),
    ("unterminated-placeholder", "unterminated", 16, 1),
    ("invalid-placeholder", "badname", 16, 1),
    ("invalid-value", "nocodes", 17, 1),
    ("invalid-type", "slowtype", 17, 1),
    ("secret-name-invalid", "dashsecret", 21, 1),
    ("inputs-not-object", "arrayinputs", 7, 1),
    ("http-with-fs", "httpfs", 23, 0),
    ("http-without-network", "httpnonet", 22, 0),
    ("network-pattern-invalid", "badhost", 21, 1),
    ("secret-hosts-outside-network", "wronghost", 22, 1),
    ("secret-without-hosts", "rawtoken", 20, 0),
    ("secret-hosts-on-http-tool", "httphosts", 25, 0),
    ("input-looks-like-secret", "asktoken", 11, 0),
    ("entrypoint-placeholder", "anyprogram", 15, 0),
    ("entrypoint-missing", "noscript", 15, 0),
    ("example-params-invalid", "badexample", 23, 0),
    ("tool-file-missing", "empty", 1, 0),
    ("builtin-shadowed", "read_file", 1, 0),
    ("dispatch-invalid", "routes", 23, 1),
    ("unused-input", "forgetful", 11, 0),
    ("write-on-control-surface", "selfedit", 20, 0),
    ("database-file-grant", "ledger", 20, 0),
    ("node-modules-writable", "webhook", 1, 0),
];

/// Rules about Glee v1 files: (fixture = rule id, file, tool, line,
/// expected exit status, lines of output). Every v1 file also carries the
/// `legacy-v1` warning.
const V1_CASES: &[(&str, &str, &str, usize, i32, usize)] = &[
    ("legacy-v1", "old-tool.yml", "old_tool", 1, 0, 1),
    ("v1-unsupported", "literal.yml", "literal", 8, 1, 2),
    ("duplicate-tool", "twin.yml", "twin", 1, 1, 3),
];

#[test]
fn each_v1_rule_fires_at_its_line() {
    let mut failures = Vec::new();
    for &(rule, file, tool, line, status, count) in V1_CASES {
        let root = fixtures().join("lint").join(rule);
        let out = glovebox(&["--root", root.to_str().unwrap(), "lint"]);
        let text = stdout(&out);
        let prefix = format!(".glee/tools/{file}:{line}:");
        let severity = if status == 0 { "warning" } else { "error" };
        let tag = format!(": {severity}[{rule}] {tool}: ");
        let found = text
            .lines()
            .any(|l| l.starts_with(&prefix) && l.contains(&tag));
        let legacy = text.contains(&format!("[legacy-v1] {tool}: "));
        if out.status.code() != Some(status) || !found || !legacy || text.lines().count() != count {
            failures.push(format!(
                "{rule}: status {:?} (want {status}), want `{prefix}…{tag}…` and {count} line(s), got:\n{text}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn each_rule_fires_at_its_line() {
    let mut failures = Vec::new();
    for &(rule, tool, line, status) in CASES {
        let root = fixtures().join("lint").join(rule);
        let out = glovebox(&["--root", root.to_str().unwrap(), "lint"]);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        let prefix = format!(".glee/tools/{tool}/tool.yml:{line}:");
        let severity = if status == 0 { "warning" } else { "error" };
        let tag = format!(": {severity}[{rule}] {tool}: ");
        let found = lines
            .iter()
            .any(|l| l.starts_with(&prefix) && l.contains(&tag));
        if out.status.code() != Some(status) || !found || lines.len() != 1 {
            failures.push(format!(
                "{rule}: status {:?} (want {status}), want one line `{prefix}…{tag}…`, got:\n{text}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_but_internal_ones_has_a_fixture() {
    use glovebox::manifest::Rule;
    let covered: Vec<&str> = CASES
        .iter()
        .map(|c| c.0)
        .chain(V1_CASES.iter().map(|c| c.0))
        .collect();
    for rule in Rule::ALL {
        // file-unreadable needs an unreadable file (permissions, size);
        // covered by unit tests of the loader instead.
        if *rule == Rule::FileUnreadable {
            continue;
        }
        // tools.json findings are not tool.yml findings: tests/agentcli.rs.
        if matches!(
            rule,
            Rule::AgentCliInvalid
                | Rule::AgentCliUnknownKey
                | Rule::NameClash
                | Rule::ExceedsCeiling
        ) {
            continue;
        }
        assert!(covered.contains(&rule.id()), "no fixture for {}", rule.id());
    }
}

#[test]
fn unknown_field_suggests_a_fix() {
    let root = fixtures().join("lint/unknown-field");
    let out = glovebox(&["lint", "--root", root.to_str().unwrap()]);
    assert!(
        stdout(&out).contains("did you mean `description`?"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn lint_json_output() {
    let root = fixtures().join("lint/name-mismatch");
    let out = glovebox(&["lint", "--json", "--root", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["errors"], 1);
    let d = &report["diagnostics"][0];
    assert_eq!(d["rule"], "name-mismatch");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["tool"], "alpha");
    assert_eq!(d["file"], ".glee/tools/alpha/tool.yml");
    assert_eq!(d["line"], 1);
    assert_eq!(d["col"], 7);
}

#[test]
fn examples_lint_clean() {
    let root = examples();
    let out = glovebox(&["--root", root.to_str().unwrap(), "lint"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "", "examples should have no findings");
}

#[test]
fn root_before_or_after_subcommand() {
    let root = examples();
    let root = root.to_str().unwrap();
    let before = glovebox(&["--root", root, "list", "--json"]);
    let after = glovebox(&["list", "--json", "--root", root]);
    assert_eq!(before.status.code(), Some(0));
    assert_eq!(stdout(&before), stdout(&after));
    let show = glovebox(&["show", "repo_scan", "--root", root]);
    assert_eq!(show.status.code(), Some(0));
}

#[test]
fn root_found_from_working_directory() {
    let out = Command::new(env!("CARGO_BIN_EXE_glovebox"))
        .args(["list"])
        .current_dir(examples().join("src"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("repo_stats"));
}

#[test]
fn no_root_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_glovebox"))
        .args(["lint"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--root"));
}

#[test]
fn list_outputs() {
    let root = examples();
    let root = root.to_str().unwrap();
    let out = glovebox(&["--root", root, "list", "--json"]);
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "list_files",
            "read_file",
            "repo_scan",
            "repo_stats",
            "slack_notify",
            "web_search",
            "write_file"
        ]
    );
    assert_eq!(tools[2]["kind"], "command");
    assert_eq!(tools[2]["description"], "Scan repo for TODOs");

    let out = glovebox(&["--root", root, "list"]);
    let text = stdout(&out);
    let first = text.lines().find(|l| l.starts_with("repo_scan ")).unwrap();
    assert!(first.contains("command"));
    assert!(first.ends_with("Scan repo for TODOs"));
    assert_eq!(text.lines().count(), 7);
}

#[test]
fn show_fills_defaults() {
    let root = examples();
    let root = root.to_str().unwrap();
    let out = glovebox(&["--root", root, "show", "web_search", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["name"], "web_search");
    assert_eq!(m["exec"]["http"]["method"], "GET");
    assert_eq!(
        m["permissions"]["secrets"]["BRAVE_API_KEY"]["required"],
        true
    );

    // The seed tools spell their defaults out; check them on a bare tool.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".glee/tools/bare");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tool.yml"),
        "name: bare\ndescription: d\nkind: command\nversion: 1\ninputs:\n  schema: {type: object}\noutputs:\n  format: text\nexec:\n  command:\n    entrypoint: /bin/true\n",
    )
    .unwrap();
    let tmp_root = tmp.path().to_str().unwrap();
    let out = glovebox(&["--root", tmp_root, "show", "bare", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let command = &m["exec"]["command"];
    assert_eq!(command["exit_codes_ok"], serde_json::json!([0]));
    assert_eq!(command["timeout_ms"], 30000);
    assert_eq!(command["cwd"], ".");
    assert_eq!(m["permissions"]["network"], false);
    assert_eq!(m["permissions"]["fs"]["read"], serde_json::json!([]));
    assert_eq!(m["approval"]["required"], false);

    let out = glovebox(&["--root", tmp_root, "show", "bare"]);
    let yaml = stdout(&out);
    assert!(yaml.starts_with("name: bare\n"), "{yaml}");
    assert!(yaml.contains("timeout_ms: 30000"), "{yaml}");
}

#[test]
fn show_unknown_tool_exits_2() {
    let root = examples();
    let out = glovebox(&["--root", root.to_str().unwrap(), "show", "web_serch"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no tool named `web_serch`"), "{err}");
    assert!(err.contains("did you mean `web_search`?"), "{err}");
}

#[test]
fn show_invalid_tool_exits_2() {
    let root = fixtures().join("lint/name-mismatch");
    let out = glovebox(&["--root", root.to_str().unwrap(), "show", "alpha"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid manifest"), "{err}");
    assert!(err.contains("name-mismatch"), "{err}");
}

#[test]
fn config_with_unknown_key_fails() {
    let root = fixtures().join("config-unknown-key");
    let out = glovebox(&["--root", root.to_str().unwrap(), "lint"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with(".glee/config.yml:6:3: error[unknown-field] "),
        "{text}"
    );
    assert!(text.contains("did you mean `memory_mb`?"), "{text}");
}

#[test]
fn a_misspelt_network_key_gets_a_suggestion() {
    let root = fixtures().join("network-typo");
    let out = glovebox(&["--root", root.to_str().unwrap(), "lint"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(".glee/tools/typo/tool.yml:15:5: error[unknown-field]")
            && text.contains("did you mean `allow`?"),
        "{text}"
    );
}
