//! Build-script helper: compiles moat adapter crates to WebAssembly
//! components.
//!
//! A build script (of the `moat` host, or of the end-to-end tests) calls
//! [`build_components`] with the workspace packages it needs. That runs a
//! nested `cargo build --release --target wasm32-wasip2` into a target
//! directory of its own, `<workspace>/target/wasm-components`: a separate
//! directory means the nested cargo never waits on the lock the outer build
//! holds on its own target directory.
//!
//! ```no_run
//! // build.rs
//! let wasm = moat_wasm_build::build_components(&["moat-adapter-echo"]);
//! assert!(wasm[0].ends_with("moat_adapter_echo.wasm"));
//! ```

mod cargo;
mod workspace;

use std::path::PathBuf;

pub use workspace::{Package, builtin_adapters, packages_in, workspace_root};

/// The Rust target adapters are built for; it emits components directly.
pub const TARGET: &str = "wasm32-wasip2";

/// The target directory of the nested build, relative to the workspace root.
pub const TARGET_DIR: &str = "target/wasm-components";

/// Builds the workspace packages `packages` for [`TARGET`] in release mode
/// and returns the path of each one's component, in the order given.
///
/// Meant for build scripts: it prints `cargo:rerun-if-changed` lines for
/// the contract (`wit/`), the guest SDK (`guest-sdk/` and the process
/// model it shares with the host, `host/process-model/`), the workspace
/// manifest and lock file, and each package's directory; and it panics,
/// failing the build with cargo's output, when the nested build fails or
/// the target is not installed.
pub fn build_components(packages: &[&str]) -> Vec<PathBuf> {
    let root = workspace_root();
    let all = workspace::members(&root);
    let selected: Vec<&Package> = packages
        .iter()
        .map(|name| {
            all.iter()
                .find(|package| package.name == *name)
                .unwrap_or_else(|| {
                    panic!(
                        "`{name}` is not a package of the workspace at {}",
                        root.display()
                    )
                })
        })
        .collect();

    for path in [
        "wit",
        "guest-sdk",
        "host/process-model",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        rerun_if_changed(&root.join(path));
    }
    for package in &selected {
        rerun_if_changed(&package.dir);
    }

    let target_dir = root.join(TARGET_DIR);
    cargo::build_release(&root, &target_dir, packages);
    selected
        .iter()
        .map(|package| {
            let wasm = target_dir
                .join(TARGET)
                .join("release")
                .join(format!("{}.wasm", package.name.replace('-', "_")));
            assert!(
                wasm.is_file(),
                "building `{}` produced no component at {}; is it a `cdylib` crate?",
                package.name,
                wasm.display()
            );
            wasm
        })
        .collect()
}

/// Tells cargo to run the build script again when `path` changes (for a
/// directory: anything in it).
fn rerun_if_changed(path: &std::path::Path) {
    // Build-script protocol output, read by cargo, not a message for people.
    println!("cargo:rerun-if-changed={}", path.display());
}
