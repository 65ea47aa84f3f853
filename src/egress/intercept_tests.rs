//! The unit tests of [`super`]: the interception's CA, bundle and hosts.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::egress::placeholder::Secret;
use crate::net::allow::Allowlist;

fn interception() -> Interception {
    let s = Secret::new(
        "T",
        "realTOKENvalue12345",
        Allowlist::parse(&["api.example.com"]).unwrap(),
        None,
        false,
    )
    .unwrap();
    Interception::new(Placeholders::new(vec![s]), None).unwrap()
}

#[test]
fn each_call_has_its_own_ca_and_the_bundle_holds_it() {
    let (a, b) = (interception(), interception());
    assert_ne!(a.ca_pem(), b.ca_pem());
    let (bundle, _) = a.bundle();
    let text = String::from_utf8(bundle).unwrap();
    assert!(text.ends_with(&a.ca_pem()));
    assert!(!text.contains(&b.ca_pem()));
    assert!(!text.contains("PRIVATE KEY"));
}

#[test]
fn leaves_are_made_once_per_host() {
    let a = interception();
    let h = Host::parse("api.example.com").unwrap();
    let one = a.leaf(&h).unwrap();
    let two = a.leaf(&h).unwrap();
    assert!(Arc::ptr_eq(&one, &two));
    assert!(a.leaf(&Host::parse("127.0.0.1").unwrap()).is_ok());
}
