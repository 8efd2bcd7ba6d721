//! Network rules: which scheme, host and port a run may reach.
//!
//! A rule is written `[scheme://]host[:port]`:
//!
//! - `scheme` is `http` or `https`; left out, both match;
//! - `host` is a name (`api.openai.com`, `localhost`), a wildcard that
//!   matches every subdomain at any depth but not the domain itself
//!   (`*.example.com`), an IPv4 address (`127.0.0.1`) or a bracketed IPv6
//!   address (`[::1]`); names are case-insensitive and kept in lowercase;
//! - `port` is 1-65535; left out, every port matches.
//!
//! A bare `*` is refused: a grant names what it allows.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::GrantError;

/// Longest rule accepted, in bytes.
const MAX_RULE: usize = 300;
/// Longest DNS name (RFC 1035).
const MAX_NAME: usize = 253;
/// Longest DNS label (RFC 1035).
const MAX_LABEL: usize = 63;

/// The schemes a rule may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// The scheme as written in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The host part of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostPattern {
    /// Exactly this DNS name (lowercase).
    Name(String),
    /// Every subdomain of this name (lowercase), at any depth, not the name
    /// itself: written `*.example.com`.
    Subdomains(String),
    /// Exactly this IPv4 address.
    Ipv4(Ipv4Addr),
    /// Exactly this IPv6 address.
    Ipv6(Ipv6Addr),
}

impl HostPattern {
    /// Whether `host` (a DNS name or an IP address literal, IPv6 with or
    /// without brackets) matches.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self {
            HostPattern::Name(name) => host == *name,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .and_then(|prefix| prefix.strip_suffix('.'))
                .is_some_and(|prefix| !prefix.is_empty()),
            HostPattern::Ipv4(address) => host.parse::<Ipv4Addr>().is_ok_and(|h| h == *address),
            HostPattern::Ipv6(address) => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<Ipv6Addr>()
                .is_ok_and(|h| h == *address),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Name(name) => f.write_str(name),
            HostPattern::Subdomains(domain) => write!(f, "*.{domain}"),
            HostPattern::Ipv4(address) => write!(f, "{address}"),
            HostPattern::Ipv6(address) => write!(f, "[{address}]"),
        }
    }
}

/// One granted network destination. Parsed from and shown as
/// `[scheme://]host[:port]` (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetRule {
    /// `None`: http and https.
    pub scheme: Option<Scheme>,
    /// The host, or a `*.domain` pattern.
    pub host: HostPattern,
    /// `None`: any port.
    pub port: Option<u16>,
}

impl NetRule {
    /// Parses a rule; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, GrantError> {
        parse(text.trim()).map_err(|reason| GrantError::NetRule {
            rule: text.to_string(),
            reason,
        })
    }

    /// Whether a request to `scheme://host:port` falls under this rule.
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        self.scheme.is_none_or(|s| s == scheme)
            && self.port.is_none_or(|p| p == port)
            && self.host.matches(host)
    }
}

fn parse(text: &str) -> Result<NetRule, String> {
    if text.is_empty() {
        return Err("empty; write a host such as api.example.com or localhost:11434".into());
    }
    if text.len() > MAX_RULE {
        return Err(format!("longer than {MAX_RULE} bytes"));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains whitespace or control characters".into());
    }
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (Some(parse_scheme(scheme)?), rest),
        None => (None, text),
    };
    // A pasted URL often ends in `/`; anything more is a path, which a
    // rule does not match on.
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return Err("a rule names a host, not a path; remove everything after the host".into());
    }
    if rest.contains('@') {
        return Err("a rule names a host; remove the user name".into());
    }
    let (host, port) = split_port(rest)?;
    Ok(NetRule {
        scheme,
        host: parse_host(host)?,
        port,
    })
}

fn parse_scheme(scheme: &str) -> Result<Scheme, String> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Ok(Scheme::Http),
        "https" => Ok(Scheme::Https),
        other => Err(format!(
            "scheme `{other}` is not supported; use http:// or https://"
        )),
    }
}

/// Splits `host[:port]`, where an IPv6 host is bracketed.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let close = inner
            .find(']')
            .ok_or("an IPv6 address needs its closing `]`")?;
        let after = &inner[close + 1..];
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or("expected `:port` after the IPv6 address")?,
            ),
        };
        (&text[..close + 2], port)
    } else if text.matches(':').count() > 1 {
        return Err(format!("write an IPv6 address in brackets: [{text}]"));
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = port
        .map(|port| {
            port.parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("port `{port}` is not a number from 1 to 65535"))
        })
        .transpose()?;
    Ok((host, port))
}

fn parse_host(host: &str) -> Result<HostPattern, String> {
    if host.is_empty() {
        return Err("no host".into());
    }
    if host == "*" {
        return Err("`*` would allow every host; name the hosts to allow".into());
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.trim_end_matches(']');
        return inner
            .parse::<Ipv6Addr>()
            .map(HostPattern::Ipv6)
            .map_err(|_| format!("`{inner}` is not an IPv6 address"));
    }
    if let Ok(address) = host.parse::<Ipv4Addr>() {
        return Ok(HostPattern::Ipv4(address));
    }
    if host.parse::<Ipv6Addr>().is_ok() {
        return Err(format!("write an IPv6 address in brackets: [{host}]"));
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match host.strip_prefix("*.") {
        Some(domain) => {
            check_name(domain)?;
            if !domain.contains('.') {
                return Err(format!(
                    "`*.{domain}` would allow a whole top-level domain; name a domain under it"
                ));
            }
            Ok(HostPattern::Subdomains(domain.to_string()))
        }
        None => {
            check_name(&host)?;
            Ok(HostPattern::Name(host))
        }
    }
}

/// Checks a DNS name: ASCII labels of letters, digits and inner hyphens.
fn check_name(name: &str) -> Result<(), String> {
    if name.contains('*') {
        return Err("a wildcard may only start a host, as in *.example.com".into());
    }
    if !name.is_ascii() {
        return Err(format!(
            "`{name}` is not ASCII; write an international name in its punycode (xn--) form"
        ));
    }
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("`{name}` is not a host name"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(format!("`{name}` is not a host name"));
        }
    }
    // A name of digits and dots only would be read as an address by some
    // resolvers and as a name by others: refuse the ambiguity.
    if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "`{name}` is neither an IPv4 address nor a host name"
        ));
    }
    Ok(())
}

impl fmt::Display for NetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(scheme) = self.scheme {
            write!(f, "{}://", scheme.as_str())?;
        }
        write!(f, "{}", self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl FromStr for NetRule {
    type Err = GrantError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        NetRule::parse(text)
    }
}

impl Serialize for NetRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NetRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        NetRule::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> NetRule {
        NetRule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn reason(text: &str) -> String {
        NetRule::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn the_four_forms_parse_and_print_canonically() {
        assert_eq!(rule("API.OpenAI.com").to_string(), "api.openai.com");
        assert_eq!(rule("localhost:11434").to_string(), "localhost:11434");
        assert_eq!(rule("*.Example.com").to_string(), "*.example.com");
        assert_eq!(
            rule("HTTPS://api.example.com:8443/").to_string(),
            "https://api.example.com:8443"
        );
        assert_eq!(rule("127.0.0.1:8080").to_string(), "127.0.0.1:8080");
        assert_eq!(rule("[::1]:11434").to_string(), "[::1]:11434");
        assert_eq!(rule("http://[::1]").to_string(), "http://[::1]");
    }

    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        assert!(reason("").contains("empty"));
        assert!(reason("*").contains("every host"));
        assert!(reason("*.com").contains("top-level"));
        assert!(reason("ftp://x.example").contains("scheme `ftp`"));
        assert!(reason("x.example:0").contains("port"));
        assert!(reason("x.example:99999").contains("port"));
        assert!(reason("https://x.example/v1/chat").contains("path"));
        assert!(reason("user@x.example").contains("user"));
        assert!(reason("a b").contains("whitespace"));
        assert!(reason("::1").contains("brackets"));
        assert!(reason("[::1").contains("`]`"));
        assert!(reason("exa*mple.com").contains("wildcard"));
        assert!(reason("-bad.example").contains("not a host name"));
        assert!(reason("bücher.example").contains("punycode"));
        assert!(reason("1.2.3").contains("neither"));
    }

    #[test]
    fn rules_match_scheme_host_and_port() {
        let any = rule("api.example.com");
        assert!(any.matches(Scheme::Https, "api.example.com", 443));
        assert!(any.matches(Scheme::Http, "API.example.com.", 8080));
        assert!(!any.matches(Scheme::Https, "evil.example.com", 443));
        assert!(!any.matches(Scheme::Https, "api.example.com.evil", 443));

        let exact = rule("https://api.example.com:443");
        assert!(exact.matches(Scheme::Https, "api.example.com", 443));
        assert!(!exact.matches(Scheme::Http, "api.example.com", 443));
        assert!(!exact.matches(Scheme::Https, "api.example.com", 8443));

        let wildcard = rule("*.example.com");
        assert!(wildcard.matches(Scheme::Https, "a.example.com", 443));
        assert!(wildcard.matches(Scheme::Https, "a.b.example.com", 443));
        assert!(!wildcard.matches(Scheme::Https, "example.com", 443));
        assert!(!wildcard.matches(Scheme::Https, "badexample.com", 443));

        let v6 = rule("[::1]:11434");
        assert!(v6.matches(Scheme::Http, "[::1]", 11434));
        assert!(v6.matches(Scheme::Http, "::1", 11434));
        assert!(!v6.matches(Scheme::Http, "127.0.0.1", 11434));
    }

    #[test]
    fn rules_are_strings_in_serialized_form() {
        let json = serde_json::to_string(&rule("https://x.example:1")).unwrap();
        assert_eq!(json, "\"https://x.example:1\"");
        let back: NetRule = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rule("https://x.example:1"));
        assert!(serde_json::from_str::<NetRule>("\"*\"").is_err());
    }
}
