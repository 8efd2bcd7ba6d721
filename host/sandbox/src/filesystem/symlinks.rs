//! `symlink-at`, checked: a guest may make a symbolic link in a directory
//! it may write only when the link's target stays inside a granted
//! directory that holds the link. wasmtime-wasi makes any link a write
//! grant allows, and cap-std refuses to *follow* one that leads out — but
//! the host and the run's granted programs are not cap-std: a relative
//! link such as `../../.ssh` waits in the user's tree for them to follow.
//!
//! The check shadows wasmtime-wasi's definition and then calls it, so
//! everything else about the call stays as it was.

use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use moat_engine::{Denial, DeniedRequest};
use wasmtime::component::{LinkerInstance, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{ErrorCode, HostDescriptor};

use crate::state::RunState;

/// The function replaced.
const SYMLINK_AT: &str = "[method]descriptor.symlink-at";

/// Replaces `symlink-at` in `types` (`wasi:filesystem/types`, which has
/// wasmtime-wasi's already) with the checked one.
pub(super) fn shadow(types: &mut LinkerInstance<'_, RunState>) -> wasmtime::Result<()> {
    types.func_wrap_async(
        SYMLINK_AT,
        |mut store, (fd, target, link): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let state = store.data_mut();
                if let Err(code) = check(state, &fd, &target, &link) {
                    return Ok((Err(code),));
                }
                let mut view = state.filesystem();
                match HostDescriptor::symlink_at(&mut view, fd, target, link).await {
                    Ok(()) => Ok((Ok(()),)),
                    Err(error) => Ok((Err(error.downcast()?),)),
                }
            })
        },
    )
}

/// Refuses (and records the refusal of) a link `link` in the directory
/// `fd` whose `target` leads out of every granted directory that holds it.
fn check(
    state: &mut RunState,
    fd: &Resource<Descriptor>,
    target: &str,
    link: &str,
) -> Result<(), ErrorCode> {
    let Ok(Descriptor::Dir(dir)) = state.table.get(fd) else {
        // wasmtime-wasi answers these itself.
        return Ok(());
    };
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", dir.dir.as_raw_fd()))
        .map_err(|_| ErrorCode::Access)?;
    if target_stays_inside(&state.preopens, &opened, link, target) {
        return Ok(());
    }
    let denial = Denial {
        request: DeniedRequest::Symlink {
            link: shown(link),
            target: shown(target),
        },
        reason: "its target leads out of the granted directory it would be in".into(),
        remedy: None,
    };
    tracing::info!(adapter = %state.adapter, "{denial}");
    state.denials.record(denial);
    Err(ErrorCode::NotPermitted)
}

/// Whether a link `link` made in the directory at `opened` (a host path)
/// pointing to `target` resolves inside one of `roots` that also holds it.
fn target_stays_inside(roots: &[PathBuf], opened: &Path, link: &str, target: &str) -> bool {
    if Path::new(target).is_absolute() {
        return false;
    }
    let at = normalize(&opened.join(link));
    let Some(parent) = at.parent() else {
        return false;
    };
    // Where the link's directory really is (it may be reached through
    // links itself); lexically when it does not exist (the call fails).
    let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
    let resolved = normalize(&parent.join(target));
    roots
        .iter()
        .any(|root| parent.starts_with(root) && resolved.starts_with(root))
}

/// `path` with `.` and `..` resolved lexically (never above `/`).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A guest's path as shown in a message: at most 200 bytes of it.
fn shown(text: &str) -> String {
    text[..text.floor_char_boundary(200)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_may_point_only_inside_a_granted_directory_that_holds_it() {
        let roots = [PathBuf::from("/w"), PathBuf::from("/w/deep/r")];
        let inside = |opened: &str, link: &str, target: &str| {
            target_stays_inside(&roots, Path::new(opened), link, target)
        };
        assert!(inside("/w", "l", "file"));
        assert!(inside("/w/a", "l", "../b/file"));
        assert!(
            inside("/w/deep/r", "l", "../../x"),
            "inside /w, which holds it too"
        );
        assert!(!inside("/w", "l", "../etc/passwd"));
        assert!(!inside("/w/a", "sub/../l", "../../x"));
        assert!(!inside("/w", "l", "/etc/passwd"));
        assert!(!inside("/w", "l", "a/../../../x"));
        assert!(!inside("/elsewhere", "l", "x"));
    }
}
