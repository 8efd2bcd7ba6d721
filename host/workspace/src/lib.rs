//! A workspace per run: the run works on its own copy of the project — a
//! git worktree on a branch of its own, or a copy of the directory — and
//! the user reviews what it changed ([`Workspace::diff`]) and applies it
//! to the project ([`Workspace::apply`]), all or nothing.
//!
//! Each workspace lives under a root directory (moat's state directory by
//! default), named by its run's id, beside a `RUN.json` that describes it:
//! a workspace outlives the moat that made it (a `kill -9` leaves it to be
//! listed, diffed and removed by the next one). moat never commits in the
//! project on its own: a worktree is a repository of the run's own at the
//! base, borrowing the project's objects, where the run commits as it
//! likes ([`own_repo`]); the diff is the worktree's files against the
//! base, committed or not, and the run's commits land on the project's
//! branch only when the user says so ([`Workspace::apply_commits`]). A
//! copy gets a snapshot repository of its own outside the copy
//! (`RUN.git`), so a project without git is diffed by git too, and
//! nothing is added to what the run sees.
//!
//! This crate only moves files and runs `git`: which runs get a workspace,
//! and what they may write, is the launch layer's.

mod copy;
mod git;
mod own_repo;
mod protected;
mod stage;
mod travel;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use own_repo::Landed;
pub use protected::Protected;
pub use travel::{Packed, pack, unpack};

/// How a run gets its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A git worktree of the project at the base, on a branch named after
    /// the run.
    Worktree,
    /// A copy of the project's directory (reflinked where the filesystem
    /// can).
    Copy,
}

impl Mode {
    /// Its name, as `--workspace` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Worktree => "worktree",
            Mode::Copy => "copy",
        }
    }
}

/// What a run asks of its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Worktree or copy.
    pub mode: Mode,
    /// The project: the directory the run would have worked in.
    pub project: PathBuf,
    /// What a worktree starts from (a commit, branch or tag); HEAD when
    /// `None`.
    pub base: Option<String>,
    /// Carry the project's uncommitted changes into a worktree instead of
    /// refusing a dirty project.
    pub include_dirty: bool,
    /// Where workspaces live.
    pub root: PathBuf,
    /// Runs whose changes the workspace starts with, in order: a workflow
    /// task's upstream tasks. Whoever makes the workspace finds their
    /// changes (here, or sent back from a cluster) and passes them as
    /// [`Seed`]s; a run without a workspace is passed over.
    pub seeds: Vec<String>,
}

/// Changes a workspace starts with: a run's, as a patch against the
/// project. The workspace's base is then the seeded state, so its diff is
/// its own run's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The run that made them.
    pub run: String,
    /// Its changes (binary-safe, as [`Workspace::diff`] gives them).
    pub changes: Vec<u8>,
}

impl Seed {
    /// The seeds of `runs`' workspaces under `root`, as they are now; a
    /// run without a workspace there is passed over.
    pub fn here(root: &Path, runs: &[String]) -> Result<Vec<Seed>, WorkspaceError> {
        let mut seeds = Vec::new();
        for run in runs {
            match Workspace::find(root, run) {
                Ok(workspace) => seeds.push(Seed {
                    run: run.clone(),
                    changes: workspace.diff(false, false)?,
                }),
                Err(WorkspaceError::NotFound(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(seeds)
    }
}

/// Why a workspace could not be made, diffed, applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The project is not what the mode needs.
    #[error("{0}")]
    Project(String),
    /// The project has uncommitted changes a worktree would not carry.
    #[error(
        "{project} has uncommitted changes, which a worktree of {base} would not have; commit or stash them, pass --include-dirty to carry them over, or use --workspace copy"
    )]
    Dirty {
        /// The project.
        project: PathBuf,
        /// The base asked for.
        base: String,
    },
    /// The changes do not apply to the project as it is now.
    #[error(
        "the changes of run {run} do not apply to {project} as it is now (nothing was changed): {reason}"
    )]
    Conflict {
        /// The run.
        run: String,
        /// The project.
        project: PathBuf,
        /// What git said.
        reason: String,
    },
    /// Its changes are in the project already (applied before): nothing
    /// was changed.
    #[error(
        "the changes of run {run} are already in {project} (applied before); nothing was changed"
    )]
    AlreadyApplied {
        /// The run.
        run: String,
        /// The project.
        project: PathBuf,
    },
    /// Its changes hold what is not landed without the user's word
    /// ([`Protected`]): nothing was changed.
    #[error(
        "the changes of run {run} hold what moat does not land unasked: {found}; nothing was changed (pass --include-protected to land them too)"
    )]
    Protected {
        /// The run.
        run: String,
        /// What, and why, one after the other.
        found: String,
    },
    /// No workspace has this run.
    #[error("run {0} has no workspace here")]
    NotFound(String),
    /// A git command failed.
    #[error("{command}: {message}")]
    Git {
        /// The command.
        command: String,
        /// What git said.
        message: String,
    },
    /// A file operation failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        error: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> WorkspaceError {
    let what = what.into();
    move |error| WorkspaceError::Io { what, error }
}

/// A run's workspace, as its `RUN.json` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// The run it belongs to.
    pub run: String,
    /// Worktree or copy.
    pub mode: Mode,
    /// The directory the run works in.
    pub dir: PathBuf,
    /// What the changes apply to: the repository's top level (worktree) or
    /// the copied directory (copy).
    pub project: PathBuf,
    /// The commit the workspace started from (of the project's repository,
    /// or of the copy's snapshot repository).
    pub base: String,
    /// The base as the user named it (`HEAD`, `main`…).
    pub base_name: String,
    /// The worktree's branch (in the run's own repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit the run's own repository started at (a worktree's, or a
    /// copy's of a repository's top, its `.git` copied with it): its
    /// commits after it are the run's. `None`: a copy of a directory that
    /// is no repository's top, or a worktree an older moat made on the
    /// project's repository (`git worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits_from: Option<String>,
    /// How a copy was made: `reflink` (shares blocks until written) or
    /// `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied: Option<String>,
    /// The repository the base commit is in.
    pub git_dir: PathBuf,
    /// When it was made, in ms since the Unix epoch.
    pub created_ms: u64,
    /// Made on a cluster's worker, from a bundle of the project sent with
    /// the run: its files are there, its changes come back when the run
    /// ends ([`Workspace::show`], [`Workspace::apply_changes`]); `dir` is
    /// not on this machine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_cluster: bool,
}

/// The branch a run's worktree is on.
pub fn branch_of(run: &str) -> String {
    format!("moat/{run}")
}

/// Makes run `run`'s workspace as `request` asks, starting with `seeds`'
/// changes. Nothing is left behind when it fails half way.
pub fn create(request: &Request, run: &str, seeds: &[Seed]) -> Result<Workspace, WorkspaceError> {
    check_run(run)?;
    // This user's alone: the project's copies.
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&request.root)
        .map_err(io(format!("cannot create {}", request.root.display())))?;
    let dir = request.root.join(run);
    if dir.exists() {
        return Err(WorkspaceError::Project(format!(
            "{} exists already: run {run} has a workspace",
            dir.display()
        )));
    }
    let made = match request.mode {
        Mode::Worktree => worktree(request, run, &dir),
        Mode::Copy => copy_of(request, run, &dir),
    };
    let workspace = match made.and_then(|workspace| workspace.seeded(seeds)) {
        Ok(workspace) => workspace,
        Err(error) => {
            discard(request, run, &dir);
            return Err(error);
        }
    };
    if let Err(error) = workspace.save(&request.root) {
        let _ = workspace.remove(&request.root);
        return Err(error);
    }
    tracing::info!(run, dir = %workspace.dir.display(), mode = workspace.mode.as_str(), "workspace made");
    Ok(workspace)
}

/// Removes what a failed [`create`] made (nothing in the project).
fn discard(request: &Request, run: &str, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(request.root.join(format!("{run}.git")));
}

/// Where a worktree `request` asks for starts.
struct WorktreeBase {
    /// The repository's top.
    top: PathBuf,
    /// The base as named.
    name: String,
    /// Its commit.
    commit: String,
    /// Whether the project has uncommitted changes (to carry over: a
    /// dirty project is refused unless `include_dirty`).
    dirty: bool,
}

impl WorktreeBase {
    fn of(request: &Request) -> Result<Self, WorkspaceError> {
        let top = repository_top(&request.project)?;
        let name = request.base.clone().unwrap_or_else(|| "HEAD".to_owned());
        let commit = base_commit(&top, &name)?;
        let dirty = is_dirty(&top)?;
        if dirty && !request.include_dirty {
            return Err(WorkspaceError::Dirty {
                project: top,
                base: name,
            });
        }
        Ok(Self {
            top,
            name,
            commit,
            dirty,
        })
    }
}

fn worktree(request: &Request, run: &str, dir: &Path) -> Result<Workspace, WorkspaceError> {
    let base = WorktreeBase::of(request)?;
    let branch = branch_of(run);
    let common = PathBuf::from(git::text(
        &base.top,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?);
    // moat's view of the run's repository, outside what the run sees.
    let git_dir = request.root.join(format!("{run}.git"));
    own_repo::make(
        dir,
        &git_dir,
        &common.join("objects"),
        &base.commit,
        &branch,
    )?;
    if base.dirty {
        carry_dirty(&base.top, dir, &git_dir)?;
    }
    Ok(Workspace {
        run: run.to_owned(),
        mode: Mode::Worktree,
        dir: dir.to_path_buf(),
        project: base.top,
        base: base.commit.clone(),
        base_name: base.name,
        branch: Some(branch),
        commits_from: Some(base.commit),
        copied: None,
        git_dir,
        created_ms: now_ms(),
        on_cluster: false,
    })
}

/// The top of the git repository `project` is in: a worktree needs one.
fn repository_top(project: &Path) -> Result<PathBuf, WorkspaceError> {
    git::text(project, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|_| {
            WorkspaceError::Project(format!(
                "{} is not in a git repository: a worktree needs one; use --workspace copy",
                project.display()
            ))
        })
}

/// The commit `base_name` names in repository `top`.
fn base_commit(top: &Path, base_name: &str) -> Result<String, WorkspaceError> {
    // A name a client gave goes to git as an argument: never an option.
    if base_name.starts_with('-')
        || base_name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(WorkspaceError::Project(format!(
            "{base_name:?} is not a commit, branch or tag name"
        )));
    }
    git::text(
        top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{base_name}^{{commit}}"),
        ],
    )
    .map_err(|_| {
        WorkspaceError::Project(format!("{base_name} names no commit of {}", top.display()))
    })
}

/// Whether repository `top` has changes to tracked files: untracked ones
/// are not the project's yet (a workflow's own state lives there too), and
/// are carried over with the rest by `include_dirty`.
fn is_dirty(top: &Path) -> Result<bool, WorkspaceError> {
    Ok(!git::text(top, &["status", "--porcelain", "--untracked-files=no"])?.is_empty())
}

/// The project's uncommitted changes, tracked and untracked, into `dir`
/// (as moat's view `git_dir` of it sees it).
fn carry_dirty(top: &Path, dir: &Path, git_dir: &Path) -> Result<(), WorkspaceError> {
    let patch = git::run(top, &["diff", "--binary", "HEAD"], &[])?;
    if !patch.is_empty() {
        let file = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary file"))?;
        std::fs::write(file.path(), &patch).map_err(io("cannot write the patch"))?;
        let env: [(&str, &Path); 2] = [("GIT_DIR", git_dir), ("GIT_WORK_TREE", dir)];
        git::run(
            dir,
            &["apply", "--binary", &file.path().to_string_lossy()],
            &env,
        )?;
    }
    let untracked = git::run(
        top,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        &[],
    )?;
    for name in untracked.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let to = dir.join(&name);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        std::fs::copy(top.join(&name), &to).map_err(io(format!("cannot copy {name}")))?;
    }
    Ok(())
}

fn copy_of(request: &Request, run: &str, dir: &Path) -> Result<Workspace, WorkspaceError> {
    let project = std::fs::canonicalize(&request.project)
        .map_err(io(format!("cannot read {}", request.project.display())))?;
    if request.base.is_some() {
        return Err(WorkspaceError::Project(
            "--base names a commit of a worktree; a copy is of the directory as it is".into(),
        ));
    }
    let copied = copy::copy_dir(&project, dir)?;
    // The snapshot the diff is against, outside what the run sees.
    let git_dir = request.root.join(format!("{run}.git"));
    let env: [(&str, &Path); 2] = [("GIT_DIR", &git_dir), ("GIT_WORK_TREE", dir)];
    git::run(dir, &["init", "--quiet"], &env)?;
    stage::stage_all(dir, &env, true)?;
    git::run(
        dir,
        &[
            "commit",
            "--quiet",
            "--allow-empty",
            "--no-verify",
            "-m",
            "base",
        ],
        &env,
    )?;
    let base = String::from_utf8_lossy(&git::run(dir, &["rev-parse", "HEAD"], &env)?)
        .trim()
        .to_owned();
    let commits_from = own_repo::copied_head(dir, &git_dir)?;
    Ok(Workspace {
        run: run.to_owned(),
        mode: Mode::Copy,
        dir: dir.to_path_buf(),
        project,
        base,
        base_name: "the copy".to_owned(),
        branch: None,
        commits_from,
        copied: Some(copied.to_owned()),
        git_dir,
        created_ms: now_ms(),
        on_cluster: false,
    })
}

impl Workspace {
    /// The workspace with `seeds` applied, based on the result.
    fn seeded(mut self, seeds: &[Seed]) -> Result<Workspace, WorkspaceError> {
        let mut applied = false;
        for seed in seeds.iter().filter(|seed| !seed.changes.is_empty()) {
            let env: [(&str, &Path); 2] =
                [("GIT_DIR", &self.git_dir), ("GIT_WORK_TREE", &self.dir)];
            apply_patch(&seed.changes, &self.dir, &env, false, &seed.run)?;
            applied = true;
        }
        if applied {
            self.base = self.snapshot()?;
        }
        Ok(self)
    }

    /// The environment git works on the workspace's files with: its
    /// repository (the project's, or the copy's snapshot), its files.
    fn git_env<'a>(&'a self, index: &'a Path) -> [(&'static str, &'a Path); 3] {
        [
            ("GIT_DIR", &self.git_dir),
            ("GIT_WORK_TREE", &self.dir),
            ("GIT_INDEX_FILE", index),
        ]
    }

    /// The tree of the workspace's files as they are now (written to its
    /// repository's object store; no branch or commit moves).
    fn snapshot(&self) -> Result<String, WorkspaceError> {
        let index = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary index"))?;
        let env = self.git_env(index.path());
        git::run(&self.dir, &["read-tree", &self.base], &env)?;
        stage::stage_all(&self.dir, &env, false)?;
        let tree = git::run(&self.dir, &["write-tree"], &env)?;
        Ok(String::from_utf8_lossy(&tree).trim().to_owned())
    }

    /// The file describing run `run`'s workspace under `root`.
    fn record_path(root: &Path, run: &str) -> PathBuf {
        root.join(format!("{run}.json"))
    }

    /// Writes its description, atomically.
    fn save(&self, root: &Path) -> Result<(), WorkspaceError> {
        let text = serde_json::to_vec_pretty(self).expect("a workspace serializes");
        let mut file =
            tempfile::NamedTempFile::new_in(root).map_err(io("cannot write a workspace record"))?;
        std::io::Write::write_all(&mut file, &text)
            .map_err(io("cannot write a workspace record"))?;
        file.persist(Self::record_path(root, &self.run))
            .map_err(|e| WorkspaceError::Io {
                what: "cannot write a workspace record".into(),
                error: e.error,
            })?;
        Ok(())
    }

    /// Run `run`'s workspace under `root`.
    pub fn find(root: &Path, run: &str) -> Result<Workspace, WorkspaceError> {
        check_run(run)?;
        let path = Self::record_path(root, run);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(WorkspaceError::NotFound(run.to_owned()));
            }
            Err(error) => return Err(io(format!("cannot read {}", path.display()))(error)),
        };
        serde_json::from_slice(&text).map_err(|e| {
            WorkspaceError::Project(format!("{} is not a workspace record: {e}", path.display()))
        })
    }

    /// Every workspace under `root`, oldest first.
    pub fn list(root: &Path) -> Result<Vec<Workspace>, WorkspaceError> {
        let entries = match std::fs::read_dir(root) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io(format!("cannot list {}", root.display()))(error)),
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(run) = name.strip_suffix(".json")
                && let Ok(workspace) = Self::find(root, run)
            {
                found.push(workspace);
            }
        }
        found.sort_by_key(|w| w.created_ms);
        Ok(found)
    }

    /// Its changes against its base, as a unified diff (binary-safe, as
    /// `git apply` takes it); with `stat`, git's summary instead; `color`
    /// for a terminal. Untracked files count; files the project ignores
    /// do not. Nothing of the workspace or the project is changed.
    pub fn diff(&self, stat: bool, color: bool) -> Result<Vec<u8>, WorkspaceError> {
        self.here()?;
        let index = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary index"))?;
        let env = self.git_env(index.path());
        git::run(&self.dir, &["read-tree", &self.base], &env)?;
        stage::stage_all(&self.dir, &env, false)?;
        let mut args = vec!["diff", "--cached", "--no-ext-diff", "--no-renames"];
        args.push(if color {
            "--color=always"
        } else {
            "--color=never"
        });
        if stat {
            args.push("--stat");
        } else {
            args.push("--binary");
        }
        args.push(&self.base);
        git::run(&self.dir, &args, &env)
    }

    /// Applies its changes to the project's working tree — all of them or,
    /// when one does not apply, none (git apply checks the whole patch
    /// first). Returns how many bytes of patch were applied (0: nothing
    /// had changed).
    ///
    /// What it holds that is not landed unasked (`include_protected`)
    /// is refused: [`WorkspaceError::Protected`].
    pub fn apply(&self, include_protected: bool) -> Result<usize, WorkspaceError> {
        self.here()?;
        let patch = self.diff(false, false)?;
        if !patch.is_empty() {
            self.refuse_protected(&patch, include_protected)?;
            self.patch_project(&patch, false)?;
        }
        Ok(patch.len())
    }

    /// Refuses `patch` when it holds what is not landed unasked, unless
    /// `included`.
    pub(crate) fn refuse_protected(
        &self,
        patch: &[u8],
        included: bool,
    ) -> Result<(), WorkspaceError> {
        let found = protected::in_patch(patch);
        if included || found.is_empty() {
            return Ok(());
        }
        Err(WorkspaceError::Protected {
            run: self.run.clone(),
            found: found
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Applies `patch` (or takes it back, `reverse`) to the project's
    /// working tree, checked whole first.
    fn patch_project(&self, patch: &[u8], reverse: bool) -> Result<(), WorkspaceError> {
        // A copy's patch is relative to the copied directory, which may lie
        // inside some repository: git takes it as its work tree (the
        // snapshot repository only lends git a place to stand). A
        // worktree's project is its repository's top, as its patch is.
        let env: Vec<(&str, &Path)> = match self.mode {
            Mode::Copy => vec![("GIT_DIR", &self.git_dir), ("GIT_WORK_TREE", &self.project)],
            Mode::Worktree => Vec::new(),
        };
        apply_patch(patch, &self.project, &env, reverse, &self.run)
    }

    /// Refuses what needs its files when they are on a cluster's worker.
    fn here(&self) -> Result<(), WorkspaceError> {
        match self.on_cluster {
            true => Err(WorkspaceError::Project(format!(
                "run {} worked on a cluster: its changes are there (pass --nats)",
                self.run
            ))),
            false => Ok(()),
        }
    }

    /// Removes the workspace: its directory, its branch or snapshot, its
    /// record.
    pub fn remove(&self, root: &Path) -> Result<(), WorkspaceError> {
        match self.mode {
            // Its files were on a worker; here, the snapshot alone.
            _ if self.on_cluster => remove_if_there(&self.git_dir)?,
            // A repository of its own, and moat's view of it.
            Mode::Worktree if self.commits_from.is_some() => {
                remove_if_there(&self.dir)?;
                remove_if_there(&self.git_dir)?;
            }
            // An older moat's `git worktree` of the project.
            Mode::Worktree => {
                let dir = self.dir.to_string_lossy().into_owned();
                if git::run(&self.project, &["worktree", "remove", "--force", &dir], &[]).is_err() {
                    // Gone already, or its .git file was: git forgets it.
                    let _ = std::fs::remove_dir_all(&self.dir);
                    git::run(&self.project, &["worktree", "prune"], &[])?;
                }
                if let Some(branch) = &self.branch {
                    let exists = git::run(
                        &self.project,
                        &[
                            "rev-parse",
                            "--verify",
                            "--quiet",
                            &format!("refs/heads/{branch}"),
                        ],
                        &[],
                    )
                    .is_ok();
                    if exists {
                        git::run(&self.project, &["branch", "--quiet", "-D", branch], &[])?;
                    }
                }
            }
            Mode::Copy => {
                remove_if_there(&self.dir)?;
                remove_if_there(&self.git_dir)?;
            }
        }
        let record = Self::record_path(root, &self.run);
        match std::fs::remove_file(&record) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("cannot remove {}", record.display()))(error))
            }
            _ => Ok(()),
        }
    }
}

/// Applies the changes of each workspace of `changes` (each with its
/// changes: its diff, or those sent back from its worker), in order (each
/// may build on the ones before: a workflow's tasks in dependency order),
/// to their project — all of them, or none: when one does not apply, those
/// applied before it are taken back. Returns how many had changes.
pub fn apply_all(
    changes: &[(Workspace, Vec<u8>)],
    include_protected: bool,
) -> Result<usize, WorkspaceError> {
    for (workspace, patch) in changes {
        workspace.refuse_protected(patch, include_protected)?;
    }
    let mut applied: Vec<(&Workspace, &[u8])> = Vec::new();
    for (workspace, patch) in changes {
        if patch.is_empty() {
            continue;
        }
        if let Err(error) = workspace.patch_project(patch, false) {
            for (done, patch) in applied.iter().rev() {
                if let Err(undo) = done.patch_project(patch, true) {
                    tracing::error!(run = %done.run, %undo, "cannot take back applied changes");
                }
            }
            return Err(error);
        }
        applied.push((workspace, patch));
    }
    Ok(applied.len())
}

/// Applies `patch` (run `run`'s changes, or takes them back: `reverse`)
/// to the files git sees in `dir` with `env` — all of it or, checked whole
/// first, none: [`WorkspaceError::Conflict`] with git's reason.
fn apply_patch(
    patch: &[u8],
    dir: &Path,
    env: &[(&str, &Path)],
    reverse: bool,
    run: &str,
) -> Result<(), WorkspaceError> {
    let file = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary file"))?;
    std::fs::write(file.path(), patch).map_err(io("cannot write the patch"))?;
    let path = file.path().to_string_lossy().into_owned();
    let mut args = vec!["apply", "--binary"];
    if reverse {
        args.push("--reverse");
    }
    let mut check = args.clone();
    check.extend(["--check", &path]);
    if let Err(error) = git::run(dir, &check, env) {
        // A patch that does not apply forwards but whose reverse does is
        // there already: say so, not git's "already exists".
        let mut back = vec!["apply", "--binary", "--check"];
        if !reverse {
            back.push("--reverse");
        }
        back.push(&path);
        if git::run(dir, &back, env).is_ok() {
            return Err(WorkspaceError::AlreadyApplied {
                run: run.to_owned(),
                project: dir.to_path_buf(),
            });
        }
        return Err(WorkspaceError::Conflict {
            run: run.to_owned(),
            project: dir.to_path_buf(),
            reason: match error {
                WorkspaceError::Git { message, .. } => message,
                other => other.to_string(),
            },
        });
    }
    args.push(&path);
    git::run(dir, &args, env)?;
    Ok(())
}

/// Refuses a run name that is not a run id's characters: it names files
/// under the root, and may come from a file others could write (a
/// workflow's state).
fn check_run(run: &str) -> Result<(), WorkspaceError> {
    let valid = !run.is_empty()
        && run.len() <= 64
        && run.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    match valid {
        true => Ok(()),
        false => Err(WorkspaceError::Project(format!("{run:?} is not a run id"))),
    }
}

fn remove_if_there(dir: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_dir_all(dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("cannot remove {}", dir.display()))(error))
        }
        _ => Ok(()),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
