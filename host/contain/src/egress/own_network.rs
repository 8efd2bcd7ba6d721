//! The network of a run whose programs have one of their own, once its
//! init is up: the run's proxy connects there to what the programs serve
//! on its loopback (see [`super::proxy`]).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures::future::BoxFuture;

/// What makes a socket in the run's own network: the run's init.
pub(crate) trait SocketSource: Send + Sync {
    /// A socket of `family` (`AF_INET`, `AF_INET6`) in the run's network.
    fn socket(&self, family: i32) -> BoxFuture<'_, std::io::Result<OwnedFd>>;
}

/// The run's own network, reached through its init while the init lives.
/// Empty (nothing reached) before the first program, and where the
/// programs share the host's network.
#[derive(Clone, Default)]
pub struct OwnNetwork(Arc<Mutex<Option<Weak<dyn SocketSource>>>>);

impl std::fmt::Debug for OwnNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnNetwork")
    }
}

impl OwnNetwork {
    /// The run's network is `source`'s from now on (held weakly: the run
    /// owns its init).
    pub(crate) fn set(&self, source: Arc<dyn SocketSource>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::downgrade(&source));
    }

    /// A connection to `address` in the run's network, when something
    /// listens there.
    pub(crate) async fn connect(
        &self,
        address: std::net::SocketAddr,
    ) -> Option<tokio::net::TcpStream> {
        let source = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(Weak::upgrade)?;
        let family = match address {
            std::net::SocketAddr::V4(_) => libc::AF_INET,
            std::net::SocketAddr::V6(_) => libc::AF_INET6,
        };
        let socket = source.socket(family).await.ok()?;
        drop(source);
        let socket = tokio::net::TcpSocket::from_std_stream(std::net::TcpStream::from(socket));
        socket.connect(address).await.ok()
    }
}
