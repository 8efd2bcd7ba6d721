//! What an attacker tries against admission does not get through, end to
//! end through the real `moat` binary, the real protocol and real
//! `nats-server`s:
//!
//! - a granted directory swapped for a symlink by an earlier run (one that
//!   could write its parent) is not followed out of the ceiling by a later
//!   run — a workflow's next task, a server's next request, a worker's
//!   next job: the later run is refused at admission, or sees nothing
//!   outside;
//! - a child of a 64 MiB / 10 s / fuel-capped parent gets no more of any
//!   of them, whether the parent's component starts it or a client asks
//!   for it;
//! - a job put on the cluster's work queue by hand, with limits or grants
//!   beyond the worker's flags, is refused (`boundary violation`).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use futures::StreamExt;
use moat_cluster::{BOUNDARY_VIOLATION, Cluster, ClusterRun, ComponentRef, Job, Settings};
use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_grants::{Grants, TrustLevel};
use moat_runs::RunStatus;
use moat_testkit::components::{COOPERATIVE, ESCAPE, OOM, SPIN_NEXT};
use moat_testkit::nats;
use serde_json::{Value, json};

use crate::cli::common::{events, moat};
use crate::cluster::Worker;
use crate::serve::client::{Client, Server};

const MIB: u64 = 1024 * 1024;

/// What the directory outside every ceiling holds.
const SECRET: &str = "the-secret-outside-the-ceiling";

/// How long any one wait of these tests may take.
const PATIENCE: Duration = Duration::from_secs(120);

fn said(output: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A project `P` that a ceiling grants for writing, with `P/data` granted
/// for reading too, and beside it, outside every ceiling, a directory
/// holding [`SECRET`]. An earlier run that may write `P` (and start `sh`)
/// swaps `P/data` for a symlink to that directory; a later run asks to
/// read `P/data/secret`.
struct Swap {
    _root: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    data: PathBuf,
    outside: PathBuf,
}

impl Swap {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let project = root.join("project");
        let data = project.join("data");
        let outside = root.join("outside");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(data.join("note"), "a note inside the project").unwrap();
        std::fs::write(outside.join("secret"), SECRET).unwrap();
        Self {
            _root: dir,
            root,
            project,
            data,
            outside,
        }
    }

    fn show(path: &Path) -> String {
        path.to_str().unwrap().to_owned()
    }

    /// The ceiling's flags: write the project, read its data, start `sh`.
    fn ceiling(&self) -> Vec<String> {
        vec![
            "--allow-write".into(),
            Self::show(&self.project),
            "--allow-read".into(),
            Self::show(&self.data),
            "--allow-run".into(),
            "sh".into(),
        ]
    }

    /// The earlier run's `escape` probe: through `sh`, within what it was
    /// granted (the project), it moves the data aside and puts a symlink
    /// to the outside in its place; `ready`, when given, is a file it
    /// waits for first (at most a minute).
    fn swap_probe(&self, ready: Option<&Path>) -> String {
        let wait = ready.map_or_else(String::new, |ready| {
            format!(
                "i=0; while [ ! -e {} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; ",
                ready.display()
            )
        });
        format!(
            "shell {wait}mv {data} {project}/moved && ln -s {outside} {data} && echo swapped",
            data = self.data.display(),
            project = self.project.display(),
            outside = self.outside.display(),
        )
    }

    /// The later run's `escape` probes: the secret through the data
    /// directory's path, and that directory's entries.
    fn read_probes(&self) -> Vec<String> {
        vec![
            format!("read {}/secret", self.data.display()),
            format!("list {}", self.data.display()),
        ]
    }

    fn swapped(&self) -> bool {
        std::fs::symlink_metadata(&self.data).is_ok_and(|m| m.file_type().is_symlink())
    }

    /// Fails the test when `text` shows the secret.
    fn assert_kept(&self, text: &str) {
        assert!(!text.contains(SECRET), "the secret got out: {text}");
    }

    /// Whether `message` names the directory swapped, or where it leads
    /// now.
    fn names_the_directory(&self, message: &str) -> bool {
        message.contains(&Self::show(&self.data)) || message.contains(&Self::show(&self.outside))
    }
}

/// Runs, in `scene`'s project, a workflow whose first task (granted
/// the project for writing, and `sh`) swaps the data directory, and whose
/// two next tasks then read through it: one granted it by name in the
/// file, one with all the workflow allows. `flags` are added to `moat
/// workflow run`'s. Fails the test if the secret shows anywhere; checks
/// each reading task was refused naming the directory, or saw nothing.
fn swap_between_tasks(scene: &Swap, flags: &[&str]) {
    let probes = |lines: Vec<String>| serde_json::to_string(&lines).unwrap();
    // Escape takes its probes from options.extra: a task's prompt carries
    // the workflow's own text around it.
    let reader = |id: &str, grants: &str| {
        format!(
            r#"
[[task]]
id = "{id}"
adapter = "escape.wasm"
prompt = "read the data"
depends_on = ["swap"]
save_answer = "answers/{id}.md"
[task.options.extra]
probes = {read}
{grants}"#,
            read = probes(scene.read_probes()),
        )
    };
    let flow = format!(
        r#"[[task]]
id = "swap"
adapter = "escape.wasm"
prompt = "swap the data directory"
[task.options.extra]
probes = {swap}
[task.grants]
write = ["."]
run = ["sh"]
{named}{inherited}"#,
        swap = probes(vec![scene.swap_probe(None)]),
        named = reader("named", "[task.grants]\nread = [\"data\"]\n"),
        inherited = reader("inherited", ""),
    );
    // A component by path is the project's, as every path of the file is.
    std::fs::copy(ESCAPE, scene.project.join("escape.wasm")).unwrap();
    std::fs::write(scene.project.join("flow.toml"), flow).unwrap();
    let store = scene.root.join("store/moat.db");
    let output = moat()
        .env("MOAT_STORE", &store)
        .current_dir(&scene.project)
        .args(["workflow", "run", "flow.toml", "--output", "ndjson"])
        .args(scene.ceiling())
        .args(flags)
        .output()
        .unwrap();
    let all = said(&output);
    scene.assert_kept(&all);
    assert!(
        scene.swapped(),
        "the first task swapped the directory: {all}"
    );
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of = |kind: &str, task: &str| {
        events
            .iter()
            .find(|e| e["type"] == kind && e["task"] == task)
            .cloned()
    };
    assert!(of("task_completed", "swap").is_some(), "{all}");
    for task in ["named", "inherited"] {
        let answer = scene.project.join(format!("answers/{task}.md"));
        match (of("task_failed", task), of("task_completed", task)) {
            // Refused at admission: its grant, opened then, has a symlink
            // on its path; or leads outside the workflow's ceiling now.
            (Some(failed), None) => {
                let reason = failed["reason"].as_str().unwrap();
                assert!(scene.names_the_directory(reason), "{task}: {reason}");
                assert!(!answer.exists(), "{task}");
            }
            // Run with what was granted as it was: the project alone (the
            // data directory inside it), where the symlink leads nowhere.
            (None, Some(_)) => {
                let answer = std::fs::read_to_string(&answer).unwrap();
                scene.assert_kept(&answer);
                assert!(
                    answer.lines().all(|line| line.starts_with("denied:")),
                    "{task}: {answer}"
                );
            }
            _ => panic!("{task} neither failed nor completed: {all}"),
        }
    }
    // The task that named the directory is refused whatever the mode, and
    // the workflow fails with it.
    assert!(of("task_failed", "named").is_some(), "{all}");
    assert_eq!(output.status.code(), Some(1), "{all}");
    if !flags.contains(&"--no-store") {
        let listed = moat()
            .env("MOAT_STORE", &store)
            .args(["ps", "--all", "--output", "json"])
            .output()
            .unwrap();
        assert!(listed.status.success(), "{}", said(&listed));
        scene.assert_kept(&String::from_utf8_lossy(&listed.stdout));
    }
}

#[test]
fn a_workflow_task_does_not_follow_a_directory_an_earlier_task_swapped_for_a_symlink() {
    // Recorded: each task's grants are within the workflow's own record's
    // (the data directory is inside the project there, and goes with it).
    swap_between_tasks(&Swap::new(), &[]);
    // Recorded nowhere: a task asking nothing gets the workflow's flags as
    // they were granted, the data directory's path among them, opened at
    // its admission.
    swap_between_tasks(&Swap::new(), &["--no-store"]);
}

/// The id of a run started with `fields`.
fn start(client: &mut Client, fields: Value) -> String {
    client.ok("run", fields)["run"].as_str().unwrap().to_owned()
}

/// Run `run`'s result, once it ended.
fn result_of(client: &mut Client, run: &str) -> Value {
    let id = client.send("await", json!({"runs": [run]}));
    let response = client.response(&id);
    let results = match (response.get("result"), response.get("error")) {
        (Some(result), _) => &result["results"],
        (None, Some(error)) => &error["data"]["results"],
        _ => panic!("{response}"),
    };
    results[run].clone()
}

#[test]
fn a_servers_next_request_does_not_follow_a_directory_its_last_one_swapped_for_a_symlink() {
    let scene = Swap::new();
    let flags = scene.ceiling();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (_server, mut client) = Server::stdio(&flags);

    // The earlier request asks nothing: it gets all the server allows,
    // writing the project included, and swaps the data directory.
    let swapper = start(
        &mut client,
        json!({"adapter": ESCAPE, "prompt": scene.swap_probe(None)}),
    );
    let swapped = result_of(&mut client, &swapper);
    assert!(
        swapped["text"].as_str().unwrap().contains("out=swapped"),
        "{swapped}"
    );
    assert!(scene.swapped());
    let probes = scene.read_probes().join("\n");

    // Asking nothing again: the server's grant of the directory, opened at
    // admission without following the symlink now on its path, is refused.
    let error = client.error("run", json!({"adapter": ESCAPE, "prompt": probes}));
    let message = error["message"].as_str().unwrap();
    assert_eq!(error["code"], "BOUNDARY_VIOLATION", "{error}");
    assert!(
        message.contains(&Swap::show(&scene.data)) && message.contains("symlink"),
        "{message}"
    );
    scene.assert_kept(&error.to_string());

    // Naming it: where it leads now is beyond the server's ceiling.
    let error = client.error(
        "run",
        json!({"adapter": ESCAPE, "prompt": probes, "grants": {"read": [scene.data]}}),
    );
    let message = error["message"].as_str().unwrap();
    assert_eq!(error["code"], "BOUNDARY_VIOLATION", "{error}");
    assert!(scene.names_the_directory(message), "{message}");
    scene.assert_kept(&error.to_string());

    // Granted only the project: the symlink inside it leads nowhere.
    let contained = start(
        &mut client,
        json!({"adapter": ESCAPE, "prompt": probes, "grants": {"write": [scene.project]}}),
    );
    let result = result_of(&mut client, &contained);
    assert_eq!(result["status"], "success", "{result}");
    scene.assert_kept(&result.to_string());
    client.ok("subscribe", json!({"runs": [contained]}));
    let outcomes: Vec<String> = client
        .events_until_done(&contained)
        .iter()
        .inspect(|event| scene.assert_kept(&event.to_string()))
        .filter(|event| event["data"]["type"] == "text")
        .map(|event| {
            event["data"]["payload"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|outcome| outcome.starts_with("denied:")),
        "neither probe reached anything: {outcomes:?}"
    );
    // Nor does any record show the secret.
    scene.assert_kept(&client.ok("list", json!({})).to_string());
}

/// `moat … --nats URL` with the tests' store and cache.
fn on(url: &str, args: &[&str]) -> Output {
    let (command, rest) = args.split_first().unwrap();
    moat()
        .arg(command)
        .args(["--nats", url])
        .args(rest)
        .output()
        .unwrap()
}

/// `moat show --nats URL RUN --json`.
fn shown(url: &str, run: &str) -> Value {
    let output = on(url, &["show", run, "--json"]);
    assert!(output.status.success(), "{}", said(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Waits until run `run`'s status is `status`.
fn status_until(url: &str, run: &str, status: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let record = shown(url, run);
        if record["status"] == status {
            return;
        }
        assert!(Instant::now() < deadline, "{run} never {status}: {record}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The id `moat run --detach` printed.
fn detached(output: &Output) -> String {
    assert!(output.status.success(), "{}", said(output));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The first error event of `events`.
fn first_error(events: &[AgentEvent]) -> (Option<String>, String) {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Error(error) => Some((error.code.clone(), error.message.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error event: {events:?}"))
}

#[test]
fn a_workers_next_job_does_not_follow_a_directory_its_last_one_swapped_for_a_symlink() {
    if !nats::available() {
        return;
    }
    let scene = Swap::new();
    let server = nats::server(&[]);
    let url = server.url();
    let mut flags = scene.ceiling();
    flags.extend(["--max-runs".to_owned(), "1".to_owned()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // One job at a time: the next waits in the queue while the first runs.
    let _worker = Worker::start(&url, &flags);
    let project = Swap::show(&scene.project);
    let data = Swap::show(&scene.data);

    // The first job may write the project; it swaps the data directory
    // once told to.
    let ready = scene.project.join("ready");
    let swapper = detached(&on(
        &url,
        &[
            "run",
            "--detach",
            "--allow-write",
            &project,
            "--allow-run",
            "sh",
            ESCAPE,
            &scene.swap_probe(Some(&ready)),
        ],
    ));
    status_until(&url, &swapper, "running");
    // The next is submitted before the swap, granted the directory as it
    // is now: it waits in the queue.
    let probes = scene.read_probes().join("\n");
    let before = detached(&on(
        &url,
        &["run", "--detach", "--allow-read", &data, ESCAPE, &probes],
    ));
    assert_eq!(shown(&url, &before)["status"], "pending");
    std::fs::write(&ready, "").unwrap();
    let waited = on(&url, &["wait", &swapper]);
    assert!(waited.status.success(), "{}", said(&waited));
    assert!(
        scene.swapped(),
        "{}",
        said(&on(&url, &["logs", &swapper, "--output", "ndjson"]))
    );

    // Admitted after the swap: refused, the secret unread.
    let waited = on(&url, &["wait", &before]);
    assert_eq!(waited.status.code(), Some(1), "{}", said(&waited));
    let record = shown(&url, &before);
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["reason"], BOUNDARY_VIOLATION, "{record}");
    let logs = on(&url, &["logs", &before, "--output", "ndjson"]);
    scene.assert_kept(&said(&logs));
    let (code, message) = first_error(&events(&logs));
    assert_eq!(code.as_deref(), Some("BOUNDARY_VIOLATION"), "{message}");
    // Its path leads outside the worker's ceiling now (and, were it not
    // resolved again, has a symlink on it where it was opened).
    assert!(scene.names_the_directory(&message), "{message}");

    // Submitted after the swap: the path leads outside the worker's
    // ceiling, and the worker says so.
    let after = on(
        &url,
        &[
            "run",
            "--allow-read",
            &data,
            ESCAPE,
            &probes,
            "--output",
            "ndjson",
        ],
    );
    scene.assert_kept(&said(&after));
    assert_eq!(after.status.code(), Some(1), "{}", said(&after));
    let (code, message) = first_error(&events(&after));
    assert_eq!(code.as_deref(), Some("BOUNDARY_VIOLATION"), "{message}");
    assert!(scene.names_the_directory(&message), "{message}");
}

/// Fuel enough for a fan-out, an echo and an allocator, burnt by a
/// component that spins in a fraction of a second (far within the
/// parent's 10 s, even on a loaded machine).
const FUEL: u64 = 500_000_000;

/// The parent's wall-clock limit.
const PARENT_TIMEOUT_MS: u64 = 10_000;

/// Fails the test unless `child`'s recorded limits are within the 64 MiB
/// / [`FUEL`] / 10 s `parent`'s: its time ends by the parent's.
fn within_parent(child: &Value, parent: &Value) {
    let limits = &child["limits"];
    assert!(
        limits["maxMemoryBytes"].as_u64().unwrap() <= 64 * MIB,
        "{child}"
    );
    let fuel = limits["fuel"].as_u64().unwrap_or(u64::MAX);
    assert!(fuel <= FUEL, "{child}");
    let timeout = limits["timeoutMs"].as_u64().unwrap_or(u64::MAX);
    assert!(timeout <= PARENT_TIMEOUT_MS, "{child}");
    let parent_from = parent["startedMs"]
        .as_u64()
        .or(parent["createdMs"].as_u64())
        .unwrap();
    let parent_deadline = parent_from + PARENT_TIMEOUT_MS;
    // Counted from the child's admission, just before its record.
    let child_deadline = child["createdMs"].as_u64().unwrap() + timeout;
    assert!(
        child_deadline <= parent_deadline + 1000,
        "the child ends {} ms after its parent: {child}",
        child_deadline.saturating_sub(parent_deadline)
    );
}

#[test]
fn children_a_capped_parents_component_starts_get_no_more_memory_fuel_or_time() {
    let store = tempfile::tempdir().unwrap();
    let store = store.path().join("moat.db");
    let dirs: Vec<&str> = [OOM, SPIN_NEXT]
        .iter()
        .map(|path| Path::new(path).parent().unwrap().to_str().unwrap())
        .collect();
    // fanout's children: an echo, one that allocates until it is stopped,
    // one that spins until it is stopped.
    let agents = json!({"agents": [{"adapter": "echo"}, {"adapter": OOM}, {"adapter": SPIN_NEXT}]});
    let output = moat()
        .env("MOAT_STORE", &store)
        .args(["run", "fanout", "the question", "--output", "json"])
        .args(["--max-memory", "64MiB", "--timeout", "10s"])
        .args(["--fuel", &FUEL.to_string()])
        .args(["--allow-read", &dirs.join(",")])
        .args(["--extra", &agents.to_string()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", said(&output));
    let listed = moat()
        .env("MOAT_STORE", &store)
        .args(["ps", "--all", "--output", "json"])
        .output()
        .unwrap();
    let runs: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let parent = runs.iter().find(|r| r["adapter"] == "fanout").unwrap();
    assert_eq!(parent["limits"]["maxMemoryBytes"], 64 * MIB, "{parent}");
    assert_eq!(parent["limits"]["fuel"], FUEL, "{parent}");
    assert_eq!(parent["limits"]["timeoutMs"], PARENT_TIMEOUT_MS, "{parent}");
    let show = |id: &Value| -> Value {
        let output = moat()
            .env("MOAT_STORE", &store)
            .args(["show", id.as_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", said(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let children: Vec<Value> = runs
        .iter()
        .filter(|r| r["parent"] == parent["id"])
        .map(|r| show(&r["id"]))
        .collect();
    assert_eq!(children.len(), 3, "{runs:?}");
    let code_of = |adapter: &str| {
        let child = children.iter().find(|c| c["adapter"] == adapter).unwrap();
        child["result"]["error"]["code"].clone()
    };
    for child in &children {
        within_parent(child, parent);
    }
    // And held to them: the allocator stopped at the parent's memory, the
    // spinner at its fuel.
    assert_eq!(code_of("oom"), "MEMORY_LIMIT", "{children:?}");
    assert_eq!(code_of("spin-next"), "FUEL_EXHAUSTED", "{children:?}");
    let echo = children.iter().find(|c| c["adapter"] == "echo").unwrap();
    assert_eq!(echo["status"], "completed", "{echo}");
}

#[test]
fn a_child_a_client_asks_for_gets_no_more_than_its_capped_parent() {
    let (_server, mut client) = Server::stdio(&[]);
    let parent = start(
        &mut client,
        json!({
            "adapter": COOPERATIVE,
            "prompt": "go",
            "limits": {
                "maxMemoryBytes": 64 * MIB,
                "fuel": FUEL,
                "timeoutMs": PARENT_TIMEOUT_MS,
                "maxEventBytes": 256 * 1024,
            },
        }),
    );
    let parent_record = client.ok("get", json!({"run": parent}));
    assert_eq!(
        parent_record["limits"]["maxMemoryBytes"],
        64 * MIB,
        "{parent_record}"
    );

    // Asking nothing: the defaults, lowered to fit the parent.
    let child = start(
        &mut client,
        json!({"adapter": "echo", "prompt": "x", "parent": parent}),
    );
    // More time than the parent has left: cut to it.
    let long = start(
        &mut client,
        json!({"adapter": "echo", "prompt": "x", "parent": parent, "limits": {"timeoutMs": 3_600_000}}),
    );
    // The parent's record as it is now, started.
    let parent_record = client.ok("get", json!({"run": parent}));
    for run in [&child, &long] {
        within_parent(&client.ok("get", json!({"run": run})), &parent_record);
    }

    // More memory, fuel or event size than the parent has: refused, naming
    // the limit and the parent.
    for (limits, flag) in [
        (json!({"maxMemoryBytes": 128 * MIB}), "--max-memory"),
        (json!({"fuel": FUEL + 1}), "--fuel"),
        (json!({"maxEventBytes": MIB}), "--max-event-size"),
    ] {
        let error = client.error(
            "run",
            json!({"adapter": "echo", "prompt": "x", "parent": parent, "limits": limits}),
        );
        assert_eq!(error["code"], "BOUNDARY_VIOLATION", "{limits}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(flag) && message.contains(&format!("its parent {parent}")),
            "{limits}: {message}"
        );
    }
    client.ok("cancel", json!({"run": parent}));
}

async fn connect(url: &str) -> Cluster {
    let settings = Settings::new(url, None).expect("settings");
    Cluster::connect(&settings, "moat attack tests")
        .await
        .expect("connects to the cluster")
}

/// The most open files the worker of [`forged_jobs_beyond_a_workers_limits_or_grants_are_refused`] allows.
const WORKER_OPEN_FILES: u64 = 64;

/// The most fuel that worker allows.
const WORKER_FUEL: u64 = 1_000_000_000;

/// An echo job, as a client could put it on the work queue by hand: within
/// the worker's flags until changed.
fn echo_job() -> Job {
    let mut job = Job::new(
        ComponentRef::Builtin {
            name: "echo".into(),
        },
        "echo",
        "forged",
    );
    job.limits.max_open_files = WORKER_OPEN_FILES;
    job
}

/// Job `id`'s record once it ended, and its events.
async fn ended(cluster: &Cluster, id: &str) -> (ClusterRun, Vec<AgentEvent>) {
    let stream = cluster.follow(id, 0).await.expect("follows");
    let events: Vec<AgentEvent> = tokio::time::timeout(
        PATIENCE,
        stream
            .map(|e| e.expect("an event").event)
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap_or_else(|_| panic!("run {id} did not end within {PATIENCE:?}"));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let run = cluster.get(id).await.expect("reads").expect("recorded");
        if run.is_terminal() {
            return (run, events);
        }
        assert!(Instant::now() < deadline, "{id} never ended: {run:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_jobs_beyond_a_workers_limits_or_grants_are_refused() {
    if !nats::available() {
        return;
    }
    let server = nats::server(&[]);
    let url = server.url();
    // A worker that allows at most an hour, a billion fuel and 64 open
    // files, at trust `sandbox`, and grants nothing.
    let _worker = Worker::start(
        &url,
        &[
            "--max-open-files",
            &WORKER_OPEN_FILES.to_string(),
            "--fuel",
            &WORKER_FUEL.to_string(),
            "--timeout",
            "1h",
        ],
    );
    let cluster = connect(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();

    // Within the worker's flags: it runs.
    let fits = echo_job();
    let id = fits.id.clone();
    cluster.submit(fits).await.unwrap();
    let (run, events) = ended(&cluster, &id).await;
    assert_eq!(run.status(), RunStatus::Completed, "{run:?} {events:?}");

    let mut many_files = echo_job();
    many_files.limits.max_open_files = 10_000_000;
    let mut one_more_file = echo_job();
    one_more_file.limits.max_open_files = WORKER_OPEN_FILES + 1;
    let mut memory = echo_job();
    memory.limits.max_memory_bytes = 64 * 1024 * MIB;
    let mut program_memory = echo_job();
    program_memory.limits.max_program_memory_bytes = 2 << 40;
    let mut processes = echo_job();
    processes.limits.max_processes = 100_000;
    let mut fuel = echo_job();
    fuel.limits.fuel = Some(WORKER_FUEL + 1);
    let mut forever = echo_job();
    forever.limits.timeout_ms = None;
    let mut trusted = echo_job();
    trusted.trust = TrustLevel::Unrestricted;
    let mut read = echo_job();
    read.grants = Grants {
        read: vec![dir.clone()],
        ..Grants::none()
    };
    let mut env = echo_job();
    env.grants = Grants {
        env: vec!["HOME".into()],
        ..Grants::none()
    };
    let read_flag = format!("--allow-read={}", dir.display());
    let forged = [
        (many_files, "--max-open-files=10000000"),
        (one_more_file, "--max-open-files=65"),
        (memory, "--max-memory="),
        (program_memory, "--max-memory="),
        (processes, "--max-processes=100000"),
        (fuel, "--fuel=1000000001"),
        (forever, "--timeout=none"),
        (trusted, "--trust=unrestricted"),
        (read, read_flag.as_str()),
        (env, "--allow-env=HOME"),
    ];
    for (job, named) in forged {
        let id = job.id.clone();
        cluster.submit(job).await.unwrap();
        let (run, events) = ended(&cluster, &id).await;
        assert_eq!(run.status(), RunStatus::Failed, "{named}: {run:?}");
        assert_eq!(run.reason.as_deref(), Some(BOUNDARY_VIOLATION), "{named}");
        let dones: Vec<_> = events.iter().filter_map(AgentEvent::as_done).collect();
        assert_eq!(dones.len(), 1, "{named}: {events:?}");
        assert_eq!(dones[0].status, DoneStatus::Error, "{named}");
        let (code, message) = first_error(&events);
        assert_eq!(code.as_deref(), Some("BOUNDARY_VIOLATION"), "{named}");
        assert!(
            message.contains(named) && message.contains("this worker"),
            "{named}: {message}"
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e.payload, EventPayload::Init(_))),
            "{named}: never started: {events:?}"
        );
    }
}
