//! Running the nested `cargo build`.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::TARGET;

/// Variables cargo sets for build scripts (or a user set for the outer
/// build) that would leak into the nested build: host-target flags, the
/// outer target or target directory, wrappers such as clippy-driver, and
/// the outer jobserver.
const LEAKING_VARS: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "__CARGO_FIX_PLZ",
    "CLIPPY_ARGS",
    "CLIPPY_CONF_DIR",
];

/// Builds `packages` in release mode for [`TARGET`] into `target_dir`,
/// panicking with cargo's output when the build fails.
pub(crate) fn build_release(workspace: &Path, target_dir: &Path, packages: &[&str]) {
    check_target_installed();

    let mut command = Command::new(cargo());
    command
        .current_dir(workspace)
        .args(["build", "--release", "--target", TARGET])
        .arg("--target-dir")
        .arg(target_dir);
    for package in packages {
        command.args(["-p", package]);
    }
    // Removing CARGO_MAKEFLAGS leaves the nested cargo without the outer
    // jobserver; keep at least the outer build's parallelism setting.
    if let Ok(jobs) = std::env::var("NUM_JOBS") {
        command.args(["--jobs", &jobs]);
    }
    for var in LEAKING_VARS {
        command.env_remove(var);
    }
    // Per-target settings for the outer target (`CARGO_TARGET_<TRIPLE>_*`)
    // must not apply either.
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|key| key.starts_with("CARGO_TARGET_"))
        {
            command.env_remove(key);
        }
    }

    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {command:?}: {err}"));
    if !output.status.success() {
        panic!(
            "building the adapter components failed ({}):\n{command:?}\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
}

/// The cargo running this build script, or `cargo` from `PATH`.
fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Panics with the fix when the standard library for [`TARGET`] is missing.
fn check_target_installed() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let libdir = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    let installed = libdir.is_some_and(|dir| Path::new(&dir).is_dir());
    assert!(
        installed,
        "the Rust target {TARGET} is not installed; run `rustup target add {TARGET}`"
    );
}
