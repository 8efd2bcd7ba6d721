//! One row of a run's traffic: a request or a connection, as the
//! `moat:traffic` event's payload shows it.

use std::time::{SystemTime, UNIX_EPOCH};

use moat_grants::Scheme;
use serde::Serialize;

/// Who made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    /// The run's component, through `wasi:http`.
    Component,
    /// A program the run started, through the run's proxy.
    Program,
}

/// How it went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One HTTP request moat sent on (a component's, or a program's
    /// `GET http://…` through the proxy).
    Request,
    /// A program's `CONNECT host:port`: what passed is opaque to moat.
    Tunnel,
    /// A program's request on a secret's route, sent on with the secret.
    SecretRoute,
}

/// A model call's usage, as read from its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// One request or connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    /// When it started, in milliseconds since the Unix epoch.
    pub at: u64,
    /// Who made it.
    pub who: Who,
    /// The program's process id, as the host sees it, when moat made its
    /// connection (in the run's own network).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The program's name, with its `pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// How.
    pub kind: Kind,
    /// The secret whose route it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The request's method (not for a tunnel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Its path, without the query (not for a tunnel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The host, as the request named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The rule that allowed it: a grant's text, `approved`, or
    /// `own loopback` (a server of the run's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<String>,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The network grant that would allow it, when one would
    /// (`host:port`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_allow: Option<String>,
    /// Whether `grants.unmetered` would allow it (a tunnel to a model API
    /// under a budget).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unmetered: bool,
    /// The answer's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed after it was allowed (the destination could not be
    /// reached, the connection broke).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes sent: the request's body (a tunnel's: everything).
    pub sent: u64,
    /// Bytes received: the answer's body (a tunnel's: everything).
    pub received: u64,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// A model call: whose API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<&'static str>,
    /// A model call: the model its answer named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A model call: what it used, as read from its answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageRow>,
}

impl Exchange {
    /// A row started now for `scheme://host:port`.
    pub fn new(who: Who, kind: Kind, scheme: Scheme, host: &str, port: u16) -> Self {
        Self {
            at: now_ms(),
            who,
            pid: None,
            program: None,
            kind,
            secret: None,
            method: None,
            path: None,
            scheme: scheme.as_str(),
            host: host.to_owned(),
            port,
            allowed_by: None,
            refused: None,
            would_allow: None,
            unmetered: false,
            status: None,
            error: None,
            sent: 0,
            received: 0,
            ms: 0,
            vendor: None,
            model: None,
            usage: None,
        }
    }

    /// Made by `caller`, when moat knows who it was.
    pub fn by(mut self, caller: Option<super::Caller>) -> Self {
        if let Some(caller) = caller {
            self.pid = Some(caller.pid);
            self.program = Some(caller.program);
        }
        self
    }

    /// With the request's method and its path (the query left out).
    pub fn request(mut self, method: &str, path_and_query: &str) -> Self {
        self.method = Some(method.to_owned());
        let path = path_and_query.split('?').next().unwrap_or("/");
        self.path = Some(path.chars().take(MAX_PATH_CHARS).collect());
        self
    }
}

/// Longest path kept in a row.
const MAX_PATH_CHARS: usize = 512;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_keeps_no_query_and_shows_in_camel_case() {
        let row = Exchange::new(Who::Program, Kind::SecretRoute, Scheme::Https, "h", 443)
            .request("POST", "/v1beta/models/m:generateContent?key=s3cret");
        assert_eq!(
            row.path.as_deref(),
            Some("/v1beta/models/m:generateContent")
        );
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["kind"], "secret_route");
        assert_eq!(json["who"], "program");
        assert!(json.get("allowedBy").is_none());
        assert!(!json.to_string().contains("s3cret"));
    }
}
