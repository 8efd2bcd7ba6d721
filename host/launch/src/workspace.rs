//! A run's workspace, given by the launch path to every run that asks for
//! one (`LaunchSpec::workspace`): made under the run's id, and what the
//! run may write narrowed to it — the project itself stays readable and
//! no longer writable (a grant that contains the project, which the user
//! gave on purpose, is left as it is). The run works in the workspace.
//!
//! A run handed to workers elsewhere takes its project along instead
//! ([`pack`]): its worker makes the workspace from it ([`unpacked`]) and
//! sends the run's changes back before its `done` ([`send_back`]).
//! [`RunWorkspace`] finds a run's changes wherever it ran.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use moat_engine::RunOptions;
use moat_grants::{Grants, OpenDirs};
use moat_runs::{JobWorkspace, RunId, Workers};
use moat_workspace::{Request, Seed, Workspace, WorkspaceError};

use crate::Refusal;
use crate::admit::Admission;
use crate::error::LaunchError;

/// Makes run `id`'s workspace here (starting with its seed runs' changes,
/// which ran here too) and gives it to the admitted run: its write grant,
/// its working directory.
pub(crate) async fn give(
    request: &Request,
    id: &RunId,
    admission: &mut Admission,
    options: &mut RunOptions,
) -> Result<Workspace, LaunchError> {
    let project = granted_project(request, &admission.grants)?;
    let seeds = seeds(None, request).await?;
    let workspace = moat_workspace::create(request, id.as_str(), &seeds)?;
    let dir = std::fs::canonicalize(&workspace.dir).unwrap_or_else(|_| workspace.dir.clone());
    let grants = &mut admission.grants;
    let (inside, kept): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut grants.write)
        .into_iter()
        .partition(|granted| granted.starts_with(&project));
    grants.write = kept;
    grants.read.extend(inside);
    // A protected path of the project it may change is the workspace's.
    for path in &mut grants.write_protected {
        if let Ok(rest) = path.strip_prefix(&project) {
            *path = dir.join(rest);
        }
    }
    let cwd = inside_project(options.cwd.as_deref(), &workspace.project);
    if let Err(error) = work_in(&dir, &cwd, admission, options) {
        let _ = workspace.remove(&request.root);
        return Err(error);
    }
    Ok(workspace)
}

/// The project `request` names, which the run must be granted: the
/// workspace is a copy of it, only for a run that may see it.
fn granted_project(request: &Request, grants: &Grants) -> Result<PathBuf, LaunchError> {
    let project = std::fs::canonicalize(&request.project).map_err(|error| {
        WorkspaceError::Project(format!(
            "cannot read {}: {error}",
            request.project.display()
        ))
    })?;
    let sees_project = grants
        .read
        .iter()
        .chain(&grants.write)
        .any(|dir| project.starts_with(dir));
    if !sees_project {
        return Err(crate::Invalid::project_not_granted(&project).into());
    }
    Ok(project)
}

/// Gives the admitted run workspace `dir`: it may write it, and works in
/// `cwd` inside it.
fn work_in(
    dir: &Path,
    cwd: &Path,
    admission: &mut Admission,
    options: &mut RunOptions,
) -> Result<(), LaunchError> {
    admission.grants.write.push(dir.to_path_buf());
    admission.dirs =
        OpenDirs::open(&admission.grants).map_err(|e| LaunchError::Refused(Refusal::Dir(e)))?;
    let place = match cwd.as_os_str().is_empty() {
        true => dir.to_path_buf(),
        false => dir.join(cwd),
    };
    options.cwd = Some(place.to_string_lossy().into_owned());
    Ok(())
}

/// Where in the project a run that would have worked in `cwd` works, as a
/// path relative to it (empty: its top).
fn inside_project(cwd: Option<&str>, project: &Path) -> PathBuf {
    cwd.map(Path::new)
        .and_then(|cwd| std::fs::canonicalize(cwd).ok())
        .and_then(|cwd| cwd.strip_prefix(project).ok().map(Path::to_path_buf))
        .unwrap_or_default()
}

/// Packs run `id`'s project for `workers`: stored where they fetch it,
/// with the workspace the job asks its worker to make. The run's grants on the
/// project are dropped (its worker's copy replaces them) and its working
/// directory goes with the workspace. Returns this side's record too.
pub(crate) async fn pack(
    workers: &Arc<dyn Workers>,
    request: &Request,
    id: &RunId,
    admission: &mut Admission,
    options: &mut RunOptions,
) -> Result<(JobWorkspace, Workspace), LaunchError> {
    let project = granted_project(request, &admission.grants)?;
    let seeds = seeds(Some(workers), request).await?;
    let packed = {
        let (request, run) = (request.clone(), id.to_string());
        blocking(move || moat_workspace::pack(&request, &run, &seeds)).await?
    };
    let workspace = packed.workspace;
    let stored = workers.put_project(&packed.bundle).await;
    let sha256 = match stored {
        Ok(sha256) => sha256,
        Err(error) => {
            let _ = workspace.remove(&request.root);
            return Err(error.into());
        }
    };
    let grants = &mut admission.grants;
    grants.read.retain(|dir| !dir.starts_with(&project));
    grants.write.retain(|dir| !dir.starts_with(&project));
    // Its worker's workspace is elsewhere: what it makes of the project's
    // protected paths is put back there.
    grants
        .write_protected
        .retain(|path| !path.starts_with(&project));
    let cwd = inside_project(options.cwd.as_deref(), &workspace.project);
    options.cwd = None;
    let job = JobWorkspace {
        mode: workspace.mode.as_str().to_owned(),
        project: sha256,
        commit: workspace.base.clone(),
        cwd: cwd.to_string_lossy().into_owned(),
    };
    Ok((job, workspace))
}

/// Makes a worker's job's workspace under `root`, from the project the
/// job names (fetched from `workers`).
pub(crate) async fn unpack(
    workers: &dyn Workers,
    asked: &JobWorkspace,
    root: &Path,
    id: &RunId,
) -> Result<Workspace, LaunchError> {
    // A directory of the run's own: runs of one project fetch it at once.
    let fetched = root.join(format!("{id}.fetch"));
    let bundle = workers.fetch_project(&asked.project, &fetched).await;
    let made = match bundle {
        Ok(bundle) => {
            let (commit, root, run) = (asked.commit.clone(), root.to_path_buf(), id.to_string());
            blocking(move || moat_workspace::unpack(&bundle, &commit, &root, &run)).await
        }
        Err(error) => Err(error.into()),
    };
    let _ = std::fs::remove_dir_all(&fetched);
    made
}

/// Gives a worker's admitted run its unpacked workspace.
pub(crate) fn unpacked(
    workspace: &Workspace,
    cwd: &str,
    admission: &mut Admission,
    options: &mut RunOptions,
) -> Result<(), LaunchError> {
    work_in(&workspace.dir, Path::new(cwd), admission, options)
}

/// Sends run `id`'s changes in `workspace` back to `workers`, then
/// removes the workspace from `root` (the changes are theirs to keep
/// now).
pub(crate) async fn send_back(
    workers: &dyn Workers,
    workspace: Workspace,
    root: &Path,
) -> Result<usize, LaunchError> {
    let changes = {
        let workspace = workspace.clone();
        blocking(move || workspace.diff(false, false)).await?
    };
    workers.put_changes(&workspace.run, &changes).await?;
    if let Err(error) = workspace.remove(root) {
        tracing::warn!(run = workspace.run, "cannot remove the workspace: {error}");
    }
    Ok(changes.len())
}

/// The changes `request`'s workspace starts with: those of its seed runs
/// that had a workspace, wherever they ran.
async fn seeds(
    workers: Option<&Arc<dyn Workers>>,
    request: &Request,
) -> Result<Vec<Seed>, LaunchError> {
    let mut seeds = Vec::new();
    for run in &request.seeds {
        let id = RunId::parse(run)
            .ok_or_else(|| WorkspaceError::Project(format!("{run:?} is not a run id")))?;
        let found = match RunWorkspace::find(workers.cloned(), &request.root, &id) {
            Ok(found) => found,
            Err(LaunchError::Workspace(WorkspaceError::NotFound(_))) => continue,
            Err(error) => return Err(error),
        };
        seeds.push(Seed {
            run: run.clone(),
            changes: found.changes().await?,
        });
    }
    Ok(seeds)
}

/// A run's workspace, and where its changes are: in its files here, or
/// with the workers elsewhere its worker sent them back to.
pub struct RunWorkspace {
    /// Its record.
    pub workspace: Workspace,
    workers: Option<Arc<dyn Workers>>,
}

impl RunWorkspace {
    /// Run `id`'s workspace under `root`, whose changes are with
    /// `workers` when it ran on one of them
    /// ([`Launcher::workers`](crate::Launcher::workers)).
    pub fn find(
        workers: Option<Arc<dyn Workers>>,
        root: &Path,
        id: &RunId,
    ) -> Result<Self, LaunchError> {
        let workspace = Workspace::find(root, id.as_str())?;
        let workers = workers.filter(|_| workspace.on_cluster);
        Ok(Self { workspace, workers })
    }

    /// Its changes against its base, as [`Workspace::diff`] shows them.
    pub async fn diff(&self, stat: bool, color: bool) -> Result<Vec<u8>, LaunchError> {
        let workspace = self.workspace.clone();
        match self.sent_back().await? {
            Some(patch) => blocking(move || workspace.show(&patch, stat, color)).await,
            None => blocking(move || workspace.diff(stat, color)).await,
        }
    }

    /// Its changes against its base: its diff, or what its worker sent
    /// back.
    pub async fn changes(&self) -> Result<Vec<u8>, LaunchError> {
        match self.sent_back().await? {
            Some(patch) => Ok(patch),
            None => {
                let workspace = self.workspace.clone();
                blocking(move || workspace.diff(false, false)).await
            }
        }
    }

    /// Applies its changes to the project, all or none: how many bytes of
    /// patch (0: nothing had changed). What is not landed unasked
    /// ([`moat_workspace::Protected`]) is refused unless
    /// `include_protected`.
    pub async fn apply(&self, include_protected: bool) -> Result<usize, LaunchError> {
        let workspace = self.workspace.clone();
        match self.sent_back().await? {
            Some(patch) => {
                blocking(move || workspace.apply_changes(&patch, include_protected)).await
            }
            None => blocking(move || workspace.apply(include_protected)).await,
        }
    }

    /// What its changes hold that is not landed unasked.
    pub async fn protected(&self) -> Result<Vec<moat_workspace::Protected>, LaunchError> {
        Ok(moat_workspace::Protected::in_patch(&self.changes().await?))
    }

    /// Lands the commits its run made in its worktree on the project's
    /// branch, all or none ([`Workspace::apply_commits`]).
    pub async fn apply_commits(
        &self,
        include_protected: bool,
    ) -> Result<moat_workspace::Landed, LaunchError> {
        let workspace = self.workspace.clone();
        blocking(move || workspace.apply_commits(include_protected)).await
    }

    /// The changes its worker sent back, for a run on a cluster; `None`
    /// for one whose files are here.
    async fn sent_back(&self) -> Result<Option<Vec<u8>>, LaunchError> {
        let Some(workers) = &self.workers else {
            return Ok(None);
        };
        let run = &self.workspace.run;
        workers.changes(run).await?.map(Some).ok_or_else(|| {
            WorkspaceError::Project(format!(
                "the changes of run {run} have not come back from its worker: it has not ended, or its worker was lost (moat show {run})"
            ))
            .into()
        })
    }
}

/// `work` (git, files) on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, LaunchError> {
    let done = tokio::task::spawn_blocking(work).await;
    let done = done.unwrap_or_else(|stopped| {
        Err(WorkspaceError::Io {
            what: "a workspace's work stopped".into(),
            error: std::io::Error::other(stopped.to_string()),
        })
    });
    Ok(done?)
}
