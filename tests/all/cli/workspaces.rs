//! A workspace per run (`--workspace worktree|copy`), with real git and a
//! stand-in agent CLI that edits files where it is started: each run edits
//! its own worktree, never the project; `moat diff` shows what it changed,
//! `moat apply` lands it or refuses a conflict changing nothing, and
//! `moat workspace rm --ended` leaves no worktree or branch behind.

use std::path::Path;
use std::process::{Command, Output};

use moat_testkit::git::{git, repository as project};

use super::adapters::StandIn;
use super::store::Scratch;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A project repository (`project()`), and a run store and workspace
/// directory of the test's own.
struct Setup {
    _project: tempfile::TempDir,
    root: std::path::PathBuf,
    scratch: Scratch,
    workspaces: std::path::PathBuf,
}

impl Setup {
    fn new() -> Self {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        let scratch = Scratch::new();
        let workspaces = scratch.dir().join("workspaces");
        Setup {
            _project: project,
            root,
            scratch,
            workspaces,
        }
    }

    /// `moat` on the test's store, making workspaces in its directory.
    fn moat(&self) -> Command {
        let mut command = self.scratch.moat();
        command.env("MOAT_WORKSPACE_DIR", &self.workspaces);
        command
    }
}

fn ok(output: &Output) {
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

#[test]
fn parallel_agents_edit_their_own_worktrees_and_apply_lands_one_and_refuses_the_conflict() {
    let project = project();
    let root = std::fs::canonicalize(project.path()).unwrap();
    // The stand-in CLI edits notes.txt where it runs, as its prompt says,
    // and tries to write the project itself too.
    let edit = format!(
        "case \"$*\" in *first*) printf 'one\\nfirst\\n' > notes.txt;; \
         *) printf 'one\\nsecond\\n' > notes.txt;; esac; \
         printf 'planted\\n' > '{}/notes.txt' 2>/dev/null; exit 0",
        root.display()
    );
    let cli = StandIn::new("claude", "claude", "text", None, &edit);
    let scratch = Scratch::new();
    let workspaces = scratch.dir().join("workspaces");
    let run = |args: &[&str]| -> Output {
        scratch
            .moat()
            .env("MOAT_WORKSPACE_DIR", &workspaces)
            .args(args)
            .output()
            .unwrap()
    };
    let mut args = vec![
        "parallel".to_owned(),
        "--task".into(),
        "a:claude-code=first".into(),
        "--task".into(),
        "b:claude-code=second".into(),
        "--workspace".into(),
        "worktree".into(),
        "--cwd".into(),
        root.to_string_lossy().into_owned(),
        "--trust".into(),
        "unrestricted".into(),
        "--extra".into(),
        cli.extra(),
        "--output".into(),
        "ndjson".into(),
    ];
    args.extend(cli.grant_flags());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&run(&args));

    // The project is untouched: neither run could write it.
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(git(&root, &["status", "--porcelain"]), "");

    let ids: Vec<String> = text(&run(&["ps", "-q", "--all"]).stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let mut by_edit = std::collections::HashMap::new();
    for id in &ids {
        let diff = run(&["diff", id]);
        ok(&diff);
        let diff = text(&diff.stdout);
        let which = if diff.contains("+first") {
            "first"
        } else {
            "second"
        };
        assert!(diff.contains(&format!("+{which}")), "{diff}");
        by_edit.insert(which, id.clone());
    }
    let shown = text(&run(&["show", &by_edit["first"]]).stdout);
    assert!(
        shown.contains("workspace") && shown.contains("branch moat/r_"),
        "{shown}"
    );
    let stat = text(&run(&["diff", &by_edit["first"], "--stat"]).stdout);
    assert!(
        stat.contains("notes.txt") && stat.contains("1 file changed"),
        "{stat}"
    );

    ok(&run(&["apply", &by_edit["first"]]));
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\nfirst\n"
    );
    let conflict = run(&["apply", &by_edit["second"]]);
    assert_eq!(
        conflict.status.code(),
        Some(2),
        "{}",
        text(&conflict.stdout)
    );
    let said = text(&conflict.stderr);
    assert!(
        said.contains("do not apply") && said.contains("nothing was changed"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\nfirst\n"
    );

    // Each run's worktree is a repository of its own, on a branch of its
    // own at the base; the project has none of them.
    assert_eq!(git(&root, &["branch", "--list", "moat/*"]), "");
    let head = git(&root, &["rev-parse", "HEAD~0"]);
    for id in &ids {
        let dir = workspaces.join(id);
        assert_eq!(
            git(&dir, &["branch", "--show-current"]),
            format!("moat/{id}\n")
        );
        assert_ne!(git(&dir, &["rev-parse", "HEAD"]), "");
        let _ = &head;
    }
    let listed = text(&run(&["workspace", "ls"]).stdout);
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(
        listed.contains("worktree") && listed.contains("completed"),
        "{listed}"
    );

    ok(&run(&["workspace", "rm", "--ended"]));
    assert_eq!(git(&root, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(&root, &["branch", "--list", "moat/*"]), "");
    assert_eq!(text(&run(&["workspace", "ls"]).stdout).lines().count(), 1);
}

#[test]
fn a_dirty_project_is_refused_in_one_line_and_a_copy_works_without_git() {
    let setup = Setup::new();
    let (root, workspaces) = (&setup.root, &setup.workspaces);
    let moat = || setup.moat();
    std::fs::write(root.join("notes.txt"), "one\nuncommitted\n").unwrap();
    let cwd = root.to_string_lossy().into_owned();
    let refused = moat()
        .args([
            "run",
            "echo",
            "hi",
            "--workspace",
            "worktree",
            "--cwd",
            &cwd,
        ])
        .args(["--trust", "controlled"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stdout));
    let said = text(&refused.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("uncommitted changes") && said.contains("--include-dirty"),
        "{said}"
    );
    assert!(!workspaces.exists() || std::fs::read_dir(workspaces).unwrap().count() == 0);

    // Not granted the project: no copy of it either.
    let plain = tempfile::tempdir().unwrap();
    let plain_dir = plain.path().to_string_lossy().into_owned();
    let ungranted = moat()
        .args([
            "run",
            "echo",
            "hi",
            "--workspace",
            "copy",
            "--cwd",
            &plain_dir,
        ])
        .output()
        .unwrap();
    assert_eq!(ungranted.status.code(), Some(2));
    assert!(
        text(&ungranted.stderr).contains("not granted"),
        "{}",
        text(&ungranted.stderr)
    );

    // A copy of a directory without git, granted: made, listed, removed.
    let copied = moat()
        .args([
            "run",
            "echo",
            "hi",
            "--workspace",
            "copy",
            "--cwd",
            &plain_dir,
        ])
        .args(["--trust", "controlled", "--output", "text"])
        .output()
        .unwrap();
    ok(&copied);
    let listed = text(&moat().args(["workspace", "ls"]).output().unwrap().stdout);
    assert!(listed.contains("copy"), "{listed}");
    let nothing = moat().args(["apply", "@last"]).output().unwrap();
    ok(&nothing);
    assert!(
        text(&nothing.stdout).contains("nothing changed"),
        "{}",
        text(&nothing.stdout)
    );
}

#[test]
fn a_component_in_a_workspace_cannot_write_the_project_and_a_killed_runs_workspace_is_found() {
    use moat_testkit::components::{COOPERATIVE, ESCAPE};
    let setup = Setup::new();
    let root = &setup.root;
    let moat = || setup.moat();
    let cwd = root.to_string_lossy().into_owned();
    let write = format!("write {cwd}/notes.txt");
    let tried = moat()
        .args([
            "run",
            ESCAPE,
            &write,
            "--workspace",
            "worktree",
            "--cwd",
            &cwd,
        ])
        .arg(format!("--allow-write={cwd}"))
        .args(["--output", "text"])
        .output()
        .unwrap();
    ok(&tried);
    assert!(
        text(&tried.stdout).contains("denied"),
        "{}",
        text(&tried.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\n"
    );

    // A moat killed mid-run leaves the workspace; the next one lists it
    // (its run failed: engine restart) and removes it.
    let mut running = moat()
        .args([
            "run",
            COOPERATIVE,
            "go",
            "--workspace",
            "worktree",
            "--cwd",
            &cwd,
        ])
        .arg(format!("--allow-write={cwd}"))
        .args(["--output", "ndjson"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(running.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("\"type\""), "the run is going: {first}");
    running.kill().unwrap();
    running.wait().unwrap();
    let listed = text(&moat().args(["workspace", "ls"]).output().unwrap().stdout);
    let row = listed
        .lines()
        .find(|l| l.contains("failed"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("worktree"), "{row}");
    ok(&moat()
        .args(["workspace", "rm", "--ended"])
        .output()
        .unwrap());
    assert_eq!(git(root, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(root, &["branch", "--list", "moat/*"]), "");
}

#[test]
fn a_workflow_task_downstream_sees_its_upstream_tasks_changes_and_workflow_apply_lands_them_all() {
    three_tasks_in_workspaces(false);
}

#[test]
fn the_same_workflow_on_a_cluster_seeds_each_task_from_the_changes_its_upstream_workers_sent_back()
{
    if !moat_testkit::nats::available() {
        return;
    }
    three_tasks_in_workspaces(true);
}

/// A workflow of three tasks in worktrees, C depending on A and B, run
/// here or (`on_cluster`) on a worker of a cluster of its own; then
/// `moat workflow apply` lands all three.
fn three_tasks_in_workspaces(on_cluster: bool) {
    let project = project();
    let root = std::fs::canonicalize(project.path()).unwrap();
    let edit = "case \"$*\" in *TASK-C*) ls > c.txt;; *TASK-A*) echo a > a.txt;; \
                *TASK-B*) echo b > b.txt;; esac; exit 0";
    let cli = StandIn::new("claude", "claude", "text", None, edit);
    let program = serde_json::from_str::<serde_json::Value>(&cli.extra()).unwrap()["program"]
        .as_str()
        .unwrap()
        .to_owned();
    let workflow = format!(
        "name = \"three\"\nworkspace = \"worktree\"\n\n\
         [[task]]\nid = \"a\"\nadapter = \"claude-code\"\nprompt = \"TASK-A\"\n\
         options = {{ extra = {{ program = \"{program}\" }} }}\n\n\
         [[task]]\nid = \"b\"\nadapter = \"claude-code\"\nprompt = \"TASK-B\"\n\
         options = {{ extra = {{ program = \"{program}\" }} }}\n\n\
         [[task]]\nid = \"c\"\nadapter = \"claude-code\"\nprompt = \"TASK-C\"\ndepends_on = [\"a\", \"b\"]\n\
         options = {{ extra = {{ program = \"{program}\" }} }}\n"
    );
    std::fs::write(root.join("workflow.toml"), workflow).unwrap();
    std::fs::write(root.join(".gitignore"), ".moat/\n").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "--quiet", "-m", "the workflow"]);

    // A cluster of its own, whose worker may run the stand-in.
    let cluster = on_cluster.then(|| StandInCluster::start(&cli));
    let scratch = Scratch::new();
    let workspaces = scratch.dir().join("workspaces");
    let moat = || {
        let mut command = scratch.moat();
        command
            .env("MOAT_WORKSPACE_DIR", &workspaces)
            .current_dir(&root);
        if let Some(cluster) = &cluster {
            command.args(["--nats", &cluster.url]);
        }
        command
    };
    let ran = moat()
        .args(["workflow", "run", "workflow.toml", "--output", "ndjson"])
        .args(["--trust", "unrestricted"])
        .args(cli.grant_flags())
        .arg(format!("--allow-write={}", root.display()))
        .output()
        .unwrap();
    ok(&ran);
    // The project is as it was; each task's work is in its workspace.
    assert!(!root.join("a.txt").exists() && !root.join("c.txt").exists());

    ok(&moat()
        .args(["workflow", "apply", "workflow.toml"])
        .output()
        .unwrap());
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b\n");
    // C started from A's and B's results: it saw both files.
    let seen = std::fs::read_to_string(root.join("c.txt")).unwrap();
    assert!(seen.contains("a.txt") && seen.contains("b.txt"), "{seen}");
    // Applied already: the second time nothing applies, nothing moves.
    let again = moat()
        .args(["workflow", "apply", "workflow.toml"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stdout));
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    if let Some(cluster) = &cluster {
        // The tasks ran on the worker, which kept none of their
        // workspaces.
        let runs = text(&moat().args(["ps", "-q", "--all"]).output().unwrap().stdout);
        assert_eq!(runs.lines().count(), 3, "{runs}");
        assert_eq!(
            std::fs::read_dir(cluster.workspaces.path())
                .unwrap()
                .count(),
            0
        );
    }
}

#[test]
fn a_full_disk_while_copying_is_one_clear_line_and_leaves_nothing_half_made() {
    // A 1 MiB filesystem of the test's own (a mount namespace: root only).
    let can_mount = Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !can_mount {
        eprintln!("skipped: no mount namespaces here (unshare -m needs root)");
        return;
    }
    let project = tempfile::tempdir().unwrap();
    for n in 0..8 {
        std::fs::write(
            project.path().join(format!("big{n}.bin")),
            vec![7u8; 512 * 1024],
        )
        .unwrap();
    }
    let scratch = Scratch::new();
    let small = scratch.dir().join("small");
    std::fs::create_dir(&small).unwrap();
    let workspaces = small.join("workspaces");
    let command = super::common::moat();
    // What the failed copy left, listed before the namespace (and its
    // tmpfs) goes.
    let left = scratch.dir().join("left.txt");
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs '{small}' || exit 99; \"$@\"; status=$?; \
         ls -A '{workspaces}' > '{left}' 2>&1; exit $status",
        small = small.display(),
        workspaces = workspaces.display(),
        left = left.display(),
    );
    let output = Command::new("unshare")
        .args(["-m", "sh", "-c", &script, "sh"])
        .arg(command.get_program())
        .args([
            "run",
            "echo",
            "hi",
            "--workspace",
            "copy",
            "--trust",
            "controlled",
        ])
        .arg("--cwd")
        .arg(project.path())
        .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("MOAT_STORE", &scratch.store)
        .env("MOAT_WORKSPACE_DIR", &workspaces)
        .arg("--output")
        .arg("text")
        .output()
        .unwrap();
    let said = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("cannot copy") && said.contains("No space left"),
        "{said}"
    );
    // Nothing half-made: no copy, no snapshot, no record in the workspace
    // directory; and no run recorded.
    assert_eq!(std::fs::read_to_string(&left).unwrap(), "", "left behind");
    let listed = text(&scratch.run(&["ps", "--all", "-q"]).stdout);
    assert_eq!(listed, "", "no run was recorded: {listed}");
}

/// A cluster of a test's own: a NATS server and one worker on it that may
/// run the stand-in CLI and makes its workspaces in a directory of its
/// own.
struct StandInCluster {
    _server: moat_testkit::nats::NatsServer,
    url: String,
    /// Where the worker makes workspaces.
    workspaces: tempfile::TempDir,
    _worker: crate::cluster::Worker,
}

impl StandInCluster {
    fn start(cli: &StandIn) -> Self {
        let server = moat_testkit::nats::server(&[]);
        let url = server.url();
        let workspaces = tempfile::tempdir().unwrap();
        let mut ceiling = vec![
            "--workspace-dir".to_owned(),
            workspaces.path().to_string_lossy().into_owned(),
            "--trust".into(),
            "unrestricted".into(),
        ];
        ceiling.extend(cli.grant_flags());
        let ceiling: Vec<&str> = ceiling.iter().map(String::as_str).collect();
        let worker = crate::cluster::Worker::start(&url, &ceiling);
        Self {
            _server: server,
            url,
            workspaces,
            _worker: worker,
        }
    }
}

#[test]
fn a_run_on_a_cluster_works_in_a_workspace_its_worker_makes_and_its_changes_come_back_and_apply() {
    use moat_testkit::nats;
    if !nats::available() {
        return;
    }
    let setup = Setup::new();
    let root = &setup.root;
    let cwd = root.to_string_lossy().into_owned();
    // The stand-in CLI edits notes.txt where it is started, and tries the
    // project by its absolute path (on this machine, the same as the
    // worker's here: it must stay out of reach).
    let edit = format!(
        "printf 'one\\nremote\\n' > notes.txt; printf 'planted\\n' > '{cwd}/notes.txt' 2>/dev/null; \
         pwd > where.txt; exit 0"
    );
    let cli = StandIn::new("claude", "claude", "text", None, &edit);
    let cluster = StandInCluster::start(&cli);
    let url = &cluster.url;
    let worker_root = cluster.workspaces.path().to_string_lossy().into_owned();
    let on_cluster = |args: &[&str]| -> Output {
        setup
            .moat()
            .args(args)
            .args(["--nats", url])
            .output()
            .unwrap()
    };

    let mut args = vec![
        "run".to_owned(),
        "claude-code".into(),
        "edit the notes".into(),
        "--workspace".into(),
        "worktree".into(),
        "--cwd".into(),
        cwd.clone(),
        format!("--allow-write={cwd}"),
        "--trust".into(),
        "unrestricted".into(),
        "--extra".into(),
        cli.extra(),
        "--output".into(),
        "ndjson".into(),
    ];
    args.extend(cli.grant_flags());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = on_cluster(&args);
    ok(&ran);
    // The project is untouched: the run worked on the worker's copy.
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    // The worker kept nothing once the changes were sent back.
    let left: Vec<_> = std::fs::read_dir(cluster.workspaces.path())
        .unwrap()
        .collect();
    assert!(left.is_empty(), "the worker's workspaces: {left:?}");

    let id = text(&on_cluster(&["ps", "-q", "--all"]).stdout)
        .trim()
        .to_owned();
    assert!(id.starts_with("r_"), "{id}");
    let shown = text(&on_cluster(&["show", &id]).stdout);
    assert!(shown.contains("on its worker"), "{shown}");
    let diff = on_cluster(&["diff", &id]);
    ok(&diff);
    let diff = text(&diff.stdout);
    assert!(
        diff.contains("+remote") && diff.contains("where.txt"),
        "{diff}"
    );
    // It worked in its workspace on the worker, under the worker's root.
    assert!(diff.contains(&format!("+{worker_root}/{id}")), "{diff}");
    let stat = text(&on_cluster(&["diff", &id, "--stat"]).stdout);
    assert!(stat.contains("2 files changed"), "{stat}");
    // Without the cluster, its changes cannot be found: one line says so.
    let here = setup.moat().args(["diff", &id]).output().unwrap();
    assert_eq!(here.status.code(), Some(2));

    ok(&on_cluster(&["apply", &id]));
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\nremote\n"
    );
    // Applied again: its changes are there already, and it says so.
    let again = on_cluster(&["apply", &id]);
    ok(&again);
    assert!(
        text(&again.stdout).contains("are already in"),
        "{}",
        text(&again.stdout)
    );

    // Removed: the local snapshot and the changes kept by the cluster.
    ok(&on_cluster(&["workspace", "rm", &id]));
    assert_eq!(std::fs::read_dir(&setup.workspaces).unwrap().count(), 0);
    assert!(!git(root, &["branch"]).contains("moat/"));
    let gone = on_cluster(&["diff", &id]);
    assert_eq!(gone.status.code(), Some(2), "{}", text(&gone.stderr));
}

#[test]
fn an_agents_git_init_is_reviewed_and_applied_as_files_and_review_says_what_it_finds() {
    let setup = Setup::new();
    let root = setup.root.display().to_string();
    // The agent makes a project of its own (as `cargo new` does: a
    // repository, no commit) inside its worktree. (Contained, git may not
    // read the user's configuration: it is told to read none.)
    let agent = "mkdir -p generated && cd generated && \
                 GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git init --quiet && \
                 printf 'fn main() {}\\n' > main.rs; exit 0";
    let cli = StandIn::new("claude", "claude", "text", None, agent);
    let run = |prompt: &str, cli: &StandIn| {
        setup
            .moat()
            .args(["run", "claude-code", prompt, "--trust", "unrestricted"])
            .args([
                "--workspace",
                "worktree",
                "--allow-write",
                &root,
                "--cwd",
                &root,
            ])
            .args(cli.grant_flags())
            .args(["--extra", &cli.extra()])
            .args(["--output", "json"])
            .output()
            .unwrap()
    };
    let output = run("make a project", &cli);
    ok(&output);
    let id: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = id["runId"].as_str().unwrap().to_owned();
    let diff = setup.moat().args(["diff", &id]).output().unwrap();
    ok(&diff);
    assert!(
        text(&diff.stdout).contains("+++ b/generated/main.rs"),
        "{}",
        text(&diff.stdout)
    );
    let applied = setup.moat().args(["apply", &id]).output().unwrap();
    ok(&applied);
    assert!(setup.root.join("generated/main.rs").is_file());
    assert!(
        !setup.root.join("generated/.git").exists(),
        "files, not a repository"
    );
    // Applied twice: said so, and nothing fails.
    let again = setup.moat().args(["apply", &id]).output().unwrap();
    ok(&again);
    assert!(
        text(&again.stdout).contains("are already in")
            && text(&again.stdout).contains("nothing was changed"),
        "{}",
        text(&again.stdout)
    );
    // A run that changed nothing: its diff says so (on stderr; stdout, a
    // patch, stays empty).
    let idle = StandIn::new("claude", "claude", "text", None, "exit 0");
    let output = run("look only", &idle);
    ok(&output);
    let idle_id: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let idle_id = idle_id["runId"].as_str().unwrap();
    let diff = setup.moat().args(["diff", idle_id]).output().unwrap();
    ok(&diff);
    assert!(diff.stdout.is_empty());
    assert!(
        text(&diff.stderr).contains(&format!("run {idle_id} changed nothing in its workspace")),
        "{}",
        text(&diff.stderr)
    );
    // The listing's columns hold their widest cell (a branch named after
    // the run's id is wider than the old fixed column).
    let listed = setup.moat().args(["workspace", "ls"]).output().unwrap();
    ok(&listed);
    let listed = text(&listed.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    let dir_column = |line: &str| line.find(&setup.workspaces.display().to_string());
    let header_dir = lines[0].find("DIR").unwrap();
    for line in &lines[1..] {
        assert_eq!(dir_column(line), Some(header_dir), "{listed}");
    }
}

/// A contained agent CLI commits in its worktree as anyone would (add,
/// commit, branch, log): the commits are the run's own, the project's
/// repository is unchanged (no object, branch or file) until
/// `moat apply --commits` lands them, author and message as written.
#[test]
fn a_run_commits_in_its_worktree_and_apply_commits_lands_them() {
    commits_land("worktree", None);
}

#[test]
fn a_run_commits_in_its_copy_of_a_repository_and_apply_commits_lands_them() {
    commits_land("copy", None);
}

/// The same, as an unprivileged user (`setpriv`, when the tests run as
/// root): its project, store and workspaces its own.
#[test]
fn a_run_commits_in_its_worktree_as_an_unprivileged_user_too() {
    if let Some(setting) = crate::own_network::settings().into_iter().nth(1) {
        commits_land("worktree", Some(&setting));
    }
}

/// A run in a workspace of `mode` commits (and branches, and leaves a file
/// uncommitted); the project is unchanged until `moat apply --commits`
/// lands the commit, with its author and message, and only it. With
/// `setting`, every `moat` runs as its user.
fn commits_land(mode: &str, setting: Option<&crate::own_network::Setting>) {
    let setup = Setup::new();
    let root = &setup.root;
    let objects_before = git(root, &["count-objects"]);
    let head_before = git(root, &["rev-parse", "HEAD"]);
    // The stand-in CLI works where it is started: the worktree.
    let commit = "export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.com \
         GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.com; \
         printf 'one\\ntwo\\n' > notes.txt && git commit -q -am 'Add two' && \
         git branch scratch && git stash list >/dev/null && \
         printf 'later\\n' > later.txt; exit 0";
    let cli = StandIn::new("claude", "claude", "text", None, commit);
    let moat = || match setting {
        None => setup.moat(),
        Some(setting) => {
            let mut command = crate::egress::moat_through(&setting.wrapper());
            command.env("MOAT_WORKSPACE_DIR", setting.dir().join("workspaces"));
            command
        }
    };
    if let Some(setting) = setting {
        setting.own(root);
        setting.own(&cli.root());
    }
    let ran = run_stand_in(moat(), &cli, "commit", mode, root, &[]);

    // The project: as it was.
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(root, &["count-objects"]), objects_before);
    assert_eq!(git(root, &["branch", "--list", "moat/*"]), "");
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\n"
    );

    // The diff: its commit and what it did not commit.
    let diff = moat().args(["diff", "@last"]).output().unwrap();
    ok(&diff);
    let diff = text(&diff.stdout);
    assert!(
        diff.contains("+two") && diff.contains("later.txt"),
        "{diff}\n{}\n{}",
        text(&ran.stdout),
        text(&ran.stderr)
    );

    let landed = moat()
        .args(["apply", "@last", "--commits"])
        .output()
        .unwrap();
    ok(&landed);
    assert!(
        text(&landed.stdout).contains("fast-forwarded to its 1 commit"),
        "{}",
        text(&landed.stdout)
    );
    assert_eq!(
        git(root, &["log", "--format=%an <%ae>|%s", "-1"]),
        "Agent <agent@example.com>|Add two\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(
        !root.join("later.txt").exists(),
        "uncommitted changes stay in the workspace"
    );
}

/// A run plants, in its workspace, everything git might run on its own:
/// a `.git` directory of its own with `core.fsmonitor`, a hook and
/// drivers, a nested repository with the same, and a `.gitattributes`
/// naming those drivers. moat's own git — `moat diff`, `moat apply`,
/// `moat workspace rm` — runs none of it, in a worktree and in a copy; a
/// plain `git status` in the same workspace does run it (the check can
/// fail).
#[test]
fn moats_git_runs_nothing_a_run_planted_in_its_workspace() {
    for mode in ["worktree", "copy"] {
        let setup = Setup::new();
        let root = &setup.root;
        let marks = tempfile::tempdir().unwrap();
        let mark = |what: &str| marks.path().join(what);
        let cli = StandIn::new(
            "claude",
            "claude",
            "text",
            None,
            &planting_git(marks.path()),
        );
        // Let change what runs code later (the project's, so its
        // workspace's): moat's own git is what is tested here.
        let allow = format!("--allow-write-protected={}", root.display());
        run_stand_in(setup.moat(), &cli, "plant", mode, root, &[&allow]);
        // What the run did ran inside it (its `git init` may have touched
        // nothing); from here on nothing may.
        let before: Vec<_> = std::fs::read_dir(marks.path()).unwrap().flatten().collect();
        assert!(
            before.is_empty(),
            "{mode}: marks before moat's git: {before:?}"
        );

        let diff = setup.moat().args(["diff", "@last"]).output().unwrap();
        ok(&diff);
        let shown = text(&diff.stdout);
        assert!(
            shown.contains("+two") && shown.contains(".gitattributes"),
            "{shown}"
        );
        let stat = setup
            .moat()
            .args(["diff", "@last", "--stat"])
            .output()
            .unwrap();
        ok(&stat);
        // Apply refuses nothing here; the project gets the files as text.
        let _ = setup.moat().args(["apply", "@last"]).output().unwrap();
        let ran_so_far: Vec<_> = std::fs::read_dir(marks.path()).unwrap().flatten().collect();
        assert!(
            ran_so_far.is_empty(),
            "{mode}: moat's git ran it: {ran_so_far:?}"
        );
        // The check can fail: the planted repository, used by a plain
        // `git status` in the workspace, runs its fsmonitor.
        let workspace = planted_in(&setup.workspaces).expect("the workspace");
        git(&workspace, &["status", "--short"]);
        assert!(
            mark("top-fsmonitor").exists(),
            "{mode}: a plain git status in {} runs the planted fsmonitor",
            workspace.display()
        );
        std::fs::remove_file(mark("top-fsmonitor")).unwrap();
        let removed = setup
            .moat()
            .args(["workspace", "rm", "--ended"])
            .output()
            .unwrap();
        ok(&removed);
        let after: Vec<_> = std::fs::read_dir(marks.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            after.is_empty(),
            "{mode}: moat's git ran what the run planted: {after:?}"
        );
    }
}

/// What the run plants in the tests of moat's own git: a repository whose
/// config runs `touch MARKS/…` every way git could (fsmonitor, hooks, a
/// filter, a diff driver, textconv) at its top and nested, a
/// `.gitattributes` naming the drivers, and a change to `notes.txt`.
fn planting_git(marks: &Path) -> String {
    let plant = |dir: &str, name: &str| {
        let touch = format!("touch {}", marks.join(name).display());
        let set = |key: &str, value: String| format!("git -C {dir} config {key} '{value}' && ");
        format!(
            "rm -rf {dir}/.git; mkdir -p {dir} && git init -q {dir} && {}{}{}{}{}{}\
             for h in pre-commit post-checkout post-index-change; do \
             printf '#!/bin/sh\\n{touch}-hook\\n' > {dir}/.git/hooks/$h; chmod +x {dir}/.git/hooks/$h; done; ",
            set("core.fsmonitor", format!("{touch}-fsmonitor; false")),
            set("core.hooksPath", ".git/hooks".into()),
            set("filter.evil.clean", format!("{touch}-clean; cat")),
            set("filter.evil.smudge", format!("{touch}-smudge; cat")),
            set("diff.evil.command", format!("{touch}-diff; true")),
            set("diff.evil.textconv", format!("{touch}-textconv; cat")),
        )
    };
    format!(
        "{}{}printf '* filter=evil diff=evil\\n' > .gitattributes; printf 'two\\n' >> notes.txt; \
         printf 'x\\n' > nested/file.txt; exit 0",
        plant(".", "top"),
        plant("nested", "nested"),
    )
}

/// On a cluster, the worker's git — making the workspace from the
/// project's bundle, and the diff it sends back — and the submitter's
/// (`moat diff`, `apply`) run nothing the run planted in its workspace on
/// the worker: a nested repository with fsmonitor, hooks and drivers, and
/// a `.gitattributes` naming them (the workspace's own `.git`, protected,
/// stays the worker's).
#[test]
fn moats_git_on_a_worker_runs_nothing_a_run_planted_in_its_workspace() {
    use moat_testkit::nats;
    if !nats::available() {
        return;
    }
    let setup = Setup::new();
    let root = &setup.root;
    let cwd = root.to_string_lossy().into_owned();
    let marks = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        marks.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let cli = StandIn::new(
        "claude",
        "claude",
        "text",
        None,
        &planting_git(marks.path()),
    );
    let cluster = StandInCluster::start(&cli);
    let url = &cluster.url;
    let mut run = setup.moat();
    run.args([
        "run",
        "claude-code",
        "plant",
        "--workspace",
        "worktree",
        "--nats",
        url,
    ])
    .args([
        "--cwd",
        &cwd,
        &format!("--allow-write={cwd}"),
        "--trust",
        "unrestricted",
    ])
    .args(["--extra", &cli.extra(), "--output", "ndjson"])
    .args(cli.grant_flags());
    ok(&run.output().unwrap());
    let diff = setup
        .moat()
        .args(["diff", "@last", "--nats", url])
        .output()
        .unwrap();
    ok(&diff);
    assert!(
        text(&diff.stdout).contains("+two"),
        "{}",
        text(&diff.stdout)
    );
    let _ = setup
        .moat()
        .args(["apply", "@last", "--nats", url])
        .output()
        .unwrap();
    let ran: Vec<_> = std::fs::read_dir(marks.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        ran.is_empty(),
        "moat's git ran what the run planted: {ran:?}"
    );
}

/// The directory under `root` (two levels at most) where a run planted a
/// `.gitattributes`: its workspace.
fn planted_in(root: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut dirs = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        if dir.join(".gitattributes").is_file() {
            return Some(dir);
        }
        if depth < 2 {
            for entry in std::fs::read_dir(&dir).ok()?.flatten() {
                if entry.path().is_dir() {
                    dirs.push((entry.path(), depth + 1));
                }
            }
        }
    }
    None
}

/// A link the run made that points outside the project is listed apart
/// by `moat diff` and not landed by `moat apply` (nothing is), until the
/// user passes `--include-protected`; a link inside the project is not
/// held back.
#[test]
fn a_link_out_of_the_project_lands_only_with_include_protected() {
    let setup = Setup::new();
    let root = &setup.root;
    let cli = StandIn::new(
        "claude",
        "claude",
        "text",
        None,
        "ln -s /etc out; ln -s notes.txt inside; printf 'one\\ntwo\\n' > notes.txt; exit 0",
    );
    run_stand_in(setup.moat(), &cli, "link", "worktree", root, &[]);

    let diff = setup.moat().args(["diff", "@last"]).output().unwrap();
    ok(&diff);
    let listed = text(&diff.stderr);
    assert!(
        listed.contains("not landed by moat apply without --include-protected: out (a link to /etc, outside the project)")
            && !listed.contains("inside"),
        "{listed}"
    );

    let refused = setup.moat().args(["apply", "@last"]).output().unwrap();
    assert!(!refused.status.success());
    let said = text(&refused.stderr);
    assert!(
        said.contains("out (a link to /etc, outside the project)")
            && said.contains("--include-protected"),
        "{said}"
    );
    assert!(std::fs::symlink_metadata(root.join("out")).is_err());
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "one\n"
    );

    let landed = setup
        .moat()
        .args(["apply", "@last", "--include-protected"])
        .output()
        .unwrap();
    ok(&landed);
    assert_eq!(
        std::fs::read_link(root.join("out")).unwrap(),
        std::path::Path::new("/etc")
    );
    assert_eq!(
        std::fs::read_link(root.join("inside")).unwrap(),
        std::path::Path::new("notes.txt")
    );
}

#[test]
fn a_file_that_runs_code_later_lands_only_if_the_run_was_let_change_it_and_the_user_includes_it() {
    let setup = Setup::new();
    let root = &setup.root;
    let cli = StandIn::new(
        "claude",
        "claude",
        "text",
        None,
        "echo 'touch planted' > .envrc; mkdir -p .vscode; echo '{}' > .vscode/tasks.json; echo two >> notes.txt; exit 0",
    );
    // Not let: put back before the run's done, so its diff holds only
    // its work.
    let ran = run_stand_in(setup.moat(), &cli, "plant", "worktree", root, &[]);
    let said =
        moat_testkit::error_messages(&super::common::events(&ran), "PROTECTED_WRITE").join("\n");
    assert!(
        said.contains(".envrc") && said.contains(".vscode"),
        "{said}"
    );
    let diff = setup.moat().args(["diff", "@last"]).output().unwrap();
    ok(&diff);
    let (patch, listed) = (text(&diff.stdout), text(&diff.stderr));
    assert!(
        patch.contains("notes.txt") && !patch.contains(".envrc"),
        "{patch}"
    );
    assert!(!listed.contains("--include-protected"), "{listed}");

    // Let change `.envrc` (as the project's path): its workspace's is
    // the run's, listed apart and landed only when included.
    let allow = format!("--allow-write-protected={}/.envrc", root.display());
    run_stand_in(setup.moat(), &cli, "plant", "worktree", root, &[&allow]);
    let diff = setup.moat().args(["diff", "@last"]).output().unwrap();
    ok(&diff);
    let listed = text(&diff.stderr);
    assert!(
        listed.contains(".envrc (run by direnv") && !listed.contains(".vscode"),
        "{listed}"
    );
    let refused = setup.moat().args(["apply", "@last"]).output().unwrap();
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains(".envrc (run by direnv"));
    assert!(!root.join(".envrc").exists());
    ok(&setup
        .moat()
        .args(["apply", "@last", "--include-protected"])
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read_to_string(root.join(".envrc")).unwrap(),
        "touch planted\n"
    );
    assert!(!root.join(".vscode").exists());
}

/// `moat run claude-code PROMPT` with the stand-in `cli`, in a workspace
/// of `mode` of the project at `root` (readable), with `more` flags,
/// through `moat`; it must succeed.
fn run_stand_in(
    mut moat: Command,
    cli: &StandIn,
    prompt: &str,
    mode: &str,
    root: &Path,
    more: &[&str],
) -> Output {
    let cwd = root.to_string_lossy().into_owned();
    let ran = moat
        .args(["run", "claude-code", prompt, "--workspace", mode])
        .args(["--cwd", &cwd, "--allow-read", &cwd])
        .args(more)
        .args(["--extra", &cli.extra(), "--output", "ndjson"])
        .args(cli.grant_flags())
        .output()
        .unwrap();
    ok(&ran);
    ran
}
