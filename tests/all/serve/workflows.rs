//! Workflows through the protocol: `workflow_run` starts a workflow file
//! in the server as `moat workflow run` does — its own record, its tasks'
//! runs its children, its state file — a killed server's workflow resumes
//! from its state, `cancel` of its record stops it, and `workflow_status`
//! gives the state `moat workflow status -o json` prints.

use std::path::Path;
use std::time::{Duration, Instant};

use moat_testkit::components::SLEEPY;
use serde_json::{Value, json};

use super::client::{Client, Server, command};

/// A chain A → B → C whose middle task sleeps (2 ms × 1000 ticks): a
/// window to stop the server in.
fn sleepy_chain(project: &Path) -> String {
    std::fs::copy(SLEEPY, project.join("sleepy.wasm")).unwrap();
    let file = project.join("flow.toml");
    std::fs::write(
        &file,
        r#"name = "slow"
[[task]]
id = "A"
adapter = "echo"
prompt = "first"
[[task]]
id = "B"
adapter = "sleepy.wasm"
prompt = "sleep 2 ms a tick, cooperate"
depends_on = ["A"]
[[task]]
id = "C"
adapter = "echo"
prompt = "last"
depends_on = ["B"]
"#,
    )
    .unwrap();
    file.display().to_string()
}

/// Waits until the workflow's task `task` is `status` in its state.
fn until_task(client: &mut Client, file: &str, task: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = client.ok("workflow_status", json!({"file": file}));
        if got["state"]["tasks"][task]["status"] == status {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{task} never became {status}: {got}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `moat ARGS` recording into `store`, in `dir`: its stdout as JSON.
fn moat_json(store: &Path, dir: &Path, args: &[&str]) -> Value {
    let output = command(store).current_dir(dir).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_workflow_started_through_the_protocol_runs_records_and_resumes_as_moat_workflow_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let file = sleepy_chain(&project);
    let store = dir.path().join("moat.db");
    let socket = dir.path().join("moat.sock");

    // Started, then the server killed while B runs.
    let first = Server::socket(&socket, &store, &[]);
    let mut client = Client::connect(&socket);
    let started = client.ok("workflow_run", json!({"file": file}));
    let first_run = started["run"].as_str().unwrap().to_owned();
    let record = client.ok("get", json!({"run": first_run}));
    assert_eq!(record["adapter"], "workflow", "{record}");
    until_task(&mut client, &file, "B", "RUNNING");
    drop(client);
    drop(first);

    let mut server = Server::socket(&socket, &store, &[]);
    let mut client = Client::connect(&socket);
    let state = client.ok("workflow_status", json!({"file": file}));
    assert_eq!(state["workflow"], "slow");
    assert_eq!(state["state"]["status"], "running");
    assert_eq!(state["state"]["tasks"]["A"]["status"], "COMPLETED");
    // Started again, it is refused as `moat workflow run` refuses it.
    let refused = client.error("workflow_run", json!({"file": file}));
    assert_eq!(refused["code"], "CONFLICT", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("\"resume\": true"),
        "{refused}"
    );
    // Resumed: A is skipped, B and C run, as the children of its new
    // record.
    let resumed = client.ok("workflow_run", json!({"file": file, "resume": true}));
    let second_run = resumed["run"].as_str().unwrap().to_owned();
    assert_ne!(second_run, first_run);
    let awaited = client.ok("await", json!({"runs": [second_run]}));
    assert!(awaited["results"][&second_run].is_object(), "{awaited}");
    let record = client.ok("get", json!({"run": second_run}));
    assert_eq!(record["status"], "completed", "{record}");
    let children = client.ok("list", json!({"parent": second_run}));
    let mut tasks: Vec<String> = children["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            assert_eq!(run["status"], "completed", "{run}");
            run["role"].as_str().unwrap().to_owned()
        })
        .collect();
    tasks.sort();
    assert_eq!(tasks, ["B", "C"]);
    let state = client.ok("workflow_status", json!({"file": file}));
    assert_eq!(state["state"]["status"], "completed", "{state}");
    assert_eq!(state["state"]["runs"], json!([first_run, second_run]));
    // The store saw the killed server: its workflow failed with `engine
    // restart`, as a killed `moat workflow run`'s does.
    let first = client.ok("get", json!({"run": first_run}));
    assert_eq!(first["status"], "failed");
    assert_eq!(first["reason"], "engine restart");
    // The CLI reads the same state and the same records.
    let cli_state = moat_json(
        &store,
        &project,
        &["workflow", "status", "flow.toml", "--output", "json"],
    );
    assert_eq!(cli_state, state["state"]);
    let listed = moat_json(&store, &project, &["ps", "--all", "--output", "json"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|run| run["id"] == second_run.as_str() && run["adapter"] == "workflow"),
        "{listed}"
    );
    client.ok("shutdown", json!({}));
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
}

#[test]
fn cancel_of_a_workflows_record_stops_it_and_a_workflow_that_cannot_start_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = sleepy_chain(dir.path());
    let (_server, mut client) = Server::stdio(&[]);
    // Nothing to resume.
    let nothing = client.error("workflow_run", json!({"file": file, "resume": true}));
    assert_eq!(nothing["code"], "NOT_FOUND", "{nothing}");
    // A path the server cannot place.
    let relative = client.error("workflow_run", json!({"file": "flow.toml"}));
    assert_eq!(relative["code"], "INVALID_REQUEST", "{relative}");
    assert!(
        relative["message"].as_str().unwrap().contains("absolute"),
        "{relative}"
    );
    // A file with a mistake: its line, as `moat workflow validate` says.
    let broken = dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        "[[task]]\nid = \"a\"\nadapter = \"echo\"\npromt = \"hi\"\n",
    )
    .unwrap();
    let refused = client.error(
        "workflow_run",
        json!({"file": broken.display().to_string()}),
    );
    assert_eq!(refused["code"], "INVALID_REQUEST", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("broken.toml:4") && message.contains("did you mean `prompt`?"),
        "{refused}"
    );

    let started = client.ok("workflow_run", json!({"file": file}));
    let run = started["run"].as_str().unwrap().to_owned();
    until_task(&mut client, &file, "B", "RUNNING");
    client.ok("cancel", json!({"run": run}));
    let failed = client.error("await", json!({"runs": [run]}));
    assert_eq!(failed["code"], "RUN_FAILED", "{failed}");
    let record = client.ok("get", json!({"run": run}));
    assert_eq!(record["reason"], "cancelled", "{record}");
    let state = client.ok("workflow_status", json!({"file": file}));
    assert_eq!(state["state"]["status"], "cancelled", "{state}");
    assert_ne!(state["state"]["tasks"]["C"]["status"], "COMPLETED");
}

#[test]
fn a_servers_shutdown_cancels_its_workflows_and_ends_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let file = sleepy_chain(&project);
    let store = dir.path().join("moat.db");
    let socket = dir.path().join("moat.sock");
    let mut server = Server::socket(&socket, &store, &[]);
    let mut client = Client::connect(&socket);
    let run = client.ok("workflow_run", json!({"file": file}))["run"]
        .as_str()
        .unwrap()
        .to_owned();
    until_task(&mut client, &file, "B", "RUNNING");
    client.ok("shutdown", json!({}));
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
    // Its record ended cancelled, not left running for the next moat to
    // call lost; its state says so, and so does its task's run.
    let record = moat_json(&store, &project, &["show", &run, "--json"]);
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["reason"], "cancelled", "{record}");
    let state = moat_json(
        &store,
        &project,
        &["workflow", "status", "flow.toml", "--output", "json"],
    );
    assert_eq!(state["status"], "cancelled", "{state}");
    let children = moat_json(&store, &project, &["ps", "--all", "--output", "json"]);
    let b = children
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["parent"] == run.as_str() && r["role"] == "B")
        .expect("B's run");
    assert_eq!(b["reason"], "cancelled", "{b}");
}
