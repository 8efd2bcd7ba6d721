//! A fake agent CLI for the end-to-end tests of the CLI adapters: a link to
//! the fixture replayer (`moat-fake-cli` of tools/cli-fixture, see
//! [`replayer`]) named like the CLI, in a directory of its own with its
//! configuration beside it, granted by its absolute path.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use moat_engine::AgentEvent;
use moat_grants::{Grants, TrustLevel};
use moat_sandbox::WasmAdapter;

use crate::Request;
use serde_json::{Value, json};

/// The fixture replayer, `moat-fake-cli` of tools/cli-fixture (see
/// [`crate::helper_binary`]).
pub fn replayer() -> &'static Path {
    static REPLAYER: OnceLock<PathBuf> = OnceLock::new();
    REPLAYER.get_or_init(|| crate::helper_binary("moat-cli-fixture", "moat-fake-cli"))
}

/// Where, inside its directory, the fake CLI writes its record.
const OUT: &str = "out";

/// One fake CLI installation.
pub struct FakeCli {
    dir: tempfile::TempDir,
    /// The fake program (`…/claude`).
    pub program: PathBuf,
    record: PathBuf,
}

impl FakeCli {
    /// The [`replayer`] named `name`, replaying the recorded
    /// `tests/fixtures/cli/<cli>/<scenario>.jsonl`; `config` adds to or
    /// overrides the replay's configuration (`speed`, `hang_after`,
    /// `ignore_sigterm`, `spawn_grandchild`, `exit_code`).
    pub fn new(name: &str, cli: &str, scenario: &str, config: Value) -> Self {
        Self::starts(name, cli, &[scenario], config)
    }

    /// Like [`FakeCli::new`], replaying `scenarios[0]` at its first start,
    /// `scenarios[1]` at its second, and so on (the last one from then on):
    /// a CLI the adapter runs more than once.
    pub fn starts(name: &str, cli: &str, scenarios: &[&str], config: Value) -> Self {
        let (scenario, later) = scenarios.split_first().expect("a scenario");
        let exe = replayer();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        let program = root.join(name);
        // A hard link, not a copy: a file just written can fail to exec with
        // "text file busy" while another test thread forks.
        if std::fs::hard_link(exe, &program).is_err() {
            std::fs::copy(exe, &program).expect("copy the fake CLI");
        }
        // The CLI is contained to the run's grants: its fixture sits beside
        // it (readable), its record goes where the run may write.
        let fixture = crate::cli_fixture(cli, scenario);
        let local = root.join(fixture.file_name().expect("a fixture file"));
        std::fs::copy(&fixture, &local).expect("copy the fixture");
        let meta = moat_cli_fixture::meta_path(&fixture);
        if meta.is_file() {
            std::fs::copy(&meta, moat_cli_fixture::meta_path(&local)).expect("copy its meta");
        }
        std::fs::create_dir(root.join(OUT)).expect("make the record's directory");
        let record = root.join(OUT).join("record.json");
        let then: Vec<PathBuf> = later
            .iter()
            .map(|scenario| {
                let fixture = crate::cli_fixture(cli, scenario);
                let local = root.join(fixture.file_name().expect("a fixture file"));
                std::fs::copy(&fixture, &local).expect("copy the fixture");
                let meta = moat_cli_fixture::meta_path(&fixture);
                std::fs::copy(&meta, moat_cli_fixture::meta_path(&local)).expect("copy its meta");
                local
            })
            .collect();
        let mut full = json!({"fixture": local, "record": record, "then": then});
        if let (Some(full), Some(extra)) = (full.as_object_mut(), config.as_object()) {
            full.extend(extra.clone());
        }
        std::fs::write(root.join("fake-cli.json"), full.to_string()).expect("write the config");
        FakeCli {
            dir,
            program,
            record,
        }
    }

    /// The fake's directory (canonical): the run's working directory.
    pub fn dir(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).expect("canonical temp dir")
    }

    /// What the fake recorded when it started (arguments, pids, cwd,
    /// environment); `None` if it never started.
    pub fn recorded(&self) -> Option<Value> {
        let text = std::fs::read_to_string(&self.record).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The arguments the adapter gave the CLI at its start number `n`
    /// (from 1) of a [`FakeCli::starts`]; `None` if it never started that
    /// often.
    pub fn args_of_start(&self, n: usize) -> Option<Vec<String>> {
        let record = match n {
            1 => self.record.clone(),
            n => PathBuf::from(format!("{}.{n}", self.record.display())),
        };
        let recorded: Value = serde_json::from_str(&std::fs::read_to_string(record).ok()?).ok()?;
        serde_json::from_value(recorded["args"].clone()).ok()
    }

    /// The arguments the adapter gave the CLI.
    pub fn args(&self) -> Vec<String> {
        let recorded = self.recorded().expect("the fake CLI started");
        serde_json::from_value(recorded["args"].clone()).expect("args are strings")
    }

    /// Grants the fake by its absolute path, and its directory for reading.
    pub fn grants(&self) -> Grants {
        Grants {
            run: vec![self.program.to_string_lossy().into_owned()],
            read: vec![self.dir()],
            write: vec![self.dir().join(OUT)],
            ..Grants::none()
        }
    }

    /// A request for `adapter` on `prompt` that starts this fake: granted,
    /// named as `extra.program`, run in its directory.
    pub fn request(&self, adapter: &str, prompt: &str) -> Request {
        let mut request = crate::request(adapter, prompt);
        request.scope.grants = self.grants();
        request.options.extra = Some(json!({"program": self.program}));
        request.options.cwd = Some(self.dir().to_string_lossy().into_owned());
        request
    }

    /// [`request`](Self::request) at trust level `trust`.
    pub fn request_at(&self, adapter: &str, prompt: &str, trust: TrustLevel) -> Request {
        let mut request = self.request(adapter, prompt);
        request.scope.trust = trust;
        request
    }

    /// The fake and its grandchild (if it started one), as it recorded
    /// them: pids in its own PID namespace.
    pub fn pids(&self) -> Vec<ReportedPid> {
        let recorded = self.recorded().expect("the fake CLI started");
        let namespace = recorded["pid_namespace"].as_u64();
        ["pid", "grandchild_pid"]
            .iter()
            .filter_map(|key| recorded[*key].as_u64())
            .map(|pid| ReportedPid {
                pid: pid as u32,
                namespace,
            })
            .collect()
    }
}

pub use moat_cli_fixture::fake::{ReportedPid, process_gone};

/// Waits up to `within` for every process to be gone; the ones still alive.
pub fn survivors(pids: &[ReportedPid], within: Duration) -> Vec<ReportedPid> {
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<ReportedPid> = pids.iter().copied().filter(|p| !p.gone()).collect();
        if alive.is_empty() || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The built-in `adapter`, and `request` with the variables it declares
/// granted too, as moat grants a built-in its declared needs.
async fn builtin_with_its_env(adapter: &str, mut request: Request) -> (WasmAdapter, Request) {
    let loaded = crate::llm_server::load_builtin(adapter).await;
    let declared = Grants::from_needs(loaded.needs()).expect("valid needs");
    request.scope.grants.merge(&Grants {
        env: declared.env,
        ..Grants::none()
    });
    (loaded, request)
}

/// Runs `request` on the built-in `adapter` and collects every event.
pub async fn run(adapter: &str, request: Request) -> Vec<AgentEvent> {
    let (adapter, request) = builtin_with_its_env(adapter, request).await;
    crate::collect(&crate::registry_of([adapter]), request).await
}

/// Runs `request` on the built-in `adapter`, aborting it as soon as an
/// event matching `when` arrives; every event, and whether the abort fired.
pub async fn run_aborting(
    adapter: &str,
    request: Request,
    when: impl Fn(&AgentEvent) -> bool,
) -> (Vec<AgentEvent>, bool) {
    let (adapter, mut request) = builtin_with_its_env(adapter, request).await;
    let registry = crate::registry_of([adapter]);
    let abort = tokio_util::sync::CancellationToken::new();
    request.abort = Some(abort.clone());
    let mut run = moat_engine::run_agent(&registry, request).expect("registered");
    let mut events = Vec::new();
    let all = async {
        while let Some(event) = run.next().await {
            if !abort.is_cancelled() && when(&event) {
                abort.cancel();
            }
            events.push(event);
        }
    };
    tokio::time::timeout(crate::TEST_DEADLINE, all)
        .await
        .expect("the run ended before the test deadline");
    let fired = abort.is_cancelled();
    (events, fired)
}

/// How many stdout lines of the recording come before and including the
/// first one containing `marker`: where to make the fake hang.
pub fn stdout_lines_through(cli: &str, scenario: &str, marker: &str) -> usize {
    let path = crate::cli_fixture(cli, scenario);
    let text = std::fs::read_to_string(&path).expect("the fixture");
    let stdout: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|entry| entry["stdout"].as_str().map(str::to_owned))
        .collect();
    1 + stdout
        .iter()
        .position(|line| line.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in {}", path.display()))
}
