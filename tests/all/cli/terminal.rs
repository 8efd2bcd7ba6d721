//! A hostile adapter aimed at the user's terminal: whatever it puts in its
//! events, no human output mode prints a control character or escape
//! sequence raw (docs/security.md, "Your terminal").

use moat_testkit::components::ESCAPES;

use super::common::moat;

/// Characters a terminal acts on: C0 (but newline and tab), DEL, C1, and
/// the bidirectional overrides.
fn acted_on(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[test]
fn no_human_output_mode_prints_an_adapters_escape_sequences() {
    for format in ["pretty", "text"] {
        let output = moat()
            .args(["run", ESCAPES, "x", "--output", format])
            .output()
            .expect("moat runs");
        assert_eq!(output.status.code(), Some(0), "{format}");
        for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            let text = String::from_utf8(bytes.clone()).expect("UTF-8 output");
            let raw: Vec<char> = text.chars().filter(|&c| acted_on(c)).collect();
            assert!(raw.is_empty(), "{format} {stream} prints {raw:?}: {text}");
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        // What was neutralized is still shown, visibly.
        assert!(stdout.contains("\\x1b]52;c;"), "{format}: {stdout}");
        assert!(stdout.contains("\\u{202e}"), "{format}: {stdout}");
    }
    // Pretty shows every kind of event the adapter sent (its text in place
    // of the deltas the text repeats, a tool call by its description).
    let output = moat()
        .args(["run", ESCAPES, "x", "--output", "pretty"])
        .output()
        .expect("moat runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for field in [
        "model",
        "thinking",
        "text",
        "tool",
        "description",
        "output",
        "CODE",
        "message",
        "reason",
        "extension",
        "resume",
    ] {
        // Shown escaped (doubly so inside JSON).
        assert!(
            stdout.contains(&format!("{field}\\x1b]52"))
                || stdout.contains(&format!("{field}\\\\x1b]52")),
            "{field} missing from: {stdout}"
        );
    }
}

#[test]
fn ndjson_keeps_the_adapters_strings_exactly_escaped_as_json() {
    let output = moat()
        .args(["run", ESCAPES, "x", "--output", "ndjson"])
        .output()
        .expect("moat runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(!stdout.contains('\x1b'), "JSON escapes controls itself");
    assert!(stdout.contains("\\u001b]52;c;"), "{stdout}");
}
