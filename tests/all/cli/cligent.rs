//! moat's events are what cligent's published types describe (moat comes
//! from cligent's engine; TypeScript users type its stream with cligent's
//! `AgentEvent`): the events of every built-in against its stand-in (each
//! recorded scenario of the agent CLIs, each recorded stream of the LLM
//! APIs), of every misbehaving component, of a parallel run (with roles),
//! of `moat logs` and of the protocol's `run_event`s are compiled by the TypeScript compiler as
//! `CligentEvent` values typed by cligent's own `types.ts`
//! (tests/fixtures/cligent, with its licence and commit).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use moat_testkit::components::{ALL, NOT_AN_ADAPTER};
use moat_testkit::llm_server::{LlmServer, Reply};

use super::adapters::StandIn;
use super::common::moat;

/// Events kept per run: every kind a run has shows in its first ones and
/// its `done`, and a flood of a thousand deltas checks no more than ten.
const MOST_LINES: usize = 200;

/// The events of `output` (its NDJSON stdout) saved for the checker.
struct Saved {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

impl Saved {
    fn save(&mut self, name: &str, output: &Output) {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            !lines.is_empty(),
            "{name} printed no events: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut kept: Vec<&str> = lines.iter().take(MOST_LINES).copied().collect();
        if lines.len() > MOST_LINES {
            kept.push(lines[lines.len() - 1]);
        }
        let path = self.dir.path().join(format!("{name}.ndjson"));
        std::fs::write(&path, kept.join("\n") + "\n").unwrap();
        self.files.push(path);
    }
}

/// The TypeScript compiler the TypeScript client installs, when it is.
fn compiler_installed() -> bool {
    let tsc = moat_testkit::repo_root().join("clients/typescript/node_modules/typescript/bin/tsc");
    if tsc.exists() {
        return true;
    }
    let required = std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() == Ok("1");
    let install = "scripts/test installs it; or npm ci --prefix clients/typescript";
    assert!(
        !required,
        "the TypeScript compiler is not installed: {install}"
    );
    eprintln!("skipped: the TypeScript compiler is not installed ({install})");
    false
}

fn ndjson(mut command: Command) -> Output {
    command
        .args(["--output", "ndjson"])
        .output()
        .expect("moat runs")
}

fn stand_in_runs(saved: &mut Saved) {
    for (cli, adapter) in [
        ("claude", "claude-code"),
        ("codex", "codex"),
        ("gemini", "gemini"),
    ] {
        let scenarios = moat_testkit::repo_root()
            .join("tests/fixtures/cli")
            .join(cli);
        for entry in std::fs::read_dir(scenarios).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap();
            let Some(scenario) = name.strip_suffix(".jsonl") else {
                continue;
            };
            let stand_in = StandIn::new(cli, cli, scenario, None, "exit 0");
            let mut command = moat();
            command
                .args(["run", adapter, "Do it.", "--trust", "unrestricted"])
                .args(stand_in.grant_flags())
                .args(["--extra", &stand_in.extra()]);
            saved.save(&format!("{adapter}-{scenario}"), &ndjson(command));
        }
    }
}

fn llm_runs(saved: &mut Saved) {
    for (adapter, url_variable, key_variable, base) in [
        ("openai", "OPENAI_BASE_URL", "OPENAI_API_KEY", "/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", ""),
    ] {
        let fixtures = moat_testkit::repo_root()
            .join("adapters")
            .join(adapter)
            .join("fixtures");
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let path = entry.unwrap().path();
            let server = LlmServer::start(Reply::sse(&std::fs::read(&path).unwrap()));
            let mut command = moat();
            command
                .env(url_variable, format!("{}{base}", server.url()))
                .env(key_variable, "sk-moat-cligent-test")
                .args(["run", adapter, "Say hello", "--model", "m"])
                .arg(format!("--allow-net={}", server.grant()));
            let name = path.file_stem().unwrap().to_str().unwrap();
            saved.save(&format!("{adapter}-{name}"), &ndjson(command));
        }
    }
}

fn misbehaving_runs(saved: &mut Saved) {
    for (name, path) in ALL {
        if *path == NOT_AN_ADAPTER {
            continue;
        }
        let mut command = moat();
        command.args(["run", path, "x", "--timeout", "3s"]);
        let output = ndjson(command);
        if output.stdout.is_empty() {
            // Refused before it ran (a contract from the future): one
            // line on stderr, no events to check.
            assert_eq!(output.status.code(), Some(2), "{name}");
            continue;
        }
        saved.save(name, &output);
    }
}

fn other_paths(saved: &mut Saved) {
    let mut echo = moat();
    echo.args(["run", "echo", "hello there"]);
    saved.save("echo", &ndjson(echo));
    let mut parallel = moat();
    parallel.args([
        "parallel",
        "--task",
        "first:echo=one",
        "--task",
        "second:echo=two",
    ]);
    saved.save("parallel", &ndjson(parallel));
    let logs = moat().args(["logs", "@last"]).output().unwrap();
    saved.save("logs", &logs);
}

/// A `run_event`'s `data` is the event as `moat run` prints it.
fn protocol_runs(saved: &mut Saved) {
    use serde_json::json;
    let (_server, mut client) = crate::serve::client::Server::stdio(&[]);
    for (name, adapter) in [("echo", "echo"), ("panic", moat_testkit::components::PANIC)] {
        let run = crate::serve::start(&mut client, json!({"adapter": adapter, "prompt": "hello"}));
        client.ok("subscribe", json!({"runs": [run]}));
        let events = client.events_until_done(&run);
        let lines: Vec<String> = events.iter().map(|e| e["data"].to_string()).collect();
        let output = Output {
            status: std::process::ExitStatus::default(),
            stdout: (lines.join("\n") + "\n").into_bytes(),
            stderr: Vec::new(),
        };
        saved.save(&format!("protocol-{name}"), &output);
    }
}

fn check(files: &[PathBuf], out: &Path) -> Output {
    let checker = moat_testkit::repo_root().join("tests/fixtures/cligent/check-events.mjs");
    Command::new("node")
        .arg(checker)
        .arg(out)
        .args(files)
        .output()
        .expect("node runs")
}

#[test]
fn every_event_moat_prints_type_checks_as_cligents_agent_event() {
    if !compiler_installed() {
        return;
    }
    let mut saved = Saved {
        dir: tempfile::tempdir().unwrap(),
        files: Vec::new(),
    };
    other_paths(&mut saved);
    protocol_runs(&mut saved);
    stand_in_runs(&mut saved);
    llm_runs(&mut saved);
    misbehaving_runs(&mut saved);
    assert!(saved.files.len() > 40, "{} runs", saved.files.len());
    let output = check(&saved.files, &saved.dir.path().join("check"));
    assert!(
        output.status.success(),
        "moat's events are not cligent's:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // The check itself fails on what cligent does not accept: the shape
    // moat printed before (containment in the init payload).
    let old = saved.dir.path().join("old.ndjson");
    std::fs::write(
        &old,
        r#"{"type":"init","agent":"echo","timestamp":1,"sessionId":"s","payload":{"model":"echo","cwd":"/","tools":[],"containment":"off"}}"#,
    )
    .unwrap();
    let refused = check(&[old], &saved.dir.path().join("old"));
    assert!(
        !refused.status.success(),
        "the checker accepted an old event"
    );
}
