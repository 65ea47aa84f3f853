//! Glee v1 single-file tools (`.glee/tools/<name>.yml`): the seed's own
//! examples (tests/fixtures/v1/, copied verbatim from tools-v1.md) load,
//! lint with only the legacy warning, and run against local stand-in
//! servers that record what reached them; `glovebox migrate` turns them
//! into v2 directories that send byte-identical requests and return
//! identical Outcomes; broken v1 files get positioned diagnostics; and a
//! parameter value cannot move a v1 tool's request to another host or add
//! a header. No test needs the jail: http calls run in-process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod httpkit;
mod runkit;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use httpkit::*;
use runkit::*;
use serde_json::{json, Value};

const BRAVE: &str = "https://api.search.brave.com";
const GITHUB: &str = "https://api.github.com";
const SLACK: &str = "https://slack.com";
const SECRET: &str = "sk-v1-9d8c7b6a5f";

/// Writes the seed's v1 example `file`, its real origin replaced by `origin`.
fn seed(f: &Fixture, file: &str, real: &str, origin: &str) {
    let text = fs::read_to_string(format!(
        "{}/tests/fixtures/v1/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert!(text.contains(real), "{file} no longer calls {real}");
    f.file(&format!(".glee/tools/{file}"), &text.replace(real, origin));
}

fn all_seeds(f: &Fixture, origin: &str) {
    seed(f, "web-search.yml", BRAVE, origin);
    seed(f, "github-issues.yml", GITHUB, origin);
    seed(f, "slack-notify.yml", SLACK, origin);
}

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.config(&json!({"security": {"http": {"allow_private": true}}}));
    f
}

/// `glovebox ARGS… --root ROOT`: (exit status, stdout, stderr).
fn glovebox(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::bin())
        .args(args)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lint_json(root: &Path) -> Value {
    let (_, stdout, stderr) = glovebox(root, &["lint", "--json"]);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"))
}

fn echo_server() -> Server {
    Server::start(|r| {
        Reply::json(json!({
            "web": {"results": [{"title": "T", "url": "https://u", "description": "D", "x": 1}]},
            "ok": true, "method": r.method, "target": r.target,
        }))
    })
}

#[test]
fn seed_examples_load_and_lint_with_only_the_legacy_warning() {
    let f = fixture();
    all_seeds(&f, "https://example.invalid");
    let report = lint_json(&f.root);
    assert_eq!(report["ok"], json!(true), "{report:#}");
    let diags = report["diagnostics"].as_array().unwrap();
    let mut seen: Vec<(String, String, u64)> = diags
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap().to_owned(),
                d["file"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (
                "legacy-v1".into(),
                ".glee/tools/github-issues.yml".into(),
                1
            ),
            ("legacy-v1".into(), ".glee/tools/slack-notify.yml".into(), 1),
            ("legacy-v1".into(), ".glee/tools/web-search.yml".into(), 1),
        ]
    );
    assert!(diags[0]["message"]
        .as_str()
        .unwrap()
        .contains("glovebox migrate github_issues"));
    let (code, stdout, _) = glovebox(&f.root, &["list", "--json"]);
    assert_eq!(code, 0);
    for name in ["github_issues", "slack_notify", "web_search"] {
        assert!(stdout.contains(&format!("\"{name}\"")), "{stdout}");
    }
    let (code, stdout, _) = glovebox(&f.root, &["show", "github_issues", "--json"]);
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        shown["exec"]["http"]["dispatch"]["routes"]["create"]["method"],
        "POST"
    );
}

#[test]
fn approval_covers_the_v1_file() {
    let f = fixture();
    all_seeds(&f, "https://example.invalid");
    let project = glovebox::manifest::Project::load(&f.root).unwrap();
    let tool = project.tool("web_search").unwrap();
    assert_eq!(tool.origin, glovebox::manifest::Origin::V1);
    let files = glovebox::approval::covered_files(&project.root, tool);
    assert_eq!(files, [project.root.join(".glee/tools/web-search.yml")]);
    // The MCP catalog lists v1 tools like any other, with their schema.
    let catalog = glovebox::serve::mcp::catalog::tools(&project);
    let github = catalog
        .iter()
        .find(|t| t.name == "github_issues")
        .expect("github_issues is served");
    assert_eq!(
        github.input_schema["properties"]["action"]["enum"],
        json!(["list", "create", "get"])
    );
}

#[test]
fn web_search_sends_query_and_secret_header_and_projects_fields() {
    let server = echo_server();
    let f = fixture();
    seed(&f, "web-search.yml", BRAVE, &server.origin());
    let r = f.run_env(
        "web_search",
        &["query=rust & tokio?", "freshness=week"],
        &[("BRAVE_API_KEY", SECRET)],
    );
    r.assert_ok();
    assert_eq!(
        r.output(),
        &json!([{"title": "T", "url": "https://u", "description": "D"}])
    );
    let req = server.only();
    assert_eq!(req.method, "GET");
    assert_eq!(req.path, "/res/v1/web/search");
    assert_eq!(
        req.query_pairs(),
        [
            ("q".to_string(), "rust & tokio?".to_string()),
            ("count".to_string(), "10".to_string()),
            ("freshness".to_string(), "week".to_string()),
        ]
    );
    assert_eq!(req.header("x-subscription-token"), Some(SECRET));
    assert_eq!(req.header("accept"), Some("application/json"));
    // The secret went to its one declared place, and does not come back.
    assert_eq!(req.raw().matches(SECRET).count(), 1, "{}", req.raw());
    assert!(!r.mentions(SECRET));
}

#[test]
fn web_search_without_its_secret_sends_nothing() {
    let server = echo_server();
    let f = fixture();
    seed(&f, "web-search.yml", BRAVE, &server.origin());
    f.run("web_search", &["query=x"])
        .assert_failed("secret_missing", 1);
    assert_eq!(server.connections(), 0);
}

#[test]
fn github_issues_routes_on_action() {
    let server = echo_server();
    let f = fixture();
    seed(&f, "github-issues.yml", GITHUB, &server.origin());
    let env = [("GITHUB_TOKEN", SECRET)];
    f.run_env("github_issues", &["action=list", "repo=octo"], &env)
        .assert_ok();
    f.run_env(
        "github_issues",
        &[
            "--params",
            r#"{"action": "create", "repo": "octo", "title": "T", "body": "B \"q\""}"#,
        ],
        &env,
    )
    .assert_ok();
    f.run_env(
        "github_issues",
        &[
            "--params",
            r#"{"action": "get", "repo": "octo", "issue_number": 7}"#,
        ],
        &env,
    )
    .assert_ok();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].target.as_str()),
        ("GET", "/repos/octo/issues")
    );
    assert!(reqs[0].body.is_empty());
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].target.as_str()),
        ("POST", "/repos/octo/issues")
    );
    assert_eq!(reqs[1].json(), json!({"title": "T", "body": "B \"q\""}));
    assert_eq!(reqs[1].header("content-type"), Some("application/json"));
    assert_eq!(
        (reqs[2].method.as_str(), reqs[2].target.as_str()),
        ("GET", "/repos/octo/issues/7")
    );
    for r in &reqs {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str())
        );
        assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
        assert_eq!(r.raw().matches(SECRET).count(), 1);
    }
    // An owner/repo value stays one path segment.
    f.run_env("github_issues", &["action=list", "repo=o/r"], &env)
        .assert_ok();
    assert_eq!(server.requests()[3].target, "/repos/o%2Fr/issues");

    // No route, no action, or a route whose placeholder is unset: refused
    // before anything is sent.
    let before = server.connections();
    for args in [
        vec!["action=delete", "repo=octo"],
        vec!["repo=octo"],
        vec!["action=get", "repo=octo"],
    ] {
        f.run_env("github_issues", &args, &env)
            .assert_failed("input_invalid", 1);
    }
    assert_eq!(server.connections(), before);
}

#[test]
fn slack_notify_posts_only_the_set_fields() {
    let server = echo_server();
    let f = fixture();
    seed(&f, "slack-notify.yml", SLACK, &server.origin());
    let r = f.run_env(
        "slack_notify",
        &["channel=general", "message=Deployment complete!"],
        &[("SLACK_BOT_TOKEN", SECRET)],
    );
    r.assert_ok();
    assert_eq!(r.output()["ok"], json!(true));
    let req = server.only();
    assert_eq!(req.method, "POST");
    assert_eq!(req.target, "/api/chat.postMessage");
    assert_eq!(
        req.json(),
        json!({"channel": "general", "text": "Deployment complete!"})
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
}

/// Calls made against the v1 tools and their migrated twins.
fn round_trip_calls() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "web_search",
            vec!["query=best python web frameworks 2025", "count=5"],
        ),
        ("web_search", vec!["query=a/b?c#d", "freshness=week"]),
        ("web_search", vec!["count=5"]),
        ("github_issues", vec!["action=list", "repo=anthropics"]),
        (
            "github_issues",
            vec![
                "--params",
                r#"{"action":"create","repo":"myorg","title":"Add dark mode support","body":"Users have requested dark mode..."}"#,
            ],
        ),
        (
            "github_issues",
            vec![
                "--params",
                r#"{"action":"get","repo":"r","issue_number":456}"#,
            ],
        ),
        ("github_issues", vec!["action=nope", "repo=r"]),
        (
            "slack_notify",
            vec![
                "channel=C1234567890",
                "message=Fixed",
                "thread_ts=1234567890.123456",
            ],
        ),
        ("slack_notify", vec!["channel=general"]),
    ]
}

#[test]
fn migrated_tools_behave_identically() {
    let server = echo_server();
    let v1 = fixture();
    all_seeds(&v1, &server.origin());
    let v2 = fixture();
    all_seeds(&v2, &server.origin());

    let (code, stdout, stderr) = glovebox(&v2.root, &["migrate", "--all"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let tools = v2.root.join(".glee/tools");
    for (file, name) in [
        ("web-search", "web_search"),
        ("github-issues", "github_issues"),
        ("slack-notify", "slack_notify"),
    ] {
        assert!(!tools.join(format!("{file}.yml")).exists());
        assert_eq!(
            fs::read(tools.join(format!("{file}.yml.v1-migrated"))).unwrap(),
            fs::read(v1.root.join(format!(".glee/tools/{file}.yml"))).unwrap(),
            "the v1 file is kept byte for byte"
        );
        let text = fs::read_to_string(tools.join(name).join("tool.yml")).unwrap();
        assert!(
            text.starts_with(&format!(
                "# Migrated by `glovebox migrate` from the Glee v1 file .glee/tools/{file}.yml."
            )),
            "{text}"
        );
    }
    let report = lint_json(&v2.root);
    assert_eq!(report["diagnostics"], json!([]), "{report:#}");

    let env = [
        ("BRAVE_API_KEY", SECRET),
        ("GITHUB_TOKEN", SECRET),
        ("SLACK_BOT_TOKEN", SECRET),
    ];
    for (name, args) in round_trip_calls() {
        let before = server.requests().len();
        let a = v1.run_env(name, &args, &env);
        let mid = server.requests().len();
        let b = v2.run_env(name, &args, &env);
        let after = server.requests();
        let strip = |c: &Called| {
            let mut v = c.json.clone();
            v.as_object_mut().unwrap().remove("duration_ms");
            (c.code, v)
        };
        assert_eq!(strip(&a), strip(&b), "{name} {args:?}");
        let sent_a: Vec<String> = after[before..mid].iter().map(Recorded::raw).collect();
        let sent_b: Vec<String> = after[mid..].iter().map(Recorded::raw).collect();
        assert_eq!(sent_a, sent_b, "{name} {args:?}");
    }
    // The comparison saw both kinds of result.
    assert!(server.requests().len() >= 6);
}

#[test]
fn migrate_refuses_to_overwrite_and_dry_run_writes_nothing() {
    let f = fixture();
    all_seeds(&f, "https://example.invalid");
    let before = fs::read_to_string(f.root.join(".glee/tools/web-search.yml")).unwrap();
    let (code, stdout, _) = glovebox(&f.root, &["migrate", "web_search", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("would write .glee/tools/web_search/tool.yml"),
        "{stdout}"
    );
    assert!(
        stdout.contains("X-Subscription-Token: \"${BRAVE_API_KEY}\""),
        "{stdout}"
    );
    assert!(!f.root.join(".glee/tools/web_search").exists());

    f.file(".glee/tools/web_search/notes.txt", "mine");
    let (code, _, stderr) = glovebox(&f.root, &["migrate", "web-search"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("already exists; refusing to overwrite"),
        "{stderr}"
    );
    assert_eq!(
        fs::read_to_string(f.root.join(".glee/tools/web-search.yml")).unwrap(),
        before
    );
    assert_eq!(
        fs::read_to_string(f.root.join(".glee/tools/web_search/notes.txt")).unwrap(),
        "mine"
    );
    let (code, _, stderr) = glovebox(&f.root, &["migrate", "nope"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("`nope` is not a Glee v1 tool"), "{stderr}");

    let (code, stdout, stderr) = glovebox(&f.root, &["migrate", "slack_notify", "--remove"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("v1 file removed"), "{stdout}");
    assert!(!f.root.join(".glee/tools/slack-notify.yml").exists());
    assert!(!f
        .root
        .join(".glee/tools/slack-notify.yml.v1-migrated")
        .exists());
    assert!(f.root.join(".glee/tools/slack_notify/tool.yml").is_file());
}

#[test]
fn a_v1_file_beside_a_v2_dir_of_the_same_name_is_an_error_naming_both() {
    let server = echo_server();
    let f = fixture();
    seed(&f, "web-search.yml", BRAVE, &server.origin());
    let (code, _, stderr) = glovebox(&f.root, &["migrate", "web_search", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    // A hand-made copy of the migrated dir, with the v1 file still there.
    let (_, stdout, _) = glovebox(&f.root, &["migrate", "web_search", "--dry-run"]);
    let text: String = stdout.lines().skip(1).collect::<Vec<_>>().join("\n");
    f.file(".glee/tools/web_search/tool.yml", &text);
    let (code, stdout, _) = glovebox(&f.root, &["lint"]);
    assert_eq!(code, 1);
    let dup: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("[duplicate-tool]"))
        .collect();
    assert_eq!(dup.len(), 2, "{stdout}");
    for line in dup {
        assert!(
            line.contains(".glee/tools/web-search.yml")
                && line.contains(".glee/tools/web_search/tool.yml"),
            "{line}"
        );
    }
    f.run_env("web_search", &["query=x"], &[("BRAVE_API_KEY", SECRET)])
        .assert_failed("manifest_invalid", 2);
    assert_eq!(server.connections(), 0);
}

#[test]
fn broken_v1_files_get_positioned_diagnostics() {
    let f = fixture();
    f.file(
        ".glee/tools/bad.yml",
        "name: bad\n\
         description: d\n\
         paramters: []\n\
         api:\n  endpoint: https://a.example/x\n",
    );
    f.file(
        ".glee/tools/key.yml",
        "name: key\ndescription: d\napi:\n  endpoint: https://a.example/x\n  headers:\n    X-Key: ${API_KEY}\n",
    );
    f.file(
        ".glee/tools/cat.yml",
        "name: cat\ndescription: d\nparameters:\n  - name: q\n    category: cookie\napi:\n  endpoint: https://a.example/${q}\n",
    );
    f.file(
        ".glee/tools/sec.yml",
        "name: sec\ndescription: d\napi:\n  endpoint: https://a.example/\n  headers:\n    A: ${A}\nsecrets:\n  A: ${env:B}\n",
    );
    f.file(
        ".glee/tools/two.yml",
        "name: two\ndescription: d\napi:\n  endpoint: https://a.example/\n  base_url: https://a.example\n",
    );
    f.file(
        ".glee/tools/named.yml",
        "name: other\ndescription: d\napi:\n  endpoint: https://a.example/\n",
    );
    f.file(".glee/tools/syntax.yml", "name: [x\n");
    let (code, stdout, _) = glovebox(&f.root, &["lint"]);
    assert_eq!(code, 1);
    for want in [
        ".glee/tools/bad.yml:3:1: error[unknown-field] bad: unknown field `paramters`; did you mean `parameters`?",
        ".glee/tools/key.yml:6:12: error[unknown-placeholder] key: `${API_KEY}`",
        ".glee/tools/cat.yml:5:15: error[invalid-value] cat: `parameters[0].category` is `cookie`",
        ".glee/tools/sec.yml:8:6: error[v1-unsupported] sec: secret `A` reads `${env:B}`",
        ".glee/tools/two.yml:4:13: error[v1-unsupported] two: `api` has both `endpoint` and",
        ".glee/tools/named.yml:1:7: error[name-mismatch] other: name `other` differs from the file name `named.yml`",
        ".glee/tools/syntax.yml:2:1: error[yaml-syntax] syntax:",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(want)),
            "missing {want:?} in\n{stdout}"
        );
    }
    let r = f.run("bad", &[]);
    r.assert_failed("manifest_invalid", 2);
    // A broken file is reported under its `name`, not its file stem.
    f.file(
        ".glee/tools/web-bad.yml",
        "name: web_bad\ndescription: d\napi:\n  endpoint: https://a.example/\n  methd: GET\n",
    );
    let r = f.run("web_bad", &[]);
    r.assert_failed("manifest_invalid", 2);
    assert!(r.message().contains("invalid manifest"), "{r:#?}");
}

/// A v1 tool whose URL path, fragment, query and a header each take a
/// parameter; `evil` is a second server a value tries to reach.
fn injection_tool(f: &Fixture, origin: &str) {
    f.file(
        ".glee/tools/probe.yml",
        &format!(
            "name: probe\ndescription: d\nparameters:\n  - name: p\n    type: string\n    category: path\n    required: true\n  - name: h\n    type: string\n    category: hash\n  - name: q\n    type: string\n    category: query\n  - name: hd\n    type: string\n    category: header\napi:\n  endpoint: {origin}/api/${{p}}/end#${{h}}\n  headers:\n    X-Probe: v=${{hd}}\n    X-Key: ${{KEY}}\n  query_params:\n    q: ${{q}}\nsecrets:\n  KEY: ${{env:KEY}}\n"
        ),
    );
}

#[test]
fn parameter_values_cannot_change_the_host_or_add_headers() {
    let server = echo_server();
    let evil = Server::start(|_| Reply::json(json!({"evil": true})));
    let evil_host = format!("127.0.0.1:{}", evil.port());
    let f = fixture();
    injection_tool(&f, &server.origin());
    let env = [("KEY", SECRET)];
    // The probe proves the tool runs and reaches the stand-in.
    f.run_env("probe", &["p=ok", "h=top", "q=1", "hd=x"], &env)
        .assert_ok();
    let first = server.only();
    assert_eq!(first.target, "/api/ok/end?q=1");
    assert_eq!(first.header("x-probe"), Some("v=x"));

    let hostile = [
        "../../admin".to_string(),
        "..".to_string(),
        "#frag".to_string(),
        "?x=1".to_string(),
        format!("@{evil_host}"),
        format!("http://{evil_host}/"),
        format!("//{evil_host}/x"),
        "a\r\nX-Evil: 1".to_string(),
        "a\nHost: evil".to_string(),
    ];
    let mut refused = 0;
    for value in &hostile {
        for param in ["p", "h", "q", "hd"] {
            let mut params = json!({"p": "ok", "h": "top", "q": "1", "hd": "x"});
            params[param] = json!(value);
            let r = f.run_env("probe", &["--params", &params.to_string()], &env);
            if r.json["ok"] == json!(false) {
                assert_eq!(r.kind(), "input_invalid", "{param}={value:?}: {r:#?}");
                refused += 1;
            }
            assert!(!r.mentions(SECRET));
        }
    }
    assert_eq!(evil.connections(), 0, "a value reached another server");
    // Both paths were taken: `..` in the path and CR/LF in the header are
    // refused, everything else is sent encoded.
    assert_eq!(refused, 3, "refused {refused}");
    assert_eq!(server.requests().len(), 1 + hostile.len() * 4 - refused);
    let port = server.port().to_string();
    for req in server.requests() {
        assert_eq!(
            req.header("host"),
            Some(format!("127.0.0.1:{port}").as_str()),
            "{req:#?}"
        );
        assert!(
            req.path.starts_with("/api/") && req.path.ends_with("/end"),
            "{req:#?}"
        );
        assert_eq!(req.path.matches('/').count(), 3, "one segment: {req:#?}");
        assert!(!req.target.contains('#'), "{req:#?}");
        assert!(req.header("x-evil").is_none(), "{req:#?}");
        assert_eq!(req.headers.iter().filter(|(n, _)| n == "host").count(), 1);
        let q = req.query_pairs();
        assert!(q.len() == 1 && q[0].0 == "q", "{req:#?}");
        assert_eq!(req.raw().matches(SECRET).count(), 1, "{req:#?}");
    }
}

#[test]
fn an_agent_cannot_create_a_tool_over_a_v1_file() {
    let f = fixture();
    seed(&f, "web-search.yml", BRAVE, "https://example.invalid");
    f.config(&json!({"security": {"max_permissions": {"network": false, "fs": {"read": ["."]}}}}));
    let def = f.base.join("def.json");
    fs::write(
        &def,
        json!({
            "description": "d", "kind": "command", "version": 1,
            "inputs": {"schema": {"type": "object"}},
            "outputs": {"format": "text"},
            "exec": {"command": {"entrypoint": "true"}},
            "permissions": {"fs": {"read": ["."]}},
            "approval": {"required": false}
        })
        .to_string(),
    )
    .unwrap();
    let before = fs::read(f.root.join(".glee/tools/web-search.yml")).unwrap();
    let create = |name: &str| {
        Command::new(common::bin())
            .args(["create", name, "--definition", def.to_str().unwrap()])
            .arg("--root")
            .arg(&f.root)
            .env("GLOVEBOX_STATE_DIR", f.base.join("state"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // The definition itself is acceptable: a fresh name is created.
    let fresh = create("fresh_tool");
    assert!(fresh.status.success(), "{fresh:?}");
    for name in ["web_search", "web-search"] {
        let out = create(name);
        assert!(!out.status.success(), "{name}: {out:?}");
        assert!(!f.root.join(".glee/tools").join(name).exists(), "{name}");
    }
    assert_eq!(
        fs::read(f.root.join(".glee/tools/web-search.yml")).unwrap(),
        before
    );
}
