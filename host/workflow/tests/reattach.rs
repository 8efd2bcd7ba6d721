//! Re-attach through [`MockRunner`]: an attempt's run is written in the
//! state before it starts; after a crash, a resume follows that run (the
//! mock's runs "going on elsewhere", as a cluster's do) instead of
//! starting the task again — with the hooks, retries and loops an attempt
//! has — and runs the attempt afresh when the run cannot be found.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_workflow::hooks::{Hook, HookEvent, HookPoint, Hooks};
use moat_workflow::{
    Engine, MockRunner, Scripted, Settings, Start, State, Summary, TaskStatus, WorkflowEvent,
    WorkflowStatus,
};
use tokio_util::sync::CancellationToken;

const CHAIN: &str = r#"
name = "chain"

[[task]]
id = "A"
adapter = "echo"
prompt = "first"

[[task]]
id = "B"
adapter = "echo"
prompt = "second"
depends_on = ["A"]
retries = 1
backoff = "10ms"

[[task]]
id = "C"
adapter = "echo"
prompt = "third"
depends_on = ["B"]
"#;

const LOOP: &str = r#"
name = "looped"

[[task]]
id = "L"
adapter = "echo"
prompt = "again"
[task.loop]
max_iterations = 3
until = { command = "test \"$MOAT_ITERATION\" = 3" }
"#;

struct Project {
    dir: tempfile::TempDir,
    name: &'static str,
}

impl Project {
    fn new(name: &'static str, workflow: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("flow.toml"), workflow).expect("write the workflow");
        Self { dir, name }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn state(&self) -> State {
        let path = self
            .path()
            .join(format!(".moat/workflows/{}/state.json", self.name));
        moat_workflow::state::read(&path)
            .expect("a readable state")
            .expect("a state")
    }

    fn runner(&self) -> Arc<MockRunner> {
        Arc::new(MockRunner::new(self.path(), Duration::from_millis(10)).with_runs())
    }

    fn engine(&self, runner: Arc<MockRunner>, hooks: Hooks) -> Engine {
        let workflow =
            moat_workflow::load(&self.path().join("flow.toml")).unwrap_or_else(|e| panic!("{e}"));
        Engine::new(workflow, runner, hooks)
    }

    /// Runs the workflow until `task` hangs in its run, then "crashes":
    /// the engine is dropped, nothing more written. The run the state
    /// names for `task`.
    async fn crash_in(&self, task: &str, before: &[Scripted]) -> String {
        let runner = self.runner();
        runner.script(task, before.iter().cloned().chain([Scripted::Hang]));
        let (settings, _, cancel) = settings();
        let engine = self.engine(runner.clone(), Hooks::new());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut run = Box::pin(engine.run(Start::Fresh { discard: false }, settings));
        // Until the state names the hung attempt's run.
        let id = loop {
            tokio::select! {
                ended = &mut run => panic!("the workflow ended: {:?}", ended.map(|s| s.status)),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            // The hung attempt's: not an earlier one's, ended already,
            // whose loop check is still running.
            let ended: Vec<Option<String>> = runner
                .calls()
                .into_iter()
                .filter(|call| call.task == task)
                .map(|call| call.run)
                .collect();
            if let Some(state) = self.try_state()
                && state.tasks[task].status == TaskStatus::Running
                && let Some(run) = &state.tasks[task].run
                && ended.len() == before.len()
                && !ended.contains(&Some(run.clone()))
            {
                break run.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{task}'s run never showed in the state"
            );
        };
        drop(run);
        // The hung attempt the dropped engine left behind (a crashed
        // process's would be gone with it).
        cancel.cancel();
        id
    }

    fn try_state(&self) -> Option<State> {
        let path = self
            .path()
            .join(format!(".moat/workflows/{}/state.json", self.name));
        moat_workflow::state::read(&path).ok().flatten()
    }

    async fn resume(&self, runner: Arc<MockRunner>, hooks: Hooks) -> (Summary, Vec<WorkflowEvent>) {
        let (settings, events, _) = settings();
        let summary = tokio::time::timeout(
            Duration::from_secs(30),
            self.engine(runner, hooks)
                .run(Start::Resume { force: false }, settings),
        )
        .await
        .expect("the resume ends")
        .expect("the resume runs");
        let events = events.lock().unwrap().clone();
        (summary, events)
    }
}

type Log<T> = Arc<Mutex<Vec<T>>>;

fn settings() -> (Settings, Log<WorkflowEvent>, CancellationToken) {
    let events: Log<WorkflowEvent> = Arc::default();
    let emitted = events.clone();
    let cancel = CancellationToken::new();
    let settings = Settings {
        max_parallel: 4,
        cancel: cancel.clone(),
        run: None,
        emit: Arc::new(move |event: &WorkflowEvent| emitted.lock().unwrap().push(event.clone())),
    };
    (settings, events, cancel)
}

/// Records `<point> <task>` for every hook event.
struct Recording(Log<String>);

#[async_trait::async_trait]
impl Hook for Recording {
    async fn call(&self, event: &HookEvent) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {}", event.hook.as_str(), event.task));
        Ok(())
    }

    fn describe(&self) -> String {
        "recording".into()
    }
}

fn recording_hooks() -> (Hooks, Log<String>) {
    let log: Log<String> = Arc::default();
    let mut hooks = Hooks::new();
    for point in [
        HookPoint::PreTask,
        HookPoint::PostTask,
        HookPoint::OnFailure,
    ] {
        hooks.register(point, "*", Arc::new(Recording(log.clone())));
    }
    (hooks, log)
}

fn reattached(events: &[WorkflowEvent]) -> Vec<(String, String, u32)> {
    events
        .iter()
        .filter_map(|event| match event {
            WorkflowEvent::TaskReattached {
                task,
                run,
                iteration,
                ..
            } => Some((task.clone(), run.clone(), *iteration)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_run_left_in_flight_is_re_attached_and_its_task_not_started_again() {
    let project = Project::new("chain", CHAIN);
    let run = project.crash_in("B", &[]).await;
    // Written before the run started, not yet among the ended attempts'.
    let crashed = project.state();
    assert_eq!(crashed.tasks["A"].status, TaskStatus::Completed);
    assert_eq!(crashed.tasks["B"].status, TaskStatus::Running);
    assert!(crashed.tasks["B"].runs.is_empty());

    let runner = project.runner();
    runner.in_flight(&run, Scripted::Succeed);
    let (hooks, log) = recording_hooks();
    let (summary, events) = project.resume(runner.clone(), hooks).await;
    assert_eq!(summary.status, WorkflowStatus::Completed);

    let calls = runner.calls();
    let b: Vec<_> = calls.iter().filter(|c| c.task == "B").collect();
    assert_eq!(b.len(), 1, "B ran once: {calls:#?}");
    assert!(b[0].reattached);
    assert_eq!(b[0].run.as_deref(), Some(run.as_str()));
    assert_eq!(reattached(&events), [("B".to_owned(), run.clone(), 1)]);
    // Its pre-task hooks ran before its run started, in the first moat;
    // its post-task hooks run once the run it follows completed, before
    // C starts.
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        ["post-task B", "pre-task C", "post-task C"],
        "{events:#?}"
    );
    let state = project.state();
    assert_eq!(state.tasks["B"].status, TaskStatus::Completed);
    assert_eq!(state.tasks["B"].runs, [run]);
    assert!(state.tasks.values().all(|t| t.run.is_none()));
    assert_eq!(
        state.tasks["B"].handover.as_ref().unwrap()["task"],
        serde_json::json!("B")
    );
}

#[tokio::test]
async fn a_run_that_cannot_be_found_is_run_again_from_its_pre_task_hooks() {
    let project = Project::new("chain", CHAIN);
    let lost = project.crash_in("B", &[]).await;
    // The mock knows no run going on: as a run never submitted, or one
    // that died with its moat on this machine.
    let runner = project.runner();
    let (hooks, log) = recording_hooks();
    let (summary, events) = project.resume(runner.clone(), hooks).await;
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert!(reattached(&events).is_empty());
    let calls = runner.calls();
    let b: Vec<_> = calls.iter().filter(|c| c.task == "B").collect();
    assert_eq!(b.len(), 1);
    assert!(!b[0].reattached);
    assert_ne!(b[0].run.as_deref(), Some(lost.as_str()));
    assert!(b[0].prompt.contains("second"));
    assert_eq!(log.lock().unwrap()[..2], ["pre-task B", "post-task B"]);
    assert_eq!(project.state().tasks["B"].runs, [b[0].run.clone().unwrap()]);
}

#[tokio::test]
async fn a_re_attached_attempt_that_fails_is_retried_with_a_fresh_run() {
    let project = Project::new("chain", CHAIN);
    let run = project.crash_in("B", &[]).await;
    let runner = project.runner();
    runner.in_flight(&run, Scripted::Fail("the agent gave up".into()));
    let (summary, events) = project.resume(runner.clone(), Hooks::new()).await;
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert!(events.iter().any(|e| matches!(
        e,
        WorkflowEvent::TaskRetrying { task, attempt: 1, reason, .. }
            if task == "B" && reason.contains("gave up")
    )));
    let b: Vec<_> = runner
        .calls()
        .into_iter()
        .filter(|c| c.task == "B")
        .collect();
    assert_eq!(b.len(), 2);
    assert!(b[0].reattached && !b[1].reattached);
    assert_eq!(b[1].attempt, 2);
    let fresh = b[1].run.clone().unwrap();
    assert_eq!(project.state().tasks["B"].runs, [run, fresh]);
}

#[tokio::test]
async fn a_loop_re_attached_in_its_second_iteration_goes_on_with_its_third() {
    let project = Project::new("looped", LOOP);
    let run = project.crash_in("L", &[Scripted::Succeed]).await;
    assert_eq!(project.state().tasks["L"].iterations, 1);
    let runner = project.runner();
    runner.in_flight(&run, Scripted::Succeed);
    let (summary, events) = project.resume(runner.clone(), Hooks::new()).await;
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert_eq!(reattached(&events), [("L".to_owned(), run, 2)]);
    let calls: Vec<(u32, bool)> = runner
        .calls()
        .iter()
        .map(|c| (c.iteration, c.reattached))
        .collect();
    assert_eq!(calls, [(2, true), (3, false)]);
    assert!(events.contains(&WorkflowEvent::LoopExit {
        task: "L".into(),
        iterations: 3,
        reason: "condition".into(),
    }));
    assert_eq!(project.state().tasks["L"].iterations, 3);
}

#[tokio::test]
async fn a_cancel_while_re_attached_stops_the_run_and_leaves_the_task_to_resume() {
    let project = Project::new("chain", CHAIN);
    let run = project.crash_in("B", &[]).await;
    let runner = project.runner();
    runner.in_flight(&run, Scripted::Hang);
    let (settings, events, cancel) = settings();
    let engine = project.engine(runner.clone(), Hooks::new());
    let stopper = {
        let events = events.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while reattached(&events.lock().unwrap()).is_empty() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "B was never re-attached"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cancel.cancel();
        })
    };
    let summary = tokio::time::timeout(
        Duration::from_secs(10),
        engine.run(Start::Resume { force: false }, settings),
    )
    .await
    .expect("the cancel ends it")
    .unwrap();
    stopper.await.expect("B was re-attached, then cancelled");
    assert_eq!(summary.status, WorkflowStatus::Cancelled);
    let state = project.state();
    assert_eq!(state.tasks["B"].status, TaskStatus::Pending);
    // The run was stopped (the abort reached it): nothing is in flight.
    assert!(state.tasks["B"].run.is_none());
    assert_eq!(state.tasks["B"].runs, [run]);
}
