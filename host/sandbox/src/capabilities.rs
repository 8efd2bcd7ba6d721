//! A run's WASI context, built from its grants: the only place where
//! grants become reachable files and visible environment variables.
//!
//! - Files: each granted directory is preopened, read-only or read-write,
//!   under its own absolute path. The guest can name nothing else: every
//!   path is resolved by cap-std inside one of these directories, so `..`,
//!   absolute paths and symlinks that lead outside are refused.
//! - Environment: the granted names that are set on the host, with the
//!   host's values; nothing else.
//! - Network: only through `wasi:http`, checked per request against the
//!   net grants (see [`http`](crate::http)); raw sockets and name lookups
//!   are off whatever is granted.
//! - Processes: only through the process capability, as granted (see
//!   [`process`](crate::process)).
//! - No arguments, no initial working directory, stdin closed, stdout and
//!   stderr into the host's logs.

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::output::GuestOutput;
use moat_grants::Grants;

/// Why a run's capabilities could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CapabilityError {
    #[error("invalid grant: {0}")]
    Invalid(#[from] moat_grants::GrantError),
    #[error("cannot open the granted directory {dir}: {reason}")]
    Preopen { dir: String, reason: String },
}

/// The granted environment variables that are set on the host, with the
/// host's values, read now: what the guest and its children see.
pub(crate) fn granted_env(adapter: &str, grants: &Grants) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for name in &grants.env {
        match std::env::var(name) {
            Ok(value) => env.push((name.clone(), value)),
            Err(std::env::VarError::NotPresent) => {
                tracing::debug!(adapter, name, "granted variable is not set; left out");
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                tracing::warn!(adapter, name, "granted variable is not UTF-8; left out");
            }
        }
    }
    env
}

/// The WASI context of one run with `grants` and `env` (see
/// [`granted_env`]).
pub(crate) fn wasi_context(
    grants: &Grants,
    env: &[(String, String)],
    stdout: GuestOutput,
    stderr: GuestOutput,
) -> Result<WasiCtx, CapabilityError> {
    grants.validate()?;
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout)
        .stderr(stderr)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for preopen in grants.preopens() {
        let perms = if preopen.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        builder
            .preopened_dir(&preopen.host, &preopen.guest, perms)
            .map_err(|e| CapabilityError::Preopen {
                dir: preopen.guest.clone(),
                reason: format!("{e:#}"),
            })?;
    }
    for (name, value) in env {
        builder.env(name, value);
    }
    Ok(builder.build())
}
