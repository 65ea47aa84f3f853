//! `GET /metrics`: what a replica did, in the Prometheus text format
//! (`prometheus-client`).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `glovebox_calls_total` | `tool`, `outcome` | calls ended, by tool and outcome (`ok` or the error kind) |
//! | `glovebox_call_duration_seconds` | `tool`, `outcome` | their wall time, a histogram |
//! | `glovebox_refusals_total` | `kind` | calls refused before they ran (`approval_required`, `busy`, `draining`, …) and HTTP requests refused (`http_401`, …) |
//! | `glovebox_calls_in_flight` | | calls running now |
//! | `glovebox_calls_queued` | | calls waiting for a slot now |
//! | `glovebox_jail_info` | `mode`, `landlock_abi`, `seccomp`, `mount_tree` | the jail the last readiness probe built (value 1) |
//! | `glovebox_jail_posture_ok` | | 1 while that jail meets what the server requires ([`super::ready`]) |
//! | `glovebox_draining` | | 1 once SIGTERM was received |
//! | `glovebox_egress_connections_total` | `decision` | connections tools asked for, `allowed` or `refused` ([`crate::egress::totals`]) |
//! | `glovebox_egress_bytes_total` | `direction` | bytes they moved, `sent` or `received` |
//! | `glovebox_standby_calls_total` | `outcome` | calls that found a standby jail ([`crate::jail::standby`]): `used`, `changed` (discarded at revalidation) or `not_run` |
//! | `glovebox_standby_ready` | | standby jails waiting at their gate now |
//!
//! A tool's name is a label only when the project has that tool (else
//! `unknown`, over every transport): a client cannot grow the label set.
//!
//! `glovebox serve --metrics-listen ADDR` serves `/metrics` (and the
//! probes) alone on a second address, without the API token, for
//! scrapers that carry none (see [`super::http::serve`]).

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::run::{ErrorKind, Outcome};

/// A call's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// The tool (or `unknown`).
    pub tool: String,
    /// `ok`, or the error kind.
    pub outcome: String,
}

/// A refusal's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// What was refused, and why.
    pub kind: String,
}

/// The jail's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JailLabels {
    /// `namespaces`, `namespace-free` or `none`.
    pub mode: String,
    /// The Landlock ABI in force.
    pub landlock_abi: String,
    /// Whether seccomp was installed.
    pub seccomp: String,
    /// Whether the jail had its own mount tree.
    pub mount_tree: String,
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    duration: Family<CallLabels, Histogram>,
    refusals: Family<RefusalLabels, Counter>,
    /// Calls running now.
    pub in_flight: Gauge,
    /// Calls waiting for a slot now.
    pub queued: Gauge,
    jail: Family<JailLabels, Gauge>,
    /// 1 while the jail meets what the server requires.
    pub posture_ok: Gauge,
    /// 1 once the server is draining.
    pub draining: Gauge,
}

fn histogram() -> Histogram {
    // 5 ms to about 80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("glovebox");
        let calls = Family::<CallLabels, Counter>::default();
        let duration =
            Family::<CallLabels, Histogram>::new_with_constructor(histogram as fn() -> Histogram);
        let refusals = Family::<RefusalLabels, Counter>::default();
        let in_flight = Gauge::default();
        let queued = Gauge::default();
        let jail = Family::<JailLabels, Gauge>::default();
        let posture_ok = Gauge::default();
        let draining = Gauge::default();
        registry.register(
            "calls",
            "Tool calls ended, by tool and outcome",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Wall time of tool calls, by tool and outcome",
            duration.clone(),
        );
        registry.register(
            "refusals",
            "Calls and requests refused, by kind",
            refusals.clone(),
        );
        registry.register("calls_in_flight", "Tool calls running", in_flight.clone());
        registry.register(
            "calls_queued",
            "Tool calls waiting for a slot",
            queued.clone(),
        );
        registry.register(
            "jail_info",
            "The jail the last readiness probe built",
            jail.clone(),
        );
        registry.register(
            "jail_posture_ok",
            "1 while the jail meets what this server requires",
            posture_ok.clone(),
        );
        registry.register("draining", "1 once SIGTERM was received", draining.clone());
        registry.register_collector(Box::new(EgressTotals));
        registry.register_collector(Box::new(StandbyTotals));
        Metrics {
            registry,
            calls,
            duration,
            refusals,
            in_flight,
            queued,
            jail,
            posture_ok,
            draining,
        }
    }

    /// A call of `tool` (a name the project has, else `None`) ended with
    /// `outcome` after `took`.
    pub fn call_ended(&self, tool: Option<&str>, outcome: &Outcome, took: Duration) {
        let kind = outcome.error.as_ref().map(|e| e.kind);
        let label = match (kind, super::call::is_busy(outcome)) {
            (_, true) => "busy".to_string(),
            (None, _) => "ok".to_string(),
            (Some(k), _) => kind_label(k),
        };
        if let Some(k) = kind {
            if refused_before_running(k) || label == "busy" {
                self.refused(&label);
            }
        }
        let labels = CallLabels {
            tool: tool.unwrap_or("unknown").to_string(),
            outcome: label,
        };
        self.calls.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A call of a tool the project does not have, refused before the
    /// engine (MCP answers it with a JSON-RPC error): counted as any
    /// other call of an unknown tool, `tool="unknown"`,
    /// `outcome="tool_not_found"`.
    pub fn unknown_tool(&self) {
        let outcome = Outcome::failure(
            "unknown",
            ErrorKind::ToolNotFound,
            "no such tool",
            serde_json::Value::Null,
        );
        self.call_ended(None, &outcome, Duration::ZERO);
    }

    /// Something was refused (`kind` names it).
    pub fn refused(&self, kind: &str) {
        self.refusals
            .get_or_create(&RefusalLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The jail the readiness probe built, and whether it meets the
    /// requirement.
    pub fn jail_seen(&self, labels: JailLabels, ok: bool) {
        self.jail.clear();
        self.jail.get_or_create(&labels).set(1);
        self.posture_ok.set(i64::from(ok));
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The egress totals, read at each scrape.
#[derive(Debug)]
struct EgressTotals;

impl prometheus_client::collector::Collector for EgressTotals {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::MetricType;
        let t = crate::egress::totals::get();
        let mut family = encoder.encode_descriptor(
            "egress_connections",
            "Connections tools asked for through glovebox's egress, by decision",
            None,
            MetricType::Counter,
        )?;
        for (decision, n) in [("allowed", t.allowed), ("refused", t.refused)] {
            ConstCounter::new(n).encode(family.encode_family(&[("decision", decision)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "egress_bytes",
            "Bytes tools moved through glovebox's egress, by direction",
            None,
            MetricType::Counter,
        )?;
        for (direction, n) in [("sent", t.sent), ("received", t.received)] {
            ConstCounter::new(n).encode(family.encode_family(&[("direction", direction)])?)?;
        }
        Ok(())
    }
}

/// What standby jails did, read at each scrape.
#[derive(Debug)]
struct StandbyTotals;

impl prometheus_client::collector::Collector for StandbyTotals {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::metrics::MetricType;
        let t = crate::jail::standby::totals();
        let mut family = encoder.encode_descriptor(
            "standby_calls",
            "Calls that found a standby jail of their shape, by what became of it: used, changed (discarded at revalidation) or not_run (its child had ended)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, n) in [
            ("used", t.used),
            ("changed", t.changed),
            ("not_run", t.not_run),
        ] {
            ConstCounter::new(n).encode(family.encode_family(&[("outcome", outcome)])?)?;
        }
        let ready = i64::try_from(crate::jail::standby::ready()).unwrap_or(i64::MAX);
        let gauge = encoder.encode_descriptor(
            "standby_ready",
            "Standby jails waiting at their gate now",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(ready).encode(gauge)?;
        Ok(())
    }
}

/// The error kind as users read it (`approval_required`).
pub fn kind_label(k: ErrorKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| "internal".into())
}

/// Kinds that mean the call was refused before anything ran.
fn refused_before_running(k: ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::ToolNotFound
            | ErrorKind::ManifestInvalid
            | ErrorKind::InputInvalid
            | ErrorKind::SecretMissing
            | ErrorKind::ApprovalRequired
            | ErrorKind::PermissionExceedsCeiling
            | ErrorKind::SandboxUnavailable
    )
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_refusals_are_counted_by_tool_and_kind() {
        let m = Metrics::new();
        m.call_ended(
            Some("t"),
            &Outcome::failure("t", ErrorKind::ApprovalRequired, "x", serde_json::json!({})),
            Duration::from_millis(3),
        );
        m.call_ended(
            None,
            &super::super::call::busy("zz", Default::default()),
            Duration::ZERO,
        );
        let text = m.encode();
        assert!(
            text.contains(r#"glovebox_calls_total{tool="t",outcome="approval_required"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"glovebox_refusals_total{kind="approval_required"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"glovebox_refusals_total{kind="busy"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"glovebox_calls_total{tool="unknown",outcome="busy"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("glovebox_call_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"
glovebox_egress_connections_total{decision="refused"} "#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"
glovebox_egress_bytes_total{direction="sent"} "#
            ),
            "{text}"
        );
    }
}
