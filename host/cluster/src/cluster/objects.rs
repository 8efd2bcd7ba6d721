//! What the cluster keeps in its object stores, checked on the way out:
//! components and projects (a workspace's files, as a git bundle) by their
//! SHA-256, stored once per content; a run's changes (its workspace's
//! diff, sent back by its worker) by its run id.

use std::path::{Path, PathBuf};

use async_nats::jetstream::object_store::{GetErrorKind, ObjectStore};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::Cluster;
use crate::error::{ClusterError, nats, settled};
use moat_runs::job::is_sha256;

/// The largest component the cluster carries.
pub const MAX_COMPONENT_BYTES: u64 = 512 * 1024 * 1024;
/// The largest project (a git bundle of a workspace's files) it carries.
pub const MAX_PROJECT_BYTES: u64 = 512 * 1024 * 1024;
/// The largest set of changes a run's worker sends back.
pub const MAX_CHANGES_BYTES: u64 = 256 * 1024 * 1024;

/// One kind of object kept by its hash: what it is called, its files'
/// extension, its limit.
struct Kind {
    what: &'static str,
    extension: &'static str,
    limit: u64,
}

const COMPONENT: Kind = Kind {
    what: "component",
    extension: "wasm",
    limit: MAX_COMPONENT_BYTES,
};
const PROJECT: Kind = Kind {
    what: "project",
    extension: "bundle",
    limit: MAX_PROJECT_BYTES,
};

impl Cluster {
    /// Stores a component (once per content) and returns its SHA-256.
    pub async fn put_component(&self, bytes: &[u8]) -> Result<String, ClusterError> {
        put_by_hash(&self.components, &COMPONENT, bytes).await
    }

    /// The component `sha256` as a file in `dir`: fetched from the cluster
    /// and checked against its hash the first time, from `dir` after.
    pub async fn fetch_component(&self, sha256: &str, dir: &Path) -> Result<PathBuf, ClusterError> {
        fetch_by_hash(&self.components, &COMPONENT, sha256, dir).await
    }

    /// Stores a project's files (a git bundle; once per content) and
    /// returns its SHA-256.
    pub async fn put_project(&self, bytes: &[u8]) -> Result<String, ClusterError> {
        put_by_hash(&self.workspaces, &PROJECT, bytes).await
    }

    /// The project `sha256` as a file in `dir`, checked against its hash.
    pub async fn fetch_project(&self, sha256: &str, dir: &Path) -> Result<PathBuf, ClusterError> {
        fetch_by_hash(&self.workspaces, &PROJECT, sha256, dir).await
    }

    /// Keeps run `run`'s changes (its workspace's diff), for whoever
    /// applies them.
    pub async fn put_changes(&self, run: &str, changes: &[u8]) -> Result<(), ClusterError> {
        let failed = |message: String| ClusterError::Object {
            what: "changes",
            name: run.to_owned(),
            message,
        };
        if !crate::layout::is_run_id(run) {
            return Err(failed("not a run id".into()));
        }
        if changes.len() as u64 > MAX_CHANGES_BYTES {
            return Err(failed(format!(
                "{} bytes, over the limit of {MAX_CHANGES_BYTES}",
                changes.len()
            )));
        }
        let name = changes_name(run);
        settled(|| async {
            let mut reader = changes;
            nats(
                "workspace store",
                self.workspaces.put(name.as_str(), &mut reader).await,
            )
            .map(drop)
        })
        .await
        .map_err(|e| failed(format!("cannot store them: {e}")))
    }

    /// Run `run`'s changes, as its worker sent them back; `None` when it
    /// sent none (it has not ended, or it was lost).
    pub async fn changes(&self, run: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        if !crate::layout::is_run_id(run) {
            return Err(ClusterError::Invalid(format!("{run:?} is not a run id")));
        }
        read(&self.workspaces, &changes_name(run), MAX_CHANGES_BYTES)
            .await
            .map_err(|message| ClusterError::Object {
                what: "changes",
                name: run.to_owned(),
                message,
            })
    }

    /// Forgets run `run`'s changes (its workspace was removed).
    pub async fn remove_changes(&self, run: &str) -> Result<(), ClusterError> {
        match self.workspaces.delete(changes_name(run)).await {
            Ok(()) => Ok(()),
            Err(error)
                if error.kind()
                    == async_nats::jetstream::object_store::DeleteErrorKind::NotFound =>
            {
                Ok(())
            }
            Err(error) => Err(ClusterError::nats("workspace store")(&error)),
        }
    }
}

/// The name run `run`'s changes are kept under.
fn changes_name(run: &str) -> String {
    format!("{run}.diff")
}

/// Stores `bytes` under their SHA-256 (once: storing the same bytes again
/// changes nothing, so it is tried again through a failover).
async fn put_by_hash(
    store: &ObjectStore,
    kind: &Kind,
    bytes: &[u8],
) -> Result<String, ClusterError> {
    let sha256 = hex_sha256(bytes);
    let failed = |message: String| ClusterError::Object {
        what: kind.what,
        name: sha256.clone(),
        message,
    };
    if bytes.len() as u64 > kind.limit {
        return Err(failed(format!(
            "{} bytes, over the limit of {}",
            bytes.len(),
            kind.limit
        )));
    }
    let stored = settled(|| async {
        if store.info(&sha256).await.is_ok() {
            return Ok(());
        }
        let mut reader = bytes;
        nats(
            "object store",
            store.put(sha256.as_str(), &mut reader).await,
        )
        .map(drop)
    })
    .await;
    stored.map_err(|e| failed(format!("cannot store it: {e}")))?;
    Ok(sha256)
}

/// The object `sha256` of `kind` as a file in `dir`: fetched and checked
/// against its hash the first time, from `dir` after.
async fn fetch_by_hash(
    store: &ObjectStore,
    kind: &Kind,
    sha256: &str,
    dir: &Path,
) -> Result<PathBuf, ClusterError> {
    let failed = |message: String| ClusterError::Object {
        what: kind.what,
        name: sha256.to_owned(),
        message,
    };
    if !is_sha256(sha256) {
        return Err(failed("not a SHA-256".into()));
    }
    let name = format!("{sha256}.{}", kind.extension);
    let path = dir.join(&name);
    if path.is_file() {
        return Ok(path);
    }
    let bytes = read(store, sha256, kind.limit)
        .await
        .and_then(|bytes| bytes.ok_or_else(|| "the cluster does not have it".to_owned()))
        .map_err(|e| failed(format!("cannot fetch it from the cluster: {e}")))?;
    let actual = hex_sha256(&bytes);
    if actual != sha256 {
        return Err(failed(format!(
            "the stored bytes hash to {actual}: refused"
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    // A name of its own: runs of one worker may fetch the same object at
    // once, and one's rename must not take the other's file.
    let temp = dir.join(format!(".{name}.{}.part", uuid::Uuid::new_v4()));
    let written = std::fs::write(&temp, &bytes).and_then(|()| std::fs::rename(&temp, &path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(failed(format!("cannot write {}: {error}", path.display())));
    }
    Ok(path)
}

/// Object `name`, at most `limit` bytes; `None` when there is none. Read
/// again through a failover.
async fn read(store: &ObjectStore, name: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let bytes = settled(|| async {
        let mut object = match store.get(name).await {
            Ok(object) => object,
            Err(error) if error.kind() == GetErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(ClusterError::nats("object store")(&error)),
        };
        let mut bytes = Vec::new();
        nats(
            "object store",
            (&mut object).take(limit + 1).read_to_end(&mut bytes).await,
        )?;
        Ok(Some(bytes))
    })
    .await
    .map_err(|e| e.to_string())?;
    match bytes {
        Some(bytes) if bytes.len() as u64 > limit => Err(format!("larger than {limit} bytes")),
        other => Ok(other),
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::cluster::tests::connected;

    /// Runs of one worker fetching the same component at once each get
    /// it, whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_component_fetched_many_times_at_once_arrives_for_each() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let bytes: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let sha256 = cluster.put_component(&bytes).await.expect("stored");
        let dir = tempfile::tempdir().expect("a directory");
        for _ in 0..5 {
            // Tasks, so the fetches' writes run on both threads at once.
            let fetches = (0..8).map(|_| {
                let (cluster, sha256, dir) =
                    (cluster.clone(), sha256.clone(), dir.path().to_owned());
                tokio::spawn(async move { cluster.fetch_component(&sha256, &dir).await })
            });
            for fetched in futures::future::join_all(fetches).await {
                let path = fetched.expect("no panic").expect("fetched");
                assert_eq!(std::fs::read(path).expect("written"), bytes);
            }
            std::fs::remove_file(dir.path().join(format!("{sha256}.wasm"))).expect("there");
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("listed").collect();
        assert!(left.is_empty(), "no temporary file is left: {left:?}");
        cluster.close().await;
    }
}
