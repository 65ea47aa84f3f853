//! The MAC chain: each line ends with
//! ` key_id=… mac=HMAC-SHA256(key, previous mac ‖ line)` ([`seal`], the
//! one place a line is MACed), so that editing, inserting, removing or
//! reordering a line breaks it ([`walk`]). A line's `key_id` names the
//! key that signed it ([`key_id`], a hash of the key, not the key), so a
//! line of another state directory's key is told from a forged one.

use std::io::{Read, Seek, SeekFrom};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::line::strict;

/// The public name of an audit key: a hash of it, 16 hex digits.
pub fn key_id(key: &[u8]) -> String {
    let mut h = <Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut h, b"glovebox audit key id\n");
    sha2::Digest::update(&mut h, key);
    hex::encode(sha2::Digest::finalize(h))[..16].to_string()
}

/// The `key_id` a raw line claims.
pub(super) fn claimed_key_id(body: &str) -> Option<&str> {
    let (_, rest) = body.rsplit_once(" key_id=")?;
    (rest.len() == 16 && rest.chars().all(|c| c.is_ascii_hexdigit())).then_some(rest)
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], prev: &str, line: &str) -> String {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| {
        // HMAC accepts keys of any length; this branch cannot be taken.
        <HmacSha256 as Mac>::new_from_slice(&[0u8; 32]).unwrap_or_else(|_| unreachable!())
    });
    m.update(prev.as_bytes());
    m.update(b"\n");
    m.update(line.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

/// `line` (an event rendered with its `key_id`, see
/// [`super::Event`]) sealed with `key` onto the chain whose last mac is
/// `prev`: the text to write (`line mac=…` and its newline) and the mac
/// the chain goes on from.
pub(super) fn seal(key: &[u8], prev: &str, line: &str) -> (String, String) {
    let m = mac(key, prev, line);
    let mut out = String::with_capacity(line.len() + m.len() + 6);
    out.push_str(line);
    out.push_str(" mac=");
    out.push_str(&m);
    out.push('\n');
    (out, m)
}

/// Whether `claimed` is the mac of `body` with `key` after `prev`: the
/// line is this key's and chains on.
pub(super) fn verifies(key: &[u8], prev: &str, body: &str, claimed: &str) -> bool {
    mac(key, prev, body) == claimed
}

/// A complete line's body and the mac it claims.
pub(super) fn split_line(raw: &str) -> Option<(&str, &str)> {
    raw.strip_suffix('\n').and_then(|l| l.rsplit_once(" mac="))
}

/// What walking the chain found.
#[derive(Debug, Default)]
pub(super) struct Chain {
    /// Problems, each with its 1-based line.
    pub(super) problems: Vec<(usize, String)>,
    /// An unterminated last line.
    pub(super) interrupted: Vec<String>,
    /// Each complete line's end offset, the mac the chain goes on from,
    /// and whether this key signed it.
    pub(super) ends: Vec<(u64, String, bool)>,
    /// Lines signed by another state's key, and those keys' ids.
    pub(super) other_lines: Vec<usize>,
    pub(super) other_ids: Vec<String>,
}

/// Walks the chain of `text` with `key` (whose id is `own_id`).
pub(super) fn walk(key: &[u8], own_id: &str, text: &str) -> Chain {
    let mut c = Chain::default();
    let mut offset = 0u64;
    let mut prev = String::new();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        offset += raw.len() as u64;
        if !raw.ends_with('\n') {
            c.interrupted.push(format!(
                "line {n}: unterminated (an interrupted write; the next call removes it)"
            ));
            break;
        }
        match split_line(raw) {
            Some((body, m)) if verifies(key, &prev, body, m) => {
                prev = m.to_string();
                c.ends.push((offset, prev.clone(), true));
                if let Err(why) = strict(body) {
                    c.problems.push((n, format!("line {n}: {why}")));
                }
                continue;
            }
            Some((body, m)) => match claimed_key_id(body) {
                Some(other) if other != own_id => {
                    // Another state's key: chain on from its mac.
                    c.other_lines.push(n);
                    if !c.other_ids.iter().any(|k| k == other) {
                        c.other_ids.push(other.to_string());
                    }
                    prev = m.to_string();
                    c.ends.push((offset, prev.clone(), false));
                    continue;
                }
                _ => c.problems.push((
                    n,
                    format!(
                        "line {n}: mac does not match (edited, inserted, removed or reordered lines)"
                    ),
                )),
            },
            None => c
                .problems
                .push((n, format!("line {n}: no mac (not written by glovebox)"))),
        }
        // Continue from the mac the bad line claims.
        if let Some((_, m)) = split_line(raw) {
            prev = m.to_string();
        }
        c.ends.push((offset, prev.clone(), false));
    }
    c
}

/// The mac of the complete line ending exactly at byte `end` (empty when
/// `end` is 0 or no such line).
pub(super) fn last_line_mac(file: &mut std::fs::File, end: u64) -> std::io::Result<String> {
    if end == 0 {
        return Ok(String::new());
    }
    let mut window: u64 = 8 * 1024;
    loop {
        let start = end.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = vec![0; (end - start) as usize];
        file.read_exact(&mut bytes)?;
        if bytes.last() != Some(&b'\n') {
            return Ok(String::new());
        }
        let body = &bytes[..bytes.len() - 1];
        match body.iter().rposition(|b| *b == b'\n') {
            Some(i) => return Ok(mac_of(&body[i + 1..])),
            None if start == 0 => return Ok(mac_of(body)),
            None => window = window.saturating_mul(4),
        }
    }
}

fn mac_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .rsplit_once(" mac=")
        .map(|(_, m)| m.to_string())
        .unwrap_or_default()
}

/// The mac of the last complete line (an unterminated one is an
/// interrupted write and is not chained to).
pub(super) fn last_mac(text: &str) -> String {
    text.split_inclusive('\n')
        .rfind(|l| l.ends_with('\n'))
        .and_then(|l| l.trim_end().rsplit_once(" mac="))
        .map(|(_, m)| m.to_string())
        .unwrap_or_default()
}
