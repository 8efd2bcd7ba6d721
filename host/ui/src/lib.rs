//! `moat ui`: a local web inspector of runs and workflows.
//!
//! An HTTP server bound to 127.0.0.1 only, over the same [`Runs`] the
//! command line uses (this machine's store or a cluster). Every request —
//! the page, its assets, the JSON API and the live streams — carries the
//! random token of the URL the server prints (as Jupyter does), and a
//! request whose `Host` or `Origin` is not this server's is refused, so
//! neither another user's page nor a DNS-rebinding site can read or cancel
//! runs. Live data goes out as server-sent events: a run's events by
//! [`Runs::follow`] (the mechanism of `moat logs -f`), the list of runs as
//! it changes. The front-end (web/, bundled into assets/ by `npm run
//! build`) is embedded in the binary.
//!
//! Nothing here holds up a run: a follower that falls behind is told so
//! by the runs' own follow and resumes from where it was.

mod api;
mod guard;
mod http;
mod response;

use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use moat_runs::{RunId, Runs};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Runs' workspaces, as the page shows them.
pub trait Workspaces: Send + Sync {
    /// Whether run `id` has a workspace here (cheap: the page asks on
    /// every look at a run).
    fn has(&self, id: &RunId) -> bool;
    /// Its workspace diff (`moat diff RUN`): `Ok(None)` when the run has
    /// no workspace; `Err` says why it cannot be read.
    fn diff(&self, id: RunId) -> BoxFuture<'static, Result<Option<String>, String>>;
}

/// Where runs' workspaces are found.
pub type DiffSource = Arc<dyn Workspaces>;

/// What the server is started with.
#[derive(Clone, Default)]
pub struct Settings {
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Where runs' workspace diffs come from; `None`: the page shows none.
    pub diff: Option<DiffSource>,
    /// Who answers approvals from the page, as the run's record keeps it.
    pub answerer: String,
    /// Starts the workflow files the page names; `None`: the page starts
    /// none.
    pub workflows: Option<Arc<moat_workflow::Starter>>,
}

/// The server, bound and not yet serving.
pub struct Ui {
    listener: TcpListener,
    state: Arc<State>,
}

/// What every request is served from.
pub(crate) struct State {
    pub(crate) runs: Arc<dyn Runs>,
    pub(crate) token: String,
    pub(crate) port: u16,
    pub(crate) diff: Option<DiffSource>,
    pub(crate) answerer: String,
    pub(crate) workflows: Option<Arc<moat_workflow::Starter>>,
}

impl Ui {
    /// Binds 127.0.0.1:`settings.port` with a fresh random token.
    pub async fn bind(runs: Arc<dyn Runs>, settings: Settings) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", settings.port)).await?;
        let port = listener.local_addr()?.port();
        // 244 random bits (two v4 UUIDs), as hex.
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Ok(Self {
            listener,
            state: Arc::new(State {
                runs,
                token,
                port,
                diff: settings.diff,
                workflows: settings.workflows,
                answerer: if settings.answerer.is_empty() {
                    "moat ui".into()
                } else {
                    settings.answerer
                },
            }),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.state.port))
    }

    /// The URL to open: the page, with the token.
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/?token={}",
            self.state.port, self.state.token
        )
    }

    /// Serves until `stop` is cancelled; each connection on a task of its
    /// own.
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                accepted = self.listener.accept() => accepted,
            };
            let (stream, _) = match accepted {
                Ok(accepted) => accepted,
                // Out of descriptors, a reset before accept: the next one
                // may do.
                Err(error) => {
                    tracing::warn!("moat ui: cannot accept a connection: {error}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let state = self.state.clone();
            let stop = stop.clone();
            tokio::spawn(http::connection(state, stream, stop));
        }
    }
}
