//! Starting a recorded, contained run without the `moat` binary: a
//! program embeds the launch layer and gives it a book to keep runs in.
//! The launch layer knows neither the store nor the cluster; whichever
//! [`RunBook`] it is given records the run, exactly once.

use std::sync::Arc;

use futures::StreamExt;
use moat_launch::{AdapterRef, Ceiling, LaunchSpec, Launcher, Resolver};
use moat_runs::{RunBook, RunStatus, Runs};
use moat_sandbox::{Sandbox, SandboxConfig};
use moat_store::{LocalRuns, Store};

#[tokio::test]
async fn an_embedder_starts_a_recorded_run_through_a_book_of_its_choice() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("moat.db")).unwrap());
    let runs = LocalRuns::new(store);
    let book: Arc<dyn RunBook> = Arc::new(runs.clone());
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let launcher = Launcher::new(Resolver::new(sandbox), Some(book));

    // The most any run started here may get: nothing but what a built-in
    // declares it needs.
    let ceiling = Arc::new(Ceiling::new("this program"));
    let spec = LaunchSpec::new(AdapterRef::Named("echo".into()), "hello", ceiling);
    let prepared = launcher.prepare(spec).await.unwrap();
    let id = prepared.id().cloned().expect("recorded");
    // Recorded before it starts.
    let pending = runs.get(&id).await.unwrap().expect("its record");
    assert_eq!(pending.status, RunStatus::Pending);
    let mut events = launcher.start(prepared);
    let mut types = Vec::new();
    while let Some(event) = events.next().await {
        types.push(event.type_name().to_owned());
    }
    drop(events);
    assert_eq!(types.last().map(String::as_str), Some("done"), "{types:?}");
    let record = runs.wait(&id).await.unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    // Every event it handed on is in the book, in order, the done last.
    let stored = runs.stored(&id, 0, 1000).await.unwrap();
    assert_eq!(stored.len(), types.len());
    assert!(stored.last().unwrap().done);
}

#[tokio::test]
async fn a_launcher_without_a_book_records_nothing_and_refuses_what_needs_a_record() {
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let launcher = Launcher::new(Resolver::new(sandbox), None);
    let ceiling = Arc::new(Ceiling::new("this program"));
    let spec = LaunchSpec::new(AdapterRef::Named("echo".into()), "hello", ceiling.clone());
    let prepared = launcher.prepare(spec).await.unwrap();
    assert!(prepared.id().is_none(), "recorded nowhere");
    let done = launcher
        .start(prepared)
        .filter(|e| futures::future::ready(e.is_done()))
        .count()
        .await;
    assert_eq!(done, 1);
    // A run that asks can be answered only through its record.
    let spec = LaunchSpec {
        ask: Some(moat_launch::Ask::default()),
        ..LaunchSpec::new(AdapterRef::Named("echo".into()), "hello", ceiling)
    };
    let refused = launcher.prepare(spec).await.err().expect("refused");
    assert!(
        refused
            .to_string()
            .contains("a run recorded nowhere cannot ask for approval"),
        "{refused}"
    );
}
