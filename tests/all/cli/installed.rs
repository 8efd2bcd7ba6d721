//! Adapters installed by name (`moat adapter install|list|remove|inspect`)
//! through the real binary: nothing is installed from bytes that do not
//! have the given hash or without the user accepting its grants; a run by
//! name gets exactly the accepted grants; a new version replaces the old;
//! a component changed on disk is refused; removal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use moat_testkit::components::{COOPERATIVE, ESCAPE};
use serde_json::Value;

use super::common::moat;

/// A data directory (and store) of the test's own.
struct Data {
    dir: tempfile::TempDir,
}

impl Data {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn moat(&self) -> Command {
        let mut command = moat();
        command
            .env("MOAT_DATA_DIR", self.dir.path())
            .env("MOAT_STORE", self.dir.path().join("moat.db"));
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.moat().args(args).output().unwrap()
    }

    fn adapters(&self) -> PathBuf {
        self.dir.path().join("adapters")
    }

    /// The installed adapters `moat adapter list` shows after the
    /// built-in ones.
    fn installed(&self) -> Vec<Value> {
        let output = self.run(&["adapter", "list", "--output", "json"]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let listed: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            listed
                .iter()
                .any(|a| a["name"] == "echo" && a["builtIn"] == true),
            "the built-ins first: {listed:?}"
        );
        listed
            .into_iter()
            .filter(|a| a["builtIn"] == false)
            .collect()
    }
}

fn sha256(path: &str) -> String {
    moat_installed::sha256_hex(&std::fs::read(path).unwrap())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn install(data: &Data, component: &str, extra: &[&str]) -> Output {
    let hash = sha256(component);
    let mut args = vec!["adapter", "install", component, "--sha256", &hash];
    args.extend_from_slice(extra);
    data.run(&args)
}

#[test]
fn nothing_is_installed_without_the_right_hash_or_an_accepted_grant() {
    let data = Data::new();
    let wrong = "0".repeat(64);
    let output = data.run(&["adapter", "install", ESCAPE, "--sha256", &wrong, "--yes"]);
    assert_eq!(output.status.code(), Some(2));
    let message = text(&output.stderr);
    assert!(
        message.contains("nothing was installed") && message.contains(&sha256(ESCAPE)),
        "{message}"
    );
    // Without --yes and without a terminal to ask on: the needs are shown,
    // nothing is installed.
    let output = install(&data, ESCAPE, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stdout).contains("MOAT_ESCAPE_DECLARED"),
        "{}",
        text(&output.stdout)
    );
    assert!(text(&output.stderr).contains("--yes"));
    // Downloads are HTTPS only (the downloader's own tests run a real TLS
    // server: host/installed/tests/download.rs).
    let output = data.run(&[
        "adapter",
        "install",
        "http://127.0.0.1:9/x.wasm",
        "--sha256",
        &wrong,
        "--yes",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("only https:// URLs"),
        "{}",
        text(&output.stderr)
    );
    // A built-in's name is not for installed adapters.
    let output = install(&data, ESCAPE, &["--yes", "--name", "echo"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("built-in"));
    assert!(!data.adapters().join("escape").exists());
    assert!(data.installed().is_empty());
}

#[test]
fn a_run_by_name_gets_exactly_the_grants_accepted_at_install() {
    let data = Data::new();
    let output = install(
        &data,
        ESCAPE,
        &["--name", "probe", "--yes", "--allow-env", "ACCEPTED"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let installed = data.installed();
    assert_eq!(installed.len(), 1);
    assert_eq!(installed[0]["name"], "probe");
    assert_eq!(installed[0]["sha256"], sha256(ESCAPE));
    assert_eq!(
        installed[0]["grants"]["env"],
        serde_json::json!(["ACCEPTED"])
    );
    let listed = data.run(&["adapters"]);
    let listed = text(&listed.stdout);
    let after = listed
        .split("installed (moat adapter install|inspect|remove):")
        .nth(1)
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(after.trim_start().starts_with("probe"), "{listed}");
    let run = data
        .moat()
        .args([
            "run",
            "probe",
            "env ACCEPTED\nenv OTHER\nenv MOAT_ESCAPE_DECLARED",
            "--output",
            "text",
        ])
        .env("ACCEPTED", "yes")
        .env("OTHER", "no")
        .env("MOAT_ESCAPE_DECLARED", "declared")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let lines: Vec<String> = text(&run.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "ok: yes");
    assert!(lines[1].starts_with("denied:"), "{lines:?}");
    // What it declares was not accepted: not granted.
    assert!(lines[2].starts_with("denied:"), "{lines:?}");

    // With --grant-declared, what it declares is accepted too.
    let output = install(
        &data,
        ESCAPE,
        &["--name", "trusted", "--yes", "--grant-declared"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let trusted = data
        .installed()
        .into_iter()
        .find(|m| m["name"] == "trusted")
        .unwrap();
    assert_eq!(
        trusted["grants"]["env"],
        serde_json::json!(["MOAT_ESCAPE_DECLARED"])
    );
    assert!(
        trusted["grants"]["net"]
            .to_string()
            .contains("probe.invalid"),
        "{trusted}"
    );
}

#[test]
fn a_new_version_replaces_the_old_a_changed_component_is_refused_and_removal_removes() {
    let data = Data::new();
    assert!(
        install(&data, ESCAPE, &["--name", "tool", "--yes"])
            .status
            .success()
    );
    let output = install(&data, COOPERATIVE, &["--name", "tool", "--yes"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with("updated tool:"),
        "{}",
        text(&output.stdout)
    );
    let installed = data.installed();
    assert_eq!(installed.len(), 1);
    assert_eq!(installed[0]["sha256"], sha256(COOPERATIVE));
    let inspect = data.run(&["adapter", "inspect", "tool"]);
    assert_eq!(inspect.status.code(), Some(0));
    assert!(text(&inspect.stdout).contains("match the recorded SHA-256"));

    // Changed on disk after installing: never run.
    let component = data.adapters().join("tool/component.wasm");
    let mut bytes = std::fs::read(&component).unwrap();
    bytes.extend_from_slice(b"\0");
    std::fs::write(&component, bytes).unwrap();
    let run = data.run(&["run", "tool", "hi", "--output", "ndjson"]);
    assert_eq!(run.status.code(), Some(2));
    let message = text(&run.stderr);
    assert!(
        message.contains("changed on disk") && message.contains("not run"),
        "{message}"
    );
    assert!(run.stdout.is_empty(), "nothing ran");
    let inspect = data.run(&["adapter", "inspect", "tool"]);
    assert_eq!(inspect.status.code(), Some(1));
    assert!(text(&inspect.stdout).contains("CHANGED"));

    let removed = data.run(&["adapter", "remove", "tool"]);
    assert_eq!(removed.status.code(), Some(0), "{}", text(&removed.stderr));
    assert!(data.installed().is_empty());
    assert!(!Path::new(&data.adapters().join("tool")).exists());
    let again = data.run(&["adapter", "remove", "tool"]);
    assert_eq!(again.status.code(), Some(2));
    let run = data.run(&["run", "tool", "hi"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("unknown adapter `tool`"));
}
