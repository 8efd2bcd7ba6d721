//! The MCP tools of one run: the servers of `options.mcp_servers` started
//! and listed, and the tools the run's policy lets the model have (ENG-013:
//! the allowed list when given, minus the disallowed list), each under the
//! name the model and the run's events know it by, `mcp__SERVER__TOOL`.
//!
//! A tool the policy withholds is never offered to the model; should the
//! model ask for it anyway, the session refuses the call without making it.

use moat_guest::json::{Map, Value};
use moat_guest::{ErrorInfo, Options};

use crate::endpoint::{invalid, permits};
use crate::mcp::{CallOutcome, McpServer, McpTool};

/// The longest tool name both vendors' APIs take (`^[A-Za-z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME: usize = 64;

/// The servers of a run and the tools offered from them.
pub struct Toolbox {
    servers: Vec<McpServer>,
    /// The offered tools: the index of their server, and the tool.
    tools: Vec<(usize, McpTool)>,
    /// Names the policy withheld from the model.
    withheld: Vec<String>,
}

impl Toolbox {
    /// Starts the run's MCP servers and lists their tools; `None` when the
    /// run has none. A server that cannot start or list its tools refuses
    /// the run.
    pub fn start(options: &Options) -> Result<Option<Self>, ErrorInfo> {
        let Some(text) = options.mcp_servers.as_deref() else {
            return Ok(None);
        };
        let servers: Map<String, Value> = match moat_guest::serde_json::from_str(text) {
            Ok(Value::Object(servers)) => servers,
            _ => {
                return Err(invalid(
                    "options.mcp-servers must be a JSON object of servers",
                ));
            }
        };
        let mut toolbox = Toolbox {
            servers: Vec::new(),
            tools: Vec::new(),
            withheld: Vec::new(),
        };
        for (name, config) in &servers {
            let mut server = McpServer::start(name, config)?;
            for tool in server.tools()? {
                let qualified = tool.qualified_name();
                if !is_tool_name(&qualified) {
                    moat_guest::log::warn(&format!(
                        "MCP server {name}: tool {qualified:?} skipped: a tool name is at most {MAX_TOOL_NAME} letters, digits, '_' and '-'"
                    ));
                } else if toolbox.offers(&qualified) {
                    moat_guest::log::warn(&format!(
                        "MCP server {name}: tool {qualified} listed twice; the first is kept"
                    ));
                } else if permits(options, &qualified) {
                    toolbox.tools.push((toolbox.servers.len(), tool));
                } else {
                    toolbox.withheld.push(qualified);
                }
            }
            toolbox.servers.push(server);
        }
        if !toolbox.withheld.is_empty() {
            moat_guest::log::info(&format!(
                "MCP tools withheld by the run's tool policy: {}",
                toolbox.withheld.join(", ")
            ));
        }
        Ok(Some(toolbox))
    }

    /// The offered tools, by the names the model knows them by.
    pub fn offered(&self) -> impl Iterator<Item = (String, &McpTool)> {
        self.tools
            .iter()
            .map(|(_, tool)| (tool.qualified_name(), tool))
    }

    /// Whether the model was offered a tool of this name.
    pub fn offers(&self, name: &str) -> bool {
        self.tools
            .iter()
            .any(|(_, tool)| tool.qualified_name() == name)
    }

    /// Whether the policy withheld a tool of this name.
    pub fn withholds(&self, name: &str) -> bool {
        self.withheld.iter().any(|withheld| withheld == name)
    }

    /// Calls the offered tool `name` with `input`.
    pub fn call(&mut self, name: &str, input: &Value) -> Result<CallOutcome, ErrorInfo> {
        let Some((server, tool)) = self
            .tools
            .iter()
            .find(|(_, tool)| tool.qualified_name() == name)
        else {
            return Err(invalid(&format!("no tool {name} was offered")));
        };
        let tool = tool.name.clone();
        self.servers[*server].call(&tool, input)
    }
}

/// Whether `name` is a tool name both vendors' APIs take.
fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
