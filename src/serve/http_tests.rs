//! The unit tests of [`super`]: origins, hosts and the router's guards.

use super::*;
use axum::http::Method;

#[test]
fn non_loopback_needs_a_token() {
    let mut o = Options {
        listen: "0.0.0.0:7878".parse().unwrap(),
        token: None,
        limits: Limits::default(),
        grace: DEFAULT_GRACE,
        drain_delay: Duration::ZERO,
        hosts: Vec::new(),
        bound: Arc::default(),
        allow_uids: Vec::new(),
        origins: Origins::default(),
        metrics_listen: None,
    };
    assert!(o.check().is_err());
    o.token = Some("t".into());
    assert!(o.check().is_ok());
    o.listen = "127.0.0.1:0".parse().unwrap();
    o.token = None;
    assert!(o.check().is_ok());
}

fn hosts(listen: &str, names: &[&str]) -> Hosts {
    Hosts {
        listen: listen.parse().unwrap(),
        bound: Arc::default(),
        names: names.iter().map(|n| n.to_string()).collect(),
    }
}

#[test]
fn host_check() {
    let lo = hosts(
        "127.0.0.1:7878",
        &["tools.example", "127.0.0.1:8080", "tools.example:9000"],
    );
    for ok in [
        "localhost:7878",
        "LocalHost:7878",
        "127.0.0.1:7878",
        "[::1]:7878",
        "127.0.0.1:8080",
    ] {
        assert!(lo.allows(ok), "{ok}");
    }
    for bad in [
        "attacker.example:7878",
        "localhost",
        "localhost:7879",
        "tools.example:7878",
        "127.0.0.2:7878",
        "localhost.attacker.example:7878",
        "localhost:7878@x",
        "",
        "[::1]",
        "localhost:8080",
        "127.0.0.1:8081",
        "tools.example:9000",
    ] {
        assert!(!lo.allows(bad), "{bad}");
    }
    let public = hosts("10.0.0.5:8080", &["tools.example", "other.example:9000"]);
    for ok in [
        "10.0.0.5:8080",
        "tools.example:8080",
        "localhost:8080",
        "other.example:9000",
    ] {
        assert!(public.allows(ok), "{ok}");
    }
    for bad in [
        "attacker.example:8080",
        "10.0.0.6:8080",
        "tools.example:9000",
    ] {
        assert!(!public.allows(bad), "{bad}");
    }
    let any = hosts("0.0.0.0:80", &[]);
    assert!(any.allows("192.168.1.4"));
    assert!(any.allows("localhost"));
    assert!(!any.allows("attacker.example"));
    // The bound port counts once known.
    let zero = hosts("127.0.0.1:0", &[]);
    zero.bound.set("127.0.0.1:4321".parse().unwrap()).unwrap();
    assert!(zero.allows("localhost:4321"));
    assert!(!zero.allows("localhost:0"));
}

#[test]
fn every_name_a_request_gives_must_be_this_server_s() {
    let lo = hosts("127.0.0.1:7878", &[]);
    let check = |host: &[&str], target: &str| {
        let mut h = HeaderMap::new();
        for v in host {
            h.append(header::HOST, v.parse().unwrap());
        }
        for_this_server(&lo, &h, &target.parse().unwrap())
    };
    assert!(check(&["localhost:7878"], "/api/v1/tools"));
    assert!(check(&[], "http://localhost:7878/api/v1/tools"));
    assert!(!check(&[], "/api/v1/tools"), "no name at all");
    // An absolute-form target names the host HTTP/1.1 says counts.
    assert!(!check(
        &["localhost:7878"],
        "http://attacker.example:7878/api/v1/tools"
    ));
    assert!(!check(
        &["attacker.example:7878"],
        "http://localhost:7878/api/v1/tools"
    ));
    // Two Host headers, in either order.
    assert!(!check(&["localhost:7878", "attacker.example:7878"], "/"));
    assert!(!check(&["attacker.example:7878", "localhost:7878"], "/"));
    assert!(!check(&["localhost:7878", "localhost:7878"], "/"));
}

#[test]
fn token_guard() {
    let guard = Guard {
        token_digest: Some(Sha256::digest(b"s3cret").into()),
        hosts: hosts("127.0.0.1:7878", &[]),
        origins: Origins::default(),
        callers: None,
    };
    let mut h = HeaderMap::new();
    assert_eq!(
        admit(&guard, &Method::GET, "/mcp", &h, None),
        Err(Refusal::Unauthorized)
    );
    assert!(admit(&guard, &Method::GET, "/healthz", &h, None).is_ok());
    for oauth in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/openid-configuration",
        "/mcp/.well-known/openid-configuration",
        "/register",
        "/authorize",
        "/token",
    ] {
        assert_eq!(
            admit(&guard, &Method::GET, oauth, &h, None),
            Err(Refusal::NoOAuth),
            "{oauth}"
        );
    }
    assert_eq!(
        admit(&guard, &Method::GET, "/registers", &h, None),
        Err(Refusal::Unauthorized)
    );
    for wrong in ["Bearer wrong", "Bearer s3cret2", "Basic czNjcmV0"] {
        h.insert(header::AUTHORIZATION, wrong.parse().unwrap());
        assert!(
            admit(&guard, &Method::GET, "/mcp", &h, None).is_err(),
            "{wrong}"
        );
    }
    h.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
    assert_eq!(
        admit(&guard, &Method::GET, "/mcp", &h, None),
        Err(Refusal::WrongToken)
    );
    h.insert(header::AUTHORIZATION, "Basic czNjcmV0".parse().unwrap());
    assert_eq!(
        admit(&guard, &Method::GET, "/mcp", &h, None),
        Err(Refusal::Unauthorized)
    );
    for right in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret "] {
        h.insert(header::AUTHORIZATION, right.parse().unwrap());
        assert!(
            admit(&guard, &Method::GET, "/mcp", &h, None).is_ok(),
            "{right}"
        );
    }
    h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    assert_eq!(
        admit(&guard, &Method::GET, "/mcp", &h, None),
        Err(Refusal::CrossOrigin)
    );
    assert_eq!(
        admit(&guard, &Method::GET, "/healthz", &h, None),
        Err(Refusal::CrossOrigin)
    );
    // A loopback origin is a web page too.
    h.insert(header::ORIGIN, "http://localhost:18099".parse().unwrap());
    assert_eq!(
        admit(&guard, &Method::GET, "/mcp", &h, None),
        Err(Refusal::CrossOrigin)
    );
}

/// Without a token: a request over no accepted connection is refused
/// (the real lookups are tested in `owner`), a configured origin passes,
/// and a request that acts must be JSON.
#[test]
fn account_origin_and_json_guard() {
    let guard = Guard {
        token_digest: None,
        hosts: hosts("127.0.0.1:7878", &[]),
        origins: Origins::parse(&["http://localhost:6274".into()]).unwrap(),
        callers: Some(Callers::own_and(&[])),
    };
    let mut h = HeaderMap::new();
    let path = "/api/v1/tools/x/invoke";
    assert!(matches!(
        admit(&guard, &Method::POST, path, &h, None),
        Err(Refusal::UnknownCaller { .. })
    ));
    // Probes stay open.
    assert!(admit(&guard, &Method::GET, "/healthz", &h, None).is_ok());
    let open = Guard {
        callers: None,
        ..guard.clone()
    };
    assert_eq!(
        admit(&open, &Method::POST, path, &h, None),
        Err(Refusal::NotJson)
    );
    h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    assert_eq!(
        admit(&open, &Method::POST, path, &h, None),
        Err(Refusal::NotJson)
    );
    // /mcp answers its own JSON-RPC refusal.
    assert!(admit(&open, &Method::POST, "/mcp", &h, None).is_ok());
    h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    assert!(admit(&open, &Method::POST, path, &h, None).is_ok());
    h.insert(header::ORIGIN, "http://localhost:6274".parse().unwrap());
    assert!(admit(&open, &Method::POST, path, &h, None).is_ok());
    h.insert(header::ORIGIN, "http://localhost:6275".parse().unwrap());
    assert_eq!(
        admit(&open, &Method::POST, path, &h, None),
        Err(Refusal::CrossOrigin)
    );
}
