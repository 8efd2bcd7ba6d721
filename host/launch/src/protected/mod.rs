//! Files that run code later stay as they were, whatever a run may write
//! ([`moat_grants::protected`] says which): each protected path its write
//! grants (and its programs' state directories) cover is kept when the
//! run is started, and before its `done` whatever the run made there is
//! removed and whatever it changed is put back, reported in one `error`
//! (`PROTECTED_WRITE`, recoverable: the run's work stands) naming each
//! path and how to let a run change it.
//!
//! This is what holds for a component's files and every program's,
//! whatever contains them (a component writes through WASI, and Landlock
//! cannot take a path back out of a directory it grants). Where the run's
//! programs have a mount namespace, those of the paths that exist are
//! also read-only to them ([`Guard::read_only`], mounted by
//! `moat-contain`), so their writes fail at once.

mod snapshot;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{BoxStream, Stream, StreamExt};
use moat_engine::{EventPayload, Setting, SettingNames, TaskEvent};
use moat_grants::{Confinement, Grants, ProtectedPaths, Writable};

use crate::admit::Admission;
use snapshot::{Change, Kept};

/// The error code of the event that says a run changed files that run
/// code later, and that they were put back.
pub const PROTECTED_WRITE: &str = "PROTECTED_WRITE";

/// One run's protected paths (or a program's that is not a run: a
/// workflow's hook), as they were when it started.
pub struct Guard {
    kept: Vec<Kept>,
    names: Arc<dyn SettingNames>,
}

impl Guard {
    /// Keeps the protected paths of the run `admission` admits, as they
    /// are now; `None` when it can change none (or its programs run
    /// uncontained, with all of the user's rights: nothing is kept from
    /// them anyway).
    pub(crate) fn keep(
        admission: &Admission,
        profile: Option<&moat_builtins::Profile>,
        names: Arc<dyn SettingNames>,
    ) -> Option<Self> {
        let Confinement::Contained {
            state_dirs,
            state_files,
            ..
        } = &admission.confinement
        else {
            return None;
        };
        let writable: Vec<PathBuf> = admission
            .grants
            .write
            .iter()
            .chain(state_dirs)
            .chain(state_files)
            .cloned()
            .collect();
        let moved = profile
            .map(|profile| profile.moved_state(|name| std::env::var_os(name)))
            .unwrap_or_default();
        Self::of(
            &admission.grants.write,
            &writable,
            &moved,
            &admission.grants.write_protected,
            names,
        )
    }

    /// Keeps the protected paths a contained program that is not a run
    /// (a workflow's hook) may write under `grants`.
    pub fn keep_for_program(grants: &Grants, names: Arc<dyn SettingNames>) -> Option<Self> {
        Self::of(
            &grants.write,
            &grants.write,
            &[],
            &grants.write_protected,
            names,
        )
    }

    /// Keeps the protected paths that `writable` covers (the entries of a
    /// project's at `projects`), but `allowed`.
    fn of(
        projects: &[PathBuf],
        writable: &[PathBuf],
        moved: &[(PathBuf, &str)],
        allowed: &[PathBuf],
        names: Arc<dyn SettingNames>,
    ) -> Option<Self> {
        if writable.is_empty() {
            return None;
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let paths = ProtectedPaths::for_run(&Writable {
            projects,
            paths: writable,
            home: home.as_deref(),
            moved,
            path_dirs: path_dirs(),
            allowed,
        });
        if paths.is_empty() {
            return None;
        }
        let kept = paths
            .iter()
            .map(|protected| {
                let root = covering(writable, &protected.path);
                Kept::take(protected.path.clone(), protected.kind, protected.why, root)
            })
            .collect();
        Some(Self { kept, names })
    }

    /// The paths there now that may be made read-only to the run's
    /// programs (see [`Confinement::Contained`]'s `read_only`).
    pub(crate) fn read_only(&self) -> Vec<PathBuf> {
        self.kept
            .iter()
            .filter(|kept| kept.read_only())
            .map(|kept| kept.path.clone())
            .collect()
    }

    /// Puts back what the run changed: what to tell its user ("changed
    /// files that …"), if it changed anything.
    pub fn put_back(&self) -> Option<String> {
        let mut changes = Vec::new();
        for kept in &self.kept {
            kept.put_back(&mut changes);
        }
        if changes.is_empty() {
            return None;
        }
        tracing::info!(
            changes = changes.len(),
            "a run changed files that run code later; put back"
        );
        Some(self.words(&changes))
    }

    fn words(&self, changes: &[Change]) -> String {
        let listed: Vec<String> = changes
            .iter()
            .map(|change| {
                format!(
                    "{} ({}: {})",
                    change.path.display(),
                    change.what,
                    change.why
                )
            })
            .collect();
        let first = &changes[0].path;
        format!(
            "changed files that run code later, which its grants keep as they were: {}; \
             to let a run change one, give {}",
            listed.join("; "),
            self.names
                .assignment(Setting::AllowWriteProtected, &first.to_string_lossy())
        )
    }
}

/// The directories on this process's `PATH`, resolved: once, as a run's
/// start should not pay for it and the variable does not change.
fn path_dirs() -> &'static [PathBuf] {
    static DIRS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DIRS.get_or_init(|| {
        std::env::var_os("PATH")
            .map(|path| {
                std::env::split_paths(&path)
                    .filter_map(|dir| std::fs::canonicalize(dir).ok())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// The write grant that covers `path` most closely (`path` itself when
/// it is a grant inside a protected directory).
fn covering<'a>(writable: &'a [PathBuf], path: &'a Path) -> &'a Path {
    writable
        .iter()
        .filter(|dir| path.starts_with(dir))
        .max_by_key(|dir| dir.components().count())
        .map_or(path, PathBuf::as_path)
}

/// `engine`'s events, each run of `guards` (by task) checked before its
/// `done`.
pub(crate) fn guarded(
    engine: BoxStream<'static, TaskEvent>,
    guards: Vec<(usize, Guard)>,
) -> BoxStream<'static, TaskEvent> {
    Guarded {
        engine,
        guards: guards.into_iter().collect(),
        queue: VecDeque::new(),
    }
    .boxed()
}

struct Guarded {
    engine: BoxStream<'static, TaskEvent>,
    guards: HashMap<usize, Guard>,
    /// A `done` held back behind the error before it.
    queue: VecDeque<TaskEvent>,
}

impl Stream for Guarded {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        if let Some(event) = self.queue.pop_front() {
            return Poll::Ready(Some(event));
        }
        let passed = match self.engine.poll_next_unpin(cx) {
            Poll::Ready(Some(passed)) => passed,
            Poll::Ready(None) => {
                self.put_all_back();
                return Poll::Ready(None);
            }
            Poll::Pending => return Poll::Pending,
        };
        if !matches!(passed.event.payload, EventPayload::Done(_)) {
            return Poll::Ready(Some(passed));
        }
        let Some(guard) = self.guards.remove(&passed.task) else {
            return Poll::Ready(Some(passed));
        };
        let Some(message) = guard.put_back() else {
            return Poll::Ready(Some(passed));
        };
        let error = moat_engine::AgentEvent {
            payload: EventPayload::error(PROTECTED_WRITE, format!("the run {message}"), true),
            ..passed.event.clone()
        };
        let task = passed.task;
        self.queue.push_back(passed);
        Poll::Ready(Some(TaskEvent { task, event: error }))
    }
}

impl Guarded {
    /// Puts back what the runs that ended without a `done` changed.
    fn put_all_back(&mut self) {
        for (_, guard) in self.guards.drain() {
            guard.put_back();
        }
    }
}

impl Drop for Guarded {
    /// A run whose events nobody reads to the end still has its files put
    /// back.
    fn drop(&mut self) {
        self.put_all_back();
    }
}
