//! Native unit tests: the SDK answers `interrupted()` from
//! `moat_guest::testing` off wasm, so the adapter runs without a host.

use super::*;
use moat_guest::EventKind;

fn run(prompt: &str) -> Vec<Event> {
    let mut echo = Echo::start(prompt.to_owned(), Options::default()).unwrap();
    std::iter::from_fn(|| echo.next()).collect()
}

#[test]
fn words_concatenate_back_to_the_text() {
    for text in [
        "",
        "one",
        " lead",
        "two  words\n",
        "a b\tc \u{3000}d",
        "trail ",
    ] {
        assert_eq!(words(text).collect::<String>(), text);
    }
    assert_eq!(
        words("hi  there\n").collect::<Vec<_>>(),
        ["hi  ", "there\n"]
    );
}

#[test]
fn streams_the_prompt_then_done() {
    let events = run("hello wide world");
    assert!(
        matches!(&events[0].kind, EventKind::Init(init) if init.model.as_deref() == Some("echo"))
    );
    let deltas: String = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::TextDelta(delta) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "hello wide world");
    let [.., text, done] = events.as_slice() else {
        panic!("too few events")
    };
    assert_eq!(text.kind, EventKind::Text("hello wide world".into()));
    let EventKind::Done(done) = &done.kind else {
        panic!("last event is not done")
    };
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some("hello wide world"));
    assert_eq!(done.usage, Usage::new(0));
}

#[test]
fn interruption_ends_with_done_interrupted() {
    let mut echo = Echo::start("a b c".into(), Options::default()).unwrap();
    assert!(echo.next().is_some());
    moat_guest::testing::set_interrupted(true);
    let last = echo.next().unwrap();
    moat_guest::testing::set_interrupted(false);
    assert_eq!(last, Event::done(DoneStatus::Interrupted));
    assert_eq!(echo.next(), None);
}
