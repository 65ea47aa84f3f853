//! Liveness, readiness and draining, for a balancer or Kubernetes.
//!
//! - `GET /healthz`: alive (the process answers).
//! - `GET /readyz`: 200 only while the jail this node builds meets what
//!   the server requires and the server is not draining; else 503 with
//!   the reason. The jail is checked by building one ([`probe`]: a jailed
//!   `true`, as `glovebox doctor` does) at start and every
//!   `--ready-interval`, and the mode it got (`namespaces`,
//!   `namespace-free`) must be at least `--require-jail`; a mode of
//!   `none` (only degraded runs possible) is never ready. A node whose
//!   kernel, seccomp or namespaces stop working (a changed sysctl, an
//!   exhausted limit) is taken out of the balancer this way, not after
//!   its calls failed with `sandbox_unavailable`.
//! - On SIGTERM the server drains ([`start_draining`]): `/readyz` turns
//!   503 at once, and every new call (`/mcp`, `/api/…`) gets 503 with
//!   `Retry-After` for `--drain-delay` while the balancer notices; then
//!   [`super::shutdown::drain`] stops accepting, ends event streams and
//!   gives the calls in flight the grace period.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use super::metrics::{self, JailLabels};
use super::problem::{json_response, Problem};
use crate::jail::probe::Mode;
use crate::run::ErrorKind;

/// The weakest jail a ready server may build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Require {
    /// Any jail that enforces without degraded mode (namespaces, or the
    /// namespace-free mode).
    #[default]
    Any,
    /// PID, mount and IPC namespaces (the `hostUsers: false` profile).
    Namespaces,
}

/// What the last readiness probe found.
#[derive(Debug, Clone, Serialize)]
pub struct Posture {
    /// The jail meets the requirement.
    pub ok: bool,
    /// The jail's mode (`namespaces`, `namespace-free`, `none`), or
    /// `unknown` before the first probe.
    pub mode: String,
    /// What is missing, when not ok.
    pub reason: Option<String>,
}

#[derive(Debug)]
struct State {
    draining: AtomicBool,
    posture: RwLock<Posture>,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| State {
        draining: AtomicBool::new(false),
        posture: RwLock::new(Posture {
            ok: false,
            mode: "unknown".into(),
            reason: Some("the jail has not been checked yet".into()),
        }),
    })
}

/// The server drains from now on.
pub fn start_draining() {
    state().draining.store(true, Ordering::SeqCst);
    metrics::get().draining.set(1);
}

/// Whether the server is draining.
pub fn draining() -> bool {
    state().draining.load(Ordering::SeqCst)
}

/// Builds a jail now (a jailed `true`, in a jail made for it: never a
/// standby) and records what it got.
pub fn probe(require: Require) -> Posture {
    let mut spec = crate::jail::Spec::new(["true"]);
    spec.limits.wall = Duration::from_secs(10);
    let posture = match crate::jail::run_fresh(&spec) {
        Err(e) => Posture {
            ok: false,
            mode: "none".into(),
            reason: Some(format!(
                "no jail can be built here: {e}; run `glovebox doctor`"
            )),
        },
        Ok(r) => {
            let e = r.enforcement;
            metrics::get().jail_seen(
                JailLabels {
                    mode: e.mode.to_string(),
                    landlock_abi: e.landlock_abi.to_string(),
                    seccomp: e.seccomp.to_string(),
                    mount_tree: e.mount_tree.to_string(),
                },
                true,
            );
            let reason = if r.status != crate::jail::Status::Exited(0) {
                Some(format!(
                    "a jailed `true` did not succeed (exit {}); run `glovebox doctor`",
                    r.status.code()
                ))
            } else if e.mode == Mode::None.reported() {
                Some("the jail has no mode that enforces (only degraded runs); run `glovebox doctor`".into())
            } else if require == Require::Namespaces && e.mode != Mode::Namespaces.reported() {
                Some(format!(
                    "--require-jail namespaces, but this node builds a {} jail (user namespaces unavailable: use the `hostUsers: false` pod profile)",
                    e.mode
                ))
            } else {
                None
            };
            Posture {
                ok: reason.is_none(),
                mode: e.mode.to_string(),
                reason,
            }
        }
    };
    metrics::get().posture_ok.set(i64::from(posture.ok));
    *state()
        .posture
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = posture.clone();
    posture
}

/// Probes at once and then every `every`, for as long as the runtime runs.
pub fn spawn_probes(require: Require, every: Duration) {
    tokio::spawn(async move {
        loop {
            let found = tokio::task::spawn_blocking(move || probe(require)).await;
            if let Ok(p) = found {
                if let Some(r) = &p.reason {
                    eprintln!("glovebox: not ready: {r}");
                }
            }
            tokio::time::sleep(every).await;
        }
    });
}

/// `GET /readyz`.
pub async fn readyz() -> Response {
    let posture = state()
        .posture
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let draining = draining();
    let ready = posture.ok && !draining;
    let reason = if draining {
        Some("draining: the server received SIGTERM".to_string())
    } else {
        posture.reason.clone()
    };
    json_response(
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        &json!({
            "ready": ready,
            "draining": draining,
            "jail": posture,
            "reason": reason,
        }),
    )
}

/// `GET /metrics`.
pub async fn metrics_text() -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::get().encode(),
    )
        .into_response()
}

/// Seconds a client is told to wait before retrying on a draining server
/// (another replica answers by then).
pub const RETRY_AFTER: &str = "1";

/// Refuses new calls while draining: 503 with `Retry-After`.
pub async fn refuse_while_draining(request: Request, next: Next) -> Response {
    if draining() {
        metrics::get().refused("draining");
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ResourceLimit,
            "this replica is shutting down and takes no new calls; retry, another replica will answer",
        )
        .details(json!({"draining": true}))
        .header(header::RETRY_AFTER, RETRY_AFTER)
        .into_response();
    }
    next.run(request).await
}
