//! Directory grants: resolved to canonical absolute paths when granted.

use std::path::{Path, PathBuf};

use super::error::GrantError;

/// Resolves a directory grant: relative to `base` (the current directory
/// when `None`), symlinks followed, `.` and `..` removed. The directory must
/// exist and its path must be UTF-8, since the guest sees it under the same
/// path and WASI names preopens with strings.
///
/// Canonicalizing here, once, means a grant names one directory: a later
/// change to a symlink on the way does not move what the run can reach.
pub fn canonical_dir(path: &Path, base: Option<&Path>) -> Result<PathBuf, GrantError> {
    let refuse = |reason: String| GrantError::Dir {
        path: path.to_path_buf(),
        reason,
    };
    if path.as_os_str().is_empty() {
        return Err(refuse("empty path".into()));
    }
    let joined = match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    let canonical = std::fs::canonicalize(&joined).map_err(|error| {
        refuse(match error.kind() {
            std::io::ErrorKind::NotFound => "no such directory".into(),
            _ => error.to_string(),
        })
    })?;
    if !canonical.is_dir() {
        return Err(refuse("not a directory".into()));
    }
    if canonical.to_str().is_none() {
        return Err(refuse("the path is not valid UTF-8".into()));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_canonicalized_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();

        let dotted = canonical_dir(Path::new("inner/../inner/."), Some(&root)).unwrap();
        assert_eq!(dotted, root.join("inner"));

        let missing = canonical_dir(Path::new("nope"), Some(&root)).unwrap_err();
        assert!(
            missing.to_string().contains("no such directory"),
            "{missing}"
        );

        std::fs::write(root.join("file"), "x").unwrap();
        let file = canonical_dir(&root.join("file"), None).unwrap_err();
        assert!(file.to_string().contains("not a directory"), "{file}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_directory_resolves_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(
            canonical_dir(&root.join("link"), None).unwrap(),
            root.join("real")
        );
    }
}
