//! The secrets moat keeps for its runs (`moat secret set NAME`): one file,
//! mode 0600 in a directory of mode 0700, written whole and renamed into
//! place so it is never half-written; refused when others may read it.
//!
//! A run's secret grants name secrets; the launcher that executes the run
//! resolves them here ([`SecretStore::resolve`]) into values the sandbox
//! holds (`moat_contain::Secrets`). A cluster job carries the names only:
//! the worker that runs it resolves them from its own store.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use moat_contain::{Secret, Secrets};
use moat_grants::{SecretGrant, names};
use serde::{Deserialize, Serialize};

/// Why a secret could not be kept or found.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// A run asks for a secret nobody set.
    #[error("no secret {name} is set here; set it with `moat secret set {name}`")]
    Missing {
        /// Its name.
        name: String,
    },
    /// A name, header or value that cannot be a secret.
    #[error("{0}")]
    Invalid(String),
    /// The file cannot be read or written.
    #[error("the secrets file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// One secret as kept.
#[derive(Clone, Serialize, Deserialize)]
struct Entry {
    value: String,
    /// The header it goes in; `None`: `Authorization: Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    header: Option<String>,
}

/// The secrets file.
#[derive(Debug, Clone)]
pub struct SecretStore {
    path: PathBuf,
}

impl SecretStore {
    /// The store kept in the file `path` (which need not exist yet).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$MOAT_SECRETS`, else `$XDG_STATE_HOME/moat/secrets.json`, else
    /// `~/.local/state/moat/secrets.json`: beside the run store.
    pub fn default_path() -> Option<PathBuf> {
        moat_runs::state::state_file("MOAT_SECRETS", "secrets.json")
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps `value` as secret `name`, sent in `header` (`None`: the
    /// vendor's header for a vendor's key name, else `Authorization:
    /// Bearer`), replacing any earlier value. Returns the header it will
    /// go in (`None`: `Authorization: Bearer`).
    pub fn set(
        &self,
        name: &str,
        value: &str,
        header: Option<&str>,
    ) -> Result<Option<String>, SecretError> {
        let name = names::env_name(name).map_err(|e| SecretError::Invalid(e.to_string()))?;
        let header = header.or_else(|| {
            moat_grants::vendor_key(&name)
                .map(|key| key.header)
                .filter(|header| *header != "authorization")
        });
        let value = value.trim_end_matches(['\n', '\r']);
        if value.is_empty() {
            return Err(SecretError::Invalid(format!(
                "the value of {name} is empty"
            )));
        }
        // Checked as the sandbox will use it, before it is kept.
        let grant = SecretGrant::parse(&format!("{name}@localhost")).expect("a valid grant");
        Secret::new(grant, header, value).map_err(SecretError::Invalid)?;
        let _lock = self.lock()?;
        let mut entries = self.read()?;
        entries.insert(
            name,
            Entry {
                value: value.to_owned(),
                header: header.map(str::to_owned),
            },
        );
        self.write(&entries)?;
        Ok(header.map(str::to_owned))
    }

    /// Forgets secret `name`; whether it was kept.
    pub fn remove(&self, name: &str) -> Result<bool, SecretError> {
        let _lock = self.lock()?;
        let mut entries = self.read()?;
        let removed = entries.remove(name).is_some();
        if removed {
            self.write(&entries)?;
        }
        Ok(removed)
    }

    /// The names kept, with the header each goes in; never the values.
    pub fn list(&self) -> Result<Vec<(String, Option<String>)>, SecretError> {
        Ok(self
            .read()?
            .into_iter()
            .map(|(name, entry)| (name, entry.header))
            .collect())
    }

    /// The values of `grants`, for the run that holds them.
    pub fn resolve(&self, grants: &[SecretGrant]) -> Result<Secrets, SecretError> {
        if grants.is_empty() {
            return Ok(Secrets::default());
        }
        let entries = self.read()?;
        let mut secrets = Vec::new();
        for grant in grants {
            let entry = entries
                .get(&grant.name)
                .ok_or_else(|| SecretError::Missing {
                    name: grant.name.clone(),
                })?;
            secrets.push(
                Secret::new(grant.clone(), entry.header.as_deref(), &entry.value)
                    .map_err(SecretError::Invalid)?,
            );
        }
        Ok(Secrets::new(secrets))
    }

    /// The values of those of `grants` that are kept, and the grants whose
    /// secret is not.
    pub fn resolve_kept(
        &self,
        grants: &[SecretGrant],
    ) -> Result<(Vec<Secret>, Vec<SecretGrant>), SecretError> {
        if grants.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let entries = self.read()?;
        let mut kept = Vec::new();
        let mut missing = Vec::new();
        for grant in grants {
            match entries.get(&grant.name) {
                Some(entry) => kept.push(
                    Secret::new(grant.clone(), entry.header.as_deref(), &entry.value)
                        .map_err(SecretError::Invalid)?,
                ),
                None => missing.push(grant.clone()),
            }
        }
        Ok((kept, missing))
    }

    /// Held while the file is read, changed and written back, so two
    /// `moat secret set` at once do not lose one's change.
    fn lock(&self) -> Result<std::fs::File, SecretError> {
        self.make_dir()?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.path.with_extension("lock"))
            .map_err(|e| self.file_error(e))?;
        lock.lock().map_err(|e| self.file_error(e))?;
        Ok(lock)
    }

    fn make_dir(&self) -> Result<(), SecretError> {
        let dir = self
            .path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| self.file_error(e))
    }

    fn file_error(&self, reason: impl ToString) -> SecretError {
        SecretError::File {
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, Entry>, SecretError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(BTreeMap::new());
            }
            Err(error) => return Err(self.file_error(error)),
        };
        let mode = file
            .metadata()
            .map_err(|e| self.file_error(e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(self.file_error(format!(
                "others may read it (mode {:o}); run `chmod 600 {}`",
                mode & 0o777,
                self.path.display()
            )));
        }
        serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|e| self.file_error(format!("not a secrets file ({e})")))
    }

    fn write(&self, entries: &BTreeMap<String, Entry>) -> Result<(), SecretError> {
        self.make_dir()?;
        let temporary = self
            .path
            .with_extension(format!("tmp-{}", std::process::id()));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temporary)?;
            file.write_all(&serde_json::to_vec_pretty(entries).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(self.file_error(error));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_kept_private_listed_by_name_and_resolved_for_its_grants() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::at(dir.path().join("state/secrets.json"));
        store.set("API_KEY", "s3cret\n", None).unwrap();
        store.set("OTHER", "v", Some("x-api-key")).unwrap();
        // A vendor's key goes in the vendor's header unless told otherwise.
        store.set("GEMINI_API_KEY", "g", None).unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            store.list().unwrap(),
            [
                ("API_KEY".to_owned(), None),
                (
                    "GEMINI_API_KEY".to_owned(),
                    Some("x-goog-api-key".to_owned())
                ),
                ("OTHER".to_owned(), Some("x-api-key".to_owned()))
            ]
        );
        let grant = SecretGrant::parse("API_KEY@api.example.com").unwrap();
        let secrets = store.resolve(std::slice::from_ref(&grant)).unwrap();
        assert!(!secrets.is_empty());
        let missing = SecretGrant::parse("NOPE@api.example.com").unwrap();
        let error = store.resolve(&[missing]).unwrap_err().to_string();
        assert!(error.contains("moat secret set NOPE"), "{error}");
        assert!(store.remove("API_KEY").unwrap());
        assert!(!store.remove("API_KEY").unwrap());
        assert!(store.resolve(&[grant]).is_err());
    }

    #[test]
    fn a_secrets_file_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::at(dir.path().join("secrets.json"));
        store.set("K", "v", None).unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = store.list().unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
    }
}
