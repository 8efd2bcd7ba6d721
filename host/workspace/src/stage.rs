//! Staging a work tree whole, as the files it holds: also those inside a
//! repository made in it (an agent's `git init`, `cargo new`, a project
//! generator), which `git add` would stage as one gitlink — or refuse
//! outright when it has no commit yet ("does not have a commit checked
//! out") — and which `git apply` could not land. Their files are staged
//! under the outer tree with moat's repository; the nested repository
//! itself (its `.git`, its configuration, its hooks: the run wrote them)
//! is never read and never run.

use std::path::Path;

use crate::WorkspaceError;
use crate::git;

/// Stages every file of the work tree `top` into the index `env` names
/// (with `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE`), as `git add
/// --all` would; `force`: ignored files too. Directories that are
/// repositories of their own are staged as their files.
pub(crate) fn stage_all(
    top: &Path,
    env: &[(&str, &Path)],
    force: bool,
) -> Result<(), WorkspaceError> {
    let nested = nested_repositories(top, env, force)?;
    let mut add = vec!["add", "--all"];
    if force {
        add.push("--force");
    }
    add.extend(["--", "."]);
    let excluded: Vec<String> = nested
        .iter()
        .map(|dir| format!(":(exclude,literal){dir}"))
        .collect();
    add.extend(excluded.iter().map(String::as_str));
    git::run(top, &add, env)?;
    for dir in &nested {
        stage_nested(top, dir, env, force)?;
    }
    Ok(())
}

/// The untracked directories of `top` that are repositories of their own,
/// relative to it, without their trailing `/`: `git ls-files --others`
/// names such a directory instead of its files.
fn nested_repositories(
    top: &Path,
    env: &[(&str, &Path)],
    force: bool,
) -> Result<Vec<String>, WorkspaceError> {
    let mut list = vec!["ls-files", "-z", "--others"];
    if !force {
        list.push("--exclude-standard");
    }
    let listed = git::run(top, &list, env)?;
    Ok(listed
        .split(|b| *b == 0)
        .filter_map(|entry| entry.strip_suffix(b"/"))
        .filter(|entry| !entry.is_empty())
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .collect())
}

/// Stages the files of the repository at `top`/`dir` into the index of
/// `env`, each under `dir/`, in place of whatever the index held there.
fn stage_nested(
    top: &Path,
    dir: &str,
    env: &[(&str, &Path)],
    force: bool,
) -> Result<(), WorkspaceError> {
    let literal = format!(":(literal){dir}");
    git::run(
        top,
        &[
            "rm",
            "-r",
            "--cached",
            "--quiet",
            "--ignore-unmatch",
            "--",
            &literal,
        ],
        env,
    )?;
    // The nested tree staged alone, as the top of a work tree (git never
    // looks at a `.git` at the top of its work tree): into an index of its
    // own, with the same repository, so its objects are written there.
    let inner_top = top.join(dir);
    let index_dir = tempfile::tempdir().map_err(|error| WorkspaceError::Io {
        what: "cannot make a temporary index".into(),
        error,
    })?;
    let inner_index = index_dir.path().join("index");
    let mut inner_env: Vec<(&str, &Path)> = env
        .iter()
        .filter(|(name, _)| *name != "GIT_WORK_TREE" && *name != "GIT_INDEX_FILE")
        .copied()
        .collect();
    inner_env.push(("GIT_WORK_TREE", &inner_top));
    inner_env.push(("GIT_INDEX_FILE", &inner_index));
    stage_all(&inner_top, &inner_env, force)?;
    let staged = git::run(&inner_top, &["ls-files", "--stage", "-z"], &inner_env)?;
    // `MODE SHA STAGE\tPATH`, each moved under `dir/`.
    let mut entries = Vec::with_capacity(staged.len());
    for entry in staged.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let Some(tab) = entry.iter().position(|b| *b == b'\t') else {
            continue;
        };
        entries.extend_from_slice(&entry[..=tab]);
        entries.extend_from_slice(dir.as_bytes());
        entries.push(b'/');
        entries.extend_from_slice(&entry[tab + 1..]);
        entries.push(0);
    }
    if !entries.is_empty() {
        git::run_with_input(top, &["update-index", "-z", "--index-info"], env, &entries)?;
    }
    Ok(())
}
