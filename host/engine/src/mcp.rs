//! MCP servers a run hands its backend, in the common `mcpServers` shape
//! every agent CLI reads:
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"]},
//!   "docs":  {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}}
//! }}
//! ```
//!
//! Checked here once, so adapters receive only well-formed entries: names
//! are short words (`[A-Za-z0-9_-]`, as every CLI's config accepts them
//! unquoted), a stdio server has a command, an HTTP one an `http(s)` URL.
//! The commands are programs like any other: the run must be granted them
//! ([`McpServers::programs`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The longest server name.
pub const MAX_NAME: usize = 64;

/// The servers, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct McpServers(pub BTreeMap<String, McpServer>);

/// One server: a program speaking MCP on stdio, or an HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum McpServer {
    /// A program the backend starts.
    Stdio {
        /// The program, by name or path.
        command: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// Variables set for it.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// A server the backend reaches over HTTP.
    Http {
        /// Its URL.
        url: String,
        /// Headers sent with every request.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

/// Why an MCP configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// Not the JSON shape above.
    #[error(
        "not an MCP configuration ({{\"mcpServers\": {{NAME: {{\"command\": …}} or {{\"url\": …}}}}}}): {0}"
    )]
    Shape(String),
    /// A name other than a short word.
    #[error("the MCP server name {0:?} is not a word of letters, digits, '-' and '_' (at most 64)")]
    Name(String),
    /// An empty command or a URL that is not http(s).
    #[error("the MCP server {name}: {problem}")]
    Server {
        /// The server.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    mcp_servers: McpServers,
}

impl McpServers {
    /// Reads `{"mcpServers": {…}}` (the file's shape) and checks it.
    pub fn from_json(text: &str) -> Result<Self, McpConfigError> {
        let file: File =
            serde_json::from_str(text).map_err(|e| McpConfigError::Shape(e.to_string()))?;
        let servers = file.mcp_servers;
        for (name, server) in &servers.0 {
            let word = !name.is_empty()
                && name.len() <= MAX_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !word {
                return Err(McpConfigError::Name(name.clone()));
            }
            let problem = match server {
                McpServer::Stdio { command, .. } if command.trim().is_empty() => {
                    Some("its command is empty")
                }
                McpServer::Http { url, .. }
                    if !(url.starts_with("http://") || url.starts_with("https://")) =>
                {
                    Some("its url is not http:// or https://")
                }
                _ => None,
            };
            if let Some(problem) = problem {
                return Err(McpConfigError::Server {
                    name: name.clone(),
                    problem,
                });
            }
        }
        Ok(servers)
    }

    /// The servers as adapters receive them (`options.mcp_servers`):
    /// `{"NAME": {…}}`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("strings and maps serialize")
    }

    /// The programs the stdio servers run, by server name.
    pub fn programs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().filter_map(|(name, server)| match server {
            McpServer::Stdio { command, .. } => Some((name.as_str(), command.as_str())),
            McpServer::Http { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_and_http_servers_are_read_checked_and_handed_on_as_given() {
        let servers = McpServers::from_json(
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server-filesystem", "/data"], "env": {"A": "1"}},
                "docs": {"url": "https://mcp.example.com/mcp"}
            }}"#,
        )
        .unwrap();
        assert_eq!(servers.programs().collect::<Vec<_>>(), [("files", "npx")]);
        assert_eq!(
            servers.to_value(),
            serde_json::json!({
                "docs": {"url": "https://mcp.example.com/mcp"},
                "files": {"command": "npx", "args": ["-y", "server-filesystem", "/data"], "env": {"A": "1"}}
            })
        );
    }

    #[test]
    fn a_bad_configuration_is_refused_saying_what_is_wrong() {
        let refused = |text: &str| McpServers::from_json(text).unwrap_err().to_string();
        assert!(refused(r#"{"servers": {}}"#).contains("mcpServers"));
        assert!(refused(r#"{"mcpServers": {"a b": {"command": "x"}}}"#).contains("\"a b\""));
        assert!(refused(r#"{"mcpServers": {"x": {"command": " "}}}"#).contains("command is empty"));
        assert!(refused(r#"{"mcpServers": {"x": {"url": "file:///etc"}}}"#).contains("http"));
        assert!(refused(r#"{"mcpServers": {"x": {"cmd": "y"}}}"#).contains("not an MCP"));
    }
}
