//! The everyday commands as a user meets them (issue 32): a reader that
//! goes away early (`moat ps | head -1`), ids typed without their `r_`,
//! `wait` and `cancel` saying what happened, bare `moat`.

use std::process::Stdio;

use moat_testkit::components::COOPERATIVE;

use super::common::moat;
use super::store::Scratch;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_printing_command_ends_quietly_when_its_reader_has_gone() {
    let scratch = Scratch::new();
    let ran = scratch.run(&["run", "echo", "hi", "--output", "text"]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let listed = scratch.run(&["ps", "--all", "-o", "json"]);
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_owned();
    for args in [
        vec!["ps", "--all"],
        vec!["show", id.as_str()],
        vec!["logs", id.as_str()],
        vec!["inspect", "echo"],
        vec!["adapters"],
    ] {
        // The reader closes before moat writes anything.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = scratch
            .moat()
            .args(&args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let said = text(&output.stderr);
        assert!(!said.contains("panicked"), "moat {args:?}: {said}");
        assert_ne!(output.status.code(), Some(101), "moat {args:?}: {said}");
    }
}

#[test]
fn ids_work_without_r_and_wait_and_cancel_say_what_happened() {
    let scratch = Scratch::new();
    let started = scratch.run(&["run", COOPERATIVE, "go", "--detach"]);
    let id = text(&started.stdout).trim().to_owned();
    assert!(id.starts_with("r_"), "{id}");
    let bare = id.trim_start_matches("r_");
    let quiet = scratch.run(&["ps", "-q"]);
    assert_eq!(
        text(&quiet.stdout),
        format!("{id}\n"),
        "only the live run's id"
    );

    let cancelled = scratch.run(&["cancel", &bare[..14]]);
    assert!(cancelled.status.success(), "{}", text(&cancelled.stderr));
    assert_eq!(text(&cancelled.stdout).trim(), format!("{id}  cancelled"));

    let waited = scratch.run(&["wait", bare]);
    assert_eq!(
        waited.status.code(),
        Some(1),
        "a cancelled run is no success"
    );
    assert_eq!(
        text(&waited.stdout).trim(),
        format!("{id}  failed (cancelled)")
    );
    let listed = text(&scratch.run(&["ps", "--all"]).stdout);
    assert!(listed.contains("failed (cancelled)"), "{listed}");

    // Again: nothing left to stop, said; an unknown id warned of; both
    // idempotent successes.
    let again = scratch.run(&["cancel", &id, "r_nosuchrun"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(
        text(&again.stdout).trim(),
        format!("{id}  had ended: failed (cancelled)")
    );
    assert!(
        text(&again.stderr)
            .contains("no run r_nosuchrun in this machine's run store: nothing to cancel"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn bare_moat_prints_its_help_and_succeeds() {
    let output = moat().output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let help = text(&output.stdout);
    assert!(
        help.contains("Usage: moat") && help.contains("Commands:"),
        "{help}"
    );
}

#[test]
fn a_mistyped_flag_or_duration_is_one_line_with_the_fix() {
    let flag = moat()
        .args(["run", "echo", "hi", "--alow-net=x"])
        .output()
        .unwrap();
    assert_eq!(flag.status.code(), Some(2));
    let said = text(&flag.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("a similar argument exists: '--allow-net'"),
        "{said}"
    );

    let duration = moat()
        .args(["run", "echo", "hi", "--timeout", "5x"])
        .output()
        .unwrap();
    assert_eq!(duration.status.code(), Some(2));
    let said = text(&duration.stderr);
    assert!(said.contains("`5x` is not a duration"), "{said}");
    assert!(!said.contains("few variations"), "{said}");
}

#[test]
fn logs_that_do_not_go_to_a_terminal_carry_no_colour_codes() {
    // A refused capability is logged as a warning; stderr is a pipe here.
    let output = moat()
        .args(["run", moat_testkit::components::ESCAPE, "shell echo hi"])
        .args(["--output", "text"])
        .output()
        .unwrap();
    let said = text(&output.stderr);
    assert!(said.contains("WARN"), "{said}");
    assert!(!said.contains('\u{1b}'), "{said:?}");
}

#[test]
fn a_failed_request_is_said_in_words_not_in_binding_types() {
    let output = moat()
        .args([
            "run",
            moat_testkit::components::ESCAPE,
            "http GET http://moat-test.invalid/",
        ])
        .args(["--allow-net=moat-test.invalid", "--output", "text"])
        .output()
        .unwrap();
    let said = text(&output.stdout);
    assert!(said.contains("denied: "), "{said}");
    assert!(said.contains("DNS"), "{said}");
    assert!(
        !said.contains("ErrorCode") && !said.contains("Payload"),
        "{said}"
    );
}

#[test]
fn at_last_names_the_newest_run() {
    let scratch = Scratch::new();
    let none = scratch.run(&["show", "@last"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no run @last"),
        "{}",
        text(&none.stderr)
    );
    for prompt in ["first", "second"] {
        let ran = scratch.run(&["run", "echo", prompt, "--output", "text"]);
        assert!(ran.status.success(), "{}", text(&ran.stderr));
    }
    let logs = scratch.run(&["logs", "@last", "--output", "text"]);
    assert_eq!(text(&logs.stdout).trim(), "second");
    let waited = scratch.run(&["wait", "@last"]);
    assert!(
        text(&waited.stdout).ends_with("  completed\n"),
        "{}",
        text(&waited.stdout)
    );
}

#[test]
fn a_mistyped_adapter_name_gets_the_name_it_is_likely_a_typo_of() {
    let output = moat().args(["run", "echp", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let said = text(&output.stderr);
    assert!(
        said.contains("unknown adapter `echp` (did you mean `echo`?)"),
        "{said}"
    );
    let far = moat().args(["run", "zzz", "hi"]).output().unwrap();
    assert!(
        !text(&far.stderr).contains("did you mean"),
        "{}",
        text(&far.stderr)
    );
}
