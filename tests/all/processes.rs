//! The process capability end to end, through real components and the real
//! host: only granted programs start, in granted directories, with only
//! granted variables; the number of children is bounded; and no child or
//! grandchild outlives its run — checked from the OS process table — when
//! the run ends with done, a trap, the timeout or an abort.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, run_agent};
use moat_grants::Grants;
use moat_process_model::MAX_LIVE_CHILDREN;
use moat_testkit::components::{CHILDREN, ESCAPE};
use moat_testkit::fake_cli::ReportedPid;
use moat_testkit::{
    TEST_DEADLINE, error_codes, error_message, load, registry_of, run_component, single_done, texts,
};
use tokio_util::sync::CancellationToken;

fn grants_run(programs: &[&str]) -> Grants {
    Grants {
        run: programs.iter().map(|p| p.to_string()).collect(),
        ..Grants::none()
    }
}

/// Runs the escape adapter's probes with `grants`: the results, and the
/// run's error messages of code CAPABILITY_DENIED.
async fn probe(probes: &[&str], grants: Grants) -> (Vec<String>, Vec<String>) {
    let events = run_component(ESCAPE, &probes.join("\n"), |request| {
        request.scope.grants = grants;
    })
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    let results: Vec<String> = texts(&events).into_iter().map(str::to_string).collect();
    assert_eq!(results.len(), probes.len(), "one result per probe");
    (results, denials(&events))
}

fn denials(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some("CAPABILITY_DENIED") => {
                assert!(error.recoverable, "a refusal does not end the run");
                Some(error.message.clone())
            }
            _ => None,
        })
        .collect()
}

fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    (dir, path)
}

// ---- what may start ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_not_granted_is_refused_and_the_refusal_names_the_flag() {
    let (results, denied) = probe(&["shell echo started"], Grants::none()).await;
    assert!(results[0].starts_with("denied: refused:"), "{results:?}");
    // The adapter learns what was refused; the user also how to grant it
    // (in the caller's words: here the library's, the CLI's are flags).
    assert!(
        results[0].contains("run access to \"sh\" refused: not granted"),
        "{results:?}"
    );
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(
        denied[0].contains("to allow it, grant running \"sh\""),
        "{denied:?}"
    );

    // Granting another program does not grant this one.
    let (results, denied) = probe(&["shell echo started"], grants_run(&["true"])).await;
    assert!(results[0].starts_with("denied:"), "{results:?}");
    assert_eq!(denied.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_program_runs_and_its_output_and_exit_code_reach_the_adapter() {
    let (results, denied) = probe(
        &["shell echo one; echo two; echo oops >&2; exit 7"],
        grants_run(&["sh"]),
    )
    .await;
    assert_eq!(results[0], "ok: exit=7 out=one|two err=oops");
    assert!(denied.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_is_granted_by_name_or_by_absolute_path_and_matched_either_way() {
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let sh = sh.to_str().unwrap();
    // Granted by name, asked for by path.
    let (results, _) = probe(&[&format!("spawn {sh} -c true")], grants_run(&["sh"])).await;
    assert!(results[0].starts_with("ok: exit=0"), "{results:?}");
    // Granted by path, asked for by path; the bare name is another grant.
    let (results, denied) = probe(
        &[&format!("spawn {sh} -c true"), "spawn sh -c true"],
        grants_run(&[sh]),
    )
    .await;
    assert!(results[0].starts_with("ok: exit=0"), "{results:?}");
    assert!(results[1].starts_with("denied:"), "{results:?}");
    assert_eq!(denied.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_program_that_is_not_installed_is_reported_as_not_found() {
    let (results, denied) = probe(
        &["spawn moat-no-such-program"],
        grants_run(&["moat-no-such-program"]),
    )
    .await;
    assert!(results[0].starts_with("denied: not found:"), "{results:?}");
    assert!(results[0].contains("not found on PATH"), "{results:?}");
    assert!(denied.is_empty(), "granted, so not a refusal: {denied:?}");
}

// ---- where and with what ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_outside_the_granted_ones_is_refused() {
    let (_dir, root) = canonical_tempdir();
    let granted = root.join("granted");
    let outside = root.join("outside");
    std::fs::create_dir(&granted).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::create_dir(granted.join("sub")).unwrap();
    let show = |p: &Path| p.to_str().unwrap().to_string();
    let grants = Grants {
        read: vec![granted.clone()],
        ..grants_run(&["sh"])
    };
    let probes = [
        format!("shell-in {} pwd", show(&outside)),
        format!("shell-in {}/.. pwd", show(&granted)),
        "shell-in /etc pwd".to_string(),
        "shell-in relative pwd".to_string(),
        format!("shell-in {} pwd", show(&granted.join("sub"))),
    ];
    let probes: Vec<&str> = probes.iter().map(String::as_str).collect();
    let (results, denied) = probe(&probes, grants).await;
    for result in &results[..4] {
        assert!(result.starts_with("denied: refused:"), "{result}");
    }
    assert!(results[0].contains("outside the granted directories"));
    assert!(
        denied[0].contains("to allow it, grant read access to"),
        "{denied:?}"
    );
    assert_eq!(
        results[4],
        format!("ok: exit=0 out={} err=", show(&granted.join("sub")))
    );
    assert_eq!(denied.len(), 4, "{denied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_working_directory_a_child_runs_in_an_empty_directory_of_the_run() {
    let (results, _) = probe(&["shell pwd; ls -A | wc -l"], grants_run(&["sh"])).await;
    let out = results[0]
        .strip_prefix("ok: exit=0 out=")
        .unwrap_or_else(|| panic!("{results:?}"));
    let (dir, count) = out.split_once('|').unwrap();
    assert!(dir.contains("moat-run-"), "{dir}");
    assert_eq!(count.trim_end_matches(" err=").trim(), "0", "{out}");
    // The session is closed in the background once done is out.
    let until = Instant::now() + Duration::from_secs(5);
    while Path::new(dir).exists() {
        assert!(Instant::now() < until, "{dir} is removed when the run ends");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_sees_the_base_and_granted_variables_and_the_adapter_sets_only_granted_ones() {
    let home = std::env::var("HOME").expect("HOME is set for the tests");
    let script = "echo home=$HOME path=${PATH:+set} mine=$MINE";
    let (results, denied) = probe(
        &[
            &format!("shell {script}"),
            &format!("shell-env MINE=x {script}"),
        ],
        grants_run(&["sh"]),
    )
    .await;
    assert!(
        results[0].contains("home= path=set mine= "),
        "only the base (PATH) when nothing is granted: {results:?}"
    );
    // A variable nobody granted: the spawn is refused, visibly.
    assert!(results[1].starts_with("denied:"), "{results:?}");
    assert!(
        denied[0].contains("env access to MINE") && denied[0].contains("grant the variable MINE"),
        "{denied:?}"
    );

    let grants = Grants {
        env: vec!["HOME".into(), "MINE".into()],
        ..grants_run(&["sh"])
    };
    let (results, _) = probe(
        &[
            &format!("shell {script}"),
            &format!("shell-env MINE=x {script}"),
        ],
        grants,
    )
    .await;
    assert!(results[0].contains(&format!("home={home} ")), "{results:?}");
    assert!(results[1].contains("mine=x"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_in_a_directory_the_run_may_write_is_never_started() {
    // The adapter could have written it: granting the directory for
    // writing and the program in it for running does not start it.
    let (_dir, root) = canonical_tempdir();
    let tool = root.join("tool");
    std::fs::copy("/bin/true", &tool).unwrap();
    let tool = tool.to_str().unwrap().to_owned();
    let grants = Grants {
        write: vec![root.clone()],
        ..grants_run(&[&tool])
    };
    let (results, denied) = probe(&[&format!("spawn {tool}")], grants).await;
    assert!(results[0].starts_with("denied:"), "{results:?}");
    assert!(
        denied[0].contains("in a directory the run may write"),
        "{denied:?}"
    );
    // Granted for reading only, it starts.
    let grants = Grants {
        read: vec![root.clone()],
        ..grants_run(&[&tool])
    };
    let (results, _) = probe(&[&format!("spawn {tool}")], grants).await;
    assert!(results[0].starts_with("ok: exit=0"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_can_never_set_a_loader_or_interpreter_hook_for_a_program() {
    // Each would run code of the adapter's choosing natively, in the
    // granted program: refused even when the user granted the name (which
    // passes the host's own value on, nothing the adapter chose).
    let hooks = [
        "LD_PRELOAD=/tmp/evil.so",
        "LD_LIBRARY_PATH=/tmp",
        "NODE_OPTIONS=--require=/tmp/evil.js",
        "NODE_PATH=/tmp",
        "BASH_ENV=/tmp/evil.sh",
        "ENV=/tmp/evil.sh",
        "PYTHONSTARTUP=/tmp/evil.py",
        "PERL5OPT=-Mevil",
        "RUBYOPT=-revil",
        "JAVA_TOOL_OPTIONS=-javaagent:/tmp/evil.jar",
        "GIT_CONFIG_COUNT=1",
        "PATH=/tmp",
    ];
    let names: Vec<String> = hooks
        .iter()
        .map(|hook| hook.split_once('=').unwrap().0.to_owned())
        .collect();
    let grants = Grants {
        env: names.clone(),
        ..grants_run(&["sh"])
    };
    let probes: Vec<String> = hooks
        .iter()
        .map(|hook| format!("shell-env {hook} echo ran"))
        .collect();
    let probes: Vec<&str> = probes.iter().map(String::as_str).collect();
    let (results, denied) = probe(&probes, grants).await;
    for (result, name) in results.iter().zip(&names) {
        assert!(result.starts_with("denied:"), "{name}: {result}");
        assert!(result.contains(name.as_str()), "{name}: {result}");
    }
    assert_eq!(
        denied.len(),
        hooks.len(),
        "each refusal is shown: {denied:?}"
    );
    for message in &denied {
        assert!(message.contains("an adapter may never set it"), "{message}");
        assert!(
            !message.contains("to allow it"),
            "no grant allows it: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_piped_when_asked_and_closed_on_request() {
    let (results, _) = probe(&["cat hello through stdin"], grants_run(&["cat"])).await;
    assert_eq!(results[0], "ok: hello through stdin then stdin is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdout_line_over_the_limit_is_skipped_and_reading_goes_on() {
    let script = "head -c 9000000 /dev/zero | tr '\\0' x; echo; echo after";
    let (results, _) = probe(&[&format!("shell {script}")], grants_run(&["sh"])).await;
    assert_eq!(
        results[0],
        "ok: exit=0 out=<an output line of 9000000 bytes was skipped>|after err="
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_many_children_stops_at_the_per_run_limit() {
    let (results, _) = probe(&["fork 50"], grants_run(&["sleep"])).await;
    assert!(
        results[0].starts_with(&format!(
            "denied: started {MAX_LIVE_CHILDREN}, then limit reached"
        )),
        "{results:?}"
    );
}

// ---- no child outlives its run ----

/// Whether `pid` (as the program reported it) still runs (a zombie does
/// not).
fn running(pid: ReportedPid) -> bool {
    !pid.gone()
}

/// The child's and grandchild's pids, from the `children` adapter's first
/// event.
fn pids(events: &[AgentEvent]) -> [ReportedPid; 2] {
    let text = texts(events)
        .into_iter()
        .find_map(|t| t.strip_prefix("pids "))
        .unwrap_or_else(|| panic!("no pids event: {events:?}"));
    let mut pids = text
        .split(' ')
        .map(|p| p.parse::<ReportedPid>().expect("a pid"));
    [pids.next().unwrap(), pids.next().unwrap()]
}

/// Fails unless both processes are gone within a moment of the run's end.
async fn assert_gone(pids: [ReportedPid; 2]) {
    let until = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&pid| running(pid)) {
        assert!(
            Instant::now() < until,
            "still running after the run ended: {:?}",
            pids.iter().filter(|&&p| running(p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the `children` adapter in `mode`, aborting it once its pids are
/// out when `abort` is set; checks both pids ran during the run.
async fn run_children(
    mode: &str,
    configure: impl FnOnce(&mut moat_testkit::Request),
    abort: bool,
) -> (Vec<AgentEvent>, [ReportedPid; 2]) {
    let adapter = load(CHILDREN).await;
    let registry = registry_of([adapter]);
    let mut request = moat_testkit::request("children", mode);
    request.scope.grants = grants_run(&["sh"]);
    let token = CancellationToken::new();
    request.abort = Some(token.clone());
    configure(&mut request);
    let mut run = run_agent(&registry, request).expect("registered");
    let mut events = Vec::new();
    let mut seen = None;
    let all = async {
        while let Some(event) = run.next().await {
            let is_pids =
                matches!(&event.payload, EventPayload::Text(t) if t.content.starts_with("pids "));
            events.push(event);
            if is_pids {
                let found = pids(&events);
                assert!(found.iter().all(|&pid| running(pid)), "both run: {found:?}");
                seen = Some(found);
                if abort {
                    token.cancel();
                }
            }
        }
    };
    tokio::time::timeout(TEST_DEADLINE, all)
        .await
        .expect("the run ends");
    let seen = seen.unwrap_or_else(|| panic!("no pids: {events:?}"));
    (events, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_outlives_a_run_that_ends_with_done() {
    let (events, pids) = run_children("done", |_| {}, false).await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_outlives_a_run_that_traps() {
    let (events, pids) = run_children("trap", |_| {}, false).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert_eq!(error_codes(&events), ["ADAPTER_ERROR"]);
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_outlives_a_run_that_times_out_while_waiting_for_it() {
    let (events, pids) = run_children(
        "block",
        |r| r.limits.timeout = Some(Duration::from_millis(1500)),
        false,
    )
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "TIMEOUT").contains("`limits.timeout`"));
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_outlives_a_spinning_run_that_times_out() {
    let (events, pids) = run_children(
        "spin",
        |r| r.limits.timeout = Some(Duration::from_millis(1500)),
        false,
    )
    .await;
    assert_eq!(error_codes(&events), ["TIMEOUT"]);
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_returns_a_blocked_read_at_once_and_no_child_outlives_the_run() {
    let started = Instant::now();
    let (events, pids) = run_children("block", |_| {}, true).await;
    let done = single_done(&events);
    // The adapter's own done: its read returned `interrupted` at once.
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("children-resume"));
    assert!(error_codes(&events).is_empty());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_outlives_an_aborted_run_whose_adapter_ignores_the_abort() {
    let (events, pids) = run_children("spin", |_| {}, true).await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token, None, "synthesized by the engine");
    assert_gone(pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_refused_while_the_adapter_starts_is_still_shown_to_the_user() {
    // The `children` adapter starts its child in `run` and refuses the run
    // when it cannot: the refusal of the spawn comes first, naming the flag.
    let events = run_component(CHILDREN, "done", |_| {}).await;
    assert_eq!(
        error_codes(&events),
        ["CAPABILITY_DENIED", "SPAWN_FAILED"],
        "{events:?}"
    );
    assert!(error_message(&events, "CAPABILITY_DENIED").contains("grant running \"sh\""));
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}
