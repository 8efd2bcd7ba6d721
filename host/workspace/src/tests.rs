//! Real git repositories in temporary directories.

use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A repository with one commit: `notes.txt` = "one\n".
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "--quiet", "-b", "main"]);
    std::fs::write(dir.path().join("notes.txt"), "one\n").unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "--quiet", "-m", "first"]);
    dir
}

fn request(project: &Path, root: &Path, mode: Mode) -> Request {
    Request {
        mode,
        project: project.to_path_buf(),
        base: None,
        include_dirty: false,
        root: root.to_path_buf(),
        seeds: Vec::new(),
    }
}

#[test]
fn two_worktrees_change_one_file_the_first_applies_and_the_second_conflicts_changing_nothing() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let first = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap();
    let second = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_2",
        &[],
    )
    .unwrap();
    std::fs::write(first.dir.join("notes.txt"), "one\nfirst\n").unwrap();
    std::fs::write(first.dir.join("new.txt"), "made by the first\n").unwrap();
    std::fs::write(second.dir.join("notes.txt"), "one\nsecond\n").unwrap();

    let diff = String::from_utf8(first.diff(false, false).unwrap()).unwrap();
    assert!(
        diff.contains("+first") && diff.contains("new.txt"),
        "{diff}"
    );
    let stat = String::from_utf8(first.diff(true, false).unwrap()).unwrap();
    assert!(stat.contains("2 files changed"), "{stat}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\n"
    );

    assert!(first.apply(false).unwrap() > 0);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\nfirst\n"
    );
    assert!(project.path().join("new.txt").is_file());
    let conflict = second.apply(false).unwrap_err();
    assert!(
        matches!(conflict, WorkspaceError::Conflict { .. }),
        "{conflict}"
    );
    assert!(
        conflict.to_string().contains("nothing was changed"),
        "{conflict}"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\nfirst\n"
    );

    // moat made no commit: the runs' branches, in their own
    // repositories, are at the base; the project has none of them.
    let head = git(project.path(), &["rev-parse", "HEAD"]);
    assert_eq!(git(&first.dir, &["rev-parse", "moat/r_1"]), head);
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
    for workspace in [&first, &second] {
        workspace.remove(root.path()).unwrap();
    }
    assert_eq!(
        git(project.path(), &["worktree", "list"]).lines().count(),
        1
    );
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
    assert!(Workspace::list(root.path()).unwrap().is_empty());
}

#[test]
fn a_dirty_project_is_refused_or_its_changes_carried_over() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("notes.txt"), "one\nuncommitted\n").unwrap();
    std::fs::write(project.path().join("draft.txt"), "untracked\n").unwrap();
    let refused = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap_err();
    assert!(refused.to_string().contains("--include-dirty"), "{refused}");
    assert!(
        Workspace::list(root.path()).unwrap().is_empty(),
        "nothing left half-made"
    );
    assert!(!root.path().join("r_1").exists());
    assert!(!git(project.path(), &["branch"]).contains("moat/"));

    let mut carried = request(project.path(), root.path(), Mode::Worktree);
    carried.include_dirty = true;
    let workspace = create(&carried, "r_2", &[]).unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.dir.join("notes.txt")).unwrap(),
        "one\nuncommitted\n"
    );
    assert!(workspace.dir.join("draft.txt").is_file());
}

#[test]
fn a_copy_of_a_directory_without_git_is_diffed_and_applied_too() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "a\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let workspace = create(
        &request(project.path(), root.path(), Mode::Copy),
        "r_1",
        &[],
    )
    .unwrap();
    assert!(matches!(
        workspace.copied.as_deref(),
        Some("reflink" | "full")
    ));
    assert!(
        !workspace.dir.join(".git").exists(),
        "the snapshot is outside the copy"
    );
    std::fs::write(workspace.dir.join("a.txt"), "a\nb\n").unwrap();
    let diff = String::from_utf8(workspace.diff(false, false).unwrap()).unwrap();
    assert!(diff.contains("+b"), "{diff}");
    workspace.apply(false).unwrap();
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "a\nb\n"
    );
    assert_eq!(Workspace::find(root.path(), "r_1").unwrap(), workspace);
    workspace.remove(root.path()).unwrap();
    assert!(!workspace.dir.exists() && !workspace.git_dir.exists());
}

#[test]
fn a_run_that_deletes_the_worktrees_git_file_cannot_harm_the_repository() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let workspace = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap();
    std::fs::remove_dir_all(workspace.dir.join(".git")).unwrap();
    std::fs::write(workspace.dir.join("notes.txt"), "one\nstill diffed\n").unwrap();
    let diff = String::from_utf8(workspace.diff(false, false).unwrap()).unwrap();
    assert!(diff.contains("+still diffed"), "{diff}");
    assert_eq!(git(project.path(), &["status", "--porcelain"]), "");
    workspace.remove(root.path()).unwrap();
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
}

#[test]
fn a_workspace_seeded_with_upstream_runs_diffs_its_own_changes_and_all_apply_together_or_not_at_all()
 {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let a = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_a",
        &[],
    )
    .unwrap();
    let b = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_b",
        &[],
    )
    .unwrap();
    std::fs::write(a.dir.join("a.txt"), "from a\n").unwrap();
    std::fs::write(b.dir.join("b.txt"), "from b\n").unwrap();
    let downstream = request(project.path(), root.path(), Mode::Worktree);
    let seeds = Seed::here(root.path(), &["r_a".into(), "r_b".into(), "r_none".into()]).unwrap();
    assert_eq!(seeds.len(), 2, "a run without a workspace is passed over");
    let c = create(&downstream, "r_c", &seeds).unwrap();
    // C starts from A's and B's results; its diff is its own change.
    assert!(c.dir.join("a.txt").is_file() && c.dir.join("b.txt").is_file());
    std::fs::write(c.dir.join("c.txt"), "from c\n").unwrap();
    let own = String::from_utf8(c.diff(false, false).unwrap()).unwrap();
    assert!(own.contains("c.txt") && !own.contains("a.txt"), "{own}");

    // All three land, in order.
    let changes = |of: &[&Workspace]| -> Vec<(Workspace, Vec<u8>)> {
        of.iter()
            .map(|w| (Workspace::clone(w), w.diff(false, false).unwrap()))
            .collect()
    };
    assert_eq!(apply_all(&changes(&[&a, &b, &c]), false).unwrap(), 3);
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(project.path().join(file).is_file(), "{file}");
    }
    // Again: A's change is in the project already, so nothing moves (C's,
    // applied first, is taken back) and the error says it is A's.
    std::fs::remove_file(project.path().join("c.txt")).unwrap();
    let error = apply_all(&changes(&[&c, &a]), false).unwrap_err();
    assert!(
        matches!(&error, WorkspaceError::AlreadyApplied { run, .. } if run == "r_a"),
        "{error}"
    );
    assert!(!project.path().join("c.txt").exists(), "taken back");
    // A change that is neither there nor applicable is a conflict.
    std::fs::write(project.path().join("a.txt"), "edited by hand\n").unwrap();
    let error = apply_all(&changes(&[&a]), false).unwrap_err();
    assert!(matches!(error, WorkspaceError::Conflict { .. }), "{error}");
}

#[test]
fn a_copy_of_a_directory_inside_a_repository_applies_to_that_directory() {
    let repository = repository();
    let sub = repository.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("s.txt"), "s\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let workspace = create(&request(&sub, root.path(), Mode::Copy), "r_1", &[]).unwrap();
    std::fs::write(workspace.dir.join("s.txt"), "s\nmore\n").unwrap();
    workspace.apply(false).unwrap();
    assert_eq!(
        std::fs::read_to_string(sub.join("s.txt")).unwrap(),
        "s\nmore\n"
    );
    assert!(
        !repository.path().join("s.txt").exists(),
        "not at the repository's top"
    );
}

#[test]
fn a_run_name_that_is_no_run_id_and_a_base_that_looks_like_an_option_are_refused() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    // A workflow's state names runs; a forged one must not reach outside
    // the root.
    for run in ["../elsewhere", "r_1/x", ""] {
        let found = Workspace::find(root.path(), run).unwrap_err();
        assert!(found.to_string().contains("is not a run id"), "{found}");
        let made = create(
            &request(project.path(), root.path(), Mode::Worktree),
            run,
            &[],
        )
        .unwrap_err();
        assert!(made.to_string().contains("is not a run id"), "{made}");
    }
    let mut optionish = request(project.path(), root.path(), Mode::Worktree);
    optionish.base = Some("--output=/tmp/x".into());
    let refused = create(&optionish, "r_1", &[]).unwrap_err();
    assert!(refused.to_string().contains("is not a commit"), "{refused}");
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
}

/// What a worker does with a packed project: unpacks it in a root of its
/// own, the run edits it, the diff goes back.
fn worked_on(bundle: &[u8], commit: &str, edit: impl FnOnce(&Path)) -> Vec<u8> {
    let worker = tempfile::tempdir().unwrap();
    let file = worker.path().join("project.bundle");
    std::fs::write(&file, bundle).unwrap();
    let workspace = unpack(&file, commit, &worker.path().join("ws"), "r_1").unwrap();
    edit(&workspace.dir);
    let changes = workspace.diff(false, false).unwrap();
    workspace.remove(&worker.path().join("ws")).unwrap();
    assert!(!workspace.dir.exists() && !workspace.git_dir.exists());
    changes
}

#[test]
fn a_packed_worktree_travels_without_history_and_its_changes_come_back_shown_and_applied() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    // Uncommitted changes: refused unless carried over, as for a worktree.
    std::fs::write(project.path().join("notes.txt"), "one\nuncommitted\n").unwrap();
    std::fs::write(project.path().join("new.txt"), "untracked\n").unwrap();
    let refused = pack(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    );
    assert!(matches!(refused, Err(WorkspaceError::Dirty { .. })));
    assert!(!root.path().join("r_1.git").exists(), "nothing left behind");
    let mut carried = request(project.path(), root.path(), Mode::Worktree);
    carried.include_dirty = true;
    let packed = pack(&carried, "r_1", &[]).unwrap();
    assert!(packed.workspace.on_cluster);
    assert_eq!(
        Workspace::find(root.path(), "r_1").unwrap(),
        packed.workspace
    );
    // Packing the same files again makes the same bundle.
    let again = pack(&carried, "r_2", &[]).unwrap();
    assert_eq!(again.bundle, packed.bundle);

    let changes = worked_on(&packed.bundle, &packed.workspace.base, |dir| {
        // The uncommitted state is the base; no history came along.
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "one\nuncommitted\n"
        );
        assert!(dir.join("new.txt").is_file() && !dir.join(".git").exists());
        std::fs::write(dir.join("notes.txt"), "one\nuncommitted\nremote\n").unwrap();
    });
    let workspace = &packed.workspace;
    // Its own work is the diff: not the uncommitted changes it started with.
    let shown = String::from_utf8(workspace.show(&changes, false, false).unwrap()).unwrap();
    assert!(
        shown.contains("+remote") && !shown.contains("+uncommitted"),
        "{shown}"
    );
    let stat = String::from_utf8(workspace.show(&changes, true, false).unwrap()).unwrap();
    assert!(stat.contains("1 file changed"), "{stat}");
    // Here the run's files are not: diff and apply say where they are.
    assert!(
        workspace
            .diff(false, false)
            .unwrap_err()
            .to_string()
            .contains("--nats")
    );

    // Changes that are not of this base are refused, changing nothing.
    let foreign = b"--- a/other.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-x\n+y\n";
    let error = workspace.apply_changes(foreign, false).unwrap_err();
    assert!(
        error.to_string().contains("do not apply to its base"),
        "{error}"
    );
    assert!(workspace.apply_changes(&changes, false).unwrap() > 0);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\nuncommitted\nremote\n"
    );
    // The project's repository gained no commit, branch or object store
    // entry; removing the workspace leaves only the project.
    assert_eq!(
        git(project.path(), &["rev-list", "--count", "HEAD"]).trim(),
        "1"
    );
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
    workspace.remove(root.path()).unwrap();
    again.workspace.remove(root.path()).unwrap();
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn a_packed_copy_carries_every_file_and_upstream_changes_and_a_bad_bundle_is_refused() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("plain.txt"), "plain\n").unwrap();
    std::fs::write(project.path().join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(project.path().join("kept.log"), "ignored, yet copied\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    let upstream = Seed {
        run: "r_up".into(),
        changes: b"diff --git a/up.txt b/up.txt\nnew file mode 100644\n--- /dev/null\n+++ b/up.txt\n@@ -0,0 +1 @@\n+from upstream\n".to_vec(),
    };
    let packed = pack(
        &request(project.path(), root.path(), Mode::Copy),
        "r_1",
        std::slice::from_ref(&upstream),
    )
    .unwrap();
    let changes = worked_on(&packed.bundle, &packed.workspace.base, |dir| {
        assert!(dir.join("kept.log").is_file() && dir.join("up.txt").is_file());
        std::fs::write(dir.join("plain.txt"), "changed\n").unwrap();
    });
    let shown = String::from_utf8(packed.workspace.show(&changes, false, false).unwrap()).unwrap();
    assert!(
        shown.contains("+changed") && !shown.contains("upstream"),
        "{shown}"
    );

    // On the worker: not a bundle, or no such commit — refused, nothing left.
    let worker = tempfile::tempdir().unwrap();
    let ws = worker.path().join("ws");
    let junk = worker.path().join("junk.bundle");
    std::fs::write(&junk, "not a bundle").unwrap();
    assert!(unpack(&junk, &packed.workspace.base, &ws, "r_2").is_err());
    let bundle = worker.path().join("p.bundle");
    std::fs::write(&bundle, &packed.bundle).unwrap();
    let missing = unpack(&bundle, &"0".repeat(40), &ws, "r_3").unwrap_err();
    assert!(missing.to_string().contains("no commit"), "{missing}");
    assert_eq!(
        std::fs::read_dir(&ws).unwrap().count(),
        0,
        "nothing half made"
    );
}

/// git's worktree commands read every worktree's files, and another
/// `git worktree add` may be half-way through writing its own: run at once
/// in one repository they fail ("failed to read …/commondir"). Runs started
/// together (parallel, a workflow's tasks, two moats) must each get theirs.
#[test]
fn worktrees_made_and_removed_at_once_in_one_repository_all_succeed() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let request = request(project.path(), root.path(), Mode::Worktree);
            let root = root.path();
            scope.spawn(move || {
                for n in 0..30 {
                    let run = format!("r_{thread}x{n}");
                    let workspace = create(&request, &run, &[])
                        .unwrap_or_else(|e| panic!("{run} made at once with others: {e}"));
                    workspace
                        .remove(root)
                        .unwrap_or_else(|e| panic!("{run} removed at once with others: {e}"));
                }
            });
        }
    });
    assert_eq!(
        git(project.path(), &["worktree", "list"]).lines().count(),
        1,
        "every worktree removed"
    );
}

/// What an agent's `git init` or `cargo new` leaves in a workspace: a
/// repository without a commit, one with a commit and an ignored file, and
/// one inside another.
fn plant_nested_repositories(dir: &Path) {
    let fresh = dir.join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    git(&fresh, &["init", "--quiet"]);
    std::fs::write(fresh.join("main.rs"), "fn main() {}\n").unwrap();
    let made = dir.join("tool");
    std::fs::create_dir_all(made.join("deep")).unwrap();
    git(&made, &["init", "--quiet"]);
    std::fs::write(made.join(".gitignore"), "/target\n").unwrap();
    std::fs::write(made.join("lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::create_dir(made.join("target")).unwrap();
    std::fs::write(made.join("target/built.bin"), "ignored\n").unwrap();
    git(&made, &["add", "."]);
    git(&made, &["commit", "--quiet", "-m", "tool"]);
    git(&made.join("deep"), &["init", "--quiet"]);
    std::fs::write(made.join("deep/inner.txt"), "inner\n").unwrap();
}

#[test]
fn repositories_an_agent_made_in_its_workspace_are_shown_and_applied_as_their_files() {
    for mode in [Mode::Worktree, Mode::Copy] {
        let project = repository();
        let root = tempfile::tempdir().unwrap();
        let workspace = create(&request(project.path(), root.path(), mode), "r_1", &[]).unwrap();
        plant_nested_repositories(&workspace.dir);
        let stat = String::from_utf8(workspace.diff(true, false).unwrap()).unwrap();
        for file in [
            "fresh/main.rs",
            "tool/.gitignore",
            "tool/lib.rs",
            "tool/deep/inner.txt",
        ] {
            assert!(stat.contains(file), "{mode:?}: {file} missing from {stat}");
        }
        assert!(!stat.contains("built.bin"), "{mode:?}: ignored: {stat}");
        assert!(!stat.contains(".git/"), "{mode:?}: {stat}");
        workspace.apply(false).unwrap();
        assert_eq!(
            std::fs::read_to_string(project.path().join("tool/deep/inner.txt")).unwrap(),
            "inner\n"
        );
        assert!(project.path().join("fresh/main.rs").is_file());
        // The files, not the repositories: nothing of their `.git` lands.
        assert!(!project.path().join("tool/.git").exists(), "{mode:?}");
        assert!(!project.path().join("fresh/.git").exists(), "{mode:?}");
        // Applying again changes nothing, and says why.
        let again = workspace.apply(false).unwrap_err();
        assert!(
            matches!(again, WorkspaceError::AlreadyApplied { .. }),
            "{mode:?}: {again}"
        );
    }
}

#[test]
fn a_nested_repositorys_configuration_never_runs_when_moat_diffs() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let workspace = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap();
    let nested = workspace.dir.join("planted");
    std::fs::create_dir(&nested).unwrap();
    git(&nested, &["init", "--quiet"]);
    std::fs::write(nested.join("a.txt"), "a\n").unwrap();
    // What a git command reading this repository's configuration runs.
    let marker = root.path().join("ran");
    git(
        &nested,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}; false", marker.display()),
        ],
    );
    let diff = String::from_utf8(workspace.diff(false, false).unwrap()).unwrap();
    assert!(diff.contains("planted/a.txt"), "{diff}");
    assert!(!marker.exists(), "moat's diff ran the planted command");
    // The same repository read by git itself runs it: the attack is real.
    let _ = Command::new("git")
        .current_dir(&nested)
        .args(["status", "--short"])
        .output()
        .unwrap();
    assert!(marker.exists(), "git status did not run core.fsmonitor");
}

/// `git` as an agent runs it in its worktree: found by its `.git`.
fn agent_git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.com")
        .env("GIT_COMMITTER_NAME", "Agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.com")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_run_commits_in_its_worktree_and_the_project_has_none_of_it_until_its_commits_land() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let base = git(project.path(), &["rev-parse", "HEAD"])
        .trim()
        .to_owned();
    let objects_before = git(project.path(), &["count-objects"]);
    let workspace = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap();
    // The agent works as anyone does: add, commit, branch, log, stash.
    assert_eq!(agent_git(&workspace.dir, &["status", "--porcelain"]), "");
    std::fs::write(workspace.dir.join("notes.txt"), "one\ntwo\n").unwrap();
    agent_git(&workspace.dir, &["commit", "--quiet", "-am", "Add two"]);
    std::fs::write(workspace.dir.join("new.txt"), "new\n").unwrap();
    agent_git(&workspace.dir, &["add", "new.txt"]);
    agent_git(&workspace.dir, &["commit", "--quiet", "-m", "Add new"]);
    agent_git(&workspace.dir, &["branch", "scratch"]);
    std::fs::write(workspace.dir.join("notes.txt"), "one\ntwo\nuncommitted\n").unwrap();
    assert!(agent_git(&workspace.dir, &["log", "--oneline"]).contains("Add new"));
    agent_git(&workspace.dir, &["stash", "--quiet"]);
    agent_git(&workspace.dir, &["stash", "pop", "--quiet"]);

    // The project: no object, branch or file of the run's.
    assert_eq!(git(project.path(), &["rev-parse", "HEAD"]).trim(), base);
    assert_eq!(git(project.path(), &["count-objects"]), objects_before);
    assert!(!git(project.path(), &["branch"]).contains("moat/"));
    assert!(!project.path().join("new.txt").exists());

    // The diff: committed and not.
    let diff = String::from_utf8(workspace.diff(false, false).unwrap()).unwrap();
    assert!(
        diff.contains("+two") && diff.contains("+uncommitted") && diff.contains("new.txt"),
        "{diff}"
    );

    // Its commits land as a fast-forward, author and message as written;
    // what it did not commit stays in the workspace.
    assert_eq!(
        workspace.apply_commits(false).unwrap(),
        Landed::FastForward { commits: 2 }
    );
    let log = git(project.path(), &["log", "--format=%an <%ae>|%s", "-2"]);
    assert_eq!(
        log,
        "Agent <agent@example.com>|Add new\nAgent <agent@example.com>|Add two\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(project.path().join("new.txt").is_file());
    workspace.remove(root.path()).unwrap();
    assert!(!workspace.dir.exists() && !workspace.git_dir.exists());
}

#[test]
fn commits_replay_on_a_branch_that_moved_and_a_conflict_lands_none() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let make = |run: &str| {
        create(
            &request(project.path(), root.path(), Mode::Worktree),
            run,
            &[],
        )
        .unwrap()
    };
    let (first, second) = (make("r_1"), make("r_2"));
    std::fs::write(first.dir.join("a.txt"), "a\n").unwrap();
    agent_git(&first.dir, &["add", "a.txt"]);
    agent_git(&first.dir, &["commit", "--quiet", "-m", "Add a"]);
    // The project moves on meanwhile.
    std::fs::write(project.path().join("notes.txt"), "one\nuser\n").unwrap();
    git(
        project.path(),
        &["commit", "--quiet", "-am", "User's change"],
    );
    assert_eq!(
        first.apply_commits(false).unwrap(),
        Landed::CherryPicked { commits: 1 }
    );
    let log = git(project.path(), &["log", "--format=%an|%s", "-2"]);
    assert_eq!(log, "Agent|Add a\nt|User's change\n");
    // Committed by the user (as their git config says), not by moat.
    let committer = git(project.path(), &["log", "--format=%cn", "-1"]);
    let user = Command::new("git")
        .current_dir(project.path())
        .args(["var", "GIT_COMMITTER_IDENT"])
        .output()
        .unwrap();
    let user = String::from_utf8_lossy(&user.stdout);
    assert!(user.starts_with(committer.trim()), "{committer} / {user}");
    assert_ne!(committer.trim(), "moat");

    // A commit that conflicts: nothing lands, the project as it was.
    std::fs::write(second.dir.join("notes.txt"), "one\nagent\n").unwrap();
    agent_git(&second.dir, &["commit", "--quiet", "-am", "Conflicting"]);
    let head = git(project.path(), &["rev-parse", "HEAD"]);
    let conflict = second.apply_commits(false).unwrap_err();
    assert!(
        matches!(conflict, WorkspaceError::Conflict { .. }),
        "{conflict}"
    );
    assert_eq!(git(project.path(), &["rev-parse", "HEAD"]), head);
    assert_eq!(git(project.path(), &["status", "--porcelain"]), "");
    // A run that made no commit lands nothing.
    let third = make("r_3");
    assert_eq!(third.apply_commits(false).unwrap(), Landed::Nothing);
    // A copy of the repository's top has the repository copied with it:
    // no commit made, nothing lands.
    let copy = create(
        &request(project.path(), root.path(), Mode::Copy),
        "r_4",
        &[],
    )
    .unwrap();
    assert_eq!(copy.apply_commits(false).unwrap(), Landed::Nothing);
    // A copy of a directory inside it has no repository of its own to
    // land commits from.
    let inner = project.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(inner.join("file.txt"), "x\n").unwrap();
    let copy = create(&request(&inner, root.path(), Mode::Copy), "r_5", &[]).unwrap();
    assert!(
        copy.apply_commits(false)
            .unwrap_err()
            .to_string()
            .contains("moat apply")
    );
}

/// The run may write its repository's config and hooks; moat never runs
/// git there, so what it plants does not run when moat diffs or lands its
/// commits. (The same config in a repository git does use runs: the
/// attack is real.)
#[test]
fn the_runs_repository_config_and_hooks_never_run_when_moat_diffs_or_lands_commits() {
    let project = repository();
    let root = tempfile::tempdir().unwrap();
    let workspace = create(
        &request(project.path(), root.path(), Mode::Worktree),
        "r_1",
        &[],
    )
    .unwrap();
    let marker = root.path().join("planted-ran");
    let planted = format!("touch {}; false", marker.display());
    std::fs::write(workspace.dir.join("notes.txt"), "one\ntwo\n").unwrap();
    agent_git(&workspace.dir, &["commit", "--quiet", "-am", "Two"]);
    agent_git(&workspace.dir, &["config", "core.fsmonitor", &planted]);
    agent_git(&workspace.dir, &["config", "diff.external", &planted]);
    let hook = workspace.dir.join(".git/hooks/post-merge");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, format!("#!/bin/sh\n{planted}\n")).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    workspace.diff(false, false).unwrap();
    workspace.diff(true, false).unwrap();
    assert_eq!(
        workspace.apply_commits(false).unwrap(),
        Landed::FastForward { commits: 1 }
    );
    assert!(!marker.exists(), "the run's config ran");
    // In the run's own repository, git runs it.
    let _ = Command::new("git")
        .current_dir(&workspace.dir)
        .args(["status"])
        .output()
        .unwrap();
    assert!(marker.exists(), "the planted fsmonitor is real");
}

#[test]
fn a_link_out_of_the_project_is_not_landed_unless_included() {
    for mode in [Mode::Worktree, Mode::Copy] {
        let project = repository();
        let root = tempfile::tempdir().unwrap();
        let workspace = create(&request(project.path(), root.path(), mode), "r_1", &[]).unwrap();
        std::os::unix::fs::symlink("/etc", workspace.dir.join("out")).unwrap();
        std::os::unix::fs::symlink("notes.txt", workspace.dir.join("inside")).unwrap();
        std::fs::write(workspace.dir.join("notes.txt"), "one\ntwo\n").unwrap();

        let refused = workspace.apply(false).unwrap_err();
        assert!(
            matches!(&refused, WorkspaceError::Protected { found, .. }
                if found.contains("out (a link to /etc, outside the project)")
                    && !found.contains("inside")),
            "{mode:?}: {refused}"
        );
        // Nothing was changed.
        assert!(std::fs::symlink_metadata(project.path().join("out")).is_err());
        assert_eq!(
            std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
            "one\n"
        );

        assert!(workspace.apply(true).unwrap() > 0, "{mode:?}");
        assert_eq!(
            std::fs::read_link(project.path().join("out")).unwrap(),
            Path::new("/etc")
        );
    }
}
