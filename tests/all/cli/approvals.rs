//! Asking instead of failing, through the real binary: a run started with
//! `--ask` that reaches for a host it was not granted waits (`waiting` in
//! `moat ps`, its request in `moat show`) until another process answers
//! with `moat approve` or `moat deny`, or its approval timeout passes; the
//! answer, who gave it and when is recorded with the run. An API adapter
//! asks before a tool call under `ask` through the contract's
//! `request-approval` the same way.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolStatus};
use moat_testkit::components::ESCAPE;
use moat_testkit::http_server::{SERVED, TestServer};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};
use moat_testkit::texts;
use serde_json::{Value, json};

use super::common::{Started, moat_in, ok_in};

/// A run of `escape` fetching `url` `times` times, with `flags`.
fn fetching(store: &Path, url: &str, times: usize, flags: &[&str]) -> Started {
    let probes = vec![format!("http GET {url}"); times].join("\n");
    let mut command = moat_in(store);
    command
        .args(["run", ESCAPE, &probes, "--ask", "--output", "ndjson"])
        .args(flags);
    Started::new(command)
}

/// `moat show @last --json`.
fn shown(store: &Path) -> Value {
    let output = moat_in(store)
        .args(["show", "@last", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs `moat ARGS` in `store`; its stdout, asserting it succeeded.
fn ok(store: &Path, args: &[&str]) -> String {
    ok_in(store, args)
}

fn answers(events: &[AgentEvent]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Extension(ext) if ext.name == "moat:permission_answer" => {
                Some(ext.payload.clone())
            }
            _ => None,
        })
        .collect()
}

fn done_status(events: &[AgentEvent]) -> DoneStatus {
    let dones: Vec<_> = events.iter().filter_map(AgentEvent::as_done).collect();
    assert_eq!(dones.len(), 1, "exactly one done: {events:?}");
    dones[0].status
}

/// The first event: the run's request for `port`, held open as number 1.
fn expect_request(run: &Started, port: u16) {
    let event = run.next();
    let EventPayload::PermissionRequest(request) = &event.payload else {
        panic!("a permission_request first, not {event:?}");
    };
    assert_eq!(request.request_id.as_deref(), Some("1"));
    assert_eq!(request.kind.as_deref(), Some("net"));
    assert_eq!(request.tool_name, "moat:net");
    assert_eq!(
        Value::Object(request.input.clone()),
        serde_json::json!({"host": "127.0.0.1", "port": port})
    );
}

#[test]
fn a_run_that_asks_for_a_host_waits_until_another_process_approves_and_then_reaches_it() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let run = fetching(store.path(), &url, 2, &[]);
    expect_request(&run, server.port);

    // Waiting: seen from other processes, nothing sent yet.
    let waiting = ok(store.path(), &["ps", "--status", "waiting"]);
    assert_eq!(
        waiting.lines().count(),
        2,
        "a header and the run: {waiting}"
    );
    let record = shown(store.path());
    assert_eq!(record["status"], "waiting");
    assert_eq!(record["requests"][0]["request"]["kind"], "net");
    assert_eq!(record["requests"][0]["answer"], Value::Null);
    let id = record["id"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.connections(), 0, "nothing sent before the answer");

    let said = ok(store.path(), &["approve", &id[..12], "--always"]);
    assert!(
        said.contains(&format!(
            "request 1: net 127.0.0.1:{} approved always",
            server.port
        )),
        "{said}"
    );
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    assert_eq!(
        texts(&events),
        vec![format!("ok: 200 {SERVED}"), format!("ok: 200 {SERVED}")],
        "the same run went on and reached the host, twice: {events:?}"
    );
    // The second request was covered by `--always`: nobody was asked.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::PermissionRequest(_)))
    );
    let answered = answers(&events);
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["decision"], "approved always");
    assert!(
        answered[0]["by"]
            .as_str()
            .unwrap()
            .starts_with("moat approve (pid ")
    );
    assert_eq!(done_status(&events), DoneStatus::Success);
    assert_eq!(server.connections(), 2);

    let record = shown(store.path());
    assert_eq!(record["status"], "completed");
    let answer = &record["requests"][0]["answer"];
    assert_eq!(answer["approved"], true);
    assert_eq!(answer["always"], true);
    assert!(answer["atMs"].as_u64().unwrap() >= record["requests"][0]["askedMs"].as_u64().unwrap());
    let pretty = ok(store.path(), &["show", &id]);
    assert!(
        pretty.contains("approved always by moat approve (pid"),
        "{pretty}"
    );
    // Its events, as recorded, say the same.
    let logged = ok(store.path(), &["logs", &id, "--output", "ndjson"]);
    assert!(
        logged.contains(r#""type":"permission_request""#),
        "{logged}"
    );
}

#[test]
fn a_denied_request_is_an_error_the_adapter_sees_and_it_goes_on_as_it_decides() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let run = fetching(store.path(), &url, 1, &[]);
    expect_request(&run, server.port);

    ok(
        store.path(),
        &["deny", "@last", "--reason", "not this host"],
    );
    let again = moat_in(store.path())
        .args(["deny", "@last", "1"])
        .output()
        .unwrap();
    // A request answered already: a user's mistake, said in one line.
    assert_eq!(again.status.code(), Some(2));
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("was denied already, by moat deny"), "{said}");
    let (events, code) = run.finish();
    // The escape adapter reports the refusal and ends well: its choice.
    assert_eq!(code, Some(0));
    assert_eq!(done_status(&events), DoneStatus::Success);
    let error = events
        .iter()
        .find_map(AgentEvent::as_error)
        .expect("an error event");
    assert_eq!(error.code.as_deref(), Some("CAPABILITY_DENIED"));
    assert!(error.recoverable);
    assert!(
        error.message.contains("denied by moat deny (pid")
            && error.message.contains(": not this host"),
        "{}",
        error.message
    );
    assert!(texts(&events)[0].starts_with("denied: "), "{events:?}");
    assert_eq!(server.connections(), 0);
    let record = shown(store.path());
    assert_eq!(record["requests"][0]["answer"]["approved"], false);
    assert_eq!(record["requests"][0]["answer"]["reason"], "not this host");
    // Answering a run that has ended says so.
    let late = moat_in(store.path())
        .args(["approve", "@last"])
        .output()
        .unwrap();
    assert_eq!(late.status.code(), Some(2));
    let said = String::from_utf8_lossy(&late.stderr);
    assert!(said.contains("has ended (completed)"), "{said}");
}

#[test]
fn a_request_nobody_answers_is_denied_when_its_approval_timeout_passes() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let started = Instant::now();
    let run = fetching(store.path(), &url, 1, &["--approval-timeout", "1s"]);
    let (events, code) = run.finish();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(code, Some(0));
    let answered = answers(&events);
    assert_eq!(answered[0]["decision"], "denied");
    assert_eq!(answered[0]["by"], "the approval timeout (1s)");
    assert_eq!(server.connections(), 0);
    let record = shown(store.path());
    assert_eq!(
        record["requests"][0]["answer"]["by"],
        "the approval timeout (1s)"
    );
}

#[test]
fn without_ask_an_ungranted_host_is_refused_at_once_and_nothing_is_recorded_to_answer() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let output = moat_in(store.path())
        .args([
            "run",
            ESCAPE,
            &format!("http GET http://127.0.0.1:{}/", server.port),
            "--output",
            "ndjson",
        ])
        .output()
        .unwrap();
    let events = super::common::events(&output);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::PermissionRequest(_)))
    );
    assert!(texts(&events)[0].starts_with("denied: "));
    assert_eq!(shown(store.path())["requests"], serde_json::json!([]));
    // Asking where nobody could answer is refused in one line.
    let unrecorded = moat_in(store.path())
        .args(["run", "echo", "hi", "--ask", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(unrecorded.status.code(), Some(2), "{unrecorded:?}");
    let said = String::from_utf8_lossy(&unrecorded.stderr);
    assert!(said.contains("nobody could answer it"), "{said}");
}

/// Microseconds of CPU `pid` has used (user and system), from `/proc`.
fn cpu_micros(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis: utime is the
    // 14th field of the line, the 12th after it.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000 / per_second
}

#[test]
fn a_waiting_run_spends_next_to_no_cpu_and_other_processes_follow_it_meanwhile() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let run = fetching(store.path(), &url, 1, &[]);
    expect_request(&run, server.port);
    let pid = run.pid();

    // Another process follows it while it waits.
    let follower = moat_in(store.path())
        .args(["logs", "-f", "@last", "--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let before = cpu_micros(pid);
    let measured = Duration::from_secs(3);
    std::thread::sleep(measured);
    let spent = cpu_micros(pid) - before;
    // Polling the store for an answer five times a second: well under 1 %
    // of one core (measured ~0.1 %); a spinning wait would use 100 %.
    eprintln!(
        "a waiting run used {spent} µs of CPU in {measured:?} ({:.3} %)",
        spent as f64 / measured.as_micros() as f64 * 100.0
    );
    assert!(
        (spent as f64) < measured.as_micros() as f64 * 0.05,
        "{spent} µs of CPU in {measured:?}"
    );
    let listed = ok(store.path(), &["ps"]);
    assert!(listed.contains("waiting"), "{listed}");

    ok(store.path(), &["approve", "@last"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    let followed = follower.wait_with_output().unwrap();
    let followed = super::common::events(&followed);
    assert_eq!(
        followed.len(),
        events.len() + 1,
        "the follower saw the request and everything after it"
    );
    assert!(matches!(
        followed[0].payload,
        EventPayload::PermissionRequest(_)
    ));
    assert_eq!(done_status(&followed), DoneStatus::Success);
}

#[test]
fn on_a_terminal_the_run_asks_and_y_approves() {
    use super::common::{Pty, shown_at};
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let mut command = moat_in(store.path());
    command.args([
        "run",
        ESCAPE,
        &format!("http GET http://127.0.0.1:{}/", server.port),
        "--ask",
    ]);
    let (pieces, status) =
        Pty::open().run_answering(command, Some(("[y]es / [n]o / [a]lways", "y\n")));
    let seen: String = pieces.iter().map(|(_, text)| text.as_str()).collect();
    assert!(status.success(), "{seen}");
    assert!(
        shown_at(&pieces, &format!("asks for net 127.0.0.1:{}", server.port)).is_some(),
        "{seen}"
    );
    assert!(
        seen.contains("request 1 approved by the terminal of moat run"),
        "{seen}"
    );
    assert!(seen.contains(&format!("ok: 200 {SERVED}")), "{seen}");
    assert_eq!(server.connections(), 1);
    let record = shown(store.path());
    assert!(
        record["requests"][0]["answer"]["by"]
            .as_str()
            .unwrap()
            .starts_with("the terminal of moat run")
    );
}

#[test]
fn a_program_it_was_not_granted_and_the_host_that_program_reaches_are_asked_for_too() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let mut command = moat_in(store.path());
    command.args([
        "run",
        ESCAPE,
        &format!("shell curl -s -m20 http://127.0.0.1:{}/", server.port),
        "--ask",
        "--output",
        "ndjson",
    ]);
    let run = Started::new(command);
    // First the program: `sh`, which no grant names.
    let event = run.next();
    let EventPayload::PermissionRequest(request) = &event.payload else {
        panic!("a permission_request first, not {event:?}");
    };
    assert_eq!(request.kind.as_deref(), Some("run"));
    assert_eq!(request.input["program"], "sh");
    ok(store.path(), &["approve", "@last", "1"]);
    assert!(
        matches!(&run.next().payload, EventPayload::Extension(ext) if ext.name == "moat:permission_answer")
    );
    // Then the host curl reaches through the run's proxy.
    let event = run.next();
    let EventPayload::PermissionRequest(request) = &event.payload else {
        panic!("the host's request, not {event:?}");
    };
    assert_eq!(request.request_id.as_deref(), Some("2"));
    assert_eq!(request.kind.as_deref(), Some("net"));
    assert_eq!(request.input["port"], server.port);
    ok(store.path(), &["approve", "@last", "2"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    let said = texts(&events);
    assert!(
        said.iter().any(|text| text.contains(SERVED)),
        "curl reached the approved host: {said:?}"
    );
    assert_eq!(server.connections(), 1);
    let record = shown(store.path());
    assert_eq!(record["requests"][0]["request"]["program"], "sh");
    assert_eq!(record["requests"][1]["answer"]["approved"], true);
}

/// `moat run openai` with the MCP stub as its tools and `server` as its
/// model, asking before every call of the stub's `echo`; the stub logs
/// the calls it gets in `dir`/mcp.jsonl.
fn openai_asking_before_echo(store: &Path, dir: &Path, server: &LlmServer) -> Started {
    let stub = moat_testkit::mcp_stub().display().to_string();
    let log = dir.join("mcp.jsonl");
    let config = dir.join("mcp.json");
    let servers =
        json!({"mcpServers": {"stub": {"command": stub, "env": {"MOAT_MCP_STUB_LOG": log}}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut command = moat_in(store);
    command
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args(["run", "openai", "Use the echo tool", "--model", "m"])
        .args(["--ask-tools", "mcp__stub__echo", "--output", "ndjson"])
        .arg(format!("--allow-net={}", server.grant()))
        .args([
            "--mcp-config",
            config.to_str().unwrap(),
            "--allow-run",
            &stub,
        ])
        .arg(format!("--allow-write={}", dir.display()))
        .args(["--allow-env", "MOAT_MCP_STUB_LOG"]);
    Started::new(command)
}

/// A model that calls the stub's `echo` once, then answers.
fn calling_echo_once() -> LlmServer {
    LlmServer::start_turns(vec![
        Reply::sse(&openai_tool_turn(
            "call_1",
            "mcp__stub__echo",
            &json!({"text": "hi"}),
            (10, 5),
        )),
        Reply::sse(&openai_answer("finished", (10, 5))),
    ])
}

/// Skips the run's events up to its next `permission_request`.
fn next_request(run: &Started) -> moat_engine::PermissionRequestPayload {
    run.next_request(&mut Vec::new())
}

fn tool_results(events: &[AgentEvent]) -> Vec<&moat_engine::ToolResultPayload> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolResult(result) => Some(&**result),
            _ => None,
        })
        .collect()
}

/// The tool calls the MCP stub was asked to make.
fn stub_calls(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("mcp.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("tools/call"))
        .count()
}

#[test]
fn an_api_adapter_asks_before_a_tool_under_ask_and_makes_the_call_only_when_approved() {
    // Approved from another process: the call is made.
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = calling_echo_once();
    let run = openai_asking_before_echo(store.path(), dir.path(), &server);
    let request = next_request(&run);
    assert_eq!(request.kind.as_deref(), Some("tool"));
    assert_eq!(request.tool_name, "mcp__stub__echo");
    assert_eq!(request.tool_use_id, "call_1");
    assert_eq!(Value::Object(request.input.clone()), json!({"text": "hi"}));
    assert_eq!(
        stub_calls(dir.path()),
        0,
        "nothing called before the answer"
    );
    let listed = ok(store.path(), &["ps", "--status", "waiting"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    ok(store.path(), &["approve", "@last"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    assert_eq!(done_status(&events), DoneStatus::Success);
    let results: Vec<_> = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].status, ToolStatus::Success);
    assert_eq!(stub_calls(dir.path()), 1);
    assert_eq!(answers(&events)[0]["decision"], "approved");

    // Denied with a reason: not called; its result is `denied`, the model
    // is told why and the run goes on to its answer.
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = calling_echo_once();
    let run = openai_asking_before_echo(store.path(), dir.path(), &server);
    next_request(&run);
    ok(store.path(), &["deny", "@last", "--reason", "not today"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    assert_eq!(done_status(&events), DoneStatus::Success);
    let results: Vec<_> = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].status, ToolStatus::Denied);
    assert!(
        results[0].output.to_string().contains("not today"),
        "{:?}",
        results[0].output
    );
    assert_eq!(stub_calls(dir.path()), 0, "a denied call is never made");
    let told = server.requests()[1].json()["messages"].to_string();
    assert!(told.contains("not today"), "the model is told: {told}");
    let record = shown(store.path());
    assert_eq!(record["requests"][0]["request"]["name"], "mcp__stub__echo");
    assert_eq!(record["requests"][0]["answer"]["approved"], false);
}

#[test]
fn a_component_asks_through_the_contract_and_a_run_that_cannot_ask_or_a_malformed_request_is_denied_at_once()
 {
    let store = tempfile::tempdir().unwrap();
    let probe = "ask Deploy {\"env\":\"prod\"}";
    // Without --ask nobody can answer: denied at once, nothing recorded.
    let output = moat_in(store.path())
        .args(["run", ESCAPE, probe, "--output", "ndjson"])
        .output()
        .unwrap();
    let events = super::common::events(&output);
    let said = texts(&events);
    assert!(
        said.len() == 1 && said[0].starts_with("denied: this run does not ask"),
        "{said:?}"
    );
    assert!(
        shown(store.path())["requests"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );

    // With --ask: a malformed request is denied without asking anyone; a
    // well-formed one waits for the answer and goes on when approved.
    let store = tempfile::tempdir().unwrap();
    let mut command = moat_in(store.path());
    command.args([
        "run",
        ESCAPE,
        &format!("ask Deploy not json\n{probe}"),
        "--ask",
        "--output",
        "ndjson",
    ]);
    let run = Started::new(command);
    let request = next_request(&run);
    assert_eq!(request.kind.as_deref(), Some("tool"));
    assert_eq!(request.request_id.as_deref(), Some("1"));
    assert_eq!(
        (request.tool_name.as_str(), request.tool_use_id.as_str()),
        ("Deploy", "probe")
    );
    assert_eq!(Value::Object(request.input.clone()), json!({"env": "prod"}));
    assert_eq!(
        request.reason.as_deref(),
        Some("the escape component probes")
    );
    ok(store.path(), &["approve", "@last"]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    let said = texts(&events);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].starts_with("denied: the request was malformed"),
        "{said:?}"
    );
    assert_eq!(said[1], "ok: allowed");

    // Cancelled while it waits: the call returns at once and the run ends
    // cancelled (its request closed), with its one `done`.
    let store = tempfile::tempdir().unwrap();
    let mut command = moat_in(store.path());
    command.args(["run", ESCAPE, probe, "--ask", "--output", "ndjson"]);
    let run = Started::new(command);
    let asked = run.next();
    assert!(
        matches!(asked.payload, EventPayload::PermissionRequest(_)),
        "{asked:?}"
    );
    ok(store.path(), &["cancel", "@last"]);
    let (events, _) = run.finish();
    assert_eq!(done_status(&events), DoneStatus::Interrupted);
    // The request came before the run's first event, and is of its session.
    assert!(
        events
            .iter()
            .all(|event| event.session_id == asked.session_id),
        "{asked:?} {events:?}"
    );
    let record = shown(store.path());
    assert_eq!(record["reason"], "cancelled");
    assert_eq!(
        record["requests"][0]["answer"]["reason"],
        "the run stopped waiting for it"
    );
}

#[test]
fn an_adapter_that_cannot_ask_before_a_tool_refuses_a_run_that_names_one() {
    let store = tempfile::tempdir().unwrap();
    let output = moat_in(store.path())
        .args(["run", "gemini", "hi", "--ask-tools", "Bash"])
        .args(["--output", "ndjson"])
        .output()
        .unwrap();
    let events = super::common::events(&output);
    let error = events
        .iter()
        .find_map(AgentEvent::as_error)
        .expect("a refusal");
    assert!(
        error.message.contains("cannot honour --ask-tools Bash"),
        "{}",
        error.message
    );
    // --approval-timeout alone asks nothing: said in one line.
    let alone = moat_in(store.path())
        .args(["run", "echo", "hi", "--approval-timeout", "1s"])
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("add --ask"));
}

#[test]
fn a_run_on_a_cluster_worker_asks_and_is_answered_through_the_cluster_within_the_workers_ceiling() {
    use moat_testkit::nats;
    if !nats::available() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let allowed = TestServer::answering();
    let beyond = TestServer::answering();
    let server = nats::server(&[]);
    let url = server.url();
    let _worker =
        crate::cluster::Worker::start(&url, &[&format!("--allow-net=127.0.0.1:{}", allowed.port)]);
    let probes = format!(
        "http GET http://127.0.0.1:{}/\nhttp GET http://127.0.0.1:{}/",
        allowed.port, beyond.port
    );
    let mut command = moat_in(store.path());
    command
        .args(["run", ESCAPE, &probes, "--ask", "--output", "ndjson"])
        .args(["--nats", &url]);
    let run = Started::new(command);
    expect_request(&run, allowed.port);

    let on_cluster = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--nats", url.as_str()]);
        ok(store.path(), &all)
    };
    let listed = on_cluster(&["ps", "--status", "waiting", "-q"]);
    let id = listed.trim().to_owned();
    assert!(id.starts_with("r_"), "{listed}");
    let shown: Value = serde_json::from_str(&on_cluster(&["show", &id, "--json"])).unwrap();
    assert_eq!(shown["status"], "waiting");
    assert_eq!(shown["requests"][0]["request"]["port"], allowed.port);
    assert_eq!(allowed.connections(), 0, "nothing sent before the answer");

    on_cluster(&["approve", &id]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    let said = texts(&events);
    assert_eq!(said[0], format!("ok: 200 {SERVED}"), "{events:?}");
    assert!(said[1].starts_with("denied: "), "{events:?}");
    // Past the worker's ceiling: denied at once, recorded so.
    let shown: Value = serde_json::from_str(&on_cluster(&["show", &id, "--json"])).unwrap();
    assert_eq!(shown["requests"][0]["answer"]["approved"], true);
    assert_eq!(
        shown["requests"][1]["answer"]["by"],
        "the ceiling of this worker"
    );
    assert_eq!(allowed.connections(), 1);
    assert_eq!(beyond.connections(), 0);
}

#[test]
fn each_task_of_moat_parallel_asks_for_itself_and_its_requests_come_in_its_role() {
    let store = tempfile::tempdir().unwrap();
    let server = TestServer::answering();
    let mut command = moat_in(store.path());
    command.args([
        "parallel",
        "--task",
        &format!("fetch:{ESCAPE}=http GET http://127.0.0.1:{}/", server.port),
        "--task",
        "quiet:echo=hello",
        "--ask",
        "--output",
        "ndjson",
    ]);
    let run = Started::new(command);
    // The fetching task's request, in its role; the other task goes on.
    let request = loop {
        let event = run.next();
        if matches!(event.payload, EventPayload::PermissionRequest(_)) {
            break event;
        }
    };
    assert_eq!(request.role.as_deref(), Some("fetch"));
    let waiting = ok(store.path(), &["ps", "--status", "waiting", "-q"]);
    let id = waiting.trim().to_owned();
    assert!(id.starts_with("r_") && !id.contains('\n'), "{waiting}");
    ok(store.path(), &["approve", &id]);
    let (events, code) = run.finish();
    assert_eq!(code, Some(0));
    let fetched: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| e.role.as_deref() == Some("fetch"))
        .collect();
    assert!(
        fetched.iter().any(|e| matches!(&e.payload,
            EventPayload::Text(text) if text.content == format!("ok: 200 {SERVED}"))),
        "{events:?}"
    );
    assert_eq!(server.connections(), 1);
}
