//! A worktree's repository of its own: the run commits, branches and
//! stashes there, and nothing of it reaches the project's repository
//! until the user lands its commits ([`Workspace::apply_commits`]).
//!
//! The workspace's `.git` is a repository made for the run, whose object
//! store borrows the project's (a read-only alternate: the run reads the
//! project's history, and writes its own objects beside it). The run may
//! write all of it, its config and hooks included, so moat never runs git
//! there once the run has started: moat's view of the workspace is a
//! repository of its own outside it (`RUN.git`, alternates: the project's
//! objects and the run's), and the run's branch is read from its files
//! ([`RunHead`]), never through the run's config.

use std::path::Path;

use crate::{Workspace, WorkspaceError, git, io};

/// Makes the run's repository in `dir` at `commit` on `branch`, borrowing
/// `objects` (the project's object store), with its files checked out,
/// and moat's view of it in `view`. Made before the run starts: nothing
/// in `dir` is the run's yet.
pub(crate) fn make(
    dir: &Path,
    view: &Path,
    objects: &Path,
    commit: &str,
    branch: &str,
) -> Result<(), WorkspaceError> {
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(dir)
        .map_err(io(format!("cannot create {}", dir.display())))?;
    let run_git = dir.join(".git");
    // No template: the user's hooks are not copied in.
    git::run(
        dir,
        &["init", "--quiet", "--template=", &dir.to_string_lossy()],
        &[],
    )?;
    borrow(&run_git.join("objects"), &[objects])?;
    let env: [(&str, &Path); 2] = [("GIT_DIR", &run_git), ("GIT_WORK_TREE", dir)];
    git::run(
        dir,
        &["update-ref", &format!("refs/heads/{branch}"), commit],
        &env,
    )?;
    git::run(
        dir,
        &["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")],
        &env,
    )?;
    git::run(dir, &["read-tree", "--reset", "-u", "HEAD"], &env)?;
    git::run(
        dir,
        &[
            "init",
            "--quiet",
            "--bare",
            "--template=",
            &view.to_string_lossy(),
        ],
        &[],
    )?;
    borrow(&view.join("objects"), &[objects, &run_git.join("objects")])
}

/// The commit a copy's repository (the project's `.git`, copied with it)
/// is at, when the copy has one at its top, and moat's view (`view`, the
/// copy's snapshot repository) made to read its objects: the run commits
/// there, and its commits land like a worktree's. Read before the run
/// starts; `None` for a copy of a directory that is no repository's top.
pub(crate) fn copied_head(dir: &Path, view: &Path) -> Result<Option<String>, WorkspaceError> {
    let objects = dir.join(".git").join("objects");
    if !std::fs::symlink_metadata(&objects).is_ok_and(|m| m.is_dir()) {
        return Ok(None);
    }
    borrow(&view.join("objects"), &[&objects])?;
    Ok(RunHead::of(dir, view).ok().map(|head| head.commit))
}

/// Lets the object store `store` read the objects of `from`.
fn borrow(store: &Path, from: &[&Path]) -> Result<(), WorkspaceError> {
    let info = store.join("info");
    std::fs::create_dir_all(&info).map_err(io(format!("cannot create {}", info.display())))?;
    let mut lines = String::new();
    for objects in from {
        lines += &objects.to_string_lossy();
        lines.push('\n');
    }
    let alternates = info.join("alternates");
    std::fs::write(&alternates, lines).map_err(io(format!("cannot write {}", alternates.display())))
}

/// The commit the run's branch (its `HEAD`) is at, read from its files:
/// a symbolic `HEAD` to a loose or packed ref, or a detached one. Every
/// value is checked to be an object id; moat's view then checks it is a
/// commit.
pub(crate) struct RunHead {
    pub(crate) commit: String,
}

impl RunHead {
    /// The head of the run's repository in `dir`.
    pub(crate) fn of(dir: &Path, view: &Path) -> Result<Self, WorkspaceError> {
        let run_git = dir.join(".git");
        let unreadable = |what: &str| {
            WorkspaceError::Project(format!(
                "the run's repository in {} has {what}",
                dir.display()
            ))
        };
        let head = read_small(&run_git.join("HEAD")).ok_or_else(|| unreadable("no HEAD"))?;
        let commit = match head.strip_prefix("ref: ") {
            None => head,
            Some(name) => {
                if !name.starts_with("refs/heads/") || name.contains("..") {
                    return Err(unreadable("a HEAD that is not a branch"));
                }
                match read_small(&run_git.join(name)) {
                    Some(commit) => commit,
                    None => packed_ref(&run_git, name).ok_or_else(|| unreadable("no commit"))?,
                }
            }
        };
        if !is_object_id(&commit) {
            return Err(unreadable("a HEAD that is not a commit"));
        }
        let env: [(&str, &Path); 1] = [("GIT_DIR", view)];
        git::run(
            view,
            &["cat-file", "-e", &format!("{commit}^{{commit}}")],
            &env,
        )
        .map_err(|_| unreadable("a HEAD that is not a commit"))?;
        Ok(Self { commit })
    }
}

/// A small file's first line, trimmed; `None` when missing or large.
fn read_small(path: &Path) -> Option<String> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() || metadata.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().next()?.trim().to_owned())
}

/// `name`'s commit in the repository's `packed-refs`.
fn packed_ref(run_git: &Path, name: &str) -> Option<String> {
    let path = run_git.join("packed-refs");
    let metadata = std::fs::symlink_metadata(&path).ok()?;
    if !metadata.is_file() || metadata.len() > 16 << 20 {
        return None;
    }
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|line| {
            let (commit, found) = line.split_once(' ')?;
            (found == name).then(|| commit.to_owned())
        })
}

/// Whether `text` is a SHA-1 or SHA-256 object id in hex.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// How [`Workspace::apply_commits`] landed a run's commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landed {
    /// The run made no commit.
    Nothing,
    /// The project's branch was at the run's base: moved to its last
    /// commit.
    FastForward {
        /// How many commits.
        commits: usize,
    },
    /// The project's branch had moved on: the run's commits replayed on
    /// it, each with its author and message.
    CherryPicked {
        /// How many commits.
        commits: usize,
    },
}

impl Workspace {
    /// Lands the commits the run made in its worktree's repository on the
    /// project's current branch: a fast-forward when the branch is still
    /// at the run's base, else each commit replayed on it — all of them,
    /// or none (a conflict leaves the project as it was). Changes the run
    /// did not commit stay in the workspace (`moat apply` takes them).
    pub fn apply_commits(&self, include_protected: bool) -> Result<Landed, WorkspaceError> {
        self.here()?;
        // Its commits are among its changes against the base.
        self.refuse_protected(&self.diff(false, false)?, include_protected)?;
        let Some(from) = &self.commits_from else {
            return Err(WorkspaceError::Project(format!(
                "run {} has no repository of its own (a copy of a directory that is no repository's top, or a worktree of an older moat): land its changes with moat apply",
                self.run
            )));
        };
        let head = RunHead::of(&self.dir, &self.git_dir)?;
        if head.commit == *from {
            return Ok(Landed::Nothing);
        }
        let view: [(&str, &Path); 1] = [("GIT_DIR", &self.git_dir)];
        let descends = git::run(
            &self.git_dir,
            &["merge-base", "--is-ancestor", from, &head.commit],
            &view,
        );
        if descends.is_err() {
            return Err(WorkspaceError::Project(format!(
                "the branch of run {} no longer starts at its base {}: land its changes with moat apply",
                self.run,
                &from[..from.len().min(12)]
            )));
        }
        let range = format!("{from}..{}", head.commit);
        let commits = String::from_utf8_lossy(&git::run(
            &self.git_dir,
            &["rev-list", "--count", &range],
            &view,
        )?)
        .trim()
        .parse::<usize>()
        .unwrap_or(0);
        // Into the project: fetched from moat's view (its config is
        // moat's), under a ref of the view's own.
        let landing = "refs/moat/landing";
        git::run(&self.git_dir, &["update-ref", landing, &head.commit], &view)?;
        git::run(
            &self.project,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                &self.git_dir.to_string_lossy(),
                landing,
            ],
            &[],
        )?;
        let project_head = git::text(&self.project, &["rev-parse", "HEAD"])?;
        if project_head == *from {
            git::run_as_user(
                &self.project,
                &["merge", "--ff-only", "--quiet", &head.commit],
            )
            .map_err(|error| self.conflict(error))?;
            return Ok(Landed::FastForward { commits });
        }
        if let Err(error) = git::run_as_user(
            &self.project,
            &[
                "cherry-pick",
                "--allow-empty",
                "--keep-redundant-commits",
                &range,
            ],
        ) {
            let _ = git::run_as_user(&self.project, &["cherry-pick", "--abort"]);
            return Err(self.conflict(error));
        }
        Ok(Landed::CherryPicked { commits })
    }

    fn conflict(&self, error: WorkspaceError) -> WorkspaceError {
        WorkspaceError::Conflict {
            run: self.run.clone(),
            project: self.project.clone(),
            reason: match error {
                WorkspaceError::Git { message, .. } => message,
                other => other.to_string(),
            },
        }
    }
}
