//! The five entry points that start runs — `moat run`, `moat parallel`,
//! `moat serve`, a workflow's task and a cluster worker's job — through
//! the real binary, the real protocol and a real `nats-server`. Each one:
//!
//! 1. refuses a run asking for more than its ceiling or its parent allows
//!    with the same refusal, in the same words (`the run asks for more than
//!    … allows: --allow-env=HOME`), reported its own way: exit 2 and one
//!    line, `BOUNDARY_VIOLATION` in the protocol, a workflow refused before
//!    any task runs, a cluster run ended `failed` / `boundary violation`;
//! 2. ends a run whose adapter fails before its first event (`liar`, which
//!    refuses an unknown mode in `run`) `failed`, its record finished with
//!    a reason, an end time and exactly one `done` — never left `pending`;
//! 3. runs `fanout` with two `echo` children, both children recorded with
//!    the fanout run as their parent, its answer holding both of theirs.

use std::process::Output;

use moat_engine::{AgentEvent, DoneStatus};
use moat_testkit::components::{COOPERATIVE, LIAR, NOT_AN_ADAPTER};
use serde_json::{Value, json};

use crate::cli::common::events;
use crate::cli::store::{Scratch, dones, record, stderr};
use crate::serve::client::{Client, Server};
use crate::serve::{fanout, start};

/// What every refused run asks for beyond its bound, as the command line
/// (and every refusal) names it.
const EXCESS: &str = "--allow-env=HOME";

/// A prompt `liar` refuses in `run`, before any event.
const UNKNOWN_MODE: &str = "no such mode";

/// Why a run whose adapter failed ended.
const ADAPTER_ERROR: &str = "adapter error";

/// `fanout`'s sub-agents: two `echo` children, each with a prompt of its
/// own (echo answers with it).
fn two_echoes() -> Value {
    json!([
        {"adapter": "echo", "prompt": "first child"},
        {"adapter": "echo", "prompt": "second child"},
    ])
}

/// `fanout`'s options (`--extra`, `options.extra`).
fn fanout_extra() -> Value {
    json!({"agents": two_echoes()})
}

/// The refusal's one wording, whichever entry point: the run asked for
/// [`EXCESS`] beyond `bound` ("this server allows", "its parent R holds").
fn assert_refusal(message: &str, bound: &str) {
    let said = format!("the run asks for more than {bound}: {EXCESS}");
    assert!(message.contains(&said), "{message:?} does not say {said:?}");
}

/// A refusal as the command line reports it: exit 2, and one line naming
/// it `BOUNDARY_VIOLATION`.
fn assert_refused_by_the_command(output: &Output, bound: &str) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(
        message.starts_with("moat: BOUNDARY_VIOLATION: "),
        "{message}"
    );
    assert_refusal(&message, bound);
}

/// The id of the one run of `adapter` listed in `runs`.
fn id_of(runs: &[Value], adapter: &str) -> String {
    let of: Vec<&Value> = runs.iter().filter(|r| r["adapter"] == adapter).collect();
    assert_eq!(of.len(), 1, "one run of {adapter}: {runs:?}");
    of[0]["id"].as_str().unwrap().to_owned()
}

/// Run `id` ended `failed` with `reason` and an end time, and its stored
/// events end with its one `done`, error.
fn assert_failed_once(scratch: &Scratch, id: &str, reason: &str) -> Vec<AgentEvent> {
    let runs = scratch.runs();
    let run = record(&runs, id);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["reason"], reason, "{run}");
    assert!(run["endedMs"].as_u64().is_some(), "{run}");
    let events = scratch.logs(id);
    assert_eq!(dones(&events), [DoneStatus::Error], "{events:?}");
    assert!(events.last().unwrap().is_done(), "{events:?}");
    events
}

/// `liar`'s run `id` failed as its adapter refused it in `run`: no event
/// of the adapter's own, its refusal's error, its one `done`.
fn assert_refused_in_run(scratch: &Scratch, id: &str) {
    let events = assert_failed_once(scratch, id, ADAPTER_ERROR);
    let error = events
        .iter()
        .find_map(AgentEvent::as_error)
        .unwrap_or_else(|| panic!("an error says why: {events:?}"));
    assert!(error.message.contains(UNKNOWN_MODE), "{error:?}");
    assert!(
        events.iter().all(|e| e.is_done() || e.as_error().is_some()),
        "nothing from the adapter: {events:?}"
    );
}

/// The `fanout` run `id` answered `answer`, and `children` (the entry
/// point's own listing of its children) are its two echo runs, completed.
fn assert_fanned_out(id: &str, answer: &str, children: &[Value]) {
    assert!(answer.contains("## 1. echo\nfirst child"), "{answer}");
    assert!(answer.contains("## 2. echo\nsecond child"), "{answer}");
    assert_eq!(children.len(), 2, "{children:?}");
    for child in children {
        assert_eq!(child["parent"], id, "{child}");
        assert_eq!(child["adapter"], "echo", "{child}");
        assert_eq!(child["status"], "completed", "{child}");
    }
    let mut prompts: Vec<&str> = children
        .iter()
        .map(|c| c["prompt"].as_str().unwrap())
        .collect();
    prompts.sort_unstable();
    assert_eq!(prompts, ["first child", "second child"]);
}

/// The answer in the `done` of `agent`'s run among `events`.
fn answer_of(events: &[AgentEvent], agent: &str) -> String {
    events
        .iter()
        .filter(|e| e.agent == agent)
        .find_map(AgentEvent::as_done)
        .and_then(|done| done.result.clone())
        .unwrap_or_else(|| panic!("{agent} answered: {events:?}"))
}

/// A live run granted nothing (`cooperative`, a component given nothing),
/// started with `--detach`: its id.
fn live_parent(scratch: &Scratch) -> String {
    let output = scratch.run(&["run", COOPERATIVE, "go", "--detach"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let runs = scratch.runs();
    let grants = &record(&runs, &id)["grants"];
    assert!(
        grants
            .as_object()
            .unwrap()
            .values()
            .all(|g| g == &json!([])),
        "{grants}"
    );
    id
}

/// `moat run ARGS --output ndjson`: its output, which must have ended with
/// `code`.
fn ndjson(scratch: &Scratch, args: &[&str], code: i32) -> Output {
    let output = scratch
        .moat()
        .args(args)
        .args(["--output", "ndjson"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
    output
}

/// The three through `moat run`, on this machine or on the cluster
/// `scratch` works on: more than a live parent holds is refused; a run
/// whose adapter refuses in `run` fails, finished once; `fanout` runs two
/// echo children under it. Its children's records.
fn through_moat_run(scratch: &Scratch) -> Vec<Value> {
    let parent = live_parent(scratch);
    let refused = scratch.run(&["run", "--parent", &parent, EXCESS, "echo", "x"]);
    assert_refused_by_the_command(&refused, &format!("its parent {parent} holds"));
    assert!(scratch.children(&parent).is_empty(), "nothing recorded");
    scratch.cancel(&parent);

    ndjson(scratch, &["run", LIAR, UNKNOWN_MODE], 1);
    assert_refused_in_run(scratch, &id_of(&scratch.runs(), "liar"));

    let extra = fanout_extra().to_string();
    let fanned = ndjson(
        scratch,
        &["run", "fanout", "the question", "--extra", &extra],
        0,
    );
    let id = id_of(&scratch.runs(), "fanout");
    let children = scratch.children(&id);
    assert_fanned_out(&id, &answer_of(&events(&fanned), "fanout"), &children);
    children
}

#[test]
fn moat_run_refuses_beyond_its_parent_fails_a_refusing_adapter_once_and_nests_fanout() {
    let scratch = Scratch::new();
    through_moat_run(&scratch);
    // A component that cannot load: refused before any record.
    let before = scratch.runs().len();
    let unloadable = scratch.run(&["run", NOT_AN_ADAPTER, "x"]);
    assert_eq!(unloadable.status.code(), Some(2), "{}", stderr(&unloadable));
    assert_eq!(scratch.runs().len(), before);
}

/// A `moat parallel --tasks` file of `tasks` in `scratch`: its path.
fn tasks_file(scratch: &Scratch, name: &str, tasks: &Value) -> String {
    let path = scratch.dir().join(name);
    std::fs::write(&path, tasks.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn moat_parallel_refuses_beyond_its_parent_fails_a_refusing_adapter_once_and_nests_fanout() {
    let scratch = Scratch::new();

    // The second task asks more than the parent holds: refused. The first
    // was recorded before and never started: its record is finished too.
    let parent = live_parent(&scratch);
    let file = tasks_file(
        &scratch,
        "beyond.json",
        &json!([
            {"adapter": "echo", "prompt": "within"},
            {"adapter": "echo", "prompt": "beyond", "allowEnv": ["HOME"]},
        ]),
    );
    let refused = scratch.run(&["parallel", "--parent", &parent, "--tasks", &file]);
    assert_refused_by_the_command(&refused, &format!("its parent {parent} holds"));
    let children = scratch.children(&parent);
    assert_eq!(children.len(), 1, "only the first task: {children:?}");
    assert_eq!(children[0]["prompt"], "within");
    assert_failed_once(&scratch, children[0]["id"].as_str().unwrap(), "not started");
    scratch.cancel(&parent);

    // An adapter that refuses in `run` beside one that answers.
    let scratch = Scratch::new();
    ndjson(
        &scratch,
        &[
            "parallel",
            "--task",
            &format!("a:{LIAR}={UNKNOWN_MODE}"),
            "--task",
            "b:echo=beside",
        ],
        1,
    );
    let runs = scratch.runs();
    assert_eq!(record(&runs, &id_of(&runs, "echo"))["status"], "completed");
    assert_refused_in_run(&scratch, &id_of(&runs, "liar"));

    // fanout beside another task.
    let file = tasks_file(
        &scratch,
        "fanout.json",
        &json!([
            {"adapter": "fanout", "prompt": "the question", "extra": fanout_extra()},
            {"adapter": "echo", "prompt": "beside"},
        ]),
    );
    let output = ndjson(&scratch, &["parallel", "--tasks", &file], 0);
    let id = id_of(&scratch.runs(), "fanout");
    let answer = answer_of(&events(&output), "fanout");
    assert_fanned_out(&id, &answer, &scratch.children(&id));
}

#[test]
fn moat_serve_refuses_beyond_its_ceiling_fails_a_refusing_adapter_once_and_nests_fanout() {
    let scratch = Scratch::new();
    let socket = scratch.dir().join("moat.sock");
    let _server = Server::socket(&socket, &scratch.store, &[]);
    let mut client = Client::connect(&socket);

    // More than the server's flags allow: BOUNDARY_VIOLATION, in the same
    // words, nothing recorded.
    let refused = client.error(
        "run",
        json!({"adapter": "echo", "prompt": "x", "grants": {"env": ["HOME"]}}),
    );
    assert_eq!(refused["code"], "BOUNDARY_VIOLATION", "{refused}");
    assert_refusal(refused["message"].as_str().unwrap(), "this server allows");
    assert!(scratch.runs().is_empty());

    let failing = start(
        &mut client,
        json!({"adapter": LIAR, "prompt": UNKNOWN_MODE}),
    );
    let failed = client.error("await", json!({"runs": [failing]}));
    assert_eq!(failed["code"], "RUN_FAILED", "{failed}");
    assert_eq!(failed["data"]["results"][&failing]["status"], "error");
    assert_eq!(
        client.ok("get", json!({"run": failing}))["reason"],
        ADAPTER_ERROR
    );
    assert_refused_in_run(&scratch, &failing);
    // A component that cannot load: refused before any record.
    let unloadable = client.error("run", json!({"adapter": NOT_AN_ADAPTER, "prompt": "x"}));
    assert_eq!(unloadable["code"], "RUN_FAILED", "{unloadable}");
    assert_eq!(scratch.runs().len(), 1);

    let run = start(&mut client, fanout(two_echoes(), json!({})));
    let results = client.ok("await", json!({"runs": [run]}));
    let answer = results["results"][&run]["text"].as_str().unwrap();
    let children = client.ok("list", json!({"parent": run}))["runs"].clone();
    assert_fanned_out(&run, answer, children.as_array().unwrap());
}

/// Runs the workflow `tasks` from a JSON file of its own in `scratch`,
/// named `name`, with `flags` and `--output ndjson`: its output, which
/// must have ended with `code`.
fn run_workflow(scratch: &Scratch, name: &str, tasks: Value, flags: &[&str], code: i32) -> Output {
    let file = scratch.dir().join(format!("{name}.json"));
    std::fs::write(&file, json!({"name": name, "task": tasks}).to_string()).unwrap();
    let file = file.to_str().unwrap();
    let args: Vec<&str> = ["workflow", "run", file]
        .iter()
        .chain(flags)
        .copied()
        .collect();
    ndjson(scratch, &args, code)
}

/// The record of workflow `name`'s own run.
fn workflow_record(scratch: &Scratch, name: &str) -> Value {
    scratch
        .runs()
        .into_iter()
        .find(|r| r["adapter"] == "workflow" && r["prompt"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("workflow {name} is recorded"))
}

#[test]
fn a_workflow_refuses_a_task_beyond_its_flags_fails_a_refusing_task_once_and_nests_fanout() {
    let scratch = Scratch::new();

    // A task asking more than the workflow's flags: the workflow is
    // refused in one line before anything runs; its own record says why.
    let refused = run_workflow(
        &scratch,
        "beyond",
        json!([{"id": "greedy", "adapter": "echo", "prompt": "x", "grants": {"env": ["HOME"]}}]),
        &[],
        2,
    );
    let message = stderr(&refused);
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.starts_with("moat: task greedy: "), "{message}");
    assert_refusal(&message, "the workflow allows");
    let workflow = workflow_record(&scratch, "beyond");
    assert_eq!(workflow["status"], "failed");
    assert_refusal(workflow["reason"].as_str().unwrap(), "the workflow allows");
    assert_eq!(scratch.runs().len(), 1, "no task ran");

    // A task whose adapter refuses in `run`: the task fails, its run is
    // finished once, under the workflow's.
    // A component by path is the workflow's project's (its file's
    // directory), as every path of the file is.
    std::fs::copy(LIAR, scratch.dir().join("liar.wasm")).unwrap();
    let failed = run_workflow(
        &scratch,
        "failing",
        json!([{"id": "lie", "adapter": "liar.wasm", "prompt": UNKNOWN_MODE}]),
        &[],
        1,
    );
    let shown: Vec<Value> = String::from_utf8_lossy(&failed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let task_failed = shown
        .iter()
        .find(|e| e["type"] == "task_failed")
        .unwrap_or_else(|| panic!("the task failed: {shown:?}"));
    assert_eq!(task_failed["task"], "lie");
    assert!(
        task_failed["reason"]
            .as_str()
            .unwrap()
            .contains(UNKNOWN_MODE),
        "{task_failed}"
    );
    let workflow = workflow_record(&scratch, "failing");
    assert_eq!(workflow["reason"], "a task failed");
    let workflow_id = workflow["id"].as_str().unwrap();
    let attempt = id_of(&scratch.children(workflow_id), "liar");
    assert_refused_in_run(&scratch, &attempt);

    // fanout as a task: its answer saved, its children under its run.
    run_workflow(
        &scratch,
        "fanning",
        json!([{
            "id": "fan",
            "adapter": "fanout",
            "prompt": "the question",
            "options": {"extra": fanout_extra()},
            "save_answer": "answer.md",
        }]),
        &[],
        0,
    );
    let workflow = workflow_record(&scratch, "fanning");
    let id = id_of(
        &scratch.children(workflow["id"].as_str().unwrap()),
        "fanout",
    );
    let answer = std::fs::read_to_string(scratch.dir().join("answer.md")).unwrap();
    assert_fanned_out(&id, &answer, &scratch.children(&id));
}

#[test]
fn a_workflow_task_keeps_what_the_workflow_allows_its_adapter_under_the_workflows_run() {
    // Trust `controlled` gives a run its project to read and write, as
    // `moat run --trust controlled --cwd PROJECT` does (docs/workflows.md:
    // a task gets what `moat run` would): a task recorded as a child of
    // the workflow's own run keeps that.
    let scratch = Scratch::new();
    run_workflow(
        &scratch,
        "controlled",
        json!([{"id": "work", "adapter": "echo", "prompt": "x"}]),
        &["--trust", "controlled"],
        0,
    );
    let workflow = workflow_record(&scratch, "controlled");
    let tasks = scratch.children(workflow["id"].as_str().unwrap());
    let project = scratch.dir().canonicalize().unwrap();
    let project = json!([project.to_str().unwrap()]);
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let grants = &tasks[0]["grants"];
    assert_eq!(tasks[0]["trust"], "controlled", "{tasks:?}");
    // Writable, and so readable (`read` may leave out what `write` covers).
    assert_eq!(grants["write"], project, "{grants}");
    assert!([json!([]), project].contains(&grants["read"]), "{grants}");
}

#[test]
fn a_cluster_worker_refuses_beyond_its_ceiling_fails_a_refusing_adapter_once_and_nests_fanout() {
    let Some((_nats, url, _worker)) = crate::cluster::server_and_worker() else {
        return;
    };
    // The worker was started without --allow-env.
    let scratch = Scratch::on_cluster(&url);

    // Within the submitter's flags, beyond the worker's: the worker ends it
    // failed `boundary violation`, its events saying why in the same words.
    let refused = ndjson(&scratch, &["run", EXCESS, "echo", "hi"], 1);
    let shown = events(&refused);
    let error = shown
        .iter()
        .find_map(AgentEvent::as_error)
        .expect("an error says why");
    assert_eq!(
        error.code.as_deref(),
        Some("BOUNDARY_VIOLATION"),
        "{error:?}"
    );
    assert_refusal(&error.message, "this worker allows");
    let id = id_of(&scratch.runs(), "echo");
    let stored = assert_failed_once(&scratch, &id, "boundary violation");
    assert_eq!(stored, shown, "the events shown are the record's");

    // The rest as on this machine; beyond a parent on the cluster is
    // refused at submission.
    let children = through_moat_run(&scratch);
    assert!(
        children.iter().all(|c| c["worker"].is_string()),
        "executed by a worker: {children:?}"
    );
}
