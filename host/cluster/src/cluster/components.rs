//! Components in the cluster's object store, by SHA-256: stored once per
//! content, fetched into a worker's directory and checked against their
//! hash.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::Cluster;
use crate::error::{ClusterError, nats, settled};
use crate::job::is_sha256;

/// The largest component the cluster carries.
pub const MAX_COMPONENT_BYTES: u64 = 512 * 1024 * 1024;

impl Cluster {
    /// Stores a component (once per content) and returns its SHA-256.
    pub async fn put_component(&self, bytes: &[u8]) -> Result<String, ClusterError> {
        let sha256 = hex_sha256(bytes);
        // Tried again through a failover; storing the same bytes twice
        // under their hash changes nothing.
        let stored = settled(|| async {
            if self.components.info(&sha256).await.is_ok() {
                return Ok(());
            }
            let mut reader = bytes;
            nats(
                "component store",
                self.components.put(sha256.as_str(), &mut reader).await,
            )
            .map(drop)
        })
        .await;
        stored.map_err(|e| ClusterError::Component {
            sha256: sha256.clone(),
            message: format!("cannot store it: {e}"),
        })?;
        Ok(sha256)
    }

    /// The component `sha256` as a file in `dir`: fetched from the cluster
    /// and checked against its hash the first time, from `dir` after.
    pub async fn fetch_component(&self, sha256: &str, dir: &Path) -> Result<PathBuf, ClusterError> {
        let failed = |message: String| ClusterError::Component {
            sha256: sha256.to_owned(),
            message,
        };
        if !is_sha256(sha256) {
            return Err(failed("not a SHA-256".into()));
        }
        let path = dir.join(format!("{sha256}.wasm"));
        if path.is_file() {
            return Ok(path);
        }
        // Fetched again through a failover (the hash below checks what
        // arrives, whichever attempt brought it).
        let bytes = settled(|| async {
            let mut object = nats("component store", self.components.get(sha256).await)?;
            let mut bytes = Vec::new();
            nats(
                "component store",
                (&mut object)
                    .take(MAX_COMPONENT_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .await,
            )?;
            Ok(bytes)
        })
        .await
        .map_err(|e| {
            failed(format!(
                "cannot fetch it from the cluster's component store: {e}"
            ))
        })?;
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(failed(format!("larger than {MAX_COMPONENT_BYTES} bytes")));
        }
        let actual = hex_sha256(&bytes);
        if actual != sha256 {
            return Err(failed(format!(
                "the stored bytes hash to {actual}: refused"
            )));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
        // A name of its own: runs of one worker may fetch the same
        // component at once, and one's rename must not take the other's
        // file.
        let temp = dir.join(format!(".{sha256}.{}.part", uuid::Uuid::new_v4()));
        let written = std::fs::write(&temp, &bytes).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(failed(format!("cannot write {}: {error}", path.display())));
        }
        Ok(path)
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
