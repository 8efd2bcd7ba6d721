//! A hostile adapter aimed at the user's terminal: whatever it puts in its
//! events, no human output mode prints a control character or escape
//! sequence raw (docs/security.md, "Your terminal").

use moat_testkit::components::ESCAPES;

use super::common::{Pty, moat, shown_at};

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

#[test]
fn on_a_terminal_the_answer_streams_before_the_run_is_done() {
    use moat_testkit::llm_server::{LlmServer, Reply, Step};
    let body: &[u8] = include_bytes!("../../../adapters/openai/fixtures/text_usage.sse");
    let text = std::str::from_utf8(body).unwrap();
    // The backend sends its first words, then holds the rest back a while.
    let first = text.find(r#""content":"Hello""#).unwrap();
    let cut = first + text[first..].find("\n\n").unwrap() + 2;
    let hold = std::time::Duration::from_secs(4);
    let server = LlmServer::start(Reply::stream(vec![
        Step::Send(body[..cut].to_vec()),
        Step::Pause(hold),
        Step::Send(body[cut..].to_vec()),
    ]));
    let mut command = moat();
    command
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .env("OPENAI_API_KEY", "sk-moat-pty-test")
        .args(["run", "openai", "Say hello", "--model", "m", "--no-store"])
        .arg(format!("--allow-net={}", server.grant()));
    let (pieces, status) = Pty::open().run(command);
    let shown: String = pieces.iter().map(|(_, text)| text.as_str()).collect();
    assert!(status.success(), "{shown}");
    let hello = shown_at(&pieces, "Hello").expect("the answer's first words");
    let done = shown_at(&pieces, "success").expect("the summary line");
    assert!(
        done.duration_since(hello) >= hold / 2,
        "the first words came with the end, not before it: {shown}"
    );
    assert!(shown.contains("Hello! How can I help"), "{shown}");
    assert_eq!(shown.matches("How can I help").count(), 1, "{shown}");
}

#[test]
fn on_a_terminal_a_first_compile_says_what_it_does_and_a_cached_run_does_not() {
    let cache = tempfile::tempdir().unwrap();
    let run = || {
        let mut command = moat();
        command
            .env("MOAT_CACHE_DIR", cache.path())
            .args(["run", "echo", "hi", "--no-store"]);
        let (pieces, status) = Pty::open().run(command);
        let shown: String = pieces.into_iter().map(|(_, text)| text).collect();
        assert!(status.success(), "{shown}");
        shown
    };
    let first = run();
    assert!(
        first.contains("compiling built-in echo (") && first.contains("once"),
        "{first}"
    );
    let second = run();
    assert!(!second.contains("compiling"), "{second}");
}

#[test]
fn on_a_terminal_a_log_line_never_lands_on_the_spinners_line() {
    use moat_testkit::llm_server::{LlmServer, Reply, Step};
    // The first probe waits on a slow server (the spinner shows); the
    // second is refused meanwhile, which -v logs at info.
    let server = LlmServer::start(Reply::stream(vec![
        Step::Pause(std::time::Duration::from_millis(1500)),
        Step::Send(b"late".to_vec()),
    ]));
    let mut command = moat();
    command
        .args(["-v", "run", moat_testkit::components::ESCAPE, "--no-store"])
        .arg(format!(
            "http GET {}/slow\nhttp GET http://moat-test.invalid/",
            server.url()
        ))
        .arg(format!("--allow-net={}", server.grant()));
    let (pieces, status) = Pty::open().run(command);
    let shown: String = pieces.into_iter().map(|(_, text)| text).collect();
    assert!(status.success(), "{shown:?}");
    assert!(
        shown.contains("waiting for the agent"),
        "no spinner: {shown:?}"
    );
    // What a terminal shows of each line: what follows its last carriage
    // return (the spinner redraws itself after one).
    let logged = shown
        .split('\n')
        .map(|line| {
            let line = line.trim_end_matches('\r');
            line.rsplit('\r').next().unwrap_or(line)
        })
        .find(|line| line.contains("capability denied"))
        .unwrap_or_else(|| panic!("no log line: {shown:?}"));
    assert!(
        !logged.contains("waiting for the agent"),
        "on the spinner's line: {logged:?}"
    );
    // Each text the adapter gave is shown once (no answer repeated at the end).
    assert_eq!(shown.matches("ok: 200 late").count(), 1, "{shown:?}");
}
