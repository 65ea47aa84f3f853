//! The unit tests of [`super`]: origins, hosts and the router's guards.

use super::*;

#[test]
fn loopback_origins() {
    for o in [
        "http://localhost",
        "http://localhost:3000",
        "https://127.0.0.1:8443",
        "http://[::1]:80",
        "http://LOCALHOST",
    ] {
        assert!(is_loopback_origin(o), "{o}");
    }
    for o in [
        "null",
        "https://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example",
        "http://localhost:80@evil.example",
        "http://localhost/",
        "file://",
        "http://[::1].evil",
    ] {
        assert!(!is_loopback_origin(o), "{o}");
    }
}

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
    };
    let mut h = HeaderMap::new();
    assert_eq!(admit(&guard, "/mcp", &h), Err(Refusal::Unauthorized));
    assert!(admit(&guard, "/healthz", &h).is_ok());
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
        assert_eq!(admit(&guard, oauth, &h), Err(Refusal::NoOAuth), "{oauth}");
    }
    assert_eq!(admit(&guard, "/registers", &h), Err(Refusal::Unauthorized));
    for wrong in ["Bearer wrong", "Bearer s3cret2", "Basic czNjcmV0"] {
        h.insert(header::AUTHORIZATION, wrong.parse().unwrap());
        assert!(admit(&guard, "/mcp", &h).is_err(), "{wrong}");
    }
    h.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
    assert_eq!(admit(&guard, "/mcp", &h), Err(Refusal::WrongToken));
    h.insert(header::AUTHORIZATION, "Basic czNjcmV0".parse().unwrap());
    assert_eq!(admit(&guard, "/mcp", &h), Err(Refusal::Unauthorized));
    for right in ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret "] {
        h.insert(header::AUTHORIZATION, right.parse().unwrap());
        assert!(admit(&guard, "/mcp", &h).is_ok(), "{right}");
    }
    h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    assert_eq!(admit(&guard, "/mcp", &h), Err(Refusal::CrossOrigin));
    assert_eq!(admit(&guard, "/healthz", &h), Err(Refusal::CrossOrigin));
}
