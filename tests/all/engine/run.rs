//! The engine rules, one test per rule, against native doubles.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use moat_engine::*;
use moat_engine::{AdapterEventKind, DoneInfo, ErrorInfo};
use moat_engine::{
    DonePayload, ErrorPayload, InputTokens, OutputTokens, TokenCoverage, TokenReport,
};
use moat_testkit::native::{NativeEcho, Probe, ScriptedAdapter, StartBehaviour, Step, done_info};

/// Long enough for a test that expects a run to end promptly; a run that
/// hangs fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(5);

fn setup(adapter: ScriptedAdapter) -> (Registry, Arc<Probe>) {
    let probe = adapter.probe();
    let mut registry = Registry::new();
    registry.register(Arc::new(adapter)).unwrap();
    (registry, probe)
}

fn scripted(steps: Vec<Step>) -> (Registry, Arc<Probe>) {
    setup(ScriptedAdapter::new("fake", steps))
}

fn request() -> RunRequest {
    RunRequest::new("fake", "prompt")
}

async fn next(run: &mut AgentRun) -> Option<AgentEvent> {
    tokio::time::timeout(PATIENCE, run.next())
        .await
        .expect("the run should have produced an event by now")
}

async fn collect(mut run: AgentRun) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    while let Some(event) = next(&mut run).await {
        events.push(event);
    }
    events
}

async fn run(registry: &Registry, request: RunRequest) -> Vec<AgentEvent> {
    collect(run_agent(registry, request).unwrap()).await
}

/// Runs `request` with an abort token, takes its first event, aborts it
/// and collects the rest.
async fn aborted_after_first_event(registry: &Registry, request: RunRequest) -> Vec<AgentEvent> {
    let token = CancellationToken::new();
    let mut run = run_agent(registry, request.with_abort(token.clone())).unwrap();
    next(&mut run).await.unwrap();
    token.cancel();
    collect(run).await
}

fn kinds(events: &[AgentEvent]) -> Vec<&str> {
    events.iter().map(AgentEvent::type_name).collect()
}

fn last_done(events: &[AgentEvent]) -> &DonePayload {
    events
        .last()
        .and_then(AgentEvent::as_done)
        .expect("the last event should be a done")
}

fn error_at(events: &[AgentEvent], index: usize) -> &ErrorPayload {
    events[index].as_error().expect("an error event")
}

/// The shape every run must have: one done, last.
fn assert_one_done_last(events: &[AgentEvent]) {
    let dones = events.iter().filter(|e| e.is_done()).count();
    assert_eq!(dones, 1, "{:?}", kinds(events));
    assert!(events.last().unwrap().is_done(), "{:?}", kinds(events));
}

fn cancel_after(token: &CancellationToken, delay: Duration) {
    let token = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        token.cancel();
    });
}

/// Waits (briefly) for a background effect such as a close or a kill.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(1);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn with_resume(request: RunRequest, resume: &str) -> RunRequest {
    request.with_options(RunOptions {
        resume: Some(resume.into()),
        ..RunOptions::default()
    })
}

fn with_timeout(request: RunRequest, timeout: Duration) -> RunRequest {
    request.with_limits(RunLimits {
        timeout: Some(timeout),
        ..RunLimits::default()
    })
}

#[test]
fn eng_003_unknown_adapter_is_an_error_to_the_caller() {
    let (registry, probe) = scripted(vec![]);
    let err = run_agent(&registry, RunRequest::new("nope", "hi")).unwrap_err();
    assert_eq!(
        err,
        EngineError::UnknownAdapter {
            name: "nope".into(),
            known: vec!["fake".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "no adapter named `nope`; known adapters: fake"
    );
    assert_eq!(probe.starts(), 0);
    let empty = run_agent(&Registry::new(), RunRequest::new("x", "")).unwrap_err();
    assert!(empty.to_string().contains("no adapters are registered"));
}

#[tokio::test]
async fn events_pass_through_in_order_under_the_agent_name() {
    let (registry, _) = scripted(vec![
        Step::emit_in("sess", AdapterEventKind::Text("a".into())),
        Step::delta("b"),
        Step::done(DoneStatus::Success),
    ]);
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["text", "text_delta", "done"]);
    for event in &events {
        assert_eq!(event.agent, "fake");
        assert_eq!(event.session_id, "sess");
        assert_eq!(event.role, None);
    }
    assert_eq!(last_done(&events).status, DoneStatus::Success);
}

#[tokio::test]
async fn pull_model_asks_the_adapter_only_when_the_consumer_asks() {
    let (registry, probe) = scripted(vec![
        Step::text("a"),
        Step::text("b"),
        Step::done(DoneStatus::Success),
    ]);
    let mut run = run_agent(&registry, request()).unwrap();
    tokio::task::yield_now().await;
    assert_eq!((probe.starts(), probe.nexts()), (0, 0));
    next(&mut run).await.unwrap();
    assert_eq!((probe.starts(), probe.nexts()), (1, 1));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(probe.nexts(), 1, "nothing is read ahead of the consumer");
    next(&mut run).await.unwrap();
    assert_eq!(probe.nexts(), 2);
}

#[tokio::test]
async fn into_stream_yields_the_same_events() {
    let (registry, _) = scripted(vec![Step::text("a"), Step::done(DoneStatus::Success)]);
    let events: Vec<AgentEvent> = run_agent(&registry, request())
        .unwrap()
        .into_stream()
        .collect()
        .await;
    assert_eq!(kinds(&events), ["text", "done"]);
}

#[tokio::test]
async fn eng_004_failure_before_done_yields_adapter_error_then_done_error() {
    let (registry, probe) = scripted(vec![
        Step::text("a"),
        Step::Fail(SessionFailure::Crashed {
            message: "guest panicked at 'boom'".into(),
        }),
        Step::done(DoneStatus::Success),
    ]);
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["text", "error", "done"]);
    assert_eq!(
        error_at(&events, 1),
        &ErrorPayload {
            code: Some("ADAPTER_ERROR".into()),
            message: "guest panicked at 'boom'".into(),
            recoverable: false,
        }
    );
    assert_eq!(last_done(&events).status, DoneStatus::Error);
    assert_eq!(probe.nexts(), 2, "a failed adapter is not asked again");
}

#[tokio::test]
async fn eng_004_failure_while_starting_yields_adapter_error_then_done_error() {
    let (registry, _) = setup(ScriptedAdapter::new("fake", vec![]).with_start(
        StartBehaviour::Fail(SessionFailure::Crashed {
            message: "instantiation trapped".into(),
        }),
    ));
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["error", "done"]);
    assert_eq!(error_at(&events, 0).code.as_deref(), Some("ADAPTER_ERROR"));
    assert_eq!(error_at(&events, 0).message, "instantiation trapped");
    assert_eq!(last_done(&events).status, DoneStatus::Error);
}

#[tokio::test]
async fn eng_004_refusal_yields_the_adapters_code_then_done_error() {
    let refuse = |code: Option<&str>| {
        setup(
            ScriptedAdapter::new("fake", vec![]).with_start(StartBehaviour::Refuse(ErrorInfo {
                code: code.map(str::to_owned),
                message: "cannot enforce allowed-tools".into(),
                recoverable: true,
            })),
        )
    };
    for (code, expected) in [
        (Some("UNSUPPORTED_OPTION"), "UNSUPPORTED_OPTION"),
        (None, "RUN_REFUSED"),
    ] {
        let (registry, _) = refuse(code);
        let events = run(&registry, request()).await;
        assert_eq!(kinds(&events), ["error", "done"]);
        let error = error_at(&events, 0);
        assert_eq!(error.code.as_deref(), Some(expected));
        assert_eq!(error.message, "cannot enforce allowed-tools");
        assert!(!error.recoverable);
        assert_eq!(last_done(&events).status, DoneStatus::Error);
    }
}

#[tokio::test]
async fn eng_004_limit_failures_map_to_their_codes() {
    let cases = [
        (
            SessionFailure::FuelExhausted { budget: 1000 },
            "FUEL_EXHAUSTED",
            "raise it with `limits.fuel`",
        ),
        (
            SessionFailure::MemoryLimit { limit_bytes: 4096 },
            "MEMORY_LIMIT",
            "raise it with `limits.max_memory_bytes`",
        ),
        (SessionFailure::Killed, "ADAPTER_ERROR", "stopped"),
    ];
    for (failure, code, hint) in cases {
        let (registry, _) = scripted(vec![Step::Fail(failure)]);
        let events = run(&registry, request()).await;
        assert_eq!(kinds(&events), ["error", "done"]);
        let error = error_at(&events, 0);
        assert_eq!(error.code.as_deref(), Some(code));
        assert!(error.message.contains(hint), "{}", error.message);
        assert!(!error.recoverable);
        assert_eq!(last_done(&events).status, DoneStatus::Error);
    }
}

#[tokio::test]
async fn eng_004_failure_after_done_is_swallowed() {
    let (registry, probe) = scripted(vec![
        Step::done(DoneStatus::Success),
        Step::Fail(SessionFailure::Crashed {
            message: "trap in destructor".into(),
        }),
    ]);
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Success);
    assert_eq!(probe.nexts(), 1);
}

#[tokio::test]
async fn eng_005_abort_before_start_never_starts_the_adapter() {
    let (registry, probe) = scripted(vec![Step::text("a"), Step::done(DoneStatus::Success)]);
    let token = CancellationToken::new();
    token.cancel();
    let events = run(&registry, with_resume(request(), "r-0").with_abort(token)).await;
    assert_eq!(kinds(&events), ["done"]);
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("r-0"));
    assert_eq!(done.usage, Usage::default());
    assert_eq!(probe.starts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_abort_while_starting_drops_the_start() {
    let (registry, _) =
        setup(ScriptedAdapter::new("fake", vec![]).with_start(StartBehaviour::Hang));
    let token = CancellationToken::new();
    cancel_after(&token, Duration::from_millis(30));
    let events = run(&registry, request().with_abort(token)).await;
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_adapter_done_during_drain_wins_and_keeps_its_resume_token() {
    let (registry, probe) = scripted(vec![
        Step::text("a"),
        Step::WaitForInterrupt,
        Step::done_with_resume(DoneStatus::Interrupted, "adapter-token"),
    ]);
    let token = CancellationToken::new();
    let mut run = run_agent(
        &registry,
        with_resume(request(), "inbound-token").with_abort(token.clone()),
    )
    .unwrap();
    assert_eq!(next(&mut run).await.unwrap().type_name(), "text");
    // The adapter is now waiting inside `next`; the abort must reach it.
    cancel_after(&token, Duration::from_millis(20));
    let events = collect(run).await;
    assert_eq!(kinds(&events), ["done"]);
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("adapter-token"));
    assert!(probe.interrupts() >= 1);
    assert_eq!(probe.kills(), 0, "a cooperative adapter is not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_drain_deadline_synthesizes_interrupted_with_inbound_resume() {
    let (registry, probe) = scripted(vec![
        Step::emit_in("s-9", AdapterEventKind::Text("a".into())),
        Step::tool_use("t1"),
        Step::Hang,
    ]);
    let token = CancellationToken::new();
    let request = with_resume(request(), "inbound-token")
        .with_abort(token.clone())
        .with_drain(Duration::from_millis(100));
    let mut run = run_agent(&registry, request).unwrap();
    next(&mut run).await.unwrap();
    next(&mut run).await.unwrap();
    cancel_after(&token, Duration::from_millis(20));
    let started = Instant::now();
    let events = collect(run).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(events[0].session_id, "s-9");
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("inbound-token"));
    assert_eq!(done.usage.tool_uses, 1);
    assert!(
        probe.kills() >= 1,
        "an adapter that does not wrap up is killed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_delta_during_drain_is_dropped() {
    let (registry, _) = scripted(vec![
        Step::text("a"),
        Step::WaitForInterrupt,
        Step::delta("late"),
        Step::tool_use("t-late"),
        Step::emit(AdapterEventKind::ToolUse {
            tool_name: "read".into(),
            tool_use_id: "bad".into(),
            input: "not json".into(),
            description: None,
        }),
        Step::done_with_resume(DoneStatus::Interrupted, "tok"),
    ]);
    let events = aborted_after_first_event(&registry, request()).await;
    assert_eq!(
        kinds(&events),
        ["done"],
        "deltas, tool uses and errors are dropped"
    );
    assert_eq!(last_done(&events).resume_token.as_deref(), Some("tok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_zero_drain_kills_at_once() {
    let (registry, probe) = scripted(vec![
        Step::text("a"),
        Step::WaitForInterrupt,
        Step::done_with_resume(DoneStatus::Interrupted, "never-seen"),
    ]);
    let events = aborted_after_first_event(&registry, request().with_drain(Duration::ZERO)).await;
    assert_eq!(kinds(&events), ["done"]);
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token, None, "no inbound resume, no token");
    assert!(probe.kills() >= 1);
    assert_eq!(probe.nexts(), 1, "the adapter is not read again");
}

/// A scripted adapter whose events come as held ones, as from a session
/// that pulls batches: the engine's fast path, under the same rules.
fn held(steps: Vec<Step>) -> (Registry, Arc<Probe>) {
    setup(ScriptedAdapter::new("fake", steps).holding_events(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_events_pass_in_order_without_a_read_each() {
    let (registry, probe) = held(vec![
        Step::text("a"),
        Step::delta("b"),
        Step::text("c"),
        Step::done(DoneStatus::Success),
        Step::text("after"),
    ]);
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["text", "text_delta", "text", "done"]);
    assert_eq!(probe.nexts(), 0, "no read for a held event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_events_carry_the_time_of_the_read_that_brought_them() {
    let (registry, _) = held(vec![
        Step::text("a"),
        Step::text("b"),
        Step::Sleep(Duration::from_millis(40)),
        Step::text("c"),
        Step::done(DoneStatus::Success),
    ]);
    let mut run = run_agent(&registry, request()).unwrap();
    let a = next(&mut run).await.expect("a");
    // However long the consumer takes, the held event arrived with `a`.
    tokio::time::sleep(Duration::from_millis(40)).await;
    let b = next(&mut run).await.expect("b");
    assert_eq!(b.timestamp, a.timestamp, "one read, one time");
    // A new read looks at the clock again.
    let c = next(&mut run).await.expect("c");
    assert!(
        c.timestamp >= a.timestamp + 40,
        "{} vs {}",
        c.timestamp,
        a.timestamp
    );
    let done = next(&mut run).await.expect("done");
    assert!(done.timestamp >= c.timestamp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_an_abort_drops_held_events_and_a_held_done_still_wins() {
    let (registry, _) = held(vec![
        Step::text("a"),
        Step::text("b"),
        Step::delta("c"),
        Step::done_with_resume(DoneStatus::Interrupted, "tok"),
    ]);
    let events = aborted_after_first_event(&registry, request()).await;
    assert_eq!(
        kinds(&events),
        ["done"],
        "held events are dropped while draining"
    );
    assert_eq!(last_done(&events).resume_token.as_deref(), Some("tok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_zero_drain_discards_held_events_at_once() {
    let (registry, probe) = held(vec![
        Step::text("a"),
        Step::text("b"),
        Step::done(DoneStatus::Success),
    ]);
    let events = aborted_after_first_event(&registry, request().with_drain(Duration::ZERO)).await;
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
    assert!(probe.kills() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_013_a_held_forbidden_tool_use_stops_the_run_before_anything_after_it() {
    let (registry, _) = held(vec![
        Step::text("a"),
        Step::emit(AdapterEventKind::ToolUse {
            tool_name: "bash".into(),
            tool_use_id: "t1".into(),
            input: "{}".into(),
            description: None,
        }),
        Step::text("after"),
        Step::done(DoneStatus::Success),
    ]);
    let events = run(
        &registry,
        request().with_options(RunOptions {
            allowed_tools: Some(vec!["read".into()]),
            ..RunOptions::default()
        }),
    )
    .await;
    assert_eq!(kinds(&events), ["text", "error", "done"]);
    assert_eq!(
        error_at(&events, 1).code.as_deref(),
        Some(codes::TOOL_POLICY_VIOLATION)
    );
    assert_eq!(last_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_adapter_ending_or_failing_during_drain_synthesizes_interrupted() {
    let endings = [
        Step::End,
        Step::Fail(SessionFailure::Crashed {
            message: "gone".into(),
        }),
    ];
    for ending in endings {
        let (registry, probe) = scripted(vec![Step::text("a"), Step::WaitForInterrupt, ending]);
        let token = CancellationToken::new();
        let mut run = run_agent(
            &registry,
            with_resume(request(), "in").with_abort(token.clone()),
        )
        .unwrap();
        next(&mut run).await.unwrap();
        token.cancel();
        let events = collect(run).await;
        assert_eq!(
            kinds(&events),
            ["done"],
            "no error for a drain that ends badly"
        );
        assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
        assert_eq!(last_done(&events).resume_token.as_deref(), Some("in"));
        assert!(probe.kills() >= 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_spinning_adapter_is_woken_by_the_abort() {
    // The spin holds the driving task's poll; only the watcher task can
    // reach it. Without it this run would spin for ten seconds.
    let (registry, _) = scripted(vec![
        Step::Spin(Duration::from_secs(10)),
        Step::done(DoneStatus::Success),
    ]);
    let token = CancellationToken::new();
    cancel_after(&token, Duration::from_millis(50));
    let started = Instant::now();
    let events = run(
        &registry,
        request()
            .with_abort(token)
            .with_drain(Duration::from_millis(50)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_005_a_read_that_yields_done_is_never_treated_as_aborted() {
    // The abort fires inside the very poll that returns the done.
    let token = CancellationToken::new();
    let fire = token.clone();
    let (registry, _) = scripted(vec![
        Step::text("a"),
        Step::call(move || fire.cancel()),
        Step::emit(AdapterEventKind::Done(DoneInfo {
            result: Some("finished".into()),
            ..done_info(DoneStatus::Success)
        })),
    ]);
    let events = run(&registry, request().with_abort(token)).await;
    assert_eq!(kinds(&events), ["text", "done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Success);
    assert_eq!(last_done(&events).result.as_deref(), Some("finished"));

    // The same read returning anything else is dropped under the drain.
    let token = CancellationToken::new();
    let fire = token.clone();
    let (registry, _) = scripted(vec![
        Step::call(move || fire.cancel()),
        Step::delta("dropped"),
        Step::done(DoneStatus::Interrupted),
    ]);
    let events = run(&registry, request().with_abort(token)).await;
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
}

#[tokio::test]
async fn eng_006_nothing_follows_done() {
    let (registry, probe) = scripted(vec![
        Step::text("a"),
        Step::done(DoneStatus::Success),
        Step::text("after"),
        Step::done(DoneStatus::Error),
        Step::Fail(SessionFailure::Killed),
    ]);
    let mut run = run_agent(&registry, request()).unwrap();
    assert_eq!(next(&mut run).await.unwrap().type_name(), "text");
    assert!(next(&mut run).await.unwrap().is_done());
    assert!(next(&mut run).await.is_none());
    assert!(next(&mut run).await.is_none(), "still nothing");
    assert_eq!(probe.nexts(), 2, "the adapter is not read after its done");
    eventually("the session to be closed", || probe.closes() == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eng_006_done_reaches_the_consumer_without_waiting_for_cleanup() {
    let (registry, probe) = setup(
        ScriptedAdapter::new("fake", vec![Step::done(DoneStatus::Success)]).with_hanging_close(),
    );
    let mut run = run_agent(&registry, request()).unwrap();
    assert!(next(&mut run).await.unwrap().is_done());
    // Had the engine waited for the hanging cleanup, it would have had to
    // kill it before handing out the done.
    assert_eq!(probe.kills(), 0);
    eventually("the cleanup to be closed", || probe.closes() == 1).await;
    eventually("the hanging cleanup to be killed", || probe.kills() == 1).await;
    assert!(next(&mut run).await.is_none());
}

#[test]
fn eng_007_exactly_one_done_whatever_the_script() {
    use proptest::prelude::*;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let step = prop_oneof![
        Just("text"),
        Just("delta"),
        Just("tool"),
        Just("invalid"),
        Just("done"),
        Just("done_error"),
        Just("fail"),
        Just("end"),
        Just("abort"),
    ];
    let config = ProptestConfig {
        cases: 128,
        ..ProptestConfig::default()
    };
    proptest!(config, |(script in proptest::collection::vec(step, 0..8), drain_ms in 0u64..3)| {
        let token = CancellationToken::new();
        let steps: Vec<Step> = script
            .iter()
            .enumerate()
            .map(|(i, name)| match *name {
                "text" => Step::text("t"),
                "delta" => Step::delta("d"),
                "tool" => Step::tool_use(&format!("id{}", i % 2)),
                "invalid" => Step::emit(AdapterEventKind::Extension {
                    name: "no-colon".into(),
                    payload: "{}".into(),
                }),
                "done" => Step::done(DoneStatus::Success),
                "done_error" => Step::done(DoneStatus::Error),
                "fail" => Step::Fail(SessionFailure::Crashed { message: "x".into() }),
                "end" => Step::End,
                _ => {
                    let token = token.clone();
                    Step::call(move || token.cancel())
                }
            })
            .collect();
        let (registry, _) = scripted(steps);
        let request = request()
            .with_abort(token)
            .with_drain(Duration::from_millis(drain_ms));
        let events = runtime.block_on(run(&registry, request));
        assert_one_done_last(&events);
        // Errors the engine makes are never followed by a success.
        let done = last_done(&events);
        if events.iter().any(|e| e.as_error().is_some_and(|e| !e.recoverable)) {
            prop_assert_eq!(done.status, DoneStatus::Error);
        }
    });
}

#[tokio::test]
async fn eng_008_missing_done_yields_error_then_done_error() {
    for steps in [vec![Step::text("a"), Step::End], vec![]] {
        let (registry, probe) = scripted(steps);
        let events = run(&registry, request()).await;
        assert_eq!(kinds(&events).last(), Some(&"done"));
        let error = error_at(&events, events.len() - 2);
        assert_eq!(error.code.as_deref(), Some("MISSING_DONE"));
        assert!(!error.recoverable);
        assert_eq!(last_done(&events).status, DoneStatus::Error);
        assert_one_done_last(&events);
        eventually("the session to be closed", || probe.closes() == 1).await;
    }
}

#[tokio::test]
async fn eng_009_synthesized_done_reuses_last_session_id_and_counts_distinct_tool_uses() {
    let (registry, _) = scripted(vec![
        Step::emit_in("s1", AdapterEventKind::Text("a".into())),
        Step::tool_use("t1"),
        Step::tool_use("t1"),
        Step::tool_use("t2"),
        Step::emit_in("s2", AdapterEventKind::TextDelta("b".into())),
        Step::text("c"),
        Step::Fail(SessionFailure::Crashed {
            message: "x".into(),
        }),
    ]);
    let events = run(&registry, request()).await;
    let ids: Vec<&str> = events.iter().map(|e| e.session_id.as_str()).collect();
    assert_eq!(ids, ["s1", "s1", "s1", "s1", "s2", "s2", "s2", "s2"]);
    let done = last_done(&events);
    assert_eq!(done.usage.tool_uses, 2);
    assert_eq!(done.usage.tokens, None);
    assert_eq!(done.usage.cost, None);
    let json = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(json["payload"]["usage"], serde_json::json!({"toolUses": 2}));
}

#[tokio::test]
async fn eng_009_events_without_a_session_id_share_one_fresh_id_per_run() {
    let steps = || vec![Step::text("a"), Step::text("b"), Step::End];
    let (registry, _) = scripted(steps());
    let first = run(&registry, request()).await;
    let id = &first[0].session_id;
    assert!(uuid::Uuid::parse_str(id).is_ok());
    assert!(first.iter().all(|e| &e.session_id == id));
    let second = run(&registry, request()).await;
    assert_ne!(&second[0].session_id, id);
}

#[tokio::test]
async fn eng_009_adapter_done_wins_and_gets_the_measured_duration_when_missing() {
    let usage = Usage {
        tool_uses: 5,
        tokens: Some(TokenReport {
            coverage: TokenCoverage::Complete,
            input: InputTokens {
                total: 10,
                cache_read: Some(3),
                cache_write: None,
            },
            output: OutputTokens {
                total: 4,
                reasoning: None,
            },
        }),
        cost: None,
    };
    let (registry, _) = scripted(vec![
        Step::tool_use("t1"),
        Step::Sleep(Duration::from_millis(30)),
        Step::emit(AdapterEventKind::Done(DoneInfo {
            usage,
            result: Some("r".into()),
            ..done_info(DoneStatus::MaxBudget)
        })),
    ]);
    let events = run(&registry, request()).await;
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::MaxBudget);
    assert_eq!(done.usage, usage, "the adapter's usage is kept as it is");
    assert!(done.duration_ms >= 30, "{}", done.duration_ms);

    let (registry, _) = scripted(vec![Step::emit(AdapterEventKind::Done(DoneInfo {
        duration_ms: Some(7),
        ..done_info(DoneStatus::Success)
    }))]);
    let events = run(&registry, request()).await;
    assert_eq!(last_done(&events).duration_ms, 7);
}

#[tokio::test]
async fn eng_009_synthesized_duration_counts_from_the_start() {
    let (registry, _) = scripted(vec![Step::Sleep(Duration::from_millis(40)), Step::End]);
    let events = run(&registry, request()).await;
    assert!(last_done(&events).duration_ms >= 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_a_hanging_adapter() {
    let (registry, probe) = scripted(vec![Step::text("a"), Step::Hang]);
    let events = run(
        &registry,
        with_timeout(request(), Duration::from_millis(100)),
    )
    .await;
    assert_eq!(kinds(&events), ["text", "error", "done"]);
    let error = error_at(&events, 1);
    assert_eq!(error.code.as_deref(), Some("TIMEOUT"));
    assert!(!error.recoverable);
    assert!(error.message.contains("100ms") && error.message.contains("`limits.timeout`"));
    assert_eq!(last_done(&events).status, DoneStatus::Error);
    assert!(probe.kills() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_a_spinning_adapter() {
    let (registry, probe) = scripted(vec![Step::Spin(Duration::from_secs(10)), Step::End]);
    let started = Instant::now();
    let events = run(
        &registry,
        with_timeout(request(), Duration::from_millis(100)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(kinds(&events), ["error", "done"]);
    assert_eq!(error_at(&events, 0).code.as_deref(), Some("TIMEOUT"));
    assert!(probe.kills() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_covers_a_hanging_start() {
    let (registry, _) =
        setup(ScriptedAdapter::new("fake", vec![]).with_start(StartBehaviour::Hang));
    let events = run(
        &registry,
        with_timeout(request(), Duration::from_millis(50)),
    )
    .await;
    assert_eq!(kinds(&events), ["error", "done"]);
    assert_eq!(error_at(&events, 0).code.as_deref(), Some("TIMEOUT"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_counts_from_the_start_across_reads() {
    let (registry, _) = scripted(vec![
        Step::Sleep(Duration::from_millis(70)),
        Step::text("a"),
        Step::Sleep(Duration::from_millis(70)),
        Step::text("b"),
        Step::done(DoneStatus::Success),
    ]);
    let events = run(
        &registry,
        with_timeout(request(), Duration::from_millis(100)),
    )
    .await;
    assert_eq!(kinds(&events), ["text", "error", "done"]);
    assert_eq!(error_at(&events, 1).code.as_deref(), Some("TIMEOUT"));
}

#[tokio::test]
async fn invalid_event_is_reported_and_the_run_goes_on() {
    let (registry, _) = scripted(vec![
        Step::emit(AdapterEventKind::ToolUse {
            tool_name: "read".into(),
            tool_use_id: "t1".into(),
            input: "[1,2]".into(),
            description: None,
        }),
        Step::emit(AdapterEventKind::Extension {
            name: "text".into(),
            payload: "{}".into(),
        }),
        Step::text("fine"),
        Step::End,
    ]);
    let events = run(&registry, request()).await;
    assert_eq!(kinds(&events), ["error", "error", "text", "error", "done"]);
    for index in [0, 1] {
        let error = error_at(&events, index);
        assert_eq!(error.code.as_deref(), Some("INVALID_EVENT"));
        assert!(error.recoverable);
    }
    assert!(
        error_at(&events, 0)
            .message
            .contains("`input` is not a JSON object")
    );
    assert!(error_at(&events, 1).message.contains("`name`"));
    assert_eq!(
        last_done(&events).usage.tool_uses,
        0,
        "a dropped tool use does not count"
    );
}

#[tokio::test]
async fn invalid_event_over_the_size_limit_is_dropped() {
    let (registry, _) = scripted(vec![
        Step::text(&"x".repeat(65)),
        Step::text("small"),
        Step::done(DoneStatus::Success),
    ]);
    let limits = RunLimits {
        max_event_bytes: 64,
        ..RunLimits::default()
    };
    let events = run(&registry, request().with_limits(limits)).await;
    assert_eq!(kinds(&events), ["error", "text", "done"]);
    let error = error_at(&events, 0);
    assert_eq!(error.code.as_deref(), Some("INVALID_EVENT"));
    assert!(error.message.contains("over the limit of 64 bytes"));
}

#[tokio::test]
async fn the_call_ids_a_run_keeps_are_bounded() {
    let call = |id: String| {
        Step::emit(AdapterEventKind::ToolUse {
            tool_name: "read".into(),
            tool_use_id: id,
            input: "{}".into(),
            description: None,
        })
    };
    let mut steps: Vec<Step> = (0..MAX_CALL_IDS + 3)
        .map(|i| call(format!("t{i}")))
        .collect();
    // A known id is still accepted at the bound; so is its result.
    steps.push(call("t0".into()));
    steps.push(call("x".repeat(MAX_CALL_ID_BYTES + 1)));
    steps.push(Step::done(DoneStatus::Success));
    let (registry, _) = scripted(steps);
    let events = run(&registry, request()).await;
    let invalid: Vec<&ErrorPayload> = events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some("INVALID_EVENT") => {
                Some(&**error)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        invalid.len(),
        4,
        "three new ids past the bound, one too long"
    );
    assert!(
        invalid[0].message.contains("distinct calls"),
        "{}",
        invalid[0].message
    );
    assert!(
        invalid[3].message.contains("over 512"),
        "{}",
        invalid[3].message
    );
    assert_eq!(last_done(&events).status, DoneStatus::Success);
}

#[tokio::test]
async fn dropping_a_run_kills_its_adapter() {
    let (registry, probe) = scripted(vec![Step::text("a"), Step::Hang]);
    let mut run = run_agent(&registry, request()).unwrap();
    next(&mut run).await.unwrap();
    let pending = tokio::time::timeout(Duration::from_millis(20), run.next()).await;
    assert!(pending.is_err(), "the adapter hangs");
    drop(run);
    assert_eq!(probe.kills(), 1);
}

#[tokio::test]
async fn a_dropped_next_call_loses_no_event() {
    let (registry, _) = scripted(vec![
        Step::Sleep(Duration::from_millis(50)),
        Step::text("a"),
        Step::done(DoneStatus::Success),
    ]);
    let mut run = run_agent(&registry, request()).unwrap();
    let early = tokio::time::timeout(Duration::from_millis(5), run.next()).await;
    assert!(early.is_err());
    let events = collect(run).await;
    assert_eq!(kinds(&events), ["text", "done"]);
}

#[tokio::test]
async fn native_echo_streams_the_prompt_back() {
    let mut registry = Registry::new();
    registry.register(Arc::new(NativeEcho::new())).unwrap();
    let request = RunRequest::new("echo", "hello big world").with_options(RunOptions {
        model: Some("m1".into()),
        ..RunOptions::default()
    });
    let events = run(&registry, request).await;
    assert_eq!(
        kinds(&events),
        [
            "init",
            "text_delta",
            "text_delta",
            "text_delta",
            "text",
            "done"
        ]
    );
    let EventPayload::Init(init) = &events[0].payload else {
        panic!()
    };
    assert_eq!(init.model.as_deref(), Some("m1"));
    let deltas: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "hello big world");
    assert_eq!(events[4].payload, EventPayload::text("hello big world"));
    let done = last_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some("hello big world"));
    assert_eq!(done.usage, Usage::default());
}

#[tokio::test]
async fn native_echo_ends_interrupted_when_aborted() {
    let mut registry = Registry::new();
    registry.register(Arc::new(NativeEcho::new())).unwrap();
    let token = CancellationToken::new();
    let mut run = run_agent(
        &registry,
        RunRequest::new("echo", "a b c d").with_abort(token.clone()),
    )
    .unwrap();
    assert_eq!(next(&mut run).await.unwrap().type_name(), "init");
    token.cancel();
    let events = collect(run).await;
    assert_eq!(kinds(&events), ["done"]);
    assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
}

/// Records the scope it was started with, then refuses the run.
struct ScopeRecorder {
    info: moat_engine::AdapterInfo,
    seen: std::sync::Mutex<Option<Vec<String>>>,
}

/// A scope of the caller's own type: the engine knows nothing of it.
#[derive(Debug, Clone, PartialEq, Default)]
struct Granted(Vec<String>);

impl Adapter<Granted> for ScopeRecorder {
    fn info(&self) -> &moat_engine::AdapterInfo {
        &self.info
    }

    fn start<'a>(
        &'a self,
        _prompt: &'a str,
        _options: &'a RunOptions,
        _limits: &'a RunLimits,
        scope: &'a Granted,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        *self.seen.lock().unwrap() = Some(scope.0.clone());
        Box::pin(async {
            Err(StartError::refused(ErrorInfo {
                code: None,
                message: "recorded".into(),
                recoverable: false,
            }))
        })
    }
}

#[tokio::test]
async fn the_engine_hands_the_request_scope_to_the_adapter_untouched() {
    let recorder = Arc::new(ScopeRecorder {
        info: moat_engine::AdapterInfo {
            name: "recorder".into(),
            ..Default::default()
        },
        seen: std::sync::Mutex::new(None),
    });
    let mut registry = Registry::scoped();
    registry.register(recorder.clone()).unwrap();
    let scope = Granted(vec!["KEY".into(), "/data".into()]);
    let events = collect(
        run_agent(
            &registry,
            RunRequest::new("recorder", "x").with_scope(scope.clone()),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(last_done(&events).status, DoneStatus::Error);
    assert_eq!(recorder.seen.lock().unwrap().as_ref(), Some(&scope.0));
}

fn net_denial(host: &str, port: u16) -> moat_engine::Denial {
    moat_engine::Denial {
        request: moat_engine::DeniedRequest::Net {
            scheme: "http".into(),
            host: host.into(),
            port,
        },
        reason: "not granted".into(),
        remedy: Some(moat_engine::Grant::Net {
            host: host.into(),
            port,
        }),
    }
}

/// Names grants the way a command line would, to see the engine use the
/// caller's words.
struct Flags;

impl SettingNames for Flags {
    fn setting(&self, setting: Setting) -> String {
        format!("--{setting:?}")
    }

    fn grant(&self, grant: &moat_engine::Grant) -> String {
        match grant {
            moat_engine::Grant::Net { host, port } => format!("run with --allow-net={host}:{port}"),
            other => format!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn denials_are_reported_as_recoverable_capability_errors_before_the_event() {
    let denial = |host: &str, port| Step::Deny(net_denial(host, port));
    let (registry, _) = scripted(vec![
        denial("a.example", 80),
        denial("b.example", 443),
        Step::text("after the refusals"),
        denial("c.example", 80),
        Step::done(DoneStatus::Success),
    ]);
    let events = run(&registry, request().with_names(Arc::new(Flags))).await;
    assert_eq!(kinds(&events), ["error", "error", "text", "error", "done"]);
    for (index, target) in [
        (0, "a.example:80"),
        (1, "b.example:443"),
        (3, "c.example:80"),
    ] {
        let error = error_at(&events, index);
        assert_eq!(error.code.as_deref(), Some(codes::CAPABILITY_DENIED));
        assert!(error.recoverable);
        assert!(error.message.contains(target), "{}", error.message);
        assert!(
            error.message.contains(&format!("--allow-net={target}")),
            "{}",
            error.message
        );
    }
    assert_eq!(last_done(&events).status, DoneStatus::Success);
}

#[tokio::test]
async fn a_denial_before_a_hang_is_still_reported_when_the_run_times_out() {
    let (registry, _) = scripted(vec![Step::Deny(net_denial("a.example", 80)), Step::Hang]);
    let events = run(
        &registry,
        with_timeout(request(), Duration::from_millis(50)),
    )
    .await;
    assert_eq!(kinds(&events), ["error", "error", "done"]);
    assert_eq!(
        error_at(&events, 0).code.as_deref(),
        Some(codes::CAPABILITY_DENIED)
    );
    assert_eq!(error_at(&events, 1).code.as_deref(), Some(codes::TIMEOUT));
}
