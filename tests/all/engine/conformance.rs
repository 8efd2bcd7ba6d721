//! The conformance suite: one test per scenario of the engine contract,
//! run through both entry points.
//!
//! A scenario run "in parallel" is task 0 of a parallel run beside a native
//! echo task, which must come through whole and successful whatever the
//! scenario does: each scenario thereby also checks that tasks are isolated.
//! Scenarios that only make sense for several tasks use `run_parallel`
//! directly.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use moat_engine::Registry;
use moat_engine::{AdapterEventKind, RunLimits, RunOptions, SessionFailure};
use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolStatus};
use moat_engine::{EngineError, RunRequest, run_agent};
use moat_engine::{ParallelTask, run_parallel};
use moat_testkit::engine::{
    assert_one_done_last, cancel_after, collect_parallel, error_at, eventually, kinds, last_done,
    next_tagged, of_task, registry, single,
};
use moat_testkit::native::{NativeEcho, ScriptedAdapter, Step};

#[derive(Debug, Clone, Copy)]
enum Entry {
    Single,
    Parallel,
}

const ENTRIES: [Entry; 2] = [Entry::Single, Entry::Parallel];

/// The events of `request` run through `entry`.
async fn through(entry: Entry, registry: &Registry, request: RunRequest) -> Vec<AgentEvent> {
    match entry {
        Entry::Single => {
            let events = single(registry, request).await;
            assert!(events.iter().all(|e| e.role.is_none()));
            events
        }
        Entry::Parallel => {
            let mut registry = registry.clone();
            registry
                .register(Arc::new(NativeEcho::named("sibling")))
                .unwrap();
            let tasks = vec![
                ParallelTask::new(request).with_role("scenario"),
                ParallelTask::new(RunRequest::new("sibling", "x y")).with_role("sibling"),
            ];
            let events = collect_parallel(run_parallel(&registry, tasks, None).unwrap()).await;
            let sibling = of_task(&events, 1);
            assert_eq!(
                kinds(&sibling),
                ["init", "text_delta", "text_delta", "text", "done"],
                "the sibling task is unaffected"
            );
            assert_eq!(last_done(&sibling).status, DoneStatus::Success);
            assert!(sibling.iter().all(|e| e.role.as_deref() == Some("sibling")));
            let scenario = of_task(&events, 0);
            assert!(
                scenario
                    .iter()
                    .all(|e| e.role.as_deref() == Some("scenario"))
            );
            scenario
        }
    }
}

fn fake(steps: Vec<Step>) -> ScriptedAdapter {
    ScriptedAdapter::new("fake", steps)
}

fn request() -> RunRequest {
    RunRequest::new("fake", "prompt")
}

fn init(model: &str) -> Step {
    Step::emit(AdapterEventKind::Init {
        model: Some(model.into()),
        cwd: None,
        tools: vec![],
        capabilities: None,
    })
}

fn tool_use(name: &str, id: &str) -> Step {
    Step::emit(AdapterEventKind::ToolUse {
        tool_name: name.into(),
        tool_use_id: id.into(),
        input: "{}".into(),
        description: None,
    })
}

fn permission_request(name: &str, id: &str) -> Step {
    Step::emit(AdapterEventKind::PermissionRequest {
        tool_name: name.into(),
        tool_use_id: id.into(),
        input: "{}".into(),
        reason: None,
    })
}

fn tool_result(id: &str) -> Step {
    Step::emit(AdapterEventKind::ToolResult {
        tool_use_id: id.into(),
        tool_name: "read".into(),
        status: ToolStatus::Success,
        output: "null".into(),
        duration_ms: None,
    })
}

fn crash(message: &str) -> Step {
    Step::Fail(SessionFailure::Crashed {
        message: message.into(),
    })
}

fn tools(allowed: Option<&[&str]>, disallowed: &[&str]) -> RunOptions {
    RunOptions {
        allowed_tools: allowed.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
        disallowed_tools: disallowed.iter().map(|s| (*s).to_owned()).collect(),
        ..RunOptions::default()
    }
}

fn resume(token: &str) -> RunOptions {
    RunOptions {
        resume: Some(token.into()),
        ..RunOptions::default()
    }
}

fn text_of(event: &AgentEvent) -> Option<&str> {
    match &event.payload {
        EventPayload::Text(t) => Some(&t.content),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_pass_in_order_with_one_done() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            Step::emit_in("s-1", AdapterEventKind::Text("a".into())),
            Step::delta("b"),
            tool_use("read", "t1"),
            tool_result("t1"),
            Step::done(DoneStatus::Success),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(
            kinds(&events),
            ["text", "text_delta", "tool_use", "tool_result", "done"],
            "{entry:?}"
        );
        assert!(
            events
                .iter()
                .all(|e| e.agent == "fake" && e.session_id == "s-1")
        );
        assert_eq!(last_done(&events).status, DoneStatus::Success);
    }
}

#[test]
fn unknown_adapter_is_an_error_to_the_caller() {
    let (registry, probes) = registry(vec![fake(vec![Step::done(DoneStatus::Success)])]);
    let single = run_agent(&registry, RunRequest::new("nope", "x")).unwrap_err();
    let tasks = vec![
        ParallelTask::new(request()),
        ParallelTask::new(RunRequest::new("nope", "x")),
    ];
    let parallel = run_parallel(&registry, tasks, None).unwrap_err();
    for err in [single, parallel] {
        assert_eq!(
            err,
            EngineError::UnknownAdapter {
                name: "nope".into(),
                known: vec!["fake".into()]
            }
        );
    }
    assert_eq!(probes[0].starts(), 0, "nothing started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throw_mid_stream_yields_error_then_done() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            Step::text("a"),
            crash("boom"),
            Step::text("never"),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(kinds(&events), ["text", "error", "done"], "{entry:?}");
        let error = error_at(&events, 1);
        assert_eq!(error.code.as_deref(), Some("ADAPTER_ERROR"));
        assert_eq!(error.message, "boom");
        assert!(!error.recoverable);
        assert_eq!(last_done(&events).status, DoneStatus::Error);
        assert_eq!(probes[0].nexts(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throw_after_done_is_swallowed() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            Step::done(DoneStatus::Success),
            crash("trap in destructor"),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(kinds(&events), ["done"], "{entry:?}");
        assert_eq!(last_done(&events).status, DoneStatus::Success);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_after_done_are_suppressed() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            Step::text("a"),
            Step::done(DoneStatus::Success),
            Step::text("after"),
            Step::done(DoneStatus::Error),
            tool_use("read", "t-after"),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(kinds(&events), ["text", "done"], "{entry:?}");
        assert_eq!(probes[0].nexts(), 2, "not read after its done");
        eventually("the session to be closed", || probes[0].closes() == 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_while_stalled_ends_interrupted_with_the_inbound_resume() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![Step::text("a"), Step::Hang])]);
        let token = CancellationToken::new();
        let request = request()
            .with_options(resume("inbound"))
            .with_abort(token.clone())
            .with_drain(Duration::from_millis(30));
        cancel_after(&token, Duration::from_millis(30));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["text", "done"], "{entry:?}");
        let done = last_done(&events);
        assert_eq!(done.status, DoneStatus::Interrupted);
        assert_eq!(done.resume_token.as_deref(), Some("inbound"));
        assert!(probes[0].kills() >= 1, "a stalled adapter is killed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_drops_a_flushed_delta_and_keeps_the_adapters_done() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            Step::text("a"),
            Step::WaitForInterrupt,
            Step::delta("flushed"),
            Step::done_with_resume(DoneStatus::Interrupted, "adapter-token"),
        ])]);
        let token = CancellationToken::new();
        let request = request()
            .with_options(resume("inbound"))
            .with_abort(token.clone());
        cancel_after(&token, Duration::from_millis(20));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["text", "done"], "{entry:?}");
        let done = last_done(&events);
        assert_eq!(done.status, DoneStatus::Interrupted);
        assert_eq!(done.resume_token.as_deref(), Some("adapter-token"));
        assert_eq!(probes[0].kills(), 0, "a cooperative adapter is not killed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_before_start_never_starts_the_adapter() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![Step::done(DoneStatus::Success)])]);
        let token = CancellationToken::new();
        token.cancel();
        let request = request().with_options(resume("r-0")).with_abort(token);
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["done"], "{entry:?}");
        assert_eq!(last_done(&events).status, DoneStatus::Interrupted);
        assert_eq!(last_done(&events).resume_token.as_deref(), Some("r-0"));
        assert_eq!(probes[0].starts(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_done_yields_error_then_done() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![Step::text("a"), Step::End])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(kinds(&events), ["text", "error", "done"], "{entry:?}");
        assert_eq!(error_at(&events, 1).code.as_deref(), Some("MISSING_DONE"));
        assert_eq!(last_done(&events).status, DoneStatus::Error);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthesized_events_keep_the_last_session_id() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            Step::emit_in("s-1", AdapterEventKind::Text("a".into())),
            Step::emit_in("s-2", AdapterEventKind::TextDelta("b".into())),
            Step::text("c"),
            crash("x"),
        ])]);
        let events = through(entry, &registry, request()).await;
        let ids: Vec<&str> = events.iter().map(|e| e.session_id.as_str()).collect();
        assert_eq!(ids, ["s-1", "s-2", "s-2", "s-2", "s-2"], "{entry:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_allowed_set_ends_the_run_fail_closed() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            Step::text("a"),
            tool_use("read", "t1"),
            tool_use("bash", "t2"),
            Step::text("never"),
            Step::done(DoneStatus::Success),
        ])]);
        let request = request().with_options(tools(Some(&["read", "grep"]), &[]));
        let events = through(entry, &registry, request).await;
        assert_eq!(
            kinds(&events),
            ["text", "tool_use", "error", "done"],
            "{entry:?}: the offending tool_use is not passed on"
        );
        let error = error_at(&events, 2);
        assert_eq!(error.code.as_deref(), Some("TOOL_POLICY_VIOLATION"));
        assert!(!error.recoverable);
        assert!(error.message.contains("`bash`"), "{}", error.message);
        assert!(
            error.message.contains("`options.allowed_tools`"),
            "{}",
            error.message
        );
        let done = last_done(&events);
        assert_eq!(done.status, DoneStatus::Error);
        assert_eq!(
            done.usage.tool_uses, 1,
            "only the permitted tool use counts"
        );
        assert_eq!(probes[0].kills(), 1, "the adapter is killed at once");
        assert_eq!(probes[0].nexts(), 3, "and never read again");
        assert_eq!(probes[0].closes(), 0, "killed, not closed gracefully");
        let given = probes[0].last_options().unwrap();
        assert_eq!(
            given.allowed_tools,
            Some(vec!["read".into(), "grep".into()])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_allowed_list_allows_no_tool() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            tool_use("read", "t1"),
            Step::done(DoneStatus::Success),
        ])]);
        let request = request().with_options(tools(Some(&[]), &[]));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["error", "done"], "{entry:?}");
        let error = error_at(&events, 0);
        assert_eq!(error.code.as_deref(), Some("TOOL_POLICY_VIOLATION"));
        assert!(
            error.message.contains("`read`") && error.message.contains("`options.allowed_tools`")
        );
        assert_eq!(
            probes[0].last_options().unwrap().allowed_tools,
            Some(vec![]),
            "the adapter is told: no tools"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallowed_tool_in_a_permission_request_ends_the_run() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            tool_use("read", "t1"),
            permission_request("bash", "p1"),
            Step::done(DoneStatus::Success),
        ])]);
        let request = request().with_options(tools(Some(&["read", "bash"]), &["bash"]));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["tool_use", "error", "done"], "{entry:?}");
        let error = error_at(&events, 1);
        assert_eq!(error.code.as_deref(), Some("TOOL_POLICY_VIOLATION"));
        assert!(
            error.message.contains("`bash`")
                && error.message.contains("`options.disallowed_tools`")
        );
        let given = probes[0].last_options().unwrap();
        assert_eq!(
            given.allowed_tools,
            Some(vec!["read".into()]),
            "allowed minus disallowed"
        );
        assert_eq!(given.disallowed_tools, ["bash"], "passed through");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_tool_use_cannot_slip_a_forbidden_tool_past_the_policy() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            Step::emit(AdapterEventKind::ToolUse {
                tool_name: "bash".into(),
                tool_use_id: "t1".into(),
                input: "not json".into(),
                description: None,
            }),
            Step::done(DoneStatus::Success),
        ])]);
        let request = request().with_options(tools(Some(&["read"]), &[]));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["error", "done"], "{entry:?}");
        assert_eq!(
            error_at(&events, 0).code.as_deref(),
            Some("TOOL_POLICY_VIOLATION")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_patterns_apply_only_when_the_adapter_declares_them() {
    let steps = || {
        vec![
            tool_use("mcp__files", "t1"),
            Step::done(DoneStatus::Success),
        ]
    };
    for entry in ENTRIES {
        let options = tools(Some(&["mcp__*"]), &[]);
        let (patterns, _) = registry(vec![fake(steps()).with_tool_patterns()]);
        let events = through(entry, &patterns, request().with_options(options.clone())).await;
        assert_eq!(kinds(&events), ["tool_use", "done"], "{entry:?}");

        let (exact, _) = registry(vec![fake(steps())]);
        let events = through(entry, &exact, request().with_options(options)).await;
        assert_eq!(
            kinds(&events),
            ["error", "done"],
            "{entry:?}: `*` is literal"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_violation_while_draining_still_fails_closed() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![
            Step::text("a"),
            Step::WaitForInterrupt,
            tool_use("bash", "t1"),
            Step::done_with_resume(DoneStatus::Interrupted, "tok"),
        ])]);
        let token = CancellationToken::new();
        let request = request()
            .with_options(tools(Some(&["read"]), &[]))
            .with_abort(token.clone());
        cancel_after(&token, Duration::from_millis(20));
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["text", "error", "done"], "{entry:?}");
        assert_eq!(
            error_at(&events, 1).code.as_deref(),
            Some("TOOL_POLICY_VIOLATION")
        );
        assert_eq!(last_done(&events).status, DoneStatus::Error);
        assert_eq!(probes[0].kills(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_result_for_an_unknown_id_is_flagged_and_passed_on() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            tool_use("read", "t1"),
            tool_result("t1"),
            tool_result("t-unknown"),
            permission_request("read", "p1"),
            tool_result("p1"),
            Step::done(DoneStatus::Success),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(
            kinds(&events),
            [
                "tool_use",
                "tool_result",
                "error",
                "tool_result",
                "permission_request",
                "tool_result",
                "done"
            ],
            "{entry:?}"
        );
        let error = error_at(&events, 2);
        assert_eq!(error.code.as_deref(), Some("INVALID_EVENT"));
        assert!(error.recoverable);
        assert!(error.message.contains("`t-unknown`"), "{}", error.message);
        assert_eq!(last_done(&events).status, DoneStatus::Success);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_init_is_dropped() {
    for entry in ENTRIES {
        let (registry, _) = registry(vec![fake(vec![
            init("first"),
            Step::text("a"),
            init("second"),
            Step::text("b"),
            Step::done(DoneStatus::Success),
        ])]);
        let events = through(entry, &registry, request()).await;
        assert_eq!(
            kinds(&events),
            ["init", "text", "text", "done"],
            "{entry:?}"
        );
        let EventPayload::Init(first) = &events[0].payload else {
            panic!("an init")
        };
        assert_eq!(first.model.as_deref(), Some("first"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_adapter_times_out() {
    for entry in ENTRIES {
        let (registry, probes) = registry(vec![fake(vec![Step::text("a"), Step::Hang])]);
        let request = request().with_limits(RunLimits {
            timeout: Some(Duration::from_millis(50)),
            ..RunLimits::default()
        });
        let events = through(entry, &registry, request).await;
        assert_eq!(kinds(&events), ["text", "error", "done"], "{entry:?}");
        assert_eq!(error_at(&events, 1).code.as_deref(), Some("TIMEOUT"));
        assert!(probes[0].kills() >= 1);
    }
}

// Scenarios of several tasks.

fn adapter(name: &str, steps: Vec<Step>) -> ScriptedAdapter {
    ScriptedAdapter::new(name, steps)
}

fn task(agent: &str) -> ParallelTask {
    ParallelTask::new(RunRequest::new(agent, "prompt"))
}

#[tokio::test]
async fn an_empty_task_list_yields_nothing() {
    let mut run = run_parallel(&Registry::new(), vec![], None).unwrap();
    assert_eq!(run.task_count(), 0);
    assert!(next_tagged(&mut run).await.is_none());
    assert!(next_tagged(&mut run).await.is_none(), "still nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_aborted_shared_token_never_starts_its_tasks() {
    let (registry, probes) = registry(vec![
        adapter("a", vec![Step::done(DoneStatus::Success)]),
        adapter("b", vec![Step::done(DoneStatus::Success)]),
        adapter("c", vec![Step::text("c"), Step::done(DoneStatus::Success)]),
    ]);
    let shared = CancellationToken::new();
    shared.cancel();
    let tasks = vec![
        ParallelTask::new(RunRequest::new("a", "x").with_abort(shared.clone())),
        ParallelTask::new(RunRequest::new("b", "x").with_abort(shared.clone())),
        task("c"),
    ];
    let events = collect_parallel(run_parallel(&registry, tasks, None).unwrap()).await;
    for index in [0, 1] {
        let mine = of_task(&events, index);
        assert_eq!(kinds(&mine), ["done"]);
        assert_eq!(last_done(&mine).status, DoneStatus::Interrupted);
        assert_eq!(probes[index].starts(), 0);
    }
    assert_eq!(kinds(&of_task(&events, 2)), ["text", "done"]);
    assert_eq!(probes[2].starts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_aborted_whole_run_token_starts_nothing() {
    let (registry, probes) = registry(vec![
        adapter("a", vec![Step::done(DoneStatus::Success)]),
        adapter("b", vec![Step::done(DoneStatus::Success)]),
    ]);
    let abort = CancellationToken::new();
    abort.cancel();
    let run = run_parallel(&registry, vec![task("a"), task("b")], Some(abort)).unwrap();
    let events = collect_parallel(run).await;
    for index in [0, 1] {
        assert_eq!(kinds(&of_task(&events, index)), ["done"]);
        assert_eq!(probes[index].starts(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_run_token_interrupts_every_task() {
    let (registry, _) = registry(vec![
        adapter("stalled", vec![Step::text("a"), Step::Hang]),
        adapter(
            "polite",
            vec![
                Step::WaitForInterrupt,
                Step::done_with_resume(DoneStatus::Interrupted, "polite-token"),
            ],
        ),
    ]);
    let abort = CancellationToken::new();
    let tasks = vec![
        ParallelTask::new(RunRequest::new("stalled", "x").with_drain(Duration::from_millis(20))),
        task("polite"),
    ];
    let run = run_parallel(&registry, tasks, Some(abort.clone())).unwrap();
    cancel_after(&abort, Duration::from_millis(30));
    let events = collect_parallel(run).await;
    let stalled = of_task(&events, 0);
    assert_eq!(kinds(&stalled), ["text", "done"]);
    assert_eq!(last_done(&stalled).status, DoneStatus::Interrupted);
    let polite = of_task(&events, 1);
    assert_eq!(kinds(&polite), ["done"]);
    assert_eq!(
        last_done(&polite).resume_token.as_deref(),
        Some("polite-token")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_task_abort_leaves_the_other_task_succeeding() {
    let (registry, probes) = registry(vec![
        adapter("aborted", vec![Step::Hang]),
        adapter(
            "other",
            vec![
                Step::Sleep(Duration::from_millis(60)),
                Step::text("still here"),
                Step::done(DoneStatus::Success),
            ],
        ),
    ]);
    let own = CancellationToken::new();
    let tasks = vec![
        ParallelTask::new(
            RunRequest::new("aborted", "x")
                .with_abort(own.clone())
                .with_drain(Duration::from_millis(10)),
        ),
        task("other"),
    ];
    let run = run_parallel(&registry, tasks, None).unwrap();
    cancel_after(&own, Duration::from_millis(10));
    let events = collect_parallel(run).await;
    let aborted = of_task(&events, 0);
    assert_eq!(kinds(&aborted), ["done"]);
    assert_eq!(last_done(&aborted).status, DoneStatus::Interrupted);
    let other = of_task(&events, 1);
    assert_eq!(kinds(&other), ["text", "done"]);
    assert_eq!(last_done(&other).status, DoneStatus::Success);
    assert_eq!(probes[1].interrupts(), 0, "the other task was not touched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_token_interrupts_exactly_the_tasks_holding_it() {
    let (registry, _) = registry(vec![
        adapter("a", vec![Step::Hang]),
        adapter("b", vec![Step::Hang]),
        adapter(
            "c",
            vec![
                Step::Sleep(Duration::from_millis(60)),
                Step::done(DoneStatus::Success),
            ],
        ),
    ]);
    let shared = CancellationToken::new();
    let drain = Duration::from_millis(10);
    let tasks = vec![
        ParallelTask::new(
            RunRequest::new("a", "x")
                .with_abort(shared.clone())
                .with_drain(drain),
        ),
        ParallelTask::new(
            RunRequest::new("b", "x")
                .with_abort(shared.clone())
                .with_drain(drain),
        ),
        task("c"),
    ];
    let run = run_parallel(&registry, tasks, None).unwrap();
    cancel_after(&shared, Duration::from_millis(10));
    let events = collect_parallel(run).await;
    for (index, status) in [
        (0, DoneStatus::Interrupted),
        (1, DoneStatus::Interrupted),
        (2, DoneStatus::Success),
    ] {
        let mine = of_task(&events, index);
        assert_eq!(kinds(&mine), ["done"]);
        assert_eq!(last_done(&mine).status, status, "task {index}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_done_in_one_task_leaves_another_succeeding() {
    let (registry, _) = registry(vec![
        adapter("ends", vec![Step::text("a"), Step::End]),
        adapter(
            "fine",
            vec![
                Step::Sleep(Duration::from_millis(20)),
                Step::text("b"),
                Step::done(DoneStatus::Success),
            ],
        ),
    ]);
    let run = run_parallel(&registry, vec![task("ends"), task("fine")], None).unwrap();
    let events = collect_parallel(run).await;
    let ends = of_task(&events, 0);
    assert_eq!(kinds(&ends), ["text", "error", "done"]);
    assert_eq!(error_at(&ends, 1).code.as_deref(), Some("MISSING_DONE"));
    assert_eq!(last_done(&ends).status, DoneStatus::Error);
    let fine = of_task(&events, 1);
    assert_eq!(kinds(&fine), ["text", "done"]);
    assert_eq!(last_done(&fine).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthesized_events_keep_each_tasks_last_session_id() {
    let (registry, _) = registry(vec![
        adapter(
            "a",
            vec![
                Step::emit_in("a-1", AdapterEventKind::Text("x".into())),
                Step::emit_in("a-2", AdapterEventKind::Text("y".into())),
                Step::End,
            ],
        ),
        adapter(
            "b",
            vec![
                Step::emit_in("b-1", AdapterEventKind::Text("x".into())),
                Step::Sleep(Duration::from_millis(10)),
                crash("x"),
            ],
        ),
    ]);
    let run = run_parallel(&registry, vec![task("a"), task("b")], None).unwrap();
    let events = collect_parallel(run).await;
    let ids = |task| -> Vec<String> {
        of_task(&events, task)
            .into_iter()
            .map(|e| e.session_id)
            .collect()
    };
    assert_eq!(ids(0), ["a-1", "a-2", "a-2", "a-2"]);
    assert_eq!(ids(1), ["b-1", "b-1", "b-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_task_does_not_block_another_tasks_events() {
    // The spin holds a worker thread inside its poll and yields only when
    // poked (as a Wasm guest does at an epoch tick); the other task must
    // still run to its end on the other worker.
    let (registry, probes) = registry(vec![
        adapter(
            "spinner",
            vec![
                Step::Spin(Duration::from_secs(30)),
                Step::done(DoneStatus::Success),
            ],
        ),
        adapter(
            "other",
            vec![
                Step::text("a"),
                Step::text("b"),
                Step::done(DoneStatus::Success),
            ],
        ),
    ]);
    let mut run = run_parallel(&registry, vec![task("spinner"), task("other")], None).unwrap();
    let mut other = Vec::new();
    while other.last().is_none_or(|e: &AgentEvent| !e.is_done()) {
        let event = next_tagged(&mut run)
            .await
            .expect("the other task's events");
        assert_eq!(event.task, 1, "the spinner has nothing to say yet");
        other.push(event.event);
    }
    assert_eq!(kinds(&other), ["text", "text", "done"]);
    // Dropping the run stops the spinner, however busy.
    drop(run);
    eventually("the spinner to be killed", || probes[0].kills() >= 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_order_within_each_task_is_preserved() {
    let script = |prefix: &str| -> Vec<Step> {
        let mut steps: Vec<Step> = (0..20)
            .flat_map(|i| {
                [
                    Step::text(&format!("{prefix}{i}")),
                    Step::Sleep(Duration::from_micros(300)),
                ]
            })
            .collect();
        steps.push(Step::done(DoneStatus::Success));
        steps
    };
    let (registry, _) = registry(vec![adapter("a", script("a")), adapter("b", script("b"))]);
    let run = run_parallel(&registry, vec![task("a"), task("b")], None).unwrap();
    let events = collect_parallel(run).await;
    for (index, prefix) in [(0, "a"), (1, "b")] {
        let mine = of_task(&events, index);
        assert_one_done_last(&mine);
        let texts: Vec<&str> = mine.iter().filter_map(text_of).collect();
        let expected: Vec<String> = (0..20).map(|i| format!("{prefix}{i}")).collect();
        assert_eq!(texts, expected);
        assert!(mine.iter().all(|e| e.agent == prefix));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_are_set_on_every_event_of_their_task() {
    let (registry, _) = registry(vec![
        adapter("a", vec![Step::text("x"), crash("boom")]),
        adapter("b", vec![Step::text("y"), Step::done(DoneStatus::Success)]),
    ]);
    let tasks = vec![
        task("a").with_role("writer"),
        task("b").with_role("reviewer"),
        task("b"),
    ];
    let run = run_parallel(&registry, tasks, None).unwrap();
    let events = collect_parallel(run).await;
    for (index, role) in [(0, Some("writer")), (1, Some("reviewer")), (2, None)] {
        let mine = of_task(&events, index);
        assert_one_done_last(&mine);
        assert!(
            mine.iter().all(|e| e.role.as_deref() == role),
            "task {index}: synthesized events carry the role too"
        );
    }
    let json = serde_json::to_value(&of_task(&events, 0)[0]).unwrap();
    assert_eq!(json["role"], "writer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_violation_in_one_task_leaves_the_others_running() {
    let (registry, probes) = registry(vec![
        adapter("bad", vec![tool_use("bash", "t1"), Step::Hang]),
        adapter(
            "good",
            vec![
                Step::Sleep(Duration::from_millis(20)),
                tool_use("bash", "t1"),
                Step::done(DoneStatus::Success),
            ],
        ),
    ]);
    let tasks = vec![
        ParallelTask::new(RunRequest::new("bad", "x").with_options(tools(Some(&["read"]), &[]))),
        task("good"),
    ];
    let events = collect_parallel(run_parallel(&registry, tasks, None).unwrap()).await;
    let bad = of_task(&events, 0);
    assert_eq!(kinds(&bad), ["error", "done"]);
    assert_eq!(
        error_at(&bad, 0).code.as_deref(),
        Some("TOOL_POLICY_VIOLATION")
    );
    assert_eq!(probes[0].kills(), 1);
    let good = of_task(&events, 1);
    assert_eq!(
        kinds(&good),
        ["tool_use", "done"],
        "its own policy allows bash"
    );
}
