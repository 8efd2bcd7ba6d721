//! An installed adapter's manifest, `adapter.toml` beside its component.

use moat_grants::Grants;
use serde::{Deserialize, Serialize};

/// What moat records of an installed adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The name it is run by.
    pub name: String,
    /// The version its `info()` reported when it was installed.
    pub version: String,
    /// What its `info()` says it is.
    #[serde(default)]
    pub description: String,
    /// SHA-256 of the component's bytes, lowercase hex.
    pub sha256: String,
    /// Where it was installed from (a path or a URL).
    pub source: String,
    /// When it was installed (RFC 3339).
    pub installed_at: String,
    /// The grants the user accepted at install time: what its runs get.
    #[serde(default)]
    pub grants: Grants,
}
