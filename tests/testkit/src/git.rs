//! Real git repositories for the workspace tests: `git` with an identity
//! of its own, and a repository with one committed file.

use std::path::Path;
use std::process::Command;

/// Runs `git args` in `dir`, which must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@localhost")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@localhost")
        // A repository the tests gave another user (an unprivileged
        // run's) is still theirs to read.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A repository on branch `main` whose one commit has `notes.txt` =
/// "one\n".
pub fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    git(dir.path(), &["init", "--quiet", "-b", "main"]);
    std::fs::write(dir.path().join("notes.txt"), "one\n").expect("a file");
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "--quiet", "-m", "first"]);
    dir
}
