//! Opt-in: the real Claude Code, Codex and Gemini CLIs through moat,
//! offline, against the loopback backend stub (tools/backend-stub) started
//! in this process. Each CLI's own switches keep its traffic on 127.0.0.1
//! (base URLs, telemetry and update checks off; docs/cli-adapters.md), and
//! the stub's request log shows the model calls arrived there.
//!
//! ```sh
//! npm install --prefix ~/.cache/moat/clis @anthropic-ai/claude-code @openai/codex @google/gemini-cli
//! MOAT_REAL_CLIS=1 MOAT_CLI_DIR=~/.cache/moat/clis cargo test -p moat --test all real_clis -- --nocapture
//! # with no network but loopback, in a network namespace:
//! unshare -rn sh -c 'ip link set lo up && MOAT_REAL_CLIS=1 MOAT_CLI_DIR=$HOME/.cache/moat/clis cargo test --offline -p moat --test all real_clis'
//! ```
//!
//! Without `MOAT_REAL_CLIS=1` the test only says it was skipped. A CLI
//! missing from `$MOAT_CLI_DIR/node_modules/.bin` fails the test.

use std::path::{Path, PathBuf};

use moat_backend_stub::scenario::{TEXT_REPLY, TOOL_FOLLOW_UP};
use moat_backend_stub::{Scenario, StubConfig, StubServer};
use moat_engine::{AgentEvent, DoneStatus, ToolStatus};
use moat_grants::Grants;
use moat_grants::TrustLevel;
use moat_testkit::{describe, error_codes, extensions, single_done, texts, tool_result};
use serde_json::json;

/// One CLI and how to run it offline.
struct Cli {
    adapter: &'static str,
    program: &'static str,
    api: &'static str,
    model: &'static str,
}

const CLIS: [Cli; 3] = [
    Cli {
        adapter: "claude-code",
        program: "claude",
        api: "anthropic",
        model: "claude-sonnet-4-5",
    },
    Cli {
        adapter: "codex",
        program: "codex",
        api: "openai",
        model: "gpt-5-codex",
    },
    Cli {
        adapter: "gemini",
        program: "gemini",
        api: "gemini",
        model: "gemini-2.5-flash",
    },
];

fn cli_dir() -> PathBuf {
    match std::env::var_os("MOAT_CLI_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/moat/clis"),
    }
}

/// Held by every test that runs a real CLI: this one changes the
/// process's environment (`HOME`, `TMPDIR`, …) while it runs, which
/// another test reading it meanwhile — making a temporary directory under
/// a `TMPDIR` about to be removed — would trip on.
pub(crate) static ENVIRONMENT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds [`ENVIRONMENT`] for the caller's test.
pub(crate) fn environment_alone() -> std::sync::MutexGuard<'static, ()> {
    ENVIRONMENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The process's environment as it was, put back when dropped (the CLIs'
/// homes it points at are gone by then).
struct RestoreEnvironment(Vec<(std::ffi::OsString, std::ffi::OsString)>);

impl RestoreEnvironment {
    fn now() -> Self {
        Self(std::env::vars_os().collect())
    }
}

impl Drop for RestoreEnvironment {
    fn drop(&mut self) {
        let now: Vec<_> = std::env::vars_os().map(|(name, _)| name).collect();
        // SAFETY: the test holds ENVIRONMENT; nothing else reads it now.
        unsafe {
            for name in now {
                if !self.0.iter().any(|(kept, _)| *kept == name) {
                    std::env::remove_var(&name);
                }
            }
            for (name, value) in &self.0 {
                std::env::set_var(name, value);
            }
        }
    }
}

/// Sets the process environment the CLI will be granted. The test holds
/// [`ENVIRONMENT`] and runs the CLIs one after another, so nothing reads
/// the environment while it changes.
fn set_env(vars: &[(&str, String)]) {
    for (name, value) in vars {
        // SAFETY: see above: no other thread reads the environment now.
        unsafe { std::env::set_var(name, value) };
    }
}

/// The offline recipe of `cli` for a stub at `base_url`, in `home`; the
/// names to grant.
fn offline(cli: &Cli, base_url: &str, home: &Path) -> Vec<String> {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut vars = vec![
        ("HOME", home.to_string_lossy().into_owned()),
        ("TMPDIR", tmp.to_string_lossy().into_owned()),
    ];
    match cli.program {
        "claude" => {
            vars.push(("ANTHROPIC_BASE_URL", base_url.to_owned()));
            vars.push(("ANTHROPIC_API_KEY", "sk-ant-moat-offline".to_owned()));
        }
        "codex" => {
            let codex_home = home.join("codex-home");
            std::fs::create_dir_all(&codex_home).unwrap();
            let config = format!(
                "model_provider = \"moat-stub\"\n[model_providers.moat-stub]\nname = \"moat stub\"\n\
                 base_url = \"{base_url}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n\
                 request_max_retries = 0\nstream_max_retries = 0\n"
            );
            std::fs::write(codex_home.join("config.toml"), config).unwrap();
            vars.push(("CODEX_HOME", codex_home.to_string_lossy().into_owned()));
            vars.push(("OPENAI_API_KEY", "moat-offline".to_owned()));
        }
        _ => {
            let settings = home.join(".gemini");
            std::fs::create_dir_all(&settings).unwrap();
            let json = json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
            });
            std::fs::write(settings.join("settings.json"), json.to_string()).unwrap();
            vars.push(("GOOGLE_GEMINI_BASE_URL", base_url.to_owned()));
            vars.push(("GEMINI_API_KEY", "moat-offline".to_owned()));
            vars.push(("GEMINI_CLI_TRUST_WORKSPACE", "true".to_owned()));
        }
    }
    set_env(&vars);
    let mut names: Vec<String> = vars.iter().map(|(name, _)| (*name).to_owned()).collect();
    names.push("PATH".to_owned());
    names
}

/// The messages of the run's errors.
fn errors(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            moat_engine::EventPayload::Error(error) => Some(error.message.clone()),
            _ => None,
        })
        .collect()
}

/// Checks that `cli`'s run (`what`, said on failure) ended in success,
/// saying its events and errors otherwise.
fn succeeded(cli: &Cli, events: &[AgentEvent], what: &str) {
    assert_eq!(
        single_done(events).status,
        DoneStatus::Success,
        "{}{what}: {}: {:?}",
        cli.adapter,
        describe(events),
        errors(events)
    );
}

/// [`run_real`] of `scenario` at trust level unrestricted, checking that
/// the run succeeded.
fn run_successful(
    cli: &Cli,
    program: &Path,
    scenario: Scenario,
    scratch: &Path,
) -> (Vec<AgentEvent>, Vec<moat_backend_stub::LoggedRequest>) {
    let (events, requests) = run_real(cli, program, scenario, TrustLevel::Unrestricted, scratch);
    succeeded(cli, &events, "");
    (events, requests)
}

/// [`run_real_with`] of a tool call running `command` at trust level
/// unrestricted, checking that the run succeeded.
fn run_tool(
    cli: &Cli,
    program: &Path,
    command: &str,
    scratch: &Path,
    configure: impl FnOnce(&mut moat_testkit::Request, &Path),
) -> (Vec<AgentEvent>, Vec<moat_backend_stub::LoggedRequest>) {
    let stub = StubConfig::new(Scenario::ToolUse).with_tool_command(command);
    let (events, requests) = run_real_with(
        cli,
        program,
        stub,
        TrustLevel::Unrestricted,
        scratch,
        configure,
    );
    succeeded(cli, &events, "");
    (events, requests)
}

fn run_real(
    cli: &Cli,
    program: &Path,
    scenario: Scenario,
    trust: TrustLevel,
    scratch: &Path,
) -> (Vec<AgentEvent>, Vec<moat_backend_stub::LoggedRequest>) {
    run_real_with(cli, program, scenario, trust, scratch, |_, _| {})
}

/// [`run_real`], with `configure` given the request and the run's home
/// directory before it starts.
fn run_real_with(
    cli: &Cli,
    program: &Path,
    stub: impl Into<StubConfig>,
    trust: TrustLevel,
    scratch: &Path,
    configure: impl FnOnce(&mut moat_testkit::Request, &Path),
) -> (Vec<AgentEvent>, Vec<moat_backend_stub::LoggedRequest>) {
    let stub = StubServer::start("127.0.0.1:0", stub.into()).expect("the stub starts");
    // Inside the scratch directory made before any TMPDIR was changed.
    let home = tempfile::tempdir_in(scratch).unwrap();
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    let work = home_dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let env = offline(cli, &stub.base_url(), &home_dir);

    let mut request = moat_testkit::request(
        cli.adapter,
        "Run echo moat-tool-use in the shell if you can, then answer.",
    );
    // The CLI reaches the stub through the run's proxy: granted like any
    // host.
    let stub_address = stub.base_url().trim_start_matches("http://").to_owned();
    request.scope.grants = Grants {
        run: vec![program.to_string_lossy().into_owned()],
        write: vec![work.clone()],
        env,
        net: vec![moat_grants::NetRule::parse(&stub_address).unwrap()],
        ..Grants::none()
    };
    request.options.extra = Some(json!({"program": program}));
    request.options.cwd = Some(work.to_string_lossy().into_owned());
    request.options.model = Some(cli.model.to_owned());
    request.scope.trust = trust;
    if cli.program == "claude" && trust == TrustLevel::Unrestricted {
        request.options.allowed_tools = Some(vec!["Bash".into()]);
    }
    // As `moat run` does for a built-in: its declared variables granted,
    // its programs contained with their state in the CLI's home.
    let profile = moat_builtins::profile(cli.adapter).expect("a built-in");
    let (state_dirs, state_files) = profile.state_paths(&home_dir, |name| std::env::var_os(name));
    request.scope.confinement = moat_grants::Confinement::Contained {
        state_dirs,
        state_files,
        read_only: Vec::new(),
    };
    configure(&mut request, &home_dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let events = runtime.block_on(async {
        let adapter = moat_testkit::llm_server::load_builtin(cli.adapter).await;
        let declared = adapter.needs().env.clone();
        request.scope.grants.env.extend(declared);
        let registry = moat_testkit::registry_of([adapter]);
        moat_testkit::collect(&registry, request).await
    });
    (events, stub.requests())
}

#[test]
fn the_real_clis_run_through_moat_against_the_loopback_stub() {
    if std::env::var("MOAT_REAL_CLIS").as_deref() != Ok("1") {
        eprintln!("skipped: set MOAT_REAL_CLIS=1 (and MOAT_CLI_DIR) to run the real CLIs");
        return;
    }
    let _alone = environment_alone();
    // Dropped before the lock: the next test finds the environment whole.
    let _restore = RestoreEnvironment::now();
    let bin = cli_dir().join("node_modules/.bin");
    let scratch = tempfile::tempdir().unwrap();
    for cli in &CLIS {
        let program = bin.join(cli.program);
        assert!(
            program.exists(),
            "{} is not installed in {}",
            cli.program,
            bin.display()
        );

        let (events, requests) = run_successful(cli, &program, Scenario::Text, scratch.path());
        let done = single_done(&events);
        assert_eq!(texts(&events).concat(), TEXT_REPLY, "{}", cli.adapter);
        assert!(done.resume_token.is_some(), "{}", cli.adapter);
        let model_calls: Vec<_> = requests.iter().filter(|r| r.api == cli.api).collect();
        assert!(
            !model_calls.is_empty(),
            "{}: the model calls reached the stub",
            cli.adapter
        );

        let (events, _) = run_successful(cli, &program, Scenario::ToolUse, scratch.path());
        let result = tool_result(&events);
        assert_eq!(
            result.status,
            ToolStatus::Success,
            "{}: {:?}",
            cli.adapter,
            result.output
        );
        assert_eq!(
            texts(&events).last().copied(),
            Some(TOOL_FOLLOW_UP),
            "{}",
            cli.adapter
        );
        check_trust_levels(cli, &program, scratch.path());
        check_local_server(cli, &program, scratch.path());
        check_secret(cli, &program, scratch.path());
        check_directories_and_resume_fallback(cli, &program, scratch.path());
        check_mcp_servers(
            cli,
            &program,
            &bin.join("mcp-server-filesystem"),
            scratch.path(),
        );
        if cli.program == "claude" {
            check_permission_prompts_through_moat(cli, &program, scratch.path());
        }
        check_nothing_planted_persists(cli, &program, scratch.path());
        check_metered(cli, &program, scratch.path());
        eprintln!("{}: ok", cli.adapter);
    }
    check_llm_agent_with_the_filesystem_server(&bin.join("mcp-server-filesystem"), scratch.path());
    eprintln!("openai with the MCP filesystem server: ok");
}

/// docs/llm-adapters.md's worked example through the `moat` binary: the
/// `openai` adapter, pointed at a local OpenAI-compatible server, runs the
/// official MCP filesystem server as its tool. The server is given two
/// directories but the run grants only one (`--allow-read`): a file there
/// reaches the model, a file in the other is refused by Landlock inside
/// the server and comes back as an error, and its contents never reach
/// the model.
fn check_llm_agent_with_the_filesystem_server(server: &Path, scratch: &Path) {
    use moat_testkit::llm_server::{LlmServer, Reply};
    use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};

    assert!(server.exists(), "{} is not installed", server.display());
    let notes = scratch.join("notes");
    let secret = scratch.join("secret");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(notes.join("release.md"), "The release is on Friday.\n").unwrap();
    std::fs::write(secret.join("key.txt"), "hunter2\n").unwrap();
    let config = scratch.join("files-mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"files": {"command": server, "args": [notes, secret]}}}).to_string(),
    )
    .unwrap();
    let read = |id: &str, path: &Path| {
        Reply::sse(&openai_tool_turn(
            id,
            "mcp__files__read_text_file",
            &json!({"path": path}),
            (30, 5),
        ))
    };
    let model = LlmServer::start_turns(vec![
        read("call_notes", &notes.join("release.md")),
        read("call_secret", &secret.join("key.txt")),
        Reply::sse(&openai_answer("The release is on Friday.", (30, 5))),
    ]);
    let output = crate::cli::common::moat()
        // The CLI checks above pointed TMPDIR at their own, gone, homes.
        .env("TMPDIR", scratch)
        .env("OPENAI_BASE_URL", format!("{}/v1", model.url()))
        .args([
            "run",
            "openai",
            "When is the release?",
            "--model",
            "qwen2.5",
        ])
        .args(["--no-store", "--output", "json", "--max-turns", "10"])
        .arg(format!("--allow-net={}", model.grant()))
        .arg("--mcp-config")
        .arg(&config)
        .arg("--allow-run")
        .arg(server)
        .arg("--allow-read")
        .arg(&notes)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["text"], "The release is on Friday.", "{result}");
    assert_eq!(result["turns"], 3, "{result}");
    assert_eq!(result["usage"]["toolUses"], 2, "{result}");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let messages = |n: usize| requests[n].json()["messages"].to_string();
    assert!(
        messages(1).contains("The release is on Friday."),
        "{}",
        messages(1)
    );
    let refused = messages(2);
    // The server would read it (it was given the directory); the kernel
    // refuses, as the run granted only the notes.
    assert!(
        refused.contains("Error: EACCES: permission denied"),
        "the secret read failed: {refused}"
    );
    for n in 0..3 {
        assert!(
            !messages(n).contains("hunter2"),
            "the secret reached the model"
        );
    }
}

/// The real CLI takes the switch its adapter gives an extra directory, and
/// says in its own words that a session to resume is gone, which moat turns
/// into a fresh session.
fn check_directories_and_resume_fallback(cli: &Cli, program: &Path, scratch: &Path) {
    let (events, _) = run_real_with(
        cli,
        program,
        Scenario::Text,
        TrustLevel::Controlled,
        scratch,
        |request, home| {
            let extra = home.join("extra");
            std::fs::create_dir_all(&extra).unwrap();
            request.options.directories = vec![extra.to_string_lossy().into_owned()];
            request.scope.grants.write.push(extra);
        },
    );
    succeeded(cli, &events, " with a directory");
    let (events, _) = run_real_with(
        cli,
        program,
        Scenario::Text,
        TrustLevel::Controlled,
        scratch,
        |request, _| request.options.resume = Some("0b7c1e8e-1111-4222-8333-444455556666".into()),
    );
    let fell_back = events.iter().any(|e| {
        matches!(&e.payload, moat_engine::EventPayload::Extension(x)
            if x.name == moat_engine::RESUME_FALLBACK_EVENT)
    });
    assert!(fell_back, "{}: {}", cli.adapter, describe(&events));
    succeeded(cli, &events, " after the fallback");
}

/// The official MCP filesystem server, handed to the real CLI in its own
/// format, is started by it and its tools offered to the model: the tool
/// list the stub received names them. Gemini CLI refuses MCP servers (not
/// passed on yet) before it starts.
fn check_mcp_servers(cli: &Cli, program: &Path, server: &Path, scratch: &Path) {
    assert!(server.exists(), "{} is not installed", server.display());
    let (events, requests) = run_real_with(
        cli,
        program,
        Scenario::Text,
        TrustLevel::Controlled,
        scratch,
        |request, home| {
            let shared = home.join("shared");
            std::fs::create_dir_all(&shared).unwrap();
            request.options.mcp_servers = Some(json!({
                "files": {"command": server, "args": [shared]}
            }));
        },
    );
    if cli.program == "gemini" {
        assert_eq!(
            error_codes(&events),
            ["UNSUPPORTED_OPTION"],
            "{}",
            describe(&events)
        );
        return;
    }
    succeeded(cli, &events, " with an MCP server");
    let offered: Vec<&String> = requests
        .iter()
        .filter(|r| r.api == cli.api)
        .flat_map(|r| &r.tools)
        .collect();
    // Claude Code offers each tool (`mcp__files__list_directory`); Codex
    // offers the server as one namespace of tools (`mcp__files`).
    assert!(
        offered
            .iter()
            .any(|tool| tool.contains("list_directory") || *tool == "mcp__files"),
        "{}: the MCP server's tools were not offered: {offered:?}",
        cli.adapter
    );
}

/// The CLI's shell tool starts a test server on the loopback and queries
/// it, as a test suite does: inside moat (the run's own loopback, the
/// query through the run's proxy, which finds the server there) as
/// without containment.
fn check_local_server(cli: &Cli, program: &Path, scratch: &Path) {
    // A port the host does not use; inside, the run's loopback is its own.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // No command substitution (Gemini CLI blocks it).
    let command = format!(
        "/usr/bin/python3 -m http.server --bind 127.0.0.1 {port} >/dev/null & \
         for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do \
         curl -sf -o /dev/null http://127.0.0.1:{port}/ && break; sleep 0.25; done; \
         curl -s -o /dev/null -w 'served=%{{http_code}}\\n' http://127.0.0.1:{port}/; kill $!"
    );
    for contained in [true, false] {
        let (events, _) = run_tool(cli, program, &command, scratch, |request, _| {
            if !contained {
                request.scope.confinement = moat_grants::Confinement::Off;
            }
        });
        let output = text_of(&tool_result(&events).output);
        assert!(
            output.contains("served=200"),
            "{} (contained: {contained}): {output}: {}",
            cli.adapter,
            describe(&events)
        );
    }
}

/// The API key as a secret (`--secret`), not a granted variable: the CLI
/// holds the placeholder, reaches the stub on the secret's route through
/// moat's proxy, and the stub sees the real key, which appears in no
/// event. Codex ignores `OPENAI_BASE_URL`: its adapter, which sees the
/// route in its own environment, passes it as its provider's base URL.
fn check_secret(cli: &Cli, program: &Path, scratch: &Path) {
    const REAL_KEY: &str = "sk-moat-real-key-held-by-moat";
    let (key, header) = match cli.program {
        "claude" => ("ANTHROPIC_API_KEY", Some("x-api-key")),
        "gemini" => ("GEMINI_API_KEY", Some("x-goog-api-key")),
        _ => ("OPENAI_API_KEY", None),
    };
    // The CLI's own shell tool looks for the key: in its environment, its
    // `/proc/self/environ`, every process's it can see, and its home. It
    // searches by a form that is not the key (reversed), so the command
    // itself, which the events show, does not hold it.
    let reversed: String = REAL_KEY.chars().rev().collect();
    // (No command substitution, which Gemini CLI blocks, and no grep,
    // behind which Claude Code's shell puts its own ripgrep: awk turns
    // the key back and says whether it, and the placeholder, are there.)
    let check = format!(
        "tr '\\0' '\\n' | awk -v r={reversed} 'BEGIN {{ for (i = length(r); i > 0; i--) v = v substr(r, i, 1) }} \
         index($0, v) {{ f = 1 }} index($0, \"{placeholder}\") {{ p = 1 }} \
         END {{ print (f ? \"found\" : \"none\"), (p ? \"placeholder\" : \"missing\") }}'",
        placeholder = moat_contain::SECRET_PLACEHOLDER
    );
    let search = format!(
        "echo A; printenv {key}; echo B; env | {check}; echo C; cat /proc/self/environ | {check}; \
         echo D; cat /proc/[0-9]*/environ 2>/dev/null | {check}; \
         echo E; find \"$HOME\" -type f -exec cat {{}} + 2>/dev/null | {check}"
    );
    let (events, requests) = run_tool(cli, program, &search, scratch, |request, _| {
        let stub = request.scope.grants.net[0].to_string();
        let grant = moat_grants::SecretGrant::parse(&format!("{key}@http://{stub}")).unwrap();
        request.scope.grants.secrets = vec![grant.clone()];
        request.scope.secrets = moat_contain::Secrets::new(vec![
            moat_contain::Secret::new(grant, header, REAL_KEY).unwrap(),
        ]);
    });
    let model_calls: Vec<_> = requests.iter().filter(|r| r.api == cli.api).collect();
    assert!(!model_calls.is_empty(), "{}: no model call", cli.adapter);
    for call in model_calls {
        assert_eq!(call.api_key.as_deref(), Some(REAL_KEY), "{}", cli.adapter);
    }
    let found = text_of(&tool_result(&events).output);
    let found: Vec<&str> = found.split_whitespace().collect();
    // The placeholder in its environment, seen by each way of looking;
    // the key by none (its home holds no placeholder either).
    assert_eq!(
        found,
        [
            "A",
            moat_contain::SECRET_PLACEHOLDER,
            "B",
            "none",
            "placeholder",
            "C",
            "none",
            "placeholder",
            "D",
            "none",
            "placeholder",
            "E",
            "none",
            "missing"
        ],
        "{}: what its shell tool found: {}",
        cli.adapter,
        serde_json::to_string(&events).unwrap()
    );
    let shown = serde_json::to_string(&events).unwrap();
    assert!(!shown.contains(REAL_KEY), "{}", cli.adapter);
}

/// The text of a tool's output: a string, or a list of strings or text
/// blocks.
fn text_of(output: &serde_json::Value) -> String {
    match output {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|item| item["text"].as_str().or(item.as_str()).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// The tools each trust level leaves the model, as the stub saw them
/// offered: the mapping of docs/cli-adapters.md, checked on the real CLI.
fn check_trust_levels(cli: &Cli, program: &Path, scratch: &Path) {
    let offered = |trust| {
        let (events, requests) = run_real(cli, program, Scenario::Text, trust, scratch);
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Success,
            "{} at {trust:?}: {}",
            cli.adapter,
            describe(&events)
        );
        let call = requests
            .iter()
            .find(|r| r.api == cli.api)
            .expect("a model call");
        call.tools.clone()
    };
    let has = |tools: &[String], name: &str| tools.iter().any(|tool| tool == name);
    match cli.program {
        "claude" => {
            let sandbox = offered(TrustLevel::Sandbox);
            assert!(sandbox.is_empty(), "claude sandbox offers {sandbox:?}");
            let controlled = offered(TrustLevel::Controlled);
            assert!(!has(&controlled, "Bash"), "{controlled:?}");
            assert!(
                has(&controlled, "Edit") && has(&controlled, "WebFetch"),
                "{controlled:?}"
            );
            assert!(has(&offered(TrustLevel::Unrestricted), "Bash"));
        }
        "codex" => {
            let sandbox = offered(TrustLevel::Sandbox);
            for tool in ["exec_command", "web_search", "view_image"] {
                assert!(
                    !has(&sandbox, tool),
                    "codex sandbox offers {tool}: {sandbox:?}"
                );
            }
            let controlled = offered(TrustLevel::Controlled);
            assert!(!has(&controlled, "exec_command"), "{controlled:?}");
            assert!(has(&offered(TrustLevel::Unrestricted), "exec_command"));
        }
        _ => {
            let controlled = offered(TrustLevel::Controlled);
            assert!(!has(&controlled, "run_shell_command"), "{controlled:?}");
            assert!(
                has(&controlled, "read_file") && has(&controlled, "write_file"),
                "{controlled:?}"
            );
            assert!(has(&offered(TrustLevel::Unrestricted), "run_shell_command"));
        }
    }
}

/// Claude Code's permission prompts reach moat (docs/approvals.md): with
/// `--ask` at a trust level that rules the shell out, or `--ask-tools
/// Bash`, the real CLI asks before its shell call, the run waits
/// (`waiting`, a `permission_request` for `Bash`), and proceeds once
/// `moat approve` in another process answers; denied, the command never
/// runs.
fn check_permission_prompts_through_moat(cli: &Cli, program: &Path, scratch: &Path) {
    use std::io::BufRead;
    use std::process::Stdio;

    for approve in [true, false] {
        let stub = StubServer::start("127.0.0.1:0", StubConfig::from(Scenario::PermissionDenial))
            .expect("the stub starts");
        let home = tempfile::tempdir_in(scratch).unwrap();
        let home_dir = std::fs::canonicalize(home.path()).unwrap();
        let work = home_dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let env = offline(cli, &stub.base_url(), &home_dir);
        let store = home_dir.join("moat.db");
        let moat = || {
            let mut command = crate::cli::common::moat();
            command.env("MOAT_STORE", &store);
            command
        };
        let mut run = moat()
            .args([
                "run",
                "claude-code",
                "Run the command",
                "--model",
                cli.model,
            ])
            // Asked two ways: the trust level's refusal turned into a
            // question (`controlled` rules the shell out), and by name.
            .args(if approve {
                ["--trust", "controlled", "--ask"].as_slice()
            } else {
                ["--trust", "unrestricted", "--ask-tools", "Bash"].as_slice()
            })
            .args(["--output", "ndjson", "--cwd"])
            .arg(&work)
            .arg(format!("--allow-write={}", work.display()))
            .arg(format!(
                "--allow-net={}",
                stub.base_url().trim_start_matches("http://")
            ))
            .arg(format!("--allow-run={}", program.display()))
            .arg(format!("--allow-env={}", env.join(",")))
            .args(["--extra", &json!({"program": program}).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(run.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        let request = loop {
            let line = lines.next().expect("the run asks before it ends").unwrap();
            let event: AgentEvent = serde_json::from_str(&line).unwrap();
            if let moat_engine::EventPayload::PermissionRequest(request) = &event.payload {
                break request.clone();
            }
            seen.push(event);
        };
        assert_eq!(request.tool_name, "Bash");
        assert_eq!(request.kind.as_deref(), Some("tool"));
        assert_eq!(request.input["command"], "touch moat-permission-probe.txt");
        // The call Claude Code asks about is the one it announced.
        assert!(seen.iter().any(|event| matches!(&event.payload,
            moat_engine::EventPayload::ToolUse(tool) if tool.tool_use_id == request.tool_use_id)));
        let probe = work.join("moat-permission-probe.txt");
        assert!(!probe.exists(), "nothing ran before the answer");
        let answered = if approve {
            moat().args(["approve", "@last"]).output().unwrap()
        } else {
            moat()
                .args(["deny", "@last", "--reason", "not in this test"])
                .output()
                .unwrap()
        };
        assert!(answered.status.success(), "{answered:?}");
        let rest: Vec<AgentEvent> = lines
            .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
            .collect();
        assert!(run.wait().unwrap().success() || !approve);
        assert_eq!(single_done(&rest).status, DoneStatus::Success);
        let result = tool_result(&rest);
        if approve {
            assert_eq!(result.status, ToolStatus::Success, "{:?}", result.output);
            assert!(probe.exists(), "the approved command ran");
        } else {
            assert_ne!(result.status, ToolStatus::Success, "{:?}", result.output);
            assert!(!probe.exists(), "the denied command never ran");
        }
        eprintln!(
            "claude-code: permission prompt {}: ok",
            if approve { "approved" } else { "denied" }
        );
    }
}

/// What `cli`'s shell tool is told to run: a hook and an MCP server
/// (each touching a file in `mark` when run) written into the CLI's own
/// configuration in `home` — what the next plain `claude`, `codex` or
/// `gemini` would run, outside moat.
fn planting(cli: &Cli, home: &Path, mark: &Path) -> String {
    let (h, m) = (home.display(), mark.display());
    // One program, so the CLI's shell tool sees one command to allow.
    let edit = match cli.program {
        "claude" => format!(
            "import json, os; p=\"{h}/.claude.json\"; d=json.load(open(p)); \
             d[\"mcpServers\"]={{\"planted\":{{\"command\":\"touch\",\"args\":[\"{m}/mcp\"]}}}}; \
             json.dump(d, open(p, \"w\")); os.makedirs(\"{h}/.claude\", exist_ok=True); \
             json.dump({{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}/hook\"}}]}}]}}}}, \
             open(\"{h}/.claude/settings.json\", \"w\"))"
        ),
        "codex" => format!(
            "p=\"{h}/codex-home/config.toml\"; s=open(p).read(); \
             open(p, \"w\").write(\"notify = [\\\"touch\\\", \\\"{m}/notify\\\"]\\n\" + s + \
             \"\\n[mcp_servers.planted]\\ncommand = \\\"touch\\\"\\nargs = [\\\"{m}/mcp\\\"]\\n\")"
        ),
        _ => format!(
            "import json; p=\"{h}/.gemini/settings.json\"; d=json.load(open(p)); \
             d[\"mcpServers\"]={{\"planted\":{{\"command\":\"touch\",\"args\":[\"{m}/mcp\"]}}}}; \
             d[\"hooks\"]={{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}/hook\"}}]}}]}}; \
             json.dump(d, open(p, \"w\"))"
        ),
    };
    format!("/usr/bin/python3 -c '{edit}; print(\"moat-tool-use\")'")
}

/// `moat run` of `cli` through the real binary, as a user runs it: its
/// home and offline switches in the environment (set by [`offline`]),
/// the work directory writable; the events.
fn moat_run(
    cli: &Cli,
    program: &Path,
    stub: &StubServer,
    env: &[String],
    work: &Path,
    more: &[&str],
) -> Vec<AgentEvent> {
    moat_run_with(cli, program, stub, env, work, more, &|_| {})
}

/// [`moat_run`], its command first given to `prepare` (an environment of
/// the test's own).
fn moat_run_with(
    cli: &Cli,
    program: &Path,
    stub: &StubServer,
    env: &[String],
    work: &Path,
    more: &[&str],
    prepare: &dyn Fn(&mut std::process::Command),
) -> Vec<AgentEvent> {
    let stub_address = stub.base_url().trim_start_matches("http://").to_owned();
    let mut command = crate::cli::common::moat();
    command
        .args([
            "run",
            cli.adapter,
            "Run echo moat-tool-use in the shell if you can, then answer.",
        ])
        .arg(format!("--extra={}", json!({"program": program})))
        .arg(format!("--cwd={}", work.display()))
        .arg(format!("--allow-write={}", work.display()))
        .arg(format!("--allow-run={}", program.display()))
        .arg(format!("--allow-net={stub_address}"))
        .args(env.iter().map(|name| format!("--allow-env={name}")))
        .args([
            "--model",
            cli.model,
            "--trust",
            "unrestricted",
            "--output",
            "ndjson",
        ])
        .args(more);
    if cli.program == "claude" {
        command.arg("--allowed-tools=Bash");
    }
    prepare(&mut command);
    let output = command.output().unwrap();
    crate::cli::common::events(&output)
}

/// Issue 51's item 2: the CLI, told by its model to plant a hook and an
/// MCP server in its own configuration, tries through its own shell tool:
/// a configuration there when the run starts (Codex's, Gemini CLI's) is
/// read-only to it (`EROFS`); one it makes (Claude Code's settings) and
/// the MCP servers in `~/.claude.json` are put back before the run's
/// `done` (reported), the CLI's state kept; and a second run resumes the
/// first one's session.
fn check_nothing_planted_persists(cli: &Cli, program: &Path, scratch: &Path) {
    let home = tempfile::tempdir_in(scratch).unwrap();
    let home = std::fs::canonicalize(home.keep()).unwrap();
    let work = home.join("work");
    let mark = home.join("mark");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&mark).unwrap();
    let stub = StubServer::start(
        "127.0.0.1:0",
        StubConfig::new(Scenario::ToolUse).with_tool_command(&planting(cli, &home, &mark)),
    )
    .unwrap();
    let env = offline(cli, &stub.base_url(), &home);
    // Claude Code's state file, granted as it exists.
    std::fs::write(home.join(".claude.json"), "{\"numStartups\": 0}").unwrap();
    let config = |cli: &Cli| match cli.program {
        "claude" => home.join(".claude/settings.json"),
        "codex" => home.join("codex-home/config.toml"),
        _ => home.join(".gemini/settings.json"),
    };
    let before = std::fs::read(config(cli)).ok();

    let events = moat_run(cli, program, &stub, &env, &work, &[]);
    succeeded(cli, &events, " planting");
    let done = single_done(&events);
    let result = tool_result(&events);
    let reported = moat_testkit::error_messages(&events, "PROTECTED_WRITE").join("\n");
    if before.is_some() {
        // There when the run started: read-only to the CLI's tool (whose
        // status is its own: Gemini CLI's shell tool says success).
        assert!(
            result
                .output
                .to_string()
                .contains("[Errno 30] Read-only file system"),
            "{}: {:?}",
            cli.adapter,
            result.output
        );
    } else {
        // Made by the run: removed before its done, and reported.
        assert_eq!(
            result.status,
            ToolStatus::Success,
            "{}: {:?}",
            cli.adapter,
            result.output
        );
        assert!(
            reported.contains(&config(cli).display().to_string()),
            "{}: {reported}: {}",
            cli.adapter,
            describe(&events)
        );
    }
    assert_eq!(
        std::fs::read(config(cli)).ok(),
        before,
        "{}: its configuration is as it was",
        cli.adapter
    );
    if cli.program == "claude" {
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(home.join(".claude.json")).unwrap()).unwrap();
        assert!(
            state
                .get("mcpServers")
                .is_none_or(|servers| servers.get("planted").is_none()),
            "{state}"
        );
    }
    assert!(
        std::fs::read_dir(&mark).unwrap().next().is_none(),
        "{}: something planted ran",
        cli.adapter
    );

    // The next run resumes the first one's session: its state stayed.
    let token = done.resume_token.clone().expect("a resume token");
    let resumed = moat_run(
        cli,
        program,
        &stub,
        &env,
        &work,
        &["--resume", &token, "--no-resume-fallback"],
    );
    succeeded(cli, &resumed, " resumed");
    assert_eq!(std::fs::read(config(cli)).ok(), before, "{}", cli.adapter);
}

/// Issue 52: the CLI's model calls, through its secret's route (or its
/// own base URL pointed at the secret's destination), are read by moat's
/// meter as their answers pass. Each is a `moat:usage` event of the
/// meter's and a row of `moat show --net` with its usage (never a header's
/// value or a body), beside the refused request its shell tool makes; and
/// under `--max-tokens` below one call's usage the run is stopped by the
/// meter after its first call — where the same run without a budget makes
/// its second (after the tool) — not at its end.
fn check_metered(cli: &Cli, program: &Path, scratch: &Path) {
    let home = tempfile::tempdir_in(scratch).unwrap();
    let home = std::fs::canonicalize(home.keep()).unwrap();
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let (_dir, secrets, store) = crate::secrets::scratch();
    let key = match cli.program {
        "claude" => "ANTHROPIC_API_KEY",
        "gemini" => "GEMINI_API_KEY",
        _ => "OPENAI_API_KEY",
    };
    crate::secrets::set_secret(&secrets, &store, key, &[]);
    let refused_probe =
        "curl -s -o /dev/null -m 5 -w 'probe=%{http_code}' http://example.invalid/moat-probe";
    let run = |budget: &[&str]| {
        let stub = StubServer::start(
            "127.0.0.1:0",
            StubConfig::new(Scenario::ToolUse).with_tool_command(refused_probe),
        )
        .unwrap();
        let env = offline(cli, &stub.base_url(), &home);
        let address = stub.base_url().trim_start_matches("http://").to_owned();
        let mut more = vec![format!("--secret={key}@http://{address}")];
        more.extend(budget.iter().map(|flag| (*flag).to_owned()));
        let more: Vec<&str> = more.iter().map(String::as_str).collect();
        let events = moat_run_with(cli, program, &stub, &env, &work, &more, &|command| {
            command
                .env("MOAT_SECRETS", &secrets)
                .env("MOAT_STORE", &store);
        });
        let calls = stub
            .requests()
            .into_iter()
            .filter(|r| r.api == cli.api)
            .count();
        (events, calls)
    };
    // No budget: every call metered, one event each.
    let (events, calls) = run(&[]);
    succeeded(cli, &events, " metered");
    assert!(
        calls >= 2,
        "{}: the call after the tool: {calls}",
        cli.adapter
    );
    let metered: Vec<_> = extensions(&events, moat_engine::USAGE_EVENT)
        .into_iter()
        .filter(|usage| usage["source"] == "metered")
        .collect();
    assert_eq!(metered.len(), calls, "{}: {metered:?}", cli.adapter);
    assert!(
        metered
            .iter()
            .all(|usage| usage["vendor"] == cli.api && usage["inputTokens"].as_u64() > Some(0)),
        "{}: {metered:?}",
        cli.adapter
    );
    let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
    assert!(
        rows.iter().any(|row| row["refused"].is_string()
            && row["host"] == "example.invalid"
            && row["wouldAllow"] == "example.invalid:80"),
        "{}: {rows:?}",
        cli.adapter
    );
    // Who made them: the CLI's own process its model calls, curl the
    // probe its tool ran, each with its pid.
    assert!(
        rows.iter()
            .filter(|row| row["vendor"] == cli.api)
            .all(|row| row["pid"].as_u64().is_some() && row["program"].is_string()),
        "{}: {rows:?}",
        cli.adapter
    );
    assert!(
        rows.iter()
            .any(|row| row["host"] == "example.invalid" && row["program"] == "curl"),
        "{}: {rows:?}",
        cli.adapter
    );
    let table = String::from_utf8(
        crate::cli::common::moat()
            .env("MOAT_STORE", &store)
            .args(["show", "@last", "--net"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        table.contains(&format!("[{} ", cli.api))
            && table.contains("REFUSED")
            && table.contains("--allow-net=example.invalid:80")
            && table.contains("as moat read them"),
        "{}: {table}",
        cli.adapter
    );
    eprintln!("{}: moat show --net\n{table}", cli.adapter);
    let recorded = format!("{table}{}", serde_json::to_string(&rows).unwrap());
    for never in [
        crate::secrets::VALUE,
        "moat-offline",
        "sk-ant-moat-offline",
        "moat-tool-use",
        "x-api-key",
        "Bearer",
    ] {
        assert!(
            !recorded.contains(never),
            "{}: {never} in {recorded}",
            cli.adapter
        );
    }

    // A budget below one call's usage: the first call crosses it and the
    // run is stopped there.
    let (events, calls) = run(&["--max-tokens=10"]);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::MaxBudget,
        "{}: {}",
        cli.adapter,
        describe(&events)
    );
    assert_eq!(calls, 1, "{}: stopped after its first call", cli.adapter);
    assert!(
        error_codes(&events).contains(&"BUDGET_EXCEEDED".to_owned()),
        "{}: {}",
        cli.adapter,
        describe(&events)
    );
}
