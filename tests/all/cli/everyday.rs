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
        vec!["doctor"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["run", "echo", "hi"],
        vec!["parallel", "--task", "echo=a", "--task", "echo=b"],
        vec!["wait", id.as_str()],
        vec!["cancel", id.as_str()],
        vec!["--help"],
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
    // -v logs at info (a compile, without the cache); stderr is a pipe.
    let output = moat()
        .args(["-v", "--no-cache", "run", "echo", "hi", "--output", "text"])
        .output()
        .unwrap();
    let said = text(&output.stderr);
    assert!(said.contains("INFO"), "{said}");
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

#[test]
fn ps_shows_short_ids_that_name_one_run_each() {
    let scratch = Scratch::new();
    // Started together, some may share their millisecond: their short ids
    // grow until they differ.
    let ran = scratch.run(&[
        "parallel", "--task", "a:echo=1", "--task", "b:echo=2", "--task", "c:echo=3",
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let ran = scratch.run(&["run", "echo", "later", "--output", "text"]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let full: Vec<String> = text(&scratch.run(&["ps", "-q", "--all"]).stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(full.len(), 4, "{full:?}");
    let table = text(&scratch.run(&["ps", "--all"]).stdout);
    let shorts: Vec<&str> = table
        .lines()
        .skip(1)
        .map(|row| row.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(shorts.len(), 4, "{table}");
    for (short, id) in shorts.iter().zip(&full) {
        assert!(short.len() >= 12 && short.len() < id.len(), "{table}");
        assert!(id.starts_with(short), "{short} is not {id}'s: {table}");
        let named = full.iter().filter(|other| other.starts_with(short));
        assert_eq!(named.count(), 1, "{short} names more than one run");
        let shown = scratch.run(&["show", short, "--json"]);
        assert!(
            text(&shown.stdout).contains(id.as_str()),
            "{}",
            text(&shown.stderr)
        );
    }
    let whole = text(&scratch.run(&["ps", "--all", "--no-trunc"]).stdout);
    for id in &full {
        assert!(whole.contains(id.as_str()), "{whole}");
    }
}

#[test]
fn logs_take_a_tail_a_since_and_show_times() {
    let scratch = Scratch::new();
    let ran = scratch.run(&["run", "echo", "one two three", "--output", "text"]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let all = text(&scratch.run(&["logs", "@last"]).stdout);
    let all: Vec<&str> = all.lines().collect();
    assert!(all.len() > 3, "{all:?}");

    let tail = text(&scratch.run(&["logs", "@last", "--tail", "2"]).stdout);
    assert_eq!(tail.lines().collect::<Vec<_>>(), all[all.len() - 2..]);
    let more = text(&scratch.run(&["logs", "@last", "--tail", "1000"]).stdout);
    assert_eq!(more.lines().count(), all.len());

    let recent = text(&scratch.run(&["logs", "@last", "--since", "1h"]).stdout);
    assert_eq!(recent.lines().count(), all.len());
    let future = scratch.run(&["logs", "@last", "--since", "2999-01-01T00:00:00Z"]);
    assert!(future.status.success(), "the run's outcome still decides");
    assert_eq!(text(&future.stdout), "");
    let bad = scratch.run(&["logs", "@last", "--since", "5x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("neither an age"),
        "{}",
        text(&bad.stderr)
    );

    // -t: pretty lines led by their event's time (RFC 3339, UTC).
    let timed = text(&scratch.run(&["logs", "@last", "-t"]).stdout);
    let year = format!("{}-", 1970 + moat_engine::now_ms() / 31_557_600_000);
    let summary = timed.lines().find(|l| l.contains("success")).unwrap();
    assert!(
        summary.starts_with(&year) && summary.contains("Z "),
        "{timed}"
    );
    let refused = scratch.run(&["logs", "@last", "-t", "--output", "ndjson"]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn ps_watch_prints_the_table_again_when_a_run_changes() {
    use std::io::{BufRead, BufReader};
    let scratch = Scratch::new();
    let started = scratch.run(&["run", COOPERATIVE, "go", "--detach"]);
    let id = text(&started.stdout).trim().to_owned();
    let mut watching = scratch
        .moat()
        .args(["ps", "--watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Should a table never come, the reads below end with the watcher.
    let pid = i32::try_from(watching.id()).unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(60));
        // SAFETY: a signal to a pid; at worst the process has gone.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut lines = BufReader::new(watching.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("UTF-8");
    // The first table: the header and the live run.
    assert!(next().starts_with("ID"));
    let row = next();
    assert!(
        id.starts_with(row.split_whitespace().next().unwrap()),
        "{row}"
    );
    assert!(row.contains("running"), "{row}");
    // Cancelled elsewhere, the run is no longer live: a blank line, then
    // the table again, now empty.
    let cancelled = scratch.run(&["cancel", &id]);
    assert!(cancelled.status.success(), "{}", text(&cancelled.stderr));
    assert_eq!(next(), "");
    assert!(next().starts_with("ID"));
    watching.kill().unwrap();
    watching.wait().unwrap();
}

#[test]
fn one_missing_grant_is_reported_once() {
    let output = moat()
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", "sk-moat-test")
        .args(["run", "openai", "hi", "--model", "m", "--output", "pretty"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(said.matches("--allow-net=127.0.0.1:9").count(), 1, "{said}");
    assert!(!said.contains("WARN"), "{said}");
    // The events keep both reports: the host's refusal and the adapter's.
    let events = moat()
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", "sk-moat-test")
        .args(["run", "openai", "hi", "--model", "m", "--output", "ndjson"])
        .output()
        .unwrap();
    let events = text(&events.stdout);
    assert!(
        events.contains("CAPABILITY_DENIED") && events.contains("HOST_NOT_GRANTED"),
        "{events}"
    );
}
