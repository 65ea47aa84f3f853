#![allow(clippy::unwrap_used)]

use super::*;
use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};

const REAL: &str = "sk/live+Ref1ectedT0ken_abcdEFGH9876";
const PLACEHOLDER: &str = "sk/live+Qzw7xbnmkP3rpu_wxyzQRST1234";

/// Each character written as an HTML reference of a kind that varies
/// along the value (hex, decimal with leading zeros, named, plain).
fn html_mixed(s: &str) -> String {
    s.chars()
        .enumerate()
        .map(|(i, c)| match (c, i % 4) {
            ('/', _) => "&sol;".to_string(),
            ('_', _) => "&lowbar;".to_string(),
            ('+', _) => "&plus;".to_string(),
            (c, 0) => format!("&#x{:X};", c as u32),
            (c, 1) => format!("&#00{};", c as u32),
            (c, 2) => c.to_string(),
            (c, _) => format!("&#X{:04x};", c as u32),
        })
        .collect()
}

fn json_mixed(s: &str) -> String {
    s.chars()
        .enumerate()
        .map(|(i, c)| match c {
            '/' => "\\/".to_string(),
            c if i % 3 == 0 => format!("\\u{:04X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

fn percent_all(s: &str, upper: bool) -> String {
    s.bytes()
        .map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

/// Every form of `v` a hostile server may write, with the form it is.
fn forms(v: &str) -> Vec<(String, Form)> {
    let mut out = vec![
        (v.to_string(), Form::Exact),
        (json_mixed(v), Form::Escaped),
        (percent_all(v, true), Form::Escaped),
        (percent_all(v, false), Form::Escaped),
        (html_mixed(v), Form::Escaped),
        (hex::encode(v), Form::Hex),
        (hex::encode_upper(v), Form::Hex),
        (STANDARD.encode(v), Form::Base64),
        (URL_SAFE_NO_PAD.encode(v), Form::Base64),
    ];
    for prefix in ["u:", "us:", "use:", "user:"] {
        out.push((STANDARD.encode(format!("{prefix}{v}")), Form::Base64));
        out.push((URL_SAFE.encode(format!("{prefix}{v}x")), Form::Base64));
    }
    out
}

fn hider() -> Hider {
    Hider::new(&[(REAL.as_bytes(), PLACEHOLDER.as_bytes())])
}

/// No form of REAL in `bytes`, decoded any way `find` knows.
fn clean(bytes: &[u8]) -> bool {
    find(&[REAL.as_bytes()], bytes, 1).is_empty()
}

#[test]
fn every_form_is_found_with_its_span() {
    for (form, kind) in forms(REAL) {
        let text = format!("<p>echo: {form} end</p>");
        let found = find(&[REAL.as_bytes()], text.as_bytes(), MIN_ENCODED);
        assert!(found.iter().any(|f| f.form == kind), "{form}: {found:?}");
        let f = found.iter().find(|f| f.form == kind).unwrap();
        assert!(f.start >= 9 && f.end <= text.len() - 8, "{form}: {f:?}");
    }
    for folded in [
        REAL.to_uppercase(),
        REAL.to_lowercase(),
        html_mixed(&REAL.to_uppercase()),
    ] {
        let found = find(&[REAL.as_bytes()], folded.as_bytes(), MIN_ENCODED);
        assert!(
            found.iter().any(|f| f.form == Form::CaseFolded),
            "{folded}: {found:?}"
        );
    }
    // Leading zeros beyond any fixed width, references without `;`.
    let padded: String = REAL
        .chars()
        .map(|c| format!("&#x{:0>40x}", c as u32))
        .collect::<Vec<_>>()
        .join("");
    let found = find(&[REAL.as_bytes()], padded.as_bytes(), 0);
    assert!(!found.is_empty(), "{padded}");
    let nosemi: String = REAL.chars().map(|c| format!("&#{};", c as u32)).collect();
    assert!(!find(&[REAL.as_bytes()], nosemi.replace(';', "").as_bytes(), 0).is_empty());
    // A base64 of a JSON-escaped (`\/`) or percent-encoded text.
    let b64 = STANDARD.encode(REAL).replace('/', "\\/");
    assert!(!find(&[REAL.as_bytes()], b64.as_bytes(), MIN_ENCODED).is_empty());
    // Nothing in unrelated text, nor base64/hex of short values.
    assert!(find(&[REAL.as_bytes()], b"nothing &amp; %41 \\u0041 here", 8).is_empty());
    assert!(find(&[b"abcd"], b"YWJjZA 61626364", MIN_ENCODED).is_empty());
}

#[test]
fn each_swappable_form_becomes_the_placeholder_in_the_same_form() {
    for (form, kind) in forms(REAL) {
        let text = format!("x {form} y");
        let mut h = hider();
        let out = h.whole(text.as_bytes()).unwrap().unwrap();
        assert!(clean(&out), "{form}: {}", String::from_utf8_lossy(&out));
        let seen = find(&[PLACEHOLDER.as_bytes()], &out, MIN_ENCODED);
        assert!(
            seen.iter().any(|f| f.form == kind),
            "{form} -> {}: {seen:?}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(h.counts(), [1], "{form}");
        // Where the form allows, the length is kept too.
        if !form.contains("&#00") {
            assert_eq!(out.len(), text.len(), "{form}");
        }
    }
}

#[test]
fn what_cannot_be_swapped_exactly_is_refused() {
    for folded in [
        REAL.to_uppercase(),
        REAL.to_lowercase(),
        json_mixed(&REAL.to_uppercase()),
    ] {
        let err = hider()
            .whole(format!("a {folded} b").as_bytes())
            .unwrap_err();
        assert_eq!(
            (err.form, err.why),
            (Form::CaseFolded, Why::CaseFolded),
            "{folded}"
        );
        let mut s = hider();
        let err = s
            .push(folded.as_bytes())
            .and_then(|_| s.finish())
            .unwrap_err();
        assert_eq!(err.why, Why::CaseFolded);
    }
    // `&#97;` (a) whose placeholder letter needs three digits: whole, the
    // length changes; in a stream of fixed length, refused.
    let real = "abcdefghijklmnop";
    let p = "dddddddddddddddd";
    let text: String = real.chars().map(|c| format!("&#{};", c as u32)).collect();
    let mut h = Hider::new(&[(real.as_bytes(), p.as_bytes())]);
    let out = h.whole(text.as_bytes()).unwrap().unwrap();
    assert!(String::from_utf8_lossy(&out).starts_with("&#100;&#100;"));
    let mut s = Hider::new(&[(real.as_bytes(), p.as_bytes())]).fixed(true);
    let err = s
        .push(text.as_bytes())
        .and_then(|_| s.finish())
        .unwrap_err();
    assert_eq!(err.why, Why::Length);
    // A form padded past what a stream holds back.
    let mut s = hider();
    assert_eq!(s.push(b"ok &#x").unwrap(), b"ok ");
    let mut refused = false;
    for _ in 0..(MAX_HOLD / 1000 + 2) {
        if s.push("0".repeat(1000).as_bytes()).is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused);
}

#[test]
fn a_stream_cut_anywhere_gives_what_the_whole_gives() {
    for (form, _) in forms(REAL) {
        let text = format!("head {form} mid {form} tail");
        let whole = hider()
            .fixed(false)
            .whole(text.as_bytes())
            .unwrap()
            .unwrap();
        for cut in 1..text.len() {
            for fixed in [false, true] {
                let mut s = hider().fixed(fixed);
                let got = (|| {
                    let mut out = s.push(&text.as_bytes()[..cut])?;
                    out.extend(s.push(&text.as_bytes()[cut..])?);
                    out.extend(s.finish()?);
                    Ok::<_, Refused>(out)
                })();
                match got {
                    Ok(out) => {
                        assert_eq!(out, whole, "{form} cut at {cut}");
                        assert_eq!(s.counts(), [2], "{form} cut at {cut}");
                    }
                    // Only a form whose placeholder changes its length.
                    Err(e) => assert!(fixed && e.why == Why::Length, "{form} {cut}: {e:?}"),
                }
            }
        }
        // Byte by byte: never a piece that could be released early.
        let mut s = hider();
        let mut out = Vec::new();
        for b in text.bytes() {
            out.extend(s.push(&[b]).unwrap());
        }
        out.extend(s.finish().unwrap());
        assert_eq!(out, whole, "{form} byte by byte");
    }
}

#[test]
fn plain_text_passes_unchanged_and_is_not_held_for_long() {
    let mut s = hider().fixed(true);
    let body = "{\"ok\":true,\"items\":[1,2,3],\"note\":\"a &amp; b %20 \\n\"}".repeat(50);
    let out = s.push(body.as_bytes()).unwrap();
    assert!(body.len() - out.len() < 64, "{}", body.len() - out.len());
    let mut all = out;
    all.extend(s.finish().unwrap());
    assert_eq!(all, body.as_bytes());
    assert_eq!(hider().whole(body.as_bytes()).unwrap(), None);
}

#[test]
fn a_trailing_piece_of_any_form_is_located() {
    let cut = format!("x {}", &html_mixed(REAL)[..40]);
    let (at, i) = trailing(&[REAL.as_bytes()], cut.as_bytes(), 4).unwrap();
    assert_eq!((at, i), (2, 0));
    let upper = format!("x {}", &REAL.to_uppercase()[..10]);
    assert_eq!(
        trailing(&[REAL.as_bytes()], upper.as_bytes(), 4),
        Some((2, 0))
    );
    assert_eq!(trailing(&[REAL.as_bytes()], b"x sk/", 4), None);
}

/// Base64 at every alignment, with text before and after it in the same
/// encoding: the rewrite is exactly the encoding of the same text with
/// the placeholder, so not one bit of a value byte shared with a
/// neighbour's group is left.
#[test]
fn base64_groups_shared_with_neighbours_are_rewritten_exactly() {
    for engine in [&STANDARD, &URL_SAFE] {
        for before in ["", "u", "us", "use", "user:"] {
            for after in ["", "!", "!?", "!?#"] {
                let enc = |v: &str| engine.encode(format!("{before}{v}{after}"));
                let text = format!("Authorization: Basic {}\r\n", enc(REAL));
                let out = hider().whole(text.as_bytes()).unwrap().unwrap();
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    format!("Authorization: Basic {}\r\n", enc(PLACEHOLDER)),
                    "{before:?} {after:?}"
                );
            }
        }
    }
}

/// A value escaped twice (a URL inside a URL, an HTML page quoting a
/// percent-encoded link) is seen and refused, and a value escaped once
/// beside other doubly escaped text is still swapped.
#[test]
fn a_value_escaped_twice_is_refused_and_once_is_swapped() {
    let twice = [
        percent_all(REAL, true).replace('%', "%25"),
        percent_all(REAL, false).replace('%', "&#37;"),
        html_mixed(REAL)
            .replace('&', "%26")
            .replace('#', "%23")
            .replace(';', "%3B"),
    ];
    for t in twice {
        let found = find(&[REAL.as_bytes()], t.as_bytes(), MIN_ENCODED);
        assert!(!found.is_empty(), "{t}");
        let err = hider().whole(format!("x {t} y").as_bytes()).unwrap_err();
        assert_eq!(err.why, Why::Nested, "{t}");
    }
    let once = format!("next=%252Fhome%2526a &amp;lt; {}", percent_all(REAL, true));
    let out = hider().whole(once.as_bytes()).unwrap().unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "next=%252Fhome%2526a &amp;lt; {}",
            percent_all(PLACEHOLDER, true)
        )
    );
}

/// Base64 broken into lines (MIME, PEM) and a value wrapped at a line's
/// end are found and swapped, the line breaks kept.
#[test]
fn a_value_broken_across_lines_is_swapped_with_its_breaks() {
    let wrap = |s: &str, n: usize, sep: &str| {
        s.as_bytes()
            .chunks(n)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(sep)
    };
    for (n, sep) in [(76, "\r\n"), (20, "\n"), (7, "\n  ")] {
        let mime = |v: &str| {
            wrap(
                &STANDARD.encode(format!("Subject: hi\r\n\r\ntoken {v}\r\n")),
                n,
                sep,
            )
        };
        let text = format!("From: x\r\n\r\n{}\r\n", mime(REAL));
        let out = hider().whole(text.as_bytes()).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("From: x\r\n\r\n{}\r\n", mime(PLACEHOLDER)),
            "{n}"
        );
        let wrapped = format!("token: {}\n", wrap(REAL, n.min(20), sep));
        let out = hider().whole(wrapped.as_bytes()).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("token: {}\n", wrap(PLACEHOLDER, n.min(20), sep)),
            "{n}"
        );
        // And cut anywhere in a stream.
        for cut in (1..text.len()).step_by(7) {
            let mut s = hider().fixed(true);
            let mut out = s.push(&text.as_bytes()[..cut]).unwrap();
            out.extend(s.push(&text.as_bytes()[cut..]).unwrap());
            out.extend(s.finish().unwrap());
            assert!(clean(&out), "{cut}");
        }
    }
}

/// Hostile responses at random: bytes rich in escape characters with the
/// value spliced in, in every form, cut into random chunks. Whatever is
/// let through — whole, or streamed, fixed length or not — holds no form
/// of the value, a fixed stream keeps its length, and nothing panics.
#[test]
fn random_hostile_responses_never_let_a_value_through() {
    let mut seed = 0x1234_5678_9ABC_DEF1u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let noise = b"&#x;%\\u0123456789abcdefABCDEF/+=_-\n sk/liveRef1";
    let mut forms = forms(REAL);
    forms.push((REAL.to_uppercase(), Form::CaseFolded));
    forms.push((percent_all(REAL, true).replace('%', "%25"), Form::Escaped));
    forms.push((format!("{}\n{}", &REAL[..9], &REAL[9..]), Form::Exact));
    for round in 0..1000 {
        let mut body = Vec::new();
        for _ in 0..next(6) + 1 {
            if next(3) == 0 {
                let (f, _) = &forms[next(forms.len())];
                let f = f.as_bytes();
                // Sometimes only a piece of a form.
                let (a, b) = if next(4) == 0 {
                    let a = next(f.len());
                    (a, a + next(f.len() - a) + 1)
                } else {
                    (0, f.len())
                };
                body.extend_from_slice(&f[a..b]);
            } else {
                for _ in 0..next(24) {
                    body.push(noise[next(noise.len())]);
                }
            }
        }
        if let Ok(Some(out)) = hider().whole(&body) {
            assert!(clean(&out), "{round}: {}", String::from_utf8_lossy(&body));
        }
        if let Ok(None) = hider().whole(&body) {
            assert!(clean(&body), "{round}: {}", String::from_utf8_lossy(&body));
        }
        let fixed = next(2) == 0;
        let mut s = hider().fixed(fixed);
        let mut out = Vec::new();
        let mut at = 0;
        let streamed = loop {
            let cut = (at + next(40)).min(body.len());
            match s.push(&body[at..cut]) {
                Ok(o) => out.extend(o),
                Err(_) => break false,
            }
            at = cut;
            if at == body.len() {
                break true;
            }
        };
        if streamed {
            if let Ok(o) = s.finish() {
                out.extend(o);
                assert!(clean(&out), "{round}: {}", String::from_utf8_lossy(&body));
                if fixed {
                    assert_eq!(out.len(), body.len(), "{round}");
                }
            }
        }
    }
}
