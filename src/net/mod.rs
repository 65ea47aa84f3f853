//! The outbound-network decision, pure: no socket, no lookup, no runtime.
//! Every way out of a call — the egress proxy of `network: true`
//! ([`crate::egress`]) and the http tools' client ([`crate::httpclient`])
//! — asks the same questions here and carries the answer out itself.
//!
//! One concept per file:
//! - [`allow`]: host patterns and the manifest's allowlist
//!   (`permissions.network: {allow: […]}`, a placeholder secret's hosts);
//! - [`guard`]: the SSRF guard, every address classified (public, private,
//!   link-local / cloud metadata);
//! - [`own`]: whether an address reaches one of glovebox's own listeners
//!   (the registry's answer; reading it is [`crate::egress::listeners`]);
//! - [`decide`]: the decision itself — the allowlist on the host, then the
//!   guard and the own listeners on every address — and its refusals.

pub mod allow;
pub mod decide;
pub mod guard;
pub mod own;

pub use allow::{Allowlist, Host, Pattern, PatternError};
pub use decide::{Refusal, Rules};
pub use guard::GuardError;
pub use own::Registry;
