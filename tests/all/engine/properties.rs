//! Property tests: arbitrary adapter behaviour (any events, several dones,
//! failures, exhaustion, hangs, spins, forbidden tools) under arbitrary
//! aborts, for one run and for several in parallel.
//!
//! Whatever happens, every run (every task) has exactly one `done`, it is
//! the last of its events, an `error` comes right before every `done` error
//! the engine made, and the run ends within its time limit plus its drain
//! (plus slack for a loaded machine). Limits and drains are a few
//! milliseconds so the cases run quickly.

use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tokio_util::sync::CancellationToken;

use moat_engine::RunRequest;
use moat_engine::{AdapterEventKind, DoneInfo, RunLimits, RunOptions, SessionFailure};
use moat_engine::{AgentEvent, DoneStatus, ToolStatus};
use moat_engine::{ParallelTask, run_parallel};
use moat_testkit::engine::{collect_parallel, of_task, registry, single};
use moat_testkit::native::{ScriptedAdapter, Step, done_info};

/// What a loaded machine may add to a run's own bounds before we call it
/// hung.
const SLACK: Duration = Duration::from_secs(2);

/// Marks the dones adapters emit, to tell them from synthesized ones.
const ADAPTER_DONE: &str = "from the adapter";

/// One thing a scripted adapter does.
#[derive(Debug, Clone)]
enum Act {
    Text,
    Delta,
    /// A `tool_use` of the permitted tool, with one of a few ids.
    Tool(u8),
    /// A `tool_use` outside the run's allowed tools.
    ForbiddenTool,
    ToolResult(u8),
    Init,
    Invalid,
    Done(DoneStatus),
    Fail,
    End,
    Hang,
    SpinMs(u8),
    SleepMs(u8),
    WaitForInterrupt,
    /// Fires the abort token the task holds, from inside the adapter.
    Abort,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Text),
        2 => Just(Act::Delta),
        2 => (0u8..3).prop_map(Act::Tool),
        1 => Just(Act::ForbiddenTool),
        1 => (0u8..4).prop_map(Act::ToolResult),
        1 => Just(Act::Init),
        1 => Just(Act::Invalid),
        2 => prop_oneof![
            Just(DoneStatus::Success),
            Just(DoneStatus::Error),
            Just(DoneStatus::Interrupted),
        ]
        .prop_map(Act::Done),
        1 => Just(Act::Fail),
        1 => Just(Act::End),
        1 => Just(Act::Hang),
        1 => (0u8..4).prop_map(Act::SpinMs),
        1 => (0u8..4).prop_map(Act::SleepMs),
        1 => Just(Act::WaitForInterrupt),
        1 => Just(Act::Abort),
    ]
}

/// A run's behaviour and bounds.
#[derive(Debug, Clone)]
struct Plan {
    script: Vec<Act>,
    timeout_ms: u64,
    drain_ms: u64,
    /// Whether the session hands its events over as held ones, as a
    /// session that pulls batches does (the engine's fast path).
    held: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (vec(act(), 0..8), 5u64..25, 0u64..6, any::<bool>()).prop_map(
        |(script, timeout_ms, drain_ms, held)| Plan {
            script,
            timeout_ms,
            drain_ms,
            held,
        },
    )
}

impl Plan {
    fn steps(&self, abort: &CancellationToken) -> Vec<Step> {
        self.script
            .iter()
            .map(|act| match act {
                Act::Text => Step::text("t"),
                Act::Delta => Step::delta("d"),
                Act::Tool(id) => Step::tool_use(&format!("t{id}")),
                Act::ForbiddenTool => Step::emit(AdapterEventKind::ToolUse {
                    tool_name: "bash".into(),
                    tool_use_id: "forbidden".into(),
                    input: "{}".into(),
                    description: None,
                }),
                Act::ToolResult(id) => Step::emit(AdapterEventKind::ToolResult {
                    tool_use_id: format!("t{id}"),
                    tool_name: "read".into(),
                    status: ToolStatus::Success,
                    output: "null".into(),
                    duration_ms: None,
                }),
                Act::Init => Step::emit(AdapterEventKind::Init {
                    model: None,
                    cwd: None,
                    tools: vec![],
                    capabilities: None,
                }),
                Act::Invalid => Step::emit(AdapterEventKind::Extension {
                    name: "no-colon".into(),
                    payload: "{}".into(),
                }),
                Act::Done(status) => Step::emit(AdapterEventKind::Done(DoneInfo {
                    result: Some(ADAPTER_DONE.into()),
                    ..done_info(*status)
                })),
                Act::Fail => Step::Fail(SessionFailure::Crashed {
                    message: "crash".into(),
                }),
                Act::End => Step::End,
                Act::Hang => Step::Hang,
                Act::SpinMs(ms) => Step::Spin(Duration::from_millis(u64::from(*ms))),
                Act::SleepMs(ms) => Step::Sleep(Duration::from_millis(u64::from(*ms))),
                Act::WaitForInterrupt => Step::WaitForInterrupt,
                Act::Abort => {
                    let abort = abort.clone();
                    Step::call(move || abort.cancel())
                }
            })
            .collect()
    }

    fn adapter(&self, name: &str, abort: &CancellationToken) -> ScriptedAdapter {
        ScriptedAdapter::new(name, self.steps(abort)).holding_events(self.held)
    }

    fn request(&self, agent: &str) -> RunRequest {
        RunRequest::new(agent, "prompt")
            .with_options(RunOptions {
                allowed_tools: Some(vec!["read".into()]),
                ..RunOptions::default()
            })
            .with_limits(RunLimits {
                timeout: Some(Duration::from_millis(self.timeout_ms)),
                ..RunLimits::default()
            })
            .with_drain(Duration::from_millis(self.drain_ms))
    }

    /// How long the run may take at most: its limit, then its drain.
    fn bound(&self) -> Duration {
        Duration::from_millis(self.timeout_ms + self.drain_ms)
    }
}

/// The invariants of one run's events.
fn check_run(events: &[AgentEvent]) -> Result<(), TestCaseError> {
    let kinds: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    let dones = events.iter().filter(|e| e.is_done()).count();
    prop_assert_eq!(dones, 1, "exactly one done: {:?}", kinds);
    prop_assert!(
        events.last().is_some_and(AgentEvent::is_done),
        "the done is last: {:?}",
        kinds
    );
    let done = events.last().and_then(AgentEvent::as_done).unwrap();
    let synthesized = done.result.as_deref() != Some(ADAPTER_DONE);
    if synthesized && done.status == DoneStatus::Error {
        let before = events.len().checked_sub(2).map(|i| &events[i]);
        prop_assert!(
            before
                .and_then(AgentEvent::as_error)
                .is_some_and(|e| !e.recoverable),
            "an error comes before a synthesized done error: {:?}",
            kinds
        );
    }
    // Nothing the policy forbids reaches the consumer.
    prop_assert!(
        !events.iter().any(|e| match &e.payload {
            moat_engine::EventPayload::ToolUse(t) => t.tool_name != "read",
            _ => false,
        }),
        "a forbidden tool use got through: {:?}",
        kinds
    );
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Fires `token` now (`Some(0)`: before anything starts), after a delay,
/// or never.
fn schedule_abort(token: &CancellationToken, at_ms: Option<u64>) {
    match at_ms {
        None => {}
        Some(0) => token.cancel(),
        Some(ms) => moat_testkit::engine::cancel_after(token, Duration::from_millis(ms)),
    }
}

#[test]
fn a_single_run_always_ends_with_exactly_one_done() {
    let runtime = runtime();
    let config = ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    };
    proptest!(config, |(plan in plan(), abort_at in proptest::option::of(0u64..20))| {
        let token = CancellationToken::new();
        let (registry, _) = registry(vec![plan.adapter("p", &token)]);
        let request = plan.request("p").with_abort(token.clone());
        let events = runtime.block_on(async {
            schedule_abort(&token, abort_at);
            tokio::time::timeout(plan.bound() + SLACK, single(&registry, request)).await
        });
        prop_assert!(events.is_ok(), "the run outlived its limit and drain");
        check_run(&events.unwrap())?;
    });
}

/// Which abort token a task holds.
#[derive(Debug, Clone, Copy)]
enum Holds {
    /// None of its own: only the whole-run token reaches it.
    Nothing,
    Own(Option<u64>),
    Shared,
}

fn holds() -> impl Strategy<Value = Holds> {
    prop_oneof![
        Just(Holds::Nothing),
        proptest::option::of(0u64..20).prop_map(Holds::Own),
        Just(Holds::Shared),
    ]
}

#[test]
fn every_parallel_task_always_ends_with_exactly_one_done() {
    let runtime = runtime();
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        tasks in vec((plan(), holds()), 1..4),
        whole_at in proptest::option::of(0u64..20),
        shared_at in proptest::option::of(0u64..20),
    )| {
        let whole = CancellationToken::new();
        let shared = CancellationToken::new();
        let mut adapters = Vec::new();
        let mut parallel = Vec::new();
        let mut own_aborts = Vec::new();
        for (index, (plan, holds)) in tasks.iter().enumerate() {
            let name = format!("a{index}");
            let token = match holds {
                Holds::Nothing => None,
                Holds::Own(at) => {
                    let own = CancellationToken::new();
                    own_aborts.push((own.clone(), *at));
                    Some(own)
                }
                Holds::Shared => Some(shared.clone()),
            };
            // An in-script abort fires the token the task holds, or the
            // whole run's when it holds none.
            let fires = token.clone().unwrap_or_else(|| whole.clone());
            adapters.push(plan.adapter(&name, &fires));
            let mut request = plan.request(&name);
            request.abort = token;
            parallel.push(ParallelTask::new(request).with_role(format!("r{index}")));
        }
        let (registry, _) = registry(adapters);
        let bound = tasks.iter().map(|(plan, _)| plan.bound()).max().unwrap_or_default();
        let events = runtime.block_on(async {
            schedule_abort(&whole, whole_at);
            schedule_abort(&shared, shared_at);
            for (own, at) in &own_aborts {
                schedule_abort(own, *at);
            }
            let run = run_parallel(&registry, parallel, Some(whole.clone())).unwrap();
            tokio::time::timeout(bound + SLACK, collect_parallel(run)).await
        });
        prop_assert!(events.is_ok(), "a task outlived its limit and drain");
        let events = events.unwrap();
        prop_assert!(events.iter().all(|e| e.task < tasks.len()));
        for index in 0..tasks.len() {
            let mine = of_task(&events, index);
            check_run(&mine)?;
            let role = format!("r{index}");
            let agent = format!("a{index}");
            prop_assert!(mine.iter().all(|e| e.role.as_deref() == Some(role.as_str()) && e.agent == agent));
        }
    });
}
