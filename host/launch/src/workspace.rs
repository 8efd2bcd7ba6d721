//! A run's workspace, given by the launch path to every run that asks for
//! one (`LaunchSpec::workspace`): made under the run's id, and what the
//! run may write narrowed to it — the project itself stays readable and
//! no longer writable (a grant that contains the project, which the user
//! gave on purpose, is left as it is). The run works in the workspace.

use std::path::{Path, PathBuf};

use moat_engine::RunOptions;
use moat_grants::OpenDirs;
use moat_runs::RunId;
use moat_workspace::{Request, Workspace, WorkspaceError};

use crate::Refusal;
use crate::admit::Admission;
use crate::error::LaunchError;

/// Makes run `id`'s workspace and gives it to the admitted run: its write
/// grant, its working directory.
pub(crate) fn give(
    request: &Request,
    id: &RunId,
    admission: &mut Admission,
    options: &mut RunOptions,
) -> Result<Workspace, LaunchError> {
    let project = std::fs::canonicalize(&request.project).map_err(|error| {
        WorkspaceError::Project(format!(
            "cannot read {}: {error}",
            request.project.display()
        ))
    })?;
    let grants = &admission.grants;
    // The workspace is a copy of the project: only for a run that may see it.
    let sees_project = grants
        .read
        .iter()
        .chain(&grants.write)
        .any(|dir| project.starts_with(dir));
    if !sees_project {
        return Err(WorkspaceError::Project(format!(
            "a workspace is a copy of {}, which this run is not granted: grant it to read (or write) it",
            project.display()
        ))
        .into());
    }
    let workspace = moat_workspace::create(request, id.as_str())?;
    let dir = std::fs::canonicalize(&workspace.dir).unwrap_or_else(|_| workspace.dir.clone());
    let grants = &mut admission.grants;
    let (inside, kept): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut grants.write)
        .into_iter()
        .partition(|granted| granted.starts_with(&project));
    grants.write = kept;
    grants.read.extend(inside);
    grants.write.push(dir.clone());
    admission.dirs = OpenDirs::open(grants).map_err(|e| {
        let _ = workspace.remove(&request.root);
        LaunchError::Refused(Refusal::Dir(e))
    })?;
    options.cwd = Some(in_workspace(
        options.cwd.as_deref(),
        &workspace.project,
        &dir,
    ));
    Ok(workspace)
}

/// Where in the workspace a run that would have worked in `cwd` works:
/// the same place inside it.
fn in_workspace(cwd: Option<&str>, project: &Path, dir: &Path) -> String {
    let place = cwd
        .map(Path::new)
        .and_then(|cwd| std::fs::canonicalize(cwd).ok())
        .and_then(|cwd| cwd.strip_prefix(project).ok().map(Path::to_path_buf))
        .filter(|inside| !inside.as_os_str().is_empty())
        .map_or_else(|| dir.to_path_buf(), |inside| dir.join(inside));
    place.to_string_lossy().into_owned()
}
