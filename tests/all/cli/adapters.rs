//! The `moat` binary running the built-in CLI adapters: `--allow-run` and
//! `--extra` on the command line, a stand-in CLI (a shell script printing
//! the stdout lines of a recording of the real CLI, tests/fixtures/cli),
//! Ctrl-C, and `moat adapters` showing what is installed.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload};

use super::common::{events, moat};

fn done(events: &[AgentEvent]) -> &moat_engine::DonePayload {
    match &events.last().expect("events").payload {
        EventPayload::Done(done) => done,
        other => panic!("the last event is {other:?}"),
    }
}

/// A stand-in CLI named `name` in a directory of its own: it writes its
/// arguments (one per line) and its pid beside itself, prints the stdout
/// lines of the recording `cli/scenario` (up to the first one containing
/// `upto`, when given), then runs `after` (shell).
pub(super) struct StandIn {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl StandIn {
    pub(super) fn new(
        name: &str,
        cli: &str,
        scenario: &str,
        upto: Option<&str>,
        after: &str,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let fixture = moat_testkit::cli_fixture(cli, scenario);
        let mut stdout = String::new();
        let recorded = std::fs::read_to_string(&fixture).unwrap();
        let lines = recorded
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|entry| entry["stdout"].as_str().map(str::to_owned));
        for line in lines {
            stdout.push_str(&line);
            stdout.push('\n');
            if upto.is_some_and(|marker| line.contains(marker)) {
                break;
            }
        }
        std::fs::write(root.join("stdout.jsonl"), stdout).unwrap();
        let program = root.join(name);
        // Contained to the run's grants, it writes only into `out`.
        std::fs::create_dir(root.join("out")).unwrap();
        let script = format!(
            "#!/bin/sh\necho $$@$(stat -Lc %i /proc/self/ns/pid) > '{dir}/out/pid'\nprintf '%s\\n' \"$@\" > '{dir}/out/args'\n\
             cat '{dir}/stdout.jsonl'\n{after}\n",
            dir = root.display()
        );
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        StandIn { dir, program }
    }

    pub(super) fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    pub(super) fn args(&self) -> Vec<String> {
        std::fs::read_to_string(self.root().join("out/args"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The flags that let a run start it and let it write its `out`.
    pub(super) fn grant_flags(&self) -> [String; 4] {
        [
            "--allow-run".into(),
            self.program.to_string_lossy().into_owned(),
            "--allow-write".into(),
            self.root().join("out").to_string_lossy().into_owned(),
        ]
    }

    pub(super) fn extra(&self) -> String {
        serde_json::json!({"program": self.program}).to_string()
    }
}

#[test]
fn run_claude_code_granted_by_allow_run_streams_the_recorded_answer() {
    let cli = StandIn::new("claude", "claude", "text", None, "exit 0");
    let output = moat()
        .args(["run", "claude-code", "Say hello.", "--output", "ndjson"])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .args(["--model", "claude-sonnet-4-5"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    assert!(matches!(events[0].payload, EventPayload::Init(_)));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(
        done.result.as_deref(),
        Some("Hello from the moat backend stub.")
    );
    assert!(done.resume_token.is_some());
    let args = cli.args();
    assert!(
        args.contains(&"--model=claude-sonnet-4-5".to_owned()),
        "{args:?}"
    );
    assert_eq!(&args[args.len() - 2..], ["--", "Say hello."]);
}

#[test]
fn without_allow_run_the_cli_is_not_started_and_the_flag_is_named() {
    let cli = StandIn::new("codex", "codex", "text", None, "exit 0");
    let output = moat()
        .args([
            "run",
            "codex",
            "hi",
            "--output",
            "ndjson",
            "--extra",
            &cli.extra(),
        ])
        .output()
        .unwrap();
    let events = events(&output);
    assert_eq!(done(&events).status, DoneStatus::Error);
    let denied = events.iter().any(|e| {
        matches!(&e.payload, EventPayload::Error(error)
            if error.code.as_deref() == Some("CAPABILITY_DENIED") && error.message.contains("--allow-run"))
    });
    assert!(denied, "{events:?}");
    assert!(
        !cli.root().join("out/pid").exists(),
        "the CLI never started"
    );
}

#[test]
fn ctrl_c_ends_a_cli_run_interrupted_and_stops_the_cli() {
    // The recording's lines up to its tool call, then a hang.
    let cli = StandIn::new(
        "gemini",
        "gemini",
        "tool-use",
        Some(r#""type":"tool_use""#),
        "exec sleep 600",
    );
    let child = moat()
        .args([
            "run",
            "gemini",
            "hi",
            "--output",
            "ndjson",
            "--trust",
            "controlled",
        ])
        .args(cli.grant_flags())
        .args(["--extra", &cli.extra()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = cli.root().join("out/pid");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pid_file.exists() {
        assert!(Instant::now() < deadline, "the CLI starts");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let it print its lines and settle into the hang.
    std::thread::sleep(Duration::from_millis(500));
    // As the CLI sees itself: inside its PID namespace.
    let cli_pid: moat_testkit::fake_cli::ReportedPid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signalling the moat process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let events = events(&output);
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert!(done.resume_token.is_some(), "the session can be resumed");
    let gone = || cli_pid.gone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone() {
        assert!(Instant::now() < deadline, "the CLI is stopped with the run");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn adapters_shows_whether_each_cli_is_installed() {
    let cli = StandIn::new("claude", "claude", "text", None, "exit 0");
    let version = cli.root().join("claude");
    std::fs::write(&version, "#!/bin/sh\necho '9.9.9 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&version, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = moat()
        .arg("adapters")
        .env("PATH", cli.root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("claude: ") && text.contains("(9.9.9 (Claude Code))"),
        "{text}"
    );
    assert!(
        text.contains("codex: not installed (not on PATH); install: npm install -g @openai/codex"),
        "{text}"
    );
}
