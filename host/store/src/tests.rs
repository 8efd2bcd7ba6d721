//! The store against real SQLite files in temporary directories.

use std::path::PathBuf;
use std::sync::Arc;

use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use serde_json::json;

use super::*;

fn new_run(parent: Option<&RunId>) -> NewRun {
    NewRun {
        parent: parent.cloned(),
        adapter: "echo".into(),
        component_sha256: "ab".repeat(32),
        prompt: "hi".into(),
        options: json!({"model": "m"}),
        grants: Default::default(),
        trust: Some(moat_grants::TrustLevel::Sandbox),
        limits: Some(RecordedLimits {
            timeout_ms: Some(1000),
            ..RecordedLimits::of(&Default::default())
        }),
        role: None,
    }
}

fn text(content: &str) -> AgentEvent {
    AgentEvent {
        agent: "echo".into(),
        timestamp: 1,
        session_id: "s".into(),
        role: None,
        payload: EventPayload::text(content),
    }
}

fn completed() -> Outcome {
    Outcome {
        status: RunStatus::Completed,
        reason: None,
        done: Some(json!({"status": "success"})),
    }
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/moat.db");
    (dir, path)
}

fn dones(store: &Store, id: &RunId) -> usize {
    store
        .events(id, 0)
        .unwrap()
        .iter()
        .filter(|(_, event)| event.is_done())
        .count()
}

#[test]
fn a_run_is_recorded_pending_then_running_then_ended_once() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let id = store.create_run(&new_run(None)).unwrap();
    assert_eq!(store.get(&id).unwrap().unwrap().status, RunStatus::Pending);
    assert!(store.mark_running(&id).unwrap());
    for seq in 0..100 {
        store
            .record_event(&id, seq, &text(&seq.to_string()))
            .unwrap();
    }
    assert!(store.finish(&id, &completed()).unwrap());
    let failed = Outcome {
        status: RunStatus::Failed,
        reason: Some(FailReason::Cancelled),
        done: None,
    };
    assert!(
        !store.finish(&id, &failed).unwrap(),
        "only the first end counts"
    );
    let record = store.get(&id).unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.run, new_run(None));
    assert!(record.started_ms.is_some() && record.ended_ms.is_some());
    assert_eq!(record.owner_pid, std::process::id());
    let events = store.events(&id, 0).unwrap();
    assert_eq!(events.len(), 101, "100 events and the done the store added");
    assert!(
        events
            .iter()
            .enumerate()
            .all(|(i, (seq, _))| *seq == i as u64)
    );
    assert_eq!(store.events(&id, 99).unwrap().len(), 2);
    assert!(
        !store.mark_running(&id).unwrap(),
        "an ended run stays ended"
    );
}

#[test]
fn a_newer_schema_is_refused_untouched_and_garbage_is_a_clear_error() {
    let (_dir, path) = scratch();
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let error = Store::open(&path).unwrap_err();
    assert!(matches!(error, StoreError::NewerSchema { .. }), "{error}");
    assert!(error.to_string().contains("use a newer moat"), "{error}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION + 1, "not altered");

    let (_dir, garbage) = scratch();
    std::fs::create_dir_all(garbage.parent().unwrap()).unwrap();
    std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
    let error = Store::open(&garbage).unwrap_err();
    assert!(
        error.to_string().contains("cannot open the run store"),
        "{error}"
    );
}

#[test]
fn only_the_runs_of_owners_that_are_gone_are_failed_at_open() {
    let (_dir, path) = scratch();
    let alive = Store::open(&path).unwrap();
    let kept = alive.create_run(&new_run(None)).unwrap();
    alive.mark_running(&kept).unwrap();

    let doomed = Store::open(&path).unwrap();
    let lost = doomed.create_run(&new_run(None)).unwrap();
    doomed.mark_running(&lost).unwrap();
    doomed.record_event(&lost, 0, &text("before")).unwrap();
    let child = alive.create_run(&new_run(Some(&lost))).unwrap();
    drop(doomed); // its lease goes, as when its process dies

    let fresh = Store::open(&path).unwrap();
    let lost_record = fresh.get(&lost).unwrap().unwrap();
    assert_eq!(lost_record.status, RunStatus::Failed);
    assert_eq!(lost_record.reason, Some(FailReason::EngineRestart));
    assert_eq!(
        fresh.events(&lost, 0).unwrap().len(),
        2,
        "its event, then a done"
    );
    assert_eq!(dones(&fresh, &lost), 1);
    let child_record = fresh.get(&child).unwrap().unwrap();
    assert_eq!(child_record.reason, Some(FailReason::ParentEnded));
    assert_eq!(
        fresh.get(&kept).unwrap().unwrap().status,
        RunStatus::Running,
        "a live owner's run is left alone"
    );
}

#[test]
fn ending_a_run_ends_its_live_descendants() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let parent = store.create_run(&new_run(None)).unwrap();
    let child = store.create_run(&new_run(Some(&parent))).unwrap();
    let grandchild = store.create_run(&new_run(Some(&child))).unwrap();
    let done_child = store.create_run(&new_run(Some(&parent))).unwrap();
    store.finish(&done_child, &completed()).unwrap();
    store.finish(&parent, &completed()).unwrap();
    for id in [&child, &grandchild] {
        let record = store.get(id).unwrap().unwrap();
        assert_eq!(record.reason, Some(FailReason::ParentEnded));
        let done = &store.events(id, 0).unwrap()[0].1;
        assert_eq!(done.as_done().unwrap().status, DoneStatus::Interrupted);
    }
    assert_eq!(
        store.get(&done_child).unwrap().unwrap().status,
        RunStatus::Completed
    );
}

#[test]
fn a_prefix_names_a_run_when_it_names_only_one() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let ids: Vec<RunId> = (0..3)
        .map(|_| store.create_run(&new_run(None)).unwrap())
        .collect();
    assert_eq!(store.resolve(ids[1].as_str()).unwrap(), ids[1]);
    let last = ids[2].as_str();
    assert_eq!(store.resolve(&last[..last.len() - 1]).unwrap(), ids[2]);
    assert!(matches!(
        store.resolve("r_"),
        Err(StoreError::Ambiguous { count: 3, .. })
    ));
    assert!(matches!(
        store.resolve("r_zzzz"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(store.resolve("r_%"), Err(StoreError::NotFound(_))));
}

#[test]
fn cancel_is_idempotent_and_reaches_the_owner() {
    let (_dir, path) = scratch();
    let owner = Store::open(&path).unwrap();
    let other = Store::open(&path).unwrap();
    let id = owner.create_run(&new_run(None)).unwrap();
    owner.mark_running(&id).unwrap();
    other.request_cancel(&id).unwrap();
    other.request_cancel(&id).unwrap();
    other.request_cancel(&RunId::new()).unwrap();
    assert_eq!(
        owner.cancels_requested().unwrap(),
        std::slice::from_ref(&id)
    );
    assert!(other.cancels_requested().unwrap().is_empty(), "not its run");
    owner.finish(&id, &completed()).unwrap();
    assert!(owner.cancels_requested().unwrap().is_empty());
}

#[test]
fn listing_filters_by_status_newest_first_and_prune_removes_old_ended_runs() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let a = store.create_run(&new_run(None)).unwrap();
    let b = store.create_run(&new_run(None)).unwrap();
    store.record_event(&a, 0, &text("x")).unwrap();
    store.finish(&a, &completed()).unwrap();
    let all = store.list(&RunFilter::default()).unwrap();
    assert_eq!(
        all.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        [b.clone(), a.clone()]
    );
    let live = RunFilter {
        statuses: vec![RunStatus::Pending],
        ..RunFilter::default()
    };
    assert_eq!(store.list(&live).unwrap().len(), 1);
    assert_eq!(
        store.prune(Duration::from_secs(3600)).unwrap(),
        0,
        "too recent"
    );
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(store.prune(Duration::ZERO).unwrap(), 1);
    assert!(store.get(&a).unwrap().is_none());
    assert!(
        store.events(&a, 0).unwrap().is_empty(),
        "its events went with it"
    );
    assert!(
        store.get(&b).unwrap().is_some(),
        "a live run is never pruned"
    );
}

mod interleavings {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Process `p` starts a run (a child of the newest run, sometimes).
        Start { process: usize, nested: bool },
        /// The run `r` emits an event (if its process still has it).
        Event { run: usize },
        /// The run `r` ends (success or error) through its process.
        Finish { run: usize, success: bool },
        /// Process `p` asks to cancel run `r`; its owner acts on it.
        Cancel { process: usize, run: usize },
        /// Process `p` dies without ending its runs.
        Crash { process: usize },
        /// Process `p` (re)starts: opening the store reconciles.
        Restart { process: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3usize, any::<bool>()).prop_map(|(process, nested)| Op::Start { process, nested }),
            (0..8usize).prop_map(|run| Op::Event { run }),
            (0..8usize, any::<bool>()).prop_map(|(run, success)| Op::Finish { run, success }),
            (0..3usize, 0..8usize).prop_map(|(process, run)| Op::Cancel { process, run }),
            (0..3usize).prop_map(|process| Op::Crash { process }),
            (0..3usize).prop_map(|process| Op::Restart { process }),
        ]
    }

    struct Run {
        id: RunId,
        process: usize,
        next_seq: u64,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn every_run_ends_once_with_exactly_one_done(ops in proptest::collection::vec(op(), 1..40)) {
            let (_dir, path) = scratch();
            let mut processes: Vec<Option<Store>> = (0..3).map(|_| Some(Store::open(&path).unwrap())).collect();
            let mut runs: Vec<Run> = Vec::new();
            for op in ops {
                match op {
                    Op::Start { process, nested } => {
                        let Some(store) = &processes[process] else { continue };
                        let parent = runs.last().filter(|_| nested).map(|r| r.id.clone());
                        let id = match store.create_run(&new_run(parent.as_ref())) {
                            Ok(id) => id,
                            // A child of a run that has ended is refused.
                            Err(StoreError::ParentEnded(_)) => continue,
                            Err(other) => panic!("{other}"),
                        };
                        store.mark_running(&id).unwrap();
                        runs.push(Run { id, process, next_seq: 0 });
                    }
                    Op::Event { run } => {
                        let Some(run) = runs.get_mut(run) else { continue };
                        let Some(store) = &processes[run.process] else { continue };
                        // The owner may not know yet that the store ended it.
                        store.record_event(&run.id, run.next_seq, &text("e")).unwrap();
                        run.next_seq += 1;
                    }
                    Op::Finish { run, success } => {
                        let Some(run) = runs.get_mut(run) else { continue };
                        let Some(store) = &processes[run.process] else { continue };
                        // As the engine does: the done event, then the
                        // status (maybe after the store ended it).
                        let status = if success { DoneStatus::Success } else { DoneStatus::Error };
                        let mut done = text("");
                        done.payload = EventPayload::Done(Box::new(moat_engine::DonePayload {
                            status,
                            result: None,
                            resume_token: None,
                            usage: Default::default(),
                            duration_ms: 0,
                            metadata: None,
                        }));
                        store.record_event(&run.id, run.next_seq, &done).unwrap();
                        run.next_seq += 1;
                        let outcome = if success {
                            completed()
                        } else {
                            Outcome { status: RunStatus::Failed, reason: Some(FailReason::AdapterError), done: None }
                        };
                        store.finish(&run.id, &outcome).unwrap();
                    }
                    Op::Cancel { process, run } => {
                        let (Some(asker), Some(run)) = (&processes[process], runs.get(run)) else { continue };
                        asker.request_cancel(&run.id).unwrap();
                        if let Some(owner) = &processes[run.process] {
                            for id in owner.cancels_requested().unwrap() {
                                let outcome = Outcome { status: RunStatus::Failed, reason: Some(FailReason::Cancelled), done: None };
                                owner.finish(&id, &outcome).unwrap();
                            }
                        }
                    }
                    Op::Crash { process } => {
                        processes[process] = None;
                    }
                    Op::Restart { process } => {
                        processes[process] = Some(Store::open(&path).unwrap());
                    }
                }
            }
            // Every process goes; the next one to open cleans up.
            processes.clear();
            let last = Store::open(&path).unwrap();
            for run in &runs {
                let record = last.get(&run.id).unwrap().unwrap();
                prop_assert!(record.status.is_terminal(), "{:?} is {}", run.id, record.status);
                prop_assert_eq!(dones(&last, &run.id), 1, "{:?}", record);
                let events = last.events(&run.id, 0).unwrap();
                prop_assert!(events.last().unwrap().1.is_done(), "done is last");
                prop_assert!(events.iter().enumerate().all(|(i, (seq, _))| *seq == i as u64));
            }
        }
    }
}

#[test]
fn a_version_1_store_keeps_its_runs_and_events_when_migrated() {
    let (_dir, path) = scratch();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let event = |n: u64| serde_json::to_string(&text(&n.to_string())).unwrap();
    let id = RunId::new();
    {
        // A store as the first moat with one wrote it.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(schema::MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO runs (id, adapter, component_sha256, prompt, options, grants, limits,
                               status, owner, owner_pid, created_ms)
             VALUES (?1, 'echo', '', 'hi', '{}', '{}', '{}', 'completed', 'gone', 1, 0)",
            [id.as_str()],
        )
        .unwrap();
        for seq in 0..3_i64 {
            conn.execute(
                "INSERT INTO events (run_id, seq, kind, event) VALUES (?1, ?2, 'text', ?3)",
                params![id.as_str(), seq, event(seq as u64)],
            )
            .unwrap();
        }
    }
    let store = Store::open(&path).unwrap();
    let version: i64 = store
        .conn()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let texts: Vec<String> = store
        .events(&id, 0)
        .unwrap()
        .into_iter()
        .map(|(seq, e)| format!("{seq}:{}", serde_json::to_string(&e).unwrap()))
        .collect();
    let expected: Vec<String> = (0..3).map(|n| format!("{n}:{}", event(n))).collect();
    assert_eq!(texts, expected);
}

#[test]
fn a_child_needs_a_live_parent_and_its_owner_is_asked_to_stop_it_when_the_parent_ends() {
    let (_dir, path) = scratch();
    let parents_moat = Store::open(&path).unwrap();
    let childs_moat = Store::open(&path).unwrap();
    let parent = parents_moat.create_run(&new_run(None)).unwrap();
    let child = childs_moat.create_run(&new_run(Some(&parent))).unwrap();
    childs_moat.mark_running(&child).unwrap();
    assert!(childs_moat.cancels_requested().unwrap().is_empty());
    parents_moat.finish(&parent, &completed()).unwrap();
    let record = childs_moat.get(&child).unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.reason, Some(FailReason::ParentEnded));
    assert_eq!(
        childs_moat.cancels_requested().unwrap(),
        std::slice::from_ref(&child),
        "the child's moat is told to stop it"
    );
    assert!(parents_moat.cancels_requested().unwrap().is_empty());
    // Its moat stops it: nothing more is asked, the store's end stands.
    let stopped = Outcome {
        status: RunStatus::Failed,
        reason: Some(FailReason::Cancelled),
        done: None,
    };
    assert!(!childs_moat.finish(&child, &stopped).unwrap());
    assert!(childs_moat.cancels_requested().unwrap().is_empty());
    assert_eq!(dones(&childs_moat, &child), 1);
    assert!(matches!(
        childs_moat.create_run(&new_run(Some(&parent))),
        Err(StoreError::ParentEnded(_))
    ));
    assert!(matches!(
        childs_moat.create_run(&new_run(Some(&RunId::new()))),
        Err(StoreError::NotFound(_))
    ));
}

/// The size of the store's WAL file (0 when there is none).
fn wal_len(path: &std::path::Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Records whole runs until the WAL is past what a close checkpoints.
fn grow_wal(store: &Store, path: &std::path::Path) {
    for _ in 0..2_000 {
        if wal_len(path) >= crate::checkpoint::CLOSE_WAL_BYTES {
            return;
        }
        let id = store.create_run(&new_run(None)).unwrap();
        assert!(store.mark_running(&id).unwrap());
        store.record_event(&id, 0, &text("x")).unwrap();
        store.flush().unwrap();
        assert!(store.finish(&id, &completed()).unwrap());
    }
    panic!("the WAL did not grow");
}

#[test]
fn a_big_wal_is_cut_when_the_store_closes_unless_the_store_is_in_use_elsewhere() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    grow_wal(&store, &path);
    let runs = store.list(&RunFilter::default()).unwrap().len();
    drop(store);
    assert_eq!(
        wal_len(&path),
        0,
        "the next open has no WAL to read through"
    );

    // Someone else reading (another process, say): the close neither waits
    // for them nor loses anything.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), runs);
    grow_wal(&store, &path);
    let reader = rusqlite::Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |row| row.get(0))
        .unwrap();
    let closing = std::time::Instant::now();
    drop(store);
    assert!(closing.elapsed() < BUSY_TIMEOUT, "the close did not wait");
    assert!(wal_len(&path) >= crate::checkpoint::CLOSE_WAL_BYTES);
    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    let store = Store::open(&path).unwrap();
    let all = store.list(&RunFilter::default()).unwrap();
    assert!(all.len() > runs && all.iter().all(|r| r.status == RunStatus::Completed));
}

#[test]
fn an_event_encoded_by_the_caller_is_stored_as_given_and_never_across_lines() {
    let (_dir, path) = scratch();
    let store = std::sync::Arc::new(Store::open(&path).unwrap());
    let mut recorder = Recorder::create(store.clone(), &new_run(None)).unwrap();
    let event = text("as given");
    let json = serde_json::to_vec(&event).unwrap();
    assert_eq!(recorder.record_encoded(&event, &json).unwrap(), 0);
    let broken = b"{\"type\":\"text\",\n\"payload\":{}}";
    assert!(
        recorder.record_encoded(&event, broken).is_err(),
        "a line break would split the stored block"
    );
    store.flush().unwrap();
    let id = recorder.id().clone();
    let lines = store.event_lines(&id, 0, 10).unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].json.as_bytes(), &json[..]);
}

#[test]
fn a_new_store_opened_by_many_at_once_opens_for_each() {
    // The first opens of a store race to create it and to switch it to
    // WAL; SQLite refuses that switch at once (no busy wait) while another
    // connection holds the file.
    for _ in 0..20 {
        let (_dir, path) = scratch();
        let start = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        Store::open(&path).map(drop)
                    })
                })
                .collect();
            for open in opens {
                open.join().unwrap().unwrap();
            }
        });
    }
}

#[test]
fn runs_are_listed_by_adapter_and_parent_and_keep_their_trust_and_limits() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let parent = store.create_run(&new_run(None)).unwrap();
    let child = store.create_run(&new_run(Some(&parent))).unwrap();
    let other = store
        .create_run(&NewRun {
            adapter: "fanout".into(),
            trust: Some(moat_grants::TrustLevel::Controlled),
            limits: None,
            ..new_run(None)
        })
        .unwrap();
    let ids = |filter: RunFilter| -> Vec<RunId> {
        store
            .list(&filter)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(
        ids(RunFilter {
            parent: Some(parent.clone()),
            ..RunFilter::default()
        }),
        vec![child.clone()]
    );
    assert_eq!(
        ids(RunFilter {
            adapter: Some("fanout".into()),
            ..RunFilter::default()
        }),
        vec![other.clone()]
    );
    let kept = store.get(&child).unwrap().unwrap();
    assert_eq!(kept.run, new_run(Some(&parent)));
    assert_eq!(kept.run.timeout_ms(), Some(1000));
    let fanout = store.get(&other).unwrap().unwrap();
    assert_eq!(fanout.run.trust, Some(moat_grants::TrustLevel::Controlled));
    assert_eq!(fanout.run.limits, None);
}

#[test]
fn an_ambiguous_prefix_names_some_of_its_runs() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let made: Vec<RunId> = (0..3)
        .map(|_| store.create_run(&new_run(None)).unwrap())
        .collect();
    match store.resolve("r_") {
        Err(StoreError::Ambiguous {
            count, candidates, ..
        }) => {
            assert_eq!(count, 3);
            assert_eq!(candidates, made);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_run_with_an_open_request_reads_as_waiting_and_any_process_answers_it_once() {
    use moat_runs::{Answer, ApprovalRequest, Requested};
    let (_dir, path) = scratch();
    let owner = Store::open(&path).unwrap();
    let other = Store::open(&path).unwrap();
    let id = owner.create_run(&new_run(None)).unwrap();
    let idle = owner.create_run(&new_run(None)).unwrap();
    owner.mark_running(&id).unwrap();
    owner.mark_running(&idle).unwrap();
    let request = ApprovalRequest {
        what: Requested::Net {
            host: "example.com".into(),
            port: 443,
        },
        reason: "not granted".into(),
    };
    let asked = owner.ask(&id, &request).unwrap();
    assert_eq!(asked.number, 1);
    assert_eq!(other.get(&id).unwrap().unwrap().status, RunStatus::Waiting);
    let listed = |statuses: Vec<RunStatus>| -> Vec<RunId> {
        let filter = RunFilter {
            statuses,
            ..RunFilter::default()
        };
        other
            .list(&filter)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(listed(vec![RunStatus::Waiting]), std::slice::from_ref(&id));
    assert_eq!(
        listed(vec![RunStatus::Running]),
        std::slice::from_ref(&idle)
    );
    assert_eq!(listed(RunStatus::LIVE.to_vec()).len(), 2);
    // A run whose request was recorded before its start was committed
    // (the writer's `running` comes after) waits all the same.
    let early = owner.create_run(&new_run(None)).unwrap();
    owner.ask(&early, &request).unwrap();
    assert_eq!(
        other.get(&early).unwrap().unwrap().status,
        RunStatus::Waiting
    );
    assert!(listed(vec![RunStatus::Waiting]).contains(&early));
    assert!(!listed(vec![RunStatus::Pending]).contains(&early));
    assert_eq!(owner.answer_of(&id, 1).unwrap(), None);

    let answer = Answer::approve("a test", true);
    let answered = other.answer(&id, None, &answer).unwrap();
    assert_eq!(answered.answer.as_ref(), Some(&answer));
    assert_eq!(owner.answer_of(&id, 1).unwrap(), Some(answer));
    assert_eq!(owner.get(&id).unwrap().unwrap().status, RunStatus::Running);
    let twice = other
        .answer(&id, Some(1), &Answer::deny("late", None))
        .unwrap_err()
        .to_string();
    assert!(
        twice.contains("approved always already, by a test"),
        "{twice}"
    );
    let none_open = other
        .answer(&id, None, &Answer::deny("x", None))
        .unwrap_err();
    assert!(
        none_open.to_string().contains("no open request"),
        "{none_open}"
    );

    owner.ask(&id, &request).unwrap();
    owner.finish(&id, &completed()).unwrap();
    let ended = other
        .answer(&id, None, &Answer::deny("x", None))
        .unwrap_err();
    assert!(ended.to_string().contains("has ended"), "{ended}");
    assert!(
        owner
            .ask(&id, &request)
            .unwrap_err()
            .to_string()
            .contains("has ended")
    );
    // The request left open when it ended was closed with it.
    let approvals = owner.approvals(&id).unwrap();
    assert_eq!(approvals.len(), 2);
    let closed = approvals[1]
        .answer
        .as_ref()
        .expect("closed as the run ended");
    assert!(!closed.approved);
    assert_eq!(closed.by, "moat");
    assert_eq!(closed.reason, Answer::closed().reason);
    assert_eq!(
        approvals[0].answer.as_ref().map(|a| a.by.as_str()),
        Some("a test")
    );
}

#[test]
fn a_page_of_stored_events_ends_where_a_block_ends_and_a_bounded_read_where_it_is_told() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let id = store.create_run(&new_run(None)).unwrap();
    assert!(store.mark_running(&id).unwrap());
    // Three blocks of five: each flush commits what was queued as one.
    for block in 0..3 {
        for seq in block * 5..block * 5 + 5 {
            store
                .record_event(&id, seq, &text(&seq.to_string()))
                .unwrap();
        }
        store.flush().unwrap();
    }
    let seqs = |lines: Vec<StoredEvent>| lines.iter().map(|l| l.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.event_page(&id, 2, 1).unwrap()),
        [2, 3, 4],
        "the rest of the block holding the first"
    );
    assert_eq!(
        seqs(store.event_page(&id, 2, 4).unwrap()),
        (2..10).collect::<Vec<_>>(),
        "and whole blocks until there are enough"
    );
    assert_eq!(
        seqs(store.event_page(&id, 7, 100).unwrap()),
        (7..15).collect::<Vec<_>>()
    );
    assert!(store.event_page(&id, 15, 1).unwrap().is_empty());
    assert_eq!(
        seqs(store.event_lines(&id, 3, 4).unwrap()),
        [3, 4, 5, 6],
        "a bounded read crosses blocks and stops inside one"
    );
    assert!(store.finish(&id, &completed()).unwrap());
    // The done the store adds is a block of its own.
    let last = store.event_page(&id, 14, 2).unwrap();
    assert_eq!(seqs(last.clone()), [14, 15]);
    assert!(last[1].done && !last[0].done);
}

#[test]
fn runs_created_together_share_commits_and_each_gets_its_own_answer() {
    let (_dir, path) = scratch();
    let store = Arc::new(Store::open(&path).unwrap());
    let live = store.create_run(&new_run(None)).unwrap();
    let ended = store.create_run(&new_run(None)).unwrap();
    store.finish(&ended, &completed()).unwrap();
    let taken = store.create_run(&new_run(None)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    // 300 creates at once, among them ones the store must refuse alone: a
    // child of an ended run, of no run, and an id recorded already.
    let asked: Vec<(RunId, NewRun)> = (0..300)
        .map(|n| match n % 10 {
            3 => (RunId::new(), new_run(Some(&ended))),
            5 => (RunId::new(), new_run(Some(&RunId::new()))),
            7 => (taken.clone(), new_run(None)),
            9 => (RunId::new(), new_run(Some(&live))),
            _ => (RunId::new(), new_run(None)),
        })
        .collect();
    let before = store.writer.batches_committed();
    let answers = runtime.block_on(async {
        let creating = asked.iter().cloned().map(|(id, run)| {
            let store = store.clone();
            tokio::spawn(async move { store.create_run_as_awaiting(id, &run).await })
        });
        futures::future::join_all(creating.collect::<Vec<_>>()).await
    });
    for ((id, run), answer) in asked.iter().zip(answers) {
        match (run.parent.as_ref(), answer.unwrap()) {
            (Some(parent), Err(StoreError::ParentEnded(named))) => {
                assert_eq!(parent, &ended, "{named}")
            }
            (Some(_), Err(StoreError::NotFound(_))) => {}
            (None, Err(StoreError::Write(_))) => assert_eq!(id, &taken),
            (_, Ok(created)) => {
                assert_eq!(&created, id);
                let record = store.get(id).unwrap().unwrap();
                assert_eq!(record.status, RunStatus::Pending);
                assert_eq!(&record.run, run);
            }
            (_, other) => panic!("{id}: {other:?}"),
        }
    }
    let created = store.list(&Default::default()).unwrap().len();
    assert_eq!(
        created,
        3 + 300 - 30 * 3,
        "every run asked for but the refused"
    );
    let commits = store.writer.batches_committed() - before;
    assert!(
        commits < 100,
        "{commits} commits for 300 runs asked for at once"
    );
}

#[test]
fn running_is_recorded_unwaited_and_a_refused_change_leaves_nothing() {
    let (_dir, path) = scratch();
    let store = Store::open(&path).unwrap();
    let id = store.create_run(&new_run(None)).unwrap();
    store.mark_running_unwaited(&id).unwrap();
    store.record_event(&id, 0, &text("a")).unwrap();
    store.flush().unwrap();
    let record = store.get(&id).unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Running);
    assert!(record.started_ms.is_some());
    // A change that wrote before it was refused is undone, alone.
    let key = id.to_string();
    let refused = store.writer.change(Box::new(move |conn| {
        conn.execute("UPDATE runs SET prompt = 'changed' WHERE id = ?1", [&key])?;
        Err(StoreError::Refused("no".into()))
    }));
    assert!(
        matches!(refused, Ok(Err(StoreError::Refused(_)))),
        "{refused:?}"
    );
    assert_eq!(store.get(&id).unwrap().unwrap().run.prompt, "hi");
    // One that panics is refused alone too, and the writer goes on.
    let key = id.to_string();
    let panicked = store.writer.change(Box::new(move |conn| {
        conn.execute("UPDATE runs SET prompt = 'changed' WHERE id = ?1", [&key])?;
        panic!("a change that panics");
    }));
    assert!(
        matches!(panicked, Ok(Err(StoreError::Write(_)))),
        "{panicked:?}"
    );
    assert_eq!(store.get(&id).unwrap().unwrap().run.prompt, "hi");
    assert!(store.finish(&id, &completed()).unwrap());
    assert_eq!(
        store.get(&id).unwrap().unwrap().status,
        RunStatus::Completed
    );
    assert_eq!(dones(&store, &id), 1);
}
