//! Builds the built-in adapters for wasm32-wasip2 and writes
//! `$OUT_DIR/builtin_adapters.rs`, which `src/lib.rs` includes: the
//! component bytes are embedded, so `moat run echo "hi"` needs nothing else
//! on disk. Which adapters are built in, and under which name, each
//! adapter's manifest says (`[package.metadata.moat] builtin = "…"`).

use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

/// Libraries the built-in adapters share, relative to the workspace root:
/// a change in one must rebuild the components that use it.
const SHARED: &[&str] = &["adapters/cli-support", "adapters/llm-support"];

fn main() {
    let root = moat_wasm_build::workspace_root();
    for dir in SHARED {
        // Build-script protocol output, read by cargo.
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let builtins = moat_wasm_build::builtin_adapters(&root);
    let packages: Vec<&str> = builtins
        .iter()
        .map(|(_, package)| package.name.as_str())
        .collect();
    let components = moat_wasm_build::build_components(&packages);

    let mut source = String::from("pub(crate) static BUILTIN_ADAPTERS: &[(&str, &[u8])] = &[");
    for ((name, _), wasm) in builtins.iter().zip(&components) {
        let path = wasm.to_str().expect("the component path is UTF-8");
        // `{:?}` writes a Rust string literal, escapes included.
        write!(source, "({name:?}, include_bytes!({path:?})), ").expect("write to a String");
    }
    source.push_str("];\n");

    let out_dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    fs::write(Path::new(&out_dir).join("builtin_adapters.rs"), source)
        .expect("write builtin_adapters.rs");
}
