//! A networked call's egress log on its [`Outcome`]: every connection in
//! the audit line (`egress=[…]`), each refusal as a warning ("refused
//! connect to 10.0.0.5:22 (private)") and, when the call failed, in
//! `error.details.egress_refused` too — so a user sees why instead of a
//! bare timeout. A call with placeholder secrets also gets their uses per
//! host (`placeholders=[…]`) and a warning for each placeholder sent where
//! it is useless or for a client that refused the call's CA.

use std::sync::Arc;

use serde_json::Value;

use super::{Outcome, Redactor};
use crate::egress::intercept::{InterceptError, Interception, CA_FILE, CA_VARIABLES};
use crate::egress::placeholder::Placeholders;
use crate::egress::{Gateway, Log};
use crate::jail::{self, Spec};
use crate::policy::Policy;

/// Sets up the network of `spec` under `policy` (a call's, or a wrapped
/// MCP server's jail): the egress gateway (returned, for its log), or the
/// host network when the config opted into it.
///
/// With placeholder secrets, the proxy intercepts their hosts with a CA
/// made for this jail, and the jail gets the bundle that trusts it in its
/// private TMPDIR ([`CA_VARIABLES`]).
pub fn network(
    policy: &Policy,
    placeholders: &Placeholders,
    spec: &mut Spec,
) -> Result<Option<Arc<Gateway>>, InterceptError> {
    spec.network = policy.network;
    if !policy.network {
        return Ok(None);
    }
    if policy.direct_network {
        spec.direct_network = true;
        return Ok(None);
    }
    let mut rules = policy.egress_rules();
    if !placeholders.is_empty() {
        let i = Interception::new(placeholders.clone(), policy.extra_ca.clone())?;
        let (bundle, _) = i.bundle();
        spec.home_files.push(jail::HomeFile {
            name: CA_FILE.into(),
            contents: bundle,
            variables: CA_VARIABLES.iter().map(|v| v.to_string()).collect(),
        });
        rules.intercept = Some(Arc::new(i));
    }
    let g = Arc::new(Gateway::new(rules));
    spec.gateway = Some(g.clone());
    Ok(Some(g))
}

/// Adds `log`'s refusals to `outcome` and returns the audit fields
/// (secret values redacted): `egress`, and `placeholders` (the uses of
/// placeholder secrets per host: names and counts, never a value) when
/// there were any.
pub fn report(outcome: &mut Outcome, log: &Log, redact: &Redactor) -> Vec<(&'static str, String)> {
    let mut fields = vec![connections(outcome, log, redact)];
    let uses = log.secret_uses();
    if !uses.is_empty() {
        let list = redact.value(serde_json::to_value(&uses).unwrap_or(Value::Null));
        fields.push(("placeholders", list.to_string()));
    }
    outcome
        .warnings
        .extend(log.secret_warnings().iter().map(|w| redact.text(w)));
    fields
}

fn connections(outcome: &mut Outcome, log: &Log, redact: &Redactor) -> (&'static str, String) {
    let (connections, unrecorded) = log.connections();
    crate::egress::totals::add(&connections, unrecorded);
    let mut list = serde_json::to_value(&connections).unwrap_or(Value::Null);
    if unrecorded > 0 {
        if let Value::Array(items) = &mut list {
            items.push(serde_json::json!({"unrecorded": unrecorded}));
        }
    }
    let list = redact.value(list);
    let field = ("egress", list.to_string());
    let refusals: Vec<String> = log.refusals().iter().map(|r| redact.text(r)).collect();
    if refusals.is_empty() {
        return field;
    }
    if let Some(Value::Object(details)) = outcome.error.as_mut().map(|e| &mut e.details) {
        details.insert("egress_refused".into(), serde_json::json!(refusals));
    }
    outcome.warnings.extend(refusals);
    field
}
