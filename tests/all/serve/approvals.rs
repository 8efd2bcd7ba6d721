//! Approvals through the protocol: a client sees a run's request as a
//! `permission_request` event, answers it with `approve` or `deny`, and
//! the run goes on; nothing past the server's ceiling is ever granted,
//! whoever answers.

use moat_testkit::components::ESCAPE;
use moat_testkit::http_server::{SERVED, TestServer};
use serde_json::{Value, json};

use super::client::Server;
use super::start;

/// The `text` contents among `events` (`run_event`s).
fn texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["data"]["type"] == "text")
        .map(|e| e["data"]["payload"]["content"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_client_approves_a_runs_request_and_nothing_past_the_servers_ceiling_is_granted() {
    let allowed = TestServer::answering();
    let beyond = TestServer::answering();
    let (_server, mut client) =
        Server::stdio(&[&format!("--allow-net=127.0.0.1:{}", allowed.port)]);
    let probes = format!(
        "http GET http://127.0.0.1:{}/\nhttp GET http://127.0.0.1:{}/",
        allowed.port, beyond.port
    );
    // The run asks for no network: what it reaches it must ask for.
    let run = start(
        &mut client,
        json!({"adapter": ESCAPE, "prompt": probes, "grants": {"net": []}, "ask": {}}),
    );
    client.ok("subscribe", json!({"runs": [run]}));
    let event = client.event();
    let request = &event["data"];
    assert_eq!(request["type"], "permission_request", "{event}");
    assert_eq!(request["payload"]["requestId"], "1");
    assert_eq!(request["payload"]["kind"], "net");
    assert_eq!(request["payload"]["input"]["port"], allowed.port);

    let record = client.ok("get", json!({"run": run}));
    assert_eq!(record["status"], "waiting");
    assert_eq!(record["requests"][0]["answer"], Value::Null);
    let open = client.ok("approvals", json!({"run": run}));
    assert_eq!(open["requests"].as_array().unwrap().len(), 1);

    let answered = client.ok("approve", json!({"run": run}));
    assert_eq!(answered["request"]["answer"]["approved"], true);
    assert!(
        answered["request"]["answer"]["by"]
            .as_str()
            .unwrap()
            .starts_with("a client of moat serve (pid ")
    );
    let events = client.events_until_done(&run);
    let texts = texts(&events);
    assert_eq!(texts[0], format!("ok: 200 {SERVED}"), "{events:?}");
    assert!(texts[1].starts_with("denied: "), "{events:?}");
    // The host past the ceiling: denied at once, nobody asked.
    let requests = events
        .iter()
        .filter(|e| e["data"]["type"] == "permission_request")
        .count();
    assert_eq!(requests, 0, "no second request reached the client");
    let error = events
        .iter()
        .find(|e| e["data"]["type"] == "error")
        .expect("the refusal, as an error");
    let message = error["data"]["payload"]["message"].as_str().unwrap();
    assert!(
        message.contains("beyond what this server may grant"),
        "{message}"
    );
    assert_eq!(allowed.connections(), 1);
    assert_eq!(beyond.connections(), 0);

    let record = client.ok("get", json!({"run": run}));
    assert_eq!(record["status"], "completed");
    let second = &record["requests"][1];
    assert_eq!(second["request"]["port"], beyond.port);
    assert_eq!(second["answer"]["approved"], false);
    assert_eq!(second["answer"]["by"], "the ceiling of this server");

    // Answering again, or a run with no open request: a clear error.
    let again = client.error("deny", json!({"run": run, "request": 1}));
    assert_eq!(again["code"], "INVALID_REQUEST");
    let both = client.error(
        "run",
        json!({"adapter": "echo", "prompt": "x", "ask": {"timeoutMs": 5, "noTimeout": true}}),
    );
    assert_eq!(both["code"], "INVALID_REQUEST");
}
