//! Builds every testing adapter in `adapters/testing/` for wasm32-wasip2
//! and writes `$OUT_DIR/testing_components.rs`: one
//! `pub const <NAME>: &str` with the component's path per adapter (e.g.
//! `SPIN_NEXT` for `adapters/testing/spin-next`), and `ALL`, the
//! `(name, path)` pairs.

use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

fn main() {
    let root = moat_wasm_build::workspace_root();
    let testing_dir = root.join("adapters/testing");
    // A new adapter directory must be picked up.
    println!("cargo:rerun-if-changed={}", testing_dir.display());

    let packages = moat_wasm_build::packages_in(&testing_dir);
    let names: Vec<&str> = packages
        .iter()
        .map(|package| package.name.as_str())
        .collect();
    let components = moat_wasm_build::build_components(&names);

    let mut source = String::new();
    let mut all =
        String::from("/// Every testing adapter: its directory name and component path.\n");
    all.push_str("pub const ALL: &[(&str, &str)] = &[\n");
    for (package, wasm) in packages.iter().zip(&components) {
        let name = package
            .dir
            .file_name()
            .and_then(|name| name.to_str())
            .expect("a UTF-8 directory name");
        let path = wasm.to_str().expect("the component path is UTF-8");
        let constant = name.to_uppercase().replace('-', "_");
        writeln!(
            source,
            "/// The `{name}` testing adapter (adapters/testing/{name}).\n\
             pub const {constant}: &str = {path:?};"
        )
        .expect("write to a String");
        writeln!(all, "    ({name:?}, {constant}),").expect("write to a String");
    }
    all.push_str("];\n");
    source.push_str(&all);

    let out_dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    fs::write(Path::new(&out_dir).join("testing_components.rs"), source)
        .expect("write testing_components.rs");
}
