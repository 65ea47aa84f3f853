//! Glee v1 single-file loader: arbitrary text through the whole v1 path
//! (YAML with positions, the v1 schema, the mapping to the v2 model, every
//! v2 lint rule). Invariants: no panic; a manifest only when no finding is
//! an error; every finding is positioned inside the text.
#![no_main]

use glovebox::manifest::Severity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let checked = glovebox::manifest::v1::check(text);
    let errors = checked
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error);
    assert!(
        checked.manifest.is_none() || !errors,
        "a manifest came back with errors: {:?}",
        checked.diagnostics
    );
    // YAML breaks lines at LF, CRLF and a lone CR.
    let lines = text.replace("\r\n", "\n").matches(['\n', '\r']).count() + 2;
    for d in &checked.diagnostics {
        assert!(
            d.line >= 1 && d.line <= lines,
            "finding off the text: {d:?}"
        );
    }
});
