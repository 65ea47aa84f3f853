//! Watches `.glee/tools/` (and `.glee/config.yml`, and the project root
//! for `.glee/` itself being deleted, renamed or made again, in any
//! order: each change re-arms every watch on the directories as they now
//! are) and reloads the served
//! project when they change, after a short debounce, so clients get
//! `notifications/tools/list_changed` for tools written by hand, by git or
//! by another process.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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

/// The paths to watch for `live` as its directories now are: the project
/// root itself (so that `.glee/` deleted and made again is noticed), then
/// `tools/` recursively and `.glee/` (config.yml), or all of `.glee/` when
/// it has no `tools/` yet, and the directory of an agentcli `tools.json`.
fn watches(live: &Live) -> Vec<(PathBuf, RecursiveMode)> {
    let glee = live.root().join(".glee");
    let tools = glee.join("tools");
    let mut out = vec![(live.root().to_path_buf(), RecursiveMode::NonRecursive)];
    if tools.is_dir() {
        out.push((tools, RecursiveMode::Recursive));
        out.push((glee, RecursiveMode::NonRecursive));
    } else if glee.is_dir() {
        out.push((glee, RecursiveMode::Recursive));
    }
    if let Some(dir) = live
        .tools_json()
        .as_deref()
        .and_then(std::path::Path::parent)
    {
        out.push((dir.to_path_buf(), RecursiveMode::NonRecursive));
    }
    out
}

/// Watches `wanted` instead of `watched` (again: a directory deleted and
/// made anew needs a new watch); paths that vanished are skipped.
/// Every old watch goes before any new one is made: unwatching a
/// directory watched recursively (`.glee/` while it had no `tools/`) also
/// drops every watch below it, so undoing it after `tools/` was watched
/// again left `tools/` unwatched, and every later edit unnoticed (issue
/// 32, item 5).
fn apply(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut Vec<PathBuf>,
    wanted: Vec<(PathBuf, RecursiveMode)>,
) -> Result<(), WatchError> {
    for path in watched.drain(..) {
        let _ = watcher.unwatch(&path);
    }
    for (path, mode) in wanted {
        if !path.exists() {
            continue;
        }
        watcher
            .watch(&path, mode)
            .map_err(|source| WatchError::Watch {
                path: path.clone(),
                source,
            })?;
        watched.push(path);
    }
    Ok(())
}

/// The running watcher; keep it for as long as changes should be followed.
pub struct Watching {
    _watcher: Arc<Mutex<notify::RecommendedWatcher>>,
}

/// Starts watching `live`'s tools. Needs a tokio runtime.
pub fn spawn(live: Arc<Live>) -> Result<Watching, WatchError> {
    let root = live.root().to_path_buf();
    let glee = root.join(".glee");
    let tools_json = live.tools_json();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = match event {
            Ok(e) => {
                matches!(
                    e.kind,
                    EventKind::Create(_)
                        | EventKind::Remove(_)
                        | EventKind::Any
                        | EventKind::Modify(
                            notify::event::ModifyKind::Data(_)
                                | notify::event::ModifyKind::Name(_)
                                | notify::event::ModifyKind::Any
                        )
                ) && (e.paths.is_empty()
                    || e.paths.iter().any(|p| {
                        p.starts_with(&glee) || tools_json.as_deref().is_some_and(|t| p == t)
                    }))
            }
            Err(_) => true,
        };
        if relevant {
            let _ = tx.send(());
        }
    })
    .map_err(|source| WatchError::Watch {
        path: root.clone(),
        source,
    })?;
    let watcher = Arc::new(Mutex::new(watcher));
    let mut watched = Vec::new();
    apply(
        &mut watcher.lock().unwrap_or_else(|p| p.into_inner()),
        &mut watched,
        watches(&live),
    )?;
    let rewatch = watcher.clone();
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(DEBOUNCE).await;
            while rx.try_recv().is_ok() {}
            if let Err(e) = apply(
                &mut rewatch.lock().unwrap_or_else(|p| p.into_inner()),
                &mut watched,
                watches(&live),
            ) {
                eprintln!("glovebox: {e}; some tool changes may go unnoticed");
            }
            match live.reload().await {
                Err(e) => eprintln!("glovebox: the tools changed but cannot be reloaded: {e}"),
                Ok(_) => {
                    if let Some(notice) = live.engine().project().unread_notice() {
                        eprintln!("glovebox: {notice}");
                    }
                }
            }
        }
    });
    Ok(Watching { _watcher: watcher })
}
