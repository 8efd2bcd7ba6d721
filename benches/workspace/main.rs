//! `cargo bench -p moat-benches --bench workspace`: what a run's workspace costs
//! (docs/performance.md, "Workspaces"), for a git repository of 10,000
//! files of 1 KiB, each beside what it is made of, in the same run:
//!
//! 1. a `worktree` workspace made and removed (moat_workspace: the
//!    worktree on its branch, the dirty check, the record) beside `git
//!    worktree add` and `git worktree remove` alone, median of 5;
//! 2. a `copy` workspace made and removed (the copy and its snapshot
//!    repository) beside `cp -r` alone, median of 5;
//! 3. the disk each takes (`du`, blocks actually used), beside the
//!    project's own files;
//! 4. a diff of one changed file in each.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs once on
//! 200 files and writes no summary.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{bench_dir, load_average};
use moat_workspace::{Mode, Request, Workspace};

struct Scale {
    files: usize,
    samples: usize,
}

const FULL: Scale = Scale {
    files: 10_000,
    samples: 5,
};
const SMOKE: Scale = Scale {
    files: 200,
    samples: 1,
};

fn main() {
    let full = common::full_run();
    let scale = if full { FULL } else { SMOKE };
    let load = load_average();
    let project = tempfile::tempdir().expect("a temporary directory");
    let root = tempfile::tempdir().expect("a temporary directory");
    repository(project.path(), scale.files);

    let mut run = 0;
    let mut fresh = || {
        run += 1;
        format!("r_bench{run}")
    };
    let request = |mode| Request {
        mode,
        project: project.path().to_path_buf(),
        base: None,
        include_dirty: false,
        root: root.path().to_path_buf(),
        seeds: Vec::new(),
    };
    let worktree = median(scale.samples, || {
        let id = fresh();
        let started = Instant::now();
        let workspace =
            moat_workspace::create(&request(Mode::Worktree), &id, &[]).expect("a worktree");
        workspace.remove(root.path()).expect("removed");
        started.elapsed().as_secs_f64()
    });
    let git_alone = median(scale.samples, || {
        let dir = root.path().join("plain");
        let started = Instant::now();
        git(
            project.path(),
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                "plain",
                &dir.to_string_lossy(),
            ],
        );
        git(
            project.path(),
            &["worktree", "remove", "--force", &dir.to_string_lossy()],
        );
        git(project.path(), &["branch", "--quiet", "-D", "plain"]);
        started.elapsed().as_secs_f64()
    });
    let copy = median(scale.samples, || {
        let id = fresh();
        let started = Instant::now();
        let workspace = moat_workspace::create(&request(Mode::Copy), &id, &[]).expect("a copy");
        workspace.remove(root.path()).expect("removed");
        started.elapsed().as_secs_f64()
    });
    let cp_alone = median(scale.samples, || {
        let dir = root.path().join("plain-copy");
        let started = Instant::now();
        let status = Command::new("cp")
            .arg("-r")
            .arg(project.path())
            .arg(&dir)
            .status()
            .expect("cp runs");
        assert!(status.success());
        std::fs::remove_dir_all(&dir).expect("removed");
        started.elapsed().as_secs_f64()
    });

    // Disk and a diff, on one of each kept.
    let kept_tree =
        moat_workspace::create(&request(Mode::Worktree), &fresh(), &[]).expect("a worktree");
    let kept_copy = moat_workspace::create(&request(Mode::Copy), &fresh(), &[]).expect("a copy");
    let project_kib = du_kib(project.path(), Some(".git"));
    let tree_kib = du_kib(&kept_tree.dir, None);
    let copy_kib = du_kib(&kept_copy.dir, None) + du_kib(&kept_copy.git_dir, None);
    let diff_tree = diff_seconds(&kept_tree);
    let diff_copy = diff_seconds(&kept_copy);

    let table = format!(
        "## Workspaces ({files} files of 1 KiB; load {load})\n\n\
         | what | moat | alone | ratio |\n|---|---|---|---|\n\
         | worktree made and removed | {:.1} ms | {:.1} ms (git worktree add + remove) | {:.2}× |\n\
         | copy made and removed ({copied}) | {:.1} ms | {:.1} ms (cp -r + rm) | {:.2}× |\n\
         | disk: worktree | {tree_kib} KiB | {project_kib} KiB (the project's files) | {:.2}× |\n\
         | disk: copy and its snapshot | {copy_kib} KiB | {project_kib} KiB | {:.2}× |\n\
         | diff of one changed file: worktree | {:.1} ms | | |\n\
         | diff of one changed file: copy | {:.1} ms | | |\n",
        worktree * 1e3,
        git_alone * 1e3,
        worktree / git_alone,
        copy * 1e3,
        cp_alone * 1e3,
        copy / cp_alone,
        tree_kib as f64 / project_kib as f64,
        copy_kib as f64 / project_kib as f64,
        diff_tree * 1e3,
        diff_copy * 1e3,
        files = scale.files,
        copied = kept_copy.copied.as_deref().unwrap_or("?"),
    );
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("workspace.md"), &table).expect("the summary is written");
    }
    for workspace in [kept_tree, kept_copy] {
        workspace.remove(root.path()).expect("removed");
    }
}

/// `files` files of 1 KiB in 100 directories, committed.
fn repository(dir: &Path, files: usize) {
    git(dir, &["init", "--quiet", "-b", "main"]);
    let body = "x".repeat(1023) + "\n";
    for n in 0..files {
        let sub = dir.join(format!("d{:02}", n % 100));
        std::fs::create_dir_all(&sub).expect("a directory");
        std::fs::write(sub.join(format!("f{n}.txt")), &body).expect("a file");
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "--quiet", "-m", "files"]);
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn median(samples: usize, mut measure: impl FnMut() -> f64) -> f64 {
    let mut times: Vec<f64> = (0..samples.max(1)).map(|_| measure()).collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Blocks `dir` uses, in KiB (`du -sk`), without `exclude` inside it.
fn du_kib(dir: &Path, exclude: Option<&str>) -> u64 {
    let mut command = Command::new("du");
    command.arg("-sk");
    if let Some(exclude) = exclude {
        command.arg(format!("--exclude={exclude}"));
    }
    let output = command.arg(dir).output().expect("du runs");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .and_then(|kib| kib.parse().ok())
        .expect("du says a size")
}

/// How long a diff of one changed file takes.
fn diff_seconds(workspace: &Workspace) -> f64 {
    std::fs::write(workspace.dir.join("d00/f0.txt"), "changed\n").expect("a change");
    let started = Instant::now();
    let diff = workspace.diff(false, false).expect("a diff");
    let took = started.elapsed().as_secs_f64();
    assert!(String::from_utf8_lossy(&diff).contains("+changed"));
    took
}
