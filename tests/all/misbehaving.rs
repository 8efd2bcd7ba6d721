//! Every misbehaving adapter, run as a real component through the real
//! host, ends with exactly one `done` as its last event and the documented
//! error code.

use std::time::Duration;

use moat_engine::{DoneStatus, EventPayload};
use moat_testkit::components::*;
use moat_testkit::{error_codes, error_message, run_component, single_done, texts};

const SHORT: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_ends_the_run_with_adapter_error_carrying_the_panic_text() {
    let events = run_component(PANIC, "", |_| {}).await;
    assert_eq!(
        texts(&events).len(),
        1,
        "the event before the panic is kept"
    );
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert_eq!(error_codes(&events), ["ADAPTER_ERROR"]);
    let message = error_message(&events, "ADAPTER_ERROR");
    assert!(
        message.contains("testing adapter panicked on purpose"),
        "the panic text reaches the user: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_without_done_gets_missing_done() {
    let events = run_component(NO_DONE, "", |_| {}).await;
    assert_eq!(error_codes(&events), ["MISSING_DONE"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(matches!(events[0].payload, EventPayload::Init(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_a_trap_after_done_are_suppressed() {
    let events = run_component(AFTER_DONE, "", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert_eq!(
        texts(&events).len(),
        1,
        "only the text before done: {events:?}"
    );
    assert!(
        error_codes(&events).is_empty(),
        "the trap after done is swallowed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_in_the_session_destructor_is_swallowed() {
    let events = run_component(DROP_TRAP, "", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert!(error_codes(&events).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_events_arrives_complete_and_in_order() {
    let events = run_component(FLOOD, "20000", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    let deltas = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::TextDelta(_)))
        .count();
    assert_eq!(deltas, 20_000);
    assert!(events.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_asked_for_fails_the_run_and_none_of_it_is_shown() {
    let events = run_component(OVERBATCH, "over", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    let message = error_message(&events, "ADAPTER_ERROR");
    assert!(
        message.contains("next-batch") && message.contains("at most 64"),
        "{message}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::TextDelta(_))),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_after_a_done_in_the_same_batch_are_not_shown() {
    let events = run_component(OVERBATCH, "after-done", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert_eq!(texts(&events), ["before"], "{events:?}");
    assert!(error_codes(&events).is_empty(), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_in_a_tool_use_is_dropped_with_invalid_event_and_the_run_goes_on() {
    let events = run_component(BAD_JSON, "", |_| {}).await;
    assert_eq!(error_codes(&events), ["INVALID_EVENT"]);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ToolUse(_))),
        "the bad tool_use never reaches the consumer"
    );
    assert_eq!(texts(&events), ["still here"]);
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_text_is_dropped_with_invalid_event_and_the_run_goes_on() {
    let events = run_component(HUGE, "", |_| {}).await;
    assert_eq!(error_codes(&events), ["INVALID_EVENT"]);
    assert_eq!(texts(&events), ["after huge"]);
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_in_the_constructor_is_stopped_by_the_timeout() {
    let events = run_component(SPIN_CTOR, "", |r| r.limits.timeout = Some(SHORT)).await;
    assert_eq!(error_codes(&events), ["TIMEOUT"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_survives_every_misbehaving_adapter_in_one_process() {
    let hostile = [
        (SPIN_NEXT, ""),
        (SPIN_CTOR, ""),
        (OOM, ""),
        (PANIC, ""),
        (NO_DONE, ""),
        (AFTER_DONE, ""),
        (BAD_JSON, ""),
        (HUGE, ""),
        (SLEEPY, "5000"),
        (DROP_TRAP, ""),
    ];
    let runs = hostile.iter().map(|(path, prompt)| {
        run_component(path, prompt, |r| {
            r.limits.timeout = Some(Duration::from_secs(2));
            r.limits.max_memory_bytes = 128 * 1024 * 1024;
        })
    });
    for (events, (path, _)) in futures::future::join_all(runs).await.iter().zip(hostile) {
        let done = single_done(events);
        assert!(
            done.status == DoneStatus::Success || !error_codes(events).is_empty(),
            "{path}: a failed run says why"
        );
    }
    // And a well-behaved adapter still runs normally afterwards.
    let events = run_component(FLOOD, "10", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

/// A pooled instance slot is reused from run to run; whatever a run wrote
/// into its memory (its `.bss` and `.data`) is gone for the next, whichever
/// way the pool resets it (in place or by unmapping). A sandbox of its own
/// with four slots (a run's slot is freed once its session is closed, in
/// the background), so most runs land in a slot an earlier run used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_never_sees_what_an_earlier_run_left_in_its_memory() {
    let sandbox = moat_sandbox::Sandbox::new(moat_sandbox::SandboxConfig {
        cache_dir: Some(moat_testkit::shared_cache_dir()),
        pool_sessions: 4,
        ..moat_sandbox::SandboxConfig::default()
    })
    .expect("the sandbox starts");
    let adapter = sandbox
        .load_file(std::path::Path::new(REMEMBER))
        .await
        .expect("the component loads");
    let registry = moat_testkit::registry_of([adapter]);
    for run in 0..20 {
        // A slot is free again once the earlier run's session is closed,
        // which happens in the background: a run that found all four busy
        // is made again.
        let mut events = Vec::new();
        for _ in 0..200 {
            events = moat_testkit::collect(&registry, moat_testkit::request("remember", "")).await;
            let busy = events.iter().any(|event| match &event.payload {
                EventPayload::Error(error) => error.message.contains("concurrent limit"),
                _ => false,
            });
            if !busy {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Success,
            "run {run}: {events:?}"
        );
        assert_eq!(texts(&events), ["fresh"], "run {run}");
    }
}
