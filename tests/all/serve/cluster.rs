//! `moat serve --nats`: the protocol unchanged for its clients, the runs
//! on a NATS JetStream cluster's workers (real `nats-server`, real `moat
//! worker`, the real `moat serve`; every message checked against the
//! schema as in the other serve tests).

use std::time::Duration;

use moat_testkit::components::SPIN_NEXT;
use moat_testkit::nats;
use serde_json::json;

use super::client::Server;
use super::start;
use crate::cluster::Worker;

#[test]
fn the_protocol_is_unchanged_when_the_runs_are_on_a_cluster() {
    if !nats::available() {
        return;
    }
    let nats = nats::server(&[]);
    let url = nats.url();
    let _worker = Worker::start(&url, &["--max-runs", "4"]);
    let (_server, mut client) = Server::stdio(&["--nats", &url]);

    let run = start(
        &mut client,
        json!({"adapter": "echo", "prompt": "hello cluster"}),
    );
    let results = client.ok("await", json!({"runs": [run]}));
    assert_eq!(results["results"][&run]["status"], "success", "{results}");
    assert_eq!(results["results"][&run]["text"], "hello cluster");
    let record = client.ok("get", json!({"run": run}));
    assert_eq!(record["status"], "completed");
    assert_eq!(record["result"]["text"], "hello cluster");
    assert!(
        record["worker"].as_str().unwrap().starts_with("w_"),
        "{record}"
    );
    let listed = client.ok("list", json!({"status": ["completed"], "limit": 5}));
    assert!(
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == run.as_str())
    );

    // A subscription replays the stored events, numbered from 0, to the done.
    client.ok("subscribe", json!({"runs": [run]}));
    let events = client.events_until_done(&run);
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], index as u64, "{event}");
    }
    assert_eq!(events[0]["data"]["type"], "init");
    // From past the end of an ended run: refused.
    let past = client.error("subscribe", json!({"runs": [run], "fromSeq": 1000}));
    assert_eq!(past["code"], "INVALID_REQUEST");

    // A live run: subscribed while it runs, cancelled, awaited.
    let long = start(&mut client, json!({"adapter": SPIN_NEXT, "prompt": "spin"}));
    client.ok("subscribe", json!({"runs": [long]}));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while client.ok("get", json!({"run": long}))["status"] != "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A child of it, which ends when it does.
    let child = start(
        &mut client,
        json!({"adapter": SPIN_NEXT, "prompt": "child", "parent": long}),
    );
    client.ok("cancel", json!({"run": long}));
    let events = client.events_until_done(&long);
    assert_eq!(
        events.last().unwrap()["data"]["payload"]["status"],
        "interrupted"
    );
    let failed = client.error("await", json!({"runs": [long, child]}));
    assert_eq!(failed["code"], "RUN_FAILED");
    let child_record = client.ok("get", json!({"run": child}));
    assert_eq!(child_record["status"], "failed");
    assert_eq!(child_record["reason"], "parent ended");
    assert_eq!(
        client.ok("get", json!({"run": long}))["reason"],
        "cancelled"
    );

    // Grants only narrow: beyond the server's ceiling is refused before
    // anything reaches the cluster; a child beyond its parent too.
    let refused = client.error(
        "run",
        json!({"adapter": "echo", "prompt": "x", "grants": {"read": ["/etc"]}}),
    );
    assert_eq!(refused["code"], "BOUNDARY_VIOLATION");
    // Unknown runs: NOT_FOUND, as on one machine; cancel is idempotent.
    let unknown = client.error("get", json!({"run": "r_0000000000000000000000000z"}));
    assert_eq!(unknown["code"], "NOT_FOUND");
    client.ok("cancel", json!({"run": "r_0000000000000000000000000z"}));
}
