//! `exec.mcp.tools`: which of a server's tools glovebox offers, and which
//! need an approval, by name pattern (`*` any run of characters, `?` one).

use crate::manifest::model::ToolRules;

/// Whether `name` matches the pattern `pattern`.
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with one backtrack point (linear in practice).
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

fn any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob(p, name))
}

/// Whether the server's tool `name` is offered.
pub fn offered(rules: &ToolRules, name: &str) -> bool {
    (rules.allow.is_empty() || any(&rules.allow, name)) && !any(&rules.deny, name)
}

/// Whether calls of the server's tool `name` need an approval.
pub fn needs_approval(rules: &ToolRules, name: &str) -> bool {
    any(&rules.approve, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, n, want) in [
            ("*", "anything", true),
            ("read_*", "read_file", true),
            ("read_*", "write_file", false),
            ("?et", "get", true),
            ("?et", "gets", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("exact", "exact", true),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(glob(p, n), want, "{p} {n}");
        }
    }

    #[test]
    fn deny_wins_over_allow() {
        let r = ToolRules {
            allow: vec!["read_*".into()],
            deny: vec!["read_secret*".into()],
            approve: vec!["read_big".into()],
        };
        assert!(offered(&r, "read_file"));
        assert!(!offered(&r, "read_secrets"));
        assert!(!offered(&r, "write_file"));
        assert!(needs_approval(&r, "read_big"));
        assert!(!needs_approval(&r, "read_file"));
        assert!(offered(&ToolRules::default(), "x"));
    }
}
