//! The contract as binary WIT packages (`wit/packages/moat-adapter-X.wasm`),
//! for tools that consume packages rather than WIT text — `wkg` (publish
//! one to a registry, or point an override at it) and anything reading the
//! component model's package format. Each must be exactly what `wit/vX/`
//! encodes to, and decode back to `moat:adapter@X`.
//!
//! `MOAT_UPDATE_WIT_PACKAGES=1 cargo test -p moat --test all contract_packages`
//! writes them after a change to wit/.

use moat_testkit::repo_root;

/// Every contract version kept in wit/.
const VERSIONS: [&str; 2] = ["0.2.0", "0.3.0"];

#[test]
fn each_binary_package_is_what_its_wit_encodes_to() {
    let root = repo_root();
    for version in VERSIONS {
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) = resolve
            .push_dir(root.join(format!("wit/v{version}")))
            .unwrap_or_else(|e| panic!("wit/v{version}: {e:#}"));
        let encoded = wit_component::encode(&resolve, package).unwrap();
        let path = root.join(format!("wit/packages/moat-adapter-{version}.wasm"));
        if std::env::var("MOAT_UPDATE_WIT_PACKAGES").as_deref() == Ok("1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &encoded).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; write it with MOAT_UPDATE_WIT_PACKAGES=1 cargo test -p moat --test all contract_packages",
                path.display()
            )
        });
        assert!(
            committed == encoded,
            "{} is not what wit/v{version} encodes to: MOAT_UPDATE_WIT_PACKAGES=1 cargo test -p moat --test all contract_packages",
            path.display()
        );
        let wit_component::DecodedWasm::WitPackage(decoded, id) =
            wit_component::decode(&committed).unwrap()
        else {
            panic!("{} is not a WIT package", path.display());
        };
        let name = &decoded.packages[id].name;
        assert_eq!(name.to_string(), format!("moat:adapter@{version}"));
        let interfaces: Vec<&str> = decoded.packages[id]
            .interfaces
            .keys()
            .map(String::as_str)
            .collect();
        assert!(interfaces.contains(&"adapter"), "{interfaces:?}");
        assert!(decoded.packages[id].worlds.contains_key("adapter-world"));
    }
}
