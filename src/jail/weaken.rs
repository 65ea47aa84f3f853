//! Test builds only: one layer of the jail switched off, for the calls
//! one test thread makes, so that `doctor --prove`'s tests can show the
//! prover reports what that layer alone holds as broken
//! (`crate::prove`'s `weakened_tests`).
//!
//! This module exists only under `cfg(test)`: it is compiled into the
//! library's own unit-test binary and into nothing else. No release or
//! debug build of `glovebox` has it, and no flag, variable or file can
//! reach it. The switch is thread-local, so the tests that run beside it
//! in the same process get the whole jail.
//!
//! The layer is switched off where the call is prepared
//! ([`super::prepare`]), after the plan decided it: the plan and the
//! result still claim it, as a jail whose layer silently failed would.

use std::cell::Cell;

use super::child::Prepared;

/// A layer of the jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// No Landlock ruleset.
    Landlock,
    /// No seccomp filter (and so no metadata supervisor or broker).
    Seccomp,
    /// No mount tree: the child keeps the host's root (a private `/proc`
    /// still mounted for its PID namespace).
    Tree,
    /// The environment inherited whole instead of built empty.
    Environment,
    /// No cgroup joined, no resource limit set.
    Limits,
    /// Capabilities not dropped (a root supervisor).
    Capabilities,
}

thread_local! {
    static OFF: Cell<Option<Layer>> = const { Cell::new(None) };
}

/// Runs `f` with `layer` switched off for the jails this thread prepares.
pub fn with<T>(layer: Layer, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            OFF.set(None);
        }
    }
    OFF.set(Some(layer));
    let _reset = Reset;
    f()
}

fn off(layer: Layer) -> bool {
    OFF.get() == Some(layer)
}

/// The prepared child, with the switched-off layer taken out.
pub(super) fn prepared(p: &mut Prepared) {
    if off(Layer::Landlock) {
        p.landlock = None;
    }
    if off(Layer::Seccomp) {
        p.seccomp = None;
    }
    if off(Layer::Tree) {
        p.tree = None;
        // The home and /dev/shm rules name the tree's own mounts.
        p.home_rule = None;
        p.private_shm = false;
    }
    if off(Layer::Limits) {
        p.cgroup_procs.clear();
        p.rlimits.clear();
    }
    if off(Layer::Capabilities) {
        p.drop_caps = None;
    }
}

/// With [`Layer::Environment`] off, this process's whole environment
/// added to the jail's `env` (its own variables win).
pub(super) fn inherit(env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>) {
    if off(Layer::Environment) {
        let own: Vec<_> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
            .collect();
        env.extend(own);
    }
}
