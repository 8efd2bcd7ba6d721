//! The workflow engine through [`MockRunner`]: no model call, every
//! dispatch recorded with its prompt and its times.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_workflow::definition::DefinitionError;
use moat_workflow::hooks::{Hook, HookEvent, HookPoint, Hooks};
use moat_workflow::{
    Engine, MockRunner, Scripted, Settings, Start, State, Summary, TaskStatus, WorkflowError,
    WorkflowEvent, WorkflowStatus,
};
use tokio_util::sync::CancellationToken;

/// A project directory with a workflow file.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(workflow: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("flow.toml"), workflow).expect("write the workflow");
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).expect("write a file");
    }

    fn workflow(&self) -> moat_workflow::Workflow {
        moat_workflow::load(&self.path().join("flow.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn state(&self, name: &str) -> State {
        let path = self
            .path()
            .join(format!(".moat/workflows/{name}/state.json"));
        moat_workflow::state::read(&path)
            .expect("a readable state")
            .expect("a state")
    }

    fn runner(&self, delay_ms: u64) -> Arc<MockRunner> {
        Arc::new(MockRunner::new(
            self.path(),
            Duration::from_millis(delay_ms),
        ))
    }
}

/// The events of a run, collected.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<WorkflowEvent>>>);

impl Events {
    fn all(&self) -> Vec<WorkflowEvent> {
        self.0.lock().unwrap().clone()
    }

    fn settings(&self, max_parallel: usize) -> Settings {
        let events = self.0.clone();
        Settings {
            max_parallel,
            cancel: CancellationToken::new(),
            run: None,
            emit: Arc::new(move |event: &WorkflowEvent| events.lock().unwrap().push(event.clone())),
        }
    }
}

const FRESH: Start = Start::Fresh { discard: false };

async fn run(
    project: &Project,
    runner: Arc<MockRunner>,
    hooks: Hooks,
    start: Start,
) -> (Result<Summary, WorkflowError>, Vec<WorkflowEvent>) {
    let events = Events::default();
    let engine = Engine::new(project.workflow(), runner, hooks);
    let result = engine.run(start, events.settings(4)).await;
    (result, events.all())
}

fn file_hooks(project: &Project) -> Hooks {
    let workflow = project.workflow();
    Hooks::from_commands(&workflow.hooks, workflow.project.clone())
}

fn status_of(state: &State, task: &str) -> TaskStatus {
    state.tasks[task].status
}

fn done_events(events: &[WorkflowEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, WorkflowEvent::WorkflowDone { .. }))
        .count()
}

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

[[task]]
id = "C"
adapter = "echo"
prompt = "third"
depends_on = ["B"]
"#;

#[tokio::test]
async fn a_chain_runs_in_order_and_its_state_is_written_in_the_seeds_shape() {
    let project = Project::new(CHAIN);
    let runner = project.runner(20);
    let (result, events) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    let summary = result.expect("the workflow runs");
    assert_eq!(summary.status, WorkflowStatus::Completed);
    let calls = runner.calls();
    let order: Vec<&str> = calls.iter().map(|c| c.task.as_str()).collect();
    assert_eq!(order, ["A", "B", "C"]);
    for pair in calls.windows(2) {
        assert!(
            pair[1].started >= pair[0].ended,
            "{} started before {} ended",
            pair[1].task,
            pair[0].task
        );
    }
    // The mock makes no model call: no attempt has a recorded run.
    assert!(summary.state.tasks.values().all(|t| t.runs.is_empty()));
    let raw: serde_json::Value = serde_json::from_slice(
        &std::fs::read(project.path().join(".moat/workflows/chain/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(raw["version"], "1");
    assert_eq!(raw["workflow"], "chain");
    assert_eq!(
        raw["project"].as_str().map(PathBuf::from),
        Some(project.path().canonicalize().unwrap())
    );
    assert!(raw["started_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    for id in ["A", "B", "C"] {
        let task = &raw["tasks"][id];
        assert_eq!(task["status"], "COMPLETED", "{id}: {task}");
        assert!(task["started_at"].is_string() && task["completed_at"].is_string());
        assert_eq!(task["iterations"], 1);
        assert_eq!(task["handover"]["task"], id);
    }
    assert_eq!(done_events(&events), 1);
}

#[tokio::test]
async fn independent_tasks_run_at_once_after_what_they_depend_on() {
    let project = Project::new(
        r#"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
[[task]]
id = "B"
adapter = "echo"
prompt = "b"
depends_on = ["A"]
[[task]]
id = "C"
adapter = "echo"
prompt = "c"
depends_on = ["A"]
"#,
    );
    let runner = project.runner(300);
    let (result, _) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    let calls = runner.calls();
    let call = |id: &str| calls.iter().find(|c| c.task == id).unwrap().clone();
    let (a, b, c) = (call("A"), call("B"), call("C"));
    assert!(b.started >= a.ended && c.started >= a.ended);
    // Overlapping: each started before the other ended.
    assert!(
        b.started < c.ended && c.started < b.ended,
        "B and C did not overlap: {b:?} {c:?}"
    );
}

#[tokio::test]
async fn the_parallel_limit_holds() {
    let tasks: String = (0..6)
        .map(|i| format!("[[task]]\nid = \"t{i}\"\nadapter = \"echo\"\nprompt = \"p\"\n"))
        .collect();
    let project = Project::new(&tasks);
    let runner = project.runner(100);
    let events = Events::default();
    let engine = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    let summary = engine.run(FRESH, events.settings(2)).await.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Completed);
    let calls = runner.calls();
    for call in &calls {
        let at_once = calls
            .iter()
            .filter(|other| other.started <= call.started && call.started < other.ended)
            .count();
        assert!(at_once <= 2, "{at_once} attempts at once");
    }
}

#[tokio::test]
async fn a_failure_halts_what_depends_on_it_fires_on_failure_and_lets_other_branches_finish() {
    let project = Project::new(
        r#"
name = "halting"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
[[task]]
id = "B"
adapter = "echo"
prompt = "b"
depends_on = ["A"]
[[task]]
id = "C"
adapter = "echo"
prompt = "c"
depends_on = ["B"]
[[task]]
id = "D"
adapter = "echo"
prompt = "d"

[[hook]]
on = "on-failure"
command = "cat > failed-$MOAT_TASK.json"
grants = { write = ["."] }
"#,
    );
    let runner = project.runner(10);
    runner.script("A", [Scripted::Fail("the model said no".into())]);
    let (result, events) = run(&project, runner.clone(), file_hooks(&project), FRESH).await;
    let summary = result.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Failed);
    let state = project.state("halting");
    assert_eq!(status_of(&state, "A"), TaskStatus::Failed);
    assert!(
        state.tasks["A"]
            .error
            .as_deref()
            .unwrap()
            .contains("the model said no")
    );
    for blocked in ["B", "C"] {
        assert_eq!(status_of(&state, blocked), TaskStatus::Pending);
        assert_eq!(state.tasks[blocked].blocked_by.as_deref(), Some("A"));
        assert!(events.contains(&WorkflowEvent::TaskBlocked {
            task: blocked.into(),
            by: "A".into()
        }));
    }
    assert_eq!(status_of(&state, "D"), TaskStatus::Completed);
    let called: Vec<String> = runner.calls().into_iter().map(|c| c.task).collect();
    assert!(!called.contains(&"B".into()) && !called.contains(&"C".into()));
    let hook: serde_json::Value =
        serde_json::from_slice(&std::fs::read(project.path().join("failed-A.json")).unwrap())
            .unwrap();
    assert_eq!(hook["hook"], "on-failure");
    assert_eq!(hook["task"], "A");
    assert!(
        hook["reason"]
            .as_str()
            .unwrap()
            .contains("the model said no")
    );
    assert!(!project.path().join("failed-D.json").exists());
    assert_eq!(done_events(&events), 1);
}

/// Records the hook events it is given, in order, into a shared log.
struct Recording {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Hook for Recording {
    async fn call(&self, event: &HookEvent) -> Result<(), String> {
        self.log.lock().unwrap().push(format!(
            "{} {} {}",
            self.name,
            event.hook.as_str(),
            event.task
        ));
        Ok(())
    }

    fn describe(&self) -> String {
        self.name.into()
    }
}

#[tokio::test]
async fn hooks_run_before_and_after_tasks_in_registration_order_and_a_pre_task_hook_blocks() {
    let project = Project::new(
        r#"
name = "hooked"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
[[task]]
id = "B"
adapter = "echo"
prompt = "b"
depends_on = ["A"]
retries = 3

[[hook]]
on = "pre-task"
command = "echo \"pre $MOAT_TASK\" >> hooks.log"
grants = { write = ["."] }
[[hook]]
on = "post-task"
task = "A"
command = ["sh", "-c", "cat > post-$MOAT_TASK.json; echo \"post $MOAT_TASK\" >> hooks.log"]
grants = { write = ["."] }
[[hook]]
on = "pre-task"
task = "B"
command = "echo 'B may not run today' >&2; exit 3"
"#,
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut hooks = file_hooks(&project);
    // A callback after the commands: it runs after them.
    hooks.register(
        HookPoint::PostTask,
        "*",
        Arc::new(Recording {
            name: "gate",
            log: log.clone(),
        }),
    );
    let runner = project.runner(10);
    let (result, events) = run(&project, runner.clone(), hooks, FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    let text = std::fs::read_to_string(project.path().join("hooks.log")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "pre A");
    assert_eq!(lines[1], "post A");
    let post: serde_json::Value =
        serde_json::from_slice(&std::fs::read(project.path().join("post-A.json")).unwrap())
            .unwrap();
    assert_eq!(post["hook"], "post-task");
    assert_eq!(post["handover"]["task"], "A");
    assert_eq!(lines[2], "pre B");
    assert_eq!(lines.len(), 3);
    assert_eq!(*log.lock().unwrap(), ["gate post-task A"]);
    let state = project.state("hooked");
    assert_eq!(status_of(&state, "B"), TaskStatus::Failed);
    assert!(
        state.tasks["B"]
            .error
            .as_deref()
            .unwrap()
            .contains("B may not run today"),
        "{:?}",
        state.tasks["B"].error
    );
    // Blocked by its hook: never dispatched, not retried.
    assert!(runner.calls().iter().all(|c| c.task != "B"));
    assert!(events.iter().any(|e| matches!(e, WorkflowEvent::HookFailed { task, hook, .. } if task == "B" && hook == "pre-task")));
}

#[tokio::test]
async fn a_failing_post_task_hook_fails_the_attempt_and_the_retry_runs() {
    let project = Project::new(
        r#"
name = "gated"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
retries = 1
backoff = "10ms"
[[hook]]
on = "post-task"
command = "test \"$MOAT_ATTEMPT\" -ge 2 || { echo 'review: not yet' >&2; exit 1; }"
"#,
    );
    let runner = project.runner(5);
    let (result, events) = run(&project, runner.clone(), file_hooks(&project), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    assert_eq!(runner.calls().len(), 2);
    assert!(events.iter().any(|e| matches!(e, WorkflowEvent::TaskRetrying { reason, .. } if reason.contains("review: not yet"))));
}

#[tokio::test]
async fn the_context_has_the_constitution_then_handovers_then_inputs_then_the_task() {
    let project = Project::new(
        r#"
name = "context"
constitution = ["constitution.md", "style.md"]
[[task]]
id = "A"
adapter = "echo"
prompt = "write the spec"
[[task]]
id = "B"
adapter = "echo"
prompt = "build {{task}} of {{workflow}}, attempt {{attempt}}"
depends_on = ["A"]
inputs = ["notes.txt"]
outputs = ["out/b.txt"]
"#,
    );
    project.write("constitution.md", "RULE ONE: be exact.");
    project.write("style.md", "RULE TWO: be brief.");
    project.write("notes.txt", "the input notes");
    let runner = project.runner(5);
    let (result, _) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    let calls = runner.calls();
    let prompt = &calls.iter().find(|c| c.task == "B").unwrap().prompt;
    let at = |needle: &str| {
        prompt
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} is not in the prompt:\n{prompt}"))
    };
    let order = [
        at("RULE ONE"),
        at("RULE TWO"),
        at("## A"),
        at("\"task\": \"A\""),
        at("## notes.txt"),
        at("the input notes"),
        at("build B of context, attempt 1"),
        at("- out/b.txt"),
        at("```handover"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {order:?}\n{prompt}"
    );
    assert!(!prompt.contains("truncated"));
    // A has no dependencies or inputs: constitution and task only.
    let a = &calls.iter().find(|c| c.task == "A").unwrap().prompt;
    assert!(a.contains("RULE ONE") && !a.contains("# Handover") && !a.contains("# Input files"));
    assert!(project.path().join("out/b.txt").is_file());
}

#[tokio::test]
async fn context_over_the_budget_is_cut_visibly() {
    let project = Project::new(
        r#"
name = "budget"
context_budget = "2KiB"
[[task]]
id = "A"
adapter = "echo"
prompt = "summarise"
inputs = ["big.txt", "small.txt"]
"#,
    );
    project.write("big.txt", &"x".repeat(10_000));
    project.write("small.txt", "small");
    let runner = project.runner(1);
    let (result, events) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    let prompt = runner.calls()[0].prompt.clone();
    assert!(
        prompt.contains("[moat: truncated input big.txt: showed "),
        "{prompt}"
    );
    assert!(prompt.contains("of 10000 bytes"));
    assert!(prompt.contains("[moat: truncated input small.txt: showed 0 of 5 bytes"));
    assert!(prompt.contains("summarise"));
    let truncated: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WorkflowEvent::ContextTruncated { piece, total, .. } => Some((piece.clone(), *total)),
            _ => None,
        })
        .collect();
    assert_eq!(
        truncated,
        [
            ("input big.txt".to_string(), 10_000),
            ("input small.txt".to_string(), 5)
        ]
    );
    let marker_free: usize = prompt
        .lines()
        .filter(|l| !l.starts_with("[moat: truncated"))
        .map(|l| l.len() + 1)
        .sum();
    // Every byte but the markers' lines (and the newline before each) is
    // within the budget.
    assert!(
        marker_free <= 2048 + truncated.len(),
        "{marker_free} bytes outside the markers"
    );
}

#[tokio::test]
async fn failed_attempts_are_retried_with_a_doubling_backoff_then_the_task_fails() {
    let project = Project::new(
        r#"
name = "retrying"
[[task]]
id = "flaky"
adapter = "echo"
prompt = "p"
retries = 2
backoff = "20ms"
[[task]]
id = "hopeless"
adapter = "echo"
prompt = "p"
retries = 1
backoff = "10ms"
"#,
    );
    let runner = project.runner(1);
    runner.script(
        "flaky",
        [Scripted::Fail("one".into()), Scripted::Fail("two".into())],
    );
    runner.script(
        "hopeless",
        [
            Scripted::Fail("x".into()),
            Scripted::Fail("y".into()),
            Scripted::Succeed,
        ],
    );
    let (result, events) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    let state = project.state("retrying");
    assert_eq!(status_of(&state, "flaky"), TaskStatus::Completed);
    assert_eq!(status_of(&state, "hopeless"), TaskStatus::Failed);
    assert_eq!(state.tasks["hopeless"].error.as_deref(), Some("y"));
    let attempts = |id: &str| {
        runner
            .calls()
            .iter()
            .filter(|c| c.task == id)
            .map(|c| c.attempt)
            .collect::<Vec<_>>()
    };
    assert_eq!(attempts("flaky"), [1, 2, 3]);
    assert_eq!(attempts("hopeless"), [1, 2]);
    let backoffs: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            WorkflowEvent::TaskRetrying {
                task, backoff_ms, ..
            } if task == "flaky" => Some(*backoff_ms),
            _ => None,
        })
        .collect();
    assert_eq!(backoffs, [20, 40]);
}

#[tokio::test]
async fn a_loop_repeats_until_its_handover_says_so_and_sees_its_previous_iteration() {
    let project = Project::new(
        r#"
name = "review"
[[task]]
id = "review"
adapter = "echo"
prompt = "review, round {{iteration}}"
[task.loop]
max_iterations = 5
until = { handover = "approved" }

[[hook]]
on = "on-loop-exit"
command = "cat > loop-exit.json"
grants = { write = ["."] }
"#,
    );
    let runner = project.runner(1);
    let answer = |approved: bool, round: u32| {
        Scripted::Answer(format!(
            "round {round}\n```handover\n{{\"approved\": {approved}, \"round\": {round}}}\n```"
        ))
    };
    runner.script(
        "review",
        [answer(false, 1), answer(false, 2), answer(true, 3)],
    );
    let (result, events) = run(&project, runner.clone(), file_hooks(&project), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    let calls = runner.calls();
    assert_eq!(
        calls.iter().map(|c| c.iteration).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(calls[1].prompt.contains("review (your previous iteration)"));
    assert!(calls[1].prompt.contains("\"round\": 1"));
    assert!(calls[2].prompt.contains("review, round 3"));
    let state = project.state("review");
    assert_eq!(state.tasks["review"].iterations, 3);
    assert!(events.contains(&WorkflowEvent::LoopExit {
        task: "review".into(),
        iterations: 3,
        reason: "condition".into()
    }));
    let exit: serde_json::Value =
        serde_json::from_slice(&std::fs::read(project.path().join("loop-exit.json")).unwrap())
            .unwrap();
    assert_eq!(exit["reason"], "condition");
    assert_eq!(exit["iteration"], 3);
}

#[tokio::test]
async fn a_loop_stops_at_its_max_iterations_failing_or_completing_as_it_says() {
    let project = Project::new(
        r#"
name = "bounded"
[[task]]
id = "strict"
adapter = "echo"
prompt = "p"
[task.loop]
max_iterations = 3
until = { command = "exit 1" }

[[task]]
id = "lenient"
adapter = "echo"
prompt = "p"
[task.loop]
max_iterations = 2
until = { command = ["false"] }
on_max = "complete"

[[task]]
id = "checked"
adapter = "echo"
prompt = "p"
[task.loop]
max_iterations = 10
until = { command = "test $MOAT_ITERATION -ge 4" }
"#,
    );
    let runner = project.runner(1);
    let (result, events) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    let state = project.state("bounded");
    let iterations = |id: &str| runner.calls().iter().filter(|c| c.task == id).count();
    assert_eq!(iterations("strict"), 3);
    assert_eq!(status_of(&state, "strict"), TaskStatus::Failed);
    assert!(
        state.tasks["strict"]
            .error
            .as_deref()
            .unwrap()
            .contains("3 iterations")
    );
    assert_eq!(iterations("lenient"), 2);
    assert_eq!(status_of(&state, "lenient"), TaskStatus::Completed);
    assert_eq!(iterations("checked"), 4);
    assert_eq!(status_of(&state, "checked"), TaskStatus::Completed);
    assert!(events.contains(&WorkflowEvent::LoopExit {
        task: "strict".into(),
        iterations: 3,
        reason: "max_iterations".into()
    }));
}

#[tokio::test]
async fn a_task_that_does_not_produce_its_outputs_fails() {
    let project = Project::new(
        r#"
name = "outputs"
[[task]]
id = "A"
adapter = "echo"
prompt = "p"
outputs = ["report.md"]
"#,
    );
    let runner = project.runner(1);
    runner.script("A", [Scripted::Answer("I did nothing".into())]);
    let (result, _) = run(&project, runner, Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    let state = project.state("outputs");
    assert!(
        state.tasks["A"]
            .error
            .as_deref()
            .unwrap()
            .contains("did not produce report.md")
    );
}

#[tokio::test]
async fn after_a_crash_resume_skips_completed_tasks_and_reruns_the_one_left_running() {
    let project = Project::new(CHAIN);
    let runner = project.runner(10);
    runner.script("B", [Scripted::Hang]);
    let events = Events::default();
    let engine = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    let settings = events.settings(4);
    let cancel = settings.cancel.clone();
    // The crash: the engine is dropped in the middle of B, nothing more
    // written.
    let crashed =
        tokio::time::timeout(Duration::from_millis(500), engine.run(FRESH, settings)).await;
    assert!(crashed.is_err(), "the workflow should still be running");
    // The hung attempt the dropped engine left behind (a crashed process's
    // would be gone with it).
    cancel.cancel();
    let state = project.state("chain");
    assert_eq!(status_of(&state, "A"), TaskStatus::Completed);
    assert_eq!(status_of(&state, "B"), TaskStatus::Running);
    assert_eq!(status_of(&state, "C"), TaskStatus::Pending);

    // `run` refuses to start over what did not finish.
    let again = project.runner(1);
    let (refused, _) = run(&project, again.clone(), Hooks::new(), FRESH).await;
    assert!(
        matches!(refused, Err(WorkflowError::Unfinished { .. })),
        "{refused:?}"
    );
    let (result, events) = run(
        &project,
        again.clone(),
        Hooks::new(),
        Start::Resume { force: false },
    )
    .await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Completed);
    let order: Vec<String> = again.calls().into_iter().map(|c| c.task).collect();
    assert_eq!(order, ["B", "C"]);
    assert!(events.contains(&WorkflowEvent::WorkflowStarted {
        workflow: "chain".into(),
        tasks: 3,
        skipped: vec!["A".into()],
        run: None
    }));
    // The completed task kept its first run's times.
    assert_eq!(
        project.state("chain").tasks["A"].started_at,
        state.tasks["A"].started_at
    );
}

#[tokio::test]
async fn a_changed_file_is_refused_on_resume_unless_forced() {
    let project = Project::new(CHAIN);
    let runner = project.runner(1);
    runner.script("C", [Scripted::Fail("boom".into())]);
    let (result, _) = run(&project, runner, Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    std::fs::write(
        project.path().join("flow.toml"),
        CHAIN.replace("\"third\"", "\"third, better\""),
    )
    .unwrap();
    let runner = project.runner(1);
    let (refused, _) = run(
        &project,
        runner.clone(),
        Hooks::new(),
        Start::Resume { force: false },
    )
    .await;
    let error = refused.unwrap_err();
    assert!(matches!(error, WorkflowError::Changed { .. }));
    assert!(error.to_string().contains("--force"));
    assert!(runner.calls().is_empty());
    let (forced, _) = run(
        &project,
        runner.clone(),
        Hooks::new(),
        Start::Resume { force: true },
    )
    .await;
    assert_eq!(forced.unwrap().status, WorkflowStatus::Completed);
    let calls = runner.calls();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].prompt.contains("third, better"));
    // A finished workflow runs again from the start without --fresh.
    let (again, _) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(again.unwrap().status, WorkflowStatus::Completed);
    assert_eq!(runner.calls().len(), 4);
}

#[tokio::test]
async fn cancel_stops_every_attempt_and_leaves_them_to_resume() {
    let project = Project::new(
        r#"
name = "cancelled"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
[[task]]
id = "B"
adapter = "echo"
prompt = "b"
[[task]]
id = "C"
adapter = "echo"
prompt = "c"
depends_on = ["A", "B"]
"#,
    );
    let runner = project.runner(1);
    runner.script("A", [Scripted::Hang]);
    runner.script("B", [Scripted::Hang]);
    let events = Events::default();
    let settings = events.settings(4);
    let cancel = settings.cancel.clone();
    let engine = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let summary = tokio::time::timeout(Duration::from_secs(10), engine.run(FRESH, settings))
        .await
        .expect("cancel ends the workflow")
        .unwrap();
    assert_eq!(summary.status, WorkflowStatus::Cancelled);
    let state = project.state("cancelled");
    assert_eq!(state.status, WorkflowStatus::Cancelled);
    for id in ["A", "B", "C"] {
        assert_eq!(status_of(&state, id), TaskStatus::Pending, "{id}");
    }
    let events = events.all();
    assert_eq!(done_events(&events), 1);
    let interrupted: Vec<&WorkflowEvent> = events
        .iter()
        .filter(|e| matches!(e, WorkflowEvent::TaskInterrupted { .. }))
        .collect();
    assert_eq!(interrupted.len(), 2, "{events:#?}");
    let (resumed, _) = run(
        &project,
        runner.clone(),
        Hooks::new(),
        Start::Resume { force: false },
    )
    .await;
    assert_eq!(resumed.unwrap().status, WorkflowStatus::Completed);
}

#[tokio::test]
async fn a_state_write_failure_stops_the_workflow_and_dispatches_nothing_more() {
    let project = Project::new(CHAIN);
    let runner = project.runner(300);
    let events = Events::default();
    let engine = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    let blocker = project.path().join(".moat/workflows/chain/state.json.tmp");
    let block = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A directory where the temporary file goes: the next write fails
        // (even for root, which file modes do not stop).
        std::fs::create_dir(&blocker).unwrap();
    });
    let result = engine.run(FRESH, events.settings(4)).await;
    block.await.unwrap();
    let error = result.unwrap_err();
    assert!(matches!(error, WorkflowError::State(_)), "{error}");
    let called: Vec<String> = runner.calls().into_iter().map(|c| c.task).collect();
    assert_eq!(called, ["A"]);
    let events = events.all();
    let done = events.iter().find_map(|e| match e {
        WorkflowEvent::WorkflowDone { status, reason, .. } => Some((*status, reason.clone())),
        _ => None,
    });
    let (status, reason) = done.expect("a workflow_done");
    assert_eq!(status, WorkflowStatus::Failed);
    assert!(reason.unwrap().contains("critical"));
    // The state on disk is the last whole one: A running.
    assert_eq!(status_of(&project.state("chain"), "A"), TaskStatus::Running);
}

#[tokio::test]
async fn two_processes_cannot_run_one_workflow() {
    let project = Project::new(CHAIN);
    let runner = project.runner(300);
    let first = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    let events = Events::default();
    let running = first.run(FRESH, events.settings(4));
    let second = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (result, _) = run(
            &project,
            project.runner(1),
            Hooks::new(),
            Start::Resume { force: false },
        )
        .await;
        result
    };
    let (first, second) = tokio::join!(running, second);
    assert_eq!(first.unwrap().status, WorkflowStatus::Completed);
    let error = second.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("another moat runs this workflow"),
        "{error}"
    );
}

fn problems(workflow: &str, files: &[(&str, &str)]) -> String {
    let project = Project::new(workflow);
    for (name, text) in files {
        project.write(name, text);
    }
    let error: DefinitionError =
        moat_workflow::load(&project.path().join("flow.toml")).unwrap_err();
    error.to_string()
}

#[test]
fn a_cycle_is_named_with_its_place_in_the_file() {
    let text = problems(
        r#"[[task]]
id = "a"
adapter = "echo"
prompt = "p"
depends_on = ["c"]

[[task]]
id = "b"
adapter = "echo"
prompt = "p"
depends_on = ["a"]

[[task]]
id = "c"
adapter = "echo"
prompt = "p"
depends_on = ["b"]
"#,
        &[],
    );
    assert!(text.contains("flow.toml:5:"), "{text}");
    assert!(
        text.contains("a → c → b → a") || text.contains("a → b → c → a"),
        "{text}"
    );
}

#[test]
fn every_problem_is_reported_at_once_each_with_its_line() {
    let text = problems(
        r#"name = "bad"

[[task]]
id = "a"
adapter = "echo"
prompt = "uses {{nonsense}}"
inputs = ["missing.txt"]

[[task]]
id = "a"
adapter = "echo"
prompt = "p"
depends_on = ["ghost"]

[[hook]]
on = "after-lunch"
command = "true"
"#,
        &[],
    );
    let lines: Vec<&str> = text.lines().collect();
    let find = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
            .to_string()
    };
    assert!(find("{{nonsense}}").contains("flow.toml:6:"));
    assert!(find("missing.txt").contains("flow.toml:7:"));
    assert!(find("must be unique").contains("flow.toml:10:"));
    assert!(find("\"ghost\"").contains("flow.toml:13:"));
    assert!(find("after-lunch").contains("flow.toml:16:"));
}

#[test]
fn an_input_produced_upstream_need_not_exist_yet_and_json_files_are_read() {
    let project = Project::new("");
    std::fs::write(
        project.path().join("flow.json"),
        r#"{"tasks": [
            {"id": "a", "adapter": "echo", "prompt": "p", "outputs": ["made.txt"]},
            {"id": "b", "adapter": "echo", "prompt": "p", "inputs": ["made.txt"], "depends_on": ["a"]}
        ]}"#,
    )
    .unwrap();
    let workflow = moat_workflow::load(&project.path().join("flow.json")).unwrap();
    assert_eq!(workflow.name, "flow");
    assert_eq!(workflow.tasks.len(), 2);
    std::fs::write(
        project.path().join("bad.json"),
        r#"{"tasks": [{"id": "b", "adapter": "echo", "prompt": "p", "inputs": ["../etc/passwd"]}]}"#,
    )
    .unwrap();
    let error = moat_workflow::load(&project.path().join("bad.json"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("[0].inputs[0]") && error.contains("may not leave the project"),
        "{error}"
    );
}

#[tokio::test]
async fn moat_never_reads_or_writes_outside_the_project_through_a_link_an_agent_left() {
    let project = Project::new(
        r#"
name = "links"
[[task]]
id = "reader"
adapter = "echo"
prompt = "p"
inputs = ["leak.txt"]
[[task]]
id = "writer"
adapter = "echo"
prompt = "p"
save_answer = "out/answer.md"
"#,
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "the secret").unwrap();
    // What an agent with write access to the project could leave there.
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        project.path().join("leak.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), project.path().join("out")).unwrap();
    let runner = project.runner(1);
    let (result, _) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    let state = project.state("links");
    for task in ["reader", "writer"] {
        assert_eq!(status_of(&state, task), TaskStatus::Failed, "{task}");
        let error = state.tasks[task].error.clone().unwrap();
        assert!(error.contains("outside the project"), "{task}: {error}");
    }
    assert!(
        runner
            .calls()
            .iter()
            .all(|c| !c.prompt.contains("the secret"))
    );
    assert!(!outside.path().join("answer.md").exists());
}

#[tokio::test]
async fn a_workflow_cancelled_before_it_starts_runs_nothing_and_ends_once() {
    let project = Project::new(CHAIN);
    let runner = project.runner(1);
    let events = Events::default();
    let settings = events.settings(4);
    settings.cancel.cancel();
    let engine = Engine::new(project.workflow(), runner.clone(), Hooks::new());
    let summary = engine.run(FRESH, settings).await.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Cancelled);
    assert!(runner.calls().is_empty());
    let events = events.all();
    assert_eq!(done_events(&events), 1);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WorkflowEvent::TaskStarted { .. }))
    );
}

#[tokio::test]
async fn a_hook_that_overstays_is_stopped_and_nothing_a_hook_starts_outlives_it() {
    let project = Project::new(
        r#"
name = "lingering"
[[task]]
id = "A"
adapter = "echo"
prompt = "a"
[[task]]
id = "B"
adapter = "echo"
prompt = "b"

[[hook]]
on = "pre-task"
task = "A"
command = "sleep 300 & echo $! > left-running.pid"
unsandboxed = true
[[hook]]
on = "pre-task"
task = "B"
command = "sleep 300"
timeout = "200ms"
unsandboxed = true
"#,
    );
    let runner = project.runner(1);
    let started = std::time::Instant::now();
    let (result, _) = run(&project, runner, file_hooks(&project), FRESH).await;
    assert_eq!(result.unwrap().status, WorkflowStatus::Failed);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let state = project.state("lingering");
    assert_eq!(status_of(&state, "A"), TaskStatus::Completed);
    assert!(
        state.tasks["B"]
            .error
            .as_deref()
            .unwrap()
            .contains("took longer than 200ms"),
        "{:?}",
        state.tasks["B"].error
    );
    let pid = std::fs::read_to_string(project.path().join("left-running.pid")).unwrap();
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .is_ok_and(|stat| !stat.contains(") Z "))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(&pid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(&pid), "the hook's background process outlived it");
}

#[tokio::test]
async fn a_state_file_with_counts_at_their_limit_resumes_without_a_panic() {
    let project = Project::new(
        r#"
name = "tampered"
[[task]]
id = "A"
adapter = "echo"
prompt = "p"
[task.loop]
max_iterations = 3
until = { command = "true" }
"#,
    );
    let runner = project.runner(1);
    runner.script("A", [Scripted::Fail("stop here".into())]);
    let (first, _) = run(&project, runner.clone(), Hooks::new(), FRESH).await;
    assert_eq!(first.unwrap().status, WorkflowStatus::Failed);
    let path = project.path().join(".moat/workflows/tampered/state.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    state["tasks"]["A"]["iterations"] = serde_json::json!(u32::MAX);
    state["tasks"]["A"]["duration_ms"] = serde_json::json!(u64::MAX);
    state["tasks"]["A"]["usage"] = serde_json::json!({"tokens": {"coverage": "complete", "totals": {"input": {"total": u64::MAX}, "output": {"total": 1}}}, "toolUses": u32::MAX});
    std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();
    let (resumed, _) = run(
        &project,
        runner,
        Hooks::new(),
        Start::Resume { force: false },
    )
    .await;
    let summary = resumed.unwrap();
    assert_eq!(summary.status, WorkflowStatus::Completed);
    assert_eq!(summary.state.tasks["A"].duration_ms, u64::MAX);
}
