//! The `moat` binary end to end: output formats, exit codes, limits,
//! Ctrl-C, inspect and compile, and one clear line for every bad input.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_testkit::components::{
    BIG_INFO, CHILDREN, ESCAPE, FLOOD, IMPOSTOR, PANIC, SPIN_NEXT, TOOL_USER,
};
use moat_testkit::fake_cli::ReportedPid;
use moat_testkit::http_server::{SERVED, TestServer};
use moat_testkit::llm_server::{LlmServer, Reply};
use serde_json::Value;

use super::common::{events, moat};

fn run(args: &[&str]) -> Output {
    moat().args(args).output().expect("moat runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn last_done(events: &[AgentEvent]) -> DoneStatus {
    let dones: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Done(done) => Some(done.status),
            _ => None,
        })
        .collect();
    assert_eq!(dones.len(), 1, "exactly one done");
    assert!(
        matches!(events.last().unwrap().payload, EventPayload::Done(_)),
        "done is last"
    );
    dones[0]
}

/// Asserts a usage error: exit code 2 and exactly one line on stderr that
/// contains every `needle`.
fn assert_usage_error(output: &Output, needles: &[&str]) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "stderr: {message}");
    assert_eq!(message.trim_end().lines().count(), 1, "one line: {message}");
    assert!(
        !message.contains("panicked") && !message.contains("backtrace"),
        "{message}"
    );
    for needle in needles {
        assert!(
            message.contains(needle),
            "{needle:?} missing from: {message}"
        );
    }
    assert!(output.stdout.is_empty());
}

#[test]
fn run_echo_writes_ndjson_events_when_piped_and_exits_0() {
    let output = run(&["run", "echo", "hello sandbox"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Success);
    let raw: Value = serde_json::from_str(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    for field in ["type", "agent", "timestamp", "sessionId", "payload"] {
        assert!(raw.get(field).is_some(), "{field} in {raw}");
    }
    assert!(
        stderr(&output).is_empty(),
        "no logs by default: {}",
        stderr(&output)
    );
}

#[test]
fn text_output_is_only_the_assistant_text() {
    let output = run(&["run", "echo", "just this", "--output", "text"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "just this\n");
}

#[test]
fn pretty_output_streams_text_and_ends_with_a_status_line() {
    let output = run(&["run", "echo", "pretty please", "--output", "pretty"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("pretty please\n"), "{stdout}");
    let last = stdout.trim_end().lines().last().unwrap();
    assert!(
        last.contains("success") && last.contains("0 tool uses"),
        "{last}"
    );
    assert_eq!(
        stdout.matches("pretty please").count(),
        1,
        "the text is not repeated: {stdout}"
    );
}

#[test]
fn a_dash_reads_the_prompt_from_stdin() {
    let mut child = moat()
        .args(["run", "echo", "-", "--output", "text"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "from stdin\n");
}

#[test]
fn an_unknown_adapter_is_a_usage_error_listing_the_built_ins() {
    assert_usage_error(
        &run(&["run", "nope", "hi"]),
        &["unknown adapter `nope`", "echo"],
    );
}

#[test]
fn a_bad_flag_value_is_a_usage_error_naming_the_flag() {
    assert_usage_error(
        &run(&["run", "echo", "hi", "--max-memory", "lots"]),
        &["--max-memory", "not a size"],
    );
    assert_usage_error(
        &run(&["run", "echo", "hi", "--timeout", "soon"]),
        &["--timeout"],
    );
    assert_usage_error(
        &run(&["run", "echo", "hi", "--output", "xml"]),
        &["--output"],
    );
}

#[test]
fn a_file_that_is_not_an_adapter_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    assert_usage_error(
        &run(&["run", core.to_str().unwrap(), "hi"]),
        &["core WebAssembly module"],
    );
    assert_usage_error(&run(&["run", "./missing.wasm", "hi"]), &["missing.wasm"]);
}

#[test]
fn a_spinning_adapter_is_stopped_by_timeout_and_exits_1() {
    let started = Instant::now();
    let output = run(&["run", SPIN_NEXT, "x", "--timeout", "300ms"]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Error);
    assert!(events.iter().any(
        |e| matches!(&e.payload, EventPayload::Error(err) if err.code.as_deref() == Some("TIMEOUT"))
    ));
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_guest_panic_reaches_the_user_in_the_error_event() {
    let output = run(&["run", PANIC, "x"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("testing adapter panicked on purpose"),
        "{stdout}"
    );
}

#[test]
fn ctrl_c_interrupts_the_run_with_one_done_and_exit_130() {
    let child = moat()
        .args(["run", SPIN_NEXT, "x"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Give the run time to start spinning, then press Ctrl-C.
    std::thread::sleep(Duration::from_millis(700));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert_eq!(last_done(&events(&output)), DoneStatus::Interrupted);
}

/// Starts `moat run` of the `children` adapter (a child and a grandchild,
/// then a blocking read) and returns it with the two pids, once reported.
/// The rest of its stdout is drained in the background, so moat never
/// writes into a closed pipe.
fn moat_with_children() -> (std::process::Child, [ReportedPid; 2]) {
    use std::io::BufRead;
    let mut moat = moat()
        .args([
            "run",
            CHILDREN,
            "block",
            "--allow-run=sh",
            "--output",
            "ndjson",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(moat.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let event: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(pids) = event["payload"]["content"]
            .as_str()
            .and_then(|t| t.strip_prefix("pids "))
        {
            let pids: Vec<ReportedPid> = pids.split(' ').map(|p| p.parse().unwrap()).collect();
            std::thread::spawn(move || lines.for_each(drop));
            return (moat, [pids[0], pids[1]]);
        }
    }
    let _ = moat.kill();
    let status = moat.wait();
    panic!("moat ended ({status:?}) before the children adapter reported its pids");
}

/// Whether `pid` still runs (a zombie does not).
fn process_runs(pid: ReportedPid) -> bool {
    !pid.gone()
}

fn wait_until_gone(pids: &[ReportedPid]) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&pid| process_runs(pid)) {
        assert!(
            std::time::Instant::now() < until,
            "still running: {:?}",
            pids.iter()
                .filter(|&&p| process_runs(p))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_leaves_no_child_or_grandchild_of_the_run_behind() {
    let (mut moat, pids) = moat_with_children();
    assert!(pids.iter().all(|&pid| process_runs(pid)));
    let status = Command::new("kill")
        .args(["-INT", &moat.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(moat.wait().unwrap().code(), Some(130));
    wait_until_gone(&pids);
}

#[test]
fn a_child_dies_with_moat_even_when_moat_is_killed() {
    let (mut killed_moat, [child, grandchild]) = moat_with_children();
    let killed = killed_moat.id();
    let grandchild_pid = grandchild.host_pid().expect("the grandchild runs");
    let in_a_cgroup = std::fs::read_to_string(format!("/proc/{grandchild_pid}/cgroup"))
        .is_ok_and(|cgroups| cgroups.contains(&format!("moat-{killed}-")));
    killed_moat.kill().unwrap();
    killed_moat.wait().unwrap();
    // The parent-death signal reaches the direct child.
    wait_until_gone(&[child]);
    // A grandchild is beyond it, and a moat killed with SIGKILL removes
    // nothing: the next moat of any kind (here one that only lists runs)
    // removes what the dead one left, and kills what is still in its run's
    // cgroup.
    let listed = moat().args(["ps"]).output().unwrap();
    assert!(listed.status.success());
    if in_a_cgroup {
        wait_until_gone(&[grandchild]);
    } else {
        let _ = Command::new("kill")
            .args(["-KILL", &grandchild_pid.to_string()])
            .status();
    }
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("moat-run-{killed}-"))
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn inspect_shows_contract_needs_and_cache_state() {
    let output = run(&["inspect", "echo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let contract = moat_guest::CONTRACT_VERSION;
    for needle in [
        "name         echo",
        contract,
        "origin       built-in echo",
        "needs hosts  none",
        "cache",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
}

#[test]
fn compile_fills_the_cache_so_the_next_load_does_not_compile() {
    let cache = tempfile::tempdir().unwrap();
    let with_cache = |args: &[&str]| {
        moat()
            .env("MOAT_CACHE_DIR", cache.path())
            .args(args)
            .output()
            .unwrap()
    };
    let compiled = with_cache(&["compile", FLOOD]);
    assert_eq!(compiled.status.code(), Some(0), "{}", stderr(&compiled));
    assert!(String::from_utf8_lossy(&compiled.stdout).contains("compiled in"));

    let inspected = with_cache(&["inspect", FLOOD, "--json"]);
    let json: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(json["cache"]["hit"], Value::Bool(true), "{json}");
    assert_eq!(json["contract"], moat_guest::CONTRACT_VERSION);
    assert!(Path::new(json["cache"]["path"].as_str().unwrap()).starts_with(cache.path()));

    let again = with_cache(&["compile", FLOOD]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already compiled"));
}

#[test]
fn adapters_lists_the_built_ins() {
    let output = run(&["adapters"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("echo"));
}

/// The events of each role, in order.
fn by_role(events: &[AgentEvent]) -> std::collections::BTreeMap<String, Vec<&AgentEvent>> {
    let mut roles: std::collections::BTreeMap<String, Vec<&AgentEvent>> = Default::default();
    for event in events {
        roles
            .entry(event.role.clone().unwrap_or_default())
            .or_default()
            .push(event);
    }
    roles
}

#[test]
fn parallel_merges_tasks_each_with_its_role_and_one_done() {
    let output = run(&[
        "parallel",
        "--task",
        "a:echo=first",
        "--task",
        "b:echo=second",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let roles = by_role(&events);
    assert_eq!(roles.keys().collect::<Vec<_>>(), ["a", "b"]);
    for (role, events) in roles {
        let dones = events.iter().filter(|e| e.is_done()).count();
        assert_eq!(dones, 1, "{role}");
        assert!(events.last().unwrap().is_done(), "{role}");
    }
}

#[test]
fn parallel_exits_1_when_any_task_fails_and_0_only_when_all_succeed() {
    let output = run(&[
        "parallel",
        "--task",
        "echo=fine",
        "--task",
        &format!("{PANIC}=boom"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert_eq!(events.iter().filter(|e| e.is_done()).count(), 2);
    assert!(
        events.iter().all(|e| e.role.is_none()),
        "no role unless given"
    );
}

#[test]
fn parallel_pretty_output_labels_each_task_and_ends_with_a_row_per_task() {
    let output = run(&[
        "parallel", "--task", "echo=one", "--task", "echo=two", "--output", "pretty",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("echo#1 │ one"), "{stdout}");
    assert!(stdout.contains("echo#2 │ two"), "{stdout}");
    let rows: Vec<_> = stdout.lines().filter(|l| l.contains("✓ success")).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
}

#[test]
fn parallel_reads_tasks_from_json_and_toml_files_with_per_task_options() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tasks.json");
    std::fs::write(
        &json,
        format!(
            r#"{{"tasks":[{{"adapter":"echo","prompt":"j","role":"json"}},
                    {{"adapter":"{SPIN_NEXT}","prompt":"x","role":"slow","timeout":"300ms"}}]}}"#
        ),
    )
    .unwrap();
    let output = run(&["parallel", "--tasks", json.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "the spinning task timed out: {}",
        stderr(&output)
    );
    let merged = events(&output);
    let slow = &by_role(&merged)["slow"];
    assert!(slow.iter().any(|e| {
        e.as_error()
            .is_some_and(|err| err.code.as_deref() == Some("TIMEOUT"))
    }));

    let toml = dir.path().join("tasks.toml");
    std::fs::write(
        &toml,
        "[[task]]\nadapter = \"echo\"\nprompt = \"t\"\nrole = \"toml\"\n",
    )
    .unwrap();
    let output = run(&["parallel", "--tasks", toml.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(by_role(&events(&output)).contains_key("toml"));
}

#[test]
fn a_bad_task_is_a_usage_error() {
    assert_usage_error(
        &run(&["parallel", "--task", "echo"]),
        &["[ROLE:]ADAPTER=PROMPT"],
    );
    assert_usage_error(&run(&["parallel"]), &["--task"]);
}

#[test]
fn a_tool_outside_the_allowed_set_ends_the_run_naming_the_tool() {
    let output = run(&[
        "run",
        TOOL_USER,
        "Read,Bash",
        "--allowed-tools",
        "Read,Grep",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Error);
    let error = events
        .iter()
        .find_map(AgentEvent::as_error)
        .expect("an error event");
    assert_eq!(error.code.as_deref(), Some("TOOL_POLICY_VIOLATION"));
    assert!(error.message.contains("Bash"), "{}", error.message);
    let used: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolUse(tool) => Some(tool.tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        used,
        ["Read"],
        "the forbidden call never reaches the consumer"
    );
}

#[test]
fn the_adapter_receives_the_effective_tool_set() {
    let output = run(&[
        "run",
        TOOL_USER,
        "",
        "--allowed-tools",
        "Read,Grep,Bash",
        "--disallowed-tools",
        "Bash",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("init first")
    };
    let capabilities = init
        .capabilities
        .as_ref()
        .expect("the adapter reports what it got");
    assert_eq!(
        capabilities["allowedTools"],
        serde_json::json!(["Read", "Grep"])
    );
    assert_eq!(capabilities["disallowedTools"], serde_json::json!(["Bash"]));
}

#[test]
fn an_empty_allowed_list_allows_no_tool() {
    let output = run(&["run", TOOL_USER, "Read", "--allowed-tools", ""]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert!(events.iter().any(|e| {
        e.as_error()
            .is_some_and(|err| err.code.as_deref() == Some("TOOL_POLICY_VIOLATION"))
    }));
}

// ---- capabilities: grant flags, policy files, trust presets, inspect ----

/// The `text` contents of a run: one result per `escape` probe.
fn texts(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect()
}

/// A scratch directory (canonical path) with `data/in.txt` and an empty
/// `out/`.
fn scratch() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("data")).unwrap();
    std::fs::create_dir(root.join("out")).unwrap();
    std::fs::write(root.join("data/in.txt"), "input").unwrap();
    (dir, root)
}

fn path_arg(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

#[test]
fn bad_grant_flags_are_usage_errors_naming_the_flag() {
    let (_dir, root) = scratch();
    let file = path_arg(&root.join("data/in.txt"));
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["--allow-read=/nonexistent/moat-dir".into()],
            vec!["--allow-read", "no such directory"],
        ),
        (
            vec![format!("--allow-write={file}")],
            vec!["--allow-write", "not a directory"],
        ),
        (
            vec!["--allow-net=*".into()],
            vec!["--allow-net", "every host"],
        ),
        (
            vec!["--allow-net=https://x.example/v1".into()],
            vec!["--allow-net", "path"],
        ),
        (vec!["--allow-env=A=B".into()], vec!["--allow-env"]),
        (vec!["--allow-run=./x.sh".into()], vec!["--allow-run"]),
        (vec!["--cwd=/nonexistent/moat-dir".into()], vec!["--cwd"]),
        (
            vec!["--policy=/nonexistent/policy.toml".into()],
            vec!["--policy", "cannot read"],
        ),
    ];
    for (flags, needles) in cases {
        let mut args = vec!["run".to_string(), "echo".into(), "hi".into()];
        args.extend(flags);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_usage_error(&run(&args), &needles);
    }
    let policy = root.join("policy.toml");
    std::fs::write(&policy, "allow-reed = [\"data\"]\n").unwrap();
    assert_usage_error(
        &run(&["run", "echo", "hi", "--policy", &path_arg(&policy)]),
        &["--policy", "allow-reed"],
    );
}

#[test]
fn a_run_reaches_exactly_the_directories_its_flags_grant() {
    let (_dir, root) = scratch();
    let probes = [
        format!("read {}", path_arg(&root.join("data/in.txt"))),
        format!("write {}", path_arg(&root.join("out/new.txt"))),
        format!("write {}", path_arg(&root.join("data/new.txt"))),
        format!("read {}/../data/in.txt", path_arg(&root.join("out"))),
        "read /etc/passwd".to_string(),
    ];
    let output = run(&[
        "run",
        ESCAPE,
        &probes.join("\n"),
        "--allow-read",
        &path_arg(&root.join("data")),
        "--allow-write",
        &path_arg(&root.join("out")),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = texts(&events(&output));
    assert_eq!(results[0], "ok: input");
    assert!(results[1].starts_with("ok: wrote"), "{}", results[1]);
    for refused in &results[2..] {
        assert!(refused.starts_with("denied: "), "{refused}");
    }
    assert!(root.join("out/new.txt").exists());
    assert!(!root.join("data/new.txt").exists(), "data is read-only");
}

#[test]
fn the_environment_reaches_the_adapter_only_when_granted() {
    let probe = |extra: &[&str]| {
        let mut args = vec!["run", ESCAPE, "env MOAT_TEST_SECRET\nenvs"];
        args.extend_from_slice(extra);
        let output = moat()
            .env("MOAT_TEST_SECRET", "hunter2")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        texts(&events(&output))
    };
    let refused = probe(&[]);
    assert!(refused[0].starts_with("denied: "), "{refused:?}");
    assert_eq!(refused[1], "ok: ", "no variable leaks: {refused:?}");

    let granted = probe(&["--allow-env", "MOAT_TEST_SECRET"]);
    assert_eq!(granted, ["ok: hunter2", "ok: MOAT_TEST_SECRET"]);
}

#[test]
fn trust_controlled_grants_the_working_directory_and_sandbox_does_not() {
    let (_dir, root) = scratch();
    let target = root.join("out/by-trust.txt");
    let probe = format!("write {}", path_arg(&target));
    let cwd = path_arg(&root.join("out"));
    let results = |trust: &str| {
        let output = run(&["run", ESCAPE, &probe, "--cwd", &cwd, "--trust", trust]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        texts(&events(&output))
    };
    assert!(results("sandbox")[0].starts_with("denied: "));
    assert!(!target.exists());
    assert!(results("controlled")[0].starts_with("ok: "));
    assert!(target.exists());
}

#[test]
fn a_third_party_component_gets_its_declared_needs_only_when_granted() {
    let probe = |extra: &[&str]| {
        let mut args = vec!["run", ESCAPE, "env MOAT_ESCAPE_DECLARED"];
        args.extend_from_slice(extra);
        let output = moat()
            .env("MOAT_ESCAPE_DECLARED", "declared value")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        texts(&events(&output)).remove(0)
    };
    assert!(probe(&[]).starts_with("denied: "));
    assert_eq!(probe(&["--grant-declared"]), "ok: declared value");
}

#[test]
fn a_policy_file_grants_per_adapter_relative_to_itself_and_pins_the_component() {
    let (_dir, root) = scratch();
    let policy = root.join("policy.toml");
    std::fs::write(
        &policy,
        "[adapters.escape]\nallow-read = [\"data\"]\n\n[adapters.other]\nallow-write = [\"out\"]\n",
    )
    .unwrap();
    let probes = format!(
        "read {}\nwrite {}",
        path_arg(&root.join("data/in.txt")),
        path_arg(&root.join("out/x.txt"))
    );
    let output = run(&["run", ESCAPE, &probes, "--policy", &path_arg(&policy)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = texts(&events(&output));
    assert_eq!(results[0], "ok: input");
    assert!(
        results[1].starts_with("denied: "),
        "another adapter's entry does not apply: {results:?}"
    );

    let pinned = root.join("pinned.toml");
    let other_hash = "0".repeat(64);
    std::fs::write(
        &pinned,
        format!("[adapters.escape]\nallow-read = [\"data\"]\nsha256 = \"{other_hash}\"\n"),
    )
    .unwrap();
    assert_usage_error(
        &run(&["run", ESCAPE, "envs", "--policy", &path_arg(&pinned)]),
        &["pins sha256", "escape"],
    );
}

/// A policy's table for a built-in's name (`[adapters.openai]`) that pins
/// nothing is the built-in's: a component on disk that calls itself
/// `openai` is refused, the line naming the pin that would give it the
/// table, never run with the table's grants. Pinned to that component,
/// the same table gives it the read (the refusal is the policy's doing).
#[test]
fn a_policy_table_for_a_built_ins_name_is_not_given_to_a_component_taking_the_name() {
    let (_dir, root) = scratch();
    let file = path_arg(&root.join("data/in.txt"));
    let policy = root.join("policy.toml");
    std::fs::write(&policy, "[adapters.openai]\nallow-read = [\"data\"]\n").unwrap();
    let sha256 = moat_installed::sha256_hex(&std::fs::read(IMPOSTOR).unwrap());
    assert_usage_error(
        &run(&["run", IMPOSTOR, &file, "--policy", &path_arg(&policy)]),
        &[
            "[adapters.openai] is for moat's built-in `openai`",
            &format!("sha256 = \"{sha256}\""),
        ],
    );
    // The built-in still gets its table.
    let inspected = run(&["inspect", "openai", "--policy", &path_arg(&policy)]);
    assert_eq!(inspected.status.code(), Some(0), "{}", stderr(&inspected));
    let text = String::from_utf8_lossy(&inspected.stdout);
    assert!(
        text.lines()
            .any(|line| line.starts_with("grant read")
                && line.contains(&path_arg(&root.join("data")))),
        "{text}"
    );

    let pinned = root.join("pinned.toml");
    std::fs::write(
        &pinned,
        format!("[adapters.openai]\nallow-read = [\"data\"]\nsha256 = \"{sha256}\"\n"),
    )
    .unwrap();
    let output = run(&["run", IMPOSTOR, &file, "--policy", &path_arg(&pinned)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(texts(&events(&output)), ["ok: input"]);
    // Without any policy the component reads nothing.
    let bare = run(&["run", IMPOSTOR, &file]);
    assert!(texts(&events(&bare))[0].starts_with("denied: "));
}

#[test]
fn parallel_tasks_get_their_own_grants_from_the_tasks_file() {
    let (_dir, root) = scratch();
    let tasks = root.join("tasks.json");
    let probe = format!("read {}", path_arg(&root.join("data/in.txt")));
    std::fs::write(
        &tasks,
        serde_json::json!([
            {"adapter": ESCAPE, "prompt": probe, "role": "granted", "allowRead": ["data"]},
            {"adapter": ESCAPE, "prompt": probe, "role": "bare"},
        ])
        .to_string(),
    )
    .unwrap();
    let output = run(&["parallel", "--tasks", &path_arg(&tasks)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let merged = events(&output);
    let roles = by_role(&merged);
    let result = |role: &str| {
        let events: Vec<AgentEvent> = roles[role].iter().map(|e| (*e).clone()).collect();
        texts(&events).remove(0)
    };
    assert_eq!(result("granted"), "ok: input");
    assert!(result("bare").starts_with("denied: "));
}

#[test]
fn inspect_of_a_built_in_shows_its_needs_and_that_it_is_granted_nothing_else() {
    let output = run(&["inspect", "echo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "needs hosts  none",
        "needs env    none",
        "needs run    none",
        "grants from  nothing: deny by default",
        "grant net    none",
        "grant read   none",
        "grant write  none",
        "grant env    none",
        "grant run    none",
        "refused      raw sockets and name lookups, always",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
}

#[test]
fn inspect_of_a_third_party_component_shows_declared_needs_and_effective_grants() {
    let (_dir, root) = scratch();
    let policy = root.join("policy.toml");
    std::fs::write(
        &policy,
        "allow-env = [\"SHARED\"]\n[adapters.escape]\nallow-read = [\"data\"]\nallow-net = [\"api.example.com\"]\n",
    )
    .unwrap();
    let data = path_arg(&root.join("data"));

    let bare = run(&["inspect", ESCAPE]);
    let text = String::from_utf8_lossy(&bare.stdout);
    for needle in [
        "needs hosts  probe.invalid:443",
        "needs env    MOAT_ESCAPE_DECLARED",
        "needs run    true",
        "grants from  nothing: deny by default",
        "grant env    none",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }

    // Granted programs are shown with where a run would find them.
    let programs = run(&["inspect", ESCAPE, "--allow-run=true,moat-no-such-program"]);
    let text = String::from_utf8_lossy(&programs.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("grant run"))
        .unwrap_or_default();
    assert!(line.contains("true (/"), "{text}");
    assert!(line.contains("moat-no-such-program (not found)"), "{text}");

    let output = run(&["inspect", ESCAPE, "--policy", &path_arg(&policy)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for needle in [
        format!("grants from  policy {}", path_arg(&policy)),
        "grant net    api.example.com".to_string(),
        format!("grant read   {data}"),
        "grant env    SHARED".to_string(),
        "refused      raw sockets and name lookups, always".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} in {text}");
    }

    let json = run(&[
        "inspect",
        ESCAPE,
        "--json",
        "--policy",
        &path_arg(&policy),
        "--grant-declared",
        "--allow-env=EXTRA",
    ]);
    let value: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["builtIn"], false);
    assert_eq!(
        value["needs"]["env"],
        serde_json::json!(["MOAT_ESCAPE_DECLARED"])
    );
    assert_eq!(
        value["grants"]["env"],
        serde_json::json!(["MOAT_ESCAPE_DECLARED", "SHARED", "EXTRA"])
    );
    assert_eq!(
        value["grants"]["net"],
        serde_json::json!(["probe.invalid:443", "api.example.com"])
    );
    assert_eq!(value["grants"]["read"], serde_json::json!([data]));
    assert_eq!(value["alwaysRefused"], serde_json::json!(["sockets"]));
    assert_eq!(value["sha256"].as_str().map(str::len), Some(64));
}

#[test]
fn allow_net_lets_a_run_reach_exactly_the_granted_host() {
    let server = TestServer::answering();
    let port = server.port;
    let probe = format!("http GET http://127.0.0.1:{port}/");
    let flag = format!("--allow-net=127.0.0.1:{port}");

    let output = run(&["run", ESCAPE, &probe, &flag]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let granted = events(&output);
    assert_eq!(texts(&granted), [format!("ok: 200 {SERVED}")]);

    let output = run(&["run", ESCAPE, &probe]);
    let refused = events(&output);
    assert!(
        texts(&refused)[0].starts_with("denied: "),
        "{:?}",
        texts(&refused)
    );
    let denial = refused
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some("CAPABILITY_DENIED") => {
                Some(error)
            }
            _ => None,
        })
        .expect("a CAPABILITY_DENIED event");
    assert!(denial.recoverable);
    assert!(denial.message.contains(&flag), "{}", denial.message);
    assert_eq!(last_done(&refused), DoneStatus::Success);
}

// ---- the LLM API adapters against a local server ----

/// The `openai` and `anthropic` CLI runs read their base URL and key from
/// the environment, as a user's shell would set them; the variables are
/// the built-ins' declared needs, granted by default.
fn llm_run(variables: &[(&str, String)], args: &[&str]) -> Output {
    let mut command = moat();
    for name in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ] {
        command.env_remove(name);
    }
    for (name, value) in variables {
        command.env(name, value);
    }
    command.args(args).output().expect("moat runs")
}

#[test]
fn moat_run_openai_streams_from_a_local_server_with_the_key_from_the_environment() {
    let server = LlmServer::start(Reply::sse(include_bytes!(
        "../../../adapters/openai/fixtures/text_usage.sse"
    )));
    let port = server.port;
    // `localhost`, as a user would point it at Ollama.
    let variables = [
        ("OPENAI_BASE_URL", format!("http://localhost:{port}/v1")),
        ("OPENAI_API_KEY", "sk-moat-cli-test".to_string()),
    ];
    let flag = format!("--allow-net=localhost:{port}");
    let output = llm_run(
        &variables,
        &["run", "openai", "Say hello", "--model", "llama3.2", &flag],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Success);
    assert_eq!(texts(&events), ["Hello! How can I helpé ü today?"]);
    let request = server.single_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some("Bearer sk-moat-cli-test")
    );
    assert_eq!(request.json()["model"], "llama3.2");

    let output = llm_run(
        &variables,
        &[
            "run",
            "openai",
            "Say hello",
            "--model",
            "llama3.2",
            &flag,
            "--output",
            "text",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Hello! How can I helpé ü today?\n"
    );
}

#[test]
fn moat_run_openai_at_a_base_url_not_granted_names_the_allow_net_flag() {
    let server = LlmServer::start(Reply::sse(b"data: [DONE]\n\n"));
    let variables = [("OPENAI_BASE_URL", format!("{}/v1", server.url()))];
    let output = llm_run(&variables, &["run", "openai", "hi", "--model", "m"]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Error);
    let flag = format!("--allow-net={}", server.grant());
    let message = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some("HOST_NOT_GRANTED") => {
                Some(error.message.clone())
            }
            _ => None,
        })
        .expect("a HOST_NOT_GRANTED error");
    assert!(message.contains(&flag), "{message}");
    assert!(message.contains("OPENAI_BASE_URL"), "{message}");
    assert!(server.requests().is_empty());
}

#[test]
fn moat_run_anthropic_streams_from_a_local_server_with_key_and_version_headers() {
    let server = LlmServer::start(Reply::sse(include_bytes!(
        "../../../adapters/anthropic/fixtures/thinking_text.sse"
    )));
    let variables = [
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", "sk-ant-moat-cli-test".to_string()),
    ];
    let flag = format!("--allow-net={}", server.grant());
    let output = llm_run(
        &variables,
        &[
            "run",
            "anthropic",
            "What is 27 * 453?",
            "--model",
            "claude-sonnet-4-5",
            "--system",
            "Answer briefly.",
            &flag,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    assert_eq!(last_done(&events), DoneStatus::Success);
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.payload, EventPayload::Thinking(_)))
    );
    assert_eq!(texts(&events), ["27 * 453 = 12231"]);
    let request = server.single_request();
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-ant-moat-cli-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.json()["system"], "Answer briefly.");
}

#[test]
fn moat_run_anthropic_with_a_bad_key_says_which_variable_to_fix_and_exits_1() {
    let server = LlmServer::start(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let variables = [
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", "wrong".to_string()),
    ];
    let flag = format!("--allow-net={}", server.grant());
    let output = llm_run(
        &variables,
        &[
            "run",
            "anthropic",
            "hi",
            "--model",
            "claude-x",
            &flag,
            "--output",
            "pretty",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    assert!(shown.contains("ANTHROPIC_API_KEY"), "{shown}");
    assert!(shown.contains("invalid x-api-key"), "{shown}");
}

#[test]
fn inspect_shows_the_llm_adapters_declared_needs_granted_by_default_and_an_added_host() {
    for (adapter, host, key, base) in [
        (
            "openai",
            "api.openai.com:443",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        ),
        (
            "anthropic",
            "api.anthropic.com:443",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        ),
    ] {
        let output = run(&["inspect", adapter, "--json", "--allow-net=localhost:11434"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(
            value["needs"]["hosts"],
            serde_json::json!([host]),
            "{value}"
        );
        assert_eq!(value["needs"]["env"], serde_json::json!([key, base]));
        assert_eq!(
            value["grants"]["net"],
            serde_json::json!([host, "localhost:11434"])
        );
        assert_eq!(value["grants"]["env"], serde_json::json!([key, base]));
    }
}

#[test]
fn moat_run_extra_passes_adapter_options_such_as_openai_tools_filtered_by_allowed_tools() {
    let server = LlmServer::start(Reply::sse(include_bytes!(
        "../../../adapters/openai/fixtures/text_usage.sse"
    )));
    let variables = [("OPENAI_BASE_URL", format!("{}/v1", server.url()))];
    let tool = |name: &str| serde_json::json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}});
    let extra = serde_json::json!({"tools": [tool("search"), tool("shell")]});
    let (_dir, root) = scratch();
    let file = root.join("extra.json");
    std::fs::write(&file, extra.to_string()).unwrap();
    let grant = format!("--allow-net={}", server.grant());
    for extra_flag in [extra.to_string(), format!("@{}", path_arg(&file))] {
        let output = llm_run(
            &variables,
            &[
                "run",
                "openai",
                "hi",
                "--model",
                "m",
                &grant,
                "--allowed-tools=search",
                "--extra",
                &extra_flag,
            ],
        );
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    for request in server.requests() {
        let names: Vec<String> = request.json()["tools"]
            .as_array()
            .expect("tools sent")
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["search"]);
    }
    assert_eq!(server.requests().len(), 2);

    for bad in ["[1, 2]", "{not json", "@/nonexistent/extra.json"] {
        let output = run(&["run", "echo", "hi", "--extra", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(stderr(&output).contains("--extra"), "{}", stderr(&output));
    }
}

#[test]
fn info_runs_under_the_runs_memory_cap_so_raising_it_lets_a_big_component_load() {
    // Its info() touches 300 MiB: over the default cap of 256 MiB.
    let refused = run(&["run", BIG_INFO, "hi", "--output", "ndjson"]);
    assert_ne!(refused.status.code(), Some(0));
    let message = stderr(&refused);
    assert!(message.contains("--max-memory"), "{message}");

    let raised = run(&[
        "run",
        BIG_INFO,
        "hi",
        "--max-memory",
        "512MiB",
        "--output",
        "ndjson",
    ]);
    assert_eq!(raised.status.code(), Some(0), "{}", stderr(&raised));
    let inspected = run(&["inspect", BIG_INFO]);
    assert_eq!(inspected.status.code(), Some(0), "{}", stderr(&inspected));
}

#[test]
fn a_run_is_bounded_by_default_and_none_must_be_asked_for() {
    let inspected = run(&["inspect", "claude-code", "--json"]);
    let json: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(json["defaultTimeout"], "2h", "{json}");
    let inspected = run(&["inspect", FLOOD, "--json"]);
    let json: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(json["defaultTimeout"], "1h", "moat's default: {json}");
    assert_eq!(json["containment"]["contained"], true, "{json}");

    let unbounded = run(&[
        "run",
        "echo",
        "hi",
        "--timeout",
        "none",
        "--output",
        "ndjson",
    ]);
    assert_eq!(unbounded.status.code(), Some(0), "{}", stderr(&unbounded));
    let wrong = run(&["run", "echo", "hi", "--timeout", "forever"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        stderr(&wrong).contains("`none` for no limit"),
        "{}",
        stderr(&wrong)
    );
}

#[test]
fn parallel_tasks_over_the_total_memory_wait_for_room_and_all_finish() {
    let output = run(&[
        "parallel",
        "--task",
        "a:echo=one",
        "--task",
        "b:echo=two",
        "--task",
        "c:echo=three",
        "--max-memory",
        "256MiB",
        "--max-total-memory",
        "300MiB",
        "--output",
        "ndjson",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let dones = events.iter().filter(|e| e.is_done()).count();
    assert_eq!(dones, 3, "every task ran to its done");

    let wrong = run(&["parallel", "--task", "echo=x", "--max-total-memory", "lots"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        stderr(&wrong).contains("--max-total-memory"),
        "{}",
        stderr(&wrong)
    );
}

#[test]
fn no_contain_gives_granted_programs_the_users_rights_and_inspect_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let secret = std::fs::canonicalize(dir.path()).unwrap().join("secret");
    std::fs::write(&secret, "the-secret").unwrap();
    let probe = format!("shell cat {}", secret.display());
    let contained = run(&[
        "run",
        ESCAPE,
        &probe,
        "--allow-run",
        "sh",
        "--output",
        "text",
    ]);
    assert!(
        !String::from_utf8_lossy(&contained.stdout).contains("the-secret"),
        "contained by default"
    );
    let free = run(&[
        "run",
        ESCAPE,
        &probe,
        "--allow-run",
        "sh",
        "--no-contain",
        "--output",
        "text",
    ]);
    assert!(
        String::from_utf8_lossy(&free.stdout).contains("the-secret"),
        "{}",
        stderr(&free)
    );

    let inspected = run(&["inspect", "codex", "--no-contain", "--json"]);
    let json: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(json["containment"]["contained"], false, "{json}");
    let inspected = run(&["inspect", "codex"]);
    let text = String::from_utf8_lossy(&inspected.stdout);
    assert!(
        text.contains("contain      programs see the grants"),
        "{text}"
    );
    assert!(text.contains(".codex"), "{text}");
}

#[test]
fn a_component_run_recorded_nowhere_is_refused_child_runs_with_the_reason() {
    let output = moat()
        .args(["run", "fanout", "hi", "--no-store", "--output", "json"])
        .args(["--extra", r#"{"agents": [{"adapter": "echo"}]}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["error"]["code"], "CHILD_DENIED", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("recorded nowhere"),
        "{result}"
    );
}

#[test]
fn a_programs_path_leaves_out_directories_that_hold_the_home_directory() {
    let home = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(home.path()).unwrap();
    let tools = home.join("bin");
    std::fs::create_dir(&tools).unwrap();
    // `/`, the home directory and its parent would let a contained program
    // read every file of the user: they are left out; a directory inside
    // the home stays (a user's own tools).
    let parent = home.parent().unwrap().to_path_buf();
    let path = std::env::join_paths([
        std::path::PathBuf::from("/"),
        home.clone(),
        parent.clone(),
        tools.clone(),
        "/usr/bin".into(),
        "/bin".into(),
    ])
    .unwrap();
    let output = moat()
        .env("HOME", &home)
        .env("PATH", &path)
        .args(["run", ESCAPE, "--allow-run=sh", "--output", "text"])
        .arg("shell echo \"PATH=$PATH\"")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = printed
        .split(['|', '\n'])
        .find_map(|line| line.split("PATH=").nth(1))
        .unwrap_or_else(|| panic!("{printed}"));
    let seen: Vec<String> = line
        .split(" err=")
        .next()
        .unwrap()
        .trim()
        .split(':')
        .map(str::to_owned)
        .collect();
    assert_eq!(
        seen,
        [
            tools.display().to_string(),
            "/usr/bin".into(),
            "/bin".into()
        ],
        "{printed}"
    );
}
