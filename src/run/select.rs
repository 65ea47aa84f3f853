//! `exec.command.stdout.select`: opt-in rules that pick a command tool's
//! output out of its stdout, for tools written for other runners.
//!
//! `last_json_line` is HDN's rule (`glovebox import hdn` sets it): stdout
//! parsed as JSON when the whole of it is JSON; else the last line that is
//! a JSON object or array (a line "looks like JSON" when, trimmed, it starts
//! with `{` or `[` and parses); else `{"output": "<stdout>"}`. It never
//! fails: whatever the tool prints becomes an output.

use serde_json::{json, Value};

use super::{parse_output, Finished, Redactor};
use crate::manifest::model::{Select, Stdout};

/// The output of a command tool that exited successfully: `stdout` read as
/// `spec` declares (secrets redacted).
pub fn read(tool: &str, stdout: &[u8], spec: &Stdout, redact: &Redactor) -> Finished {
    match spec.select {
        None => parse_output(tool, stdout, spec.format, redact),
        Some(Select::LastJsonLine) => {
            let text = redact.text(&String::from_utf8_lossy(stdout));
            Finished::Output(redact.value(last_json_line(&text)))
        }
    }
}

/// HDN's output rule applied to `text`.
pub fn last_json_line(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    text.lines()
        .rev()
        .map(str::trim)
        .filter(|l| l.starts_with('{') || l.starts_with('['))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| json!({ "output": text }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn whole_output_json_wins() {
        assert_eq!(last_json_line("{\"a\": 1}\n"), json!({"a": 1}));
        assert_eq!(last_json_line("[1,\n 2]"), json!([1, 2]));
        assert_eq!(last_json_line("42"), json!(42));
    }

    #[test]
    fn last_json_looking_line_is_taken() {
        let text = "starting\n{\"step\": 1}\nnoise\n  {\"done\": true}  \ntrailing words\n";
        assert_eq!(last_json_line(text), json!({"done": true}));
    }

    #[test]
    fn a_broken_json_line_is_skipped_for_an_earlier_good_one() {
        let text = "[1, 2]\n{not json\n";
        assert_eq!(last_json_line(text), json!([1, 2]));
    }

    #[test]
    fn otherwise_the_text_is_wrapped() {
        assert_eq!(
            last_json_line("hello\nworld\n"),
            json!({"output": "hello\nworld\n"})
        );
        assert_eq!(last_json_line(""), json!({"output": ""}));
        // A bare scalar line is not JSON-looking.
        assert_eq!(last_json_line("a\n7\n"), json!({"output": "a\n7\n"}));
    }
}
