//! `moat acp`: moat as an ACP agent, driven by the official ACP TypeScript
//! SDK as an editor drives it (tests/acp/editor.test.mjs, node:test), the
//! real `moat` binary on the other end. What the editor cannot see — what
//! the model was sent, which tools were called — is checked here.
//!
//! `scripts/test` installs the SDK (`npm ci --prefix tests/acp`) and sets
//! `MOAT_REQUIRE_CLIENTS=1`; without the SDK a plain `cargo test` skips
//! the suite, saying how to install it.

use std::process::Command;

use moat_testkit::components::COOPERATIVE;
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};
use serde_json::json;

#[test]
fn an_editor_drives_sandboxed_runs_through_moat_acp_with_the_official_sdk() {
    let dir = moat_testkit::repo_root().join("tests/acp");
    if !dir.join("node_modules/@agentclientprotocol/sdk").exists() {
        let required = std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() == Ok("1");
        assert!(
            !required,
            "the ACP SDK is not installed: npm ci --prefix tests/acp"
        );
        eprintln!("skipped: the ACP SDK is not installed (npm ci --prefix tests/acp)");
        return;
    }
    // The model: two answers, then a call of the MCP stub's echo (which
    // the editor is asked about and approves), then the last answer.
    let server = LlmServer::start_turns(vec![
        Reply::sse(&openai_answer("first answer", (10, 5))),
        Reply::sse(&openai_answer("second answer", (10, 5))),
        Reply::sse(&openai_tool_turn(
            "call_1",
            "mcp__stub__echo",
            &json!({"text": "hi"}),
            (10, 5),
        )),
        Reply::sse(&openai_answer("finished", (10, 5))),
    ]);
    let work = tempfile::tempdir().unwrap();
    let stub = moat_testkit::mcp_stub().display().to_string();
    let log = work.path().join("mcp.jsonl");
    let config = work.path().join("mcp.json");
    let servers =
        json!({"mcpServers": {"stub": {"command": stub, "env": {"MOAT_MCP_STUB_LOG": log}}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let openai_flags = json!([
        "--model",
        "m",
        "--ask-tools",
        "mcp__stub__echo",
        format!("--allow-net={}", server.grant()),
        "--mcp-config",
        config,
        "--allow-run",
        stub,
        format!("--allow-write={}", work.path().display()),
        "--allow-env",
        "MOAT_MCP_STUB_LOG",
    ]);
    // The round trip's session directory: the SDK agent keeps its sessions
    // there, so a later run loads them.
    let roundtrip = tempfile::tempdir().unwrap();
    let secrets = work.path().join("secrets.json");
    std::fs::write(&secrets, "{}").unwrap();
    std::fs::set_permissions(
        &secrets,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let output = Command::new("node")
        .args(["--test", "editor.test.mjs"])
        .current_dir(&dir)
        .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_STORE", work.path().join("moat.db"))
        .env("MOAT_SECRETS", &secrets)
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env("MOAT_TEST_COOPERATIVE", COOPERATIVE)
        .env("ACP_OPENAI_ARGS", openai_flags.to_string())
        .env("ACP_OPENAI_CWD", work.path())
        .env("ACP_ROUNDTRIP_CWD", roundtrip.path())
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .env("OPENAI_API_KEY", "sk-moat-acp-test")
        .env_remove("MOAT_LOG")
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the ACP suite failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("# pass 7"), "every test ran:\n{stdout}");

    // The second prompt carried the first turn: openai keeps no session,
    // so moat acp sends the conversation so far.
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "two answers, a tool call and its answer");
    let second = requests[1].json().to_string();
    assert!(second.contains("my name is Ada"), "{second}");
    assert!(second.contains("first answer"), "{second}");
    assert!(second.contains("what is my name?"), "{second}");
    // The approved call was made, once.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        calls.lines().filter(|l| l.contains("tools/call")).count(),
        1,
        "{calls}"
    );
}

#[test]
fn what_the_editor_decides_is_no_flag_and_an_unknown_adapter_fails_before_any_session() {
    let store = tempfile::tempdir().unwrap();
    for (args, said) in [
        (&["acp", "echo", "--cwd", "/tmp"][..], "leave out --cwd"),
        (
            &["acp", "echo", "--workspace", "copy"][..],
            "leave out --workspace",
        ),
        (&["acp", "nope"][..], "unknown adapter `nope`"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_moat"))
            .args(args)
            .env("MOAT_STORE", store.path().join("moat.db"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(output.stdout.is_empty(), "stdout is the protocol's alone");
    }
}
