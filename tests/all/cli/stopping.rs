//! Every way a run ends leaves nothing behind: no process it started (not
//! even one that daemonized: double fork, `setsid`, re-parented), no
//! directory of its own; and every way the user stops moat (Ctrl-C,
//! `SIGTERM`, `SIGHUP`, a second signal) ends each run with exactly one
//! `done` interrupted and the signal's conventional exit code.

use std::io::BufRead;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_testkit::components::{CHILDREN, LIAR};
use moat_testkit::fake_cli::{ReportedPid, survivors};

use super::common::{events, moat};

/// The processes the `children` adapter reported: `pids A B C…`.
fn reported_pids(events: &[AgentEvent]) -> Vec<ReportedPid> {
    events
        .iter()
        .find_map(|event| match &event.payload {
            EventPayload::Text(text) => text.content.strip_prefix("pids ").map(|pids| {
                pids.split(' ')
                    .map(|pid| pid.parse().expect("a pid"))
                    .collect()
            }),
            _ => None,
        })
        .expect("the adapter reports its pids")
}

/// Runs the `children` adapter in `daemons` mode `runs` times, with
/// `environment` added, and checks that nothing it started survives and
/// that no directory of a run is left in the runs' temporary directory.
fn no_survivors_after(runs: usize, environment: &[(&str, &str)]) {
    let temporary = tempfile::tempdir().unwrap();
    let mut pids = Vec::new();
    for _ in 0..runs {
        let output = moat()
            .args(["run", CHILDREN, "daemons", "--allow-run=sh"])
            .env("TMPDIR", temporary.path())
            .envs(environment.iter().copied())
            .output()
            .expect("moat runs");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let reported = reported_pids(&events(&output));
        assert_eq!(reported.len(), 4, "child, grandchild, daemon and its child");
        pids.extend(reported);
    }
    let alive = survivors(&pids, Duration::from_secs(2));
    assert!(
        alive.is_empty(),
        "{} processes outlived their runs: {alive:?}",
        alive.len()
    );
    let left: Vec<_> = std::fs::read_dir(temporary.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "directories left behind: {left:?}");
}

#[test]
fn a_hundred_runs_whose_children_daemonize_leave_no_process_and_no_directory() {
    no_survivors_after(100, &[]);
}

#[test]
fn without_cgroups_adopted_orphans_are_found_and_killed_too() {
    no_survivors_after(30, &[("MOAT_RUN_CGROUPS", "0")]);
}

/// Starts `moat run` of the `children` adapter in `mode`, waits for its
/// pids, and returns moat, them, and the rest of its stdout (collected in
/// the background until moat exits).
fn started(
    mode: &str,
    extra: &[&str],
) -> (
    Child,
    Vec<ReportedPid>,
    std::thread::JoinHandle<Vec<AgentEvent>>,
) {
    let mut moat = moat()
        .args([
            "run",
            CHILDREN,
            mode,
            "--allow-run=sh",
            "--output",
            "ndjson",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(moat.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let event: AgentEvent = serde_json::from_str(&line.unwrap()).unwrap();
        seen.push(event);
        if let EventPayload::Text(_) = &seen.last().unwrap().payload {
            let pids = reported_pids(&seen);
            let rest = std::thread::spawn(move || {
                let mut all = seen;
                all.extend(lines.map(|line| serde_json::from_str(&line.unwrap()).unwrap()));
                all
            });
            return (moat, pids, rest);
        }
    }
    let _ = moat.kill();
    let status = moat.wait();
    panic!("moat ended ({status:?}) before the adapter reported its pids");
}

fn signal(moat: &Child, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(moat.id() as libc::pid_t, signal) }, 0);
}

fn assert_one_interrupted_done(events: &[AgentEvent]) {
    let dones: Vec<DoneStatus> = events
        .iter()
        .filter_map(|event| event.as_done().map(|done| done.status))
        .collect();
    assert_eq!(dones, [DoneStatus::Interrupted], "one done, interrupted");
    assert!(
        events.last().is_some_and(AgentEvent::is_done),
        "done is last"
    );
}

#[test]
fn sigterm_and_sighup_stop_the_run_like_ctrl_c_with_their_own_exit_codes() {
    for (sig, code) in [
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
        (libc::SIGINT, 130),
    ] {
        let (mut moat, pids, rest) = started("block", &[]);
        signal(&moat, sig);
        let status = moat.wait().unwrap();
        assert_eq!(status.code(), Some(code), "signal {sig}");
        assert_one_interrupted_done(&rest.join().unwrap());
        let alive = survivors(&pids, Duration::from_secs(2));
        assert!(alive.is_empty(), "signal {sig}: {alive:?} survived");
    }
}

#[test]
fn a_second_signal_stops_at_once_and_still_ends_with_one_done() {
    // The adapter ignores the abort and spins: the first signal's drain
    // would wait 30 s for it; the second stops it at once.
    let (mut moat, pids, rest) = started("spin", &["--drain", "30s"]);
    let started = Instant::now();
    signal(&moat, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(50));
    signal(&moat, libc::SIGTERM);
    let status = moat.wait().unwrap();
    assert_eq!(status.code(), Some(130), "the first signal's code");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped promptly: {:?}",
        started.elapsed()
    );
    assert_one_interrupted_done(&rest.join().unwrap());
    let alive = survivors(&pids, Duration::from_secs(2));
    assert!(alive.is_empty(), "{alive:?} survived");
}

#[test]
fn the_exit_code_is_what_moat_saw_not_what_the_adapter_claims() {
    // Nobody stopped it: an `interrupted` it made up is a failure.
    let output = moat()
        .args(["run", LIAR, "interrupted", "--output", "ndjson"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));

    // Stopped with Ctrl-C: 130, though the adapter claims success.
    let mut liar = moat()
        .args(["run", LIAR, "success-on-abort", "--output", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(liar.stdout.take().unwrap()).lines();
    let first = lines.next().expect("an event").unwrap();
    assert!(first.contains("working"), "{first}");
    signal(&liar, libc::SIGINT);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = liar.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(
        rest.last().is_some_and(|l| l.contains("\"done\"")),
        "{rest:?}"
    );
}
