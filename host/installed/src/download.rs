//! Downloading a component to install: HTTPS only (a redirect too), the
//! server's certificate checked against the web's roots, the body bounded
//! while it arrives, the whole bounded in time. The bytes are only
//! returned: the caller checks their hash before anything is written.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How many redirects are followed.
const MAX_REDIRECTS: usize = 5;

/// Why a download failed.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// Not an `https://` URL.
    #[error("{0}: only https:// URLs are downloaded")]
    NotHttps(String),
    /// The URL cannot be parsed or has no host.
    #[error("{0}: not a URL moat can download")]
    BadUrl(String),
    /// Connecting, TLS or HTTP failed.
    #[error("{url}: {reason}")]
    Transfer {
        /// The URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered something other than the file.
    #[error("{url}: the server answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// Its status.
        status: u16,
    },
    /// The file is larger than allowed.
    #[error("{url}: larger than {limit} bytes; not downloaded")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// It took longer than allowed.
    #[error("{url}: took longer than {}", humantime::format_duration(*.timeout))]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        timeout: Duration,
    },
}

/// How a download is bounded and whom it trusts.
#[derive(Clone)]
pub struct Downloader {
    /// The most bytes accepted.
    pub max_bytes: u64,
    /// The most the whole download may take.
    pub timeout: Duration,
    roots: Arc<rustls::RootCertStore>,
}

impl Downloader {
    /// A downloader trusting the web's roots.
    pub fn new(max_bytes: u64, timeout: Duration) -> Self {
        Self::with_roots(
            max_bytes,
            timeout,
            rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            },
        )
    }

    /// A downloader trusting only `roots` (tests use their own authority).
    pub fn with_roots(max_bytes: u64, timeout: Duration, roots: rustls::RootCertStore) -> Self {
        Self {
            max_bytes,
            timeout,
            roots: Arc::new(roots),
        }
    }

    /// The bytes at `url`, following HTTPS redirects.
    pub async fn fetch(&self, url: &str) -> Result<Vec<u8>, DownloadError> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.follow(url))
            .await
            .map_err(|_| DownloadError::Timeout {
                url: url.to_owned(),
                timeout,
            })?
    }

    async fn follow(&self, url: &str) -> Result<Vec<u8>, DownloadError> {
        let mut url = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            match self.get(&url).await? {
                Fetched::Body(bytes) => return Ok(bytes),
                Fetched::Redirect(next) => url = next,
            }
        }
        Err(DownloadError::Transfer {
            url,
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    async fn get(&self, url: &str) -> Result<Fetched, DownloadError> {
        let uri: http::Uri = url
            .parse()
            .map_err(|_| DownloadError::BadUrl(url.to_owned()))?;
        if uri.scheme_str() != Some("https") {
            return Err(DownloadError::NotHttps(url.to_owned()));
        }
        let host = uri
            .host()
            .ok_or_else(|| DownloadError::BadUrl(url.to_owned()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let transfer = |reason: String| DownloadError::Transfer {
            url: url.to_owned(),
            reason,
        };
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| transfer(format!("cannot connect: {e}")))?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| transfer(e.to_string()))?
        .with_root_certificates(self.roots.clone())
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| DownloadError::BadUrl(url.to_owned()))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| transfer(format!("TLS: {e}")))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| transfer(e.to_string()))?;
        let driver = tokio::spawn(connection);
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or(host);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let request = http::Request::get(path)
            .header(http::header::HOST, authority)
            .header(
                http::header::USER_AGENT,
                concat!("moat/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::<Bytes>::new())
            .map_err(|e| transfer(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| transfer(e.to_string()))?;
        let status = response.status();
        if status.is_redirection() {
            driver.abort();
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| transfer(format!("a redirect ({status}) without a location")))?;
            // A relative location is the same server's.
            let next = if location.starts_with('/') {
                format!(
                    "https://{}{location}",
                    uri.authority().map_or("", |a| a.as_str())
                )
            } else {
                location.to_owned()
            };
            return Ok(Fetched::Redirect(next));
        }
        if status != http::StatusCode::OK {
            driver.abort();
            return Err(DownloadError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        let too_large = || DownloadError::TooLarge {
            url: url.to_owned(),
            limit: self.max_bytes,
        };
        let declared = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|length| length > self.max_bytes) {
            driver.abort();
            return Err(too_large());
        }
        let mut body = response.into_body();
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(self.max_bytes) as usize);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| transfer(e.to_string()))?;
            if let Some(data) = frame.data_ref() {
                if bytes.len() as u64 + data.len() as u64 > self.max_bytes {
                    driver.abort();
                    return Err(too_large());
                }
                bytes.extend_from_slice(data);
            }
        }
        driver.abort();
        Ok(Fetched::Body(bytes))
    }
}

enum Fetched {
    Body(Vec<u8>),
    Redirect(String),
}
