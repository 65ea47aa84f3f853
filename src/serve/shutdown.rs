//! How `glovebox serve` stops: on SIGTERM or SIGINT ([`signal`]),
//! [`drain`] stops accepting connections and lets the requests in flight
//! finish for a grace period; past it, every running call is killed
//! ([`Calls::kill_all`]: each jail's whole process tree, and the MCP
//! sessions), their requests are answered with the Outcome the kill
//! produced, and the server returns once the call threads have ended, so
//! no jailed process outlives it.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::call::Calls;

/// How long to wait, past the grace period, for killed calls to end and
/// their connections to close.
pub const KILL_WAIT: Duration = Duration::from_secs(10);

/// Resolves on the first SIGTERM or SIGINT. If a handler cannot be set,
/// resolves only on the other one (or never, when neither can be).
pub async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())
        .inspect_err(|e| eprintln!("glovebox: cannot watch SIGTERM: {e}"))
        .ok();
    let mut int = signal(SignalKind::interrupt())
        .inspect_err(|e| eprintln!("glovebox: cannot watch SIGINT: {e}"))
        .ok();
    tokio::select! {
        Some(_) = async { term.as_mut()?.recv().await } => {}
        Some(_) = async { int.as_mut()?.recv().await } => {}
        else => std::future::pending::<()>().await,
    }
}

/// Runs `server` (which stops accepting and finishes its connections once
/// `stopping` is cancelled) until `stop` resolves, then drains it as the
/// module describes.
pub async fn drain<E>(
    server: impl Future<Output = Result<(), E>>,
    stop: impl Future<Output = ()>,
    stopping: CancellationToken,
    calls: &Calls,
    grace: Duration,
) -> Result<(), E> {
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r,
        _ = stop => {}
    }
    eprintln!(
        "glovebox: stopping: no new connections; {} running call(s) get {} s to finish",
        calls.in_flight(),
        grace.as_secs_f64()
    );
    stopping.cancel();
    let result = match tokio::time::timeout(grace, &mut server).await {
        Ok(r) => r,
        Err(_) => {
            eprintln!(
                "glovebox: grace period over: killing {} running call(s)",
                calls.in_flight()
            );
            calls.kill_all();
            match tokio::time::timeout(KILL_WAIT, &mut server).await {
                Ok(r) => r,
                Err(_) => {
                    eprintln!("glovebox: connections still open after the kill; closing them");
                    Ok(())
                }
            }
        }
    };
    // Calls whose requests went away (timeouts, closed connections) may
    // still be ending; their jails were killed: wait for them.
    if calls.in_flight() > 0 {
        calls.kill_all();
        if tokio::time::timeout(KILL_WAIT, calls.wait()).await.is_err() {
            eprintln!(
                "glovebox: {} call(s) did not end after the kill",
                calls.in_flight()
            );
        }
    }
    result
}
