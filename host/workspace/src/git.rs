//! Running git: the one place a git command is started, with an identity
//! of its own (moat's snapshots of a copy are commits nobody else sees)
//! and its failure said in git's words.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::WorkspaceError;

/// `git` with `args`, run in `dir`, with `env` added.
pub(crate) fn run(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Result<Vec<u8>, WorkspaceError> {
    run_fed(dir, args, env, None, true)
}

/// The same as the user: commits it makes (landing a run's commits on the
/// project's branch) are committed by the user, as their git config says,
/// not by moat's identity.
pub(crate) fn run_as_user(dir: &Path, args: &[&str]) -> Result<Vec<u8>, WorkspaceError> {
    run_fed(dir, args, &[], None, false)
}

/// The same, with `input` on its stdin.
pub(crate) fn run_with_input(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    input: &[u8],
) -> Result<Vec<u8>, WorkspaceError> {
    run_fed(dir, args, env, Some(input), true)
}

fn run_fed(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    input: Option<&[u8]>,
    moats_identity: bool,
) -> Result<Vec<u8>, WorkspaceError> {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .args(args)
        .stdin(match input {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("GIT_TERMINAL_PROMPT", "0");
    if moats_identity {
        // The user's hooks and templates have no say in moat's snapshots.
        command
            .env("GIT_AUTHOR_NAME", "moat")
            .env("GIT_AUTHOR_EMAIL", "moat@localhost")
            .env("GIT_COMMITTER_NAME", "moat")
            .env("GIT_COMMITTER_EMAIL", "moat@localhost");
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let _turn = match walks_worktrees(args) {
        true => Some(worktrees_lock(dir)?),
        false => None,
    };
    let cannot_run = |error: std::io::Error| WorkspaceError::Git {
        command: shown(args),
        message: format!("cannot run git ({error}); install git"),
    };
    let mut child = command.spawn().map_err(cannot_run)?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // Written while git reads it and before its output is waited for:
        // its stdout is read by `wait_with_output` only after this, so
        // git must not fill its stdout pipe first (update-index prints
        // nothing).
        std::io::Write::write_all(&mut stdin, input).map_err(cannot_run)?;
    }
    let output = child.wait_with_output().map_err(cannot_run)?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(WorkspaceError::Git {
        command: shown(args),
        message: stderr.trim().lines().take(6).collect::<Vec<_>>().join("; "),
    })
}

/// The same, its output as trimmed text.
pub(crate) fn text(dir: &Path, args: &[&str]) -> Result<String, WorkspaceError> {
    let out = run(dir, args, &[])?;
    Ok(String::from_utf8_lossy(&out).trim().to_owned())
}

/// Whether git reads every worktree of the repository for this command:
/// `worktree add` and `branch -D` look for the branch in each worktree, and
/// `worktree remove|prune` delete worktrees' files. Another `worktree add`
/// may be half-way through writing its own at that moment, and git fails
/// ("failed to read …/commondir"): runs started together (parallel, a
/// workflow's tasks, two moats) take turns for these commands.
fn walks_worktrees(args: &[&str]) -> bool {
    matches!(args.first(), Some(&"worktree" | &"branch"))
}

/// An exclusive lock on the repository `dir` is in, held until dropped: a
/// file in its common git directory, locked by every moat on the machine.
fn worktrees_lock(dir: &Path) -> Result<File, WorkspaceError> {
    let common = PathBuf::from(text(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?);
    let path = common.join("moat-worktrees.lock");
    let failed = |error: std::io::Error| WorkspaceError::Io {
        what: format!("cannot lock {}", path.display()),
        error,
    };
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(file)
}

fn shown(args: &[&str]) -> String {
    format!("git {}", args.join(" "))
}
