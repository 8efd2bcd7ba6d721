//! `moat workflow` through the real binary: the example pipeline on the
//! echo adapter, validation with lines, graphs, status, the run store's
//! mirror, grants that only narrow, Ctrl-C, and a `kill -9` in the middle
//! followed by a resume.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use moat_testkit::components::SLEEPY;
use serde_json::Value;

use crate::cli::common::moat;

/// A project of the test's own, with a store of its own.
pub(crate) struct Project {
    dir: tempfile::TempDir,
    store: PathBuf,
}

impl Project {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store/moat.db");
        Self { dir, store }
    }

    /// A copy of the example pipeline.
    fn example() -> Self {
        let project = Self::new();
        let example = moat_testkit::repo_root().join("examples/workflows/pipeline");
        for entry in std::fs::read_dir(example).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), project.path().join(entry.file_name())).unwrap();
            }
        }
        project
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).unwrap();
    }

    pub(crate) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub(crate) fn moat(&self) -> Command {
        let mut command = moat();
        command
            .env("MOAT_STORE", &self.store)
            .current_dir(self.path());
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.moat().args(args).output().unwrap()
    }

    pub(crate) fn state(&self, name: &str) -> Value {
        serde_json::from_str(&self.read(&format!(".moat/workflows/{name}/state.json"))).unwrap()
    }

    /// `moat ps --all --output json`.
    fn runs(&self) -> Vec<Value> {
        let output = self.run(&["ps", "--all", "--output", "json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

pub(crate) fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn the_example_pipeline_runs_on_echo_and_is_recorded() {
    let project = Project::example();
    let output = project.run(&["workflow", "run", "workflow.toml", "--output", "ndjson"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let done = of_type(&events, "workflow_done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["status"], "completed");
    assert_eq!(done[0]["completed"], 4);
    let started: Vec<&str> = of_type(&events, "task_started")
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(
        started,
        ["requirements", "design", "implement", "review", "review"]
    );
    let exit = of_type(&events, "loop_exit");
    assert_eq!(exit[0]["iterations"], 2);
    assert_eq!(exit[0]["reason"], "condition");

    // Echo answers with its prompt: each saved answer is the context moat
    // assembled — constitution, handover, inputs, task.
    let design = project.read("out/design.md");
    assert!(
        design.contains("Every decision names the requirement"),
        "{design}"
    );
    assert!(design.contains("## requirements"), "{design}");
    assert!(design.contains("## out/requirements.md"), "{design}");
    assert!(design.contains("Design the todo list"), "{design}");
    let review = project.read("out/review.md");
    assert!(review.contains("round 2"));
    assert!(review.contains("review (your previous iteration)"));
    let log = project.read("out/pipeline.log");
    assert!(
        log.starts_with("start requirements (attempt 1, iteration 1)"),
        "{log}"
    );
    assert!(log.contains("done  review (iteration 2)"), "{log}");

    let state = project.state("pipeline");
    for task in ["requirements", "design", "implement", "review"] {
        assert_eq!(state["tasks"][task]["status"], "COMPLETED");
        assert_eq!(
            state["tasks"][task]["runs"].as_array().unwrap().len(),
            if task == "review" { 2 } else { 1 }
        );
    }
    assert_eq!(state["tasks"]["review"]["iterations"], 2);

    // The run store: the workflow is a run, every attempt a child of it.
    let runs = project.runs();
    let workflow = runs
        .iter()
        .find(|r| r["adapter"] == "workflow")
        .expect("the workflow's run");
    assert_eq!(workflow["status"], "completed");
    assert_eq!(state["runs"][0], workflow["id"]);
    let children: Vec<&Value> = runs
        .iter()
        .filter(|r| r["parent"] == workflow["id"])
        .collect();
    assert_eq!(children.len(), 5);
    assert!(
        children
            .iter()
            .all(|r| r["status"] == "completed" && r["adapter"] == "echo")
    );
    let prompt = children[0]["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("# Constitution"), "{prompt}");

    let status = project.run(&["workflow", "status", "workflow.toml"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(table.starts_with("workflow pipeline: completed"), "{table}");
    let header = table.lines().nth(1).unwrap();
    for column in ["TASK", "STATUS", "ITER", "DURATION", "TOKENS", "COST"] {
        assert!(header.contains(column), "{header}");
    }
    let review_row = table.lines().find(|l| l.starts_with("review")).unwrap();
    assert!(
        review_row.contains("COMPLETED") && review_row.contains(" 2 "),
        "{review_row}"
    );

    // Done: `run` starts it over without --fresh.
    let again = project.run(&["workflow", "run", "workflow.toml", "--output", "ndjson"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
}

#[test]
fn validate_reports_every_problem_with_its_line_and_graph_draws_the_dag() {
    let project = Project::example();
    let ok = project.run(&["workflow", "validate", "workflow.toml"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("ok — workflow pipeline, 4 tasks"));

    project.write(
        "bad.toml",
        r#"[[task]]
id = "a"
adapter = "echo"
prompt = "p"
depends_on = ["b"]

[[task]]
id = "b"
adapter = "echo"
prompt = "p {{oops}}"
depends_on = ["a"]
inputs = ["nowhere.md"]
"#,
    );
    let bad = project.run(&["workflow", "validate", "bad.toml"]);
    assert_eq!(bad.status.code(), Some(2));
    let message = stderr(&bad);
    assert!(
        message.contains("bad.toml:5:") && message.contains("a → b → a"),
        "{message}"
    );
    assert!(
        message.contains("bad.toml:10:") && message.contains("{{oops}}"),
        "{message}"
    );
    assert!(
        message.contains("bad.toml:12:") && message.contains("nowhere.md"),
        "{message}"
    );
    // Nothing runs from a file with problems.
    let refused = project.run(&["workflow", "run", "bad.toml"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(!project.path().join(".moat/workflows/bad").exists());

    let text = project.run(&["workflow", "graph", "workflow.toml"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("requirements"), "{text}");
    assert!(
        lines[3].contains("review") && lines[3].contains("← implement, requirements"),
        "{text}"
    );
    assert!(lines[3].contains("↻ up to 3"), "{text}");
    let dot = project.run(&["workflow", "graph", "workflow.toml", "--format", "dot"]);
    let dot = String::from_utf8_lossy(&dot.stdout).into_owned();
    assert!(dot.starts_with("digraph \"pipeline\" {"), "{dot}");
    assert!(dot.contains("\"requirements\" -> \"design\";"), "{dot}");
    let mermaid = project.run(&["workflow", "graph", "workflow.toml", "--format", "mermaid"]);
    let mermaid = String::from_utf8_lossy(&mermaid.stdout).into_owned();
    assert!(mermaid.starts_with("flowchart LR"), "{mermaid}");
    assert!(mermaid.contains("t0 --> t1"), "{mermaid}");
}

#[test]
fn a_tasks_grants_only_narrow_the_workflows() {
    let project = Project::new();
    project.write(
        "flow.toml",
        r#"[[task]]
id = "fetch"
adapter = "echo"
prompt = "p"
[task.grants]
net = ["api.example.com"]
"#,
    );
    let refused = project.run(&["workflow", "run", "flow.toml", "--output", "ndjson"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("task fetch: the run asks for more than the workflow allows"),
        "{message}"
    );
    assert!(message.contains("api.example.com"), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    // Within the ceiling, it runs with exactly what it asked.
    let allowed = project.run(&[
        "workflow",
        "run",
        "flow.toml",
        "--output",
        "ndjson",
        "--fresh",
        "--allow-net",
        "api.example.com,other.example.com",
    ]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let runs = project.runs();
    let task = runs.iter().find(|r| r["adapter"] == "echo").unwrap();
    let net = task["grants"]["net"].to_string();
    assert!(
        net.contains("api.example.com") && !net.contains("other.example.com"),
        "{net}"
    );
}

/// A chain whose middle task sleeps (2 ms × 1000 ticks): a window to stop
/// moat in.
fn sleepy_chain(project: &Project) {
    // A component by path is the project's, as every path of the file is.
    std::fs::copy(SLEEPY, project.path().join("sleepy.wasm")).unwrap();
    project.write(
        "flow.toml",
        r#"name = "slow"
[[task]]
id = "A"
adapter = "echo"
prompt = "first"
[[task]]
id = "B"
adapter = "sleepy.wasm"
prompt = "sleep 2 ms a tick, cooperate"
depends_on = ["A"]
[[task]]
id = "C"
adapter = "echo"
prompt = "last"
depends_on = ["B"]
"#,
    );
}

/// Starts the workflow and returns once B has started.
fn start_until_b(project: &Project) -> Child {
    let mut child = project
        .moat()
        .args(["workflow", "run", "flow.toml", "--output", "ndjson"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["type"] == "task_started" && event["task"] == "B" {
            // Let the run get going.
            std::thread::sleep(Duration::from_millis(300));
            return child;
        }
        assert!(Instant::now() < deadline, "B never started");
    }
    let _ = child.kill();
    panic!("moat ended before B started: {:?}", child.wait());
}

#[test]
fn kill_9_in_the_middle_then_resume_skips_what_completed() {
    let project = Project::new();
    sleepy_chain(&project);
    let mut child = start_until_b(&project);
    child.kill().unwrap();
    child.wait().unwrap();
    let state = project.state("slow");
    assert_eq!(state["status"], "running");
    assert_eq!(state["tasks"]["A"]["status"], "COMPLETED");
    assert_eq!(state["tasks"]["B"]["status"], "RUNNING");
    assert_eq!(state["tasks"]["C"]["status"], "PENDING");

    let refused = project.run(&["workflow", "run", "flow.toml"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("moat workflow resume"),
        "{}",
        stderr(&refused)
    );

    let resumed = project.run(&["workflow", "resume", "flow.toml", "--output", "ndjson"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let events = events(&resumed);
    assert_eq!(
        of_type(&events, "workflow_started")[0]["skipped"],
        serde_json::json!(["A"])
    );
    let started: Vec<&str> = of_type(&events, "task_started")
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["B", "C"]);
    let state = project.state("slow");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["runs"].as_array().unwrap().len(), 2);
    // The state holds the runs of attempts that ended; the killed one is
    // in the store (below).
    assert_eq!(state["tasks"]["B"]["runs"].as_array().unwrap().len(), 1);

    // The store saw the crash: the first workflow run and its attempt in
    // flight failed with `engine restart`.
    let runs = project.runs();
    let first = runs.iter().find(|r| r["id"] == state["runs"][0]).unwrap();
    assert_eq!(first["status"], "failed");
    assert_eq!(first["reason"], "engine restart");
    let killed: Vec<&Value> = runs
        .iter()
        .filter(|r| r["parent"] == first["id"] && r["status"] == "failed")
        .collect();
    assert_eq!(killed.len(), 1);
    let second = runs.iter().find(|r| r["id"] == state["runs"][1]).unwrap();
    assert_eq!(second["status"], "completed");
}

#[test]
fn ctrl_c_cancels_the_workflow_and_resume_finishes_it() {
    let project = Project::new();
    sleepy_chain(&project);
    let mut child = start_until_b(&project);
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let state = project.state("slow");
    assert_eq!(state["status"], "cancelled");
    assert_eq!(state["tasks"]["B"]["status"], "PENDING");
    let runs = project.runs();
    let workflow = runs.iter().find(|r| r["adapter"] == "workflow").unwrap();
    assert_eq!(workflow["status"], "failed");
    assert_eq!(workflow["reason"], "cancelled");
    assert!(runs.iter().all(|r| r["status"] != "running"), "{runs:?}");

    let resumed = project.run(&["workflow", "resume", "flow.toml", "--output", "ndjson"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(project.state("slow")["status"], "completed");
}

#[test]
fn a_thousand_task_fan_out_fan_in_completes_and_the_sink_sees_every_handover() {
    let project = Project::new();
    project.write("fan.toml", &moat_testkit::workflows::fan_out_fan_in(1000));
    let output = project.run(&[
        "workflow",
        "run",
        "fan.toml",
        "--output",
        "ndjson",
        "--max-parallel",
        "8",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let done = of_type(&events, "workflow_done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["completed"], 1000);
    assert_eq!(of_type(&events, "task_completed").len(), 1000);
    let state = project.state("fan");
    let tasks = state["tasks"].as_object().unwrap();
    assert_eq!(tasks.len(), 1000);
    assert!(tasks.values().all(|t| t["status"] == "COMPLETED"));
    // The sink started after every task it depends on completed.
    let position = |kind: &str, task: &str| {
        events
            .iter()
            .position(|e| e["type"] == kind && e["task"] == task)
            .unwrap()
    };
    let sink = position("task_started", "sink");
    assert!((0..998).all(|i| position("task_completed", &format!("t{i}")) < sink));
    let runs = project.runs();
    assert_eq!(runs.len(), 1001, "the workflow and its 1,000 attempts");
    let gathered = runs
        .iter()
        .filter_map(|r| r["prompt"].as_str())
        .find(|p| p.contains("gather"))
        .unwrap();
    assert_eq!(gathered.matches("\n## t").count(), 998);
}

#[test]
fn moat_cancel_of_the_workflows_run_stops_it_from_elsewhere() {
    let project = Project::new();
    sleepy_chain(&project);
    let mut child = start_until_b(&project);
    let runs = project.runs();
    let workflow = runs
        .iter()
        .find(|r| r["adapter"] == "workflow" && r["status"] == "running")
        .expect("the workflow's run, running");
    let id = workflow["id"].as_str().unwrap();
    let cancel = project.run(&["cancel", id]);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let state = project.state("slow");
    assert_eq!(state["status"], "cancelled");
    assert_eq!(state["tasks"]["B"]["status"], "PENDING");
    assert_eq!(state["tasks"]["C"]["status"], "PENDING");
    let runs = project.runs();
    let attempt = runs
        .iter()
        .find(|r| r["parent"] == id && r["adapter"] == "sleepy")
        .expect("B's attempt");
    assert_eq!(attempt["status"], "failed");
    assert_eq!(attempt["reason"], "cancelled");
}

#[test]
fn on_a_terminal_the_live_view_shows_each_running_task_and_each_end() {
    let project = Project::example();
    let moat = env!("CARGO_BIN_EXE_moat");
    // A pseudo-terminal (util-linux's `script`), so moat sees a terminal.
    let output = Command::new("script")
        .args([
            "-qec",
            &format!("{moat} workflow run workflow.toml"),
            "/dev/null",
        ])
        .env("MOAT_STORE", &project.store)
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env_remove("MOAT_LOG")
        .current_dir(project.path())
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let screen = String::from_utf8_lossy(&output.stdout);
    // A spinner line per running task, with its elapsed time.
    assert!(
        screen.contains("requirements  0s") || screen.contains("requirements 0s"),
        "{screen}"
    );
    assert!(screen.contains("review iteration 2"), "{screen}");
    for task in ["requirements", "design", "implement", "review"] {
        assert!(screen.contains(&format!("✓ {task} (")), "{task}: {screen}");
    }
    assert!(screen.contains("workflow completed in"), "{screen}");
    assert!(
        !screen.contains("\"type\""),
        "no NDJSON on a terminal: {screen}"
    );
}

#[test]
fn on_a_terminal_each_line_of_the_live_view_ends_with_a_newline() {
    let project = Project::example();
    let mut command = project.moat();
    command.args(["workflow", "run", "workflow.toml"]);
    let (pieces, status) = crate::cli::common::Pty::open().run(command);
    let shown: String = pieces.into_iter().map(|(_, text)| text).collect();
    assert!(status.success(), "{shown}");
    // Each task that ended is a line of its own, not padded to the
    // terminal's width for it to wrap.
    let ended: Vec<&str> = shown.lines().filter(|l| l.contains("✓ ")).collect();
    assert!(ended.len() >= 4, "{shown:?}");
    for line in ended {
        assert!(!line.ends_with("    "), "padded: {line:?}");
        assert_eq!(line.matches("✓ ").count(), 1, "run together: {line:?}");
    }
}

#[test]
fn validate_refuses_what_run_would_and_a_mistyped_field_gets_its_likely_name() {
    let project = Project::example();
    project.write(
        "adapters.toml",
        "[[task]]\nid = \"a\"\nadapter = \"ecko\"\nprompt = \"p\"\n\n\
         [[task]]\nid = \"b\"\nadapter = \"missing.wasm\"\nprompt = \"p\"\n",
    );
    let refused = project.run(&["workflow", "validate", "adapters.toml"]);
    assert_eq!(refused.status.code(), Some(2));
    let message = stderr(&refused);
    assert!(
        message.contains("task a: unknown adapter `ecko` (did you mean `echo`?)"),
        "{message}"
    );
    assert!(message.contains("task b: cannot load"), "{message}");
    assert_eq!(message.lines().count(), 2, "a line a problem: {message}");

    project.write(
        "typo.toml",
        "[[task]]\nid = \"a\"\nadapter = \"echo\"\nprompt = \"p\"\ndepends = []\n",
    );
    let typo = project.run(&["workflow", "validate", "typo.toml"]);
    assert_eq!(typo.status.code(), Some(2));
    let message = stderr(&typo);
    assert!(
        message.contains("typo.toml:5:")
            && message.contains("`depends` is not a field of a run; did you mean `depends_on`?"),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "one problem: {message}");
    assert!(!message.contains("()"), "an empty context: {message}");
}

#[test]
fn a_component_path_outside_the_project_is_refused_like_any_path_of_the_file() {
    let project = Project::example();
    project.write(
        "outside.toml",
        "[[task]]\nid = \"a\"\nadapter = \"../x.wasm\"\nprompt = \"p\"\n\n\
         [[task]]\nid = \"b\"\nadapter = \"/etc/x.wasm\"\nprompt = \"p\"\n",
    );
    let refused = project.run(&["workflow", "validate", "outside.toml"]);
    assert_eq!(refused.status.code(), Some(2));
    let message = stderr(&refused);
    assert!(
        message.contains("outside.toml:3:11 (task[0].adapter)")
            && message.contains("may not leave the project"),
        "{message}"
    );
    assert!(message.contains("is outside the project"), "{message}");
}

#[test]
fn a_hook_runs_contained_so_the_script_an_agent_planted_cannot_write_outside_or_reach_the_network()
{
    use moat_testkit::components::ESCAPE;
    let project = Project::new();
    let root = std::fs::canonicalize(project.path()).unwrap();
    std::fs::copy(ESCAPE, root.join("agent.wasm")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("planted-wrote-here");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // What the agent plants: the check the hook runs, rewritten.
    project.write(
        "planted.sh",
        &format!(
            "echo planted > '{marker}' 2>/dev/null && echo WROTE-OUTSIDE >&2\n\
             python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\" \
             2>/dev/null && echo REACHED-THE-LISTENER >&2\n\
             echo planted-ran >&2\nexit 1\n",
            marker = marker.display()
        ),
    );
    project.write("check.sh", "exit 0\n");
    let workflow = |unsandboxed: bool| {
        format!(
            "name = \"planted\"\n\n[[task]]\nid = \"agent\"\nadapter = \"agent.wasm\"\n\
             prompt = \"plant the check\"\n\
             options = {{ extra = {{ probes = [\"shell-in {root} cp planted.sh check.sh\"] }} }}\n\n\
             [[hook]]\non = \"post-task\"\ncommand = \"sh check.sh\"\n{}",
            if unsandboxed {
                "unsandboxed = true\n"
            } else {
                ""
            },
            root = root.display()
        )
    };
    project.write("flow.toml", &workflow(false));
    let ran = project
        .moat()
        .args(["workflow", "run", "flow.toml", "--output", "ndjson"])
        .arg(format!("--allow-write={}", root.display()))
        .arg("--allow-run=sh")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(1), "{}", stderr(&ran));
    // The agent did plant it, and the hook ran it — contained: it could
    // neither write outside the project nor reach the listener.
    assert_eq!(
        project.read("check.sh"),
        project.read("planted.sh"),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    let state = project.state("planted");
    let error = state["tasks"]["agent"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("planted-ran"), "{error}");
    assert!(
        !error.contains("WROTE-OUTSIDE") && !error.contains("REACHED"),
        "{error}"
    );
    assert!(
        !marker.exists(),
        "the planted script wrote outside the project"
    );
    assert!(
        listener.accept().is_err(),
        "the planted script reached the network"
    );
    // No warning: nothing ran unsandboxed.
    assert!(!stderr(&ran).contains("unsandboxed"), "{}", stderr(&ran));

    // Opted out, it says so in validate, status and every run — and the
    // same script has the user's rights.
    project.write("check.sh", "exit 0\n");
    project.write("flow.toml", &workflow(true));
    let validated = project.run(&["workflow", "validate", "flow.toml"]);
    let said = String::from_utf8_lossy(&validated.stdout).into_owned();
    assert!(
        said.contains("hook[0] `sh check.sh` runs unsandboxed"),
        "{said}"
    );
    let status = project.run(&["workflow", "status", "flow.toml"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("runs unsandboxed"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let ran = project
        .moat()
        .args([
            "workflow",
            "run",
            "flow.toml",
            "--fresh",
            "--output",
            "ndjson",
        ])
        .arg(format!("--allow-write={}", root.display()))
        .arg("--allow-run=sh")
        .output()
        .unwrap();
    let warned = stderr(&ran);
    assert!(
        warned.contains("warning: hook[0] `sh check.sh` runs unsandboxed")
            && warned.contains("a task may write the project"),
        "{warned}"
    );
    assert!(
        marker.exists(),
        "unsandboxed, the script has the user's rights: {warned}"
    );
    assert!(listener.accept().is_ok(), "and reaches the network");
}

#[test]
fn with_ask_a_task_asks_for_what_its_grants_lack_within_the_workflows_flags_and_no_further() {
    use moat_testkit::components::ESCAPE;
    use moat_testkit::http_server::TestServer;
    let project = Project::new();
    std::fs::copy(ESCAPE, project.path().join("agent.wasm")).unwrap();
    let within = TestServer::answering();
    let beyond = TestServer::answering();
    // The task has no host of its own; the workflow may give one of the two.
    project.write(
        "flow.toml",
        &format!(
            "[[task]]\nid = \"fetch\"\nadapter = \"agent.wasm\"\nprompt = \"p\"\n\
             options = {{ extra = {{ probes = [\"http GET http://127.0.0.1:{}/\", \"http GET http://127.0.0.1:{}/\"] }} }}\n\
             [task.grants]\nnet = []\n",
            within.port, beyond.port
        ),
    );
    let mut child = project
        .moat()
        .args([
            "workflow",
            "run",
            "flow.toml",
            "--output",
            "ndjson",
            "--ask",
        ])
        .arg(format!("--allow-net=127.0.0.1:{}", within.port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let request = loop {
        let line = lines.next().expect("a task_waiting event").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        seen.push(event.clone());
        if event["type"] == "task_waiting" {
            break event;
        }
    };
    // The workflow says which task waits, for what, and how to answer.
    assert_eq!(request["task"], "fetch");
    assert_eq!(request["request"], "1");
    let reason = request["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("127.0.0.1:{}", within.port)),
        "{reason}"
    );
    let id = request["run"].as_str().unwrap().to_owned();
    // Its run is waiting; another process answers it.
    let waiting = project.run(&["ps", "--status", "waiting", "--output", "json"]);
    let waiting: Vec<Value> = serde_json::from_slice(&waiting.stdout).unwrap();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["id"], id.as_str());
    let approved = project.run(&["approve", &id]);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    seen.extend(lines.map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap()));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(within.connections(), 1, "the approved host was reached");
    // Beyond the workflow's flags nobody is asked: denied at once.
    assert_eq!(of_type(&seen, "task_waiting").len(), 1, "{seen:?}");
    assert_eq!(beyond.connections(), 0);
    let record = project.run(&["show", &id, "--json"]);
    let record: Value = serde_json::from_slice(&record.stdout).unwrap();
    let requests = record["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0]["answer"]["approved"], true);
    assert_eq!(requests[1]["answer"]["approved"], false);
    assert!(
        requests[1]["answer"]["by"]
            .as_str()
            .unwrap()
            .contains("the ceiling of the workflow"),
        "{requests:?}"
    );
}
