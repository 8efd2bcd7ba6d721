//! What an adapter declares it needs from the host, in its `info()`.

use serde::{Deserialize, Serialize};

/// What an adapter needs from the host: the grants it asks for. Declared
/// needs are a request, not a grant: see [`GrantSources`](crate::GrantSources)
/// for when an adapter receives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    /// Network hosts, as "host" or "host:port".
    pub hosts: Vec<String>,
    /// Environment variable names.
    pub env: Vec<String>,
    /// Programs to spawn.
    pub programs: Vec<String>,
}

impl Needs {
    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.env.is_empty() && self.programs.is_empty()
    }
}
