//! http tools end to end: the real binary against local HTTP and HTTPS
//! servers that record what reached them. Each test judges the effect on
//! the server side (what it received, or that it received nothing), not
//! only the Outcome.
//!
//! Every server listens on 127.0.0.1, so projects set
//! `security.http.allow_private: true` unless the test is about the SSRF
//! guard itself. No test needs the jail: http calls run in-process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod httpkit;
mod runkit;

use std::time::{Duration, Instant};

use httpkit::*;
use runkit::*;
use serde_json::{json, Value};

const SECRET: &str = "sk-live-7f3a9c2e1b";

fn allow_private(f: &Fixture) {
    f.config(&json!({"security": {"http": {"allow_private": true}}}));
}

/// An http tool; `http` is the `exec.http` block, `inputs` its properties
/// (`required` set separately), one optional secret `TOKEN`.
fn http_tool(name: &str, properties: Value, http: Value) -> Value {
    json!({
        "name": name,
        "description": "test http tool",
        "kind": "http",
        "version": 1,
        "inputs": {"schema": schema(properties)},
        "outputs": {"format": "json"},
        "exec": {"http": http},
        "permissions": {"network": true, "secrets": {"TOKEN": {"type": "string", "required": false}}},
        "approval": {"required": false},
    })
}

/// The seed's example tool `name`, pointed at `origin` instead of `real`.
fn example_tool(f: &Fixture, name: &str, real: &str, origin: &str) {
    let text = std::fs::read_to_string(format!(
        "{}/examples/.glee/tools/{name}/tool.yml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert!(text.contains(real), "{name} no longer calls {real}");
    f.file(
        &format!(".glee/tools/{name}/tool.yml"),
        &text.replace(real, origin),
    );
}

fn run_secret(f: &Fixture, name: &str, args: &[&str]) -> Called {
    f.run_env(name, args, &[("TOKEN", SECRET)])
}

#[test]
fn web_search_projects_json_path_and_fields() {
    let server = Server::start(|_| {
        Reply::json(json!({"type": "search", "web": {"results": [
            {"title": "A", "url": "https://a", "description": "first", "age": "1d"},
            {"title": "B", "url": "https://b", "description": "second", "extra": [1]}
        ]}}))
    });
    let f = Fixture::new();
    allow_private(&f);
    example_tool(
        &f,
        "web_search",
        "https://api.search.brave.com",
        &server.origin(),
    );
    let r = f.run_env(
        "web_search",
        &["query=rust & tokio?", "--yes"],
        &[("BRAVE_API_KEY", "brave-key-123")],
    );
    r.assert_ok();
    assert_eq!(
        r.output(),
        &json!([
            {"title": "A", "url": "https://a", "description": "first"},
            {"title": "B", "url": "https://b", "description": "second"}
        ])
    );
    assert!(r.json["warnings"].as_array().unwrap().is_empty(), "{r:#?}");
    let req = server.only();
    assert_eq!(req.method, "GET");
    assert_eq!(req.path, "/res/v1/web/search");
    // Default applied, unset optional `freshness` absent, value encoded.
    assert_eq!(
        req.query_pairs(),
        vec![
            ("q".to_string(), "rust & tokio?".to_string()),
            ("count".to_string(), "10".to_string())
        ]
    );
    assert_eq!(req.header("x-subscription-token"), Some("brave-key-123"));
    assert_eq!(req.header("accept"), Some("application/json"));
    assert!(!req.raw().contains("${"), "{}", req.raw());
    // The key does not come back in the Outcome.
    assert!(!r.mentions("brave-key-123"));
}

#[test]
fn web_search_needs_approval_and_its_secret() {
    let server = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    allow_private(&f);
    example_tool(
        &f,
        "web_search",
        "https://api.search.brave.com",
        &server.origin(),
    );
    f.run_env("web_search", &["query=x"], &[("BRAVE_API_KEY", "k")])
        .assert_failed("approval_required", 1);
    if std::env::var_os("BRAVE_API_KEY").is_none() {
        f.run("web_search", &["query=x", "--yes"])
            .assert_failed("secret_missing", 1);
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn slack_notify_posts_a_typed_body_without_unset_fields() {
    let server = Server::start(|_| Reply::json(json!({"ok": true, "ts": "1.2"})));
    let f = Fixture::new();
    allow_private(&f);
    example_tool(&f, "slack_notify", "https://slack.com", &server.origin());
    let env = [("SLACK_BOT_TOKEN", "xoxb-secret-token")];
    let r = f.run_env(
        "slack_notify",
        &["channel=general", "message=Deploy \"v2\" done", "--yes"],
        &env,
    );
    r.assert_ok();
    assert_eq!(r.output(), &json!({"ok": true, "ts": "1.2"}));
    let req = server.only();
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/api/chat.postMessage");
    assert_eq!(
        req.header("authorization"),
        Some("Bearer xoxb-secret-token")
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.json(),
        json!({"channel": "general", "text": "Deploy \"v2\" done"})
    );

    let r = f.run_env(
        "slack_notify",
        &[
            "--params",
            r#"{"channel": "C1", "message": "m", "thread_ts": "1234.5"}"#,
            "--yes",
        ],
        &env,
    );
    r.assert_ok();
    assert_eq!(
        server.requests()[1].json(),
        json!({"channel": "C1", "text": "m", "thread_ts": "1234.5"})
    );
}

#[test]
fn body_fields_keep_their_json_types() {
    let server = Server::start(|r| Reply::json(json!({"got": r.json()})));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "typed",
        json!({"n": {"type": "integer"}, "b": {"type": "boolean"}, "o": {"type": "object"},
               "l": {"type": "array"}, "s": {"type": "string"}}),
        json!({"method": "PUT", "url": format!("{}/t", server.origin()),
               "body": {"n": "${n}", "b": "${b}", "o": "${o}", "l": "${l}", "s": "${s}",
                        "mixed": "n=${n}", "nested": {"x": ["${n}", "${s}"]}}}),
    ));
    let params = json!({"n": 7, "b": false, "o": {"k": [1, null]}, "l": [1, "2"], "s": "${TOKEN}"});
    let r = run_secret(&f, "typed", &["--params", &params.to_string()]);
    r.assert_ok();
    let want = json!({"n": 7, "b": false, "o": {"k": [1, null]}, "l": [1, "2"], "s": "${TOKEN}",
                      "mixed": "n=7", "nested": {"x": [7, "${TOKEN}"]}});
    let req = server.only();
    assert_eq!(req.method, "PUT");
    // A parameter holding `${TOKEN}` stays literal: never expanded again.
    assert_eq!(req.json(), want);
    assert!(!req.raw().contains(SECRET));
}

#[test]
fn unset_optional_parameters_are_left_out_of_query_headers_and_body() {
    let server = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "opt",
        json!({"q": {"type": "string"}, "opt": {"type": "string"}, "n": {"type": "integer"}}),
        json!({"method": "POST", "url": format!("{}/o", server.origin()),
               "query": {"q": "${q}", "opt": "${opt}", "pre": "x-${opt}", "fixed": 1},
               "headers": {"X-Opt": "${opt}", "X-Pre": "v ${opt}", "X-Q": "${q}"},
               "body": {"q": "${q}", "opt": "${opt}", "n": "${n}", "list": ["${opt}", "${q}"]}}),
    ));
    run_secret(&f, "opt", &["q=hello world"]).assert_ok();
    let req = server.only();
    assert_eq!(
        req.query_pairs(),
        vec![
            ("q".to_string(), "hello world".to_string()),
            ("fixed".to_string(), "1".to_string())
        ]
    );
    assert_eq!(req.header("x-q"), Some("hello world"));
    assert_eq!(req.header("x-opt"), None);
    assert_eq!(req.header("x-pre"), None);
    assert_eq!(
        req.json(),
        json!({"q": "hello world", "list": ["hello world"]})
    );
    assert!(!req.raw().contains("${"), "{}", req.raw());
}

/// A tool whose secret goes in a header and a query entry, to `origin`.
fn secret_tool(name: &str, origin: &str, follow: bool) -> Value {
    http_tool(
        name,
        json!({}),
        json!({"method": "GET", "url": format!("{origin}/start"),
               "headers": {"Authorization": "Bearer ${TOKEN}", "X-Plain": "p"},
               "query": {"key": "${TOKEN}", "keep": "k"},
               "follow_cross_origin_redirects": follow}),
    )
}

#[test]
fn cross_origin_redirect_is_refused_and_the_other_origin_gets_nothing() {
    let other = Server::start(|_| Reply::json(json!({"stolen": true})));
    let location = format!("{}/steal?x=1", other.origin());
    let loc = location.clone();
    let server = Server::start(move |_| Reply::redirect(302, &loc));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&secret_tool("redir", &server.origin(), false));
    let r = run_secret(&f, "redir", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains(&location), "{r:#?}");
    assert_eq!(r.details()["location"], json!(location));
    assert_eq!(r.details()["status"], json!(302));
    // The first origin got the secret (its template says so); the other
    // origin got no connection at all.
    assert_eq!(
        server.only().header("authorization"),
        Some(&*format!("Bearer {SECRET}"))
    );
    assert_eq!(other.connections(), 0);
    assert!(!r.mentions(SECRET));
}

#[test]
fn cross_origin_redirect_opt_in_strips_secret_bearing_parts() {
    let other = Server::start(|_| Reply::json(json!({"at": "other"})));
    let other_origin = other.origin();
    // The server echoes the secret back in the Location's query.
    let server = Server::start(move |r| {
        let key = r
            .query_pairs()
            .into_iter()
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v)
            .unwrap_or_default();
        Reply::redirect(301, &format!("{other_origin}/landing?key={key}&keep=k&x=1"))
    });
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&secret_tool("follow", &server.origin(), true));
    let r = run_secret(&f, "follow", &[]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"at": "other"}));
    let first = server.only();
    assert_eq!(
        first.header("authorization"),
        Some(&*format!("Bearer {SECRET}"))
    );
    let landed = other.only();
    assert_eq!(landed.path, "/landing");
    assert!(!landed.raw().contains(SECRET), "{}", landed.raw());
    assert_eq!(landed.header("authorization"), None);
    assert_eq!(landed.header("x-plain"), Some("p"));
    assert_eq!(
        landed.query_pairs(),
        vec![
            ("keep".to_string(), "k".to_string()),
            ("x".to_string(), "1".to_string())
        ]
    );
}

#[test]
fn same_origin_redirects_are_followed_with_the_request_intact() {
    let server = Server::start(|r| match r.path.as_str() {
        "/start" => Reply::redirect(302, "/middle?step=2"),
        "/middle" => Reply::redirect(307, "/final"),
        _ => Reply::json(json!({"final": true})),
    });
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&secret_tool("same", &server.origin(), false));
    let r = run_secret(&f, "same", &[]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"final": true}));
    let reqs = server.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/start", "/middle", "/final"]);
    for req in &reqs {
        assert_eq!(
            req.header("authorization"),
            Some(&*format!("Bearer {SECRET}"))
        );
    }
}

#[test]
fn redirect_loops_stop_after_five() {
    let server = Server::start(|r| {
        let n: u32 = r.path.trim_start_matches("/r").parse().unwrap_or(0);
        Reply::redirect(302, &format!("/r{}", n + 1))
    });
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "loop",
        json!({}),
        json!({"method": "GET", "url": format!("{}/r0", server.origin())}),
    ));
    let r = f.run("loop", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("redirects"), "{r:#?}");
    assert_eq!(server.requests().len(), 6);
}

#[test]
fn crlf_in_a_header_parameter_is_refused_before_sending() {
    let server = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "hdr",
        json!({"v": {"type": "string"}}),
        json!({"method": "GET", "url": format!("{}/h", server.origin()),
               "headers": {"X-Value": "${v}"}}),
    ));
    for v in ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\u{0}b"] {
        let params = json!({ "v": v }).to_string();
        let r = f.run("hdr", &["--params", &params]);
        r.assert_failed("input_invalid", 1);
        assert!(r.message().contains("X-Value"), "{r:#?}");
    }
    assert_eq!(server.connections(), 0);
    // A clean value goes through, as one header.
    f.run("hdr", &["v=plain value"]).assert_ok();
    assert_eq!(server.only().header("x-value"), Some("plain value"));
}

#[test]
fn path_parameters_stay_one_segment_on_the_same_host() {
    let other = Server::start(|_| Reply::json(json!({"other": true})));
    let server = Server::start(|_| Reply::json(json!({"ok": true})));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "path",
        json!({"p": {"type": "string"}}),
        json!({"method": "GET", "url": format!("{}/api/${{p}}/end", server.origin())}),
    ));
    let at_other = format!("@127.0.0.1:{}/x", other.port());
    let cases = [
        (
            at_other.as_str(),
            format!("%40127.0.0.1%3A{}%2Fx", other.port()),
        ),
        ("../admin", "..%2Fadmin".to_string()),
        ("..%2F..", "..%252F..".to_string()),
        ("a/b?c#d", "a%2Fb%3Fc%23d".to_string()),
        ("x\\y z", "x%5Cy%20z".to_string()),
    ];
    for (i, (value, encoded)) in cases.iter().enumerate() {
        let params = json!({ "p": value }).to_string();
        f.run("path", &["--params", &params]).assert_ok();
        let req = &server.requests()[i];
        assert_eq!(req.path, format!("/api/{encoded}/end"), "{value}");
        assert_eq!(req.query, "", "{value}");
        assert_eq!(req.path.matches('/').count(), 3, "{value}");
    }
    // `.` and `..` cannot be encoded away: refused, nothing sent.
    let before = server.connections();
    for value in [".", ".."] {
        let params = json!({ "p": value }).to_string();
        f.run("path", &["--params", &params])
            .assert_failed("input_invalid", 1);
    }
    assert_eq!(server.connections(), before);
    assert_eq!(other.connections(), 0);
}

#[test]
fn loopback_is_refused_without_allow_private() {
    let server = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    for (name, url) in [
        ("ip", format!("http://127.0.0.1:{}/x", server.port())),
        ("name", format!("http://localhost:{}/x", server.port())),
        (
            "mapped",
            format!("http://[::ffff:127.0.0.1]:{}/x", server.port()),
        ),
        ("hex", format!("http://0x7f.1:{}/x", server.port())),
    ] {
        f.tool(&http_tool(
            name,
            json!({}),
            json!({"method": "GET", "url": url}),
        ));
        let r = f.run(name, &[]);
        r.assert_failed("http_error", 1);
        assert_eq!(r.details()["guard"], json!("ssrf"), "{name}: {r:#?}");
        assert!(r.message().contains("SSRF guard"), "{r:#?}");
        assert!(r.message().contains("allow_private"), "{r:#?}");
    }
    assert_eq!(server.connections(), 0);
    // The same tool passes once the project allows private addresses.
    allow_private(&f);
    f.run("ip", &[]).assert_ok();
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn metadata_addresses_are_refused_even_with_allow_private() {
    let f = Fixture::new();
    allow_private(&f);
    for (name, url) in [
        ("v4", "http://169.254.169.254/latest/meta-data/"),
        (
            "mapped",
            "http://[::ffff:169.254.169.254]/latest/meta-data/",
        ),
        ("v6", "http://[fd00:ec2::254]/latest/meta-data/"),
        ("ll", "http://[fe80::1]/"),
    ] {
        f.tool(&http_tool(
            name,
            json!({}),
            json!({"method": "GET", "url": url, "timeout_ms": 20000}),
        ));
        let started = Instant::now();
        let r = f.run(name, &[]);
        r.assert_failed("http_error", 1);
        assert_eq!(r.details()["guard"], json!("ssrf"), "{name}: {r:#?}");
        assert!(r.message().contains("never reachable"), "{r:#?}");
        // Refused before any connection attempt, not after a timeout.
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn a_tool_without_network_permission_is_refused() {
    let server = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    allow_private(&f);
    let mut t = http_tool(
        "nonet",
        json!({}),
        json!({"method": "GET", "url": format!("{}/x", server.origin())}),
    );
    t["permissions"]["network"] = json!(false);
    f.tool(&t);
    let r = f.run("nonet", &[]);
    r.assert_failed("manifest_invalid", 2);
    assert!(r.message().contains("permissions.network"), "{r:#?}");
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_body_past_the_cap_is_a_resource_limit() {
    let big = vec![b'a'; 3 * 1024 * 1024];
    let body = big.clone();
    let server = Server::start(move |r| {
        let mut reply = Reply::text(200, "");
        // 64 MiB cannot hide in the socket buffers: the writer notices
        // when glovebox stops reading.
        reply.body = if r.path == "/stream" {
            vec![b'b'; 64 * 1024 * 1024]
        } else {
            body.clone()
        };
        reply.no_length = r.path != "/sized";
        reply
    });
    let f = Fixture::new();
    allow_private(&f);
    for (name, path) in [("sized", "/sized"), ("stream", "/stream")] {
        let mut t = http_tool(
            name,
            json!({}),
            json!({"method": "GET", "url": format!("{}{path}", server.origin()),
                   "max_response_bytes": 1048576}),
        );
        t["outputs"]["format"] = json!("text");
        f.tool(&t);
        let r = f.run(name, &[]);
        r.assert_failed("resource_limit", 1);
        assert!(r.message().contains("1048576 bytes"), "{r:#?}");
        assert_eq!(r.details()["limit"], json!("response_bytes"));
    }
    assert_eq!(server.requests().len(), 2);
    // glovebox hung up early: the close-delimited 64 MiB reply could not
    // be written whole.
    let deadline = Instant::now() + Duration::from_secs(5);
    while server
        .write_failures
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server
            .write_failures
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    );
    // Under the cap the same body is returned whole.
    let mut t = http_tool(
        "fits",
        json!({}),
        json!({"method": "GET", "url": format!("{}/small-stream", server.origin())}),
    );
    t["outputs"]["format"] = json!("text");
    f.tool(&t);
    let r = f.run("fits", &[]);
    r.assert_ok();
    assert_eq!(r.text().len(), big.len());
}

#[test]
fn a_slow_server_is_a_timeout() {
    let server = Server::start(|_| {
        let mut r = Reply::json(json!({"late": true}));
        r.delay = Duration::from_secs(4);
        r
    });
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "slow",
        json!({}),
        json!({"method": "GET", "url": format!("{}/slow", server.origin()), "timeout_ms": 500}),
    ));
    let started = Instant::now();
    let r = f.run("slow", &[]);
    r.assert_failed("timeout", 1);
    assert_eq!(r.details()["timeout_ms"], json!(500));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The request did reach the server; the answer came too late.
    assert_eq!(server.only().path, "/slow");
}

#[test]
fn a_non_2xx_status_is_an_http_error_with_an_excerpt() {
    let long = format!("upstream exploded: {}", "x".repeat(10_000));
    let body = long.clone();
    let server = Server::start(move |_| Reply::text(503, &body));
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "down",
        json!({}),
        json!({"method": "DELETE", "url": format!("{}/thing", server.origin())}),
    ));
    let r = f.run("down", &[]);
    r.assert_failed("http_error", 1);
    assert_eq!(r.details()["status"], json!(503));
    assert!(r.message().contains("503"), "{r:#?}");
    let excerpt = r.details()["body"].as_str().unwrap();
    assert!(excerpt.starts_with("upstream exploded: xxx"));
    assert!(
        excerpt.len() < 2100,
        "excerpt is bounded: {}",
        excerpt.len()
    );
    assert_eq!(server.only().method, "DELETE");
}

#[test]
fn a_secret_echoed_by_the_server_is_redacted() {
    let server = Server::start(|r| {
        let auth = r.header("authorization").unwrap_or_default().to_string();
        if r.path == "/fail" {
            Reply::text(401, &format!("bad token {auth}"))
        } else {
            Reply::json(json!({"you_sent": auth, "nested": {"k": [auth.clone()]}}))
        }
    });
    let f = Fixture::new();
    allow_private(&f);
    for path in ["ok", "fail"] {
        f.tool(&http_tool(
            path,
            json!({}),
            json!({"method": "GET", "url": format!("{}/{path}", server.origin()),
                   "headers": {"Authorization": "Bearer ${TOKEN}"}}),
        ));
    }
    let r = run_secret(&f, "ok", &[]);
    r.assert_ok();
    assert_eq!(
        r.output(),
        &json!({"you_sent": "Bearer [REDACTED:TOKEN]", "nested": {"k": ["Bearer [REDACTED:TOKEN]"]}})
    );
    assert!(!r.mentions(SECRET));
    let r = run_secret(&f, "fail", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("[REDACTED:TOKEN]"), "{r:#?}");
    assert!(!r.mentions(SECRET));
    // The server did get the real secret, where the template put it.
    for req in server.requests() {
        assert_eq!(
            req.header("authorization"),
            Some(&*format!("Bearer {SECRET}"))
        );
    }
}

#[test]
fn https_with_the_projects_extra_ca() {
    let ca = TestCa::new();
    let server = Server::start_tls(&ca, |r| Reply::json(json!({"path": r.path})));
    let f = Fixture::new();
    ca.write_pem(&f.root.join("test-ca.pem"));
    f.tool(&http_tool(
        "tls",
        json!({"p": {"type": "string"}}),
        json!({"method": "GET", "url": format!("{}/secure/${{p}}", server.origin()),
               "headers": {"Authorization": "Bearer ${TOKEN}"}}),
    ));
    // Without the CA the certificate is not trusted: no request is read.
    allow_private(&f);
    let r = run_secret(&f, "tls", &["p=a b"]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("TLS"), "{r:#?}");
    assert!(server.requests().is_empty());
    f.config(
        &json!({"security": {"http": {"allow_private": true, "extra_ca_file": "test-ca.pem"}}}),
    );
    let r = run_secret(&f, "tls", &["p=a b"]);
    r.assert_ok();
    assert_eq!(r.output(), &json!({"path": "/secure/a%20b"}));
    assert_eq!(
        server.only().header("authorization"),
        Some(&*format!("Bearer {SECRET}"))
    );
}

#[test]
fn text_output_returns_the_body() {
    let server = Server::start(|_| Reply::text(200, "plain body\n"));
    let f = Fixture::new();
    allow_private(&f);
    let mut t = http_tool(
        "txt",
        json!({}),
        json!({"method": "GET", "url": format!("{}/t", server.origin())}),
    );
    t["outputs"]["format"] = json!("text");
    f.tool(&t);
    let r = f.run("txt", &[]);
    r.assert_ok();
    assert_eq!(r.text(), "plain body\n");
    assert_eq!(server.only().path, "/t");
}

#[test]
fn the_network_allowlist_binds_http_tools_too() {
    let allowed = Server::start(|_| Reply::json(json!({"ok": 1})));
    let other = Server::start(|_| Reply::json(json!({})));
    let f = Fixture::new();
    allow_private(&f);
    let list = json!({"allow": [format!("127.0.0.1:{}", allowed.port())]});
    for (name, server) in [("in", &allowed), ("out", &other)] {
        let mut t = http_tool(
            name,
            json!({}),
            json!({"method": "GET", "url": format!("{}/x", server.origin())}),
        );
        t["permissions"]["network"] = list.clone();
        f.tool(&t);
    }
    f.run("in", &[]).assert_ok();
    assert_eq!(allowed.requests().len(), 1);
    let r = f.run("out", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("allowlist"), "{r:#?}");
    assert_eq!(other.connections(), 0);
    // A redirect out of the list is refused at that hop.
    let hop = Server::start({
        let to = format!("{}/y", other.origin());
        move |_| Reply::redirect(302, &to)
    });
    let mut t = http_tool(
        "hop",
        json!({}),
        json!({"method": "GET", "url": format!("{}/x", hop.origin()), "follow_cross_origin_redirects": true}),
    );
    t["permissions"]["network"] = json!({"allow": [format!("127.0.0.1:{}", hop.port())]});
    f.tool(&t);
    let r = f.run("hop", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("allowlist"), "{r:#?}");
    assert_eq!(other.connections(), 0);
}

/// A secret with characters JSON servers like to escape (`/`, `+`).
const ESCAPABLE: &str = "sk/live+9f3a8c7e6d5b4a39c1";

/// Attack 6: the server echoes the `Authorization` header in an error body
/// after a padding parameter, so the 2,048-byte excerpt cut falls at every
/// position around the echoed token. No 8-character run of the token comes
/// back, whatever the cut, the escaping (`\/`, `\uXXXX`) or the encoding
/// (base64 inside `Basic`, hex).
#[test]
fn no_piece_of_a_secret_comes_back_whatever_the_cut_or_the_escaping() {
    let server = Server::start(|r| {
        use base64::Engine;
        let auth = r.header("authorization").unwrap_or_default().to_string();
        let pad = r
            .query_pairs()
            .into_iter()
            .find(|(k, _)| k == "pad")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let token = auth.trim_start_matches("Bearer ").to_string();
        let php = serde_json::to_string(&token)
            .unwrap()
            .replace('/', "\\/")
            .replace('+', "\\u002B");
        match r.path.as_str() {
            "/echo" => Reply::text(
                400,
                &format!("you sent pad={pad} Authorization: {auth} end"),
            ),
            "/php" => {
                let mut reply = Reply::text(401, &format!(r#"{{"error":"denied","auth":{php}}}"#));
                reply.headers = vec![("Content-Type".into(), "application/json".into())];
                reply
            }
            "/php_ok" => {
                let mut reply = Reply::text(200, &format!(r#"{{"auth":{php}}}"#));
                reply.headers = vec![("Content-Type".into(), "application/json".into())];
                reply
            }
            _ => {
                let b64 = base64::engine::general_purpose::STANDARD;
                Reply::json(json!({
                    "b64": b64.encode(&token),
                    "basic": b64.encode(format!("user:{token}")),
                    "hex": hex::encode(&token),
                }))
            }
        }
    });
    let f = Fixture::new();
    allow_private(&f);
    for path in ["echo", "php", "php_ok", "encoded"] {
        f.tool(&http_tool(
            path,
            json!({"pad": {"type": "string"}}),
            json!({"method": "GET", "url": format!("{}/{path}", server.origin()),
                   "query": {"pad": "${pad}"},
                   "headers": {"Authorization": "Bearer ${TOKEN}"}}),
        ));
    }
    let run =
        |name: &str, pad: &str| f.run_env(name, &[&format!("pad={pad}")], &[("TOKEN", ESCAPABLE)]);
    // "you sent pad=" + pad + " Authorization: Bearer " precede the token.
    let before = "you sent pad=".len() + " Authorization: Bearer ".len();
    let mut cuts_inside = 0;
    for at in -2..=(ESCAPABLE.len() as i64 + 2) {
        let pad = "p".repeat((2048 - before as i64 + at) as usize);
        let r = run("echo", &pad);
        r.assert_failed("http_error", 1);
        let excerpt = r.details()["body"].as_str().unwrap();
        assert!(excerpt.starts_with("you sent pad=ppp"), "{r:#?}");
        assert!(
            r.piece_of(ESCAPABLE).is_none(),
            "cut {at}: {:?} in {r:#?}",
            r.piece_of(ESCAPABLE)
        );
        cuts_inside += usize::from(excerpt.len() < before + pad.len() + ESCAPABLE.len());
    }
    assert!(cuts_inside > 10, "the cut never fell inside the echo");

    let r = run("php", "x");
    r.assert_failed("http_error", 1);
    assert!(
        r.details()["body"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:TOKEN]"),
        "{r:#?}"
    );
    assert!(r.piece_of(ESCAPABLE).is_none(), "{r:#?}");
    let r = run("php_ok", "x");
    r.assert_ok();
    assert_eq!(r.output()["auth"], "[REDACTED:TOKEN]", "{r:#?}");
    let r = run("encoded", "x");
    r.assert_ok();
    for field in ["b64", "basic", "hex"] {
        let v = r.output()[field].as_str().unwrap();
        assert!(v.contains("[REDACTED:TOKEN]"), "{field}: {r:#?}");
        assert!(v.len() < 40, "{field} kept too much: {v}");
    }
    assert!(r.piece_of(ESCAPABLE).is_none(), "{r:#?}");
}

/// An http tool never reaches one of glovebox's own listeners, on the
/// first hop or after a redirect, by any spelling of its address, even
/// with `allow_private` and `follow_cross_origin_redirects` (a hostile
/// server steering the tool there could drive the API with the caller's
/// rights). `own` is a listener this test registers as glovebox's
/// (`listeners::register`, as `serve` does); `other` is not registered:
/// the same redirects reach it (the control that each spelling routes to a
/// local listener), without the secret. `own` accepts no connection.
#[test]
fn glovebox_s_own_listener_is_out_of_reach_by_any_spelling_or_redirect() {
    let own = Server::start(|_| Reply::json(json!({"reached": "own"})));
    let _recorded = glovebox::egress::listeners::register(own.addr).unwrap();
    let other = Server::start(|_| Reply::json(json!({"reached": "other"})));
    let hostile = Server::start(|r| {
        let to = r
            .query_pairs()
            .into_iter()
            .find(|(k, _)| k == "to")
            .map(|(_, v)| v)
            .unwrap_or_default();
        Reply::redirect(307, &to)
    });
    let f = Fixture::new();
    allow_private(&f);
    f.tool(&http_tool(
        "steered",
        json!({"to": {"type": "string"}}),
        json!({"method": "GET", "url": format!("{}/start", hostile.origin()),
               "headers": {"Authorization": "Bearer ${TOKEN}"},
               "query": {"to": "${to}"},
               "follow_cross_origin_redirects": true}),
    ));
    f.tool(&http_tool(
        "direct",
        json!({}),
        json!({"method": "GET", "url": own.url("/x")}),
    ));
    let spellings = [
        "127.0.0.1",
        "localhost",
        "127.1",
        "0x7f.1",
        "2130706433",
        "0177.0.0.1",
        "0.0.0.0",
        "[::ffff:127.0.0.1]",
    ];
    for host in spellings {
        let before = other.requests().len();
        let to = format!("to=http://{host}:{}/api", other.port());
        let r = run_secret(&f, "steered", &[&to]);
        r.assert_ok();
        assert_eq!(r.output(), &json!({"reached": "other"}), "{host}: {r:#?}");
        assert_eq!(other.requests().len(), before + 1, "{host}");
        let to = format!("to=http://{host}:{}/api", own.port());
        let r = run_secret(&f, "steered", &[&to]);
        r.assert_failed("http_error", 1);
        assert!(
            r.message().contains("glovebox's own server"),
            "{host}: {r:#?}"
        );
    }
    let r = f.run("direct", &[]);
    r.assert_failed("http_error", 1);
    assert!(r.message().contains("glovebox's own server"), "{r:#?}");
    assert_eq!(own.connections(), 0);
    assert_eq!(hostile.requests().len(), 2 * spellings.len());
    for req in other.requests() {
        assert!(!req.raw().contains(SECRET), "{}", req.raw());
    }
}

/// The machine's own address is the machine, like loopback, whatever its
/// range: a service bound to `0.0.0.0` (a database, a daemon's API) is
/// reached at the host's public address on its own interface. In a
/// network namespace of the test's own, `203.0.113.7` (a range the guard
/// calls public) is put on loopback and such a service started: without
/// `allow_private` the http tool is refused ("this host") and the service
/// accepts nothing; with it (the control) the canary comes back. Before
/// the fix, the first call returned the canary too.
#[test]
fn the_hosts_own_public_address_is_refused_without_allow_private() {
    let strict = Fixture::new();
    let open = Fixture::new();
    allow_private(&open);
    for f in [&strict, &open] {
        f.tool(&http_tool(
            "own",
            json!({}),
            json!({"method": "GET", "url": "http://203.0.113.7:18080/x"}),
        ));
    }
    let record = strict.base.join("connections");
    let listener = common::probes().join("host_service.py");
    let script = format!(
        "ip link set lo up && ip addr add 203.0.113.7/32 dev lo || exit 97
         python3 {} \"$1\" 18080 HOST-ONLY-5d1e & l=$!
         for i in $(seq 100); do grep -q READY \"$1\" 2>/dev/null && break; sleep 0.05; done
         printf '%s %s\\n' STRICT \"$(\"$0\" run own --json --root \"$2\" </dev/null)\"
         printf '%s %s\\n' OPEN \"$(\"$0\" run own --json --root \"$3\" </dev/null)\"
         kill $l",
        listener.display()
    );
    let user = if nix::unistd::geteuid().is_root() {
        vec!["-n"]
    } else {
        vec!["-r", "-n"]
    };
    let out = std::process::Command::new("unshare")
        .args(&user)
        .args(["sh", "-c", &script])
        .arg(common::bin())
        .arg(&record)
        .arg(&strict.root)
        .arg(&open.root)
        .current_dir(&strict.cwd)
        .stdin(std::process::Stdio::null())
        .output();
    let text = out
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let line = |tag: &str| -> Option<Value> {
        text.lines()
            .find_map(|l| l.strip_prefix(tag))
            .and_then(|j| serde_json::from_str(j.trim()).ok())
    };
    let ran = text.contains("STRICT");
    let (Some(refused), Some(reached)) = (line("STRICT "), line("OPEN ")) else {
        assert!(!ran, "the calls ran but printed no result: {out:?}");
        let why =
            format!("no network namespace with an address of its own could be made here ({out:?})");
        if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
        }
        eprintln!("SKIPPED (set GLOVEBOX_REQUIRE_KERNEL=1 to fail instead): {why}");
        return;
    };
    // The control: the address reaches the service.
    assert_eq!(reached["ok"], true, "{reached:#}");
    assert_eq!(reached["output"], json!({"canary": "HOST-ONLY-5d1e"}));
    assert_eq!(refused["ok"], false, "{refused:#}");
    assert_eq!(refused["error"]["kind"], "http_error", "{refused:#}");
    assert_eq!(refused["error"]["details"]["guard"], "ssrf", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("this host"), "{refused:#}");
    assert!(message.contains("allow_private"), "{refused:#}");
    // Only the control's connection arrived.
    let seen = std::fs::read_to_string(&record).unwrap();
    assert_eq!(seen.matches("CONNECTION").count(), 1, "{seen}");
}
