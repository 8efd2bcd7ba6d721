//! moat's own files are their user's alone: what moat creates for the run
//! store (its directory, the database and its WAL and shared-memory
//! files, the owners' directory) is made 0700 / 0600, and a store an older
//! moat left readable by others is narrowed when it is opened, saying so
//! once. Prompts, answers and tool output are in these files.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of moat's directories.
pub const DIR_MODE: u32 = 0o700;
/// The mode of moat's files.
pub const FILE_MODE: u32 = 0o600;

/// Makes `dir` (and the directories above it that do not exist) for this
/// user alone; an existing one is left as it is.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates `file` for this user alone when it does not exist.
pub fn create_file(file: &Path) -> io::Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(file)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

/// Takes from `path` (when it exists) what others may do with it beyond
/// `mode` — a file or directory an older moat made readable by others —
/// and says what it was: `Some("moat.db 644")`.
pub fn narrow(path: &Path, mode: u32) -> io::Result<Option<String>> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    if metadata.file_type().is_symlink() {
        return Ok(None);
    }
    let now = metadata.permissions().mode() & 0o777;
    if now & !mode == 0 {
        return Ok(None);
    }
    std::fs::set_permissions(path, Permissions::from_mode(now & mode))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Some(format!("{name} {now:o}")))
}
