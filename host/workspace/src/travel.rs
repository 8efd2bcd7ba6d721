//! A workspace that travels: a run executed on a cluster's worker gets its
//! project as a git bundle of one commit — the project's files at the base
//! (with `include_dirty`, its uncommitted changes too; for a copy, the
//! directory as it is), no history —, [`unpack`]ed there into a workspace;
//! its changes come back as a diff, shown ([`Workspace::show`]) and applied
//! ([`Workspace::apply_changes`]) where it was submitted.
//!
//! The submitter keeps a snapshot repository (`RUN.git`, borrowing the
//! project's objects rather than copying them) holding the base commit:
//! the diff that comes back is checked against it and shown from it.

use std::path::{Path, PathBuf};

use crate::{
    Mode, Request, Seed, Workspace, WorkspaceError, WorktreeBase, check_run, git, io, now_ms,
};

/// A project packed for a worker.
#[derive(Debug)]
pub struct Packed {
    /// The submitter's record of the workspace (saved; `on_cluster`).
    pub workspace: Workspace,
    /// The git bundle of its base commit.
    pub bundle: Vec<u8>,
}

/// The ref the bundle carries its commit under.
const BUNDLE_REF: &str = "refs/heads/project";

/// Packs the project `request` names for run `run` to work on elsewhere,
/// with `seeds`' changes: the bundle to send, and this side's record of
/// the workspace. Nothing is left behind when it fails.
pub fn pack(request: &Request, run: &str, seeds: &[Seed]) -> Result<Packed, WorkspaceError> {
    check_run(run)?;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&request.root)
        .map_err(io(format!("cannot create {}", request.root.display())))?;
    let git_dir = request.root.join(format!("{run}.git"));
    if git_dir.exists() || Workspace::record_path(&request.root, run).exists() {
        return Err(WorkspaceError::Project(format!(
            "run {run} has a workspace in {} already",
            request.root.display()
        )));
    }
    let packed = pack_into(request, run, &git_dir, seeds).and_then(|packed| {
        packed.workspace.save(&request.root)?;
        Ok(packed)
    });
    if packed.is_err() {
        let _ = std::fs::remove_dir_all(&git_dir);
    }
    packed
}

fn pack_into(
    request: &Request,
    run: &str,
    git_dir: &Path,
    seeds: &[Seed],
) -> Result<Packed, WorkspaceError> {
    git::run(
        &request.root,
        &["init", "--quiet", "--bare", &git_dir.to_string_lossy()],
        &[],
    )?;
    // An index of its own, not there yet (git takes an empty file for a
    // broken one).
    let index_dir = tempfile::tempdir().map_err(io("cannot make a temporary index"))?;
    let index = index_dir.path().join("index");
    let (project, base_name) = match request.mode {
        Mode::Worktree => {
            let base = WorktreeBase::of(request)?;
            // The snapshot borrows the project's objects: nothing is
            // copied, and the project's repository is not written.
            let common = git::text(
                &base.top,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            )?;
            let alternates = git_dir.join("objects/info/alternates");
            std::fs::write(&alternates, format!("{common}/objects\n"))
                .map_err(io(format!("cannot write {}", alternates.display())))?;
            let env = snapshot_env(git_dir, &base.top, &index);
            git::run(&base.top, &["read-tree", &base.commit], &env)?;
            if base.dirty {
                // Tracked changes and untracked files, as a worktree
                // carries them over.
                crate::stage::stage_all(&base.top, &env, false)?;
            }
            (base.top, base.name)
        }
        Mode::Copy => {
            if request.base.is_some() {
                return Err(WorkspaceError::Project(
                    "--base names a commit of a worktree; a copy is of the directory as it is"
                        .into(),
                ));
            }
            let project = std::fs::canonicalize(&request.project)
                .map_err(io(format!("cannot read {}", request.project.display())))?;
            let env = snapshot_env(git_dir, &project, &index);
            // Everything, ignored files too, as a copy has them (not a
            // `.git` inside: git never takes one).
            crate::stage::stage_all(&project, &env, true)?;
            (project, "the copy".to_owned())
        }
    };
    let env = [("GIT_DIR", git_dir), ("GIT_INDEX_FILE", index.as_path())];
    for seed in seeds.iter().filter(|seed| !seed.changes.is_empty()) {
        let patch = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary file"))?;
        std::fs::write(patch.path(), &seed.changes).map_err(io("cannot write the patch"))?;
        let path = patch.path().to_string_lossy().into_owned();
        git::run(
            &request.root,
            &["apply", "--cached", "--binary", &path],
            &env,
        )
        .map_err(|error| WorkspaceError::Conflict {
            run: seed.run.clone(),
            project: project.clone(),
            reason: error.to_string(),
        })?;
    }
    let tree = git::run(&request.root, &["write-tree"], &env)?;
    let tree = String::from_utf8_lossy(&tree).trim().to_owned();
    // A fixed date: the same files make the same commit, and the same
    // bundle is stored once.
    let epoch = Path::new("@0 +0000");
    let dates = [
        ("GIT_DIR", git_dir),
        ("GIT_AUTHOR_DATE", epoch),
        ("GIT_COMMITTER_DATE", epoch),
    ];
    let commit = git::run(
        &request.root,
        &["commit-tree", &tree, "-m", "the project, as moat sent it"],
        &dates,
    )?;
    let commit = String::from_utf8_lossy(&commit).trim().to_owned();
    let env = [("GIT_DIR", git_dir)];
    git::run(&request.root, &["update-ref", BUNDLE_REF, &commit], &env)?;
    let bundle_file = tempfile::NamedTempFile::new_in(&request.root)
        .map_err(io("cannot make the project's bundle"))?;
    let bundle_path = bundle_file.path().to_string_lossy().into_owned();
    git::run(
        &request.root,
        &["bundle", "create", "--quiet", &bundle_path, BUNDLE_REF],
        &env,
    )?;
    let bundle = std::fs::read(bundle_file.path()).map_err(io("cannot read the bundle"))?;
    Ok(Packed {
        workspace: Workspace {
            run: run.to_owned(),
            mode: request.mode,
            dir: request.root.join(run),
            project,
            base: commit,
            base_name,
            branch: None,
            commits_from: None,
            copied: None,
            git_dir: git_dir.to_path_buf(),
            created_ms: now_ms(),
            on_cluster: true,
        },
        bundle,
    })
}

/// Git on the snapshot repository, with the project's files as its work
/// tree and an index of its own.
fn snapshot_env<'a>(
    git_dir: &'a Path,
    files: &'a Path,
    index: &'a Path,
) -> [(&'static str, &'a Path); 3] {
    [
        ("GIT_DIR", git_dir),
        ("GIT_WORK_TREE", files),
        ("GIT_INDEX_FILE", index),
    ]
}

/// Makes run `run`'s workspace under `root` from `bundle` (a file a
/// submitter's [`pack`] made, fetched by its hash): its files are those of
/// `commit`, with a repository of its own beside them (`RUN.git`, out of
/// the run's reach) that its diff is computed with. Nothing is left
/// behind when it fails.
pub fn unpack(
    bundle: &Path,
    commit: &str,
    root: &Path,
    run: &str,
) -> Result<Workspace, WorkspaceError> {
    check_run(run)?;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(root)
        .map_err(io(format!("cannot create {}", root.display())))?;
    let dir = root.join(run);
    let git_dir = root.join(format!("{run}.git"));
    if dir.exists() || git_dir.exists() {
        return Err(WorkspaceError::Project(format!(
            "{} exists already: run {run} has a workspace",
            dir.display()
        )));
    }
    let workspace = Workspace {
        run: run.to_owned(),
        mode: Mode::Copy,
        dir: dir.clone(),
        project: dir.clone(),
        base: commit.to_owned(),
        base_name: "the submitted project".to_owned(),
        branch: None,
        commits_from: None,
        copied: Some("unpacked".to_owned()),
        git_dir: git_dir.clone(),
        created_ms: now_ms(),
        on_cluster: false,
    };
    let made = unpack_into(bundle, commit, root, &workspace).and_then(|()| workspace.save(root));
    if let Err(error) = made {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&git_dir);
        return Err(error);
    }
    Ok(workspace)
}

fn unpack_into(
    bundle: &Path,
    commit: &str,
    root: &Path,
    workspace: &Workspace,
) -> Result<(), WorkspaceError> {
    let git_dir = &workspace.git_dir;
    git::run(
        root,
        &["init", "--quiet", "--bare", &git_dir.to_string_lossy()],
        &[],
    )?;
    let env = [("GIT_DIR", git_dir.as_path())];
    // Checked by git on the way in: a bundle that is not one, or whose
    // objects are broken, is refused here.
    git::run(
        root,
        &["bundle", "unbundle", &bundle.to_string_lossy()],
        &env,
    )?;
    let object = format!("{commit}^{{commit}}");
    git::run(root, &["rev-parse", "--verify", "--quiet", &object], &env)
        .map_err(|_| WorkspaceError::Project(format!("the project sent has no commit {commit}")))?;
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&workspace.dir)
        .map_err(io(format!("cannot create {}", workspace.dir.display())))?;
    // The repository's own index (the diff reads the files afresh).
    let env = [
        ("GIT_DIR", git_dir.as_path()),
        ("GIT_WORK_TREE", workspace.dir.as_path()),
    ];
    // git writes only inside its work tree (no `.git` path, nothing
    // through a symbolic link it made).
    git::run(
        &workspace.dir,
        &["read-tree", "-u", "--reset", commit],
        &env,
    )?;
    Ok(())
}

impl Workspace {
    /// Run's changes `patch` (as its worker sent them back) shown against
    /// its base as [`diff`](Self::diff) shows a workspace here: `stat` for
    /// git's summary, `color` for a terminal. A patch that does not apply
    /// to the base is refused: it is not this workspace's.
    pub fn show(&self, patch: &[u8], stat: bool, color: bool) -> Result<Vec<u8>, WorkspaceError> {
        let tree = self.changed_tree(patch)?;
        let mut args = vec!["diff", "--no-ext-diff", "--no-renames"];
        args.push(if color {
            "--color=always"
        } else {
            "--color=never"
        });
        args.push(if stat { "--stat" } else { "--binary" });
        args.extend([self.base.as_str(), tree.as_str()]);
        git::run(&self.root_dir(), &args, &[("GIT_DIR", &self.git_dir)])
    }

    /// Applies `patch`, the run's changes as its worker sent them back, to
    /// the project's working tree: all of them or, checked against the
    /// base and then the project first, none.
    pub fn apply_changes(
        &self,
        patch: &[u8],
        include_protected: bool,
    ) -> Result<usize, WorkspaceError> {
        if patch.is_empty() {
            return Ok(0);
        }
        self.refuse_protected(patch, include_protected)?;
        self.changed_tree(patch)?;
        self.patch_project(patch, false)?;
        Ok(patch.len())
    }

    /// The tree of the base with `patch` applied (in the snapshot
    /// repository; nothing else changes).
    fn changed_tree(&self, patch: &[u8]) -> Result<String, WorkspaceError> {
        let index = tempfile::NamedTempFile::new().map_err(io("cannot make a temporary index"))?;
        let env = [
            ("GIT_DIR", self.git_dir.as_path()),
            ("GIT_INDEX_FILE", index.path()),
        ];
        let dir = self.root_dir();
        git::run(&dir, &["read-tree", &self.base], &env)?;
        if !patch.is_empty() {
            let file =
                tempfile::NamedTempFile::new().map_err(io("cannot make a temporary file"))?;
            std::fs::write(file.path(), patch).map_err(io("cannot write the patch"))?;
            git::run(
                &dir,
                &[
                    "apply",
                    "--cached",
                    "--binary",
                    &file.path().to_string_lossy(),
                ],
                &env,
            )
            .map_err(|error| {
                WorkspaceError::Project(format!(
                    "the changes sent back for run {} do not apply to its base: {error}",
                    self.run
                ))
            })?;
        }
        let tree = git::run(&dir, &["write-tree"], &env)?;
        Ok(String::from_utf8_lossy(&tree).trim().to_owned())
    }

    /// A directory git can stand in for the snapshot repository: the one
    /// it lies in.
    fn root_dir(&self) -> PathBuf {
        self.git_dir
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
    }
}
