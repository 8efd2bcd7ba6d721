//! Nothing a run plants runs after it (docs/security.md, "Files that run
//! code later"): through the real `moat` binary, a contained program and
//! a component write git hooks and configuration, a project's tool
//! settings, shell start-up files and an agent CLI's hooks and MCP
//! servers inside their write grants; before the run's `done` moat removes
//! what they made and puts back what they changed, reported as a
//! `PROTECTED_WRITE` error, and the user's next `git status`, `git
//! checkout`, fresh shell or direnv runs nothing of it. The same attack
//! without containment (`--no-contain`) plants everything, and the same
//! git commands run it: the protection is what stops it.
//!
//! As this user and, when root, as an unprivileged one.

use std::path::{Path, PathBuf};
use std::process::Command;

use moat_engine::{AgentEvent, DoneStatus};
use moat_testkit::components::ESCAPE;
use moat_testkit::git::git;
use moat_testkit::{error_messages, single_done};

use crate::cli::common::events;
use crate::egress::{NO_NAMESPACES, moat_through, printed, python, shell, word};
use crate::own_network::{Setting, settings};

/// A script that plants, in `project` (a repository), a hook, an
/// fsmonitor (each a probe saying whether it was written: `hook=…`,
/// `config=…`), direnv's file, VS Code's tasks, Claude Code's project
/// hooks and an MCP server, each touching `mark/NAME` when run; and writes
/// one ordinary file, the run's real work.
fn planting(project: &Path, mark: &Path) -> String {
    let (p, m) = (project.display(), mark.display());
    let hook = python(
        "hook",
        &format!(
            "p=\".git/hooks/post-checkout\"; open(p, \"w\").write(\"#!/bin/sh\\ntouch {m}/hook\\n\"); os.chmod(p, 0o755)"
        ),
    );
    let config = python(
        "config",
        &format!(
            "open(\".git/config\", \"a\").write(\"[core]\\n\\tfsmonitor = \\\"touch {m}/fsmonitor; false\\\"\\n\")"
        ),
    );
    format!(
        "cd {p}; {hook}{config}\
         echo 'touch {m}/envrc' > .envrc; \
         mkdir -p .vscode .claude; \
         echo '{{\"tasks\":[{{\"command\":\"touch {m}/vscode\",\"runOptions\":{{\"runOn\":\"folderOpen\"}}}}]}}' > .vscode/tasks.json; \
         echo '{{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}/claude\"}}]}}]}}}}' > .claude/settings.json; \
         echo '{{\"mcpServers\":{{\"x\":{{\"command\":\"touch\",\"args\":[\"{m}/mcp\"]}}}}}}' > .mcp.json; \
         echo work > work.txt; echo planted=done"
    )
}

/// A repository with one commit in `setting`'s grant, and a place for
/// the marks what runs leaves (writable by anyone: the user's commands
/// run as the tests' user).
fn project(setting: &Setting) -> (PathBuf, PathBuf) {
    let project = setting.grant();
    git(&project, &["init", "--quiet", "-b", "main"]);
    std::fs::write(project.join("notes.txt"), "one\n").unwrap();
    git(&project, &["add", "."]);
    git(&project, &["commit", "--quiet", "-m", "first"]);
    setting.own(&project);
    let mark = setting.dir().join("mark");
    std::fs::create_dir(&mark).unwrap();
    std::fs::set_permissions(&mark, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    (project, mark)
}

/// What the user does next in `project`: `git status` (fsmonitor),
/// `git checkout` (hooks), direnv's file as direnv would run it;
/// the marks made.
fn the_user_works_in(project: &Path, mark: &Path) -> Vec<String> {
    git(project, &["status", "--short"]);
    git(project, &["checkout", "--quiet", "-b", "next"]);
    if project.join(".envrc").exists() {
        Command::new("sh")
            .arg(".envrc")
            .current_dir(project)
            .status()
            .unwrap();
    }
    marks(mark)
}

fn marks(mark: &Path) -> Vec<String> {
    let mut made: Vec<String> = std::fs::read_dir(mark)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    made
}

fn protected_errors(events: &[AgentEvent]) -> String {
    error_messages(events, "PROTECTED_WRITE").join("\n")
}

/// Under namespaces, the repository's hooks and config (there when the
/// run starts) are read-only to its programs: the writes are refused
/// (`EROFS`). Without namespaces (Landlock alone) they are written, and
/// put back before the `done`. Either way what did not exist (`.envrc`,
/// `.vscode`, …) is removed, and everything is reported.
#[test]
fn a_contained_program_plants_nothing_the_users_next_git_or_direnv_runs() {
    let mut cases: Vec<(Setting, Vec<&str>, &str)> = settings()
        .into_iter()
        .map(|setting| (setting, Vec::new(), "refused:EROFS"))
        .collect();
    cases.push((Setting::this_user(), NO_NAMESPACES.to_vec(), "reached"));
    for (setting, no_namespaces, written) in cases {
        let wrapper: Vec<&str> = if no_namespaces.is_empty() {
            setting.wrapper()
        } else {
            no_namespaces
        };
        let who = format!(
            "{}{}",
            setting.who(),
            if wrapper.first() == Some(&"unshare") {
                ", no namespaces"
            } else {
                ""
            }
        );
        let (project, mark) = project(&setting);
        let config = std::fs::read(project.join(".git/config")).unwrap();
        let (output, events, printed) =
            shell(&planting(&project, &mark), &setting.flags(&[]), &wrapper);
        assert!(
            printed.contains("planted=done"),
            "{who}: {printed}: {output:?}"
        );
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{who}");
        assert_eq!(word(&printed, "hook"), written, "{who}: {printed}");
        assert_eq!(word(&printed, "config"), written, "{who}: {printed}");
        let reported = protected_errors(&events);
        let mut planted = vec![".envrc", ".vscode", ".claude/settings.json", ".mcp.json"];
        if written == "reached" {
            planted.extend([".git/hooks/post-checkout", ".git/config"]);
        }
        for planted in planted {
            assert!(
                reported.contains(&format!("{}/{planted}", project.display())),
                "{who}: {planted} not reported: {reported}"
            );
        }
        assert!(reported.contains("--allow-write-protected"), "{reported}");
        // The work stays; what was planted is gone or as it was.
        assert_eq!(
            std::fs::read_to_string(project.join("work.txt")).unwrap(),
            "work\n"
        );
        assert!(!project.join(".git/hooks/post-checkout").exists(), "{who}");
        assert_eq!(
            std::fs::read(project.join(".git/config")).unwrap(),
            config,
            "{who}"
        );
        for gone in [
            ".envrc",
            ".vscode/tasks.json",
            ".claude/settings.json",
            ".mcp.json",
        ] {
            assert!(!project.join(gone).exists(), "{who}: {gone} stayed");
        }
        assert!(
            the_user_works_in(&project, &mark).is_empty(),
            "{who}: the user's next commands ran what the run planted"
        );
    }
}

#[test]
fn without_containment_the_same_run_plants_what_the_users_next_git_runs() {
    let setting = Setting::this_user();
    let (project, mark) = project(&setting);
    let (_, events, printed) = shell(
        &planting(&project, &mark),
        &setting.flags(&["--no-contain"]),
        &[],
    );
    assert!(printed.contains("planted=done"), "{printed}");
    assert!(protected_errors(&events).is_empty());
    assert_eq!(
        the_user_works_in(&project, &mark),
        ["envrc", "fsmonitor", "hook"],
        "the planted hook, fsmonitor and .envrc run"
    );
}

#[test]
fn a_protected_path_opted_in_is_the_runs_to_change_and_no_other() {
    let setting = Setting::this_user();
    let (project, mark) = project(&setting);
    let envrc = project.join(".envrc");
    let hooks = project.join(".git/hooks");
    let allow = format!("--allow-write-protected={}", envrc.display());
    let allow_hooks = format!("--allow-write-protected={}", hooks.display());
    let (output, events, printed) = shell(
        &planting(&project, &mark),
        &setting.flags(&[&allow, &allow_hooks]),
        &[],
    );
    assert!(printed.contains("planted=done"), "{printed}");
    assert!(envrc.exists(), "the opted-in .envrc stays");
    // The opted-in hooks are the run's to write; the config still not.
    assert_eq!(word(&printed, "hook"), "reached", "{printed}");
    assert_eq!(word(&printed, "config"), "refused:EROFS", "{printed}");
    assert!(hooks.join("post-checkout").exists());
    let reported = protected_errors(&events);
    assert!(
        !reported.contains(&envrc.display().to_string()) && !reported.contains("post-checkout"),
        "{reported}"
    );
    assert!(reported.contains(".mcp.json"), "{reported}");
    // Recorded and shown.
    let run = String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).ok()?;
            event["metadata"]["runId"].as_str().map(str::to_owned)
        })
        .expect("a recorded run");
    let shown = moat_through(&[]).args(["show", &run]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!("protected, writable {}", envrc.display())),
        "{shown}: {output:?}"
    );
}

#[test]
fn a_component_plants_nothing_either() {
    let setting = Setting::this_user();
    let (project, _) = project(&setting);
    let probes = |p: &Path| {
        format!(
            "write {0}/.git/hooks/pre-commit\nwrite {0}/.envrc\nwrite {0}/.mcp.json\nwrite {0}/work.txt",
            p.display()
        )
    };
    for (contain, kept) in [(true, false), (false, true)] {
        let mut command = moat_through(&[]);
        command
            .args(["run", ESCAPE, "--output", "ndjson"])
            .args(setting.flags(&[]))
            .args((!contain).then_some("--no-contain"))
            .arg(probes(&project));
        let output = command.output().unwrap();
        let events = events(&output);
        let reported = protected_errors(&events);
        assert!(project.join("work.txt").exists());
        for planted in [".git/hooks/pre-commit", ".envrc", ".mcp.json"] {
            assert_eq!(
                project.join(planted).exists(),
                kept,
                "contained: {contain}: {planted}: {reported}"
            );
            assert_eq!(reported.contains(planted), !kept, "{reported}");
        }
        for planted in [".git/hooks/pre-commit", ".envrc", ".mcp.json"] {
            let _ = std::fs::remove_file(project.join(planted));
        }
    }
}

#[test]
fn a_fresh_shell_and_the_plain_cli_run_nothing_a_run_wrote_in_the_home_it_was_granted() {
    for setting in settings() {
        let who = setting.who();
        let home = setting.dir().join("home");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        let mark = setting.dir().join("mark");
        std::fs::create_dir_all(&mark).unwrap();
        std::fs::set_permissions(&mark, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        std::fs::write(home.join(".bashrc"), "# the user's\n").unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"numStartups": 1, "mcpServers": {}}"#,
        )
        .unwrap();
        setting.own(&home);
        let m = mark.display();
        let script = format!(
            "cd {h}; {bashrc}\
             echo '{{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}/claude\"}}]}}]}}}}' > .claude/settings.json; \
             echo session > .claude/history.jsonl; \
             echo '{{\"numStartups\": 2, \"mcpServers\": {{\"x\": {{\"command\": \"touch\", \"args\": [\"{m}/mcp\"]}}}}}}' > .claude.json; \
             echo planted=done",
            h = home.display(),
            bashrc = python(
                "bashrc",
                &format!("open(\".bashrc\", \"a\").write(\"touch {m}/bashrc\\n\")")
            ),
        );
        let write_home = format!("--allow-write={}", home.display());
        let mut command = crate::egress::shell_command(
            &script,
            std::slice::from_ref(&write_home),
            &setting.wrapper(),
        );
        if setting.wrapper().is_empty() {
            command.env("HOME", &home);
        }
        let output = command.output().unwrap();
        let ran = events(&output);
        let reported = protected_errors(&ran);
        let printed = printed(&ran);
        // The user's .bashrc, there when the run starts, is read-only to
        // its programs; what it made is removed and reported.
        assert_eq!(
            word(&printed, "bashrc"),
            "refused:EROFS",
            "{who}: {printed}"
        );
        assert!(
            reported.contains(".claude/settings.json"),
            "{who}: {reported}: {output:?}"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".bashrc")).unwrap(),
            "# the user's\n",
            "{who}"
        );
        assert!(!home.join(".claude/settings.json").exists(), "{who}");
        // The CLI's state stays; its MCP servers are put back.
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/history.jsonl")).unwrap(),
            "session\n"
        );
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(home.join(".claude.json")).unwrap()).unwrap();
        assert_eq!(state["numStartups"], 2, "{who}: {state}");
        assert_eq!(state["mcpServers"], serde_json::json!({}), "{who}: {state}");
        // A fresh interactive bash of the user's runs nothing of the run's.
        Command::new("bash")
            .args(["-i", "-c", "true"])
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(marks(&mark).is_empty(), "{who}: {:?}", marks(&mark));
        // Without containment the same run's .bashrc runs in that shell.
        if setting.wrapper().is_empty() {
            let mut command = crate::egress::shell_command(
                &script,
                &[write_home.clone(), "--no-contain".into()],
                &[],
            );
            command.env("HOME", &home);
            let uncontained = events(&command.output().unwrap());
            assert!(protected_errors(&uncontained).is_empty());
            Command::new("bash")
                .args(["-i", "-c", "true"])
                .env("HOME", &home)
                .output()
                .unwrap();
            assert_eq!(marks(&mark), ["bashrc"]);
        }
    }
}

/// Probes for the escape component: a file that runs code later and one
/// of the run's work, both in `grant`, named by `tag`.
fn component_plants(grant: &Path, tag: &str) -> String {
    format!(
        "write {0}/.envrc\nwrite {0}/.mcp.json\nwrite {0}/work-{tag}.txt",
        grant.display()
    )
}

/// What a run of [`component_plants`] left in `grant`: its work kept,
/// nothing that runs code later.
fn assert_only_the_work(grant: &Path, tag: &str) {
    assert!(
        grant.join(format!("work-{tag}.txt")).exists(),
        "{tag}: its work"
    );
    for planted in [".envrc", ".mcp.json"] {
        assert!(!grant.join(planted).exists(), "{tag}: {planted} stayed");
    }
}

/// Every path that starts a run keeps the list: `moat parallel`'s tasks,
/// `moat serve`'s runs (and `grants.writeProtected` there lets one be
/// written) and their children, a workflow's task and its contained
/// hook.
#[test]
fn parallel_serve_and_workflows_keep_them_too() {
    let dir = tempfile::tempdir().unwrap();
    let grant = std::fs::canonicalize(dir.path()).unwrap();
    let write = format!("--allow-write={}", grant.display());

    // moat parallel: two tasks, each planting.
    let output = moat_through(&[])
        .args(["parallel", &write, "--output", "ndjson"])
        .arg(format!("--task={ESCAPE}={}", component_plants(&grant, "a")))
        .arg(format!("--task={ESCAPE}={}", component_plants(&grant, "b")))
        .output()
        .unwrap();
    let reported = protected_errors(&events(&output));
    assert!(reported.contains(".envrc"), "{reported}: {output:?}");
    assert_only_the_work(&grant, "a");
    assert_only_the_work(&grant, "b");

    // moat serve: a client's run; one let write `.envrc`, which a server
    // not let itself refuses (a grant, narrowed by the server's).
    let envrc = grant.join(".envrc").display().to_string();
    let (_server, mut client) = crate::serve::client::Server::stdio(&[&write]);
    let refused = client.error(
        "run",
        serde_json::json!({"adapter": ESCAPE, "prompt": "list /", "grants": {"writeProtected": [envrc]}}),
    );
    assert_eq!(refused["code"], "BOUNDARY_VIOLATION", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("--allow-write-protected="),
        "{refused}"
    );
    let let_envrc = format!("--allow-write-protected={envrc}");
    let (_server, mut client) = crate::serve::client::Server::stdio(&[&write, &let_envrc]);
    for (tag, grants) in [
        ("serve", serde_json::json!({"write": [grant]})),
        (
            "let",
            serde_json::json!({"write": [grant], "writeProtected": [envrc]}),
        ),
    ] {
        let run = crate::serve::start(
            &mut client,
            serde_json::json!({"adapter": ESCAPE, "prompt": component_plants(&grant, tag), "grants": grants}),
        );
        let results = client.ok("await", serde_json::json!({"runs": [run]}));
        assert_eq!(results["results"][&run]["status"], "success", "{results}");
        if tag == "serve" {
            assert_only_the_work(&grant, tag);
        } else {
            assert!(grant.join(".envrc").exists(), "let write .envrc");
            assert!(!grant.join(".mcp.json").exists());
            std::fs::remove_file(grant.join(".envrc")).unwrap();
        }
    }

    // A component's child, started through the server: the same (its
    // component in the run's grant, as a child's must be).
    let agent = grant.join("agent.wasm");
    std::fs::copy(ESCAPE, &agent).unwrap();
    let run = crate::serve::start(
        &mut client,
        crate::serve::fanout(
            serde_json::json!([{"adapter": agent, "prompt": component_plants(&grant, "child")}]),
            serde_json::json!({"write": [grant]}),
        ),
    );
    let results = client.ok("await", serde_json::json!({"runs": [run]}));
    assert_eq!(results["results"][&run]["status"], "success", "{results}");
    assert_only_the_work(&grant, "child");

    // A workflow: its task plants; its contained hook plants and fails
    // saying what it changed.
    let flow = grant.join("flow.toml");
    let probes = component_plants(&grant, "task").replace('\n', "\", \"");
    std::fs::write(
        &flow,
        format!(
            "name = \"plant\"\n\n[[task]]\nid = \"agent\"\nadapter = \"agent.wasm\"\nprompt = \"go\"\n\
             options = {{ extra = {{ probes = [\"{probes}\"] }} }}\n\n\
             [[hook]]\non = \"post-task\"\ncommand = \"sh -c 'echo touch x > .envrc'\"\ngrants = {{ write = [\".\"] }}\n"
        ),
    )
    .unwrap();
    let ran = moat_through(&[])
        .current_dir(&grant)
        .args([
            "workflow",
            "run",
            "flow.toml",
            "--output",
            "ndjson",
            &write,
            "--allow-run=sh",
        ])
        .output()
        .unwrap();
    assert_only_the_work(&grant, "task");
    let state = std::fs::read_to_string(grant.join(".moat/workflows/plant/state.json")).unwrap();
    assert!(
        state.contains("changed files that run code later") && state.contains(".envrc"),
        "{state}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
}

/// A cluster worker's run keeps them too: the job planted on the worker,
/// whose files are the ones kept.
#[test]
fn a_workers_run_keeps_them_too() {
    if !moat_testkit::nats::available() {
        return;
    }
    let server = moat_testkit::nats::server(&[]);
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let grant = std::fs::canonicalize(dir.path()).unwrap();
    let write = format!("--allow-write={}", grant.display());
    let _worker = crate::cluster::Worker::start(&url, &[&write]);
    let output = moat_through(&[])
        .args(["run", "--nats", &url, ESCAPE, &write, "--output", "ndjson"])
        .arg(component_plants(&grant, "worker"))
        .output()
        .unwrap();
    let events = events(&output);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{output:?}"
    );
    let reported = protected_errors(&events);
    assert!(reported.contains(".envrc"), "{reported}");
    assert_only_the_work(&grant, "worker");
}

/// `moat acp`: an editor's prompt is a run like any, and keeps them too.
#[test]
fn an_editors_prompt_through_moat_acp_keeps_them_too() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let grant = std::fs::canonicalize(dir.path()).unwrap();
    let write = format!("--allow-write={}", grant.display());
    let mut acp = moat_through(&[])
        .args(["acp", ESCAPE, &write])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = acp.stdin.take().unwrap();
    let mut output = BufReader::new(acp.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: serde_json::Value| -> serde_json::Value {
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(input, "{request}").unwrap();
        loop {
            let mut line = String::new();
            assert!(output.read_line(&mut line).unwrap() > 0, "moat acp ended");
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    };
    ask(1, "initialize", serde_json::json!({"protocolVersion": 1}));
    let session = ask(
        2,
        "session/new",
        serde_json::json!({"cwd": grant, "mcpServers": []}),
    );
    let session = session["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_owned();
    let answered = ask(
        3,
        "session/prompt",
        serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": component_plants(&grant, "acp")}]}),
    );
    assert!(answered.get("result").is_some(), "{answered}");
    let _ = acp.kill();
    let _ = acp.wait();
    assert_only_the_work(&grant, "acp");
}

/// Where an entry of the list lies for a run granted `project` and
/// `home`: `None` for those no test may write (the system's crontabs)
/// and `.git`, a directory here (a worktree's link is tested with the
/// workspaces).
fn place_of(entry: &moat_grants::protected::Entry, project: &Path, home: &Path) -> Option<PathBuf> {
    use moat_grants::protected::Anchor;
    match entry.anchor {
        Anchor::Project if entry.path == ".git" => None,
        Anchor::Project => Some(project.join(entry.path)),
        Anchor::Home => Some(home.join(entry.path)),
        Anchor::Root => None,
    }
}

/// What planting `entry` at `place` writes: the file itself, or a file in
/// the directory.
fn planted_at(entry: &moat_grants::protected::Entry, place: &Path) -> PathBuf {
    match entry.kind {
        moat_grants::protected::Kind::Dir => place.join("planted"),
        _ => place.to_path_buf(),
    }
}

/// Every entry of the list (but the system's crontabs), and a directory
/// on moat's `PATH`, written under write grants that cover it — by a
/// contained program (as this user and unprivileged: under namespaces,
/// each there when the run starts is read-only, `EROFS`) and by a
/// component (each written, then reported and put back): each existing
/// file as it was, nothing planted left.
#[test]
fn every_entry_of_the_list_is_kept_from_a_program_and_a_component() {
    for (setting, by_program) in settings()
        .into_iter()
        .map(|s| (s, true))
        .chain([(Setting::this_user(), false)])
    {
        let who = format!(
            "{} ({})",
            setting.who(),
            if by_program {
                "a program"
            } else {
                "a component"
            }
        );
        let project = setting.grant();
        git(&project, &["init", "--quiet", "-b", "main"]);
        let home = setting.dir().join("home");
        let on_path = project.join("bin");
        std::fs::create_dir_all(&on_path).unwrap();
        // Each path planted, and whether it is read-only to a program
        // (there when the run starts; not a file holding a CLI's state).
        let mut planted = vec![(on_path.join("planted"), true)];
        let mut kept = Vec::new();
        for entry in moat_grants::protected::LIST {
            let Some(place) = place_of(entry, &project, &home) else {
                continue;
            };
            // Made before the run: each directory (so a component, which
            // makes none, can write into it), each file's parent, and a
            // file of the user's where it was one.
            match entry.kind {
                moat_grants::protected::Kind::Dir => std::fs::create_dir_all(&place).unwrap(),
                _ => {
                    std::fs::create_dir_all(place.parent().unwrap()).unwrap();
                    if !place.exists() {
                        std::fs::write(&place, "{\"the user's\": true}\n").unwrap();
                    }
                    kept.push((place.clone(), std::fs::read(&place).unwrap()));
                }
            }
            let read_only = !matches!(entry.kind, moat_grants::protected::Kind::JsonCommands(_));
            planted.push((planted_at(entry, &place), read_only));
        }
        setting.own(&project);
        setting.own(&home);
        let grants = [
            format!("--allow-write={}", project.display()),
            format!("--allow-write={}", home.display()),
            format!("--cwd={}", project.display()),
        ];
        let mut command = if by_program {
            let script: String = planted
                .iter()
                .enumerate()
                .map(|(n, (path, _))| {
                    python(
                        &format!("p{n}"),
                        &format!("open(\"{}\", \"w\").write(\"planted\")", path.display()),
                    )
                })
                .collect();
            crate::egress::shell_command(
                &format!("{script}echo planted=done"),
                &grants,
                &setting.wrapper(),
            )
        } else {
            let probes: Vec<String> = planted
                .iter()
                .map(|(p, _)| format!("write {}", p.display()))
                .collect();
            let mut command = moat_through(&[]);
            command
                .args(["run", ESCAPE, "--output", "ndjson"])
                .args(&grants)
                .arg(probes.join("\n"));
            command
        };
        if setting.wrapper().is_empty() {
            command.env("HOME", &home);
        }
        let path = format!("{}:{}", std::env::var("PATH").unwrap(), on_path.display());
        command.env("PATH", &path);
        let output = command.output().unwrap();
        let events = events(&output);
        assert_eq!(
            single_done(&events).status,
            DoneStatus::Success,
            "{who}: {output:?}"
        );
        let reported = protected_errors(&events);
        let printed = printed(&events);
        for (n, (path, read_only)) in planted.iter().enumerate() {
            let shown = path.display().to_string();
            // Under namespaces a program finds what was there read-only;
            // what it could write is reported and put back.
            if by_program && *read_only {
                assert_eq!(
                    word(&printed, &format!("p{n}")),
                    "refused:EROFS",
                    "{who}: {shown}"
                );
                assert!(!reported.contains(&shown), "{who}: {shown}: {reported}");
            } else {
                assert!(
                    reported.contains(&shown),
                    "{who}: {shown} not reported: {reported}"
                );
            }
            if !kept.iter().any(|(kept, _)| kept == path) {
                assert!(!path.exists(), "{who}: {shown} stayed");
            }
        }
        for (path, was) in &kept {
            assert_eq!(
                &std::fs::read(path).unwrap(),
                was,
                "{who}: {}",
                path.display()
            );
        }
    }
}
