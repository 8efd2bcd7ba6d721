//! Running git: the one place a git command is started, with an identity
//! of its own (moat's snapshots of a copy are commits nobody else sees)
//! and its failure said in git's words.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::WorkspaceError;

/// `git` with `args`, run in `dir`, with `env` added.
pub(crate) fn run(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Result<Vec<u8>, WorkspaceError> {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        // The user's hooks and templates have no say in moat's snapshots.
        .env("GIT_AUTHOR_NAME", "moat")
        .env("GIT_AUTHOR_EMAIL", "moat@localhost")
        .env("GIT_COMMITTER_NAME", "moat")
        .env("GIT_COMMITTER_EMAIL", "moat@localhost")
        .env("GIT_TERMINAL_PROMPT", "0");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().map_err(|error| WorkspaceError::Git {
        command: shown(args),
        message: format!("cannot run git ({error}); install git"),
    })?;
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

fn shown(args: &[&str]) -> String {
    format!("git {}", args.join(" "))
}
