//! Errors of building grants and reading policy files.

use std::path::PathBuf;

/// A grant that cannot be given. Messages name the value and the problem;
/// the caller adds where it came from (a flag, a policy key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("{}: {reason}", path.display())]
    Dir { path: PathBuf, reason: String },
    #[error("`{rule}`: {reason}")]
    NetRule { rule: String, reason: String },
    #[error("`{name}`: {reason}")]
    EnvName { name: String, reason: String },
    #[error("`{name}`: {reason}")]
    Program { name: String, reason: String },
}

impl GrantError {
    /// Only what is wrong, for callers that show the value already.
    pub fn reason(&self) -> &str {
        match self {
            GrantError::Dir { reason, .. }
            | GrantError::NetRule { reason, .. }
            | GrantError::EnvName { reason, .. }
            | GrantError::Program { reason, .. } => reason,
        }
    }
}

/// A policy file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("policy file {}: {problem}", path.display())]
    Invalid { path: PathBuf, problem: String },
    #[error(
        "policy file {}: the entry for `{adapter}` pins sha256 {pinned}, but this component's is \
         {actual}; check the component, then update the pin",
        path.display()
    )]
    PinMismatch {
        path: PathBuf,
        adapter: String,
        pinned: String,
        actual: String,
    },
}
