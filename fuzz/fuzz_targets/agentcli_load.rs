//! agentcli `tools.json` loader: arbitrary text through
//! `manifest::agentcli::check`. Invariants: no panic; accepted entries have
//! unique, non-empty names that no finding rejected; a relative
//! `command[0]` of an accepted entry stays under `./tools/bin/` after
//! normalisation; `envPassthrough` names match `[A-Z_][A-Z0-9_]*`.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let checked = glovebox::manifest::agentcli::check(text);
    let mut names = std::collections::HashSet::new();
    for entry in &checked.entries {
        assert!(!entry.name.is_empty());
        assert!(
            names.insert(entry.name.clone()),
            "duplicate accepted: {}",
            entry.name
        );
        assert!(
            !checked.rejected.contains(&entry.name),
            "accepted and rejected: {}",
            entry.name
        );
        let program = entry
            .command
            .first()
            .expect("an accepted entry has a program");
        if !Path::new(program).is_absolute() {
            let mut depth: i64 = 0;
            let mut parts = Vec::new();
            for c in Path::new(program).components() {
                match c {
                    Component::CurDir => {}
                    Component::ParentDir => {
                        depth -= 1;
                        parts.pop();
                    }
                    Component::Normal(p) => {
                        depth += 1;
                        parts.push(p.to_string_lossy().into_owned());
                    }
                    _ => {}
                }
                assert!(depth >= 0, "command[0] climbs out: {program}");
            }
            assert!(
                parts.len() >= 3 && parts[0] == "tools" && parts[1] == "bin",
                "command[0] outside ./tools/bin/: {program}"
            );
        }
        for name in &entry.env_passthrough {
            let mut chars = name.chars();
            let first = chars.next().expect("a name is not empty");
            assert!(first == '_' || first.is_ascii_uppercase(), "{name}");
            assert!(
                chars.all(|c| c == '_' || c.is_ascii_uppercase() || c.is_ascii_digit()),
                "{name}"
            );
        }
    }
});
