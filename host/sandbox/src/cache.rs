//! The on-disk cache of compiled components.
//!
//! A compiled artifact is native code, so it is only loaded when it is
//! exactly what this process wrote: the file name is a digest of the
//! component's SHA-256 and of everything in the engine that affects code
//! generation (wasmtime's own compatibility hash, which covers its version
//! and config), and the file ends with its length and a checksum of its
//! contents. An entry that fails either check, or that wasmtime refuses, is
//! recompiled and replaced, never trusted.
//!
//! An entry is loaded by mapping the file, not by reading it: wasmtime
//! makes the mapped code executable in place and maps a component's initial
//! linear memory (a TypeScript or Python component's snapshotted engine
//! heap, megabytes) copy-on-write straight from the file, so a load touches
//! only the pages a run uses. The checksum is XXH3-128, not SHA-256: it
//! guards against accidents (a write cut short, a file damaged on disk or
//! left half-written by a crash), which a 128-bit checksum catches as
//! surely, at 20 times the speed (a TypeScript entry is 50 MB: 1.5 ms
//! instead of 25). A cryptographic digest would buy nothing more: it is
//! not keyed, so whoever can write the cache (this user's own directory)
//! could write a matching one, and could as well write any native code.
//!
//! The cache also remembers the SHA-256 of component files it has read
//! (`*.source` records, see [`ComponentCache::remembered_digest`]), so
//! that a later load of an unchanged file finds its entry without reading
//! and hashing the file (18 MB for a Python component).
//!
//! The cache is bounded: after each write, the entries used longest ago go
//! until it fits [`BUDGET_BYTES`]; a hit marks its entry used. Entries of
//! another engine configuration (an older moat or wasmtime) are never hit
//! again, so they age out before the ones in use.

use std::fs;
use std::hash::{Hash, Hasher};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use twox_hash::XxHash3_128;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Bumped when the file layout below changes.
const FORMAT: &[u8] = b"moat-component-cache-v3";
pub(crate) const DIGEST_LEN: usize = 32;

/// What ends an entry, after wasmtime's artifact (which starts the file, so
/// that wasmtime can map it): the artifact's length (u64, little-endian),
/// its XXH3-128 (little-endian), then [`TRAILER_MAGIC`].
const TRAILER_MAGIC: &[u8; 8] = b"moatcwv3";
const TRAILER_LEN: usize = 8 + 16 + TRAILER_MAGIC.len();

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

/// What the name of a remembered source digest ends with.
const SOURCE_SUFFIX: &str = ".source";
/// Bumped when the layout of a remembered source digest changes.
const SOURCE_FORMAT: &[u8] = b"moat-source-digest-v1";
/// A remembered source digest: the file's identity ([`FileIdentity::BYTES`]),
/// its SHA-256, and an XXH3-128 of both.
const SOURCE_LEN: usize = FileIdentity::BYTES + DIGEST_LEN + 16;
/// A file is remembered only when its last change (content or metadata)
/// was at least this long before it was read: any later change then falls
/// in a later tick of the kernel's file clock, and so changes the file's
/// change time (see [`ComponentCache::remember_digest`]).
const SETTLED_AFTER: Duration = Duration::from_secs(2);
/// Remembered source digests written longer ago go when the cache is
/// pruned; a file still in use is only hashed again once.
const SOURCE_KEPT_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

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

    /// The compiled form of the component whose SHA-256 is `component`,
    /// when the cache holds a usable entry for it; never compiles.
    pub fn load(&self, engine: &Engine, component: &[u8; DIGEST_LEN]) -> Option<Component> {
        let path = self.entry_path(component)?;
        match read_entry(engine, &path) {
            Ok(Some(component)) => {
                tracing::debug!(path = %path.display(), "component cache hit");
                mark_used(&path);
                Some(component)
            }
            Ok(None) => None,
            Err(reason) => {
                // `load_or_compile` finds it again and replaces it.
                tracing::debug!(path = %path.display(), %reason, "unusable cache entry");
                None
            }
        }
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

    /// The SHA-256 this cache remembers for the component file whose
    /// metadata (taken from the open file) is `file`: that of the file's
    /// contents when it was last read, if the file has not changed since.
    ///
    /// "Not changed" is: the same device and inode, size, modification and
    /// change time. Writing a file's contents sets its change time to the
    /// kernel's current time, and no call sets it back (only setting the
    /// system clock back could), so an unchanged record means unchanged
    /// contents on a local filesystem; [`Self::remember_digest`] keeps out
    /// the one exception, a change within the same tick of the kernel's
    /// clock as the last one. A remembered digest is only ever used to
    /// find the compiled entry of that digest, which is the compiled form
    /// of contents this file really had and that really had this digest:
    /// a policy's pinned `sha256` still admits only that component. When
    /// no entry is found, the loader reads and hashes the file as before.
    pub fn remembered_digest(&self, file: &fs::Metadata) -> Option<[u8; DIGEST_LEN]> {
        let identity = FileIdentity::of(file);
        let path = self.source_path(&identity)?;
        let record = fs::read(path).ok()?;
        if record.len() != SOURCE_LEN {
            return None;
        }
        let (body, check) = record.split_at(SOURCE_LEN - 16);
        if XxHash3_128::oneshot(body).to_le_bytes() != check {
            return None;
        }
        let (remembered, digest) = body.split_at(FileIdentity::BYTES);
        (remembered == identity.bytes()).then(|| digest.try_into().expect("32 bytes"))
    }

    /// Remembers that the component file whose metadata was `before` when
    /// reading it began (`read_at`, the time just before taking it) and is
    /// `after` now has contents whose SHA-256 is `digest`. Only when the
    /// file did not change while it was read and its last change was at
    /// least [`SETTLED_AFTER`] before `read_at`: a change after that falls
    /// in a later tick of the file clock, so it changes the change time a
    /// later load compares. Best effort, like the rest of the cache.
    pub fn remember_digest(
        &self,
        before: &fs::Metadata,
        after: &fs::Metadata,
        read_at: SystemTime,
        digest: &[u8; DIGEST_LEN],
    ) {
        let identity = FileIdentity::of(before);
        if identity != FileIdentity::of(after) || !identity.settled_at(read_at) {
            return;
        }
        let Some(path) = self.source_path(&identity) else {
            return;
        };
        let mut record = Vec::with_capacity(SOURCE_LEN);
        record.extend_from_slice(&identity.bytes());
        record.extend_from_slice(digest);
        record.extend_from_slice(&XxHash3_128::oneshot(&record).to_le_bytes());
        if let Err(reason) = write_atomically(&path, &record) {
            tracing::debug!(path = %path.display(), %reason, "cannot remember a component's digest");
        }
    }

    /// Where the remembered digest of the file of `identity` lives: one
    /// record per file (device and inode), replaced when the file changes.
    fn source_path(&self, identity: &FileIdentity) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let mut key = Sha256::new();
        key.update(SOURCE_FORMAT);
        key.update(identity.dev.to_le_bytes());
        key.update(identity.ino.to_le_bytes());
        Some(dir.join(format!("{}{SOURCE_SUFFIX}", hex(&key.finalize()))))
    }
}

/// What tells a file's version apart without reading it: where it is
/// (device, inode), its size, and when its contents and its metadata last
/// changed. Writing a file sets its change time to the kernel's current
/// time, which no call sets back: a file with the same identity has had no
/// write since (but see [`ComponentCache::remember_digest`] for a write in
/// the same tick of the kernel's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

impl FileIdentity {
    const BYTES: usize = 7 * 8;

    /// The identity of the file `meta` describes.
    pub fn of(meta: &fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }

    fn bytes(&self) -> [u8; Self::BYTES] {
        let mut bytes = [0; Self::BYTES];
        let fields = [
            self.dev,
            self.ino,
            self.size,
            self.mtime as u64,
            self.mtime_nsec as u64,
            self.ctime as u64,
            self.ctime_nsec as u64,
        ];
        for (chunk, field) in bytes.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        bytes
    }

    /// Whether the file's last change (of contents or metadata) was at
    /// least [`SETTLED_AFTER`] (2 s) before `time`: then any later write
    /// falls in a later tick of the kernel's file clock and changes the
    /// identity, which a write in the same tick might not.
    pub fn settled_at(&self, time: SystemTime) -> bool {
        let Ok(now) = time.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let last_change = |secs: i64, nsecs: i64| {
            u64::try_from(secs)
                .ok()
                .map(|s| Duration::new(s, u32::try_from(nsecs).unwrap_or(0)))
        };
        match (
            last_change(self.mtime, self.mtime_nsec),
            last_change(self.ctime, self.ctime_nsec),
        ) {
            (Some(modified), Some(changed)) => modified.max(changed) + SETTLED_AFTER <= now,
            _ => false,
        }
    }
}

/// `Ok(None)`: no entry. `Err`: an entry that must not be used.
fn read_entry(engine: &Engine, path: &Path) -> Result<Option<Component>, String> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    let meta = file.metadata().map_err(|e| format!("unreadable: {e}"))?;
    // SAFETY: entries are only ever replaced by renaming a new file over
    // them, never written in place, so the mapped bytes do not change
    // while they are read.
    let mapped = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot map: {e}"))?;
    if mapped.len() <= TRAILER_LEN {
        return Err("truncated".into());
    }
    let (artifact, trailer) = mapped.split_at(mapped.len() - TRAILER_LEN);
    let (length, rest) = trailer.split_at(8);
    let (checksum, magic) = rest.split_at(16);
    if magic != TRAILER_MAGIC || length != (artifact.len() as u64).to_le_bytes() {
        return Err("truncated or of another layout".into());
    }
    if XxHash3_128::oneshot(artifact).to_le_bytes() != checksum {
        return Err("contents do not match their checksum".into());
    }
    // wasmtime maps the file itself (code executable in place, memory
    // images copy-on-write from the file), through the descriptor checked
    // above: a rename over the entry's name since cannot swap in another
    // file. Where /proc is not mounted, it copies the checked bytes.
    let reopened = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let same_file = fs::metadata(&reopened)
        .is_ok_and(|found| (found.dev(), found.ino()) == (meta.dev(), meta.ino()));
    // SAFETY: the artifact is byte for byte what `write_entry` stored from a
    // `Component::serialize` of this engine configuration (its length and
    // checksum matched), and wasmtime checks its version and configuration
    // again. Entries are only ever replaced by renaming a new file over
    // them, never written in place, so the mapped file does not change
    // under wasmtime (the condition of `deserialize_file`).
    let component = if same_file {
        unsafe { Component::deserialize_file(engine, &reopened) }
    } else {
        unsafe { Component::deserialize(engine, artifact) }
    };
    component
        .map(Some)
        .map_err(|e| format!("refused by wasmtime: {e:#}"))
}

fn write_entry(path: &Path, component: &Component) -> Result<(), String> {
    let mut data = component.serialize().map_err(|e| format!("{e:#}"))?;
    let checksum = XxHash3_128::oneshot(&data);
    let length = data.len() as u64;
    data.extend_from_slice(&length.to_le_bytes());
    data.extend_from_slice(&checksum.to_le_bytes());
    data.extend_from_slice(TRAILER_MAGIC);
    write_atomically(path, &data)
}

/// Writes `data` to a temporary file beside `path`, then renames it to
/// `path`, so concurrent loads never see half a file.
fn write_atomically(path: &Path, data: &[u8]) -> Result<(), String> {
    let dir = path.parent().ok_or("no parent directory")?;
    // This user's alone: compiled code of what they ran.
    std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let temp = dir.join(format!(
        ".{}.{}{TEMP_SUFFIX}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        uuid::Uuid::new_v4()
    ));
    fs::write(&temp, data).map_err(|e| format!("{}: {e}", temp.display()))?;
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
/// rest, `kept` among them, takes at most `budget` bytes, temporary
/// files abandoned mid-write and remembered source digests written more
/// than [`SOURCE_KEPT_FOR`] ago. Other files are left alone. Best effort:
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
        } else if meta.is_file()
            && name.ends_with(SOURCE_SUFFIX)
            && now.duration_since(used).unwrap_or_default() > SOURCE_KEPT_FOR
        {
            remove(&path);
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
        let old_source = file(dir.path(), "e.source", 100, SOURCE_KEPT_FOR + hour);
        let source = file(dir.path(), "f.source", 100, SOURCE_KEPT_FOR - hour);

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
        assert!(!exists(&old_source), "a digest remembered long ago goes");
        assert!(exists(&source), "a recent one stays");

        // Within its budget, a cache loses nothing.
        prune(&kept, 250);
        assert!(exists(&recent) && exists(&kept));
    }

    fn engine() -> Engine {
        Engine::new(&crate::config::wasmtime_config(0)).unwrap()
    }

    /// The built-in echo, its SHA-256 and an engine, for entries of a real
    /// component.
    fn echo() -> (Engine, &'static [u8], [u8; DIGEST_LEN]) {
        let bytes = moat_builtins::component("echo").expect("echo is built in");
        (engine(), bytes, Sha256::digest(bytes).into())
    }

    fn load_or_compile(
        cache: &ComponentCache,
        engine: &Engine,
        bytes: &[u8],
        digest: &[u8; DIGEST_LEN],
    ) -> CacheOutcome {
        cache
            .load_or_compile(engine, digest, || Component::new(engine, bytes))
            .unwrap()
            .1
    }

    #[test]
    fn an_entry_is_the_artifact_then_its_length_and_checksum_and_loads_again() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, bytes, digest) = echo();
        let cache = ComponentCache::new(&engine, Some(dir.path().into()));
        assert!(cache.load(&engine, &digest).is_none(), "nothing cached yet");
        assert_eq!(
            load_or_compile(&cache, &engine, bytes, &digest),
            CacheOutcome::Miss
        );

        let entry = fs::read(cache.entry_path(&digest).unwrap()).unwrap();
        let (artifact, trailer) = entry.split_at(entry.len() - TRAILER_LEN);
        assert!(
            artifact.starts_with(b"\x7fELF"),
            "wasmtime's artifact first"
        );
        assert_eq!(trailer[..8], (artifact.len() as u64).to_le_bytes());
        assert_eq!(trailer[8..24], XxHash3_128::oneshot(artifact).to_le_bytes());
        assert_eq!(&trailer[24..], TRAILER_MAGIC);

        // As in a new process: the entry is mapped and runs.
        let component = cache.load(&engine, &digest).expect("a hit");
        let mut linker = wasmtime::component::Linker::<()>::new(&engine);
        linker.define_unknown_imports_as_traps(&component).unwrap();
        assert!(linker.instantiate_pre(&component).is_ok());
        assert_eq!(
            load_or_compile(&cache, &engine, bytes, &digest),
            CacheOutcome::Hit
        );
    }

    #[test]
    fn an_entry_damaged_anywhere_or_cut_short_is_never_loaded_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, bytes, digest) = echo();
        let cache = ComponentCache::new(&engine, Some(dir.path().into()));
        load_or_compile(&cache, &engine, bytes, &digest);
        let path = cache.entry_path(&digest).unwrap();
        let good = fs::read(&path).unwrap();

        let mut damaged = Vec::new();
        for at in [0, 100, good.len() / 2, good.len() - TRAILER_LEN - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 0x01;
            damaged.push(bytes);
        }
        for at in [good.len() - TRAILER_LEN, good.len() - 20, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 0x01;
            damaged.push(bytes);
        }
        for len in [0, 5, TRAILER_LEN, good.len() / 2, good.len() - 1] {
            damaged.push(good[..len].to_vec());
        }
        let mut longer = good.clone();
        longer.push(0);
        damaged.push(longer);

        for bad in damaged {
            fs::write(&path, &bad).unwrap();
            assert!(
                cache.load(&engine, &digest).is_none(),
                "{} bytes loaded",
                bad.len()
            );
            assert!(
                matches!(
                    load_or_compile(&cache, &engine, bytes, &digest),
                    CacheOutcome::Replaced(_)
                ),
                "{} bytes not replaced",
                bad.len()
            );
            assert_eq!(fs::read(&path).unwrap().len(), good.len(), "rewritten");
            assert!(cache.load(&engine, &digest).is_some());
        }
    }

    /// A component file's metadata, as the loader takes it.
    fn meta(path: &Path) -> fs::Metadata {
        fs::File::open(path).unwrap().metadata().unwrap()
    }

    #[test]
    fn a_digest_is_remembered_only_for_a_file_unchanged_since_and_settled_before_it_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(&engine(), Some(dir.path().join("cache")));
        let file = dir.path().join("adapter.wasm");
        fs::write(&file, b"first contents").unwrap();
        let digest = [7u8; DIGEST_LEN];
        let before = meta(&file);
        let just_changed = SystemTime::now();
        let settled = just_changed + SETTLED_AFTER + Duration::from_millis(100);

        // Read within the settling time of its last change: not remembered.
        cache.remember_digest(&before, &before, just_changed, &digest);
        assert_eq!(cache.remembered_digest(&before), None);

        // Changed while it was read: not remembered.
        std::thread::sleep(Duration::from_millis(50));
        fs::write(&file, b"other contents").unwrap();
        let after = meta(&file);
        cache.remember_digest(&before, &after, settled, &digest);
        assert_eq!(cache.remembered_digest(&before), None);
        assert_eq!(cache.remembered_digest(&after), None);

        // Unchanged and settled: remembered, for that version of the file.
        let before = after;
        cache.remember_digest(&before, &before, settled, &digest);
        assert_eq!(cache.remembered_digest(&before), Some(digest));
        assert_eq!(cache.remembered_digest(&meta(&file)), Some(digest));

        // Written again, even to the same size and modification time: its
        // change time moved, so it is read again.
        std::thread::sleep(Duration::from_millis(50));
        fs::write(&file, b"third contents").unwrap();
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(before.modified().unwrap())
            .unwrap();
        let now = meta(&file);
        assert_eq!(
            (now.len(), now.mtime_nsec()),
            (before.len(), before.mtime_nsec())
        );
        assert_eq!(cache.remembered_digest(&now), None);

        // Another file: nothing remembered for it.
        let other = dir.path().join("other.wasm");
        fs::copy(&file, &other).unwrap();
        assert_eq!(cache.remembered_digest(&meta(&other)), None);

        // A damaged record is not used.
        cache.remember_digest(&now, &now, settled + SETTLED_AFTER, &digest);
        assert_eq!(cache.remembered_digest(&now), Some(digest));
        let record = cache.source_path(&FileIdentity::of(&now)).unwrap();
        let mut bytes = fs::read(&record).unwrap();
        bytes[FileIdentity::BYTES] ^= 1;
        fs::write(&record, &bytes).unwrap();
        assert_eq!(cache.remembered_digest(&now), None);
        fs::write(&record, &bytes[..10]).unwrap();
        assert_eq!(cache.remembered_digest(&now), None);

        // A disabled cache remembers nothing.
        let disabled = ComponentCache::new(&engine(), None);
        disabled.remember_digest(&now, &now, settled + SETTLED_AFTER, &digest);
        assert_eq!(disabled.remembered_digest(&now), None);
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
