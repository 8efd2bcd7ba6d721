//! Limits stop real components wherever they are: computing, allocating, or
//! blocked in a host call. Abort drains a cooperative adapter and cuts off
//! one that ignores it.

use std::time::{Duration, Instant};

use moat_engine::{DoneStatus, EventPayload, TextDeltaPayload};
use moat_testkit::components::*;
use moat_testkit::{error_codes, error_message, run_component, single_done};
use tokio_util::sync::CancellationToken;

/// A token cancelled `delay` from now. Made inside the request closure,
/// which runs once the component is loaded, so the abort lands mid-run.
fn abort_after(delay: Duration) -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        trigger.cancel();
    });
    token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_adapter_is_stopped_by_the_timeout() {
    let started = Instant::now();
    let events = run_component(SPIN_NEXT, "", |r| {
        r.limits.timeout = Some(Duration::from_millis(300))
    })
    .await;
    assert_eq!(error_codes(&events), ["TIMEOUT"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "TIMEOUT").contains("`limits.timeout`"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_adapter_is_stopped_by_abort() {
    let events = run_component(SPIN_NEXT, "", |r| {
        r.abort = Some(abort_after(Duration::from_millis(200)));
        r.drain = Duration::ZERO;
    })
    .await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert!(
        done.duration_ms >= 150,
        "the adapter was running when aborted"
    );
    assert!(error_codes(&events).is_empty(), "an abort is not an error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_adapter_ignoring_abort_is_cut_off_at_the_drain_deadline_with_the_inbound_resume_token()
 {
    let started = Instant::now();
    let events = run_component(SPIN_NEXT, "", |r| {
        r.abort = Some(abort_after(Duration::from_millis(100)));
        r.drain = Duration::from_millis(200);
        r.options.resume = Some("inbound-token".into());
    })
    .await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("inbound-token"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_adapter_runs_out_of_fuel() {
    let events = run_component(SPIN_NEXT, "", |r| r.limits.fuel = Some(50_000_000)).await;
    assert_eq!(error_codes(&events), ["FUEL_EXHAUSTED"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_resources_a_run_piles_up_count_against_its_memory_cap() {
    // 20,000 header maps of 16 KiB would hold 320 MiB of host memory
    // outside the guest's 32 MiB: the run ends with MEMORY_LIMIT first.
    let events = run_component(ESCAPE, "fields 20000 16384", |r| {
        r.limits.max_memory_bytes = 32 * 1024 * 1024;
    })
    .await;
    assert_eq!(error_codes(&events), ["MEMORY_LIMIT"], "{events:?}");
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    let said = error_message(&events, "MEMORY_LIMIT");
    assert!(said.contains("`limits.max_memory_bytes`"), "{said}");
    // The cause named is the resources it held, not its memory.
    assert!(
        said.contains("held more than 1024 resources at once") && !said.contains("tried to use"),
        "{said}"
    );

    // One header map over its own limit (64 KiB) ends the run (wasi-http
    // traps), saying why.
    let events = run_component(ESCAPE, "fields 1 100000", |_| {}).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(
        error_message(&events, "ADAPTER_ERROR").contains("fields exceeds limit"),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocating_adapter_is_stopped_by_the_memory_cap() {
    let events = run_component(OOM, "", |r| r.limits.max_memory_bytes = 32 * 1024 * 1024).await;
    assert_eq!(error_codes(&events), ["MEMORY_LIMIT"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "MEMORY_LIMIT").contains("`limits.max_memory_bytes`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_covers_time_blocked_in_a_host_call() {
    let started = Instant::now();
    // Each tick sleeps 10 s on a WASI clock: only a host-side deadline
    // can end this run early.
    let events = run_component(SLEEPY, "10000", |r| {
        r.limits.timeout = Some(Duration::from_millis(300))
    })
    .await;
    assert_eq!(error_codes(&events), ["TIMEOUT"]);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_reaches_an_adapter_blocked_in_a_host_call() {
    let started = Instant::now();
    let events = run_component(SLEEPY, "10000", |r| {
        r.abort = Some(abort_after(Duration::from_millis(100)));
        r.drain = Duration::from_millis(200);
    })
    .await;
    // The same contract as the TypeScript and Python adapters that ignore
    // abort (sdk_typescript.rs, sdk_python.rs).
    moat_testkit::conformance::stopped(&events, DoneStatus::Interrupted);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_adapter_ends_itself_during_the_drain_and_its_done_wins() {
    let events = run_component(COOPERATIVE, "", |r| {
        r.abort = Some(abort_after(Duration::from_millis(100)));
        r.drain = Duration::from_secs(5);
        r.options.resume = Some("inbound-token".into());
    })
    .await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(
        done.resume_token.as_deref(),
        Some("coop-resume-token"),
        "the adapter's own done wins"
    );
    assert_eq!(events.last().unwrap().session_id, "coop-session");
    let flushed = events
        .iter()
        .any(|e| matches!(&e.payload, EventPayload::TextDelta(TextDeltaPayload { delta }) if delta == "flushed"));
    assert!(!flushed, "deltas emitted during the drain are dropped");
}
