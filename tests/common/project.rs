//! A fixture with its own glovebox state directory, for the tests of
//! approvals, agent-created tools and the audit chain (each test keeps its
//! own state directory). Included with `#[path]` next to `common` and
//! `runkit`.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Output;

use crate::runkit::{Called, Fixture};

/// A fixture with its own glovebox state directory.
pub struct Project {
    pub f: Fixture,
    pub state: PathBuf,
}

impl Project {
    pub fn new() -> Project {
        let f = Fixture::new();
        let state = f.state();
        Project { f, state }
    }

    /// `glovebox --root ROOT ARGS…` with this project's state dir.
    pub fn gb(&self, args: &[&str]) -> Output {
        self.f.glovebox(args)
    }

    pub fn run(&self, name: &str, args: &[&str]) -> Called {
        self.f.run_audited(name, args)
    }

    pub fn log(&self) -> String {
        self.f.audit_log()
    }

    pub fn verify(&self) -> bool {
        self.gb(&["audit", "--verify"]).status.success()
    }
}
