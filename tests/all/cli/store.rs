//! The run store through the real binary: every `moat run` is recorded
//! with its events; `ps`, `show` and `logs` read it back from another
//! process; `cancel` from a second process stops a run; a `kill -9`ed moat's
//! runs fail with `engine restart` (and only those); a store that cannot be
//! opened says so in one line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, codes};
use moat_testkit::components::{COOPERATIVE, FLOOD};
use serde_json::Value;

use super::common::{events, moat};

/// A store of the test's own (and, with [`Scratch::on_cluster`], a
/// cluster's runs instead).
pub(crate) struct Scratch {
    _dir: tempfile::TempDir,
    pub(crate) store: PathBuf,
    /// The cluster whose runs `moat` works on (`MOAT_NATS`).
    nats: Option<String>,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state/moat.db");
        Self {
            _dir: dir,
            store,
            nats: None,
        }
    }

    /// Every `moat` of it works on the runs of the cluster at `url`.
    pub(crate) fn on_cluster(url: &str) -> Self {
        Self {
            nats: Some(url.to_owned()),
            ..Self::new()
        }
    }

    /// A directory of its own, for files a test writes.
    pub(crate) fn dir(&self) -> &Path {
        self._dir.path()
    }

    pub(crate) fn moat(&self) -> Command {
        let mut command = moat();
        command.env("MOAT_STORE", &self.store);
        if let Some(url) = &self.nats {
            command.env("MOAT_NATS", url);
        }
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.moat().args(args).output().unwrap()
    }

    /// `moat ps --all --output json`.
    pub(crate) fn runs(&self) -> Vec<Value> {
        self.listed(&[])
    }

    /// `moat ps --all --parent PARENT --output json`: its children.
    pub(crate) fn children(&self, parent: &str) -> Vec<Value> {
        self.listed(&["--parent", parent])
    }

    fn listed(&self, filter: &[&str]) -> Vec<Value> {
        let output = self
            .moat()
            .args(["ps", "--all", "--output", "json"])
            .args(filter)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// The stored events of `id`.
    pub(crate) fn logs(&self, id: &str) -> Vec<AgentEvent> {
        let output = self.run(&["logs", id, "--output", "ndjson"]);
        // A run still going, or a success, is 0; a failed run's `done` 1,
        // without moat's own complaint (which would be 1 too).
        let complaint = stderr(&output);
        assert!(
            matches!(output.status.code(), Some(0 | 1)) && !complaint.contains("moat: "),
            "{complaint}"
        );
        events(&output)
    }

    /// `moat cancel id`, which must be taken.
    pub(crate) fn cancel(&self, id: &str) {
        let output = self.run(&["cancel", id]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }

    /// Starts a long cooperative run and waits until it is running and has
    /// stored events: moat, and the run's id.
    fn start_long_run(&self) -> (Child, String) {
        let mut child = self
            .moat()
            .args(["run", COOPERATIVE, "go", "--output", "ndjson"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        match self.wait_until_running(Duration::from_secs(30)) {
            Some(id) => (child, id),
            None => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the run never showed up running ({status:?})");
            }
        }
    }

    /// The id of a running run with at least three stored events, once
    /// there is one.
    fn wait_until_running(&self, patience: Duration) -> Option<String> {
        let until = Instant::now() + patience;
        while Instant::now() < until {
            if let Some(run) = self.runs().into_iter().find(|r| r["status"] == "running") {
                let id = run["id"].as_str().unwrap().to_owned();
                if self.logs(&id).len() >= 3 {
                    return Some(id);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn record<'a>(runs: &'a [Value], id: &str) -> &'a Value {
    runs.iter()
        .find(|r| r["id"] == id)
        .expect("the run is listed")
}

pub(crate) fn dones(events: &[AgentEvent]) -> Vec<DoneStatus> {
    events
        .iter()
        .filter_map(|e| e.as_done().map(|d| d.status))
        .collect()
}

#[test]
fn a_run_is_recorded_with_its_events_and_read_back_by_another_process() {
    let scratch = Scratch::new();
    let output = scratch.run(&["run", "echo", "hello store", "--output", "ndjson"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let runs = scratch.runs();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["status"], "completed");
    assert_eq!(run["adapter"], "echo");
    assert_eq!(run["prompt"], "hello store");
    assert_eq!(run["timeoutMs"], 60_000, "the built-in's default, stored");
    let id = run["id"].as_str().unwrap();
    assert!(id.starts_with("r_"), "{id}");
    assert_eq!(
        scratch.logs(id),
        events(&output),
        "the same events, in order"
    );
    // A prefix names it; `show` prints its record.
    let shown = scratch.run(&["show", &id[..10]]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("status       completed"));
    // Nothing is recorded with --no-store.
    let unstored = scratch.run(&["run", "echo", "hi", "--no-store", "--output", "ndjson"]);
    assert_eq!(unstored.status.code(), Some(0));
    assert_eq!(scratch.runs().len(), 1);
}

#[test]
fn a_long_run_replays_byte_for_byte_as_it_was_printed_page_after_page() {
    // More events than `moat logs` reads at a time (4,096).
    let scratch = Scratch::new();
    let live = scratch.run(&["run", FLOOD, "10000", "--output", "ndjson"]);
    assert_eq!(live.status.code(), Some(0), "{}", stderr(&live));
    let id = scratch.runs()[0]["id"].as_str().unwrap().to_owned();
    let replay = scratch.run(&["logs", &id, "--output", "ndjson"]);
    assert_eq!(replay.status.code(), Some(0), "{}", stderr(&replay));
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).lines().count(),
        10_001
    );
    assert!(
        replay.stdout == live.stdout,
        "the replay is the live output, byte for byte"
    );
    // A renderer that needs the events parsed gets every one of them too.
    let text = scratch.run(&["logs", &id, "--output", "text"]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).trim(),
        "x".repeat(10_000)
    );
}

#[test]
fn no_store_leaves_nothing_on_disk() {
    let scratch = Scratch::new();
    let output = scratch.run(&["run", "echo", "hi", "--no-store", "--output", "ndjson"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!scratch.store.exists());
    assert!(!scratch.store.parent().unwrap().exists());
}

#[test]
fn cancel_from_a_second_process_stops_the_run_with_its_done() {
    let scratch = Scratch::new();
    let (mut running, id) = scratch.start_long_run();
    let asked = Instant::now();
    let cancel = scratch.run(&["cancel", &id]);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    let status = running.wait().unwrap();
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(1), "a cancelled run is not a success");
    // The owner polls every 200 ms; the adapter drains within 500 ms.
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    let runs = scratch.runs();
    let run = record(&runs, &id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["reason"], "cancelled");
    let events = scratch.logs(&id);
    assert_eq!(dones(&events), [DoneStatus::Interrupted]);
    assert!(events.last().unwrap().is_done());
    // Idempotent: again, and for runs that are over or unknown.
    let again = scratch.run(&["cancel", &id, "r_0000000000"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
}

#[test]
fn a_killed_moats_runs_fail_with_engine_restart_and_keep_their_events() {
    let scratch = Scratch::new();
    let (mut running, id) = scratch.start_long_run();
    let seen = scratch.logs(&id);
    running.kill().unwrap();
    running.wait().unwrap();
    let runs = scratch.runs();
    let run = record(&runs, &id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["reason"], "engine restart");
    let events = scratch.logs(&id);
    assert!(events.len() > seen.len(), "what was stored, and a done");
    assert_eq!(&events[..seen.len()], &seen[..], "stored events intact");
    assert_eq!(dones(&events), [DoneStatus::Error]);
}

#[test]
fn two_moats_at_once_never_fail_each_others_runs() {
    let scratch = Scratch::new();
    let (mut running, id) = scratch.start_long_run();
    // A second moat opens the same store (and reconciles it) while the
    // first one's run is live.
    let other = scratch.run(&["run", "echo", "hi", "--output", "ndjson"]);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    let runs = scratch.runs();
    assert_eq!(record(&runs, &id)["status"], "running");
    assert_eq!(runs.len(), 2);
    scratch.cancel(&id);
    running.wait().unwrap();
}

#[test]
fn a_store_that_cannot_be_opened_is_one_clear_line() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.store.parent().unwrap()).unwrap();
    std::fs::write(&scratch.store, vec![7u8; 8192]).unwrap();
    for args in [&["ps"][..], &["run", "echo", "hi"][..]] {
        let output = scratch.run(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(message.contains("cannot open the run store"), "{message}");
        assert!(message.contains("--no-store"), "{message}");
        assert_eq!(message.trim().lines().count(), 1, "{message}");
    }
    let unstored = scratch.run(&["run", "echo", "hi", "--no-store"]);
    assert_eq!(unstored.status.code(), Some(0), "{}", stderr(&unstored));
    assert!(Path::new(&scratch.store).exists());

    // A store a newer moat wrote (a schema version this one does not know)
    // is refused, and left as it was.
    let newer = Scratch::new();
    let made = newer.run(&["run", "echo", "hi"]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let version = |set: Option<i64>| {
        let conn = rusqlite::Connection::open(&newer.store).unwrap();
        if let Some(version) = set {
            conn.pragma_update(None, "user_version", version).unwrap();
        }
        conn.query_row("PRAGMA user_version", [], |row| row.get::<_, i64>(0))
            .unwrap()
    };
    let future = version(None) + 1;
    version(Some(future));
    for args in [&["ps"][..], &["run", "echo", "hi"][..]] {
        let output = newer.run(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(message.contains("newer moat"), "{message}");
        assert_eq!(message.trim().lines().count(), 1, "{message}");
    }
    assert_eq!(version(None), future, "not altered");
}

#[test]
fn a_child_run_ends_with_parent_ended_when_its_parent_ends_and_its_moat_stops_it() {
    let scratch = Scratch::new();
    let (mut parents_moat, parent) = scratch.start_long_run();
    let childs_moat = scratch
        .moat()
        .args(["run", COOPERATIVE, "go", "--output", "ndjson"])
        .args(["--parent", &parent[..8]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let child = loop {
        let runs = scratch.runs();
        if let Some(run) = runs
            .iter()
            .find(|r| r["parent"] == parent.as_str() && r["status"] == "running")
        {
            break run["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < until, "the child never ran: {runs:?}");
        std::thread::sleep(Duration::from_millis(20));
    };

    scratch.cancel(&parent);
    parents_moat.wait().unwrap();
    // The child's own moat is told through the store and stops it.
    let stopped = Instant::now();
    let output = childs_moat.wait_with_output().unwrap();
    assert!(stopped.elapsed() < Duration::from_secs(5));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(events(&output).last().unwrap().is_done());

    let runs = scratch.runs();
    assert_eq!(record(&runs, &parent)["reason"], "cancelled");
    let run = record(&runs, &child);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["reason"], "parent ended");
    let stored = scratch.logs(&child);
    assert_eq!(dones(&stored), [DoneStatus::Interrupted]);
    assert!(stored.last().unwrap().is_done());

    // A child of a run that has ended is refused in one line, as the
    // user's mistake (exit 2), like a parent that does not exist.
    let late = scratch.run(&["run", "echo", "hi", "--parent", &parent]);
    assert_eq!(late.status.code(), Some(2));
    let message = stderr(&late);
    assert!(message.contains("has ended"), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");
}

/// A parent whose record does not read (its limits damaged in the store)
/// bounds a child as the most restrictive parent would: the child is
/// refused, naming the parent and what does not read — never run bounded
/// by the ceiling alone, as a child of no parent. With the record intact
/// the same child runs.
#[test]
fn a_child_of_a_parent_whose_record_does_not_read_is_refused() {
    let scratch = Scratch::new();
    let (mut parents_moat, parent) = scratch.start_long_run();
    let child = scratch.run(&["run", "echo", "hi", "--parent", &parent]);
    assert_eq!(child.status.code(), Some(0), "{}", stderr(&child));

    let conn = rusqlite::Connection::open(&scratch.store).unwrap();
    let damaged = conn
        .execute(
            "UPDATE runs SET limits = '{\"memoryBytes\": \"lots\"' WHERE id = ?1",
            [&parent],
        )
        .unwrap();
    assert_eq!(damaged, 1);
    let refused = scratch.run(&["run", "echo", "hi", "--parent", &parent]);
    assert_ne!(refused.status.code(), Some(0));
    let message = stderr(&refused);
    assert!(
        message.contains(&format!("the record of {parent} does not read (limits)")),
        "{message}"
    );
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    scratch.cancel(&parent);
    parents_moat.wait().unwrap();
}

/// What a script run in a mount namespace of its own left in `out`.
fn read(out: &Path, name: &str) -> String {
    std::fs::read_to_string(out.join(name)).unwrap_or_default()
}

#[test]
fn a_store_whose_disk_fills_mid_run_stops_the_run_with_an_error_and_a_full_disk_is_refused_at_start()
 {
    // A real full disk: a small tmpfs, mounted in a mount namespace of the
    // script's own (so nothing outlives the test), holding the store.
    let scratch = Scratch::new();
    let disk = scratch._dir.path().join("disk");
    let out = scratch._dir.path().join("out");
    std::fs::create_dir_all(&disk).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let script = r#"
        mount -t tmpfs -o size=384k tmpfs "$DISK" || exit 77
        head -c 65536 /dev/zero > "$DISK/room"
        export MOAT_STORE="$DISK/state/moat.db"
        "$MOAT" run "$FLOOD" 2000000 --output ndjson > "$OUT/run.out" 2> "$OUT/run.err"
        echo $? > "$OUT/run.code"
        rm "$DISK/room"
        "$MOAT" ps --all --output json > "$OUT/ps.out" 2> "$OUT/ps.err"
        # The only run: its id's prefix `r_` names it.
        "$MOAT" logs r_ --output ndjson > "$OUT/logs.out" 2> "$OUT/logs.err"
        cat /dev/zero > "$DISK/full" 2> /dev/null
        MOAT_STORE="$DISK/other/moat.db" "$MOAT" run echo hi > "$OUT/full.out" 2> "$OUT/full.err"
        echo $? > "$OUT/full.code"
        # The same disk read-only: the store that is there, and a new one.
        mount -o remount,ro "$DISK" || exit 78
        "$MOAT" ps --all > "$OUT/ro.out" 2> "$OUT/ro.err"
        echo $? > "$OUT/ro.code"
        MOAT_STORE="$DISK/new/moat.db" "$MOAT" run echo hi > "$OUT/ronew.out" 2> "$OUT/ronew.err"
        echo $? > "$OUT/ronew.code"
    "#;
    let status = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .env("DISK", &disk)
        .env("OUT", &out)
        .env("MOAT", env!("CARGO_BIN_EXE_moat"))
        .env("FLOOD", moat_testkit::components::FLOOD)
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env_remove("MOAT_LOG")
        .status();
    match status.map(|s| s.code()) {
        Ok(Some(77)) | Err(_) => {
            eprintln!("skipped: this machine cannot mount a tmpfs in a mount namespace");
            return;
        }
        _ => {}
    }

    // Mid-run: the run stopped with STORE_ERROR and one done, error.
    assert_eq!(
        read(&out, "run.code").trim(),
        "1",
        "{}",
        read(&out, "run.err")
    );
    let shown: Vec<AgentEvent> = read(&out, "run.out")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let errors: Vec<_> = shown.iter().filter_map(AgentEvent::as_error).collect();
    assert!(
        errors
            .iter()
            .any(|e| e.code.as_deref() == Some(codes::STORE_ERROR)
                && e.message.contains("could not be written")),
        "{errors:?}"
    );
    assert_eq!(dones(&shown), [DoneStatus::Error]);
    assert!(shown.last().unwrap().is_done());
    let deltas = shown
        .iter()
        .filter(|e| e.type_name() == "text_delta")
        .count();
    assert!(deltas < 2_000_000, "the run was stopped, not finished");

    // The record ended failed, with what was stored before the disk
    // filled intact and one done.
    let runs: Vec<Value> = serde_json::from_str(&read(&out, "ps.out"))
        .unwrap_or_else(|e| panic!("{e}: {}", read(&out, "ps.err")));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "failed");
    let reason = runs[0]["reason"].as_str().unwrap();
    assert!(
        ["store error", "engine restart"].contains(&reason),
        "{reason}"
    );
    let stored: Vec<AgentEvent> = read(&out, "logs.out")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(stored.len() > 1, "{}", read(&out, "logs.err"));
    assert_eq!(dones(&stored), [DoneStatus::Error]);
    assert!(stored.last().unwrap().is_done());
    assert_eq!(
        &stored[..stored.len() - 1],
        &shown[..stored.len() - 1],
        "stored in order"
    );

    // At start: a full disk is one line naming the store and the way out.
    assert_eq!(read(&out, "full.code").trim(), "1");
    let message = read(&out, "full.err");
    assert!(message.contains("cannot open the run store"), "{message}");
    assert!(message.contains("full"), "{message}");
    assert!(message.contains("--no-store"), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");

    // A read-only store, the one there or a new one, is one line too.
    for name in ["ro", "ronew"] {
        assert_eq!(read(&out, &format!("{name}.code")).trim(), "1", "{name}");
        let message = read(&out, &format!("{name}.err"));
        assert!(message.contains("cannot open the run store"), "{message}");
        // The OS says it ("Read-only file system") or SQLite does ("attempt
        // to write a readonly database"), whichever write comes first; the
        // store never leaves it at SQLite's "unable to open".
        let lower = message.to_lowercase();
        assert!(
            lower.contains("read-only") || lower.contains("readonly"),
            "{message}"
        );
        assert!(message.contains("--no-store"), "{message}");
        assert_eq!(message.trim().lines().count(), 1, "{message}");
    }
}

#[test]
fn a_detached_run_prints_its_id_goes_on_and_can_be_waited_for() {
    let scratch = Scratch::new();
    let detached = scratch.run(&["run", "echo", "hello later", "--detach"]);
    assert_eq!(detached.status.code(), Some(0), "{}", stderr(&detached));
    let id = String::from_utf8(detached.stdout)
        .unwrap()
        .trim()
        .to_owned();
    assert!(id.starts_with("r_"), "only the id: {id:?}");
    let waited = scratch.run(&["wait", &id]);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    assert_eq!(record(&scratch.runs(), &id)["status"], "completed");
    let text = scratch.run(&["logs", &id, "--output", "text"]);
    assert_eq!(String::from_utf8_lossy(&text.stdout).trim(), "hello later");

    // A run that fails makes `wait` fail, as `moat run` would.
    let failing = scratch.run(&["run", COOPERATIVE, "go", "--detach"]);
    let failing = String::from_utf8(failing.stdout).unwrap().trim().to_owned();
    scratch.cancel(&failing);
    let waited = scratch.run(&["wait", &id, &failing]);
    assert_eq!(waited.status.code(), Some(1));
}

#[test]
fn logs_follow_prints_stored_then_live_events_until_done() {
    let scratch = Scratch::new();
    let (mut running, id) = scratch.start_long_run();
    let follow = scratch
        .moat()
        .args(["logs", &id, "--follow", "--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it print what is stored and some live events, then end the run.
    std::thread::sleep(Duration::from_millis(300));
    let stored_before_cancel = scratch.logs(&id).len();
    scratch.cancel(&id);
    running.wait().unwrap();
    let output = follow.wait_with_output().unwrap();
    let followed = events(&output);
    assert!(followed.len() >= stored_before_cancel, "live events too");
    assert_eq!(followed, scratch.logs(&id), "every stored event, in order");
    assert_eq!(dones(&followed), [DoneStatus::Interrupted]);
}

#[test]
fn the_resolved_timeout_is_on_the_record_and_its_expiry_fails_the_run_with_timeout() {
    let scratch = Scratch::new();
    let output = scratch.run(&[
        "run",
        COOPERATIVE,
        "go",
        "--timeout",
        "300ms",
        "--output",
        "ndjson",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let runs = scratch.runs();
    let run = &runs[0];
    assert_eq!(run["timeoutMs"], 300);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["reason"], "timeout");
    let id = run["id"].as_str().unwrap();
    assert_eq!(dones(&scratch.logs(id)).len(), 1);
}

#[test]
fn parallel_tasks_are_runs_each_recorded_and_cancellable_alone() {
    let scratch = Scratch::new();
    let mut parallel = scratch
        .moat()
        .args(["parallel", "--task", &format!("a:{COOPERATIVE}=go")])
        .args([
            "--task",
            &format!("b:{COOPERATIVE}=go"),
            "--output",
            "ndjson",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let running = loop {
        let running: Vec<String> = scratch
            .runs()
            .iter()
            .filter(|r| r["status"] == "running")
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        if running.len() == 2 || Instant::now() > until {
            break running;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if running.len() != 2 {
        let _ = parallel.kill();
        let _ = parallel.wait();
        panic!("two running tasks: {running:?}");
    }
    // One task cancelled: it ends, the other goes on.
    scratch.cancel(&running[0]);
    let waited = scratch.run(&["wait", &running[0]]);
    assert_eq!(waited.status.code(), Some(1));
    assert_eq!(record(&scratch.runs(), &running[1])["status"], "running");
    scratch.cancel(&running[1]);
    parallel.wait().unwrap();
    for id in &running {
        let runs = scratch.runs();
        assert_eq!(record(&runs, id)["reason"], "cancelled");
        assert_eq!(dones(&scratch.logs(id)), [DoneStatus::Interrupted]);
    }
}
