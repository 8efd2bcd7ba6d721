//! Which programs a run may start: its `--allow-run` grants, resolved once
//! when the run starts.
//!
//! A bare name is looked up on the host's `PATH` then, and only then: a
//! later change of `PATH`, or a file dropped into a directory on it, does
//! not change what the grant starts. A request names the program by its
//! granted name or by its absolute path; either way the path resolved here
//! is what runs, never a new lookup.
//!
//! Never from a directory the run may write: the lookup skips such
//! directories, and a program granted by a path inside one is refused,
//! since the adapter could have put its own program there.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One granted program.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Granted {
    /// As granted: a bare name or an absolute path.
    grant: String,
    /// Where it was found; `None` when it is not installed.
    path: Option<PathBuf>,
    /// `path` with symlinks resolved, for matching absolute requests.
    canonical: Option<PathBuf>,
    /// Set when the program lies in a directory the run may write.
    writable: bool,
}

/// A run's granted programs, as found when it started.
#[derive(Debug, Clone, Default)]
pub struct GrantedPrograms {
    programs: Vec<Granted>,
}

/// Why a request names no program the run may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramRefusal {
    /// Not granted (or named by a relative path, which is never granted).
    NotGranted,
    /// Granted, but not installed where it was looked for.
    NotInstalled {
        /// Where it was looked for.
        message: String,
    },
    /// Granted by a path inside a directory the run may write: the adapter
    /// could have replaced it.
    Writable {
        /// The program's path.
        path: PathBuf,
    },
}

impl GrantedPrograms {
    /// Resolves `grants` (bare names on `path_var`, the host's `PATH`),
    /// never from inside the directories in `writable` (canonical).
    pub fn resolve(grants: &[String], path_var: Option<&OsStr>, writable: &[PathBuf]) -> Self {
        // Nothing to look up (most runs): the search path is not read,
        // whose every entry would otherwise be canonicalized.
        if grants.is_empty() {
            return Self {
                programs: Vec::new(),
            };
        }
        let path_var = path_var.map(|path| safe_search_path(path, writable));
        let programs = grants
            .iter()
            .map(|grant| Granted::found(grant, path_var.as_deref(), writable))
            .collect();
        Self { programs }
    }

    /// Adds `grant` (approved while the run runs), found as
    /// [`resolve`](Self::resolve) finds grants.
    pub fn add(&mut self, grant: &str, path_var: Option<&OsStr>, writable: &[PathBuf]) {
        let path_var = path_var.map(|path| safe_search_path(path, writable));
        self.programs
            .push(Granted::found(grant, path_var.as_deref(), writable));
    }

    /// Each grant with where it was found (`None`: not installed).
    pub fn resolved(&self) -> impl Iterator<Item = (&str, Option<&Path>)> {
        self.programs
            .iter()
            .map(|p| (p.grant.as_str(), p.path.as_deref()))
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    /// The path to start for `requested`: a granted name, or an absolute
    /// path that is (or resolves to) a granted program.
    pub fn find(&self, requested: &str) -> Result<PathBuf, ProgramRefusal> {
        if !requested.contains('/') {
            let granted = self
                .programs
                .iter()
                .find(|p| p.grant == requested)
                .ok_or(ProgramRefusal::NotGranted)?;
            return granted
                .start_path()
                .ok_or_else(|| ProgramRefusal::NotInstalled {
                    message: format!("`{requested}` was not found on PATH when the run started"),
                })?;
        }
        let path = Path::new(requested);
        if !path.is_absolute() {
            return Err(ProgramRefusal::NotGranted);
        }
        let canonical = std::fs::canonicalize(path).ok();
        let granted = self.programs.iter().find(|p| {
            p.path.as_deref() == Some(path) || (canonical.is_some() && p.canonical == canonical)
        });
        match granted {
            Some(granted) => Ok(granted.start_path().expect("a matched grant has a path")?),
            None if canonical.is_none() && self.programs.iter().any(|p| p.grant == requested) => {
                Err(ProgramRefusal::NotInstalled {
                    message: format!("`{requested}` is granted but does not exist"),
                })
            }
            None => Err(ProgramRefusal::NotGranted),
        }
    }
}

impl Granted {
    /// `grant` as found on `path_var` (a safe search path), marked when
    /// it lies in one of the `writable` directories.
    fn found(grant: &str, path_var: Option<&OsStr>, writable: &[PathBuf]) -> Self {
        let path = locate(grant, path_var);
        let canonical = path.as_deref().and_then(|p| std::fs::canonicalize(p).ok());
        let writable = canonical
            .as_deref()
            .is_some_and(|c| writable.iter().any(|dir| c.starts_with(dir)));
        Granted {
            grant: grant.to_owned(),
            path,
            canonical,
            writable,
        }
    }

    /// Where to start it: `None` when it was not found, a refusal when it
    /// lies in a directory the run may write.
    fn start_path(&self) -> Option<Result<PathBuf, ProgramRefusal>> {
        let path = self.path.clone()?;
        if self.writable {
            return Some(Err(ProgramRefusal::Writable { path }));
        }
        Some(Ok(path))
    }
}

/// `path_var` (a `PATH` value) without relative entries (they would be
/// resolved against wherever a child starts) and without the entries
/// inside `dirs` (canonical), so a lookup never finds a program the run
/// could have written.
pub fn safe_search_path(path_var: &OsStr, dirs: &[PathBuf]) -> std::ffi::OsString {
    let kept = std::env::split_paths(path_var).filter(|entry| {
        if !entry.is_absolute() {
            return false;
        }
        // Nothing to be inside of: no entry needs its links resolved (a
        // system call or more each, on every run's start).
        if dirs.is_empty() {
            return true;
        }
        let canonical = std::fs::canonicalize(entry).unwrap_or_else(|_| entry.clone());
        !dirs.iter().any(|dir| canonical.starts_with(dir))
    });
    std::env::join_paths(kept).unwrap_or_default()
}

/// The executable file `program` names: itself when it is a path, else
/// the first found on the search path `path_var` ([`find_on_path`]).
pub fn locate(program: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    find_on_path(program, path_var)
}

/// Where `name` is on the search path `path_var` (a `PATH` value): the
/// first executable file of that name in an absolute directory of it.
pub fn find_on_path(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_granted_name_is_found_on_path_when_the_run_starts_and_not_again() {
        let dir = tempfile::tempdir().unwrap();
        let bin = std::fs::canonicalize(dir.path()).unwrap();
        let tool = executable(&bin, "tool");
        let programs = GrantedPrograms::resolve(&["tool".into()], Some(bin.as_os_str()), &[]);
        assert_eq!(programs.find("tool").unwrap(), tool);
        // By its absolute path too, and through a symlink to it.
        assert_eq!(programs.find(tool.to_str().unwrap()).unwrap(), tool);
        std::os::unix::fs::symlink(&tool, bin.join("alias")).unwrap();
        assert_eq!(
            programs.find(bin.join("alias").to_str().unwrap()).unwrap(),
            tool
        );

        // Installed after the run started: still what was found then.
        let later = tempfile::tempdir().unwrap();
        executable(later.path(), "late");
        let programs = GrantedPrograms::resolve(&["late".into()], Some(bin.as_os_str()), &[]);
        assert!(matches!(
            programs.find("late"),
            Err(ProgramRefusal::NotInstalled { .. })
        ));
    }

    #[test]
    fn anything_not_granted_is_refused_even_next_to_a_granted_program() {
        let dir = tempfile::tempdir().unwrap();
        let bin = std::fs::canonicalize(dir.path()).unwrap();
        executable(&bin, "tool");
        let other = executable(&bin, "other");
        let programs = GrantedPrograms::resolve(&["tool".into()], Some(bin.as_os_str()), &[]);
        assert_eq!(programs.find("other"), Err(ProgramRefusal::NotGranted));
        assert_eq!(
            programs.find(other.to_str().unwrap()),
            Err(ProgramRefusal::NotGranted)
        );
        assert_eq!(programs.find("./tool"), Err(ProgramRefusal::NotGranted));
        assert!(GrantedPrograms::resolve(&[], None, &[]).find("sh").is_err());
    }

    #[test]
    fn a_non_executable_file_is_not_a_program() {
        let dir = tempfile::tempdir().unwrap();
        let bin = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(bin.join("data"), "x").unwrap();
        let programs = GrantedPrograms::resolve(&["data".into()], Some(bin.as_os_str()), &[]);
        assert!(matches!(
            programs.find("data"),
            Err(ProgramRefusal::NotInstalled { .. })
        ));
    }

    #[test]
    fn a_program_in_a_writable_directory_is_never_started() {
        let system = tempfile::tempdir().unwrap();
        let system = std::fs::canonicalize(system.path()).unwrap();
        let work = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(work.path()).unwrap();
        let planted = executable(&work, "tool");
        let real = executable(&system, "tool");
        // The writable directory comes first on PATH: the lookup skips it.
        let path = std::env::join_paths([&work, &system]).unwrap();
        let writable = [work.clone()];
        let programs = GrantedPrograms::resolve(&["tool".into()], Some(&path), &writable);
        assert_eq!(programs.find("tool").unwrap(), real);
        // Granted by a path inside it: refused.
        let grant = planted.to_str().unwrap().to_string();
        let programs = GrantedPrograms::resolve(std::slice::from_ref(&grant), None, &writable);
        assert_eq!(
            programs.find(&grant),
            Err(ProgramRefusal::Writable { path: planted })
        );
    }

    #[test]
    fn the_safe_search_path_leaves_out_relative_and_writable_directories() {
        let work = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(work.path()).unwrap();
        let path = std::env::join_paths([
            work.join("bin"),
            PathBuf::from("relative/bin"),
            PathBuf::from("/usr/bin"),
        ])
        .unwrap();
        let safe = safe_search_path(&path, std::slice::from_ref(&work));
        assert_eq!(safe, "/usr/bin");
        // With nothing writable, only the relative entry goes.
        let safe = safe_search_path(&path, &[]);
        let expected = std::env::join_paths([work.join("bin"), PathBuf::from("/usr/bin")]).unwrap();
        assert_eq!(safe, expected);
    }
}
