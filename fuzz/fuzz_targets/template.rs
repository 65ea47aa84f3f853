//! Templating in each context, with a caller-chosen parameter value.
//!
//! The fuzzer picks the value of `${v}` (and `${w}`) and where it sits in
//! the manifest's templates; literal template text is fuzzed too (without
//! `$`, so it never forms a placeholder). Invariants, checked whenever
//! expansion succeeds (refusing a value is always allowed):
//!
//! - no panic in any context;
//! - URL (`template::url`, then `run::http::request`): a value in a path,
//!   query or fragment position never changes the scheme, host or port,
//!   never adds or removes a path segment, a query pair or a fragment
//!   (compared with the same template expanded with a benign value);
//! - header: no CR, LF or NUL reaches a header value;
//! - argv: N argument templates yield exactly N argv entries after the
//!   program, and a template that is exactly `${v}` yields the value as is;
//! - query: a form-encoded value decodes back to exactly one pair whose
//!   value is the expanded text;
//! - JSON body: the body is valid JSON, a whole-string `${v}` is the value
//!   as a JSON string, and text around a placeholder is kept.
#![no_main]

use std::path::Path;

use glovebox::manifest::model::{CommandExec, Exec, Manifest};
use glovebox::run::{command, http};
use glovebox::template::{self, Bindings};
use indexmap::IndexMap;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use url::Url;

const ORIGIN: &str = "http://example.com:8080";

#[derive(Arbitrary, Debug)]
enum Piece {
    Lit(String),
    V,
    W,
    Slash,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// The attacker-controlled value of `${v}`.
    v: String,
    /// `${w}`: a string, or (when `None`) the number 7.
    w: Option<String>,
    path: Vec<Piece>,
    query: Option<Vec<Piece>>,
    fragment: Option<Vec<Piece>>,
    args: Vec<Vec<Piece>>,
    header: Vec<Piece>,
    body_lit: String,
}

fn render(pieces: &[Piece], strip: &[char]) -> String {
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Lit(s) => out.extend(s.chars().filter(|c| *c != '$' && !strip.contains(c))),
            Piece::V => out.push_str("${v}"),
            Piece::W => out.push_str("${w}"),
            Piece::Slash => out.push('/'),
        }
    }
    out
}

fn url_template(i: &Input) -> String {
    let mut t = format!("{ORIGIN}/{}", render(&i.path, &['?', '#']));
    if let Some(q) = &i.query {
        t.push('?');
        t.push_str(&render(q, &['#']));
    }
    if let Some(f) = &i.fragment {
        t.push('#');
        t.push_str(&render(f, &[]));
    }
    t
}

fn params(v: Value, w: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("v".into(), v);
    m.insert("w".into(), w);
    m
}

/// What a URL's structure is: origin, path segments, query pairs,
/// whether it has a fragment.
fn shape(u: &Url) -> (String, usize, usize, bool) {
    (
        u.origin().ascii_serialization(),
        u.path_segments().map_or(0, Iterator::count),
        u.query().map_or(0, |q| q.split('&').count()),
        u.fragment().is_some(),
    )
}

fn check_url(i: &Input, b: &Bindings<'_>, benign: &Bindings<'_>) {
    let t = url_template(i);
    let Ok(Some(expanded)) = template::url(&t, b) else {
        return;
    };
    let Ok(got) = Url::parse(&expanded) else {
        return;
    };
    assert_eq!(
        got.origin().ascii_serialization(),
        ORIGIN,
        "a value changed the origin: {t:?} -> {expanded:?}"
    );
    if let Ok(Some(base)) = template::url(&t, benign) {
        if let Ok(base) = Url::parse(&base) {
            assert_eq!(
                shape(&got),
                shape(&base),
                "a value changed the URL's structure: {t:?} -> {expanded:?} (benign: {base})"
            );
        }
    }
}

fn check_header(i: &Input, b: &Bindings<'_>) {
    let t = render(&i.header, &[]);
    if let Ok(Some(v)) = template::header_value("X-Fuzz", &t, b) {
        assert!(
            !v.contains(['\r', '\n', '\0']),
            "CR/LF/NUL reached a header: {t:?} -> {v:?}"
        );
    }
}

fn check_argv(i: &Input, b: &Bindings<'_>) {
    let mut args: Vec<String> = i.args.iter().map(|a| render(a, &[])).collect();
    args.push("${v}".into());
    let exec: CommandExec =
        serde_json::from_value(json!({"entrypoint": "prog", "args": args})).expect("exec");
    let Ok(argv) = command::argv(Path::new("/r"), &exec, b) else {
        return;
    };
    assert_eq!(
        argv.len(),
        args.len() + 1,
        "argv count changed: {args:?} -> {argv:?}"
    );
    assert_eq!(argv.last().and_then(|a| a.to_str()), Some(i.v.as_str()));
}

fn check_query(b: &Bindings<'_>) {
    for t in ["${v}", "a=${v}&b", "${v}${w}"] {
        let (Ok(Some(enc)), Ok(Some(plain))) = (template::query_value(t, b), template::argv(t, b))
        else {
            continue;
        };
        let query = format!("k={enc}");
        let pairs: Vec<_> = url::form_urlencoded::parse(query.as_bytes()).collect();
        assert_eq!(
            pairs.len(),
            1,
            "a value added a query pair: {t:?} -> {enc:?}"
        );
        assert_eq!(pairs[0].1, plain.as_str());
    }
}

fn check_body(i: &Input, b: &Bindings<'_>) {
    let lit: String = i.body_lit.chars().filter(|c| *c != '$').collect();
    let t = json!({"a": "${v}", "b": format!("{lit}${{v}}{lit}"), "c": ["${v}", "${w}"]});
    let Ok(Some(body)) = template::json(&t, b) else {
        return;
    };
    let text = serde_json::to_string(&body).expect("serialises");
    let back: Value = serde_json::from_str(&text).expect("the body is valid JSON");
    assert_eq!(back["a"], Value::String(i.v.clone()));
    assert_eq!(back["b"], Value::String(format!("{lit}{}{lit}", i.v)));
    assert_eq!(back["c"].as_array().map(Vec::len), Some(2));
}

fn manifest(url: &str, header: &str) -> Manifest {
    let m = json!({
        "name": "t", "description": "d", "kind": "http", "version": 1,
        "inputs": {"schema": {"type": "object", "properties": {"v": {}, "w": {}}}},
        "outputs": {"format": "json"},
        "exec": {"http": {
            "method": "POST",
            "url": url,
            "query": {"q": "${v}", "n": "${w}"},
            "headers": {"X-Fuzz": header},
            "body": {"a": "${v}"},
        }},
        "permissions": {"network": true},
    });
    serde_json::from_value(m).expect("the fixed manifest deserialises")
}

/// The whole request as the http runner builds it.
fn check_request(i: &Input, b: &Bindings<'_>) {
    let m = manifest(&url_template(i), &render(&i.header, &[]));
    let Exec::Http(exec) = &m.exec else {
        return;
    };
    let Ok((req, _)) = http::request(&m, exec, b) else {
        return;
    };
    assert_eq!(req.url.origin().ascii_serialization(), ORIGIN, "{req:?}");
    for h in &req.headers {
        assert!(!h
            .value
            .as_bytes()
            .iter()
            .any(|c| matches!(c, b'\r' | b'\n' | 0)));
    }
    if let Some(body) = &req.body {
        let v: Value = serde_json::from_slice(body).expect("the body is valid JSON");
        assert_eq!(v["a"], Value::String(i.v.clone()));
    }
}

/// Proves the checks are not vacuous: a benign request builds.
fn probe(b: &Bindings<'_>) {
    let m = manifest(&format!("{ORIGIN}/a/${{v}}?x=${{w}}#f"), "t ${v}");
    let Exec::Http(exec) = &m.exec else {
        panic!("not an http manifest")
    };
    let (req, _) = http::request(&m, exec, b).expect("a benign request builds");
    assert_eq!(req.url.as_str(), format!("{ORIGIN}/a/v?x=w&q=v&n=w#f"));
}

static PROBE: std::sync::Once = std::sync::Once::new();

fuzz_target!(|i: Input| {
    let inputs = vec!["v".to_string(), "w".to_string()];
    let secrets = IndexMap::new();
    let w = i.w.clone().map_or(json!(7), Value::String);
    let p = params(Value::String(i.v.clone()), w);
    let benign_p = params(json!("v"), json!("w"));
    let b = Bindings {
        params: &p,
        inputs: &inputs,
        secrets: &secrets,
    };
    let benign = Bindings {
        params: &benign_p,
        inputs: &inputs,
        secrets: &secrets,
    };

    PROBE.call_once(|| probe(&benign));
    check_url(&i, &b, &benign);
    check_header(&i, &b);
    check_argv(&i, &b);
    check_query(&b);
    check_body(&i, &b);
    check_request(&i, &b);
});
