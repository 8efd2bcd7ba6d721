//! One request type in five dialects, through the real binary: the same
//! invalid request — a memory cap that is no size — written as a flag, a
//! policy file's key, a tasks file's key, a workflow task's key and a
//! protocol `run`'s field is the same refusal, naming the field as each
//! spells it; and a field added to the request (`max_model_calls`) is
//! taken by every dialect, and kept.

use std::path::Path;

use moat_engine::{AgentEvent, DoneStatus};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};
use serde_json::{Value, json};

use super::common::{events, fed, moat_in};

/// What every dialect's refusal says of `lots` as a memory cap.
const PROBLEM: &str = "`lots` is not a size; use e.g. 64MiB, 256MiB or 1GiB";

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_flag_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let output = moat_in(dir.path())
        .args(["run", "echo", "hi", "--max-memory", "lots"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr(&output), format!("moat: --max-memory: {PROBLEM}\n"));
}

#[test]
fn a_policy_file_names_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[adapters.echo]\nmax-memory = \"lots\"\n").unwrap();
    let output = moat_in(dir.path())
        .args(["run", "echo", "hi", "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("[adapters.echo] max-memory: {PROBLEM}")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_tasks_file_names_its_key_and_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.json");
    std::fs::write(
        &tasks,
        json!([{"adapter": "echo", "prompt": "a"}, {"adapter": "echo", "prompt": "b", "maxMemory": "lots"}])
            .to_string(),
    )
    .unwrap();
    let output = moat_in(dir.path())
        .args(["parallel", "--tasks"])
        .arg(&tasks)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("task 2: maxMemory: {PROBLEM}")),
        "{err}"
    );
}

#[test]
fn a_workflow_task_names_its_key_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workflow.toml");
    std::fs::write(
        &file,
        "[[task]]\nid = \"only\"\nadapter = \"echo\"\nprompt = \"hi\"\n[task.limits]\nmax_memory = \"lots\"\n",
    )
    .unwrap();
    let output = moat_in(dir.path())
        .args(["workflow", "validate"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("limits.max_memory: {PROBLEM}")),
        "{err}"
    );
    // Where in the file.
    assert!(err.contains(":6:"), "the line of the key: {err}");
}

#[test]
fn a_protocol_run_names_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let request = json!({"id": 1, "op": "run", "adapter": "echo", "prompt": "hi",
                         "limits": {"maxMemoryBytes": "lots"}});
    let output = fed(
        moat_in(dir.path()).args(["serve", "--stdio"]),
        format!("{request}\n").as_bytes(),
    );
    let answer: Value = serde_json::from_str(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(answer["error"]["code"], "INVALID_REQUEST", "{answer}");
    assert_eq!(
        answer["error"]["message"],
        format!("limits.maxMemoryBytes: {PROBLEM}")
    );
}

/// A stand-in that answers every call with a tool call, `turns` times,
/// then with an answer.
fn tool_turns(turns: usize) -> LlmServer {
    let mut replies: Vec<Reply> = (0..turns)
        .map(|n| {
            Reply::sse(&openai_tool_turn(
                &format!("call_{n}"),
                "mcp__stub__echo",
                &json!({"text": "again"}),
                (10, 5),
            ))
        })
        .collect();
    replies.push(Reply::sse(&openai_answer("done at last", (10, 5))));
    LlmServer::start_turns(replies)
}

/// `moat ARGS` running the openai adapter's tool loop against `server`.
fn openai_loop(dir: &Path, server: &LlmServer, args: &[&str]) -> std::process::Output {
    let stub = moat_testkit::mcp_stub().display().to_string();
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"stub": {"command": stub}}}).to_string(),
    )
    .unwrap();
    moat_in(dir)
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args(args)
        .arg(format!("--allow-net={}", server.grant()))
        .args([
            "--mcp-config",
            &config.display().to_string(),
            "--allow-run",
            &stub,
        ])
        .output()
        .unwrap()
}

fn done(events: &[AgentEvent]) -> &moat_engine::DonePayload {
    events
        .last()
        .and_then(AgentEvent::as_done)
        .expect("done last")
}

#[test]
fn a_limit_of_model_calls_stops_a_tool_loop_at_its_last_call_in_every_dialect() {
    let dir = tempfile::tempdir().unwrap();
    // The flag.
    let server = tool_turns(5);
    let output = openai_loop(
        dir.path(),
        &server,
        &[
            "run",
            "openai",
            "Loop",
            "--model",
            "m",
            "--max-model-calls",
            "2",
            "-o",
            "ndjson",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(server.requests().len(), 2, "no third call");
    let events = events(&output);
    assert_eq!(done(&events).status, DoneStatus::MaxBudget);
    let error = events
        .iter()
        .filter_map(AgentEvent::as_error)
        .find(|error| error.code.as_deref() == Some("BUDGET_EXCEEDED"))
        .expect("BUDGET_EXCEEDED");
    assert!(
        error.message.contains("2 model calls")
            && error.message.contains("of its budget of 2 model calls"),
        "{}",
        error.message
    );
    // A policy file's key: the most a run of the adapter may have.
    let server = tool_turns(5);
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[adapters.openai]\nmax-model-calls = 3\n").unwrap();
    let output = openai_loop(
        dir.path(),
        &server,
        &[
            "run",
            "openai",
            "Loop",
            "--model",
            "m",
            "--policy",
            &policy.display().to_string(),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(server.requests().len(), 3);
    // A tasks file's key.
    let server = tool_turns(5);
    let tasks = dir.path().join("tasks.json");
    std::fs::write(
        &tasks,
        json!([{"adapter": "openai", "prompt": "Loop", "model": "m", "maxModelCalls": 1}])
            .to_string(),
    )
    .unwrap();
    let output = openai_loop(
        dir.path(),
        &server,
        &[
            "parallel",
            "--tasks",
            &tasks.display().to_string(),
            "-o",
            "ndjson",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(server.requests().len(), 1);
    // A workflow task's key: stopped at its one call, before the tool.
    let server = tool_turns(5);
    let flow = dir.path().join("flow.toml");
    std::fs::write(
        &flow,
        format!(
            "[[task]]\nid = \"loop\"\nadapter = \"openai\"\nprompt = \"Loop\"\n\
             [task.options]\nmodel = \"m\"\nextra = {{ base_url = \"{}/v1\" }}\n\
             [task.grants]\nnet = [\"{}\"]\n[task.limits]\nmax_model_calls = 1\n",
            server.url(),
            server.grant()
        ),
    )
    .unwrap();
    let output = moat_in(dir.path())
        .args(["workflow", "run"])
        .arg(&flow)
        .args(["-o", "ndjson", "--allow-net", &server.grant()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(server.requests().len(), 1);
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("BUDGET_EXCEEDED: the run spent 15 tokens in 1 model call of its budget of 1 model call;"),
        "{out}"
    );
    // The protocol's field (and the record keeps the limit).
    let server = tool_turns(5);
    let stub = moat_testkit::mcp_stub().display().to_string();
    let (_serve, mut client) = crate::serve::client::Server::stdio(&[
        "--allow-net",
        &server.grant(),
        "--allow-run",
        &stub,
    ]);
    let started = client.ok(
        "run",
        json!({"adapter": "openai", "prompt": "Loop",
            "options": {"model": "m", "mcpServers": {"stub": {"command": stub}},
                        "extra": {"base_url": format!("{}/v1", server.url())}},
            "grants": {"net": [server.grant()], "run": [stub]},
            "limits": {"maxModelCalls": 2}}),
    );
    let id = started["run"].as_str().unwrap().to_owned();
    let failed = client.error("await", json!({"runs": [id]}));
    assert_eq!(failed["code"], "RUN_FAILED", "{failed}");
    assert_eq!(
        failed["data"]["results"][&id]["status"], "max_budget",
        "{failed}"
    );
    assert_eq!(server.requests().len(), 2);
    let record = client.ok("get", json!({"run": id}));
    assert_eq!(record["limits"]["maxModelCalls"], 2, "{record}");
}
