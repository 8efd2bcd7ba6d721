//! What can go wrong talking to the cluster, in the cluster's own words.

use std::time::Duration;

/// A failure of a cluster operation.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The servers could not be reached or refused the connection.
    #[error("cannot connect to NATS at {urls}: {message}")]
    Connect {
        /// The URLs tried.
        urls: String,
        /// Why (the client's words).
        message: String,
    },
    /// The connection settings are wrong: a URL, a credentials file.
    #[error("{0}")]
    Settings(String),
    /// A JetStream or key-value operation failed.
    #[error("the cluster's {what} failed: {message}")]
    Nats {
        /// Which operation.
        what: &'static str,
        /// Why (the client's words).
        message: String,
    },
    /// No run with this id (or prefix) is in the cluster.
    #[error("no run {0} in the cluster")]
    NotFound(String),
    /// A run id prefix names more than one run.
    #[error("{0}")]
    Ambiguous(String),
    /// The request asks for more than whoever started it holds.
    #[error("{0}")]
    BoundaryViolation(String),
    /// Something read from the cluster or a request is malformed.
    #[error("{0}")]
    Invalid(String),
    /// An object (a component, a project, a run's changes) could not be
    /// stored, found or verified.
    #[error("{what} {name}: {message}")]
    Object {
        /// What it is.
        what: &'static str,
        /// Its name: a SHA-256, a run id.
        name: String,
        /// What went wrong.
        message: String,
    },
}

impl ClusterError {
    /// A failed NATS operation `what`, from the client's error.
    pub(crate) fn nats(what: &'static str) -> impl FnOnce(&dyn std::fmt::Display) -> Self {
        move |error| Self::Nats {
            what,
            message: error.to_string(),
        }
    }
}

impl ClusterError {
    /// Whether the failure may pass by itself: a cluster electing a new
    /// leader after a node died, a stream just made and not yet on every
    /// node.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Nats { message, .. } => TRANSIENT.iter().any(|words| message.contains(words)),
            _ => false,
        }
    }
}

/// What the client says of failures that pass once the cluster settles.
const TRANSIENT: [&str; 6] = [
    "timed out",
    "no responders",
    "no stream found",
    "unavailable",
    "no suitable peers",
    // A consumer (an object's chunks being read) whose server went away
    // mid-read: read again, it is served by the new leader.
    "missed idle heartbeat",
];

/// How long an operation is retried through transient failures. A
/// failover elects new leaders within seconds on an idle machine; on a
/// loaded one (two cores, replicated streams being written) CI saw one
/// take over 20 s, and a submit that fails then is lost work.
pub(crate) const SETTLE: std::time::Duration = std::time::Duration::from_secs(60);

/// `operation`, tried again through transient failures for up to
/// [`SETTLE`].
pub(crate) async fn settled<T, F, Fut>(mut operation: F) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        match operation().await {
            Err(error) if error.is_transient() && tokio::time::Instant::now() < deadline => {
                tracing::info!("the cluster is settling ({error}); trying again");
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            other => return other,
        }
    }
}

/// `result`'s error as a [`ClusterError::Nats`] for operation `what`.
pub(crate) fn nats<T, E: std::fmt::Display>(
    what: &'static str,
    result: Result<T, E>,
) -> Result<T, ClusterError> {
    result.map_err(|error| ClusterError::nats(what)(&error))
}

/// `operation` (NATS operation `what`), given up as timed out, a transient
/// failure, after `patience`.
pub(crate) async fn within<T>(
    patience: Duration,
    what: &'static str,
    operation: impl Future<Output = Result<T, ClusterError>>,
) -> Result<T, ClusterError> {
    tokio::time::timeout(patience, operation)
        .await
        .unwrap_or_else(|_| {
            Err(ClusterError::Nats {
                what,
                message: format!("timed out after {} s", patience.as_secs()),
            })
        })
}

impl From<moat_runs::InvalidJob> for ClusterError {
    fn from(invalid: moat_runs::InvalidJob) -> Self {
        Self::Invalid(invalid.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_operation_that_never_answers_is_given_up_as_a_transient_failure() {
        let never = std::future::pending::<Result<(), ClusterError>>();
        let error = within(Duration::from_secs(10), "keys", never)
            .await
            .expect_err("given up");
        assert!(error.is_transient(), "{error}");
        assert_eq!(
            error.to_string(),
            "the cluster's keys failed: timed out after 10 s"
        );
        let answered = within(Duration::from_secs(10), "keys", async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
    }
}
