//! Copying a project for a run: reflinked where the filesystem can (the
//! copy shares the project's blocks until the run writes them: instant and
//! free of space), a full copy elsewhere. Never hard links: a run writing
//! a hard-linked file in place would write the project's.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::WorkspaceError;

/// Copies `from` to `to` (which must not exist) with its modes, times and
/// links; says how: `reflink` or `full`. A copy that fails (a full disk)
/// is removed before the error returns.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<&'static str, WorkspaceError> {
    if cp(from, to, "--reflink=always").is_ok() {
        return Ok("reflink");
    }
    let _ = std::fs::remove_dir_all(to);
    match cp(from, to, "--reflink=never") {
        Ok(()) => Ok("full"),
        Err(message) => {
            let _ = std::fs::remove_dir_all(to);
            Err(WorkspaceError::Project(format!(
                "cannot copy {} to {}: {message}",
                from.display(),
                to.display()
            )))
        }
    }
}

fn cp(from: &Path, to: &Path, reflink: &str) -> Result<(), String> {
    let output = Command::new("cp")
        .arg("-a")
        .arg(reflink)
        .arg("--")
        .arg(from)
        .arg(to)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run cp ({e})"))?;
    if output.status.success() {
        Ok(())
    } else {
        // cp says it once per file; the first says why.
        let said = String::from_utf8_lossy(&output.stderr);
        Err(said.lines().next().unwrap_or("cp failed").trim().to_owned())
    }
}
