//! Reflections of a secret's value: every form in which a server may
//! write a value back, found in a byte string, and — for the egress proxy
//! — turned into the placeholder where that is exact, refused where not.
//!
//! A value is looked for in five *views* of the bytes: as they are, and
//! decoded the way a client would decode JSON string escapes (`\/`,
//! `\u0041`, surrogate pairs), percent escapes (`%2F`, `%2f`), HTML
//! character references (`&#x2F;`, `&#47;`, `&sol;`, any number of
//! leading zeros, with or without `;` where HTML allows it) and all three
//! mixed — and each of those decoded once more (a value escaped twice,
//! `%252F`, is seen, never rewritten: refused). In each view it is
//! matched
//! - as text, ASCII case-insensitively: the exact value is
//!   [`Form::Exact`] (or [`Form::Escaped`] when escapes spell it), the
//!   same letters in another case [`Form::CaseFolded`];
//! - in base64 (standard and URL-safe alphabets, either mixed, at each of
//!   the three byte alignments it may sit at inside a longer encoding),
//!   [`Form::Base64`];
//! - in hex (either case), [`Form::Hex`].
//!
//! [`find`] is the decision: every occurrence, with where it lies in the
//! bytes. [`Hider`] carries it out on a response: each occurrence is
//! replaced by the same form of the placeholder (each escaped character
//! re-escaped the same way, a base64 group re-encoded with its
//! neighbours' bits kept), and a response it cannot rewrite exactly — a
//! case-folded value (its placeholder would not be what the server
//! wrote), a form whose placeholder needs more bytes where the length is
//! fixed, a form held back beyond [`MAX_HOLD`] — is refused
//! ([`Refused`]). In a stream, the bytes that could still begin an
//! occurrence (a proper prefix of any form, an unfinished escape, the
//! base64 group before a prefix) wait for the next chunk. After a
//! rewrite the bytes are searched again: anything still found refuses.
//!
//! Pure: no I/O.

use base64::Engine;

mod views;

use views::{all_views, mixed_only, views_for, View};

/// Most bytes a stream may hold back waiting to see whether they begin a
/// value (an escape with thousands of leading zeros): beyond it the
/// response is refused.
pub const MAX_HOLD: usize = 64 * 1024;

/// Bytes a [`Hider`] searches at once in an item it was given whole.
pub const WINDOW: usize = 64 * 1024;

/// Shortest value looked for in base64 and hex by [`find`] callers that
/// ask for it (shorter ones hit too often by chance).
pub const MIN_ENCODED: usize = 8;

/// How a value was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The value as it is.
    Exact,
    /// The value spelt with escapes (JSON, percent, HTML, mixed).
    Escaped,
    /// The value's letters in another case.
    CaseFolded,
    /// In base64.
    Base64,
    /// In hex.
    Hex,
}

impl Form {
    /// A few words for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Form::Exact => "as it is",
            Form::Escaped => "escaped (JSON, percent or HTML)",
            Form::CaseFolded => "with its letters' case changed",
            Form::Base64 => "in base64",
            Form::Hex => "in hex",
        }
    }
}

/// Why a response could not be rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The server changed the value's case: no placeholder matches it.
    CaseFolded,
    /// The placeholder's form needs another length where the length is
    /// fixed (a streamed body with `Content-Length`).
    Length,
    /// More than [`MAX_HOLD`] bytes would wait for the rest of a form.
    Straddles,
    /// The value was still found after the rewrite.
    Remains,
    /// The value is escaped twice (`%252F`): seen, not rewritten.
    Nested,
}

/// A response that carries a value glovebox cannot turn into the
/// placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The secret (its index in the [`Hider`]'s pairs).
    pub secret: usize,
    /// How the value was written.
    pub form: Form,
    /// Why it could not be rewritten.
    pub why: Why,
}

impl Refused {
    /// What the tool and the log are told (no value).
    pub fn reason(&self) -> String {
        let why = match self.why {
            Why::CaseFolded => "a case-changed value cannot be swapped for its placeholder",
            Why::Length => "its placeholder would change the body's declared length",
            Why::Straddles => "the form spans more than a stream can hold back",
            Why::Remains => "it was still there after the swap",
            Why::Nested => "a value escaped twice is not swapped",
        };
        format!("value {} ({why})", self.form.describe())
    }
}

/// One occurrence found by [`find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Which value (index into the values given).
    pub value: usize,
    /// Byte range in the text.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
    /// How it was written.
    pub form: Form,
}

/// Every occurrence of each value in `bytes`, in every form; base64 and
/// hex only for values of at least `encoded_min` bytes. Sorted by start;
/// occurrences may overlap (one found in two views).
pub fn find(values: &[&[u8]], bytes: &[u8], encoded_min: usize) -> Vec<Found> {
    Finder::new(values, encoded_min).find(bytes)
}

/// The forms of some values, made once and searched for in many texts
/// (the redactor's).
#[derive(Debug, Clone, Default)]
pub struct Finder {
    needles: Vec<Needles>,
    /// The shortest form's length: a shorter text holds none.
    shortest: usize,
}

impl Finder {
    /// The forms of `values`; base64 and hex only for values of at least
    /// `encoded_min` bytes.
    pub fn new(values: &[&[u8]], encoded_min: usize) -> Finder {
        let needles: Vec<Needles> = values
            .iter()
            .map(|v| Needles::new(v, v.len() >= encoded_min.max(1)))
            .collect();
        let shortest = needles
            .iter()
            .flat_map(|n| {
                std::iter::once(n.lower.len())
                    .chain(n.base64.iter().map(|b| b.middle.len()))
                    .chain(n.hex.iter().map(Vec::len))
            })
            .min()
            .unwrap_or(0);
        Finder { needles, shortest }
    }

    /// See [`find`].
    pub fn find(&self, bytes: &[u8]) -> Vec<Found> {
        if self.needles.is_empty() || bytes.len() < self.shortest.max(1) {
            return Vec::new();
        }
        let scan = scan(&self.needles, None, bytes, true);
        let mut out: Vec<Found> = scan
            .hits
            .into_iter()
            .map(|h| Found {
                value: h.secret,
                start: h.start,
                end: h.end,
                form: h.form,
            })
            .collect();
        out.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        out.dedup();
        out
    }
}

/// Where a trailing piece of a value (at least `min` of its characters,
/// in any form, or an escape left unfinished after such a piece) begins
/// in `bytes` — what a cut at the end of `bytes` may have left.
pub fn trailing(values: &[&[u8]], bytes: &[u8], min: usize) -> Option<(usize, usize)> {
    let needles: Vec<Needles> = values.iter().map(|v| Needles::new(v, false)).collect();
    let mut best: Option<(usize, usize)> = None;
    for esc in views_for(bytes, mixed_only(&needles)) {
        // Unfinished escapes at the end are dropped: what they would
        // decode to is unknown.
        let view = View::decode(bytes, esc, false);
        let low = view.text.to_ascii_lowercase();
        for (i, n) in needles.iter().enumerate() {
            let k = suffix_prefix(&low, &n.lower);
            if k >= min && k < n.lower.len() {
                let at = view.raw(low.len() - k);
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, i));
                }
            }
        }
    }
    best
}

/// The forms of one value that are looked for.
#[derive(Debug, Clone)]
struct Needles {
    value: Vec<u8>,
    lower: Vec<u8>,
    base64: Vec<Base64Needle>,
    hex: Option<Vec<u8>>,
}

/// The part of a value's base64 encoding at one alignment that depends
/// on the value alone.
#[derive(Debug, Clone)]
struct Base64Needle {
    /// Filler bytes before the value in its group (0, 1, 2).
    align: usize,
    /// The groups made of value bytes only (standard alphabet).
    middle: Vec<u8>,
    /// Value bytes in the group after `middle`.
    tail: usize,
}

impl Needles {
    fn new(value: &[u8], encoded: bool) -> Needles {
        let mut base64 = Vec::new();
        if encoded {
            for align in 0..3usize {
                let mut bytes = vec![0u8; align];
                bytes.extend_from_slice(value);
                let enc = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
                let head = if align > 0 { 4 } else { 0 };
                let full = bytes.len() / 3 * 4;
                if full >= head + 8 {
                    base64.push(Base64Needle {
                        align,
                        middle: enc.as_bytes()[head..full].to_vec(),
                        tail: bytes.len() % 3,
                    });
                }
            }
        }
        Needles {
            value: value.to_vec(),
            lower: value.to_ascii_lowercase(),
            base64,
            hex: encoded.then(|| hex::encode(value).into_bytes()),
        }
    }
}

/// Length of the longest proper suffix of `text` that begins `needle`.
fn suffix_prefix(text: &[u8], needle: &[u8]) -> usize {
    let max = needle.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| text.ends_with(&needle[..n]))
        .unwrap_or(0)
}

/// One occurrence, in view coordinates and raw ones.
#[derive(Debug, Clone)]
struct Hit {
    secret: usize,
    form: Form,
    view: usize,
    /// Decoded range `[va, vb)` the rewrite replaces.
    va: usize,
    vb: usize,
    /// Raw range.
    start: usize,
    end: usize,
    /// The decoded bytes that replace `[va, vb)`; `None`: no exact
    /// rewrite exists.
    with: Option<Vec<u8>>,
    /// Why, when there is none.
    why: Why,
}

struct Scan {
    views: Vec<View>,
    hits: Vec<Hit>,
    /// First raw byte that must wait for more.
    hold: usize,
}

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn sextet(b: u8) -> Option<u32> {
    match b {
        b'A'..=b'Z' => Some(u32::from(b - b'A')),
        b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// Scans `bytes` for every needle in every view. `swap_to` holds the
/// placeholders (the rewrites are computed only then). `end`: no more
/// bytes follow (nothing is held back).
fn scan(needles: &[Needles], swap_to: Option<&[Vec<u8>]>, bytes: &[u8], end: bool) -> Scan {
    let mut hits = Vec::new();
    let mut hold = bytes.len();
    let mut views = Vec::new();
    let mut twice = Vec::new();
    // The views are kept for the rewrite and for holding back; a search
    // of a whole text drops each once searched.
    let keep = swap_to.is_some() || !end;
    for (view, nested) in all_views(bytes, end, mixed_only(needles)) {
        let vi = twice.len();
        twice.push(nested);
        hold = hold.min(view.tail);
        // A value escaped twice is seen, never rewritten.
        let swap_to = if nested { None } else { swap_to };
        let low = view.text.to_ascii_lowercase();
        let norm: Vec<u8> = view
            .text
            .iter()
            .map(|&b| match b {
                b'-' => b'+',
                b'_' => b'/',
                b => b,
            })
            .collect();
        for (si, n) in needles.iter().enumerate() {
            let to = swap_to.and_then(|p| p.get(si));
            let why = if nested { Why::Nested } else { Why::CaseFolded };
            // As text.
            for a in memchr::memmem::find_iter(&low, &n.lower) {
                let b = a + n.lower.len();
                let exact = view.text[a..b] == n.value[..];
                let form = match (
                    exact,
                    view.from.is_empty() || is_literal(&view, bytes, a, b),
                ) {
                    (false, _) => Form::CaseFolded,
                    (true, true) => Form::Exact,
                    (true, false) => Form::Escaped,
                };
                let with = if exact { to.cloned() } else { None };
                let why = if exact { why } else { Why::CaseFolded };
                hits.push(Hit {
                    secret: si,
                    form,
                    view: vi,
                    va: a,
                    vb: b,
                    start: view.raw(a),
                    end: view.hit_end(b - 1),
                    with,
                    why,
                });
            }
            if !end {
                let k = suffix_prefix(&low, &n.lower);
                if k > 0 {
                    hold = hold.min(view.raw(low.len() - k));
                }
            }
            // In hex.
            if let Some(hx) = &n.hex {
                for a in memchr::memmem::find_iter(&low, hx) {
                    let b = a + hx.len();
                    let with = to.map(|p| hex_like(&view.text[a..b], p));
                    hits.push(Hit {
                        secret: si,
                        form: Form::Hex,
                        view: vi,
                        va: a,
                        vb: b,
                        start: view.raw(a),
                        end: view.hit_end(b - 1),
                        with,
                        why,
                    });
                }
                if !end {
                    let k = suffix_prefix(&low, hx);
                    if k > 0 {
                        hold = hold.min(view.raw(low.len() - k));
                    }
                }
            }
            // In base64.
            for nd in &n.base64 {
                let back = if nd.align > 0 { 4 } else { 0 };
                for a in memchr::memmem::find_iter(&norm, &nd.middle) {
                    let b = a + nd.middle.len();
                    // The group after the middle holds the value's last
                    // bytes: it must be here to be rewritten.
                    let tail_chars = if nd.tail > 0 { nd.tail + 1 } else { 0 };
                    let after = norm[b..]
                        .iter()
                        .take(tail_chars)
                        .take_while(|c| sextet(**c).is_some())
                        .count();
                    if !end && after < tail_chars && b + after == norm.len() {
                        hold = hold.min(view.raw(a.saturating_sub(back)));
                        continue;
                    }
                    let head = a >= back && norm[a - back..a].iter().all(|c| sextet(*c).is_some());
                    let va = if head { a - back } else { a };
                    let vb = if after == tail_chars { b + after } else { b };
                    let with = to.map(|p| {
                        base64_like(
                            &view.text[va..vb],
                            nd,
                            head,
                            after == tail_chars,
                            &n.value,
                            p,
                        )
                    });
                    hits.push(Hit {
                        secret: si,
                        form: Form::Base64,
                        view: vi,
                        va,
                        vb,
                        start: view.raw(va),
                        end: view.hit_end(vb - 1),
                        with,
                        why,
                    });
                }
                if !end {
                    let k = suffix_prefix(&norm, &nd.middle);
                    if k > 0 {
                        hold = hold.min(view.raw((norm.len() - k).saturating_sub(back)));
                    }
                }
            }
        }
        if keep {
            views.push(view);
        }
    }
    // A value escaped once is also in the views decoded twice: there it
    // is the first view's occurrence, not another.
    let once: Vec<(usize, usize)> = hits
        .iter()
        .filter(|h| !twice[h.view])
        .map(|h| (h.start, h.end))
        .collect();
    hits.retain(|h| !twice[h.view] || !once.iter().any(|&(s, e)| h.start < e && s < h.end));
    // Never hold back from inside an escape of any view.
    loop {
        let snapped = views.iter().fold(hold, |h, v| v.snap(h));
        if snapped == hold {
            break;
        }
        hold = snapped;
    }
    Scan { views, hits, hold }
}

/// True when decoded bytes `[a, b)` are raw bytes, not escapes.
fn is_literal(view: &View, bytes: &[u8], a: usize, b: usize) -> bool {
    (a..b).all(|i| {
        let r = view.raw(i);
        view.raw_end(i) == r + 1 && bytes[r] == view.text[i]
    })
}

/// `placeholder` in hex, each letter in the case of the one it replaces
/// (the occurrence's case where a digit stood).
fn hex_like(old: &[u8], placeholder: &[u8]) -> Vec<u8> {
    let upper = old.iter().any(u8::is_ascii_uppercase);
    hex::encode(placeholder)
        .bytes()
        .zip(old)
        .map(|(n, o)| {
            if o.is_ascii_uppercase() || (!o.is_ascii_alphabetic() && upper) {
                n.to_ascii_uppercase()
            } else {
                n
            }
        })
        .collect()
}

/// The base64 characters `old` (a head group when `head`, the middle, a
/// tail group's first characters when `tail`) with each value byte's bits
/// replaced by the placeholder's; bits of neighbouring bytes kept, and
/// the alphabet of `old`.
fn base64_like(
    old: &[u8],
    nd: &Base64Needle,
    head: bool,
    tail: bool,
    value: &[u8],
    placeholder: &[u8],
) -> Vec<u8> {
    let mut bits: Vec<bool> = Vec::with_capacity(old.len() * 6);
    for &c in old {
        let s = sextet(c).unwrap_or(0);
        for k in (0..6).rev() {
            bits.push(s >> k & 1 == 1);
        }
    }
    // Value bytes present, and the bit where the first one starts.
    let (first, at) = if head {
        (0, nd.align * 8)
    } else if nd.align > 0 {
        (3 - nd.align, 0)
    } else {
        (0, 0)
    };
    let last = if tail {
        value.len()
    } else {
        value.len() - nd.tail
    };
    for (j, (&v, &p)) in value
        .iter()
        .zip(placeholder)
        .enumerate()
        .take(last)
        .skip(first)
    {
        let pos = at + (j - first) * 8;
        if pos + 8 > bits.len() {
            break;
        }
        let got = (0..8).fold(0u8, |acc, k| acc << 1 | u8::from(bits[pos + k]));
        // A neighbouring group that does not hold this byte is left alone.
        if got == v {
            for k in 0..8 {
                bits[pos + k] = p >> (7 - k) & 1 == 1;
            }
        }
    }
    let url = old.iter().any(|&c| c == b'-' || c == b'_');
    let alphabet = if url { URL } else { STD };
    bits.chunks(6)
        .map(|c| {
            let s = c.iter().fold(0usize, |acc, &b| acc << 1 | usize::from(b));
            alphabet[s]
        })
        .collect()
}

/// `new` (decoded bytes) written the way the raw escape `orig` was,
/// as close to its length as the escape allows.
fn encode_like(new: &[u8], orig: &[u8]) -> Vec<u8> {
    if orig.len() <= 1 {
        return new.to_vec();
    }
    let text = String::from_utf8_lossy(new);
    let upper_hex = |s: &[u8]| s.iter().any(|b| (b'A'..=b'F').contains(b));
    let mut out = Vec::new();
    match (orig[0], orig[1]) {
        (b'\\', b'u') => {
            let upper = upper_hex(&orig[2..]);
            for c in text.chars() {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let s = if upper {
                        format!("\\u{u:04X}")
                    } else {
                        format!("\\u{u:04x}")
                    };
                    out.extend_from_slice(s.as_bytes());
                }
            }
        }
        (b'\\', _) => {
            for c in text.chars() {
                match c {
                    '/' | '"' | '\\' => {
                        out.push(b'\\');
                        out.push(c as u8);
                    }
                    c => out.extend_from_slice(c.to_string().as_bytes()),
                }
            }
        }
        (b'%', _) => {
            // Upper case unless the escape was written in lower (RFC 3986).
            let upper = !orig[1..].iter().any(|b| (b'a'..=b'f').contains(b));
            for b in new {
                let s = if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                };
                out.extend_from_slice(s.as_bytes());
            }
        }
        (b'&', b'#') => {
            let hex = matches!(orig.get(2), Some(b'x' | b'X'));
            let lead = if hex { 3 } else { 2 };
            let semi = orig.ends_with(b";");
            let digits = orig.len() - lead - usize::from(semi);
            let upper = upper_hex(&orig[lead..]);
            for c in text.chars() {
                let v = c as u32;
                let d = match (hex, upper) {
                    (true, true) => format!("{v:0digits$X}"),
                    (true, false) => format!("{v:0digits$x}"),
                    (false, _) => format!("{v:0digits$}"),
                };
                out.extend_from_slice(&orig[..lead]);
                out.extend_from_slice(d.as_bytes());
                if semi {
                    out.push(b';');
                }
            }
        }
        (b'&', _) => {
            let chars: Vec<char> = text.chars().collect();
            if chars.len() == 1 {
                // `&#NN;` padded to the name's length where it fits.
                let v = chars[0] as u32;
                let digits = orig.len().saturating_sub(3);
                out.extend_from_slice(format!("&#{v:0digits$};").as_bytes());
            } else {
                out.extend_from_slice(text.as_bytes());
            }
        }
        _ => out.extend_from_slice(new),
    }
    out
}

/// The raw bytes that replace `[h.start, h.end)`.
fn rewrite_hit(bytes: &[u8], view: &View, h: &Hit, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(h.end - h.start);
    let mut i = view.group(h.va).0;
    while i < view.text.len() && view.raw(i) < h.end {
        let (a, b) = view.group(i);
        // An unwrapped view's last span ends where the occurrence does,
        // before the white space after it.
        let (ra, rb) = (view.raw(a), view.raw(b).min(h.end));
        let old = &view.text[a..b];
        let new: Vec<u8> = (a..b)
            .map(|k| {
                if (h.va..h.vb).contains(&k) {
                    with[k - h.va]
                } else {
                    view.text[k]
                }
            })
            .collect();
        if new == old {
            out.extend_from_slice(&bytes[ra..rb]);
        } else if view.unwrapped {
            // The byte, then the white space after it.
            out.extend_from_slice(&new);
            out.extend_from_slice(&bytes[(ra + 1).min(rb)..rb]);
        } else {
            out.extend(encode_like(&new, &bytes[ra..rb]));
        }
        i = b;
    }
    out
}

/// Turns each secret's value into its placeholder in responses: whole
/// items (a header, a reason phrase, a body read whole) or a stream of
/// chunks.
#[derive(Debug, Clone)]
pub struct Hider {
    needles: Vec<Needles>,
    placeholders: Vec<Vec<u8>>,
    carry: Vec<u8>,
    /// A stream whose length must not change.
    fixed: bool,
    counts: Vec<u64>,
}

impl Hider {
    /// A hider for (real value, placeholder) pairs of equal length.
    pub fn new(pairs: &[(&[u8], &[u8])]) -> Hider {
        Hider {
            needles: pairs
                .iter()
                .map(|(v, _)| Needles::new(v, v.len() >= MIN_ENCODED))
                .collect(),
            placeholders: pairs.iter().map(|(_, p)| p.to_vec()).collect(),
            carry: Vec::new(),
            fixed: false,
            counts: vec![0; pairs.len()],
        }
    }

    /// The same hider for a stream whose length is fixed (or not).
    pub fn fixed(mut self, fixed: bool) -> Hider {
        self.fixed = fixed;
        self
    }

    /// Rewrites `bytes`; `Ok(out, hold)`: the rewritten bytes and where
    /// in them the part that must wait begins.
    fn rewrite(
        &mut self,
        bytes: &[u8],
        end: bool,
        fixed: bool,
    ) -> Result<(Vec<u8>, usize), Refused> {
        let s = scan(&self.needles, Some(&self.placeholders), bytes, end);
        let mut hits = s.hits;
        if let Some(h) = hits.iter().find(|h| h.with.is_none()) {
            return Err(Refused {
                secret: h.secret,
                form: h.form,
                why: h.why,
            });
        }
        hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
        let mut hold = s.hold;
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        let mut out_hold = None;
        for h in &hits {
            if h.start < at {
                continue;
            }
            if h.start < hold && hold < h.end {
                hold = h.start;
            }
            if at <= hold && hold <= h.start && out_hold.is_none() {
                out_hold = Some(out.len() + hold - at);
            }
            out.extend_from_slice(&bytes[at..h.start]);
            let with = h.with.as_deref().unwrap_or_default();
            let new = rewrite_hit(bytes, &s.views[h.view], h, with);
            if fixed && new.len() != h.end - h.start {
                return Err(Refused {
                    secret: h.secret,
                    form: h.form,
                    why: Why::Length,
                });
            }
            out.extend(new);
            self.counts[h.secret] += 1;
            at = h.end;
        }
        if at == 0 {
            // Nothing rewritten: nothing to search again.
            return Ok((bytes.to_vec(), hold));
        }
        let out_hold = out_hold.unwrap_or(out.len() + hold.saturating_sub(at));
        out.extend_from_slice(&bytes[at..]);
        // Whatever is still there refuses.
        let again = scan(&self.needles, None, &out, end);
        if let Some(h) = again.hits.first() {
            return Err(Refused {
                secret: h.secret,
                form: h.form,
                why: Why::Remains,
            });
        }
        Ok((out, out_hold.min(again.hold)))
    }

    /// `bytes` whole (its length may change): `Ok(None)` when nothing was
    /// found. Searched in windows of [`WINDOW`] bytes, as a stream is, so
    /// that a large body costs no more memory than a stream's window.
    pub fn whole(&mut self, bytes: &[u8]) -> Result<Option<Vec<u8>>, Refused> {
        let carry = std::mem::take(&mut self.carry);
        let fixed = std::mem::replace(&mut self.fixed, false);
        let result = (|| {
            let mut out = Vec::with_capacity(bytes.len());
            for chunk in bytes.chunks(WINDOW) {
                out.extend(self.push(chunk)?);
            }
            out.extend(self.finish()?);
            Ok(out)
        })();
        self.carry = carry;
        self.fixed = fixed;
        let out = result?;
        Ok((out != bytes).then_some(out))
    }

    /// The next chunk of a stream: the bytes ready to send.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>, Refused> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        let (mut out, hold) = self.rewrite(&buf, false, self.fixed)?;
        self.carry = out.split_off(hold);
        if self.carry.len() > MAX_HOLD {
            return Err(Refused {
                secret: 0,
                form: Form::Escaped,
                why: Why::Straddles,
            });
        }
        Ok(out)
    }

    /// The end of the stream: the bytes still held back.
    pub fn finish(&mut self) -> Result<Vec<u8>, Refused> {
        let buf = std::mem::take(&mut self.carry);
        let (out, _) = self.rewrite(&buf, true, self.fixed)?;
        Ok(out)
    }

    /// Values hidden so far, per secret.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Forgets the counts (after they were logged).
    pub fn reset_counts(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
    }
}

#[cfg(test)]
#[path = "reflect_tests.rs"]
mod tests;
