//! From what a caller names to a loaded adapter: a built-in by name, an
//! installed adapter by name (its bytes checked against the hash recorded
//! when it was installed), or a component by path — one typed result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_builtins as builtin;
use moat_engine::{Adapter, RunLimits};
use moat_grants::{Grants, Provenance};
use moat_installed::Catalog;
use moat_sandbox::{FileIdentity, LoadError, Sandbox, WasmAdapter};

/// Where a resolved adapter's component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Embedded in moat, by name.
    BuiltIn(String),
    /// Installed with `moat adapter install`, by name.
    Installed(String),
    /// A component file.
    File(PathBuf),
}

/// A loaded adapter and where it came from.
#[derive(Clone)]
pub struct Resolved {
    /// The loaded component.
    pub adapter: WasmAdapter,
    /// Built-in (receives its declared needs) or loaded.
    pub provenance: Provenance,
    /// Where its bytes came from.
    pub source: Source,
    /// What moat knows of it when it is a built-in.
    pub profile: Option<&'static builtin::Profile>,
    /// The grants the user accepted when installing it, when it is an
    /// installed adapter.
    pub accepted: Option<Grants>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("name", &self.name())
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Resolved {
    /// The adapter's name, as its `info()` gives it.
    pub fn name(&self) -> &str {
        &self.adapter.info().name
    }

    /// The SHA-256 of its component.
    pub fn sha256(&self) -> &str {
        &self.adapter.details().sha256
    }

    /// How long its runs may take when nobody says.
    pub fn default_timeout(&self) -> Duration {
        self.profile.map_or(RunLimits::DEFAULT_TIMEOUT, |profile| {
            profile.default_timeout
        })
    }

    /// Its component's bytes as they are now, to send elsewhere (a
    /// cluster); `None` for a built-in, which every moat carries.
    pub fn component_bytes(&self) -> Result<Option<Vec<u8>>, ResolveError> {
        match &self.source {
            Source::BuiltIn(_) => Ok(None),
            Source::Installed(name) => match catalog().and_then(|c| installed_bytes(&c, name)) {
                Ok(Some((_, bytes))) => Ok(Some(bytes)),
                Ok(None) => Err(unknown(name)),
                Err(error) => Err(error),
            },
            Source::File(path) => std::fs::read(path)
                .map(Some)
                .map_err(|e| ResolveError::Load {
                    adapter: path.display().to_string(),
                    error: LoadError::Read {
                        path: path.clone(),
                        source: e,
                    },
                }),
        }
    }
}

/// Why an adapter could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Nothing has that name: not a built-in, not installed, not a file.
    #[error(
        "unknown adapter `{name}`{}: not a built-in ({}), not installed (`moat adapter list`) and not a file; pass a path to a .wasm component",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(),
        known.join(", ")
    )]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-ins.
        known: Vec<&'static str>,
        /// The built-in or installed adapter whose name is closest, when
        /// one is close enough to be a typo of it.
        suggestion: Option<String>,
    },
    /// The component would not load.
    #[error("cannot load {adapter}: {error}")]
    Load {
        /// The adapter as it was named.
        adapter: String,
        /// Why.
        #[source]
        error: LoadError,
    },
    /// The installed adapters' catalog failed (a tampered component, an
    /// unreadable manifest).
    #[error("{0}")]
    Installed(String),
    /// A component that is not what it was said to be (a cluster job's
    /// component whose hash differs).
    #[error("{0}")]
    Mismatch(String),
}

impl ResolveError {
    /// The limit whose raising would let the component load, when that is
    /// why it did not (its `info()` ran out of memory or time).
    pub fn limit(&self) -> Option<moat_engine::Setting> {
        match self {
            ResolveError::Load {
                error: LoadError::Info { limit, .. },
                ..
            } => *limit,
            _ => None,
        }
    }
}

/// The installed adapters' catalog (`MOAT_DATA_DIR`, else the user's data
/// directory).
pub fn catalog() -> Result<Catalog, ResolveError> {
    Catalog::default_dir().map(Catalog::new).ok_or_else(|| {
        ResolveError::Installed(
            "no home directory for installed adapters: set MOAT_DATA_DIR".into(),
        )
    })
}

/// Whether `name_or_path` names an adapter [`Resolver::resolve`] would
/// find — a built-in, an installed adapter, a component file — without
/// loading it: what checking a file that names adapters needs (`moat
/// workflow validate`). Only that the file exists is checked of a path.
pub fn check_exists(name_or_path: &str) -> Result<(), ResolveError> {
    if builtin::component(name_or_path).is_some() {
        return Ok(());
    }
    if moat_installed::valid_name(name_or_path)
        && let Ok(catalog) = catalog()
        && catalog
            .get(name_or_path)
            .map_err(|e| ResolveError::Installed(e.to_string()))?
            .is_some()
    {
        return Ok(());
    }
    let path = Path::new(name_or_path);
    if !(name_or_path.contains('/') || name_or_path.ends_with(".wasm") || path.exists()) {
        return Err(unknown(name_or_path));
    }
    match path.is_file() {
        true => Ok(()),
        false => Err(ResolveError::Load {
            adapter: name_or_path.to_owned(),
            error: moat_sandbox::LoadError::Read {
                path: path.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
        }),
    }
}

/// The refusal of `name`, which nothing has, with the adapter it is most
/// likely a typo of (built-in or installed).
fn unknown(name: &str) -> ResolveError {
    let installed: Vec<String> = catalog()
        .and_then(|c| c.list().map_err(|e| ResolveError::Installed(e.to_string())))
        .map(|manifests| manifests.into_iter().map(|m| m.name).collect())
        .unwrap_or_default();
    let known = builtin::names().map(str::to_owned).chain(installed);
    let known: Vec<String> = known.collect();
    let suggestion =
        moat_engine::likely_meant(name, known.iter().map(String::as_str)).map(str::to_owned);
    ResolveError::Unknown {
        name: name.to_owned(),
        known: builtin::names().collect(),
        suggestion,
    }
}

fn installed_bytes(
    catalog: &Catalog,
    name: &str,
) -> Result<Option<(moat_installed::Manifest, Vec<u8>)>, ResolveError> {
    catalog
        .load(name)
        .map_err(|e| ResolveError::Installed(e.to_string()))
}

/// How many loaded adapters a resolver keeps, the ones used last.
const LOADED_KEPT: usize = 16;

/// What identifies an adapter's bytes without reading them all: a
/// built-in by name (its bytes are in the binary), an installed one by
/// name and the hash its catalog checked its bytes against, a file by its
/// path and [`FileIdentity`] (a file written since has a new one).
#[derive(Clone, PartialEq, Eq)]
enum Identity {
    BuiltIn(String),
    Installed { name: String, sha256: String },
    File { path: PathBuf, file: FileIdentity },
}

impl Identity {
    /// Whether it names bytes that cannot have changed unseen since
    /// `time` (see [`FileIdentity::settled_at`]).
    fn settled_at(&self, time: std::time::SystemTime) -> bool {
        match self {
            Self::File { file, .. } => file.settled_at(time),
            Self::BuiltIn(_) | Self::Installed { .. } => true,
        }
    }

    /// The file at `path` as it is now; `None` when it cannot be read
    /// (loading it says why).
    fn of_file(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self::File {
            path: path.to_path_buf(),
            file: FileIdentity::of(&metadata),
        })
    }
}

/// Adapters a resolver has loaded, the last used first. A server, a
/// workflow or `moat parallel` starts many runs of the same few adapters,
/// and loading one — its compiled form read and checked, linked, its
/// `info()` called in an instance of its own — costs more than starting a
/// run of it; a loaded adapter starts any number of runs, each in a store
/// of its own.
#[derive(Default)]
struct Loaded(std::sync::Mutex<std::collections::VecDeque<(Identity, Resolved)>>);

impl Loaded {
    fn get(&self, identity: &Identity) -> Option<Resolved> {
        let mut entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = entries.iter().position(|(kept, _)| kept == identity)?;
        let entry = entries.remove(at)?;
        let resolved = entry.1.clone();
        entries.push_front(entry);
        Some(resolved)
    }

    fn keep(&self, identity: Identity, resolved: &Resolved) {
        let mut entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.retain(|(kept, _)| *kept != identity);
        entries.push_front((identity, resolved.clone()));
        entries.truncate(LOADED_KEPT);
    }
}

/// Loads adapters into one sandbox, each once while it is among the
/// last few used (clones share what was loaded).
#[derive(Clone)]
pub struct Resolver {
    sandbox: Sandbox,
    loaded: std::sync::Arc<Loaded>,
}

impl Resolver {
    /// A resolver loading into `sandbox`.
    pub fn new(sandbox: Sandbox) -> Self {
        Self {
            sandbox,
            loaded: std::sync::Arc::default(),
        }
    }

    /// The sandbox it loads into.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// A built-in adapter by name, an installed one by name, or a
    /// component by path.
    pub async fn resolve(&self, name_or_path: &str) -> Result<Resolved, ResolveError> {
        if let Some(resolved) = self.built_in(name_or_path).await? {
            return Ok(resolved);
        }
        if let Some(resolved) = self.installed(name_or_path).await? {
            return Ok(resolved);
        }
        let path = Path::new(name_or_path);
        let looks_like_path =
            name_or_path.contains('/') || name_or_path.ends_with(".wasm") || path.exists();
        if !looks_like_path {
            return Err(unknown(name_or_path));
        }
        self.file(path).await
    }

    /// The built-in adapter `name`; `None` when moat has none of that name.
    pub async fn built_in(&self, name: &str) -> Result<Option<Resolved>, ResolveError> {
        let Some(bytes) = builtin::component(name) else {
            return Ok(None);
        };
        let identity = Identity::BuiltIn(name.to_owned());
        if let Some(resolved) = self.loaded.get(&identity) {
            return Ok(Some(resolved));
        }
        let adapter = self
            .sandbox
            .load_bytes(format!("built-in {name}"), bytes.to_vec())
            .await
            .map_err(|error| ResolveError::Load {
                adapter: format!("the built-in adapter `{name}`"),
                error,
            })?;
        let resolved = Resolved {
            adapter,
            provenance: Provenance::BuiltIn,
            source: Source::BuiltIn(name.to_owned()),
            profile: builtin::profile(name),
            accepted: None,
        };
        self.loaded.keep(identity, &resolved);
        Ok(Some(resolved))
    }

    /// The component at `path`.
    pub async fn file(&self, path: &Path) -> Result<Resolved, ResolveError> {
        // Taken before the bytes are read: a file changed meanwhile is
        // kept under its old identity, which never comes again.
        let reading = std::time::SystemTime::now();
        let identity = Identity::of_file(path);
        if let Some(resolved) = identity.as_ref().and_then(|i| self.loaded.get(i)) {
            return Ok(resolved);
        }
        let adapter = self
            .sandbox
            .load_file(path)
            .await
            .map_err(|error| ResolveError::Load {
                adapter: path.display().to_string(),
                error,
            })?;
        let resolved = Resolved {
            adapter,
            provenance: Provenance::Loaded,
            source: Source::File(path.to_path_buf()),
            profile: None,
            accepted: None,
        };
        // Kept only when its last write was well before: a second write in
        // the same tick of the file clock would leave its identity as it
        // was.
        if let Some(identity) = identity.filter(|identity| identity.settled_at(reading)) {
            self.loaded.keep(identity, &resolved);
        }
        Ok(resolved)
    }

    /// The component at `path`, which must have the SHA-256 `sha256`.
    pub async fn file_with_hash(
        &self,
        path: &Path,
        sha256: &str,
    ) -> Result<Resolved, ResolveError> {
        let resolved = self.file(path).await?;
        if resolved.sha256() != sha256 {
            return Err(ResolveError::Mismatch(format!(
                "the component loaded from {} is not {sha256}",
                path.display()
            )));
        }
        Ok(resolved)
    }

    /// The installed adapter `name`, loaded after its bytes are checked
    /// against the hash recorded when it was installed.
    async fn installed(&self, name: &str) -> Result<Option<Resolved>, ResolveError> {
        if !moat_installed::valid_name(name) {
            return Ok(None);
        }
        let Ok(catalog) = catalog() else {
            return Ok(None);
        };
        let Some((manifest, bytes)) = installed_bytes(&catalog, name)? else {
            return Ok(None);
        };
        let identity = Identity::Installed {
            name: name.to_owned(),
            sha256: manifest.sha256.clone(),
        };
        if let Some(resolved) = self.loaded.get(&identity) {
            return Ok(Some(resolved));
        }
        let adapter = self
            .sandbox
            .load_bytes(format!("installed:{name}"), bytes)
            .await
            .map_err(|error| ResolveError::Load {
                adapter: format!("the installed adapter {name}"),
                error,
            })?;
        let resolved = Resolved {
            adapter,
            provenance: Provenance::Loaded,
            source: Source::Installed(name.to_owned()),
            profile: None,
            accepted: Some(manifest.grants),
        };
        self.loaded.keep(identity, &resolved);
        Ok(Some(resolved))
    }
}
