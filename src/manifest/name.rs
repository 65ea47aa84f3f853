//! The tool name grammar, one definition for every entry point: a name is
//! `^[A-Za-z0-9_][A-Za-z0-9_.-]*$` and at most [`MAX_LEN`] bytes (as in
//! `schemas/tool.schema.json`). A name that does not match can name no
//! tool, so every interface checks it before using it anywhere else (a
//! path, a thread name, a log line): NUL bytes, control characters,
//! spaces, `=`, non-ASCII and overlong names are refused up front.

/// Longest tool name, in bytes.
pub const MAX_LEN: usize = 64;

/// Between an MCP server's name and its tool's in the name glovebox
/// serves the tool under: `SERVER__TOOL` (a tool name like any other).
pub const MCP_SEPARATOR: &str = "__";

/// The grammar, for messages.
pub const GRAMMAR: &str = "[A-Za-z0-9_][A-Za-z0-9_.-]*, at most 64 characters";

/// Whether `name` is a valid tool name.
pub fn is_valid(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `name` made safe to show in a message or a log line, whatever it holds:
/// cut to 128 bytes, every byte outside printable ASCII (and space, `=`,
/// `%`, `` ` ``) percent-encoded.
pub fn shown(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes().take(128) {
        if b.is_ascii_graphic() && !matches!(b, b'=' | b'%' | b'`') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if name.len() > 128 {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for ok in ["echo", "a.b-c_d", "_x", "9", &"a".repeat(64)] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in [
            "",
            "a\0b",
            "ec\u{0}ho",
            "a b",
            "a=b",
            ".x",
            "-x",
            "a/b",
            "é",
            "a\nb",
            "a\u{7f}",
            &"a".repeat(65),
        ] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn shown_is_one_safe_token() {
        assert_eq!(shown("a\0b c=d"), "a%00b%20c%3Dd");
        assert_eq!(shown("é"), "%C3%A9");
        assert!(shown(&"x".repeat(1000)).len() < 140);
    }
}
