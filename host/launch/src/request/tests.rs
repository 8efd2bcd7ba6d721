//! The one request type read from each dialect.

use serde_json::{Map, Value, json};

use super::*;

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

/// The same request written in each dialect.
fn every_dialect(field: Field, value: Value) -> Vec<(Dialect, Map<String, Value>)> {
    [
        Dialect::Flags,
        Dialect::Policy,
        Dialect::Tasks,
        Dialect::Workflow,
        Dialect::Protocol,
    ]
    .into_iter()
    .filter_map(|dialect| {
        let spelled = dialect.spellings(field).into_iter().next()?;
        // `grants.net` as {"grants": {"net": …}}.
        let written = match spelled.split_once('.') {
            Some((group, name)) => json!({ group: { name: value.clone() } }),
            None => json!({ spelled: value.clone() }),
        };
        Some((dialect, object(written)))
    })
    .collect()
}

#[test]
fn the_same_mistake_is_the_same_typed_refusal_in_every_dialect_naming_the_field_as_written() {
    for (field, bad) in [
        (Field::Timeout, json!("soon")),
        (Field::MaxMemory, json!("lots")),
        (Field::Net, json!(["*"])),
        (Field::Env, json!(["A=B"])),
        (Field::MaxTokens, json!(0)),
        (Field::MaxProcesses, json!(0)),
        (Field::Cpus, json!("half")),
        (Field::Cpus, json!(0)),
    ] {
        let refusals: Vec<(Dialect, RequestError)> = every_dialect(field, bad.clone())
            .into_iter()
            .map(|(dialect, written)| {
                let error = RunRequest::read(&written, dialect, None, &[]).expect_err("a refusal");
                (dialect, error)
            })
            .collect();
        assert_eq!(refusals.len(), 5, "{field:?} is taken by every dialect");
        let first = refusals[0].1.problem();
        for (dialect, error) in &refusals {
            assert_eq!(error.field, Some(field), "{dialect:?}");
            assert_eq!(error.problem(), first, "{dialect:?}: the same words");
            assert_eq!(error.spelled, dialect.name_of(field), "{dialect:?}");
            assert!(
                error.to_string().starts_with(&dialect.name_of(field)),
                "{error}"
            );
        }
    }
}

#[test]
fn a_protocol_request_reads_as_the_flags_that_say_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let root_text = root.to_string_lossy().into_owned();
    let protocol = RunRequest::read(
        &object(json!({
            "adapter": "echo", "prompt": "hi", "trust": "controlled",
            "options": {"model": "m", "cwd": root_text, "systemPrompt": "be brief", "maxBudgetUsd": 1.5},
            "grants": {"net": ["api.example.com"], "read": [root_text]},
            "limits": {"timeoutMs": 30000, "maxMemoryBytes": 134217728, "maxTokens": 100},
            "ask": {"tools": ["Bash"], "noTimeout": true},
            "workspace": {"mode": "copy"}
        })),
        Dialect::Protocol,
        None,
        &[],
    )
    .unwrap();
    let flags = RunRequest::read(
        &object(json!({
            "ADAPTER": "echo", "PROMPT": "hi", "--trust": "controlled",
            "--model": "m", "--cwd": root_text, "--system": "be brief", "--max-budget-usd": "1.50",
            "--allow-net": ["api.example.com"], "--allow-read": [root_text],
            "--timeout": "30s", "--max-memory": "128MiB", "--max-tokens": "100",
            "--ask-tools": "Bash", "--approval-timeout": "none",
            "--workspace": "copy"
        })),
        Dialect::Flags,
        None,
        &[],
    )
    .unwrap();
    assert_eq!(protocol.options, flags.options);
    assert_eq!(protocol.asked(), flags.asked());
    assert_eq!(protocol.how_it_asks(), flags.how_it_asks());
    assert_eq!(protocol.workspace, Some(moat_workspace::Mode::Copy));
    assert_eq!(flags.workspace, protocol.workspace);
    assert_eq!(protocol.how_it_asks().unwrap().timeout, None);
}

#[test]
fn a_tasks_entry_overrides_the_shared_flags_field_by_field() {
    let shared = Raw::read(
        &object(json!({"--model": "shared", "--timeout": "1m", "--allow-env": ["A"]})),
        Dialect::Flags,
        None,
        &[],
    )
    .unwrap();
    let own = Raw::read(
        &object(json!({"adapter": "echo", "prompt": "p", "timeout": "2s", "allowEnv": ["B"]})),
        Dialect::Tasks,
        None,
        &[],
    )
    .unwrap();
    let task = RunRequest::from_raw(&own.over(&shared)).unwrap();
    assert_eq!(task.options.model.as_deref(), Some("shared"));
    assert_eq!(
        task.limits.timeout,
        Some(Timeout::After(Duration::from_secs(2)))
    );
    assert_eq!(task.grants.env, Some(vec!["B".to_owned()]));
}

#[test]
fn an_approval_timeout_is_for_a_run_that_asks_in_the_callers_words() {
    let error = RunRequest::read(
        &object(json!({"--approval-timeout": "5m"})),
        Dialect::Flags,
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "--approval-timeout: is for a run that asks: add --ask"
    );
    let error = RunRequest::read(
        &object(json!({"approvalTimeout": "5m"})),
        Dialect::Tasks,
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "approvalTimeout: is for a run that asks: add ask"
    );
}

#[test]
fn the_programs_limits_read_the_same_in_every_dialect() {
    for (field, value, read) in [
        (Field::MaxProcesses, json!(64), (Some(64), None)),
        (Field::Cpus, json!(1.5), (None, Some(1500))),
        (Field::Cpus, json!("0.25"), (None, Some(250))),
    ] {
        let written = every_dialect(field, value.clone());
        assert_eq!(written.len(), 5, "{field:?} is taken by every dialect");
        for (dialect, request) in written {
            let request = RunRequest::read(&request, dialect, None, &[]).unwrap();
            assert_eq!(
                (request.limits.max_processes, request.limits.milli_cpus),
                read,
                "{dialect:?}: {value}"
            );
        }
    }
}

#[test]
fn docs_requests_md_has_the_table_of_every_field() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/requests.md");
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let table = reference();
    assert!(
        doc.contains(&table),
        "docs/requests.md does not have the table of fields as the request has them; put this there:\n{table}"
    );
}

#[test]
fn a_socket_grant_reads_the_same_in_every_dialect_and_only_absolutely_from_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let socket = root.join("db.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::os::unix::fs::symlink(&socket, root.join("link.sock")).unwrap();
    let written = every_dialect(
        Field::UnixSocket,
        json!([root.join("link.sock").to_string_lossy()]),
    );
    assert_eq!(written.len(), 5, "every dialect takes it");
    for (dialect, request) in written {
        let read = RunRequest::read(&request, dialect, None, &[]).unwrap();
        // The link resolved once, when granted: the run reaches that socket.
        assert_eq!(
            read.grants.unix_sockets,
            Some(vec![socket.clone()]),
            "{dialect:?}"
        );
    }
    // Relative: from where it was written, except from a client.
    let relative = RunRequest::read(
        &object(json!({"--allow-unix-socket": ["db.sock"]})),
        Dialect::Flags,
        Some(&root),
        &[],
    )
    .unwrap();
    assert_eq!(relative.grants.unix_sockets, Some(vec![socket.clone()]));
    let refused = RunRequest::read(
        &object(json!({"grants": {"unixSocket": ["db.sock"]}})),
        Dialect::Protocol,
        None,
        &[],
    )
    .unwrap_err();
    assert!(refused.to_string().contains("absolute"), "{refused}");
}
