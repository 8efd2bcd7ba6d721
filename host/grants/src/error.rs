//! Errors of building grants and reading policy files.

use std::path::PathBuf;

/// A grant that cannot be given. Messages name the value and the problem;
/// the caller adds where it came from (a flag, a policy key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// A directory that cannot be granted (missing, not a directory,
    /// relative, …).
    #[error("{}: {reason}", path.display())]
    Dir {
        /// The directory as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A network rule that does not parse or grants too much.
    #[error("`{rule}`: {reason}")]
    NetRule {
        /// The rule as given.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment variable name that is not one.
    #[error("`{name}`: {reason}")]
    EnvName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool name that is not one exact name.
    #[error("tool `{name}`: {reason}")]
    Tool {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A secret grant that does not parse.
    #[error("`{grant}`: {reason}")]
    Secret {
        /// The grant as given.
        grant: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A meter rule that does not parse.
    #[error("`{rule}`: {reason}")]
    Meter {
        /// The rule as given.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A program that cannot be granted (a relative path, say).
    #[error("`{name}`: {reason}")]
    Program {
        /// The program as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl GrantError {
    /// Only what is wrong, for callers that show the value already.
    pub fn reason(&self) -> &str {
        match self {
            GrantError::Dir { reason, .. }
            | GrantError::NetRule { reason, .. }
            | GrantError::EnvName { reason, .. }
            | GrantError::Secret { reason, .. }
            | GrantError::Meter { reason, .. }
            | GrantError::Tool { reason, .. }
            | GrantError::Program { reason, .. } => reason,
        }
    }
}
