//! The catalog of installed adapters: a directory per adapter, written
//! atomically (a new directory, renamed into place), every load checked
//! against the recorded hash.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Manifest, valid_name};

/// The component's file in an adapter's directory.
const COMPONENT: &str = "component.wasm";
/// The manifest's file in an adapter's directory.
const MANIFEST: &str = "adapter.toml";

/// Why the catalog could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Which.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The name cannot name an installed adapter.
    #[error(
        "{0:?} cannot name an adapter: use lowercase letters, digits and `-`, starting with a letter (at most 64)"
    )]
    Name(String),
    /// The bytes do not have the hash they must have.
    #[error("the component's SHA-256 is {actual}, not {expected}: it was not installed")]
    HashMismatch {
        /// The hash asked for.
        expected: String,
        /// The bytes' hash.
        actual: String,
    },
    /// An installed component's bytes changed since it was installed.
    #[error(
        "the installed adapter {name} was changed on disk (its SHA-256 is {actual}, {expected} when installed); it is not run: reinstall it, or `moat adapter remove {name}`"
    )]
    Tampered {
        /// The adapter.
        name: String,
        /// The hash recorded at install time.
        expected: String,
        /// Its bytes' hash now.
        actual: String,
    },
    /// A manifest moat cannot read.
    #[error(
        "{path} is not a manifest moat can read ({reason}); `moat adapter remove` it and install it again"
    )]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The installed adapters under one directory.
#[derive(Debug, Clone)]
pub struct Catalog {
    dir: PathBuf,
}

impl Catalog {
    /// moat's catalog: `$MOAT_DATA_DIR/adapters`, else
    /// `$XDG_DATA_HOME/moat/adapters`, else `~/.local/share/moat/adapters`.
    pub fn default_dir() -> Option<PathBuf> {
        let env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let data = env("MOAT_DATA_DIR")
            .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("moat")))
            .or_else(|| env("HOME").map(|h| h.join(".local/share/moat")))?;
        Some(data.join("adapters"))
    }

    /// The catalog in `dir` (created when something is installed).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry(&self, name: &str) -> Result<PathBuf, InstallError> {
        if !valid_name(name) {
            return Err(InstallError::Name(name.to_owned()));
        }
        Ok(self.dir.join(name))
    }

    /// The manifest of `name`, if it is installed.
    pub fn get(&self, name: &str) -> Result<Option<Manifest>, InstallError> {
        let path = self.entry(name)?.join(MANIFEST);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path)(e)),
        };
        let manifest: Manifest = toml::from_str(&text).map_err(|e| InstallError::Manifest {
            path: path.clone(),
            reason: e.message().to_owned(),
        })?;
        if manifest.name != name {
            return Err(InstallError::Manifest {
                path,
                reason: format!("it names {:?}", manifest.name),
            });
        }
        Ok(Some(manifest))
    }

    /// Every installed adapter, by name.
    pub fn list(&self) -> Result<Vec<Manifest>, InstallError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| valid_name(name))
            .collect();
        names.sort();
        let mut manifests = Vec::new();
        for name in names {
            if let Some(manifest) = self.get(&name)? {
                manifests.push(manifest);
            }
        }
        Ok(manifests)
    }

    /// The manifest and bytes of `name`, if it is installed; its bytes
    /// must still have the recorded hash.
    pub fn load(&self, name: &str) -> Result<Option<(Manifest, Vec<u8>)>, InstallError> {
        let Some(manifest) = self.get(name)? else {
            return Ok(None);
        };
        let path = self.entry(name)?.join(COMPONENT);
        let bytes = fs::read(&path).map_err(io(&path))?;
        let actual = sha256_hex(&bytes);
        if !actual.eq_ignore_ascii_case(&manifest.sha256) {
            return Err(InstallError::Tampered {
                name: name.to_owned(),
                expected: manifest.sha256,
                actual,
            });
        }
        Ok(Some((manifest, bytes)))
    }

    /// Installs `bytes` as `manifest.name`, replacing what was installed
    /// under that name (returned). The bytes must have `manifest.sha256`;
    /// nothing is written otherwise. The new directory is written whole,
    /// then renamed into place.
    pub fn install(
        &self,
        manifest: &Manifest,
        bytes: &[u8],
    ) -> Result<Option<Manifest>, InstallError> {
        let target = self.entry(&manifest.name)?;
        let actual = sha256_hex(bytes);
        if !actual.eq_ignore_ascii_case(&manifest.sha256) {
            return Err(InstallError::HashMismatch {
                expected: manifest.sha256.clone(),
                actual,
            });
        }
        let previous = self.get(&manifest.name).ok().flatten();
        // This user's alone, like the rest of moat's state.
        std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700)
            .create(&self.dir)
            .map_err(io(&self.dir))?;
        let staging = self
            .dir
            .join(format!(".{}.new-{}", manifest.name, std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(io(&staging))?;
        let written = (|| {
            write_synced(&staging.join(COMPONENT), bytes)?;
            let text = toml::to_string(manifest).map_err(|e| InstallError::Manifest {
                path: staging.join(MANIFEST),
                reason: e.to_string(),
            })?;
            write_synced(&staging.join(MANIFEST), text.as_bytes())
        })();
        if let Err(error) = written {
            let _ = fs::remove_dir_all(&staging);
            return Err(error);
        }
        // The old directory moves aside first: a rename cannot replace a
        // directory that has files.
        let old = self
            .dir
            .join(format!(".{}.old-{}", manifest.name, std::process::id()));
        let had = target.exists();
        if had {
            fs::rename(&target, &old).map_err(io(&target))?;
        }
        if let Err(e) = fs::rename(&staging, &target) {
            if had {
                let _ = fs::rename(&old, &target);
            }
            let _ = fs::remove_dir_all(&staging);
            return Err(io(&target)(e));
        }
        let _ = fs::remove_dir_all(&old);
        if let Ok(dir) = fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(previous)
    }

    /// Removes `name`: whether it was installed.
    pub fn remove(&self, name: &str) -> Result<bool, InstallError> {
        let target = self.entry(name)?;
        match fs::remove_dir_all(&target) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&target)(e)),
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    let mut file = fs::File::create(path).map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))?;
    file.sync_all().map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str, bytes: &[u8]) -> Manifest {
        Manifest {
            name: name.into(),
            version: "1.0.0".into(),
            description: String::new(),
            sha256: sha256_hex(bytes),
            source: "test".into(),
            installed_at: "2026-11-25T00:00:00Z".into(),
            grants: Default::default(),
        }
    }

    #[test]
    fn install_load_replace_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path().join("adapters"));
        assert!(catalog.list().unwrap().is_empty());
        assert_eq!(
            catalog.install(&manifest("one", b"v1"), b"v1").unwrap(),
            None
        );
        let (loaded, bytes) = catalog.load("one").unwrap().unwrap();
        assert_eq!(bytes, b"v1");
        assert_eq!(loaded.version, "1.0.0");
        let mut second = manifest("one", b"v2");
        second.version = "2.0.0".into();
        let replaced = catalog.install(&second, b"v2").unwrap().unwrap();
        assert_eq!(replaced.version, "1.0.0");
        assert_eq!(catalog.load("one").unwrap().unwrap().1, b"v2");
        assert_eq!(catalog.list().unwrap().len(), 1);
        assert!(catalog.remove("one").unwrap());
        assert!(!catalog.remove("one").unwrap());
        assert!(catalog.load("one").unwrap().is_none());
    }

    #[test]
    fn wrong_bytes_are_never_installed_and_changed_bytes_never_load() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path());
        let mut wrong = manifest("x", b"expected");
        wrong.sha256 = sha256_hex(b"something else");
        assert!(matches!(
            catalog.install(&wrong, b"expected"),
            Err(InstallError::HashMismatch { .. })
        ));
        assert!(!dir.path().join("x").exists());
        catalog.install(&manifest("x", b"good"), b"good").unwrap();
        fs::write(dir.path().join("x").join(COMPONENT), b"evil").unwrap();
        assert!(matches!(
            catalog.load("x"),
            Err(InstallError::Tampered { .. })
        ));
        assert!(matches!(catalog.get("../etc"), Err(InstallError::Name(_))));
    }
}
