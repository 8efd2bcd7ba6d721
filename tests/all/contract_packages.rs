//! The contract as binary WIT packages, for tools that consume packages
//! rather than WIT text — `wkg` (publish one to a registry) and anything
//! reading the component model's package format. They are built, never
//! committed: this test encodes each `wit/vX/` into
//! `target/wit-packages/moat-adapter-X.wasm` and checks that it decodes
//! back to `moat:adapter@X` with its adapter interface and world.

use moat_testkit::repo_root;

/// Every contract version kept in wit/.
const VERSIONS: [&str; 3] = ["0.2.0", "0.3.0", "0.4.0"];

#[test]
fn each_contract_version_encodes_to_a_binary_package_that_decodes_back() {
    let root = repo_root();
    let out = root.join("target/wit-packages");
    std::fs::create_dir_all(&out).unwrap();
    for version in VERSIONS {
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) = resolve
            .push_dir(root.join(format!("wit/v{version}")))
            .unwrap_or_else(|e| panic!("wit/v{version}: {e:#}"));
        let encoded = wit_component::encode(&resolve, package).unwrap();
        std::fs::write(out.join(format!("moat-adapter-{version}.wasm")), &encoded).unwrap();
        let wit_component::DecodedWasm::WitPackage(decoded, id) =
            wit_component::decode(&encoded).unwrap()
        else {
            panic!("wit/v{version} did not encode to a WIT package");
        };
        let decoded_package = &decoded.packages[id];
        assert_eq!(
            decoded_package.name.to_string(),
            format!("moat:adapter@{version}")
        );
        assert!(
            decoded_package.interfaces.contains_key("adapter"),
            "{:?}",
            decoded_package.interfaces.keys().collect::<Vec<_>>()
        );
        assert!(decoded_package.worlds.contains_key("adapter-world"));
    }
}
