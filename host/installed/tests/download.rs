//! The installer's downloads against a real TLS server on loopback whose
//! certificate a test authority signed: the file arrives; a redirect is
//! followed only to HTTPS; a file over the limit is refused whether its
//! length is declared or not; plain HTTP, an error status and an untrusted
//! certificate are refused.

use std::sync::Arc;
use std::time::Duration;

use moat_installed::{DownloadError, Downloader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const FILE: &[u8] = b"\0asm pretend component bytes";

struct Server {
    port: u16,
    roots: rustls::RootCertStore,
}

/// Serves a few paths over TLS as `localhost`, one request per connection.
async fn serve() -> Server {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let mut response: Vec<u8> = match path.as_str() {
                    "/file" => format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", FILE.len())
                        .into_bytes()
                        .into_iter()
                        .chain(FILE.iter().copied())
                        .collect(),
                    "/redirect" => b"HTTP/1.1 302 Found\r\nLocation: /file\r\nContent-Length: 0\r\n\r\n".to_vec(),
                    "/to-http" => format!("HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/file\r\nContent-Length: 0\r\n\r\n").into_bytes(),
                    "/declared-big" => b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n".to_vec(),
                    "/chunked-big" => {
                        let mut body = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                        for _ in 0..64 {
                            body.extend_from_slice(b"400\r\n");
                            body.extend_from_slice(&[b'x'; 1024]);
                            body.extend_from_slice(b"\r\n");
                        }
                        body.extend_from_slice(b"0\r\n\r\n");
                        body
                    }
                    _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
                };
                let _ = tls.write_all(&response).await;
                let _ = tls.shutdown().await;
                response.clear();
            });
        }
    });
    Server { port, roots }
}

fn downloader(server: &Server) -> Downloader {
    Downloader::with_roots(16 * 1024, Duration::from_secs(10), server.roots.clone())
}

#[tokio::test]
async fn a_file_arrives_and_a_redirect_to_https_is_followed() {
    let server = serve().await;
    let url = |path: &str| format!("https://localhost:{}{path}", server.port);
    let downloader = downloader(&server);
    assert_eq!(downloader.fetch(&url("/file")).await.unwrap(), FILE);
    assert_eq!(downloader.fetch(&url("/redirect")).await.unwrap(), FILE);
    let to_http = downloader.fetch(&url("/to-http")).await.unwrap_err();
    assert!(matches!(to_http, DownloadError::NotHttps(_)), "{to_http}");
    let missing = downloader.fetch(&url("/missing")).await.unwrap_err();
    assert!(
        matches!(missing, DownloadError::Status { status: 404, .. }),
        "{missing}"
    );
}

#[tokio::test]
async fn a_file_over_the_limit_is_refused_declared_or_not() {
    let server = serve().await;
    let downloader = downloader(&server);
    for path in ["/declared-big", "/chunked-big"] {
        let error = downloader
            .fetch(&format!("https://localhost:{}{path}", server.port))
            .await
            .unwrap_err();
        assert!(
            matches!(error, DownloadError::TooLarge { .. }),
            "{path}: {error}"
        );
    }
}

#[tokio::test]
async fn plain_http_and_an_untrusted_certificate_are_refused() {
    let server = serve().await;
    let error = downloader(&server)
        .fetch(&format!("http://localhost:{}/file", server.port))
        .await
        .unwrap_err();
    assert!(matches!(error, DownloadError::NotHttps(_)), "{error}");
    // The web's roots do not know the tests' authority.
    let error = Downloader::new(16 * 1024, Duration::from_secs(10))
        .fetch(&format!("https://localhost:{}/file", server.port))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("TLS"), "{error}");
}
