//! The on-disk cache of compiled components.
//!
//! A compiled artifact is native code, so it is only loaded when it is
//! exactly what this process wrote: the file name is a digest of the
//! component's SHA-256 and of everything in the engine that affects code
//! generation (wasmtime's own compatibility hash, which covers its version
//! and config), and the file starts with a digest of its own contents. An
//! entry that fails either check, or that wasmtime refuses, is recompiled
//! and replaced, never trusted.
//!
//! The cache is bounded: after each write, the entries used longest ago go
//! until it fits [`BUDGET_BYTES`]; a hit marks its entry used. Entries of
//! another engine configuration (an older moat or wasmtime) are never hit
//! again, so they age out before the ones in use.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Bumped when the file layout below changes.
const FORMAT: &[u8] = b"moat-component-cache-v2";
pub(crate) const DIGEST_LEN: usize = 32;

/// Most bytes of entries the cache keeps (the one just written stays,
/// whatever its size).
pub(crate) const BUDGET_BYTES: u64 = 1 << 30;

/// A write's temporary file older than this was left by a process that
/// died mid-write: it goes when the cache is pruned.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// What an entry's file name ends with.
const ENTRY_SUFFIX: &str = ".cwasm";
/// What the name of a write's temporary file ends with (it starts with a
/// dot).
const TEMP_SUFFIX: &str = ".tmp";

/// What the cache did for one load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache without compiling.
    Hit,
    /// Compiled and stored.
    Miss,
    /// An entry was there but unusable (the reason); compiled again.
    Replaced(String),
    /// Compiled; the cache is disabled or could not be written (the reason).
    Uncached(String),
}

impl CacheOutcome {
    /// Whether the component was compiled in this load.
    pub fn compiled(&self) -> bool {
        !matches!(self, CacheOutcome::Hit)
    }
}

/// A directory of compiled components for one engine configuration.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_digest: [u8; DIGEST_LEN],
}

impl ComponentCache {
    /// A cache in `dir`, or a disabled one.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine_digest: hasher.0.finalize().into(),
        }
    }

    /// Where the entry for the component whose SHA-256 is `component`
    /// lives, when the cache is enabled. Keyed by the component's digest
    /// (which the loader computes anyway), so a load hashes its bytes once.
    pub fn entry_path(&self, component: &[u8; DIGEST_LEN]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let mut key = Sha256::new();
        key.update(FORMAT);
        key.update(self.engine_digest);
        key.update(component);
        Some(dir.join(format!("{}{ENTRY_SUFFIX}", hex(&key.finalize()))))
    }

    /// Loads the compiled form of the component whose SHA-256 is
    /// `component`, compiling it with `compile` when there is no usable
    /// entry (only then: whatever checks must precede compiling go in it).
    pub fn load_or_compile<E>(
        &self,
        engine: &Engine,
        component: &[u8; DIGEST_LEN],
        compile: impl FnOnce() -> Result<Component, E>,
    ) -> Result<(Component, CacheOutcome), E> {
        let Some(path) = self.entry_path(component) else {
            return Ok((
                compile()?,
                CacheOutcome::Uncached("the cache is disabled".into()),
            ));
        };
        let stale = match read_entry(engine, &path) {
            Ok(Some(component)) => {
                tracing::debug!(path = %path.display(), "component cache hit");
                mark_used(&path);
                return Ok((component, CacheOutcome::Hit));
            }
            Ok(None) => None,
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "discarding unusable cache entry");
                Some(reason)
            }
        };
        let component = compile()?;
        let outcome = match write_entry(&path, &component) {
            Ok(()) => {
                tracing::debug!(path = %path.display(), "component compiled and cached");
                prune(&path, BUDGET_BYTES);
                stale.map_or(CacheOutcome::Miss, CacheOutcome::Replaced)
            }
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "cannot write the component cache");
                CacheOutcome::Uncached(reason)
            }
        };
        Ok((component, outcome))
    }
}

/// `Ok(None)`: no entry. `Err`: an entry that must not be used.
fn read_entry(engine: &Engine, path: &Path) -> Result<Option<Component>, String> {
    let data = match fs::read(path) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    if data.len() < DIGEST_LEN {
        return Err("truncated".into());
    }
    let (digest, artifact) = data.split_at(DIGEST_LEN);
    if Sha256::digest(artifact).as_slice() != digest {
        return Err("contents do not match their digest".into());
    }
    // SAFETY: the artifact is byte for byte what `write_entry` stored from a
    // `Component::serialize` of this engine configuration (its digest
    // matched), and wasmtime checks its version and configuration again.
    unsafe { Component::deserialize(engine, artifact) }
        .map(Some)
        .map_err(|e| format!("refused by wasmtime: {e:#}"))
}

fn write_entry(path: &Path, component: &Component) -> Result<(), String> {
    let artifact = component.serialize().map_err(|e| format!("{e:#}"))?;
    let dir = path.parent().ok_or("no parent directory")?;
    // This user's alone: compiled code of what they ran.
    std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut data = Vec::with_capacity(DIGEST_LEN + artifact.len());
    data.extend_from_slice(&Sha256::digest(&artifact));
    data.extend_from_slice(&artifact);
    // Write then rename, so concurrent loads never see half a file.
    let temp = dir.join(format!(
        ".{}.{}{TEMP_SUFFIX}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        uuid::Uuid::new_v4()
    ));
    fs::write(&temp, &data).map_err(|e| format!("{}: {e}", temp.display()))?;
    fs::rename(&temp, path).map_err(|e| {
        let _ = fs::remove_file(&temp);
        format!("{}: {e}", path.display())
    })
}

/// Notes that the entry at `path` was used now (its modification time),
/// so pruning keeps it over entries used longer ago. Best effort: a
/// read-only cache is still a cache.
fn mark_used(path: &Path) {
    if let Err(error) = fs::File::open(path).and_then(|file| file.set_modified(SystemTime::now())) {
        tracing::debug!(path = %path.display(), "cannot mark a cache entry used: {error}");
    }
}

/// Removes the entries of `kept`'s directory used longest ago until the
/// rest, `kept` among them, takes at most `budget` bytes, and temporary
/// files abandoned mid-write. Other files are left alone. Best effort:
/// another process may be pruning too, and a removed entry is only
/// compiled again.
fn prune(kept: &Path, budget: u64) {
    let Some(dir) = kept.parent() else { return };
    let Ok(listing) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut entries = Vec::new();
    for item in listing.flatten() {
        let (path, Ok(meta)) = (item.path(), item.metadata()) else {
            continue;
        };
        let name = item.file_name();
        let name = name.to_string_lossy();
        let used = meta.modified().unwrap_or(now);
        if name.starts_with('.') && name.ends_with(TEMP_SUFFIX) {
            if now.duration_since(used).unwrap_or_default() > ABANDONED_AFTER {
                remove(&path);
            }
        } else if meta.is_file() && name.ends_with(ENTRY_SUFFIX) {
            entries.push((used, meta.len(), path));
        }
    }
    let mut total: u64 = entries.iter().map(|(_, size, _)| size).sum();
    entries.sort_by_key(|(used, _, _)| *used);
    for (_, size, path) in entries {
        if total <= budget {
            break;
        }
        if path != kept && remove(&path) {
            total -= size;
        }
    }
}

/// Removes a file of the cache; whether it is gone.
fn remove(path: &Path) -> bool {
    match fs::remove_file(path) {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "removed from the component cache");
            true
        }
        Err(error) => {
            tracing::debug!(path = %path.display(), "cannot remove a cache file: {error}");
            error.kind() == std::io::ErrorKind::NotFound
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds `Hash` output into SHA-256, for a digest stable across processes.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        // Only the SHA-256 state is used; `finish` is never called by us.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `size` bytes in `dir`, last modified `age` ago.
    fn file(dir: &Path, name: &str, size: usize, age: Duration) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, vec![0u8; size]).unwrap();
        let file = fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        path
    }

    #[test]
    fn pruning_removes_the_entries_used_longest_ago_until_the_cache_fits() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let oldest = file(dir.path(), "a.cwasm", 100, 4 * hour);
        let older = file(dir.path(), "b.cwasm", 100, 3 * hour);
        let recent = file(dir.path(), "c.cwasm", 100, hour);
        // Just written, yet with the oldest time a copy can keep: kept.
        let kept = file(dir.path(), "d.cwasm", 100, 5 * hour);
        let other = file(dir.path(), "notes.txt", 1000, 9 * hour);
        let abandoned = file(dir.path(), ".a.cwasm.1.tmp", 10, 2 * hour);
        let writing = file(dir.path(), ".b.cwasm.2.tmp", 10, Duration::ZERO);

        prune(&kept, 250);

        let exists = |path: &PathBuf| path.exists();
        assert!(
            !exists(&oldest) && !exists(&older),
            "the two used longest ago go"
        );
        assert!(exists(&recent) && exists(&kept), "the rest fits: 200 bytes");
        assert!(exists(&other), "a file that is no entry stays");
        assert!(!exists(&abandoned), "a write abandoned an hour ago goes");
        assert!(exists(&writing), "a write under way stays");

        // Within its budget, a cache loses nothing.
        prune(&kept, 250);
        assert!(exists(&recent) && exists(&kept));
    }

    #[test]
    fn a_used_entry_is_kept_over_one_written_later_and_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let used = file(dir.path(), "a.cwasm", 100, 2 * hour);
        let unused = file(dir.path(), "b.cwasm", 100, hour);
        let kept = file(dir.path(), "c.cwasm", 100, Duration::ZERO);
        mark_used(&used);

        prune(&kept, 200);

        assert!(used.exists() && kept.exists());
        assert!(!unused.exists());
    }
}
