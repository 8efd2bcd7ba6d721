//! `moat run --output json`: the run's result (the engine contract's
//! EngineResult, folded from its events) as the only thing on stdout —
//! from a real CLI's recording, the built-in echo and a crashing
//! component — and the same result in `moat show --json`.

use std::process::Output;

use moat_testkit::components::PANIC;
use serde_json::{Value, json};

use super::adapters::StandIn;
use super::common::moat;

/// The one JSON object on stdout.
fn result(output: &Output) -> Value {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_claude_code_run_gives_its_answer_usage_turns_and_cost_but_not_its_narration() {
    let cli = StandIn::new("claude", "claude", "tool-use", None, "exit 0");
    let output = moat()
        .args(["run", "claude-code", "Run a command.", "--output", "json"])
        .args(["--trust", "unrestricted"])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = result(&output);
    assert_eq!(result["status"], "success");
    // "Let me run a command." came with the tool call: narration, not the
    // answer.
    assert_eq!(result["text"], "The command printed moat-tool-use.");
    let session = "e46c405f-a3fd-49f0-beda-50dd63f16bb5";
    assert_eq!(result["sessionId"], session);
    assert_eq!(result["resumeToken"], session);
    assert_eq!(result["turns"], 2);
    assert!(result["durationMs"].as_u64().is_some());
    assert!(
        result["runId"].as_str().unwrap().starts_with("r_"),
        "{result}"
    );
    // The usage has the shape of the done's (cligent's DoneUsage).
    let usage = &result["usage"];
    assert_eq!(usage["toolUses"], 1);
    assert_eq!(
        usage["cost"],
        serde_json::json!({"amount": 0.0037158, "currency": "USD", "source": "agent-estimate"})
    );
    let totals = &usage["tokens"]["totals"];
    for figure in [
        &totals["input"]["total"],
        &totals["output"]["total"],
        &totals["input"]["cacheRead"],
        &totals["input"]["cacheWrite"],
    ] {
        assert!(figure.as_u64().is_some(), "{usage}");
    }
    assert!(result.get("error").is_none());
}

#[test]
fn what_the_backend_did_not_report_is_absent_and_a_crash_carries_its_error() {
    let echo = moat()
        .args(["run", "echo", "hello", "--output", "json", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(echo.status.code(), Some(0), "{}", stderr(&echo));
    let echoed = result(&echo);
    assert_eq!(echoed["status"], "success");
    assert!(echoed["text"].as_str().unwrap().contains("hello"));
    let usage = echoed["usage"].as_object().unwrap();
    for absent in ["tokens", "cost"] {
        assert!(
            !usage.contains_key(absent),
            "{absent} was invented: {usage:?}"
        );
    }
    assert!(echoed.get("turns").is_none(), "{echoed}");

    let crash = moat()
        .args(["run", PANIC, "x", "--output", "json", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(crash.status.code(), Some(1));
    let crashed = result(&crash);
    assert_eq!(crashed["status"], "error");
    assert_eq!(crashed["error"]["code"], "ADAPTER_ERROR");
    assert!(crashed.get("text").is_none());
}

#[test]
fn show_json_gives_a_stored_run_the_result_run_printed_and_parallel_refuses_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("moat.db");
    let run = moat()
        .env("MOAT_STORE", &store)
        .args(["run", "echo", "stored", "--output", "json"])
        .output()
        .unwrap();
    let printed = result(&run);
    let listed = moat()
        .env("MOAT_STORE", &store)
        .args(["ps", "--all", "--output", "json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap();
    let shown = moat()
        .env("MOAT_STORE", &store)
        .args(["show", id, "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["result"], printed);

    let parallel = moat()
        .args(["parallel", "--task", "echo=a", "--task", "echo=b"])
        .args(["--output", "json", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(parallel.status.code(), Some(2));
    let message = stderr(&parallel);
    assert!(message.contains("--output ndjson"), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert_eq!(json!(parallel.stdout), json!([]));
}

#[test]
fn pretty_shows_narration_and_tool_lines_as_they_come_and_the_answer_set_apart_at_the_end() {
    let cli = StandIn::new("claude", "claude", "tool-use", None, "exit 0");
    let output = moat()
        .args(["run", "claude-code", "Run a command.", "--output", "pretty"])
        .args(["--trust", "unrestricted", "--no-store"])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |wanted: &str| {
        lines
            .iter()
            .position(|line| *line == wanted)
            .unwrap_or_else(|| panic!("no line {wanted:?} in:\n{stdout}"))
    };
    let narration = at("Let me run a command.");
    let call = at("→ Bash Run `echo moat-tool-use`");
    let answer = at("The command printed moat-tool-use.");
    assert!(narration < call && call < answer, "{stdout}");
    assert_eq!(lines[answer - 1], "", "set apart: {stdout}");
    assert_eq!(lines[answer + 1], "", "set apart: {stdout}");
    assert_eq!(
        stdout.matches("The command printed moat-tool-use.").count(),
        1,
        "the answer once: {stdout}"
    );
}

#[test]
fn a_price_table_that_cannot_be_used_is_one_line_naming_the_flag_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("prices.json");
    std::fs::write(
        &table,
        r#"{"models": {"m": {"inputPerMTok": -1, "outputPerMTok": 1}}}"#,
    )
    .unwrap();
    for (file, problem) in [
        (table.to_str().unwrap(), "not a number of dollars"),
        ("/no/such/prices.json", "cannot read /no/such/prices.json"),
    ] {
        let output = moat()
            .args(["run", "echo", "hi", "--no-store", "--price-table", file])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let message = stderr(&output);
        assert!(message.contains("--price-table"), "{message}");
        assert!(message.contains(problem), "{message}");
        assert_eq!(message.trim().lines().count(), 1, "{message}");
    }
}

#[test]
fn continue_resumes_a_recorded_runs_session_with_the_same_adapter_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("moat.db");
    let first = StandIn::new("claude", "claude", "text", None, "exit 0");
    let run = moat()
        .env("MOAT_STORE", &store)
        .args(["run", "claude-code", "Say hello.", "--output", "json"])
        .args(first.grant_flags())
        .args(["--extra", &first.extra()])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let token = result(&run)["resumeToken"].as_str().unwrap().to_owned();
    let listed = moat()
        .env("MOAT_STORE", &store)
        .args(["ps", "--all", "--output", "json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_owned();

    let second = StandIn::new("claude", "claude", "text", None, "exit 0");
    let continued = moat()
        .env("MOAT_STORE", &store)
        .args(["run", "claude-code", "And again.", "--output", "json"])
        .args(["--continue", &id[..10]])
        .args(second.grant_flags())
        .args(["--extra", &second.extra()])
        .output()
        .unwrap();
    assert_eq!(continued.status.code(), Some(0), "{}", stderr(&continued));
    let args = second.args();
    assert!(args.contains(&format!("--resume={token}")), "{args:?}");

    let wrong = moat()
        .env("MOAT_STORE", &store)
        .args(["run", "echo", "hi", "--continue", &id])
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(2));
    let message = stderr(&wrong);
    assert!(
        message.contains("used the adapter claude-code, not echo"),
        "{message}"
    );
    assert_eq!(message.trim().lines().count(), 1, "{message}");
}

#[test]
fn add_dir_and_agents_reach_claude_code_add_dir_is_granted_by_trust_and_others_refuse() {
    let data = tempfile::tempdir().unwrap();
    let data = std::fs::canonicalize(data.path()).unwrap();
    let agents_dir = tempfile::tempdir().unwrap();
    let agents = agents_dir.path().join("agents.json");
    std::fs::write(
        &agents,
        r#"{"reviewer": {"description": "Reviews", "prompt": "Review."}}"#,
    )
    .unwrap();
    let cli = StandIn::new("claude", "claude", "text", None, "exit 0");
    let output = moat()
        .args([
            "run",
            "claude-code",
            "Say hello.",
            "--no-store",
            "--output",
            "json",
        ])
        .args(["--trust", "controlled", "--add-dir", data.to_str().unwrap()])
        .args(["--agents", agents.to_str().unwrap()])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let args = cli.args();
    assert!(
        args.contains(&format!("--add-dir={}", data.display())),
        "{args:?}"
    );
    assert!(
        args.iter()
            .any(|a| a.starts_with("--agents=") && a.contains("reviewer")),
        "{args:?}"
    );

    // The directory is granted as the working directory is: read-write
    // from trust controlled on, nothing at sandbox.
    let grants = |trust: &str| -> Value {
        let inspected = moat()
            .args(["inspect", "echo", "--json", "--trust", trust])
            .args(["--add-dir", data.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(inspected.status.code(), Some(0), "{}", stderr(&inspected));
        serde_json::from_slice::<Value>(&inspected.stdout).unwrap()["grants"].clone()
    };
    let dir = json!(data.to_str().unwrap());
    let controlled = grants("controlled");
    assert!(
        controlled["read"].as_array().unwrap().contains(&dir),
        "{controlled}"
    );
    assert!(
        controlled["write"].as_array().unwrap().contains(&dir),
        "{controlled}"
    );
    let sandboxed = grants("sandbox");
    assert!(
        !sandboxed.to_string().contains(data.to_str().unwrap()),
        "{sandboxed}"
    );

    // An adapter whose backend cannot take it refuses before it starts.
    let refused = moat()
        .args([
            "run",
            "openai",
            "hi",
            "--no-store",
            "--output",
            "json",
            "--model",
            "m",
        ])
        .args(["--add-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let refusal = result(&refused);
    assert_eq!(refusal["error"]["code"], "UNSUPPORTED_OPTION");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no files")
    );
}

#[test]
fn mcp_config_reaches_claude_code_when_its_programs_are_granted_and_is_refused_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        r#"{"mcpServers": {"files": {"command": "mcp-server-filesystem", "args": ["/data"]}}}"#,
    )
    .unwrap();
    let cli = StandIn::new("claude", "claude", "text", None, "exit 0");
    let ungranted = moat()
        .args(["run", "claude-code", "hi", "--no-store", "--output", "json"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .output()
        .unwrap();
    assert_eq!(ungranted.status.code(), Some(2));
    let message = stderr(&ungranted);
    assert!(
        message.contains("MCP server files runs mcp-server-filesystem")
            && message.contains("--allow-run=mcp-server-filesystem"),
        "{message}"
    );
    assert_eq!(message.trim().lines().count(), 1, "{message}");

    let granted = moat()
        .args(["run", "claude-code", "hi", "--no-store", "--output", "json"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .args(["--allow-run", "mcp-server-filesystem"])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .output()
        .unwrap();
    assert_eq!(granted.status.code(), Some(0), "{}", stderr(&granted));
    let args = cli.args();
    assert!(
        args.contains(
            &r#"--mcp-config={"mcpServers":{"files":{"args":["/data"],"command":"mcp-server-filesystem"}}}"#
                .to_owned()
        ),
        "{args:?}"
    );

    std::fs::write(&config, r#"{"mcpServers": {"bad name": {"command": "x"}}}"#).unwrap();
    let bad = moat()
        .args(["run", "echo", "hi", "--no-store"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("\"bad name\""), "{}", stderr(&bad));
}

#[test]
fn moat_run_openai_with_an_mcp_config_runs_the_tool_loop_and_reports_its_turns() {
    use moat_testkit::llm_server::{LlmServer, Reply};
    use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};

    let dir = tempfile::tempdir().unwrap();
    let stub = moat_testkit::mcp_stub().display().to_string();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"stub": {"command": stub}}}).to_string(),
    )
    .unwrap();
    let server = LlmServer::start_turns(vec![
        Reply::sse(&openai_tool_turn(
            "call_1",
            "mcp__stub__echo",
            &json!({"text": "from the tool"}),
            (40, 8),
        )),
        Reply::sse(&openai_answer("It said: from the tool.", (60, 6))),
    ]);
    let output = moat()
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args(["run", "openai", "Echo something", "--model", "llama3.2"])
        .args(["--no-store", "--output", "json"])
        .arg(format!("--allow-net={}", server.grant()))
        .args(["--mcp-config", config.to_str().unwrap()])
        .args(["--allow-run", &stub])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = result(&output);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["text"], "It said: from the tool.");
    assert_eq!(result["turns"], 2);
    assert_eq!(result["usage"]["toolUses"], 1);
    assert_eq!(result["usage"]["tokens"]["totals"]["input"]["total"], 100);
    assert_eq!(result["usage"]["tokens"]["totals"]["output"]["total"], 14);
    assert_eq!(server.requests().len(), 2);
}
