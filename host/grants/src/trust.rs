//! Trust levels: how far a run's backend may go on its own.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How much an adapter may let its backend do on its own. The adapter is
/// told the level and maps it to its backend's switches; the level also
/// presets the run's grants ([`GrantSources`](crate::GrantSources)).
/// Ordered from the least to the most trusted: a run's level narrows like
/// its grants (a child's is at most its parent's).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TrustLevel {
    /// No backend-native file, web or shell tools.
    #[default]
    Sandbox,
    /// Files and web, no shell.
    Controlled,
    /// Everything, including a shell.
    Unrestricted,
}

impl TrustLevel {
    /// Every level, from the least to the most trusted.
    pub const ALL: [TrustLevel; 3] = [Self::Sandbox, Self::Controlled, Self::Unrestricted];

    /// The level's name, as written in flags and files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Controlled => "controlled",
            Self::Unrestricted => "unrestricted",
        }
    }
}

impl fmt::Display for TrustLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_serialized_form() {
        for level in TrustLevel::ALL {
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(json, format!("\"{level}\""));
        }
    }
}
