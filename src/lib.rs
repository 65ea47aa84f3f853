//! glovebox runs AI-agent tools under kernel-enforced isolation.
//!
//! A tool is a manifest (`.glee/tools/<name>/tool.yml`) whose
//! `permissions` glovebox turns into the ceiling of what the tool's process
//! can do. One call flows through these modules:
//!
//! ```text
//! manifest (load + lint) ─▶ validate (inputs, defaults) ─▶ policy ─▶ template
//!        └──────────────────────── engine::Engine::call ─────────────────┘
//!                                                        │
//!                        run (command | python) ─▶ jail::run ─▶ Outcome
//! ```
//!
//! - [`manifest`]: the model of `tool.yml`, YAML with positions, discovery
//!   of the project root, `.glee/config.yml`, and lint with file:line:col;
//!   [`manifest::agentcli`] maps an agentcli `tools.json` onto the same
//!   model (run by [`run::agentcli`]: arguments on stdin, one JSON line
//!   back, jailed to the tools.json directory by default).
//! - [`validate`]: inputs and outputs against their JSON Schemas.
//! - [`template`]: one-pass `${name}` expansion, typed per context.
//! - [`policy`]: manifest ∪ profile baseline ∪ runtime → what the jail
//!   allows (`glovebox explain`), grants resolved through their symlinks
//!   at every call (one leading out of the root is refused unless named).
//! - [`engine`]: [`engine::Engine::call`], the one library call every
//!   interface (CLI, MCP, HTTP) adapts.
//! - [`run`]: the command and python kinds, secrets and the one redactor
//!   (before any cut, through JSON escapes, base64 and hex), and the
//!   [`run::Outcome`] contract.
//! - [`net`]: the outbound-network decision, pure — host patterns and
//!   allowlists, the SSRF guard's address classes, glovebox's own
//!   listeners as a destination — asked by both ways out below.
//! - [`run::http`] and [`httpclient`]: the http kind — the request
//!   expanded per context (URL path segment, query, header, JSON body),
//!   sent by glovebox itself over hyper + rustls behind the SSRF guard,
//!   redirects that never carry a secret to another origin, bounded time
//!   and size.
//! - [`egress`]: `network: true` for command and python tools — the call's
//!   own network namespace, whose only way out is the supervisor's egress
//!   proxy (HTTP `CONNECT`, absolute-form HTTP, SOCKS5) behind the same
//!   SSRF guard as http tools, host allowlists, never glovebox's own
//!   servers, and a per-call log of every connection for the audit line;
//!   placeholder secrets (the tool holds a stand-in, the proxy adds the
//!   value for the secret's hosts only, HTTPS read with a per-call CA).
//! - [`jail`]: the confined child process — its own root built from
//!   read-only binds of what it is granted ([`jail::tree`]), Landlock,
//!   seccomp, PID / mount / IPC (/ user / network) namespaces, cgroup
//!   limits, capability drop, a scrubbed environment; every `unsafe` block
//!   lives in its `sys` module.
//! - [`surface`]: the project's control surface (`.glee/`, `tools.json`,
//!   `.git/`, what its tools run), read-only in every jail, inside write
//!   grants too, and never written by the built-ins.
//! - [`footprint`]: what a tool runs — every path inside the root whose
//!   content or existence decides the code a call executes (manifest,
//!   entrypoint, scripts named by arguments, a python module with every
//!   name that could shadow it, the venv's links and start-up files).
//! - [`approval`], [`create`], [`audit`] and [`state`]: approvals bound to
//!   the footprint, the venv's interpreter and where each grant resolves,
//!   agent-created tools under the project's permission ceiling (checked
//!   again at every call), the HMAC-chained audit log (each line naming
//!   its key; intent before each call, result after, continuity checked
//!   against a head, fail closed) with one sanitiser for every
//!   caller-supplied string, and glovebox's own state directory, found
//!   from the user's passwd entry whatever the caller's environment (or
//!   `--state-dir`), which no jail may read or write.
//! - [`builtin`]: GLM-CLI's `read_file`, `write_file` and `list_files`,
//!   in every Glee project unless its config narrows them, run as the
//!   glovebox binary itself in the jail with
//!   the root readable and at most the target's directory writable.
//! - Glee v1 tools: a single file `.glee/tools/<name>.yml` (the legacy
//!   format) loads beside v2 directories, mapped onto the same model by
//!   [`manifest::v1`] (its per-action `endpoints` become
//!   `exec.http.dispatch`, a documented v2 extension), so it runs through
//!   the same validation, http runner, SSRF guard, approval and audit;
//!   `lint` warns `legacy-v1`, and [`migrate`] writes the v2 directory,
//!   checked to load to the identical manifest.
//! - [`serve`]: the MCP server (`rmcp`) over stdio and Streamable HTTP,
//!   MCP 2024-11-05 to 2025-11-25 (`initialize`) and 2026-07-28
//!   (`server/discover`, `subscriptions/listen`): the tool catalog,
//!   results, cancellable calls, live reload and list changes; and the HTTP
//!   API (HDN-compatible `/api/v1/tools`, OpenAPI 3.1 at `/openapi.json`)
//!   with every resource bounded (connections, timeouts, sessions, one
//!   call bound for every transport), a `Host` check on every route and
//!   graceful shutdown.
//! - [`prove`]: `glovebox doctor --prove`, proof by effect on this host:
//!   each tool's real jail (made by [`engine::Engine::stand_in`], the
//!   call's own steps) runs a battery of attacks (this binary, `glovebox
//!   __prove`) on canaries of the prover's own — files, listeners, a
//!   process, an environment variable, secrets — and each invariant is
//!   reported held (by which mechanism), broken (with the evidence) or
//!   unproven.
//! - [`export`]: the tools as OpenAI (Chat and Responses), Anthropic and
//!   MCP tool lists; names a target does not accept are reported, never
//!   renamed.
//! - [`offer`], [`invisible`] and [`terminal`]: what people and clients
//!   are shown — one rendering of each tool, shown at approval (the
//!   digest of the shown text approved) and forwarded to every client;
//!   Unicode code points nobody sees escaped for people and removed for
//!   clients; a tool's control and escape sequences shown escaped on a
//!   terminal.
//! - [`import`]: other runners' tool files (HDN's Tool JSON) turned into
//!   tool directories that lint clean, with what cannot be expressed
//!   reported.
//!
//! Threat model and what is enforced on which kernel: `SECURITY.md`. The
//! guarantees are proven by integration tests that spawn the real binary,
//! attack for real (sockets to live listeners, reads of canary files,
//! ptrace of a neighbour, fork and memory bombs, TIOCSTI under a pty) and
//! check the effect; CI runs them as root and as `nobody` with
//! `GLOVEBOX_REQUIRE_KERNEL=1`, so a missing kernel feature fails instead of
//! skipping.

pub mod approval;
pub mod audit;
pub mod builtin;
pub mod byhand;
pub mod caller;
pub mod create;
pub mod egress;
pub mod engine;
pub mod export;
pub mod footprint;
pub mod gitconfig;
pub mod httpclient;
pub mod import;
pub mod imports_seen;
pub mod interpreter;
pub mod invisible;
pub mod jail;
pub mod kind;
pub mod learn;
pub mod manifest;
pub mod mcpwrap;
pub mod migrate;
pub mod net;
pub mod offer;
pub mod planted;
pub mod policy;
pub mod prove;
pub mod pyimports;
pub mod replica;
pub mod run;
pub mod serve;
pub mod shsource;
pub mod signing;
pub mod state;
pub mod surface;
pub mod template;
pub mod terminal;
pub mod validate;
pub mod yaml;
