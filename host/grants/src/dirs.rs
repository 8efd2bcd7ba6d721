//! Directory grants: resolved to canonical absolute paths when granted,
//! and opened once when a run is admitted ([`OpenDir`]): from then on the
//! run reaches the directory through that handle, never through its path
//! again, so a path changed later (a directory swapped for a symlink by an
//! earlier run that could write its parent) moves nothing.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use super::error::GrantError;

/// A granted directory, opened: the handle a run reaches it through.
/// Cheap to clone (the handle is shared).
#[derive(Debug, Clone)]
pub struct OpenDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

impl OpenDir {
    /// Opens the canonical directory `path` (see [`canonical_dir`]) without
    /// following any symlink on the way: a path that was canonical when it
    /// was granted and has a symlink in it now was changed since, and is
    /// refused rather than followed.
    pub fn open(path: &Path) -> Result<Self, GrantError> {
        let refuse = |reason: String| GrantError::Dir {
            path: path.to_path_buf(),
            reason,
        };
        if !path.is_absolute() {
            return Err(refuse("not an absolute path".into()));
        }
        let fd = rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|errno| {
            refuse(match errno {
                rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => {
                    "a symlink is on its path now: it changed since it was granted, \
                     and is not followed"
                        .into()
                }
                rustix::io::Errno::NOENT => "no such directory".into(),
                rustix::io::Errno::NOTDIR => "not a directory".into(),
                other => std::io::Error::from(other).to_string(),
            })
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// The path it was granted under (what the guest sees).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path that reaches exactly this directory, whatever its granted
    /// path leads to now: the process's own link to the handle
    /// (`/proc/self/fd/N`), for the APIs that take only paths.
    pub fn handle_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

impl AsFd for OpenDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The directories of one run, opened when it was admitted.
#[derive(Debug, Clone, Default)]
pub struct OpenDirs(Vec<OpenDir>);

impl OpenDirs {
    /// Opens every directory `grants` names (see [`OpenDir::open`]).
    pub fn open(grants: &crate::Grants) -> Result<Self, GrantError> {
        let mut dirs: Vec<OpenDir> = Vec::new();
        for path in grants.read.iter().chain(&grants.write) {
            if dirs.iter().all(|dir| dir.path != *path) {
                dirs.push(OpenDir::open(path)?);
            }
        }
        Ok(Self(dirs))
    }

    /// Every directory `grants` names, as a handle: this set's (opened
    /// when the run was admitted), else opened now the same way.
    pub fn granted(&self, grants: &crate::Grants) -> Result<Vec<OpenDir>, GrantError> {
        let mut dirs: Vec<OpenDir> = Vec::new();
        for path in grants.read.iter().chain(&grants.write) {
            if dirs.iter().any(|dir| dir.path == *path) {
                continue;
            }
            dirs.push(match self.get(path) {
                Some(dir) => dir.clone(),
                None => OpenDir::open(path)?,
            });
        }
        Ok(dirs)
    }

    /// The handle of `path`, when it was opened.
    pub fn get(&self, path: &Path) -> Option<&OpenDir> {
        self.0.iter().find(|dir| dir.path == path)
    }

    /// Every directory opened.
    pub fn iter(&self) -> impl Iterator<Item = &OpenDir> {
        self.0.iter()
    }
}

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

/// Resolves a Unix socket to grant (relative to `base`, when given):
/// absolute, with its directory canonical, and the socket itself followed
/// through links when it exists, which must then be a socket. It may not
/// exist yet (a server that starts after the run); its directory must.
/// A run reaches exactly the socket at this path.
pub fn canonical_socket(path: &Path, base: Option<&Path>) -> Result<PathBuf, GrantError> {
    let (resolved, existing) = resolve(path, base, "a Unix socket")?;
    if let Some(kind) = existing {
        use std::os::unix::fs::FileTypeExt;
        if !kind.is_socket() {
            return Err(GrantError::Dir {
                path: path.to_path_buf(),
                reason: "not a Unix socket".into(),
            });
        }
    }
    Ok(resolved)
}

/// Resolves a file or directory that may not exist yet (relative to
/// `base`, when given): absolute, its directory canonical, the path
/// itself followed through links when it exists. Its directory must
/// exist.
pub fn canonical_path(path: &Path, base: Option<&Path>) -> Result<PathBuf, GrantError> {
    resolve(path, base, "a file or directory").map(|(resolved, _)| resolved)
}

/// `path` resolved as [`canonical_path`] says, with the type of what is
/// there when something is.
fn resolve(
    path: &Path,
    base: Option<&Path>,
    what: &str,
) -> Result<(PathBuf, Option<std::fs::FileType>), GrantError> {
    let refuse = |reason: &str| GrantError::Dir {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    let joined = match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    let (resolved, kind) = match std::fs::canonicalize(&joined) {
        Ok(resolved) => {
            let kind = std::fs::metadata(&resolved).map_err(|e| refuse(&e.to_string()))?;
            (resolved, Some(kind.file_type()))
        }
        Err(_) => {
            let not_one = format!("not a path to {what}");
            let (Some(dir), Some(name)) = (joined.parent(), joined.file_name()) else {
                return Err(refuse(&not_one));
            };
            if name == ".." || name == "." {
                return Err(refuse(&not_one));
            }
            let dir = std::fs::canonicalize(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
            .map_err(|_| refuse(&format!("no such directory for {what}")))?;
            (dir.join(name), None)
        }
    };
    if resolved.to_str().is_none() {
        return Err(refuse("the path is not valid UTF-8"));
    }
    Ok((resolved, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_resolved_whether_it_exists_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let socket = root.join("db.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::os::unix::fs::symlink(&socket, root.join("link.sock")).unwrap();
        assert_eq!(
            canonical_socket(Path::new("link.sock"), Some(&root)).unwrap(),
            socket
        );
        assert_eq!(
            canonical_socket(Path::new("later.sock"), Some(&root)).unwrap(),
            root.join("later.sock")
        );
        std::fs::write(root.join("file"), "").unwrap();
        let refused = canonical_socket(&root.join("file"), None).unwrap_err();
        assert!(
            refused.to_string().contains("not a Unix socket"),
            "{refused}"
        );
        assert!(canonical_socket(&root.join("no/such.sock"), None).is_err());
    }

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

    #[test]
    fn a_granted_directory_swapped_for_a_symlink_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let granted = root.join("granted");
        std::fs::create_dir(&granted).unwrap();
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("elsewhere/secret"), "s").unwrap();
        let path = canonical_dir(&granted, None).unwrap();
        let opened = OpenDir::open(&path).unwrap();
        // An earlier run that could write the parent swaps the directory.
        std::fs::rename(&granted, root.join("moved")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), &granted).unwrap();
        let refused = OpenDir::open(&path).unwrap_err();
        assert!(refused.to_string().contains("symlink"), "{refused}");
        // The handle opened before still reaches the directory it was,
        // not what the path leads to now.
        let listed: Vec<_> = std::fs::read_dir(opened.handle_path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert!(listed.is_empty(), "{listed:?}");
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
