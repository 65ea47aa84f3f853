//! Code points a person does not see, in text a model reads.
//!
//! A tool's description or schema can carry text that renders as
//! nothing: Unicode format characters (category Cf: the tag block
//! U+E0000–E007F, which spells ASCII invisibly, bidi overrides and
//! isolates, zero-width joiners), the other default-ignorable code points
//! (variation selectors, Hangul fillers), control characters, line and
//! paragraph separators, and unassigned code points. A model reads them;
//! a person approving the tool sees nothing ("ASCII smuggling"). So each
//! of them is [`is_invisible`], and glovebox treats them two ways, from
//! the same classification:
//!
//! - where a person reads (the approval prompt, [`crate::offer::shown`]):
//!   shown escaped, `\u{e0041}` ([`escape`]);
//! - where a client reads (MCP `tools/list`, the HTTP API, `export`,
//!   [`crate::offer::forwarded`]): removed ([`remove`], [`remove_in`]).
//!
//! Newline and tab are layout, visible as such, and kept. The
//! classification comes from the Unicode Character Database as compiled
//! into `icu_properties` (General_Category and
//! Default_Ignorable_Code_Point).

use std::borrow::Cow;

use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory};
use icu_properties::{CodePointMapData, CodePointSetData};
use serde_json::Value;

/// Whether `c` renders as nothing (or acts on the display instead of
/// showing): a control character but newline and tab, a format
/// character (Cf), a line or paragraph separator, an unassigned code
/// point, or any other default-ignorable code point.
pub fn is_invisible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control() && c != '\n' && c != '\t';
    }
    let category = CodePointMapData::<GeneralCategory>::new().get(c);
    matches!(
        category,
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::Unassigned
            | GeneralCategory::Surrogate
    ) || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// `text` with each invisible code point shown as `\u{XXXX}` (lowercase
/// hex, at least four digits): what a person is shown.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` without its invisible code points: what a client is sent.
pub fn remove(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().filter(|c| !is_invisible(*c)).collect())
}

/// Removes the invisible code points of every string of `value`, object
/// keys included (a key that becomes another key's replaces it: the
/// person approving saw both, escaped).
pub fn remove_in(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = remove(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(remove_in),
        Value::Object(map) => {
            if map.keys().any(|k| k.chars().any(is_invisible)) {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    remove_in(&mut v);
                    map.insert(remove(&k).into_owned(), v);
                }
            } else {
                map.values_mut().for_each(remove_in);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// "hi" in tag characters.
    const TAGGED: &str = "ok\u{e0001}\u{e0068}\u{e0069}\u{e007f}";

    #[test]
    fn what_renders_as_nothing_is_invisible() {
        for c in [
            '\u{e0041}', // tag LATIN CAPITAL A
            '\u{e0001}', // LANGUAGE TAG
            '\u{202e}',  // RIGHT-TO-LEFT OVERRIDE
            '\u{2066}',  // LEFT-TO-RIGHT ISOLATE
            '\u{200b}',  // ZERO WIDTH SPACE
            '\u{200d}',  // ZERO WIDTH JOINER
            '\u{feff}',  // BOM
            '\u{00ad}',  // SOFT HYPHEN
            '\u{fe0f}',  // VARIATION SELECTOR-16
            '\u{e0100}', // VARIATION SELECTOR-17
            '\u{3164}',  // HANGUL FILLER
            '\u{2028}',  // LINE SEPARATOR
            '\u{1b}',    // ESC
            '\r',
            '\u{7f}',
            '\u{9b}',    // CSI (C1)
            '\u{50000}', // unassigned
        ] {
            assert!(is_invisible(c), "{:x}", u32::from(c));
        }
        for c in ['a', ' ', '\n', '\t', 'é', '木', '€', '😀', '\u{2800}'] {
            assert!(!is_invisible(c), "{:x}", u32::from(c));
        }
    }

    #[test]
    fn escaped_for_people_removed_for_clients() {
        assert_eq!(escape(TAGGED), "ok\\u{e0001}\\u{e0068}\\u{e0069}\\u{e007f}");
        assert_eq!(remove(TAGGED), "ok");
        assert!(matches!(escape("plain\ntext"), Cow::Borrowed(_)));
        assert!(matches!(remove("plain\ttext"), Cow::Borrowed(_)));
        assert_eq!(remove("a\u{202e}b\u{200b}c\r\n"), "abc\n");
    }

    #[test]
    fn every_string_of_a_value_is_cleaned_keys_too() {
        let mut v = json!({
            "description": TAGGED,
            "properties": {"pa\u{200b}th": {"description": "x\u{202e}y", "enum": ["\u{e0041}"]}},
            "n": 1
        });
        remove_in(&mut v);
        assert_eq!(
            v,
            json!({
                "description": "ok",
                "properties": {"path": {"description": "xy", "enum": [""]}},
                "n": 1
            })
        );
    }
}
