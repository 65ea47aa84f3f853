//! The views a value is looked for in: the bytes as they are, and decoded
//! as a client would decode JSON string escapes, percent escapes, HTML
//! character references, all three mixed, or with white space left out —
//! each byte of a view mapped back to the raw span it came from, so a hit
//! can be rewritten in place.

use super::*;

/// Which escapes a view decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Escapes {
    None,
    Json,
    Percent,
    Html,
    All,
    /// No escapes, white space left out (base64 broken into lines, a
    /// value wrapped at a line's end).
    Unwrapped,
}

/// The views worth making for `bytes`: the raw one, one per escape kind
/// present, and the mixed one when more than one kind is. When no value
/// holds an escape's first character (`\\`, `%`, `&`) — `mixed` —, the
/// mixed view alone finds every escaped occurrence: no literal byte of
/// one can start an escape.
pub(super) fn views_for(bytes: &[u8], mixed: bool) -> Vec<Escapes> {
    let mut out = vec![Escapes::None];
    let kinds = [
        (b'\\', Escapes::Json),
        (b'%', Escapes::Percent),
        (b'&', Escapes::Html),
    ];
    let present: Vec<Escapes> = kinds
        .iter()
        .filter(|(b, _)| memchr::memchr(*b, bytes).is_some())
        .map(|(_, e)| *e)
        .collect();
    if mixed {
        if !present.is_empty() {
            out.push(Escapes::All);
        }
        return out;
    }
    let more = present.len() > 1;
    out.extend(present);
    if more {
        out.push(Escapes::All);
    }
    out
}

/// True when no value holds a byte that starts an escape.
pub(super) fn mixed_only(needles: &[Needles]) -> bool {
    needles
        .iter()
        .all(|n| !n.value.iter().any(|b| matches!(b, b'\\' | b'%' | b'&')))
}

/// Every view of `bytes`: the raw one and one per escape kind present
/// (`false`), each followed by itself decoded once more (`true`: a value
/// escaped twice, `%252F`, `%26%23x2F%3B`), then the unwrapped one. Made
/// one at a time, so that a caller that drops each holds few at once.
pub(super) fn all_views(bytes: &[u8], end: bool, mixed: bool) -> Views<'_> {
    Views {
        bytes,
        end,
        mixed,
        kinds: views_for(bytes, mixed).into_iter(),
        queue: std::collections::VecDeque::new(),
        unwrapped: false,
    }
}

pub(super) struct Views<'a> {
    bytes: &'a [u8],
    end: bool,
    mixed: bool,
    kinds: std::vec::IntoIter<Escapes>,
    queue: std::collections::VecDeque<View>,
    unwrapped: bool,
}

impl Iterator for Views<'_> {
    type Item = (View, bool);

    fn next(&mut self) -> Option<(View, bool)> {
        if let Some(v) = self.queue.pop_front() {
            return Some((v, true));
        }
        if let Some(esc) = self.kinds.next() {
            let v = View::decode(self.bytes, esc, self.end);
            if esc != Escapes::None {
                for inner in views_for(&v.text, self.mixed).into_iter().skip(1) {
                    let nested = View::decode(&v.text, inner, self.end).under(&v);
                    self.queue.push_back(nested);
                }
            }
            return Some((v, false));
        }
        if !self.unwrapped {
            self.unwrapped = true;
            let white = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
            if self.bytes.iter().any(white) {
                return Some((
                    View::decode(self.bytes, Escapes::Unwrapped, self.end),
                    false,
                ));
            }
        }
        None
    }
}

/// Bytes decoded under one set of escapes, each decoded byte knowing the
/// raw byte its escape starts at.
pub(super) struct View {
    /// White space was left out: a span is one byte and the white space
    /// after it.
    pub(super) unwrapped: bool,
    pub(super) text: Vec<u8>,
    /// Raw start of each decoded byte's escape (empty: the identity);
    /// the bytes searched at once are far below 4 GiB (a stream's window,
    /// a body read whole in windows, a call's capped output).
    pub(super) from: Vec<u32>,
    /// Raw start of an escape left unfinished at the end (the raw length
    /// when there is none): the view stops there.
    pub(super) tail: usize,
}

pub(super) enum Step {
    /// Decoded bytes and how many raw bytes they took.
    Decoded(Vec<u8>, usize),
    /// An escape that more bytes could finish.
    Unfinished,
    /// Not an escape: the byte stands for itself.
    Literal,
}

impl View {
    pub(super) fn decode(bytes: &[u8], esc: Escapes, end: bool) -> View {
        if esc == Escapes::None {
            return View {
                unwrapped: false,
                text: bytes.to_vec(),
                from: Vec::new(),
                tail: bytes.len(),
            };
        }
        let mut text = Vec::with_capacity(bytes.len());
        let mut from = Vec::with_capacity(bytes.len());
        let mut tail = bytes.len();
        let mut i = 0;
        while i < bytes.len() {
            let step = match (bytes[i], esc) {
                (b'\\', Escapes::Json | Escapes::All) => json_escape(bytes, i, end),
                (b'%', Escapes::Percent | Escapes::All) => percent_escape(bytes, i, end),
                (b'&', Escapes::Html | Escapes::All) => html_reference(bytes, i, end),
                (b' ' | b'\t' | b'\r' | b'\n', Escapes::Unwrapped) => Step::Decoded(Vec::new(), 1),
                _ => Step::Literal,
            };
            match step {
                Step::Decoded(d, n) => {
                    for b in d {
                        text.push(b);
                        from.push(i as u32);
                    }
                    i += n;
                }
                Step::Unfinished => {
                    tail = i;
                    break;
                }
                Step::Literal => {
                    text.push(bytes[i]);
                    from.push(i as u32);
                    i += 1;
                }
            }
        }
        View {
            unwrapped: esc == Escapes::Unwrapped,
            text,
            from,
            tail,
        }
    }

    /// Raw start of decoded byte `i` (`tail` past the end).
    pub(super) fn raw(&self, i: usize) -> usize {
        if self.from.is_empty() {
            return i.min(self.tail);
        }
        self.from.get(i).map_or(self.tail, |&r| r as usize)
    }

    /// This view (of `outer`'s text) in the raw bytes' positions.
    pub(super) fn under(self, outer: &View) -> View {
        let from = if self.from.is_empty() {
            (0..self.text.len()).map(|i| outer.raw(i) as u32).collect()
        } else {
            self.from
                .iter()
                .map(|&i| outer.raw(i as usize) as u32)
                .collect()
        };
        View {
            unwrapped: outer.unwrapped,
            tail: outer.raw(self.tail),
            text: self.text,
            from,
        }
    }

    /// Decoded bytes `[a, b)` that come from the same escape as decoded
    /// byte `i`.
    pub(super) fn group(&self, i: usize) -> (usize, usize) {
        if self.from.is_empty() {
            return (i, i + 1);
        }
        let r = self.from[i];
        let mut a = i;
        while a > 0 && self.from[a - 1] == r {
            a -= 1;
        }
        let mut b = i + 1;
        while b < self.from.len() && self.from[b] == r {
            b += 1;
        }
        (a, b)
    }

    /// Raw end of the escape of decoded byte `i`.
    pub(super) fn raw_end(&self, i: usize) -> usize {
        let (_, b) = self.group(i);
        self.raw(b)
    }

    /// Raw end of an occurrence whose last decoded byte is `i` (without
    /// the white space after it in an unwrapped view).
    pub(super) fn hit_end(&self, i: usize) -> usize {
        if self.unwrapped {
            self.raw(i) + 1
        } else {
            self.raw_end(i)
        }
    }

    /// The raw start of the escape that holds raw byte `p` (`p` itself
    /// when an escape starts there).
    pub(super) fn snap(&self, p: usize) -> usize {
        if self.from.is_empty() || p >= self.tail {
            return p;
        }
        match self.from.binary_search(&(p as u32)) {
            Ok(_) => p,
            Err(0) => p,
            Err(k) => self.from[k - 1] as usize,
        }
    }
}

pub(super) fn hex_val(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

pub(super) fn push_char(out: &mut Vec<u8>, c: u32) {
    let c = char::from_u32(c).unwrap_or('\u{FFFD}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// `\"`, `\/`, `\n`, `\uXXXX` (and surrogate pairs) at `i`.
pub(super) fn json_escape(bytes: &[u8], i: usize, end: bool) -> Step {
    let unfinished = if end { Step::Literal } else { Step::Unfinished };
    let Some(&next) = bytes.get(i + 1) else {
        return unfinished;
    };
    let simple = match next {
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        b'/' => Some(b'/'),
        b'b' => Some(8),
        b'f' => Some(12),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        _ => None,
    };
    if let Some(b) = simple {
        return Step::Decoded(vec![b], 2);
    }
    if next != b'u' {
        return Step::Literal;
    }
    let hex4 = |at: usize| -> Result<Option<u32>, ()> {
        // Ok(None): cut short by the end of the bytes.
        let mut v = 0;
        for k in 0..4 {
            match bytes.get(at + k) {
                None => return Ok(None),
                Some(&b) => v = v * 16 + hex_val(b).ok_or(())?,
            }
        }
        Ok(Some(v))
    };
    let u = match hex4(i + 2) {
        Err(()) => return Step::Literal,
        Ok(None) => return unfinished,
        Ok(Some(u)) => u,
    };
    let mut out = Vec::new();
    if (0xD800..0xDC00).contains(&u) {
        // A high surrogate wants `\uDCxx` after it.
        let rest = &bytes[(i + 6).min(bytes.len())..];
        let low = if rest.len() < 2 {
            if rest.is_empty() || rest == b"\\" {
                return unfinished;
            }
            None
        } else if &rest[..2] == b"\\u" {
            match hex4(i + 8) {
                Ok(None) => return unfinished,
                Ok(Some(l)) if (0xDC00..0xE000).contains(&l) => Some(l),
                _ => None,
            }
        } else {
            None
        };
        if let Some(l) = low {
            push_char(&mut out, 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00));
            return Step::Decoded(out, 12);
        }
        push_char(&mut out, 0xFFFD);
        return Step::Decoded(out, 6);
    }
    push_char(&mut out, u);
    Step::Decoded(out, 6)
}

/// `%XX` at `i`.
pub(super) fn percent_escape(bytes: &[u8], i: usize, end: bool) -> Step {
    match (bytes.get(i + 1), bytes.get(i + 2)) {
        (Some(&a), Some(&b)) => match (hex_val(a), hex_val(b)) {
            (Some(a), Some(b)) => Step::Decoded(vec![(a * 16 + b) as u8], 3),
            _ => Step::Literal,
        },
        (Some(&a), None) if hex_val(a).is_none() => Step::Literal,
        _ if end => Step::Literal,
        _ => Step::Unfinished,
    }
}

/// The HTML character references that stand for ASCII characters.
pub(super) const NAMED: &[(&str, &str)] = &[
    ("Tab", "\t"),
    ("NewLine", "\n"),
    ("excl", "!"),
    ("quot", "\""),
    ("QUOT", "\""),
    ("num", "#"),
    ("dollar", "$"),
    ("percnt", "%"),
    ("amp", "&"),
    ("AMP", "&"),
    ("apos", "'"),
    ("lpar", "("),
    ("rpar", ")"),
    ("ast", "*"),
    ("midast", "*"),
    ("plus", "+"),
    ("comma", ","),
    ("period", "."),
    ("sol", "/"),
    ("colon", ":"),
    ("semi", ";"),
    ("lt", "<"),
    ("LT", "<"),
    ("equals", "="),
    ("gt", ">"),
    ("GT", ">"),
    ("quest", "?"),
    ("commat", "@"),
    ("lsqb", "["),
    ("lbrack", "["),
    ("bsol", "\\"),
    ("rsqb", "]"),
    ("rbrack", "]"),
    ("Hat", "^"),
    ("lowbar", "_"),
    ("UnderBar", "_"),
    ("grave", "`"),
    ("DiacriticalGrave", "`"),
    ("lcub", "{"),
    ("lbrace", "{"),
    ("verbar", "|"),
    ("vert", "|"),
    ("VerticalLine", "|"),
    ("rcub", "}"),
    ("rbrace", "}"),
    ("fjlig", "fj"),
];

/// Names HTML also reads without the `;`.
pub(super) const LEGACY: &[&str] = &["amp", "AMP", "lt", "LT", "gt", "GT", "quot", "QUOT"];

/// Longest name of a character reference.
pub(super) const MAX_NAME: usize = 32;

/// `&#xHH;`, `&#DD;` (any number of digits, `;` optional) or `&name;` at
/// `i`.
pub(super) fn html_reference(bytes: &[u8], i: usize, end: bool) -> Step {
    let unfinished = if end { Step::Literal } else { Step::Unfinished };
    let Some(&next) = bytes.get(i + 1) else {
        return unfinished;
    };
    if next == b'#' {
        let (hex, start) = match bytes.get(i + 2) {
            None => return unfinished,
            Some(b'x' | b'X') => (true, i + 3),
            Some(_) => (false, i + 2),
        };
        let radix = if hex { 16 } else { 10 };
        let mut j = start;
        let mut v: u32 = 0;
        while let Some(d) = bytes.get(j).and_then(|&b| (b as char).to_digit(radix)) {
            v = v.saturating_mul(radix).saturating_add(d);
            j += 1;
        }
        if j == bytes.len() && !end {
            return Step::Unfinished;
        }
        if j == start {
            return Step::Literal;
        }
        if bytes.get(j) == Some(&b';') {
            j += 1;
        }
        let v = match v {
            0 => 0xFFFD,
            v if v > 0x10FFFF || (0xD800..0xE000).contains(&v) => 0xFFFD,
            v => v,
        };
        let mut out = Vec::new();
        push_char(&mut out, v);
        return Step::Decoded(out, j - i);
    }
    let mut j = i + 1;
    while j < bytes.len() && j - i - 1 < MAX_NAME && bytes[j].is_ascii_alphanumeric() {
        j += 1;
    }
    let name = &bytes[i + 1..j];
    if bytes.get(j) == Some(&b';') {
        if let Some((_, to)) = NAMED.iter().find(|(n, _)| n.as_bytes() == name) {
            return Step::Decoded(to.as_bytes().to_vec(), j + 1 - i);
        }
    }
    if j == bytes.len() && j - i - 1 < MAX_NAME && !name.is_empty() && !end {
        return Step::Unfinished;
    }
    let legacy = LEGACY
        .iter()
        .filter(|l| name.starts_with(l.as_bytes()))
        .max_by_key(|l| l.len());
    if let Some(l) = legacy {
        let to = NAMED
            .iter()
            .find(|(n, _)| n == l)
            .map(|(_, t)| *t)
            .unwrap_or("");
        return Step::Decoded(to.as_bytes().to_vec(), 1 + l.len());
    }
    Step::Literal
}
