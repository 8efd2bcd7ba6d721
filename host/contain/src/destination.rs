//! Where a request may go: the one check of a destination against a run's
//! `--allow-net` rules, for a component's `wasi:http` requests and for the
//! programs' proxy alike ([`crate::egress`]).
//!
//! A destination no rule grants is refused before any name is resolved.
//! A granted name is resolved once, every address checked against the
//! ranges its grant does not reach ([`moat_grants::address`]), and the
//! connection made to a checked address: never a second lookup, which
//! could answer differently (DNS rebinding).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use moat_engine::{Denial, DeniedRequest, Grant};
use moat_grants::address::{self, AddressRefusal, HostGrant, SpecialRange};
use moat_grants::{NetRule, Scheme};
use tokio::net::TcpStream;

use crate::denials::DenialLog;

/// Most addresses of one name tried.
const MAX_ADDRESSES: usize = 16;
/// Longest host shown in a refusal (it comes from the guest).
const MAX_HOST_IN_MESSAGE: usize = 255;

/// A granted destination.
#[derive(Debug, Clone)]
pub struct Destination {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// As in the URL: a name, an IPv4 address or a bracketed IPv6 one;
    /// lowercase.
    pub host: String,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
    /// Which addresses the grant that matched lets it reach.
    pub grant: HostGrant,
}

/// Why a granted destination could not be reached.
#[derive(Debug)]
pub enum ConnectFailure {
    /// An address it resolves to is in a range its grant does not reach
    /// (recorded as a denial).
    AddressProhibited,
    /// The name did not resolve.
    Dns(String),
    /// The name resolved to nothing.
    NotFound,
    /// No address answered.
    Connect(std::io::Error),
    /// Resolving and connecting took longer than allowed.
    Timeout,
}

impl Destination {
    /// `scheme://host:port` if `rules` grant it; else the denial, to record.
    pub fn granted(
        scheme: Scheme,
        host: &str,
        port: u16,
        rules: &[NetRule],
    ) -> Result<Self, Denial> {
        let host = host.to_ascii_lowercase();
        let grant = address::host_grant(rules, scheme, &host, port);
        let destination = Self {
            scheme,
            host,
            port,
            grant,
        };
        if grant == HostGrant::NotGranted {
            return Err(destination.denial("not granted".into(), destination.grant()));
        }
        Ok(destination)
    }

    /// The `Host` header: the host, and the port unless it is the
    /// scheme's default.
    pub fn host_header(&self) -> String {
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host without IPv6 brackets, for resolving and for TLS.
    pub fn bare_host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }

    /// The grant that would allow this destination by name.
    pub fn grant(&self) -> Grant {
        Grant::Net {
            host: shown(&self.host).to_owned(),
            port: self.port,
        }
    }

    /// A refusal of this destination, for `reason`, that `remedy` lifts.
    pub fn denial(&self, reason: String, remedy: Grant) -> Denial {
        Denial {
            request: DeniedRequest::Net {
                scheme: self.scheme.as_str().to_owned(),
                host: shown(&self.host).to_owned(),
                port: self.port,
            },
            reason,
            remedy: Some(remedy),
        }
    }

    /// A TCP connection to a checked address of this destination, within
    /// `timeout`; a prohibited address is recorded in `denials`.
    pub async fn connect(
        &self,
        timeout: Duration,
        denials: &DenialLog,
    ) -> Result<TcpStream, ConnectFailure> {
        let attempt = async {
            let addresses = self.resolve().await?;
            for &address in &addresses {
                if let Err(AddressRefusal::Range(range)) =
                    address::check_address(self.grant, address)
                {
                    let remedy = match range {
                        // Only a rule naming the address itself reaches
                        // metadata.
                        SpecialRange::CloudMetadata => Grant::Net {
                            host: match address {
                                IpAddr::V4(v4) => v4.to_string(),
                                IpAddr::V6(v6) => format!("[{v6}]"),
                            },
                            port: self.port,
                        },
                        _ => self.grant(),
                    };
                    let reason = format!("it resolves to {address}, {range}");
                    denials.record(self.denial(reason, remedy));
                    return Err(ConnectFailure::AddressProhibited);
                }
            }
            let mut last_error = None;
            for &address in &addresses {
                match TcpStream::connect(SocketAddr::new(address, self.port)).await {
                    Ok(stream) => return Ok(stream),
                    Err(error) => last_error = Some(error),
                }
            }
            Err(ConnectFailure::Connect(last_error.unwrap_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to")
            })))
        };
        tokio::time::timeout(timeout, attempt)
            .await
            .map_err(|_| ConnectFailure::Timeout)?
    }

    /// The addresses of the destination: the literal itself, or the name
    /// resolved once.
    async fn resolve(&self) -> Result<Vec<IpAddr>, ConnectFailure> {
        let host = self.bare_host();
        if let Ok(address) = host.parse::<IpAddr>() {
            return Ok(vec![address]);
        }
        let found = tokio::net::lookup_host((host, self.port))
            .await
            .map_err(|error| ConnectFailure::Dns(error.to_string()))?;
        let addresses: Vec<IpAddr> = found.map(|a| a.ip()).take(MAX_ADDRESSES).collect();
        if addresses.is_empty() {
            return Err(ConnectFailure::NotFound);
        }
        Ok(addresses)
    }
}

/// `text` cut for a message: it comes from the guest.
pub fn shown(text: &str) -> &str {
    &text[..text.floor_char_boundary(MAX_HOST_IN_MESSAGE)]
}
