//! The values of a run's secret grants: held by the host, added to the
//! run's requests to the destinations they are granted for, never given to
//! the run.
//!
//! Inside the run, a secret's name holds a placeholder ([`PLACEHOLDER`]):
//! a component's environment and a program's both have it, so an adapter or
//! a CLI that wants "some key" starts, and sends the placeholder. The host
//! replaces the secret's header on the way out:
//!
//! - a component's `wasi:http` request to a granted destination gets it
//!   (the sandbox's `http`, with [`Secrets::for_destination`]);
//! - a program reaches the destination through the run's proxy on a route
//!   of the secret's own (`http://127.0.0.1:PORT/moat-secret/NAME/…`,
//!   given as the vendor's base-URL variable), which forwards to the real
//!   host over TLS with the header set ([`crate::egress`]).

use std::fmt;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use moat_grants::{HostPattern, Scheme, SecretGrant};

/// What a secret's name holds inside the run.
pub const PLACEHOLDER: &str = "moat-secret-placeholder";

/// The header a secret goes in when it names none: `Authorization`, as a
/// bearer token.
const DEFAULT_HEADER: &str = "authorization";

/// One secret, resolved for a run.
#[derive(Clone)]
pub struct Secret {
    /// The grant: its name and where it may go.
    pub grant: SecretGrant,
    header: HeaderName,
    value: HeaderValue,
}

impl Secret {
    /// The secret of `grant` with `value`, sent in `header` (`None`:
    /// `Authorization: Bearer VALUE`); the error says what is wrong.
    pub fn new(grant: SecretGrant, header: Option<&str>, value: &str) -> Result<Self, String> {
        let header_name = header.unwrap_or(DEFAULT_HEADER).to_ascii_lowercase();
        let header = HeaderName::from_bytes(header_name.as_bytes())
            .map_err(|_| format!("`{header_name}` is not an HTTP header name"))?;
        let text = if header == http::header::AUTHORIZATION {
            format!("Bearer {value}")
        } else {
            value.to_owned()
        };
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            format!(
                "the value of secret {} cannot be an HTTP header (control characters?)",
                grant.name
            )
        })?;
        value.set_sensitive(true);
        Ok(Self {
            grant,
            header,
            value,
        })
    }

    /// The header it is sent in, and its value.
    pub fn header(&self) -> (&HeaderName, &HeaderValue) {
        (&self.header, &self.value)
    }

    /// Where a program's requests on its route go: scheme, host (as in a
    /// URL) and port; `None` when its grant names no single host (a
    /// wildcard).
    pub fn upstream(&self) -> Option<(Scheme, String, u16)> {
        let rule = &self.grant.rule;
        let host = match &rule.host {
            HostPattern::Subdomains(_) => return None,
            other => other.to_string(),
        };
        let scheme = rule.scheme.unwrap_or(Scheme::Https);
        let port = rule.port.unwrap_or(match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        });
        Some((scheme, host, port))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the value.
        write!(f, "Secret({} in {})", self.grant, self.header)
    }
}

/// The secrets of one run.
#[derive(Clone, Default, Debug)]
pub struct Secrets(Arc<[Secret]>);

impl Secrets {
    /// The run's secrets.
    pub fn new(secrets: Vec<Secret>) -> Self {
        Self(secrets.into())
    }

    /// Whether the run has none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The secrets a request to `scheme://host:port` carries.
    pub fn for_destination<'a>(
        &'a self,
        scheme: Scheme,
        host: &'a str,
        port: u16,
    ) -> impl Iterator<Item = &'a Secret> + 'a {
        self.0
            .iter()
            .filter(move |secret| secret.grant.rule.matches(scheme, host, port))
    }

    /// The secret named `name`, for a program's route.
    pub fn named(&self, name: &str) -> Option<&Secret> {
        self.0.iter().find(|secret| secret.grant.name == name)
    }

    /// The names, each once, for placeholders.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.iter().map(|s| s.grant.name.clone()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_a_bearer_token_unless_it_names_its_header_and_never_shows() {
        let grant = SecretGrant::parse("KEY@api.example.com").unwrap();
        let bearer = Secret::new(grant.clone(), None, "s3cret").unwrap();
        assert_eq!(bearer.header().0, "authorization");
        assert_eq!(bearer.header().1, "Bearer s3cret");
        let own = Secret::new(grant, Some("X-Api-Key"), "s3cret").unwrap();
        assert_eq!(own.header().0, "x-api-key");
        assert_eq!(own.header().1, "s3cret");
        let shown = format!("{:?}", Secrets::new(vec![bearer, own]));
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn a_secret_goes_only_where_its_grant_says() {
        let secrets = Secrets::new(vec![
            Secret::new(
                SecretGrant::parse("KEY@api.example.com:443").unwrap(),
                None,
                "v",
            )
            .unwrap(),
        ]);
        assert_eq!(
            secrets
                .for_destination(Scheme::Https, "api.example.com", 443)
                .count(),
            1
        );
        assert_eq!(
            secrets
                .for_destination(Scheme::Https, "api.example.com", 8443)
                .count(),
            0
        );
        assert_eq!(
            secrets
                .for_destination(Scheme::Https, "evil.example.com", 443)
                .count(),
            0
        );
        assert_eq!(
            secrets.named("KEY").unwrap().upstream(),
            Some((Scheme::Https, "api.example.com".into(), 443))
        );
    }
}
