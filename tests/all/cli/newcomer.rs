//! What a new user meets first, through the real binary: one clean line
//! per problem (no log line or Rust debug struct before it), mistakes
//! refused before anything starts, help that fits the terminal, a terminal
//! left clean after Ctrl-C, secrets typed unseen, completion of adapters
//! and runs, and hints where a bare answer would puzzle.

use std::path::Path;
use std::process::Command;

use moat_testkit::components::{PANIC, SLEEPY};

use super::common::{Typed, at_a_terminal, fed, moat, moat_in, ok_in, screen};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn a_failed_connection_is_one_line_and_no_log_line_reaches_the_terminal() {
    let port = closed_port();
    let run = |verbose: &[&str]| {
        moat()
            .args(verbose)
            .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
            .args(["run", "openai", "hi", "--model", "m", "--no-store"])
            .arg(format!("--allow-net=127.0.0.1:{port}"))
            .args(["--output", "pretty"])
            .output()
            .unwrap()
    };
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(1));
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(out.matches("CONNECTION_FAILED").count(), 1, "{out}");
    assert!(out.contains("is the server running?"), "{out}");
    // Nothing of the logs: no level, no Rust debug struct.
    for leaked in ["WARN", "connect error", "Os {", "ConnectionRefused"] {
        assert!(!err.contains(leaked), "{leaked} on stderr: {err}");
    }
    // Asked for, the details are there.
    let verbose = stderr(&run(&["-vv"]));
    assert!(verbose.contains("connect error"), "{verbose}");
}

#[test]
fn a_missing_model_is_a_usage_error_before_anything_is_recorded() {
    let store = tempfile::tempdir().unwrap();
    for adapter in ["openai", "anthropic"] {
        let output = moat_in(store.path())
            .args(["run", adapter, "hi"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{adapter}");
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with(&format!(
                "moat: the {adapter} adapter needs a model: pass --model (e.g. "
            )),
            "{err}"
        );
        assert!(stdout(&output).is_empty(), "no events: {}", stdout(&output));
    }
    assert_eq!(
        ok_in(store.path(), &["ps", "--all", "-q"]),
        "",
        "no run recorded"
    );
    // The protocol refuses it the same way.
    let answer = fed(
        moat_in(store.path()).args(["serve", "--stdio"]),
        b"{\"id\":1,\"op\":\"run\",\"adapter\":\"openai\",\"prompt\":\"hi\"}\n",
    );
    let answer: serde_json::Value =
        serde_json::from_str(stdout(&answer).lines().next().unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], "INVALID_REQUEST", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the openai adapter needs a model"),
        "{answer}"
    );
}

#[test]
fn an_empty_prompt_from_a_pipe_is_refused_as_on_a_terminal() {
    for (args, input) in [
        (vec!["run", "echo"], ""),
        (vec!["run", "echo", "-"], "  \n"),
    ] {
        let output = fed(moat().args(&args), input.as_bytes());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains("no prompt: stdin was empty"),
            "{}",
            stderr(&output)
        );
    }
    // A prompt piped in still runs.
    let output = fed(
        moat().args(["run", "echo", "--no-store", "-o", "text"]),
        b"piped\n",
    );
    assert!(output.status.success());
    assert_eq!(stdout(&output).trim(), "piped");
}

#[test]
fn a_cli_that_is_not_installed_is_said_once_with_how_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    let output = moat()
        .env("PATH", empty.path())
        .args(["run", "claude-code", "hi", "--no-store", "-o", "ndjson"])
        .output()
        .unwrap();
    let out = stdout(&output);
    let error = out
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|event| event["type"] == "error")
        .unwrap_or_else(|| panic!("no error: {out}"));
    assert_eq!(error["payload"]["code"], "CLI_NOT_FOUND");
    let message = error["payload"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "`claude` was not found on PATH when the run started: install it with \
         `npm install -g @anthropic-ai/claude-code`, or give its absolute path as \
         extra.program and grant that path"
    );
}

#[test]
fn a_workspace_of_a_project_not_granted_names_the_flag_that_grants_it() {
    let repository = moat_testkit::git::repository();
    let project = std::fs::canonicalize(repository.path()).unwrap();
    let output = moat()
        .args(["run", "echo", "hi", "--workspace", "worktree", "--no-store"])
        .arg("--cwd")
        .arg(&project)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("add --allow-write={}", project.display())),
        "{err}"
    );
}

#[test]
fn ps_without_live_runs_points_at_the_newest_and_at_all() {
    let store = tempfile::tempdir().unwrap();
    let empty = moat_in(store.path()).arg("ps").output().unwrap();
    assert!(
        stderr(&empty).is_empty(),
        "an empty store: {}",
        stderr(&empty)
    );
    ok_in(store.path(), &["run", "echo", "hi"]);
    let id = ok_in(store.path(), &["ps", "--all", "-q"]);
    let output = moat_in(store.path()).arg("ps").output().unwrap();
    assert!(output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "no live runs; the newest is {} (echo, completed",
            id.trim()
        )),
        "{err}"
    );
    assert!(err.contains("`moat ps --all`"), "{err}");
    // Only when nothing else was asked for.
    let all = moat_in(store.path())
        .args(["ps", "--all"])
        .output()
        .unwrap();
    assert!(stderr(&all).is_empty(), "{}", stderr(&all));
}

#[test]
fn the_first_ndjson_event_names_the_run_whatever_its_type() {
    let store = tempfile::tempdir().unwrap();
    // The panicking adapter sends text first, no init.
    let output = moat_in(store.path())
        .args(["run", PANIC, "x", "--output", "ndjson"])
        .output()
        .unwrap();
    let out = stdout(&output);
    let first = out
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no events: {}", stderr(&output)));
    assert!(first.starts_with(r#"{"type":"text","#), "{first}");
    let first: serde_json::Value = serde_json::from_str(first).unwrap();
    let id = ok_in(store.path(), &["ps", "--all", "-q"]);
    assert_eq!(first["metadata"]["runId"], id.trim(), "{first}");
    // Only the first: the others are as the run made them.
    for line in out.lines().skip(1) {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(event["metadata"]["runId"].is_null(), "{line}");
    }
}

/// `moat` with none of the tests' variables: its help shows the values
/// of the variables a flag takes its default from, which a person sets
/// to short paths.
fn bare_moat() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moat"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MOAT_") {
            command.env_remove(name);
        }
    }
    command
}

#[test]
fn help_fits_the_terminal_and_shows_examples() {
    for command in [
        &["run"][..],
        &["parallel"],
        &["serve"],
        &["workflow", "run"],
    ] {
        let output = bare_moat()
            .args(command)
            .arg("--help")
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        let help = stdout(&output);
        assert!(output.status.success(), "{command:?}");
        for line in help.lines() {
            assert!(line.chars().count() <= 80, "{command:?}: {line:?}");
        }
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{command:?} has no examples: {help}"));
        assert!(
            examples
                .lines()
                .filter(|l| l.trim_start().starts_with("moat "))
                .count()
                >= 2,
            "{command:?}: {examples}"
        );
    }
    // Words are never split across lines.
    let help = stdout(
        &bare_moat()
            .args(["run", "--help"])
            .env("COLUMNS", "80")
            .output()
            .unwrap(),
    );
    let words: Vec<&str> = help.split_whitespace().collect();
    assert!(words.iter().any(|w| w.contains("unrestricted")), "{help}");
    assert!(
        !words.iter().any(|w| *w == "unr" || *w == "estricted"),
        "{help}"
    );
}

#[test]
fn one_listing_of_adapters_by_either_name() {
    let listed = stdout(&moat().arg("adapters").output().unwrap());
    let aliased = stdout(&moat().args(["adapter", "list"]).output().unwrap());
    assert_eq!(listed, aliased);
    assert!(listed.starts_with("echo"), "{listed}");
    let json: Vec<serde_json::Value> = serde_json::from_slice(
        &moat()
            .args(["adapters", "--output", "json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let builtins: Vec<&str> = json
        .iter()
        .filter(|a| a["builtIn"] == true)
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(
        builtins.contains(&"claude-code") && builtins.contains(&"echo"),
        "{json:?}"
    );
}

#[test]
fn ctrl_c_leaves_no_spinner_on_the_screen() {
    const COLUMNS: u16 = 80;
    let mut command = moat();
    command.args(["run", SLEEPY, "9000 cooperate", "--no-store"]);
    let (shown, status) = at_a_terminal(
        command,
        COLUMNS,
        // The spinner shows, then Ctrl-C is typed (the terminal echoes
        // `^C` where the cursor is).
        &[Typed {
            after: "waiting for the agent",
            keys: b"\x03",
            unechoed: false,
        }],
    );
    assert_eq!(status.code(), Some(130), "{shown:?}");
    let lines = screen(&shown, usize::from(COLUMNS));
    assert!(
        lines.iter().any(|line| line.contains("interrupted")),
        "{lines:#?}"
    );
    assert!(
        !lines
            .iter()
            .any(|line| line.contains("waiting for the agent")),
        "a spinner left on the screen: {lines:#?}"
    );
}

#[test]
fn a_secret_typed_on_a_terminal_is_asked_for_unseen_and_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secrets.json");
    let mut command = moat();
    command
        .env("MOAT_SECRETS", &file)
        .args(["secret", "set", "ANTHROPIC_API_KEY"]);
    let (shown, status) = at_a_terminal(
        command,
        120,
        &[Typed {
            after: "Value of ANTHROPIC_API_KEY",
            keys: b"sk-ant-typed-here\r",
            unechoed: true,
        }],
    );
    assert!(status.success(), "{shown:?}");
    assert!(!shown.contains("sk-ant-typed-here"), "echoed: {shown:?}");
    for said in [
        "kept ANTHROPIC_API_KEY",
        "x-api-key",
        "the built-in anthropic, claude-code send it to api.anthropic.com:443",
        "--secret ANTHROPIC_API_KEY@HOST",
    ] {
        assert!(shown.contains(said), "{said}: {shown:?}");
    }
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept["ANTHROPIC_API_KEY"]["value"], "sk-ant-typed-here");
}

/// bash completing `words` (the last one being typed) with moat's own
/// registration, the binary on PATH: what it offers.
fn bash_completes(store: &Path, words: &[&str]) -> Vec<String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_moat")).parent().unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <(moat completions bash)\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_TYPE=9\n\
         _clap_complete_moat moat '{current}' '{previous}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words = quoted.join(" "),
        cword = words.len() - 1,
        current = words[words.len() - 1],
        previous = words[words.len() - 2],
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("MOAT_STORE", store.join("moat.db"))
        .env("MOAT_DATA_DIR", store.join("data"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|line| line.trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn bash_completes_adapter_names_and_run_ids() {
    let store = tempfile::tempdir().unwrap();
    assert_eq!(
        bash_completes(store.path(), &["moat", "run", "cl"]),
        ["claude-code"]
    );
    let offered = bash_completes(store.path(), &["moat", "inspect", ""]);
    for name in ["echo", "openai", "gemini", "acp"] {
        assert!(offered.iter().any(|o| o == name), "{name}: {offered:?}");
    }
    ok_in(store.path(), &["run", "echo", "hi"]);
    let id = ok_in(store.path(), &["ps", "--all", "-q"]);
    let id = id.trim();
    assert_eq!(
        bash_completes(store.path(), &["moat", "show", &id[..6]]),
        [id]
    );
    let offered = bash_completes(store.path(), &["moat", "logs", ""]);
    assert!(
        offered.iter().any(|o| o == id) && offered.iter().any(|o| o == "@last"),
        "{offered:?}"
    );
}

#[test]
fn doctor_says_rustup_has_no_toolchain_rather_than_that_rust_is_missing() {
    let Some(rustup) = moat_grants::programs::locate("rustup", std::env::var_os("PATH").as_deref())
    else {
        eprintln!("skipped: no rustup on PATH");
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let output = moat()
        .arg("doctor")
        .current_dir(home.path())
        .env("HOME", home.path())
        .env_remove("RUSTUP_HOME")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env("PATH", rustup.parent().unwrap())
        .output()
        .unwrap();
    let out = stdout(&output);
    let line = out
        .lines()
        .find(|line| line.contains("Rust adapters"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("rustup is installed")
            && line.contains(&home.path().join(".rustup").display().to_string()),
        "{line}"
    );
    assert!(line.contains("rustup default stable"), "{line}");
}
