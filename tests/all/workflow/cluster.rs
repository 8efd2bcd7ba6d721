//! `moat workflow run --nats` and `resume --nats` on a real `nats-server`
//! with two real `moat worker`s: a 20-task fan-out/fan-in completes; its
//! submitter `kill -9`ed half way, a resume completes it without running
//! any task twice — the runs still going on in the cluster at the kill,
//! and those that ended there meanwhile, are re-attached, not started
//! again. Skipped without `nats-server` unless `MOAT_REQUIRE_NATS=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use moat_testkit::components::SLEEPY;
use moat_testkit::nats;
use serde_json::Value;

use super::cli::{Project, events, of_type, stderr};
use crate::cluster::Worker;

/// The quick tasks, between the root and the sink.
const QUICK: usize = 14;
/// The slow tasks' milliseconds a tick (sleepy ticks 1,000 times): two
/// end in the cluster while nobody follows them, two are still running
/// when the resume starts.
const SLOW_MS: [u64; 4] = [3, 3, 12, 12];

/// A fan-out/fan-in of 20 tasks named `spread`: `root`, then `e00`…`e13`
/// (echo) and `s0`…`s3` (sleepy, slow) each depending on it, then `sink`
/// on all of them. Each prompt carries `[task ID]`, which tells its runs
/// apart in the cluster's records.
fn spread() -> String {
    let mut file = String::from(
        "name = \"spread\"\nmax_parallel = 20\n\n[[task]]\nid = \"root\"\nadapter = \"echo\"\nprompt = \"[task root] start\"\n",
    );
    let mut middle = Vec::new();
    for i in 0..QUICK {
        let id = format!("e{i:02}");
        file.push_str(&format!(
            "\n[[task]]\nid = \"{id}\"\nadapter = \"echo\"\nprompt = \"[task {id}] quick\"\ndepends_on = [\"root\"]\n"
        ));
        middle.push(id);
    }
    for (i, ms) in SLOW_MS.iter().enumerate() {
        let id = format!("s{i}");
        // Sleepy sleeps the first number of its prompt a tick; it stops
        // when cancelled ("cooperate").
        file.push_str(&format!(
            "\n[[task]]\nid = \"{id}\"\nadapter = \"sleepy.wasm\"\nprompt = \"{ms} ms a tick, cooperate [task {id}]\"\ndepends_on = [\"root\"]\n"
        ));
        middle.push(id);
    }
    let all: Vec<String> = middle.iter().map(|id| format!("\"{id}\"")).collect();
    file.push_str(&format!(
        "\n[[task]]\nid = \"sink\"\nadapter = \"echo\"\nprompt = \"[task sink] gather\"\ndepends_on = [{}]\n",
        all.join(", ")
    ));
    file
}

/// Every task's id.
fn task_ids() -> Vec<String> {
    let mut ids = vec!["root".to_owned(), "sink".to_owned()];
    ids.extend((0..QUICK).map(|i| format!("e{i:02}")));
    ids.extend((0..SLOW_MS.len()).map(|i| format!("s{i}")));
    ids
}

/// The task a run in the cluster is of: the `[task ID]` of its own part
/// of the prompt (the handovers before it carry no marker).
fn task_of(run: &Value) -> String {
    let prompt = run["prompt"].as_str().unwrap_or_default();
    let own = &prompt[prompt.rfind("# Your task").unwrap_or(0)..];
    let start = own.find("[task ").expect("a marked prompt") + "[task ".len();
    own[start..]
        .split(']')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// `moat ps --all --nats URL -o json`: every run the cluster has.
fn cluster_runs(project: &Project, url: &str) -> Vec<Value> {
    let output = project.run(&["ps", "--all", "--nats", url, "--output", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Waits for `child` to exit within `patience`: its stdout.
fn finish(mut child: Child, patience: Duration) -> std::process::Output {
    let deadline = Instant::now() + patience;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("moat did not end within {patience:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A nats-server, two workers on it, and a project with the workflow.
fn setup() -> Option<(nats::NatsServer, String, [Worker; 2], Project)> {
    if !nats::available() {
        return None;
    }
    let server = nats::server(&[]);
    let url = server.url();
    let workers = [Worker::start(&url, &[]), Worker::start(&url, &[])];
    let project = Project::new();
    // A component by path is the project's, as every path of the file is.
    std::fs::copy(SLEEPY, project.path().join("sleepy.wasm")).unwrap();
    project.write("flow.toml", &spread());
    Some((server, url, workers, project))
}

#[test]
fn a_workflow_on_the_cluster_completes_with_each_task_one_run_there() {
    let Some((_server, url, _workers, project)) = setup() else {
        return;
    };
    let output = project
        .moat()
        .args(["workflow", "run", "--nats", &url, "flow.toml"])
        .args(["--output", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = finish(output, Duration::from_secs(180));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    assert_eq!(of_type(&events, "workflow_done")[0]["completed"], 20);
    let state = project.state("spread");
    assert_eq!(state["status"], "completed");
    // The tasks' runs are the cluster's; the workflow's own record stays
    // on this machine with its state.
    let runs = cluster_runs(&project, &url);
    assert_eq!(runs.len(), 20, "one run a task");
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:#?}");
    assert!(runs.iter().all(|r| r["adapter"] != "workflow"));
    for run in &runs {
        let task = task_of(run);
        assert_eq!(
            state["tasks"][&task]["runs"],
            serde_json::json!([run["id"]])
        );
    }
    let local = project.run(&["ps", "--all", "--output", "json"]);
    let local: Vec<Value> = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(local.len(), 1, "{local:#?}");
    assert_eq!(local[0]["adapter"], "workflow");
    assert_eq!(local[0]["status"], "completed");
}

/// Starts `moat workflow run --nats` and kills it (`SIGKILL`) once
/// `QUICK / 2 + 2` tasks completed and before any slow one did: the
/// events it printed.
fn run_and_kill_half_way(project: &Project, url: &str) -> Vec<Value> {
    let mut child = project
        .moat()
        .args(["workflow", "run", "--nats", url, "flow.toml"])
        .args(["--output", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut events = Vec::new();
    loop {
        let line = seen
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("moat stopped short ({e}): {events:#?}"));
        let event: Value = serde_json::from_str(&line).unwrap();
        events.push(event);
        let completed: Vec<&str> = of_type(&events, "task_completed")
            .iter()
            .filter_map(|e| e["task"].as_str())
            .collect();
        assert!(
            !completed.iter().any(|t| t.starts_with('s')),
            "a slow task completed before the kill: {events:#?}"
        );
        if completed.len() >= QUICK / 2 + 2 {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    events
}

#[test]
fn a_submitter_killed_half_way_is_resumed_without_running_any_task_twice() {
    let Some((_server, url, _workers, project)) = setup() else {
        return;
    };
    let before = run_and_kill_half_way(&project, &url);
    let seen_completed: BTreeSet<String> = of_type(&before, "task_completed")
        .iter()
        .map(|e| e["task"].as_str().unwrap().to_owned())
        .collect();

    // The state names the run of every task in flight, written before
    // the run was submitted.
    let state = project.state("spread");
    assert_eq!(state["status"], "running");
    let completed_before: BTreeSet<String> = state["tasks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, task)| task["status"] == "COMPLETED")
        .map(|(id, _)| id.clone())
        .collect();
    let in_flight: BTreeMap<String, String> = state["tasks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, task)| task["status"] == "RUNNING")
        .map(|(id, task)| {
            let run = task["run"]
                .as_str()
                .unwrap_or_else(|| panic!("{id}: {task}"));
            (id.clone(), run.to_owned())
        })
        .collect();
    for slow in ["s0", "s1", "s2", "s3"] {
        assert!(in_flight.contains_key(slow), "{slow}: {state:#}");
    }
    // A task is completed in the state once the round that settled it is
    // written, just after its event: the kill may fall in between, and
    // then its run is still named as in flight.
    for task in &seen_completed {
        assert!(
            completed_before.contains(task) || in_flight.contains_key(task),
            "{task}: {state:#}"
        );
    }
    // The kill landed while runs went on in the cluster.
    let runs = cluster_runs(&project, &url);
    let live: Vec<&Value> = runs
        .iter()
        .filter(|r| r["status"] == "running" || r["status"] == "pending")
        .collect();
    assert!(
        live.iter()
            .any(|r| task_of(r) == "s2" || task_of(r) == "s3"),
        "{runs:#?}"
    );
    // The quick slow ones end in the cluster with nobody following them.
    for slow in ["s0", "s1"] {
        let waited = project.run(&["wait", "--nats", &url, &in_flight[slow]]);
        assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    }

    let resume = project
        .moat()
        .args(["workflow", "resume", "--nats", &url, "flow.toml"])
        .args(["--output", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let resumed = finish(resume, Duration::from_secs(180));
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let events = events(&resumed);
    assert_eq!(of_type(&events, "workflow_done")[0]["status"], "completed");
    let skipped: BTreeSet<String> = of_type(&events, "workflow_started")[0]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(skipped, completed_before);
    // Every task in flight at the kill was re-attached to its run.
    let reattached: BTreeMap<String, String> = of_type(&events, "task_reattached")
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap().to_owned(),
                e["run"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(reattached, in_flight);

    // The cluster's records: each task's prompt has exactly one run, and
    // it completed.
    let runs = cluster_runs(&project, &url);
    let mut by_task: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for run in &runs {
        by_task.entry(task_of(run)).or_default().push(run);
    }
    for id in task_ids() {
        let of_it = by_task.get(&id).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(of_it.len(), 1, "{id} ran {} times: {of_it:#?}", of_it.len());
        assert_eq!(of_it[0]["status"], "completed", "{id}: {:#?}", of_it[0]);
    }
    assert_eq!(runs.len(), 20);

    // The state agrees: every task completed with that one run.
    let state = project.state("spread");
    assert_eq!(state["status"], "completed");
    for id in task_ids() {
        let task = &state["tasks"][&id];
        assert_eq!(task["status"], "COMPLETED", "{id}");
        assert_eq!(
            task["runs"],
            serde_json::json!([by_task[&id][0]["id"]]),
            "{id}"
        );
        assert!(task.get("run").is_none(), "{id}: {task}");
        if let Some(run) = in_flight.get(&id) {
            assert_eq!(task["runs"][0], run.as_str());
        }
    }
    // The workflow's record on this machine: the killed run failed
    // (`engine restart`), the resume's completed.
    let local = project.run(&["ps", "--all", "--output", "json"]);
    let local: Vec<Value> = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(local.len(), 2, "{local:#?}");
    assert!(local.iter().any(|r| r["reason"] == "engine restart"));
    assert!(local.iter().any(|r| r["status"] == "completed"));
}
