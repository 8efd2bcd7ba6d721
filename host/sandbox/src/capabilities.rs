//! A run's WASI context, built from its grants: the only place where
//! grants become reachable files and visible environment variables.
//!
//! - Files: each granted directory is preopened, read-only or read-write,
//!   under its own absolute path, through the handle its admission opened
//!   (never its path again). The guest can name nothing else: every path
//!   is resolved by cap-std inside one of these directories, so `..`,
//!   absolute paths and symlinks that lead outside are refused.
//! - Environment: the granted names that are set on the host, with the
//!   host's values; nothing else.
//! - Network: only through `wasi:http`, checked per request against the
//!   net grants (see [`http`](crate::http)); raw sockets and name lookups
//!   are off whatever is granted.
//! - Processes: only through the process capability, as granted (see
//!   [`process`](moat_contain::process)).
//! - No arguments, no initial working directory, stdin closed, stdout and
//!   stderr into the host's logs.

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::output::GuestOutput;
use moat_grants::{Grants, OpenDir, OpenDirs};

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
    // A secret's name holds a placeholder, whatever the host's value: the
    // host adds the value on the way out (`moat_contain::secrets`).
    for grant in &grants.secrets {
        env.retain(|(name, _)| *name != grant.name);
        env.push((
            grant.name.clone(),
            moat_contain::SECRET_PLACEHOLDER.to_owned(),
        ));
    }
    env
}

/// Every directory `grants` names, as a handle: the one in `opened` (made
/// when the run was admitted), else opened now without following a
/// symlink.
pub(crate) fn granted_dirs(
    grants: &Grants,
    opened: &OpenDirs,
) -> Result<Vec<OpenDir>, CapabilityError> {
    opened.granted(grants).map_err(|e| match e {
        moat_grants::GrantError::Dir { path, reason } => CapabilityError::Preopen {
            dir: path.to_string_lossy().into_owned(),
            reason,
        },
        other => CapabilityError::Invalid(other),
    })
}

/// The WASI context of one run with `grants` (its directories opened as
/// `dirs`, see [`granted_dirs`]) and `env` (see [`granted_env`]).
pub(crate) fn wasi_context(
    grants: &Grants,
    dirs: &[OpenDir],
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
        let dir = dirs
            .iter()
            .find(|dir| dir.path() == preopen.host)
            .ok_or_else(|| CapabilityError::Preopen {
                dir: preopen.guest.clone(),
                reason: "it was not opened".into(),
            })?;
        // Through the handle: the directory it was when admitted, whatever
        // its path leads to now.
        builder
            .preopened_dir(dir.handle_path(), &preopen.guest, perms)
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
