//! `moat-fake-cli` replays a recorded run as the CLI would have printed it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use moat_cli_fixture::fake::process_gone;
use moat_cli_fixture::{Stream, read_lines, read_meta};
use serde_json::{Value, json};

const FAKE: &str = env!("CARGO_BIN_EXE_moat-fake-cli");

fn fixture(cli: &str, scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cli")
        .join(cli)
        .join(format!("{scenario}.jsonl"))
}

/// Writes a configuration into a fresh directory and returns both.
fn configure(config: Value) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake-cli.json");
    std::fs::write(&path, config.to_string()).unwrap();
    (dir, path)
}

fn fake(config: &Path) -> Command {
    let mut command = Command::new(FAKE);
    command
        .env("MOAT_FAKE_CLI_CONFIG", config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn replays_stdout_and_stderr_in_order_and_exits_with_the_recorded_code() {
    let path = fixture("claude", "api-error");
    let record = tempfile::NamedTempFile::new().unwrap();
    let (_dir, config) = configure(json!({
        "fixture": path, "speed": 4.0, "record": record.path(),
    }));
    let started = Instant::now();
    let output = fake(&config).args(["-p", "hi"]).output().unwrap();
    let lines = read_lines(&path).unwrap();
    let expected = |stream| {
        lines
            .iter()
            .filter_map(|line| line.output().filter(|(s, _)| *s == stream))
            .map(|(_, text)| format!("{text}\n"))
            .collect::<String>()
    };
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        expected(Stream::Stdout)
    );
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        expected(Stream::Stderr)
    );
    let meta = read_meta(&moat_cli_fixture::meta_path(&path)).unwrap();
    assert_eq!(output.status.code(), meta.exit_code);
    // The recorded pauses are kept (scaled): it cannot finish sooner.
    let last = lines.last().unwrap().ms;
    assert!(started.elapsed() >= Duration::from_millis(last / 4));
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(record.path()).unwrap()).unwrap();
    assert_eq!(recorded["args"], json!(["-p", "hi"]));
}

#[test]
fn sigterm_ends_a_replay_hung_mid_stream() {
    let (_dir, config) = configure(json!({
        "fixture": fixture("codex", "tool-use"), "speed": 0, "hang_after": 2,
    }));
    let mut child = fake(&config).spawn().unwrap();
    thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "it hangs");
    // SAFETY: signalling a child we own by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn ignoring_sigterm_needs_sigkill_and_the_grandchild_dies_with_the_group() {
    let record = tempfile::NamedTempFile::new().unwrap();
    let (_dir, config) = configure(json!({
        "fixture": fixture("gemini", "text"), "speed": 0, "hang_after": 1,
        "ignore_sigterm": true, "spawn_grandchild": true, "record": record.path(),
    }));
    let mut child = fake(&config).process_group(0).spawn().unwrap();
    let group = child.id() as i32;
    assert!(wait_until(
        || std::fs::read_to_string(record.path()).is_ok_and(|t| !t.is_empty())
    ));
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(record.path()).unwrap()).unwrap();
    let grandchild = recorded["grandchild_pid"].as_u64().unwrap() as u32;
    assert!(!process_gone(grandchild));

    // SAFETY: signalling the process group we created.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGTERM is ignored");
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(
        wait_until(|| process_gone(grandchild)),
        "no orphan left behind"
    );
}

#[test]
fn a_copy_named_like_the_cli_reads_the_configuration_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let claude = dir.path().join("claude");
    // A hard link, not a copy: a file just written can fail to exec with
    // "text file busy" while another test thread forks.
    if std::fs::hard_link(FAKE, &claude).is_err() {
        std::fs::copy(FAKE, &claude).unwrap();
    }
    let config = json!({"fixture": fixture("gemini", "max-turns"), "speed": 0});
    std::fs::write(dir.path().join("fake-cli.json"), config.to_string()).unwrap();
    let output = Command::new(&claude)
        .env_remove("MOAT_FAKE_CLI_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(53),
        "the recorded turn-limit exit"
    );
    assert!(
        String::from_utf8(output.stdout)
            .unwrap()
            .contains("FatalTurnLimitedError")
    );
}
