//! glovebox runs AI-agent tools under kernel-enforced isolation.
//!
//! (Architecture documentation grows with the modules; see README.md and
//! SECURITY.md.)

pub mod jail;
pub mod manifest;
pub mod template;
pub mod validate;
