//! Loading refuses, with a message naming the problem, anything that is not
//! a moat adapter component of a compatible contract version; and compiled
//! components are cached on disk, safely.

use std::path::Path;

use moat_sandbox::{CacheOutcome, LoadError, Sandbox, SandboxConfig};
use moat_testkit::components::*;
use moat_testkit::{load, run_component, sandbox, single_done};

/// A sandbox of its own, with an empty cache in `dir`.
fn sandbox_with_cache(dir: &Path) -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(dir.to_path_buf()),
        pool_sessions: 16,
        ..SandboxConfig::default()
    })
    .expect("the sandbox starts")
}

async fn load_error(bytes: &[u8]) -> LoadError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.wasm");
    std::fs::write(&path, bytes).unwrap();
    match sandbox().load_file(&path).await {
        Ok(_) => panic!("loading {bytes:?} must fail"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn a_missing_file_is_refused_naming_the_path() {
    let error = sandbox()
        .load_file(Path::new("/no/such/adapter.wasm"))
        .await
        .err()
        .unwrap();
    assert!(matches!(error, LoadError::Read { .. }));
    assert!(error.to_string().contains("/no/such/adapter.wasm"));
}

#[tokio::test]
async fn an_empty_file_is_refused() {
    let error = load_error(b"").await;
    assert!(matches!(error, LoadError::Empty), "{error}");
}

#[tokio::test]
async fn random_bytes_are_refused() {
    let error = load_error(b"#!/bin/sh\necho this is not wasm\n").await;
    assert!(matches!(error, LoadError::NotWasm), "{error}");
}

#[tokio::test]
async fn a_core_module_is_refused_with_how_to_build_a_component() {
    // The smallest valid core module: magic and version 1.
    let error = load_error(b"\0asm\x01\0\0\0").await;
    assert!(matches!(error, LoadError::CoreModule), "{error}");
    assert!(error.to_string().contains("wasm32-wasip2"));
}

#[tokio::test]
async fn a_component_without_the_adapter_export_is_refused() {
    // The smallest valid component: magic, version 0x0d, layer 1.
    let error = load_error(b"\0asm\x0d\0\x01\0").await;
    assert!(matches!(error, LoadError::NotAnAdapter), "{error}");
}

#[tokio::test]
async fn a_component_with_a_function_too_big_to_compile_safely_is_refused_before_compiling() {
    // 2 MiB of one function: compiling it would take the host's memory
    // by the gigabyte; refused at once, by reading the code section.
    let limit = moat_sandbox::DEFAULT_MAX_FUNCTION_BYTES;
    let error = load_error(&moat_testkit::wasm::component_with_function(2 * limit)).await;
    assert!(
        matches!(error, LoadError::FunctionTooLarge { index: 0, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains(&format!("{limit}-byte limit")),
        "{error}"
    );
    // Small functions are compiled as ever (this one is no adapter).
    let error = load_error(&moat_testkit::wasm::component_with_function(1000)).await;
    assert!(matches!(error, LoadError::NotAnAdapter), "{error}");
}

#[tokio::test]
async fn a_component_with_other_exports_is_refused_naming_the_export() {
    let error = sandbox()
        .load_file(Path::new(NOT_AN_ADAPTER))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(error, LoadError::UnexpectedExport { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("greet"), "{error}");
}

#[tokio::test]
async fn a_component_built_against_the_current_contract_loads_and_runs() {
    // The guest SDK builds against the newest contract the host runs.
    let latest = moat_sandbox::contract::LATEST;
    assert_eq!(
        moat_guest::CONTRACT_VERSION,
        format!("moat:adapter@{latest}")
    );
    assert!(moat_sandbox::contract::supported_versions().any(|v| v == latest));
    let adapter = load(FLOOD).await;
    assert_eq!(adapter.details().contract, latest);
    let events = run_component(FLOOD, "2", |_| {}).await;
    assert_eq!(
        single_done(&events).status,
        moat_engine::DoneStatus::Success
    );
}

#[tokio::test]
async fn a_component_of_an_older_supported_contract_runs_beside_and_is_refused_what_it_cannot_carry()
 {
    // Built from wit/v0.2.0 directly, while everything else is newer.
    let adapter = load(CONTRACT_V0_2).await;
    assert_eq!(adapter.details().contract.to_string(), "0.2.0");
    assert_ne!(moat_sandbox::contract::LATEST.to_string(), "0.2.0");
    let events = run_component(CONTRACT_V0_2, "hi", |_| {}).await;
    let done = single_done(&events);
    assert_eq!(done.status, moat_engine::DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some("0.2.0: hi"));

    // Directories, MCP servers and sub-agents came with 0.3.0: a 0.2.0
    // adapter is refused them before it runs, rather than never told.
    let refused = run_component(CONTRACT_V0_2, "hi", |request| {
        request.options.directories = vec!["/data".into()];
        request.options.agents = Some(serde_json::json!({}));
    })
    .await;
    let message = moat_testkit::error_message(&refused, "UNSUPPORTED_OPTION");
    assert!(
        message.contains("0.2.0") && message.contains("directories, agents"),
        "{message}"
    );
    assert_eq!(moat_testkit::error_codes(&refused), ["UNSUPPORTED_OPTION"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_of_an_older_contract_is_served_its_unchanged_imports_by_the_newest() {
    // 0.2.0's `host` and `process` are the same as the newest's: the host
    // serves them with the newest's implementation, under 0.2.0's names.
    let granted = run_component(CONTRACT_V0_2, "run echo hello", |request| {
        request.scope.grants = moat_grants::Grants {
            run: vec!["echo".into()],
            ..moat_grants::Grants::none()
        };
    })
    .await;
    assert_eq!(
        single_done(&granted).status,
        moat_engine::DoneStatus::Success
    );
    assert_eq!(moat_testkit::texts(&granted), ["0.2.0: hello"]);

    let refused = run_component(CONTRACT_V0_2, "run echo hello", |_| {}).await;
    let texts = moat_testkit::texts(&refused);
    assert!(
        texts.len() == 1 && texts[0].starts_with("0.2.0: denied:"),
        "{texts:?}"
    );
    assert_eq!(moat_testkit::error_codes(&refused), ["CAPABILITY_DENIED"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_of_the_previous_contract_runs_on_the_newest_host_side_under_its_own_names() {
    // Built from wit/v0.3.0 directly: 0.4.0 only added `approvals`, so
    // everything 0.3.0 imports is served by the newest module.
    let adapter = load(CONTRACT_V0_3).await;
    assert_eq!(adapter.details().contract.to_string(), "0.3.0");
    assert_ne!(moat_sandbox::contract::LATEST.to_string(), "0.3.0");
    let events = run_component(CONTRACT_V0_3, "hi", |request| {
        // Every option 0.3.0 carries reaches it.
        request.options.directories = vec!["/data".into()];
    })
    .await;
    let done = single_done(&events);
    assert_eq!(done.status, moat_engine::DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some("0.3.0: hi"));

    let granted = run_component(CONTRACT_V0_3, "run echo hello", |request| {
        request.scope.grants = moat_grants::Grants {
            run: vec!["echo".into()],
            ..moat_grants::Grants::none()
        };
    })
    .await;
    assert_eq!(moat_testkit::texts(&granted), ["0.3.0: hello"]);
    let refused = run_component(CONTRACT_V0_3, "run echo hello", |_| {}).await;
    assert_eq!(moat_testkit::error_codes(&refused), ["CAPABILITY_DENIED"]);
}

#[tokio::test]
async fn a_component_of_an_incompatible_contract_version_is_refused_naming_both_versions() {
    let error = sandbox()
        .load_file(Path::new(FUTURE_CONTRACT))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(error, LoadError::IncompatibleContract { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("0.9.0") && message.contains(&moat_sandbox::contract::LATEST.to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn a_second_load_of_the_same_component_does_not_compile_again() {
    let dir = tempfile::tempdir().unwrap();
    let first = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    assert_eq!(first.details().cache, CacheOutcome::Miss);
    // A new sandbox, as in a new process.
    let second = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    assert_eq!(second.details().cache, CacheOutcome::Hit);
    assert_eq!(first.details().cache_path, second.details().cache_path);
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_recompiled_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let first = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    let entry = first.details().cache_path.clone().unwrap();
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();

    let again = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    assert!(
        matches!(again.details().cache, CacheOutcome::Replaced(_)),
        "{:?}",
        again.details().cache
    );
    let third = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    assert_eq!(
        third.details().cache,
        CacheOutcome::Hit,
        "the entry was rewritten"
    );
}

#[tokio::test]
async fn a_truncated_cache_entry_is_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let first = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    std::fs::write(first.details().cache_path.clone().unwrap(), b"short").unwrap();
    let again = sandbox_with_cache(dir.path())
        .load_file(Path::new(FLOOD))
        .await
        .unwrap();
    assert!(matches!(again.details().cache, CacheOutcome::Replaced(_)));
}
