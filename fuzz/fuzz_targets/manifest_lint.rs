//! Manifest parse + lint on arbitrary text.
//!
//! Invariants: no panic (saphyr, the position index, the schema check and
//! every lint rule), bounded time (run with `-timeout=`), a manifest is
//! returned only when no finding is an error, every finding has a 1-based
//! position, and the normalised manifest (what `glovebox show` prints)
//! emits as YAML that lints clean again to the same manifest.
#![no_main]

use std::path::{Path, PathBuf};

use glovebox::manifest::diagnostic::Diagnostic;
use glovebox::manifest::discover::ToolEntry;
use glovebox::manifest::model::Manifest;
use glovebox::manifest::{config, lint, yaml};
use libfuzzer_sys::fuzz_target;

/// A root that does not exist: lint only asks it whether an entrypoint
/// file exists.
const ROOT: &str = "/nonexistent/glovebox-fuzz";

/// The directory name lint compares `name:` with: taken from the text's
/// own top-level `name:` line so the fuzzer need not guess it.
fn entry_for(text: &str) -> ToolEntry {
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("name:"))
        .map(|n| n.trim().trim_matches(['"', '\'']).to_string())
        .filter(|n| !n.is_empty() && !n.contains(['/', '\0']))
        .unwrap_or_else(|| "tool".to_string());
    ToolEntry {
        file: PathBuf::from(format!("{ROOT}/.glee/tools/{name}/tool.yml")),
        display: format!(".glee/tools/{name}/tool.yml"),
        name,
        origin: glovebox::manifest::Origin::Dir,
    }
}

/// Proves the checks are not vacuous: a valid manifest lints to a
/// manifest, and the round trip below runs on it.
const VALID: &str = "name: noop\ndescription: does nothing\nkind: command\nversion: 1\n\
inputs:\n  schema: {type: object, properties: {w: {type: string, default: x}}}\n\
outputs: {format: text}\nexec:\n  command: {entrypoint: \"true\", args: [\"${w}\"]}\n";

static PROBE: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    PROBE.call_once(|| {
        let checked = lint::lint_tool(Path::new(ROOT), &entry_for(VALID), VALID);
        assert!(checked.manifest.is_some(), "{:?}", checked.diagnostics);
        round_trip(&entry_for(VALID), checked.manifest.as_ref());
    });
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The project config goes through the same YAML front end.
    let _ = config::parse(text);

    let root = Path::new(ROOT);
    let entry = entry_for(text);
    let checked = lint::lint_tool(root, &entry, text);
    for d in &checked.diagnostics {
        assert!(
            d.line >= 1 && d.col >= 1,
            "finding without a position: {d:?}"
        );
    }
    if checked.manifest.is_some() {
        assert!(
            !checked.diagnostics.iter().any(Diagnostic::is_error),
            "a manifest came back with error findings"
        );
    }
    round_trip(&entry, checked.manifest.as_ref());
});

/// The normalised form (what `glovebox show` prints) lints back to itself.
fn round_trip(entry: &ToolEntry, manifest: Option<&Manifest>) {
    let root = Path::new(ROOT);
    let Some(manifest) = manifest else {
        return;
    };
    let value = serde_json::to_value(&manifest).expect("a manifest serialises");
    let emitted = yaml::emit(&value).expect("a manifest emits as YAML");
    let again = lint::lint_tool(root, entry, &emitted);
    assert_eq!(
        again.manifest.as_ref(),
        Some(manifest),
        "the normalised manifest does not lint back to itself:\n{emitted}\nfindings: {:?}",
        again.diagnostics
    );
}
