//! `glovebox audit --verify`: the chain walked with this state's key
//! ([`super::chain`]), the log's end checked against its head, the
//! problems a reseal acknowledged told apart, and the calls whose intent
//! has no result listed as unfinished.

use std::fs;
use std::io::Read;
use std::path::PathBuf;

use serde::Serialize;
use sha2::Sha256;

use super::chain::{claimed_key_id, key_id, walk, Chain};
use super::event;
use super::line::parse;
use super::{AuditError, Head, Log};
use crate::state;

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Lines whose mac checked out.
    pub valid_lines: usize,
    /// Signs of tampering or damage, each naming a line number (1-based);
    /// empty when none.
    pub problems: Vec<String>,
    /// Interrupted writes (a glovebox that stopped mid-write): not
    /// tampering, and repaired by the next append.
    pub interrupted: Vec<String>,
    /// Calls whose intent was recorded and whose result never was: they
    /// were in flight when glovebox stopped (or still are).
    pub unfinished: Vec<String>,
    /// Problems a person acknowledged with `glovebox audit --reseal`.
    pub acknowledged: usize,
    /// Lines (1-based) signed with another key than this state's: written
    /// by a glovebox with another state directory; this key cannot vouch
    /// for them.
    pub other_key_lines: Vec<usize>,
    /// The key ids of those lines, in order of appearance.
    pub other_key_ids: Vec<String>,
    /// The id of the key used to verify (empty when there is none).
    pub key_id: String,
    /// The state directory that key is in.
    pub state_dir: PathBuf,
    /// The key file, when the state directory holds no key: no line can
    /// be verified, and none is called edited (`verify` never makes a
    /// key). `other_key_ids` then lists the keys the lines claim.
    pub key_missing: Option<PathBuf>,
    /// The log verified is not there (nothing was read).
    #[serde(default)]
    pub log_missing: bool,
    /// The log this state's head describes, when it is not the one
    /// verified (a server's `--audit-dir` log verified without it): the
    /// head says nothing of this one, which is checked line by line only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_describes: Option<PathBuf>,
    /// Lines this state's head says its log holds, when that log is not
    /// the one read (missing, or another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_lines: Option<u64>,
}

impl Verification {
    /// True when every line checked out with this state's key, in the
    /// log this state's head describes.
    pub fn intact(&self) -> bool {
        self.problems.is_empty()
            && self.other_key_lines.is_empty()
            && self.key_missing.is_none()
            && !self.not_this_log()
    }

    /// True when the log read is not the one this state's head describes:
    /// another path, or none there while the head records lines. Nothing
    /// is then called tampered for the head's sake, and no reseal is
    /// advised: the log to verify is elsewhere.
    pub fn not_this_log(&self) -> bool {
        self.head_describes.is_some() || (self.log_missing && self.head_lines.unwrap_or(0) > 0)
    }

    /// True when something is wrong beyond lines of another key.
    pub fn tampered(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// The digest of the problems a reseal acknowledges.
pub(super) fn digest(items: &[String]) -> String {
    use sha2::Digest;
    let mut h = Sha256::new();
    for i in items {
        h.update(i.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

impl Log {
    /// Checks the chain, the head and the calls' intents, with the key
    /// of the state directory. Never makes a key: without one, the
    /// verification says the key is missing
    /// ([`Verification::key_missing`]) and checks nothing (a new key
    /// would call every line edited).
    pub fn verify(&self) -> Result<Verification, AuditError> {
        let state_dir = state::dir()?;
        let key = state::existing_key(&state_dir)?;
        let mut missing = false;
        let (bytes, head) = match fs::File::open(&self.path) {
            Ok(f) => {
                // Readers share the lock: no append is seen half done, and
                // the head is read with the log it describes.
                let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockShared)
                    .map_err(|(_, e)| self.io(e.into()))?;
                let mut b = Vec::new();
                f.read_to_end(&mut b).map_err(|e| self.io(e))?;
                (b, self.read_head()?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing = true;
                (Vec::new(), self.read_head()?)
            }
            Err(e) => return Err(self.io(e)),
        };
        // A head of another log, or of a log that is not here, says
        // nothing about these bytes: they are checked line by line only.
        // A log missing where a head of an older glovebox (which did not
        // record its log's path) says lines were written: another path
        // as likely as a deletion, so set aside too. A head that names
        // this very path makes a missing log a deleted one (checked).
        let elsewhere = head.as_ref().and_then(|h| self.describes_other(h));
        let unknown_missing = missing
            && head
                .as_ref()
                .is_some_and(|h| h.log.is_none() && h.lines.unwrap_or(0) > 0);
        let set_aside = elsewhere.is_some() || unknown_missing;
        let head_lines = head.as_ref().and_then(|h| h.lines);
        let head = head.filter(|_| !set_aside);
        let mut v = match key {
            Some(key) => check(&key, &bytes, head.as_ref(), state_dir),
            None => unverifiable(&bytes, state_dir),
        };
        if set_aside {
            v.problems.retain(|p| p != NO_HEAD);
            v.head_lines = head_lines;
        }
        v.log_missing = missing;
        v.head_describes = elsewhere;
        Ok(v)
    }
}

/// The problem of a log with lines of this key and no head.
const NO_HEAD: &str = "no head recorded for this log (it was not written by this user's glovebox, or the head was removed)";

/// What `verify` reports for a log's bytes and its head.
pub(super) fn check(
    key: &[u8],
    bytes: &[u8],
    head: Option<&Head>,
    state_dir: PathBuf,
) -> Verification {
    let own_id = key_id(key);
    let text = String::from_utf8_lossy(bytes);
    let Chain {
        problems: chain,
        mut interrupted,
        ends,
        other_lines,
        other_ids,
    } = walk(key, &own_id, &text);
    let valid = ends.iter().filter(|(_, _, own)| *own).count();
    let mut problems = Vec::new();
    let mut acknowledged = 0;
    let ack = head.and_then(|h| h.acknowledged.as_ref());
    let (before, after): (Vec<_>, Vec<_>) = chain
        .into_iter()
        .partition(|(n, _)| ack.is_some_and(|a| (*n as u64) < a.line));
    if let Some(a) = ack {
        let before_text: Vec<String> = before.iter().map(|(_, p)| p.clone()).collect();
        if digest(&before_text) == a.digest {
            acknowledged = before_text.len();
        } else {
            problems.push(format!(
                "the lines before the reseal at line {} changed after it",
                a.line
            ));
            problems.extend(before_text);
        }
    }
    problems.extend(after.into_iter().map(|(_, p)| p));
    let len = bytes.len() as u64;
    match head {
        None if len == 0 => {}
        // Only other states wrote here: this one has no head for it.
        None if valid == 0 && !other_lines.is_empty() => {}
        None => problems.push(NO_HEAD.into()),
        Some(h) => {
            match (h.bytes, h.lines) {
                (Some(b), Some(lines)) => {
                    let found = ends.iter().filter(|(end, _, _)| *end <= b).count() as u64;
                    if len < b {
                        problems.push(format!(
                            "the log is shorter than glovebox left it: {lines} lines expected, {found} found (lines were removed from its end, or it was emptied, deleted or replaced)"
                        ));
                    } else if b > 0 && !ends.iter().any(|(end, m, _)| *end == b && *m == h.mac) {
                        problems.push("the log does not end where glovebox left it (it was rewritten or replaced)".into());
                    } else if found != lines {
                        problems.push(format!(
                            "the log has {found} lines where glovebox left {lines}"
                        ));
                    } else {
                        // Every line this key signed up to the head still
                        // claims it: a line of this key edited to name
                        // another key is tampering, not a foreign line.
                        let foreign = other_lines
                            .iter()
                            .filter(|n| ends.get(*n - 1).is_some_and(|(end, _, _)| *end <= b))
                            .count() as u64;
                        if let Some(own) = h.own {
                            let claimed = found.saturating_sub(foreign);
                            if claimed < own {
                                problems.push(format!(
                                    "{} line(s) this state's key signed now claim another key (their key_id was changed): the log was edited",
                                    own - claimed
                                ));
                            }
                        }
                        // Lines of this key past the head (lines of other
                        // states' keys are reported as theirs).
                        let past = ends.iter().filter(|(end, _, own)| *end > b && *own).count();
                        if past > 0 {
                            interrupted.push(format!(
                                "{past} line(s) past where the head was last moved (a glovebox stopped, or could not move the head — a full state directory —, before recording them, or a call is being written); the next call takes them in"
                            ));
                        }
                    }
                }
                _ => {
                    let last = ends
                        .iter()
                        .rfind(|(_, _, own)| *own || other_lines.is_empty())
                        .map(|(_, m, _)| m.clone())
                        .unwrap_or_default();
                    if last != h.mac {
                        problems.push("the log does not end where glovebox last wrote it (lines were removed from its end, or it was replaced)".into());
                    }
                }
            }
            for b in &h.broken {
                problems.push(format!(
                    "continuity broken ({b}); once you have looked, `glovebox audit --reseal` records that you did"
                ));
            }
        }
    }
    Verification {
        valid_lines: valid,
        problems,
        interrupted,
        unfinished: unfinished_calls(&text),
        acknowledged,
        other_key_lines: other_lines,
        other_key_ids: other_ids,
        key_id: own_id,
        state_dir,
        key_missing: None,
        log_missing: false,
        head_describes: None,
        head_lines: None,
    }
}

/// What `verify` reports for a log's bytes when the state directory
/// holds no key: nothing checked, nothing called edited; the keys the
/// lines claim, the calls left unfinished and an unterminated last line
/// are still said.
pub(super) fn unverifiable(bytes: &[u8], state_dir: PathBuf) -> Verification {
    let text = String::from_utf8_lossy(bytes);
    let mut ids: Vec<String> = Vec::new();
    for body in text.lines().filter_map(|l| l.rsplit_once(" mac=")) {
        if let Some(id) = claimed_key_id(body.0) {
            if !ids.iter().any(|k| k == id) {
                ids.push(id.to_string());
            }
        }
    }
    let interrupted = if !text.is_empty() && !text.ends_with('\n') {
        vec![format!(
            "line {}: unterminated (an interrupted write; the next call removes it)",
            text.lines().count()
        )]
    } else {
        Vec::new()
    };
    Verification {
        valid_lines: 0,
        problems: Vec::new(),
        interrupted,
        unfinished: unfinished_calls(&text),
        acknowledged: 0,
        other_key_lines: Vec::new(),
        other_key_ids: ids,
        key_id: String::new(),
        key_missing: Some(state::key_path(&state_dir)),
        state_dir,
        log_missing: false,
        head_describes: None,
        head_lines: None,
    }
}

/// The calls whose intent (`TOOL_STARTED call=ID`) has no result line.
fn unfinished_calls(text: &str) -> Vec<String> {
    let mut started: Vec<(usize, String, String, String)> = Vec::new();
    let mut finished = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let Some(e) = parse(line) else { continue };
        let Some(id) = e.field("call").map(String::from) else {
            continue;
        };
        if e.event == event::TOOL_STARTED {
            let name = e.field("name").unwrap_or_default().to_string();
            started.push((i + 1, id, name, e.ts.clone()));
        } else {
            finished.insert(id);
        }
    }
    started
        .into_iter()
        .filter(|(_, id, _, _)| !finished.contains(id))
        .map(|(n, id, name, ts)| {
            format!("line {n}: call {id} of `{name}` started at {ts} and never finished (glovebox stopped mid-call, or the call is still running)")
        })
        .collect()
}
