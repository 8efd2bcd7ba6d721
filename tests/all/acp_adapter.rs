//! The built-in `acp` adapter through the real `moat` binary, as its client
//! of a real ACP agent: tests/acp/agent.mjs, written with the official ACP
//! TypeScript SDK (@agentclientprotocol/sdk), which checks every message
//! moat sends with the SDK's own schemas and says so in its answer
//! (`schema: ok`). The agent runs contained, granted by `--allow-run=node`.
//!
//! `scripts/test` installs the SDK (`npm ci --prefix tests/acp`) and sets
//! `MOAT_REQUIRE_CLIENTS=1`; without node or the SDK a plain `cargo test`
//! skips these tests, saying how to install them.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolStatus};
use moat_testkit::{describe, error_message, extensions, single_done};
use serde_json::{Value, json};

use crate::cli::common::{Started, events, moat_in, ok_in};

/// The directory of the SDK agent.
fn agent_dir() -> PathBuf {
    moat_testkit::repo_root().join("tests/acp")
}

/// Whether node and the SDK are there; a skip says so, unless they are
/// required.
fn sdk_agent_available() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    let sdk = agent_dir()
        .join("node_modules/@agentclientprotocol/sdk")
        .exists();
    if node && sdk {
        return true;
    }
    let missing = if node {
        "the ACP SDK is not installed: npm ci --prefix tests/acp"
    } else {
        "node is not installed"
    };
    assert!(
        std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() != Ok("1"),
        "{missing}"
    );
    eprintln!("skipped: {missing}");
    false
}

/// A scratch place for one test: a run store, the run's working
/// directory (its write grant) and a directory it may only read.
struct Scratch {
    _dir: tempfile::TempDir,
    store: PathBuf,
    work: PathBuf,
    read_only: PathBuf,
    outside: PathBuf,
    /// Passed to the agent so its processes can be found afterwards.
    marker: String,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let [store, work, read_only, outside] =
            ["store", "work", "read-only", "outside"].map(|name| root.join(name));
        for dir in [&store, &work, &read_only, &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(read_only.join("notes.txt"), "read-only notes\n").unwrap();
        let marker = format!("--moat-test-marker={}", root.display());
        Scratch {
            _dir: dir,
            store,
            work,
            read_only,
            outside,
            marker,
        }
    }

    /// `moat run acp PROMPT` running the SDK agent with `env`, granted the
    /// agent, its directory (read), the read-only directory and the
    /// working directory (write); `flags` added.
    fn run(&self, prompt: &str, env: Value, flags: &[&str]) -> Command {
        let agent = agent_dir().join("agent.mjs").display().to_string();
        let extra = json!({"command": "node", "args": [agent, self.marker], "env": env});
        let mut command = moat_in(&self.store);
        command
            .args([
                "run",
                "acp",
                prompt,
                "--output",
                "ndjson",
                "--allow-run=node",
            ])
            .arg(format!("--cwd={}", self.work.display()))
            .arg(format!(
                "--allow-read={},{}",
                agent_dir().display(),
                self.read_only.display()
            ))
            .arg(format!("--allow-write={}", self.work.display()))
            .args(["--extra", &extra.to_string()])
            .args(flags);
        command
    }

    /// Runs `prompt` to its end: its events and exit code.
    fn finish(&self, prompt: &str, flags: &[&str]) -> (Vec<AgentEvent>, Option<i32>) {
        let output: Output = self.run(prompt, json!({}), flags).output().unwrap();
        (events(&output), output.status.code())
    }

    /// The agent's processes still alive (found by the marker in their
    /// command line).
    fn agent_processes(&self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| {
                let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                String::from_utf8_lossy(&cmdline)
                    .contains(&self.marker)
                    .then_some(pid)
            })
            .collect()
    }
}

/// The streamed text of a run.
fn streamed(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::TextDelta(delta) => Some(delta.delta.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_acp_agent_streams_text_a_thought_a_plan_and_a_tool_call_and_ends_success() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let (events, code) = scratch.finish("tool plan", &["--trust", "controlled"]);
    assert_eq!(code, Some(0), "{}", describe(&events));
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("init first: {}", describe(&events))
    };
    let capabilities = init
        .capabilities
        .as_ref()
        .expect("the agent's capabilities");
    assert_eq!(capabilities["agentInfo"]["name"], "moat-sdk-test-agent");
    assert_eq!(capabilities["protocolVersion"], 1);
    assert!(events.iter().any(|e| matches!(&e.payload,
        EventPayload::Thinking(t) if t.summary == "thinking about: tool plan")));
    let text = streamed(&events);
    assert!(text.starts_with("Hello from the SDK agent."), "{text}");
    assert!(
        text.ends_with("schema: ok"),
        "moat sent what ACP says: {text}"
    );
    let call = moat_testkit::tool_call(&events);
    assert_eq!(
        (call.tool_name.as_str(), call.tool_use_id.as_str()),
        ("read", "call-read")
    );
    assert_eq!(call.description.as_deref(), Some("Reading notes.txt"));
    assert_eq!(
        Value::Object(call.input.clone()),
        json!({"path": "notes.txt"})
    );
    let result = moat_testkit::tool_result(&events);
    assert_eq!(result.status, ToolStatus::Success);
    assert_eq!(result.output, json!("the notes"));
    let plans = extensions(&events, "acp:plan");
    assert_eq!(plans[0]["entries"][0]["content"], "answer the prompt");
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.usage.tool_uses, 1);
    assert_eq!(done.result.as_deref(), Some(text.as_str()));
    assert_eq!(
        done.resume_token.as_deref(),
        Some(events[0].session_id.as_str()),
        "the ACP session resumes the run"
    );
    assert_eq!(done.metadata.as_ref().unwrap()["stopReason"], "end_turn");
}

#[test]
fn file_requests_are_served_within_the_runs_grants_and_terminals_are_refused() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let inside = scratch.work.join("sub/written.txt");
    let read_only = scratch.read_only.join("written.txt");
    let outside = scratch.outside.join("written.txt");
    let notes = scratch.read_only.join("notes.txt");
    let prompt = format!(
        "write:{} write:{} write:{} read:{} terminal garbage",
        inside.display(),
        read_only.display(),
        outside.display(),
        notes.display()
    );
    let (events, code) = scratch.finish(&prompt, &[]);
    assert_eq!(code, Some(0), "{}", describe(&events));
    let text = streamed(&events);

    // Inside the write grant: written, directories made.
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "written by the SDK agent\n"
    );
    assert!(
        text.contains(&format!("write ok: {}", inside.display())),
        "{text}"
    );
    // Under a read grant, or outside every grant: refused, saying which
    // grant is missing; nothing written.
    assert!(!read_only.exists() && !outside.exists());
    assert!(
        text.contains(&format!(
            "write failed: moat refused to write {}: the run may only read {} (grant it with --allow-write)",
            read_only.display(),
            scratch.read_only.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "write failed: moat refused to write {}: it is outside the directories granted to the run",
            outside.display()
        )),
        "{text}"
    );
    assert!(text.contains("read: read-only notes."), "{text}");
    assert!(
        text.contains("terminal refused: terminals are not supported"),
        "{text}"
    );
    // Every request is on the record.
    let accesses = extensions(&events, "acp:fs");
    let refused: Vec<_> = accesses.iter().filter(|a| a["ok"] == false).collect();
    assert_eq!((accesses.len(), refused.len()), (4, 2), "{accesses:?}");
    // A line that is not JSON-RPC is skipped, said, and the run goes on.
    assert!(error_message(&events, "INVALID_AGENT_MESSAGE").contains("this line is not JSON-RPC"));
    assert!(text.ends_with("schema: ok"), "{text}");
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

/// The agent's file writes, served by the `acp` adapter within the run's
/// write grant, plant nothing that runs code later: direnv's file it
/// makes is removed, Claude Code's project settings it changes are put
/// back, both reported; its ordinary file stays.
#[test]
fn an_agents_file_writes_plant_nothing_that_runs_later() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let (envrc, settings, work) = (
        scratch.work.join(".envrc"),
        scratch.work.join(".claude/settings.json"),
        scratch.work.join("work.txt"),
    );
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{}\n").unwrap();
    let prompt = format!(
        "write:{} write:{} write:{}",
        envrc.display(),
        settings.display(),
        work.display()
    );
    let (events, code) = scratch.finish(&prompt, &[]);
    assert_eq!(code, Some(0), "{}", describe(&events));
    let text = streamed(&events);
    assert!(
        text.contains(&format!("write ok: {}", envrc.display())),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(&work).unwrap(),
        "written by the SDK agent\n"
    );
    assert!(!envrc.exists(), "the agent's .envrc stayed");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}\n");
    let reported = moat_testkit::error_messages(&events, "PROTECTED_WRITE").join("\n");
    for path in [&envrc, &settings] {
        assert!(reported.contains(&path.display().to_string()), "{reported}");
    }
}

#[test]
fn a_permission_request_is_asked_of_the_runs_user_or_decided_by_the_tool_policy() {
    if !sdk_agent_available() {
        return;
    }
    // Asked (the trust level rules out `execute` tools) and approved from
    // a second process: the call is made.
    let scratch = Scratch::new();
    let run = Started::new(scratch.run("permission", json!({}), &["--ask"]));
    let request = run.next_request(&mut Vec::new());
    assert_eq!(
        (request.tool_name.as_str(), request.tool_use_id.as_str()),
        ("execute", "call-exec")
    );
    assert_eq!(
        Value::Object(request.input.clone()),
        json!({"command": "touch done"})
    );
    assert!(
        request
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("Run `touch done`"),
        "{request:?}"
    );
    ok_in(&scratch.store, &["approve", "@last"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0), "{}", describe(&events));
    assert!(streamed(&events).contains("permission: yes."));
    assert_eq!(moat_testkit::tool_call(&events).tool_name, "execute");
    assert_eq!(
        moat_testkit::tool_result(&events).status,
        ToolStatus::Success
    );

    // Denied with a reason: the agent is told no, the call never made.
    let scratch = Scratch::new();
    let run = Started::new(scratch.run("permission", json!({}), &["--ask"]));
    run.next_request(&mut Vec::new());
    ok_in(&scratch.store, &["deny", "@last", "--reason", "not today"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0), "{}", describe(&events));
    assert!(streamed(&events).contains("permission: no."));
    let decisions = extensions(&events, "acp:permission");
    assert_eq!(decisions[0]["decision"], "denied");
    assert!(
        decisions[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not today")
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ToolUse(_)))
    );

    // Without --ask nobody can answer: denied at once.
    let (events, _) = scratch.finish("permission", &[]);
    assert!(
        streamed(&events).contains("permission: no."),
        "{}",
        describe(&events)
    );
    assert_eq!(
        extensions(&events, "acp:permission")[0]["decision"],
        "denied"
    );

    // The tool policy decides what it plainly allows or forbids, asking
    // nobody.
    let (events, _) = scratch.finish("permission", &["--trust", "unrestricted"]);
    assert!(
        streamed(&events).contains("permission: yes."),
        "{}",
        describe(&events)
    );
    let (events, code) = scratch.finish("permission", &["--disallowed-tools", "execute"]);
    assert_eq!(code, Some(0), "{}", describe(&events));
    assert!(streamed(&events).contains("permission: no."));
    let refused = &extensions(&events, "acp:permission")[0];
    assert_eq!(refused["decision"], "refused");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("disallows `execute`")
    );
}

#[test]
fn continue_loads_the_acp_session_and_an_agent_that_cannot_load_gives_no_resume_token() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let (first, code) = scratch.finish("remember:apple", &[]);
    assert_eq!(code, Some(0), "{}", describe(&first));
    let token = single_done(&first).resume_token.clone().expect("resumable");
    let (second, code) = scratch.finish("recall", &["--continue", "@last"]);
    assert_eq!(code, Some(0), "{}", describe(&second));
    let text = streamed(&second);
    assert!(text.contains("recalled: apple."), "{text}");
    // The history the agent replays while loading is not streamed again.
    assert_eq!(text.matches("Hello from ").count(), 1, "{text}");
    assert_eq!(second[0].session_id, token);
    assert_eq!(
        single_done(&second).resume_token.as_deref(),
        Some(token.as_str())
    );

    let output = scratch
        .run(
            "hello",
            json!({"ACP_AGENT_NO_LOAD": "1"}),
            // The agent's variables are granted like any other.
            &["--allow-env=ACP_AGENT_NO_LOAD"],
        )
        .output()
        .unwrap();
    let events = events(&output);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.resume_token, None, "nothing to resume with");
}

#[test]
fn cancelling_mid_prompt_ends_the_run_interrupted_and_stops_the_agent() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let run = Started::new(scratch.run("hang", json!({}), &[]));
    let mut seen = Vec::new();
    loop {
        let event = run.next();
        let waiting =
            matches!(&event.payload, EventPayload::TextDelta(d) if d.delta == " waiting.");
        seen.push(event);
        if waiting {
            break;
        }
    }
    assert!(!scratch.agent_processes().is_empty(), "the agent runs");
    ok_in(&scratch.store, &["cancel", "@last"]);
    let (events, _) = run.finish();
    let done = single_done(&events);
    assert_eq!(
        done.status,
        DoneStatus::Interrupted,
        "{}",
        describe(&events)
    );
    assert_eq!(
        done.resume_token.as_deref(),
        Some(seen[0].session_id.as_str())
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !scratch.agent_processes().is_empty() {
        assert!(Instant::now() < deadline, "the agent was stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_not_granted_or_not_named_is_refused_before_it_starts() {
    if !sdk_agent_available() {
        return;
    }
    let scratch = Scratch::new();
    let command = scratch.run("hello", json!({}), &[]);
    // The same run, without --allow-run.
    let args: Vec<String> = command
        .get_args()
        .map(|arg| arg.to_string_lossy().into_owned())
        .filter(|arg| arg != "--allow-run=node")
        .collect();
    let output = moat_in(&scratch.store).args(&args).output().unwrap();
    let events = events(&output);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    let denied = error_message(&events, "CAPABILITY_DENIED");
    assert!(denied.contains("--allow-run"), "{denied}");
    assert!(scratch.agent_processes().is_empty());
    assert!(
        !scratch.work.join(".sdk-agent").exists(),
        "the agent never ran"
    );

    // No agent named, or no working directory: refused, saying what to give.
    for (flags, said) in [
        (vec!["--extra", "{}"], "--allow-run"),
        (vec!["--extra", r#"{"command":"node"}"#], "--cwd"),
    ] {
        let output = moat_in(&scratch.store)
            .args([
                "run",
                "acp",
                "hello",
                "--output",
                "ndjson",
                "--allow-run=node",
            ])
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let all = format!("{stderr}{}", String::from_utf8_lossy(&output.stdout));
        assert_ne!(output.status.code(), Some(0));
        assert!(all.contains(said), "{flags:?}: {all}");
    }
}

/// Opt-in, as tests/all/real_clis.rs: the real Gemini CLI (0.61.0) in its
/// ACP mode (`gemini --acp`) as the `acp` adapter's agent, offline against
/// loopback stand-ins of the Gemini API, through the `moat` binary.
///
/// ```sh
/// MOAT_REAL_CLIS=1 MOAT_CLI_DIR=~/.cache/moat/clis cargo test -p moat --test all acp_adapter
/// ```
mod real_gemini {
    use std::path::{Path, PathBuf};

    use moat_backend_stub::scenario::{TOOL_COMMAND, TOOL_FOLLOW_UP};
    use moat_backend_stub::{Scenario, StubConfig, StubServer};
    use moat_engine::{AgentEvent, DoneStatus, ToolStatus};
    use moat_testkit::llm_server::{LlmServer, Reply};
    use moat_testkit::{describe, single_done};
    use serde_json::{Value, json};

    use super::{events, extensions, moat_in, streamed};

    const MODEL: &str = "gemini-2.5-flash";

    fn gemini() -> Option<PathBuf> {
        if std::env::var("MOAT_REAL_CLIS").as_deref() != Ok("1") {
            eprintln!("skipped: set MOAT_REAL_CLIS=1 (and MOAT_CLI_DIR) to run the real CLIs");
            return None;
        }
        let dir = match std::env::var_os("MOAT_CLI_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/moat/clis"),
        };
        let program = dir.join("node_modules/.bin/gemini");
        assert!(program.exists(), "{} is not installed", program.display());
        Some(program)
    }

    /// A home for Gemini CLI, set up for API-key use with nothing phoned
    /// home (docs/cli-adapters.md), and a working directory in it.
    struct Home {
        _dir: tempfile::TempDir,
        root: PathBuf,
        work: PathBuf,
    }

    impl Home {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            let work = root.join("work");
            for sub in [work.clone(), root.join("tmp"), root.join(".gemini")] {
                std::fs::create_dir_all(sub).unwrap();
            }
            let settings = json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                // Its start-up clean-up would delete the sessions a test
                // then loads.
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true,
                    "sessionRetention": {"enabled": false}},
            });
            std::fs::write(root.join(".gemini/settings.json"), settings.to_string()).unwrap();
            Home {
                _dir: dir,
                root,
                work,
            }
        }

        /// `moat run acp PROMPT` running `gemini --acp` against the API at
        /// `base_url`: the program, its variables, its state and the API's
        /// address granted, the working directory writable.
        fn run(
            &self,
            program: &Path,
            base_url: &str,
            prompt: &str,
            flags: &[&str],
        ) -> Vec<AgentEvent> {
            self.run_with_grants(program, base_url, prompt, flags, &self.work)
        }

        /// [`Home::run`] with `writable` as the project's write grant.
        fn run_with_grants(
            &self,
            program: &Path,
            base_url: &str,
            prompt: &str,
            flags: &[&str],
            writable: &Path,
        ) -> Vec<AgentEvent> {
            let output = self
                .moat(base_url)
                .args(["run", "acp", prompt, "--output", "ndjson"])
                .arg(format!("--cwd={}", self.work.display()))
                .args(self.grants(program, base_url, writable))
                .args(flags)
                .output()
                .unwrap();
            events(&output)
        }

        /// `moat` with Gemini CLI's variables: its home, the API at
        /// `base_url`, a key, the workspace trusted.
        fn moat(&self, base_url: &str) -> std::process::Command {
            let mut command = moat_in(&self.root);
            command
                .env("HOME", &self.root)
                .env("TMPDIR", self.root.join("tmp"))
                .env("GOOGLE_GEMINI_BASE_URL", base_url)
                .env("GEMINI_API_KEY", "moat-offline")
                .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
            command
        }

        /// What a run of `gemini --acp` needs: the program, its state and
        /// temporary directories and `writable`, the API's address, its
        /// variables; and the adapter's `--extra` naming it.
        fn grants(&self, program: &Path, base_url: &str, writable: &Path) -> Vec<String> {
            let extra = json!({"command": program, "args": ["--acp", "-m", MODEL]});
            vec![
                format!("--allow-run={}", program.display()),
                format!(
                    "--allow-write={},{},{}",
                    writable.display(),
                    self.root.join(".gemini").display(),
                    self.root.join("tmp").display()
                ),
                format!("--allow-net={}", base_url.trim_start_matches("http://")),
                "--allow-env=HOME,TMPDIR,GOOGLE_GEMINI_BASE_URL,GEMINI_API_KEY,GEMINI_CLI_TRUST_WORKSPACE,PATH".into(),
                "--extra".into(),
                extra.to_string(),
            ]
        }
    }

    /// The round trip: an editor (the official ACP SDK's client,
    /// tests/acp/prompt.mjs) prompts `moat acp acp`, which runs the real
    /// Gemini CLI in ACP mode in the sandbox: text, a shell call, the
    /// turn's end, every message moat sent valid by the SDK's schemas.
    #[test]
    fn an_editor_runs_the_real_gemini_cli_through_moat_acp_acp() {
        let Some(program) = gemini() else { return };
        // The real CLIs' test changes the process's environment as it runs.
        let _alone = crate::real_clis::environment_alone();
        let stub = StubServer::start("127.0.0.1:0", StubConfig::new(Scenario::ToolUse)).unwrap();
        let home = Home::new();
        let base_url = stub.base_url();
        let moat = home.moat(&base_url);
        let mut editor = std::process::Command::new("node");
        for (name, value) in moat.get_envs() {
            match value {
                Some(value) => editor.env(name, value),
                None => editor.env_remove(name),
            };
        }
        let output = editor
            .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
            .arg(super::agent_dir().join("prompt.mjs"))
            .arg(&home.work)
            .arg("Run echo moat-tool-use in the shell, then answer.")
            .args(["acp", "--trust", "unrestricted"])
            .args(home.grants(&program, &base_url, &home.work))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let answer: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(answer["stopReason"], "end_turn", "{answer}");
        assert!(
            answer["text"].as_str().unwrap().ends_with(TOOL_FOLLOW_UP),
            "{answer}"
        );
        let updates: Vec<&str> = answer["updates"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(updates.contains(&"tool_call"), "{answer}");
        assert!(updates.contains(&"tool_call_update"), "{answer}");
        // The run is recorded like any other.
        let run = answer["run"].as_str().unwrap();
        let record: Value =
            serde_json::from_str(&super::ok_in(&home.root, &["show", run, "--json"])).unwrap();
        assert_eq!(record["status"], "completed");
        assert_eq!(record["adapter"], "acp");
    }

    /// One streamed Gemini API answer of `parts`.
    fn gemini_reply(parts: Value) -> Reply {
        let chunk = json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": MODEL,
        });
        Reply::sse(format!("data: {chunk}\r\n\r\n").as_bytes())
    }

    fn write_file(path: &Path) -> Reply {
        gemini_reply(json!([{"functionCall": {"name": "write_file",
            "args": {"file_path": path, "content": "written by Gemini CLI\n"}}}]))
    }

    #[test]
    fn the_real_gemini_cli_in_acp_mode_is_an_acp_adapters_agent() {
        let Some(program) = gemini() else { return };
        // The real CLIs' test changes the process's environment as it runs.
        let _alone = crate::real_clis::environment_alone();

        // Text, a shell tool call (allowed: trust unrestricted), done.
        let stub = StubServer::start("127.0.0.1:0", StubConfig::new(Scenario::ToolUse)).unwrap();
        let home = Home::new();
        let events = home.run(
            &program,
            &stub.base_url(),
            "Run echo moat-tool-use in the shell, then answer.",
            &["--trust", "unrestricted"],
        );
        let done = single_done(&events);
        assert_eq!(done.status, DoneStatus::Success, "{}", describe(&events));
        assert!(done.resume_token.is_some(), "Gemini CLI loads sessions");
        let call = moat_testkit::tool_call(&events);
        assert_eq!(call.tool_name, "execute");
        assert_eq!(call.description.as_deref(), Some(TOOL_COMMAND));
        assert_eq!(
            moat_testkit::tool_result(&events).status,
            ToolStatus::Success
        );
        assert!(
            streamed(&events).ends_with(TOOL_FOLLOW_UP),
            "{}",
            streamed(&events)
        );
        let EventPayload::Init(init) = &events[0].payload else {
            panic!()
        };
        assert_eq!(
            init.capabilities.as_ref().unwrap()["agentInfo"]["name"],
            "gemini-cli"
        );

        // The next run asks to load the session (session/load). Gemini CLI
        // 0.61.0 advertises loadSession but mostly answers that it has no
        // such session ("No previous sessions found for this project"):
        // then moat starts a fresh one, saying why, and the run goes on.
        let session = events[0].session_id.clone();
        let resumed = home.run(
            &program,
            &stub.base_url(),
            "Again.",
            &["--continue", "@last", "--trust", "unrestricted"],
        );
        assert_eq!(
            single_done(&resumed).status,
            DoneStatus::Success,
            "{}",
            describe(&resumed)
        );
        let fallbacks = extensions(&resumed, moat_engine::RESUME_FALLBACK_EVENT);
        match fallbacks.first() {
            None => assert_eq!(
                resumed[0].session_id, session,
                "the same ACP session, loaded"
            ),
            Some(fallback) => {
                eprintln!("gemini could not load its session: {}", fallback["reason"]);
                assert!(
                    fallback["reason"]
                        .as_str()
                        .unwrap()
                        .contains("the agent could not load session"),
                    "{fallback}"
                );
            }
        }

        // At the default trust level (sandbox) its shell may run only when
        // asked about; Gemini CLI runs `echo` without asking (its own
        // policy deems it safe), so the run is stopped at the call.
        let events = home.run(&program, &stub.base_url(), "Run echo moat-tool-use.", &[]);
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Error,
            "{}",
            describe(&events)
        );
        let violation = moat_testkit::error_message(&events, "TOOL_POLICY_VIOLATION");
        assert!(
            violation.contains("`execute` tool call (echo moat-tool-use) without asking"),
            "{violation}"
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e.payload, EventPayload::ToolUse(_)))
        );

        // Its file writes go through moat (fs/write_text_file): inside the
        // write grant written, under a read-only grant refused and not
        // written. (Gemini CLI refuses paths outside its working directory
        // itself, and reads a file before writing it, treating the client's
        // "not found" as a failure — a known limitation of its ACP mode —
        // so the files exist beforehand and lie in the project.)
        let home = Home::new();
        let inside = home.work.join("out/inside.txt");
        let read_only = home.work.join("read-only.txt");
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::write(&inside, "old\n").unwrap();
        std::fs::write(&read_only, "original\n").unwrap();
        let model = LlmServer::start_turns(vec![
            write_file(&inside),
            write_file(&read_only),
            gemini_reply(json!([{"text": "Both writes were tried."}])),
        ]);
        let events = home.run_with_grants(
            &program,
            &model.url(),
            "Write the two files.",
            // Trust sandbox (no preset grant of the project); the tool named.
            &[
                "--allowed-tools",
                "edit",
                &format!("--allow-read={}", home.work.display()),
            ],
            &home.work.join("out"),
        );
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Success,
            "{}",
            describe(&events)
        );
        let written =
            std::fs::read_to_string(&inside).unwrap_or_else(|error| panic!("{error}: {events:#?}"));
        assert_eq!(written, "written by Gemini CLI\n", "{events:#?}");
        assert_eq!(
            std::fs::read_to_string(&read_only).unwrap(),
            "original\n",
            "{events:#?}"
        );
        let writes: Vec<Value> = extensions(&events, "acp:fs")
            .into_iter()
            .filter(|access| access["op"] == "write")
            .collect();
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert_eq!(writes[0]["ok"], true);
        assert!(
            writes[1]["error"]
                .as_str()
                .unwrap()
                .contains("the run may only read"),
            "{writes:?}"
        );
    }

    use moat_engine::EventPayload;
}
