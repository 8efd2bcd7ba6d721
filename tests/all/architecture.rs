//! The arrows of docs/architecture.md, checked on the workspace's real
//! dependency graph (`cargo metadata`): the launch layer knows neither the
//! store nor the cluster (it is written against `moat_runs::RunBook`), the
//! engine knows no wasmtime, HTTP, TLS or command line, containment knows
//! no wasmtime (the sandbox reaches it, not the other way), and the
//! binary's crate holds no benchmark.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// Every package the normal (not dev, not build) dependencies of `name`
/// reach, by name.
fn reached(metadata: &Value, name: &str) -> BTreeSet<String> {
    let packages: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| (node["id"].as_str().unwrap(), node))
        .collect();
    let root = packages
        .iter()
        .find(|(_, n)| **n == name)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("no package {name}"));
    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kind| kind["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(packages[dep_id].to_owned()) {
                todo.push(dep_id);
            }
        }
    }
    seen
}

#[test]
fn the_layers_depend_only_downward() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // This machine's platform only: offline, the other platforms' crates
    // (Windows' console, say) are not in a fresh machine's registry.
    let rustc = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names its host");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(moat_testkit::repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();

    let launch = reached(&metadata, "moat-launch");
    // It reaches what it must (the check can fail: the traits' crate and
    // the sandbox are there)...
    assert!(launch.contains("moat-runs") && launch.contains("moat-sandbox"));
    // ...and not where runs are kept: those come in through RunBook.
    for kept in ["moat-store", "moat-cluster", "rusqlite", "async-nats"] {
        assert!(
            !launch.contains(kept),
            "moat-launch depends on {kept}: write it against moat_runs::RunBook"
        );
    }
    let engine = reached(&metadata, "moat-engine");
    for below in ["wasmtime", "hyper", "rustls", "clap"] {
        assert!(!engine.contains(below), "moat-engine depends on {below}");
    }
    // Containment holds a run's programs without wasmtime; the sandbox
    // (wasmtime's embedding) reaches it, and it does not reach the sandbox.
    let contain = reached(&metadata, "moat-contain");
    for above in ["wasmtime", "wasmtime-wasi", "moat-sandbox", "moat-launch"] {
        assert!(!contain.contains(above), "moat-contain depends on {above}");
    }
    let sandbox = reached(&metadata, "moat-sandbox");
    assert!(sandbox.contains("moat-contain") && sandbox.contains("wasmtime"));
    // The types of a confinement are the grants' data; which hosts speak
    // a model API is the meter's word, a foundation as the grants are.
    assert!(
        !reached(&metadata, "moat-grants")
            .iter()
            .any(|p| p.starts_with("moat-") && p != "moat-meter")
    );
    assert!(
        !reached(&metadata, "moat-meter")
            .iter()
            .any(|p| p.starts_with("moat-"))
    );
    // The store and the cluster know nothing of wasmtime or each other.
    for backend in ["moat-store", "moat-cluster"] {
        let reach = reached(&metadata, backend);
        for other in ["wasmtime", "moat-launch", "moat-store", "moat-cluster"] {
            assert!(
                other == backend || !reach.contains(other),
                "{backend} depends on {other}"
            );
        }
    }
    // The binary's crate is the CLI only: its benchmarks are moat-benches'.
    let cli = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "moat")
        .unwrap();
    let benches: Vec<&Value> = cli["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bench"))
        .collect();
    assert!(
        benches.is_empty(),
        "the moat crate has benches: {benches:?}"
    );
}
