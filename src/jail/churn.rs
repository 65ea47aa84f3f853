//! Host churn during a jail's set-up (issue 43, item 5): a file of the
//! system baseline that the host replaces while a call's jail is being
//! built is held again and bound as it now is; the caller's grants never
//! are.
//!
//! The jail binds each held path only after finding, in its own mount
//! namespace, the very object the supervisor held (`sys::bind_checked`):
//! a path replaced meanwhile fails the child's set-up with `ESTALE`
//! ([`super::JailError::Changed`]). For the caller's grants that is a
//! refusal (invariant 13: a grant is resolved once and used as decided).
//! But the host replaces baseline files on its own — `ldconfig` renames a
//! new `/etc/ld.so.cache` over the old one during every package install,
//! a resolver rewrites `/etc/resolv.conf` — and a call must not fail for
//! it. So when the child reports a replaced path, the supervisor holds the
//! baseline again ([`Seen`] compares what it finds with what it held):
//!
//! - the baseline is as it was: one of the caller's grants (or a path
//!   protected inside them) changed — refused, as before;
//! - a baseline file changed: the call's set-up is made again from the
//!   baseline as it now is and the caller's grants as first held (their
//!   descriptors, never their names again), after a short wait;
//! - still changing after [`MAX_TRIES`] set-ups: the call is not run, and
//!   the error says so as a transient one (HTTP 503 with `Retry-After`,
//!   [`super::JailError::HostChurn`]).

use std::path::PathBuf;
use std::time::Duration;

use super::hold::Id;
use super::tree::HeldAccess;

/// Set-ups a call gets while the host keeps replacing baseline files.
pub const MAX_TRIES: u32 = 16;

/// What a held baseline was: each path (by class), where it really is,
/// the object it is and a link's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen(Vec<(u8, PathBuf, PathBuf, Id, Option<PathBuf>)>);

impl Seen {
    /// What `held` holds.
    pub fn of(held: &HeldAccess) -> Seen {
        let classes = [&held.read_only, &held.read, &held.exec, &held.write];
        Seen(
            (0u8..)
                .zip(classes)
                .flat_map(|(class, list)| {
                    list.iter().map(move |h| {
                        (
                            class,
                            h.path.clone(),
                            h.real.clone(),
                            h.id,
                            h.target.clone(),
                        )
                    })
                })
                .collect(),
        )
    }

    /// The paths held in `self` or `now` but not as the same object in
    /// both.
    fn changed(&self, now: &Seen) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .0
            .iter()
            .filter(|e| !now.0.contains(e))
            .chain(now.0.iter().filter(|e| !self.0.contains(e)))
            .map(|e| e.1.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// What to do after the child found a held path replaced.
#[derive(Debug, PartialEq, Eq)]
pub enum Churn {
    /// The baseline is as it was: a caller's grant changed. Refused.
    Grant,
    /// Baseline files changed: set the jail up again after this wait.
    Again(Duration),
    /// They kept changing for [`MAX_TRIES`] set-ups: these paths.
    GiveUp(Vec<PathBuf>),
}

/// Decides after set-up number `tries` found a replaced path, from the
/// baseline it held (`held`) and the baseline as held again now (`now`).
pub fn decide(held: &Seen, now: &Seen, tries: u32) -> Churn {
    if held == now {
        return Churn::Grant;
    }
    if tries >= MAX_TRIES {
        return Churn::GiveUp(held.changed(now));
    }
    // 1, 2, 4 … 64 ms: ldconfig's rename is done by the time the child
    // finds it; another one would have to land in the next set-up too.
    Churn::Again(Duration::from_millis(1 << tries.saturating_sub(1).min(6)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::jail::hold::{hold, Links};

    fn held(paths: &[&std::path::Path]) -> HeldAccess {
        let mut h = HeldAccess::default();
        for p in paths {
            h.read_only.extend(hold(p, &Links::Follow).unwrap());
        }
        h
    }

    #[test]
    fn a_replaced_baseline_file_is_set_up_again_and_a_grant_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("ld.so.cache");
        let other = t.path().join("resolv.conf");
        std::fs::write(&cache, "old").unwrap();
        std::fs::write(&other, "x").unwrap();
        let before = Seen::of(&held(&[&cache, &other]));
        // Nothing of the baseline changed: it was a grant.
        let same = Seen::of(&held(&[&cache, &other]));
        assert_eq!(decide(&before, &same, 1), Churn::Grant);
        // ldconfig's way: a new file renamed over the old one.
        std::fs::write(t.path().join("ld.so.cache~"), "new").unwrap();
        std::fs::rename(t.path().join("ld.so.cache~"), &cache).unwrap();
        let now = Seen::of(&held(&[&cache, &other]));
        assert_eq!(
            decide(&before, &now, 1),
            Churn::Again(Duration::from_millis(1))
        );
        assert_eq!(
            decide(&before, &now, 3),
            Churn::Again(Duration::from_millis(4))
        );
        assert_eq!(
            decide(&before, &now, MAX_TRIES),
            Churn::GiveUp(vec![cache.clone()])
        );
        // A file gone or new is a change too.
        std::fs::remove_file(&other).unwrap();
        let gone = Seen::of(&held(&[&cache, &other]));
        assert_eq!(decide(&now, &gone, MAX_TRIES), Churn::GiveUp(vec![other]));
    }
}
