//! Watches `.glee/tools/` (and `.glee/config.yml`) and reloads the served
//! project when they change, after a short debounce, so clients get
//! `notifications/tools/list_changed` for tools written by hand, by git or
//! by another process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use super::live::Live;

/// Quiet time after the last change before the project is reloaded.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Errors setting up the watcher.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The watcher could not be created or could not watch a path.
    #[error("cannot watch {path:?} for changes")]
    Watch {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: notify::Error,
    },
}

/// Starts watching `live`'s tools; the returned watcher must be kept alive
/// for as long as changes should be followed. Needs a tokio runtime.
pub fn spawn(live: Arc<Live>) -> Result<notify::RecommendedWatcher, WatchError> {
    let glee = live.root().join(".glee");
    let tools = glee.join("tools");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = match event {
            Ok(e) => matches!(
                e.kind,
                EventKind::Create(_)
                    | EventKind::Remove(_)
                    | EventKind::Any
                    | EventKind::Modify(
                        notify::event::ModifyKind::Data(_)
                            | notify::event::ModifyKind::Name(_)
                            | notify::event::ModifyKind::Any
                    )
            ),
            Err(_) => true,
        };
        if relevant {
            let _ = tx.send(());
        }
    })
    .map_err(|source| WatchError::Watch {
        path: tools.clone(),
        source,
    })?;
    // tools/ recursively and `.glee/` itself (config.yml); without a
    // tools/ directory yet, all of `.glee/` so the first tool is noticed.
    let mut watches = if tools.is_dir() {
        vec![
            (tools.clone(), RecursiveMode::Recursive),
            (glee.clone(), RecursiveMode::NonRecursive),
        ]
    } else if glee.is_dir() || live.tools_json().is_none() {
        vec![(glee.clone(), RecursiveMode::Recursive)]
    } else {
        Vec::new()
    };
    // An agentcli tools.json: its directory, not recursively.
    if let Some(dir) = live
        .tools_json()
        .as_deref()
        .and_then(std::path::Path::parent)
    {
        watches.push((dir.to_path_buf(), RecursiveMode::NonRecursive));
    }
    for (path, mode) in watches {
        watcher
            .watch(&path, mode)
            .map_err(|source| WatchError::Watch { path, source })?;
    }
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(DEBOUNCE).await;
            while rx.try_recv().is_ok() {}
            if let Err(e) = live.reload().await {
                eprintln!("glovebox: the tools changed but cannot be reloaded: {e}");
            }
        }
    });
    Ok(watcher)
}
