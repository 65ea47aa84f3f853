//! glovebox runs AI-agent tools under kernel-enforced isolation.
//!
//! (Architecture documentation grows with the modules; see README.md and
//! SECURITY.md.)

pub mod engine;
pub mod jail;
pub mod manifest;
pub mod policy;
pub mod run;
pub mod template;
pub mod validate;
