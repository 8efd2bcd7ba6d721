//! A connection to the cluster: the [`Cluster`] every moat process holds,
//! made with the streams and buckets it needs when they are missing. Its
//! operations on runs are in the modules below, each an `impl Cluster`:
//!
//! - [`records`]: run records in the records bucket — submit, get,
//!   update, list, resolve, cancel, and end a run once;
//! - [`follow`]: a run's events in the event stream — publishing them,
//!   reading the stored ones, following them live to the `done`, waiting
//!   for the run to end;
//! - [`lost_workers`]: runs whose worker stopped beating, ended or queued
//!   again, and the live entries that search reads;
//! - [`objects`]: components and projects in the object stores, by
//!   SHA-256; runs' changes, by run id.

mod approvals;
mod follow;
mod lost_workers;
pub(crate) mod objects;
pub(crate) mod records;
mod unqueued;

use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store, stream};
use futures::StreamExt;

use crate::error::{ClusterError, nats, settled, within};
use crate::layout;
use crate::settings::{Auth, Settings};

/// How long stored events are kept.
const EVENTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How long a worker may hold a run's message without a sign of progress
/// before JetStream offers it to another worker (which then finds the run
/// claimed and leaves it).
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(30);
/// How long one JetStream request waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a read of a consumer through to its end may wait: for the
/// whole listing of a bucket's keys, for each delivery of a run's stored
/// messages (a long run has many). A failover can leave a consumer waiting
/// for deliveries that never come (seen with a NATS node killed): each
/// request in it has its timeout, the wait between them has none.
const LISTING_PATIENCE: Duration = Duration::from_secs(10);

/// One moat process's connection to the cluster.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) runs: stream::Stream,
    events: stream::Stream,
    pub(crate) records: kv::Store,
    pub(crate) live: kv::Store,
    live_stream: stream::Stream,
    pub(crate) workers: kv::Store,
    components: object_store::ObjectStore,
    workspaces: object_store::ObjectStore,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects (`name` is how servers list this client) and makes the
    /// streams and buckets that are missing.
    pub async fn connect(settings: &Settings, name: &str) -> Result<Self, ClusterError> {
        let client = connect_client(settings, name).await?;
        // A cluster that just started may not have elected its JetStream
        // leader yet: its first requests time out. Give it a while.
        settled(|| Self::with_layout(client.clone(), settings)).await
    }

    /// The streams and buckets, made when missing.
    async fn with_layout(
        client: async_nats::Client,
        settings: &Settings,
    ) -> Result<Self, ClusterError> {
        // Short requests, tried again (`settled`): while a cluster elects a
        // new leader, one request may go unanswered where the next is not.
        let js = jetstream::ContextBuilder::new()
            .timeout(REQUEST_TIMEOUT)
            .build(client.clone());
        if let Some(found) = Self::found_layout(&client, &js).await {
            return Ok(found);
        }
        let replicas = settings.replicas.max(1);
        let runs = made_stream(
            &js,
            "work queue",
            stream::Config {
                name: layout::RUNS_STREAM.into(),
                subjects: vec![layout::RUNS_SUBJECT.into()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                num_replicas: replicas,
                ..Default::default()
            },
        )
        .await?;
        let events = made_stream(
            &js,
            "event stream",
            stream::Config {
                name: layout::EVENTS_STREAM.into(),
                subjects: vec![layout::EVENTS_SUBJECTS.into()],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age: EVENTS_MAX_AGE,
                num_replicas: replicas,
                ..Default::default()
            },
        )
        .await?;
        let records = key_value(&js, layout::RECORDS_BUCKET, Duration::ZERO, replicas).await?;
        let live = key_value(&js, layout::LIVE_BUCKET, Duration::ZERO, replicas).await?;
        let workers = key_value(
            &js,
            layout::WORKERS_BUCKET,
            settings.worker_timeout,
            replicas,
        )
        .await?;
        let live_stream = format!("KV_{}", layout::LIVE_BUCKET);
        let live_stream = found_once_made("bucket", || js.get_stream(&live_stream)).await?;
        let components = object_store(&js, layout::COMPONENTS_BUCKET, replicas).await?;
        let workspaces = object_store(&js, layout::WORKSPACES_BUCKET, replicas).await?;
        Ok(Self {
            client,
            js,
            runs,
            events,
            records,
            live,
            live_stream,
            workers,
            components,
            workspaces,
        })
    }

    /// The streams and buckets when every one is there, looked up together:
    /// a process that connects to a cluster in use (every `moat run
    /// --nats`) waits for the slowest lookup, not for eight in turn. `None`
    /// when any is missing or not answering yet: then [`Self::with_layout`]
    /// makes them one after another, as a fresh cluster needs (a bucket
    /// just made is not found at once while its replicas elect a leader).
    async fn found_layout(client: &async_nats::Client, js: &jetstream::Context) -> Option<Self> {
        let live_stream = format!("KV_{}", layout::LIVE_BUCKET);
        let found = tokio::try_join!(
            async { js.get_stream(layout::RUNS_STREAM).await.map_err(drop) },
            async { js.get_stream(layout::EVENTS_STREAM).await.map_err(drop) },
            async { js.get_key_value(layout::RECORDS_BUCKET).await.map_err(drop) },
            async { js.get_key_value(layout::LIVE_BUCKET).await.map_err(drop) },
            async { js.get_stream(&live_stream).await.map_err(drop) },
            async { js.get_key_value(layout::WORKERS_BUCKET).await.map_err(drop) },
            async {
                js.get_object_store(layout::COMPONENTS_BUCKET)
                    .await
                    .map_err(drop)
            },
            async {
                js.get_object_store(layout::WORKSPACES_BUCKET)
                    .await
                    .map_err(drop)
            },
        );
        let (runs, events, records, live, live_stream, workers, components, workspaces) =
            found.ok()?;
        Some(Self {
            client: client.clone(),
            js: js.clone(),
            runs,
            events,
            records,
            live,
            live_stream,
            workers,
            components,
            workspaces,
        })
    }

    /// Closes the connection once everything sent has reached the server.
    pub async fn close(&self) {
        let _ = self.client.flush().await;
    }
}

/// Every key of `bucket`.
async fn keys(bucket: &kv::Store) -> Result<Vec<String>, ClusterError> {
    let listing = async {
        let mut keys = nats("keys", bucket.keys().await)?;
        let mut all = Vec::new();
        while let Some(key) = keys.next().await {
            all.push(nats("keys", key)?);
        }
        Ok(all)
    };
    within(LISTING_PATIENCE, "keys", listing).await
}

/// The key-value bucket `name`, made when missing. Made as the stream
/// the client's own `create_key_value` would make, without its account
/// query, whose answer from a 2.9 server (Debian's) this client cannot
/// read.
async fn key_value(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    let config = stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        max_message_size: -1,
        max_bytes: -1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        // Reads go to the stream's leader: a replica may be behind, and a
        // record read stale would make every compare-and-set retry.
        allow_direct: false,
        num_replicas: replicas,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    made_stream(js, "bucket", config).await?;
    found_once_made("bucket", || js.get_key_value(name)).await
}

/// The stream `config` names, made as `config` says when missing. A stream
/// that is there is used as it is, whatever settings it was made with
/// (another moat may have made it meanwhile, with other replicas): using
/// the cluster never depends on repeating them.
async fn made_stream(
    js: &jetstream::Context,
    what: &'static str,
    config: stream::Config,
) -> Result<stream::Stream, ClusterError> {
    let name = config.name.clone();
    if let Ok(stream) = js.get_stream(&name).await {
        return Ok(stream);
    }
    match js.create_stream(config).await {
        Ok(stream) => Ok(stream),
        Err(error) => made_meanwhile(|| js.get_stream(&name))
            .await
            .ok_or_else(|| ClusterError::nats(what)(&error)),
    }
}

/// What was just made, here or by another moat, looked up until the server
/// answering knows it: a replicated stream made a moment ago may not be
/// known yet to every server ("stream not found"). The error of the last
/// look-up when it never is.
async fn found_once_made<T, E, F, Fut>(what: &'static str, get: F) -> Result<T, ClusterError>
where
    E: std::fmt::Display,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    match made_meanwhile(&get).await {
        Some(found) => Ok(found),
        None => nats(what, get().await),
    }
}

/// What another moat made while this one tried to make it too: found with
/// `get` once it is up (a replicated stream takes a moment to elect its
/// leader, and answers nothing until then).
async fn made_meanwhile<T, E, F, Fut>(get: F) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    for _ in 0..MADE_MEANWHILE_TRIES {
        if let Ok(made) = get().await {
            return Some(made);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// How many times [`made_meanwhile`] looks (a quarter of a second apart).
const MADE_MEANWHILE_TRIES: usize = 20;

/// The object store `name`, made when missing, used as it is when there
/// (as [`made_stream`]).
async fn object_store(
    js: &jetstream::Context,
    name: &str,
    replicas: usize,
) -> Result<object_store::ObjectStore, ClusterError> {
    if let Ok(store) = js.get_object_store(name).await {
        return Ok(store);
    }
    let made = js
        .create_object_store(object_store::Config {
            bucket: name.into(),
            storage: stream::StorageType::File,
            num_replicas: replicas,
            ..Default::default()
        })
        .await;
    match made {
        Ok(store) => Ok(store),
        // Made meanwhile (by another moat, or by this request whose answer
        // was lost): use it.
        Err(error) => made_meanwhile(|| js.get_object_store(name))
            .await
            .ok_or_else(|| ClusterError::nats("object store")(&error)),
    }
}

/// A client connected with `settings`' credentials and TLS.
async fn connect_client(
    settings: &Settings,
    name: &str,
) -> Result<async_nats::Client, ClusterError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5));
    options = match &settings.auth {
        Auth::None => options,
        Auth::Token(token) => options.token(token.clone()),
        Auth::UserPassword { user, password } => {
            options.user_and_password(user.clone(), password.clone())
        }
        Auth::Nkey(seed) => options.nkey(seed.clone()),
        Auth::CredsFile(path) => options.credentials_file(path).await.map_err(|e| {
            ClusterError::Settings(format!(
                "cannot read the NATS creds file {}: {e}",
                path.display()
            ))
        })?,
    };
    let tls = &settings.tls;
    if tls.required {
        options = options.require_tls(true);
    }
    if let Some(ca) = &tls.ca {
        options = options.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    let urls = settings.urls.join(",");
    let addresses: Vec<async_nats::ServerAddr> = settings
        .urls
        .iter()
        .map(|url| url.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| ClusterError::Settings(format!("the NATS URL in {urls}: {e}")))?;
    // The first connection must come within a bounded time: a user waits.
    let connect = options.connect(addresses);
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(ClusterError::Connect {
            urls,
            message: error.to_string(),
        }),
        Err(_) => Err(ClusterError::Connect {
            urls,
            message: "no server answered within 10 s; is nats-server running there (with -js)?"
                .into(),
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use moat_testkit::nats;

    use super::*;

    /// A cluster of one fresh `nats-server`, kept running while the server
    /// is held; `None` (the test skips) without `nats-server`.
    pub(crate) async fn connected() -> Option<(nats::NatsServer, Cluster)> {
        if !nats::available() {
            return None;
        }
        let server = nats::server(&[]);
        let settings = Settings::new(&server.url(), None).expect("settings");
        let cluster = Cluster::connect(&settings, "moat tests")
            .await
            .expect("connects");
        Some((server, cluster))
    }
}
