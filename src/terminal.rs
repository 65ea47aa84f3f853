//! What a tool says, made safe for a person's terminal.
//!
//! A terminal acts on what it is sent: OSC 52 writes the clipboard, OSC 0
//! sets the window title, OSC 8 makes a link whose text lies about where
//! it goes, cursor-up and erase-line hide lines printed before, a bare
//! carriage return or a backspace overwrites them, and C1 controls
//! (U+0080–U+009F, CSI as one code point) do the same without ESC. Where
//! glovebox prints a tool's text to a terminal (`glovebox run`'s output
//! and messages, a server's stderr quoted in an error), [`escaped`] shows
//! each such character as text, `\x1b`, `\r`, `\u{9b}` (as `git` and
//! `ls` quote names), so the terminal only displays. Bidi controls and
//! line separators are shown the same way (they reorder or break what is
//! read). Newline, tab, and the carriage return of a CRLF are kept.
//!
//! `glovebox run --raw` passes a tool's output through unchanged, and
//! `glovebox sandbox` (the user's own command) always does.

use std::borrow::Cow;

/// Whether `c` acts on a terminal rather than showing: a control
/// character (C0, DEL, C1), a bidi control, a line or paragraph
/// separator.
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character that would act on a terminal shown
/// escaped (newline, tab and a CRLF's carriage return kept).
pub fn escaped(text: &str) -> Cow<'_, str> {
    let kept =
        |c: char, next: Option<char>| c == '\n' || c == '\t' || (c == '\r' && next == Some('\n'));
    let mut chars = text.chars().peekable();
    let mut clean = true;
    while let Some(c) = chars.next() {
        if acts(c) && !kept(c, chars.peek().copied()) {
            clean = false;
            break;
        }
    }
    if clean {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !acts(c) || kept(c, chars.peek().copied()) {
            out.push(c);
            continue;
        }
        match c {
            '\r' => out.push_str("\\r"),
            c if c.is_ascii() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    Cow::Owned(out)
}

/// `text` as [`escaped`] when `safe`, else unchanged (`--raw`, or not a
/// terminal).
pub fn shown(text: &str, safe: bool) -> Cow<'_, str> {
    if safe {
        escaped(text)
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_acted_on() {
        let hostile = "ok\n\u{1b}]52;c;aGk=\u{7}\u{1b}]0;title\u{7}\u{1b}[1A\u{1b}[2K\u{1b}]8;;http://x\u{1b}\\link\u{9b}2J\u{8}a\rb";
        let shown = escaped(hostile);
        assert_eq!(
            shown,
            "ok\n\\x1b]52;c;aGk=\\x07\\x1b]0;title\\x07\\x1b[1A\\x1b[2K\\x1b]8;;http://x\\x1b\\link\\u{9b}2J\\x08a\\rb"
        );
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn plain_text_crlf_tabs_and_unicode_pass_unchanged() {
        for t in ["a\tb\r\nc\n", "héllo 木 😀", ""] {
            assert!(matches!(escaped(t), Cow::Borrowed(_)), "{t:?}");
        }
        assert_eq!(escaped("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(shown("\u{1b}", false), "\u{1b}");
    }
}
