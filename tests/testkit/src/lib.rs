//! What moat's tests and benchmarks share, kept out of the shipped crates:
//!
//! - [`native`]: native, in-process adapters: a scripted double that
//!   misbehaves on cue, and the native echo the benchmarks set beside the
//!   Wasm one;
//! - [`engine`]: helpers for the engine's tests with those doubles;
//! - [`conformance`]: what every adapter of a kind must do, in any language;
//! - [`components`]: the misbehaving components of `adapters/testing/`,
//!   built by this crate's build script;
//! - the sandbox harness (at the root): one sandbox per test process,
//!   running components, assertions about event streams;
//! - [`http_server`], [`llm_server`], [`llm`], [`llm_turns`]: loopback
//!   servers speaking plain HTTP and the vendors' streaming formats, and
//!   model answers that call tools;
//! - [`fake_cli`]: a fake agent CLI replaying recordings of the real ones;
//! - [`workflows`]: workflow files the workflow tests and benchmark share;
//! - [`nats`]: real `nats-server` processes (one, or a three-node cluster).

pub mod components {
    //! Paths of the misbehaving adapters in `adapters/testing/`, built for
    //! wasm32-wasip2 by this crate's build script.
    include!(concat!(env!("OUT_DIR"), "/testing_components.rs"));
}

pub mod conformance;
pub mod engine;
pub mod fake_cli;
pub mod git;
mod harness;
pub mod http_server;
pub mod llm;
pub mod llm_server;
pub mod llm_turns;
pub mod native;
pub mod nats;
pub mod wasm;
pub mod workflows;

pub use harness::*;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The binary `bin` of the workspace package `package`, built once per
/// test process into the test's own target directory and profile (a test
/// can only be handed the binaries of its own package, so it asks cargo
/// for this one), and returned by path.
pub fn helper_binary(package: &str, bin: &str) -> PathBuf {
    // The test binary is `<target>/<profile>/deps/<test>-<hash>`.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .current_dir(repo_root())
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .arg("--profile")
        .arg(profile)
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building {bin} failed: {status}");
    let binary = profile_dir.join(bin);
    assert!(binary.is_file(), "no {}", binary.display());
    binary
}

/// The MCP server of tools/mcp-stub (echo, sleep and fail tools on stdio).
pub fn mcp_stub() -> &'static Path {
    static STUB: OnceLock<PathBuf> = OnceLock::new();
    STUB.get_or_init(|| helper_binary("moat-mcp-stub", "moat-mcp-stub"))
}
