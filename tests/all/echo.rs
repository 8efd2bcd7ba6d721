//! The built-in echo adapter, as embedded in the binary, and the adapter
//! authoring guide that walks through its source.

use std::sync::Arc;

use moat_engine::{Adapter, Registry};
use moat_testkit::{collect, sandbox};

async fn echo_registry() -> Registry<moat_sandbox::RunScope> {
    let bytes = moat_builtins::component("echo").expect("echo is built in");
    let adapter = sandbox()
        .load_bytes("built-in".into(), bytes.to_vec())
        .await
        .unwrap();
    assert_eq!(adapter.info().name, "echo");
    let mut registry = Registry::scoped();
    registry.register(Arc::new(adapter)).unwrap();
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_streams_the_prompt_back_as_deltas_then_text_then_done() {
    let prompt = "hello,  sandboxed\nworld";
    let events = collect(
        &echo_registry().await,
        moat_testkit::request("echo", prompt),
    )
    .await;
    moat_testkit::conformance::echo(&events, prompt, "echo");
}

#[test]
fn the_authoring_guide_quotes_the_echo_adapter_verbatim() {
    let root = moat_testkit::repo_root();
    let guide = std::fs::read_to_string(root.join("docs/adapter-authoring.md")).unwrap();
    let source = std::fs::read_to_string(root.join("adapters/echo/src/lib.rs")).unwrap();
    let quoted = guide
        .split("```rust\n")
        .skip(1)
        .filter_map(|block| block.split("\n```").next())
        .any(|block| block.trim() == source.trim());
    assert!(
        quoted,
        "docs/adapter-authoring.md must quote adapters/echo/src/lib.rs in full"
    );
}
