//! TLS to a granted destination, for a component's `wasi:http` requests
//! and for the programs' proxy (a secret's route): one client
//! configuration, the web's root certificates, made once per process.

use std::sync::{Arc, OnceLock};

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// Why TLS to a destination did not start.
#[derive(Debug, thiserror::Error)]
pub enum TlsFailure {
    /// The host is neither a DNS name nor an IP address literal.
    #[error("invalid DNS name")]
    InvalidName,
    /// The client configuration could not be made.
    #[error("TLS setup failed: {0}")]
    Setup(String),
    /// The handshake failed (a certificate refused, the peer gone).
    #[error("TLS handshake: {0}")]
    Handshake(std::io::Error),
}

/// TLS over the already connected `stream`, verifying the certificate
/// against `host` (a name, or an IP address literal) with the web's root
/// certificates.
pub async fn handshake(stream: TcpStream, host: &str) -> Result<TlsStream<TcpStream>, TlsFailure> {
    let config = client_config()?;
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| TlsFailure::InvalidName)?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await
        .map_err(TlsFailure::Handshake)
}

/// The TLS client configuration, made once per process.
fn client_config() -> Result<Arc<rustls::ClientConfig>, TlsFailure> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            // The provider is named, not taken from the process default, so
            // another crate enabling a second provider cannot make this
            // ambiguous.
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|builder| Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(TlsFailure::Setup)
}
