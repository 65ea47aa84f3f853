//! Template slots: the `${NAME}` placeholders of exec templates, found,
//! not expanded (expansion is [`crate::template`]'s job). Not to be
//! confused with placeholder *secrets* ([`crate::egress::placeholder`]:
//! a stand-in value the egress proxy swaps for the real one).
//!
//! Grammar: `${` starts a slot, `}` ends it, and the name between is
//! an identifier (`[A-Za-z_][A-Za-z0-9_]*`). A `$` not followed by `{` is
//! literal text.

/// One `${NAME}` found in a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot<'a> {
    /// The name between the braces.
    pub name: &'a str,
    /// Byte offset of the `$` in the template.
    pub start: usize,
    /// Byte offset just past the `}`.
    pub end: usize,
}

/// A malformed slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// `${` without a closing `}`.
    #[error("`${{` at byte {start} has no closing `}}`; close it or remove it")]
    Unterminated {
        /// Byte offset of the `$`.
        start: usize,
    },
    /// `${}` or a name that is not an identifier.
    #[error("`${{{name}}}` is not a valid placeholder; use letters, digits and `_`, not starting with a digit")]
    InvalidName {
        /// The text between the braces.
        name: String,
        /// Byte offset of the `$`.
        start: usize,
    },
}

/// Every slot of `template`, in order, or the first malformed one.
pub fn scan(template: &str) -> Result<Vec<Slot<'_>>, SlotError> {
    let mut found = Vec::new();
    let mut rest = 0;
    while let Some(offset) = template[rest..].find("${") {
        let start = rest + offset;
        let body = start + 2;
        let Some(close) = template[body..].find('}') else {
            return Err(SlotError::Unterminated { start });
        };
        let name = &template[body..body + close];
        if !is_identifier(name) {
            return Err(SlotError::InvalidName {
                name: name.to_owned(),
                start,
            });
        }
        let end = body + close + 1;
        found.push(Slot { name, start, end });
        rest = end;
    }
    Ok(found)
}

/// Whether `name` is `[A-Za-z_][A-Za-z0-9_]*` — a placeholder name, and the
/// form an environment-variable (secret) name must have.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_placeholders() {
        let p = scan("Bearer ${TOKEN} and ${q}$x").unwrap();
        let names: Vec<_> = p.iter().map(|p| p.name).collect();
        assert_eq!(names, ["TOKEN", "q"]);
        assert_eq!(p[0].start, 7);
        assert_eq!(p[0].end, 15);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(scan("a ${b"), Err(SlotError::Unterminated { start: 2 }));
        assert!(matches!(scan("${}"), Err(SlotError::InvalidName { .. })));
        assert!(matches!(scan("${1a}"), Err(SlotError::InvalidName { .. })));
        assert!(scan("$5 and $ {x}").unwrap().is_empty());
    }
}
