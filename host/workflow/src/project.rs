//! Files of the project that moat itself reads and writes for a task: its
//! inputs, the constitution and a saved answer. moat is not sandboxed, and
//! the agents may write in the project: a symbolic link an agent left
//! there must not make moat read a file outside the project into another
//! task's prompt, or write an answer outside it. So every such path is
//! resolved and must stay inside the project, and a saved answer is never
//! written through a link.

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// `relative` (or an absolute path) under `project` (canonical), resolved:
/// refused when it leads outside the project.
fn inside(project: &Path, path: &Path) -> io::Result<PathBuf> {
    let resolved = project.join(path).canonicalize()?;
    if resolved.starts_with(project) {
        Ok(resolved)
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "it leads outside the project (to {}) through a symbolic link",
                resolved.display()
            ),
        ))
    }
}

/// Opens a file of the project for reading.
pub fn open(project: &Path, path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(inside(project, path)?)
}

/// Writes `text` to a file of the project, creating its directory; never
/// through a symbolic link.
pub fn write(project: &Path, path: &Path, text: &str) -> io::Result<()> {
    let target = project.join(path);
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let parent = target.parent().unwrap_or(project);
    std::fs::create_dir_all(parent)?;
    let parent = inside(project, parent.strip_prefix(project).unwrap_or(parent))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(parent.join(name))?;
    file.write_all(text.as_bytes())
}

/// Reads at most `limit` bytes of a file's text (on a character boundary)
/// and its whole size: a huge input is not read whole.
pub fn read_prefix(project: &Path, path: &Path, limit: usize) -> io::Result<(String, usize)> {
    let file = open(project, path)?;
    let total = file.metadata()?.len() as usize;
    let mut bytes = Vec::with_capacity(total.min(limit));
    // A few bytes more than fit, to cut on a character boundary below.
    file.take(limit as u64 + 4).read_to_end(&mut bytes)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, total)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            // Invalid inside what was read, not just a character cut at
            // its end: not text.
            if e.utf8_error().error_len().is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "it is not UTF-8 text",
                ));
            }
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok((String::from_utf8(bytes).unwrap_or_default(), total))
        }
    }
}
