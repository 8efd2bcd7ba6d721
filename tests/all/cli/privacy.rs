//! moat's own files are their user's alone: the run store (prompts,
//! answers, tool output), the compile cache and the workspaces are made
//! 0700 / 0600, a store an older moat left readable is narrowed when
//! opened (saying so), and another user — a real one, `nobody`, when the
//! tests run as root — cannot read them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::common::moat;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_store_cache_and_workspaces_are_this_users_alone() {
    let dir = tempfile::tempdir().unwrap();
    // Open to all above moat's own files: only their modes keep others out.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = dir.path().join("state");
    let store = state.join("moat.db");
    let cache = dir.path().join("cache");
    let project = moat_testkit::git::repository();
    let cwd = std::fs::canonicalize(project.path()).unwrap();
    let workspaces = dir.path().join("workspaces");
    let run = |extra: &[&str]| {
        moat()
            .env("MOAT_STORE", &store)
            .env("MOAT_CACHE_DIR", &cache)
            .env("MOAT_WORKSPACE_DIR", &workspaces)
            .args(["run", "echo", "a secret prompt", "--output", "text"])
            .args(extra)
            .output()
            .unwrap()
    };
    let cwd_flag = format!("--allow-read={}", cwd.display());
    let ran = run(&[
        "--workspace",
        "worktree",
        "--cwd",
        &cwd.to_string_lossy(),
        &cwd_flag,
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));

    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&store), 0o600);
    for suffix in ["-wal", "-shm"] {
        let file = state.join(format!("moat.db{suffix}"));
        if file.exists() {
            assert_eq!(mode(&file), 0o600, "{suffix}");
        }
    }
    assert_eq!(mode(&state.join("moat.db.owners")), 0o700);
    assert_eq!(mode(&cache), 0o700);
    assert_eq!(mode(&workspaces), 0o700);

    // Another user cannot read the prompt (a real one, when we may be one).
    let root = Command::new("id").arg("-u").output().unwrap();
    if text(&root.stdout).trim() == "0" {
        let read = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(!read.status.success(), "nobody read the store");
        assert!(
            text(&read.stderr).contains("Permission denied"),
            "{}",
            text(&read.stderr)
        );
    } else {
        eprintln!("not root: no second user to try the store as (its modes are checked above)");
    }

    // A store an older moat left readable is narrowed, saying so.
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    let again = run(&[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(mode(&store), 0o600);
    let said = text(&again.stderr);
    assert!(
        said.contains("was readable by other users (moat.db 644)"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "one line: {said}");
}
