//! Budgets through the real binary: a run's spending is counted as its
//! model calls report usage, and past its budget it ends `max_budget`;
//! budgets narrow like grants (a child asks at most what its parent has
//! left), and a workflow's budget covers all its tasks.

use std::path::Path;
use std::process::{Command, Output};

use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};
use serde_json::{Value, json};

use super::common::{events, moat};

fn moat_in(store: &Path) -> Command {
    let mut command = moat();
    command.env("MOAT_STORE", store.join("moat.db"));
    command
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Prices that make 1,000 input and 100 output tokens cost $0.11.
fn price_table(dir: &Path) -> String {
    let path = dir.join("prices.json");
    std::fs::write(
        &path,
        json!({"models": {"llama3.2": {"inputPerMTok": 100.0, "outputPerMTok": 100.0}}})
            .to_string(),
    )
    .unwrap();
    path.display().to_string()
}

/// An MCP config with the stub server, for the tool loop.
fn mcp_config(dir: &Path) -> (String, String) {
    let stub = moat_testkit::mcp_stub().display().to_string();
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"stub": {"command": stub}}}).to_string(),
    )
    .unwrap();
    (config.display().to_string(), stub)
}

/// A stand-in that answers every call with a tool call (1,000 input and
/// 100 output tokens each), `turns` times, then with an answer.
fn tool_turns(turns: usize) -> LlmServer {
    let mut replies: Vec<Reply> = (0..turns)
        .map(|n| {
            Reply::sse(&openai_tool_turn(
                &format!("call_{n}"),
                "mcp__stub__echo",
                &json!({"text": "again"}),
                (1000, 100),
            ))
        })
        .collect();
    replies.push(Reply::sse(&openai_answer("done at last", (1000, 100))));
    LlmServer::start_turns(replies)
}

/// `moat run openai` looping on `server`'s tool turns (with the MCP stub
/// as its tool), with `flags`.
fn openai_loop(dir: &Path, server: &LlmServer, flags: &[&str]) -> Output {
    let (config, stub) = mcp_config(dir);
    moat_in(dir)
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args(["run", "openai", "Loop", "--model", "llama3.2"])
        .args(flags)
        .arg(format!("--allow-net={}", server.grant()))
        .args(["--mcp-config", &config, "--allow-run", &stub])
        .output()
        .unwrap()
}

#[test]
fn an_openai_run_stops_at_its_budget_as_the_calls_report_usage_and_says_what_it_spent() {
    let dir = tempfile::tempdir().unwrap();
    let server = tool_turns(4);
    let prices = price_table(dir.path());
    let output = openai_loop(
        dir.path(),
        &server,
        &[
            "--output",
            "ndjson",
            "--max-budget-usd",
            "0.2",
            "--price-table",
            &prices,
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let events = events(&output);
    // Two calls ($0.11 each) crossed $0.20: no third call was made.
    assert_eq!(server.requests().len(), 2);
    let usage: Vec<&Value> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Extension(ext) if ext.name == "moat:usage" => Some(&ext.payload),
            _ => None,
        })
        .collect();
    assert_eq!(usage.len(), 2, "one usage event per call");
    assert_eq!(usage[0]["inputTokens"], 1000);
    let error = events
        .iter()
        .filter_map(AgentEvent::as_error)
        .find(|error| error.code.as_deref() == Some("BUDGET_EXCEEDED"))
        .expect("a BUDGET_EXCEEDED error");
    assert!(
        error
            .message
            .contains("spent $0.22 (2200 tokens) of its budget of $0.20"),
        "{}",
        error.message
    );
    let done = events
        .last()
        .and_then(AgentEvent::as_done)
        .expect("done last");
    assert_eq!(done.status, DoneStatus::MaxBudget);
    // The spend is in the result: the run's tokens and their cost.
    let tokens = done.usage.tokens.expect("tokens");
    assert_eq!(tokens.input.total + tokens.output.total, 2200);
    assert!((done.usage.cost.expect("a cost").usd - 0.22).abs() < 1e-9);

    let shown = moat_in(dir.path())
        .args(["show", "@last"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("budget       $0.20; spent $0.22 (2200 tokens), left $0.00"),
        "{shown}"
    );
    assert!(shown.contains("failed (max budget)"), "{shown}");
}

#[test]
fn a_token_budget_stops_a_run_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let server = tool_turns(4);
    let output = openai_loop(
        dir.path(),
        &server,
        &["--output", "json", "--max-tokens", "3000"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "max_budget", "{result}");
    assert_eq!(server.requests().len(), 3, "3,300 tokens crossed 3,000");
    let bad = moat_in(dir.path())
        .args(["run", "echo", "hi", "--max-tokens", "lots"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("not a number of tokens"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_child_may_ask_only_for_what_its_parent_has_left() {
    let dir = tempfile::tempdir().unwrap();
    // The first child lives on (a sleeping component), holding its $0.80.
    let sleepy = moat_testkit::components::SLEEPY;
    let components = Path::new(sleepy).parent().unwrap().display().to_string();
    let agents = json!({"agents": [
        {"adapter": sleepy, "prompt": "50 cooperate", "options": {"maxBudgetUsd": 0.8}},
        {"adapter": "echo", "options": {"maxBudgetUsd": 0.8}},
    ]});
    let output = moat_in(dir.path())
        .args(["run", "fanout", "hello", "--output", "ndjson"])
        .args(["--max-budget-usd", "1.0", "--extra", &agents.to_string()])
        .arg(format!("--allow-read={components}"))
        .output()
        .unwrap();
    let events = events(&output);
    let said: Vec<String> = events
        .iter()
        .filter_map(AgentEvent::as_error)
        .map(|error| error.message.clone())
        .collect();
    // The first child has $0.80 set aside: the second may not have it too.
    assert!(
        said.iter()
            .any(|message| message.contains("--max-budget-usd=0.80")
                && message.contains("more than its parent")
                && message.contains("($0.20)")),
        "{said:?}"
    );
    assert_ne!(
        events.last().and_then(AgentEvent::as_done).unwrap().status,
        DoneStatus::Success
    );
    // Asking within what is left is fine.
    let agents = json!({"agents": [
        {"adapter": "echo", "options": {"maxBudgetUsd": 0.6}},
        {"adapter": "echo", "options": {"maxBudgetUsd": 0.4}},
    ]});
    let output = moat_in(dir.path())
        .args(["run", "fanout", "hello", "--output", "json"])
        .args(["--max-budget-usd", "1.0", "--extra", &agents.to_string()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn a_workflows_budget_covers_its_tasks_and_stops_dispatching_once_spent() {
    let dir = tempfile::tempdir().unwrap();
    // Each task's one call: 1,100 tokens.
    let server = LlmServer::start_turns(vec![
        Reply::sse(&openai_answer("a", (1000, 100))),
        Reply::sse(&openai_answer("b", (1000, 100))),
        Reply::sse(&openai_answer("c", (1000, 100))),
    ]);
    let task = |id: &str, after: Option<&str>| {
        let depends = after
            .map(|after| format!("depends_on = [\"{after}\"]\n"))
            .unwrap_or_default();
        format!(
            "[[task]]\nid = \"{id}\"\nadapter = \"openai\"\nprompt = \"go\"\n{depends}[task.options]\nmodel = \"llama3.2\"\n\n"
        )
    };
    let file = format!(
        "name = \"spend\"\n\n{}{}{}",
        task("a", None),
        task("b", Some("a")),
        task("c", Some("b"))
    );
    std::fs::write(dir.path().join("spend.toml"), file).unwrap();
    let output = moat_in(dir.path())
        .current_dir(dir.path())
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args(["workflow", "run", "spend.toml", "--max-tokens", "2000"])
        .arg(format!("--allow-net={}", server.grant()))
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0));
    let said = stderr(&output);
    assert!(
        said.contains("the workflow's budget of 2000 tokens is spent; nothing more was dispatched"),
        "{said}"
    );
    assert_eq!(server.requests().len(), 2, "c was never dispatched");
}

#[test]
fn a_policy_files_budget_and_asked_tools_reach_the_runs_of_its_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "max-tokens = 100000\n\n[adapters.openai]\nmax-tokens = 3000\n",
    )
    .unwrap();
    let server = tool_turns(4);
    let output = openai_loop(
        dir.path(),
        &server,
        &["--output", "json", "--policy", policy.to_str().unwrap()],
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "max_budget", "{result}");
    assert_eq!(server.requests().len(), 3, "the adapter's own 3,000 tokens");
    // Asking for more than the policy allows is refused, in its words.
    let more = moat_in(dir.path())
        .args(["run", "openai", "x", "--model", "m", "--max-tokens", "5000"])
        .args(["--policy", policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ne!(more.status.code(), Some(0));
    assert!(
        stderr(&more).contains("--max-tokens=5000"),
        "{}",
        stderr(&more)
    );

    // Its ask-tools make the run ask: the gemini adapter, which cannot,
    // refuses it rather than run the tool unasked.
    std::fs::write(&policy, "[adapters.gemini]\nask-tools = [\"Bash\"]\n").unwrap();
    let asked = moat_in(dir.path())
        .args(["run", "gemini", "x", "--output", "ndjson"])
        .args(["--policy", policy.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&asked.stdout);
    assert!(said.contains("--ask-tools Bash"), "{said}");
    // A bad entry is one line naming the key.
    std::fs::write(&policy, "max-budget-usd = -1\n").unwrap();
    let bad = moat_in(dir.path())
        .args(["run", "echo", "x", "--policy", policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("max-budget-usd"), "{}", stderr(&bad));
}

#[test]
fn a_budget_in_dollars_that_nothing_prices_stops_the_run_instead_of_being_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let server = tool_turns(4);
    // No price table, and the stand-in reports tokens, not costs.
    let output = openai_loop(
        dir.path(),
        &server,
        &["--output", "ndjson", "--max-budget-usd", "5"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let events = events(&output);
    let error = events
        .iter()
        .filter_map(AgentEvent::as_error)
        .find(|error| error.code.as_deref() == Some("BUDGET_UNPRICED"))
        .expect("a BUDGET_UNPRICED error");
    assert!(
        error.message.contains("--price-table") && error.message.contains("llama3.2"),
        "{}",
        error.message
    );
    assert_eq!(
        server.requests().len(),
        1,
        "stopped after its first unpriced call"
    );
}
