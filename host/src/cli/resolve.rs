//! From what the user typed to a loaded adapter.

use std::path::Path;

use anyhow::Context;

use moat::builtin;
use moat::sandbox::{Sandbox, SandboxConfig, WasmAdapter};

use super::UsageError;
use super::args::Cli;

/// The process's sandbox, with the cache settings from the flags.
pub fn sandbox(cli: &Cli) -> anyhow::Result<Sandbox> {
    let mut config = SandboxConfig::default();
    if cli.no_cache {
        config.cache_dir = None;
    } else if let Some(dir) = &cli.cache_dir {
        config.cache_dir = Some(dir.clone());
    }
    // One command runs a handful of sessions at most.
    config.pool_sessions = 64;
    Sandbox::new(config).context("cannot start the sandbox")
}

/// Loads a built-in adapter by name, or a component by path. A name that
/// is neither gets a message listing what exists.
pub async fn adapter(sandbox: &Sandbox, name_or_path: &str) -> anyhow::Result<WasmAdapter> {
    if let Some(bytes) = builtin::component(name_or_path) {
        return sandbox
            .load_bytes("built-in".into(), bytes.to_vec())
            .await
            .with_context(|| format!("the built-in adapter `{name_or_path}` failed to load"));
    }
    let path = Path::new(name_or_path);
    let looks_like_path =
        name_or_path.contains('/') || name_or_path.ends_with(".wasm") || path.exists();
    if !looks_like_path {
        let known: Vec<_> = builtin::names().collect();
        return Err(UsageError(format!(
            "unknown adapter `{name_or_path}`: not a built-in ({}) and not a file; pass a path to a .wasm component",
            known.join(", ")
        ))
        .into());
    }
    sandbox
        .load_file(path)
        .await
        .map_err(|error| UsageError(format!("cannot load {name_or_path}: {error}")).into())
}
