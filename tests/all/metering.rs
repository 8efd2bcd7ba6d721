//! Metered usage and recorded traffic, through the real `moat` binary:
//! moat reads what a run's model calls used from the answers it carries —
//! a component's `wasi:http` requests and its programs' requests through
//! the proxy and secret routes — and charges the run for it as each answer
//! passes, whatever the adapter reports; every request and connection is
//! recorded with the run (`moat show --net`, `moat logs --net`).
//!
//! Each budget test runs the same calls without the meter too (no
//! `--meter`, or no budget), and sees them all go through: the stop is the
//! meter's doing.

use std::path::Path;
use std::process::Output;

use moat_engine::DoneStatus;
use moat_testkit::components::UNDERREPORTER;
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::{error_messages, extensions, single_done};
use serde_json::Value;

use crate::cli::common::{events, moat_in};
use crate::egress::{printed, shell_command};

/// Every answer: 1,000 input and 100 output tokens.
const ANSWER: &str = r#"{"id":"x","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}"#;

/// A loopback OpenAI stand-in answering every call with [`ANSWER`].
fn stand_in() -> LlmServer {
    LlmServer::start(Reply::json(ANSWER))
}

/// The underreporter's prompt: `calls` chat completions at `server`,
/// reporting `share` of each one's usage.
fn prompt(server: &LlmServer, calls: u64, share: f64) -> String {
    serde_json::json!({
        "url": format!("{}/v1/chat/completions", server.url()),
        "calls": calls,
        "share": share,
    })
    .to_string()
}

/// `moat run` of the underreporter in `store`, with `flags`.
fn underreport(store: &Path, prompt: &str, flags: &[String]) -> Output {
    moat_in(store)
        .args(["run", UNDERREPORTER, prompt, "--output", "ndjson"])
        .args(flags)
        .output()
        .unwrap()
}

/// `moat ARGS` in `store`: its stdout.
fn moat_says(store: &Path, args: &[&str]) -> String {
    let output = moat_in(store).args(args).output().unwrap();
    assert!(output.status.success(), "moat {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn an_adapter_that_reports_less_than_it_used_is_stopped_at_the_call_that_crosses_its_budget() {
    for (share, reported) in [(0.1, "the adapter reported 220 tokens"), (0.0, "nothing")] {
        let dir = tempfile::tempdir().unwrap();
        let server = stand_in();
        let grant = server.grant();
        let flags = [
            format!("--allow-net={grant}"),
            format!("--meter={grant}=openai"),
            "--max-tokens=3000".into(),
        ];
        let output = underreport(dir.path(), &prompt(&server, 10, share), &flags);
        let events = events(&output);
        assert_eq!(
            single_done(&events).status,
            DoneStatus::MaxBudget,
            "{output:?}"
        );
        assert_eq!(
            error_messages(&events, "BUDGET_EXCEEDED"),
            ["the run spent 3300 tokens of its budget of 3000 tokens; it was stopped"]
        );
        // The third call crossed it: no fourth was made.
        assert_eq!(server.requests().len(), 3, "share {share}");
        let metered = extensions(&events, moat_engine::USAGE_EVENT);
        assert!(
            metered
                .iter()
                .filter(|usage| usage["source"] == "metered")
                .all(|usage| usage["inputTokens"] == 1000 && usage["model"] == "gpt-test"),
            "{metered:?}"
        );
        let shown = moat_says(dir.path(), &["show", "@last"]);
        assert!(
            shown.contains("3300 tokens in 3 model calls, as moat read them")
                && shown.contains(reported),
            "{shown}"
        );
        let json: Value =
            serde_json::from_str(&moat_says(dir.path(), &["show", "@last", "--json"])).unwrap();
        assert_eq!(json["usageCounted"]["metered"]["calls"], 3, "{json}");
        assert_eq!(json["usageCounted"]["metered"]["inputTokens"], 3000);

        // Without the meter, the same adapter spends what it likes: it
        // reports 110 tokens a call, or none.
        let unmetered_server = stand_in();
        let grant = unmetered_server.grant();
        let output = underreport(
            dir.path(),
            &prompt(&unmetered_server, 10, share),
            &[format!("--allow-net={grant}"), "--max-tokens=3000".into()],
        );
        assert_eq!(
            single_done(&crate::cli::common::events(&output)).status,
            DoneStatus::Success
        );
        assert_eq!(unmetered_server.requests().len(), 10);
    }
}

#[test]
fn a_limit_of_model_calls_is_kept_by_the_meter_for_an_adapter_that_reports_none() {
    let dir = tempfile::tempdir().unwrap();
    let server = stand_in();
    let grant = server.grant();
    let output = underreport(
        dir.path(),
        &prompt(&server, 10, 0.0),
        &[
            format!("--allow-net={grant}"),
            format!("--meter={grant}=openai"),
            "--max-model-calls=2".into(),
        ],
    );
    let events = events(&output);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::MaxBudget,
        "{output:?}"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        error_messages(&events, "BUDGET_EXCEEDED"),
        [
            "the run spent 2200 tokens in 2 model calls of its budget of 2 model calls; it was stopped"
        ]
    );
}

#[test]
fn what_an_adapter_says_of_its_traffic_and_its_metering_is_not_taken_for_moats() {
    let dir = tempfile::tempdir().unwrap();
    let server = stand_in();
    let grant = server.grant();
    let mut asked: Value = serde_json::from_str(&prompt(&server, 1, 1.0)).unwrap();
    asked["forge"] = true.into();
    let output = underreport(
        dir.path(),
        &asked.to_string(),
        &[
            format!("--allow-net={grant}"),
            format!("--meter={grant}=openai"),
        ],
    );
    let events = events(&output);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{output:?}"
    );
    assert_eq!(
        error_messages(&events, "INVALID_EVENT"),
        ["the adapter sent a moat:traffic event, which only moat makes; dropped"]
    );
    let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
    assert_eq!(rows.len(), 1, "only moat's own row: {rows:?}");
    assert_eq!(rows[0]["host"], "127.0.0.1");
    let usage = extensions(&events, moat_engine::USAGE_EVENT);
    let sources: Vec<&str> = usage.iter().filter_map(|u| u["source"].as_str()).collect();
    // The forged "metered" event and the honest report are the adapter's;
    // the one metered is moat's.
    assert_eq!(
        sources.iter().filter(|s| **s == "metered").count(),
        1,
        "{usage:?}"
    );
    assert_eq!(
        sources.iter().filter(|s| **s == "reported").count(),
        2,
        "{usage:?}"
    );
}

/// A `curl` POST of a chat completion to `url`, its status printed as
/// `call=STATUS` and a tunnel's as `tunnel=STATUS` (`extra`: more of
/// curl's flags).
fn curl_call(url: &str, extra: &str) -> String {
    format!(
        "curl -s -o /dev/null -w 'call=%{{http_code}}\\ntunnel=%{{http_connect}}\\n' {extra} -H 'content-type: application/json' -d '{{\"model\":\"m\",\"messages\":[]}}' {url}; "
    )
}

#[test]
fn a_programs_calls_on_its_secret_route_are_metered_and_stop_it_mid_run() {
    let (_dir, secrets, store) = crate::secrets::scratch();
    crate::secrets::set_secret(&secrets, &store, "OPENAI_API_KEY", &[]);
    let run = |server: &LlmServer, budget: &[&str]| {
        let grant = server.grant();
        let script = curl_call("\"$OPENAI_BASE_URL/chat/completions\"", "").repeat(6)
            + &curl_call("http://127.0.0.1:1/v1/models", "");
        let mut flags = vec![
            "--allow-run=curl".to_owned(),
            format!("--allow-net={grant}"),
            format!("--secret=OPENAI_API_KEY@http://{grant}"),
        ];
        flags.extend(budget.iter().map(|f| (*f).to_owned()));
        let output = shell_command(&script, &flags, &[])
            .env("MOAT_SECRETS", &secrets)
            .env("MOAT_STORE", &store)
            .output()
            .unwrap();
        let seen = events(&output);
        (output, seen)
    };

    let server = stand_in();
    let (output, events) = run(&server, &["--max-tokens=3000"]);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::MaxBudget,
        "{output:?}"
    );
    assert_eq!(server.requests().len(), 3, "{}", printed(&events));
    // The calls reached the stand-in with the key moat added.
    assert!(
        server.requests().iter().all(
            |r| r.header("authorization") == Some(&format!("Bearer {}", crate::secrets::VALUE))
        ),
        "{:?}",
        server.requests()
    );

    // No budget: all six calls, each a row with its usage, and the refused
    // one with the grant that would allow it; no value of a header.
    let server = stand_in();
    let (output, events) = run(&server, &[]);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{output:?}"
    );
    assert_eq!(server.requests().len(), 6);
    let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
    let calls: Vec<&Value> = rows
        .iter()
        .filter(|r| r["kind"] == "secret_route")
        .collect();
    assert_eq!(calls.len(), 6, "{rows:?}");
    for call in &calls {
        assert_eq!(call["who"], "program");
        assert_eq!(call["secret"], "OPENAI_API_KEY");
        assert_eq!(call["method"], "POST");
        assert_eq!(call["path"], "/v1/chat/completions");
        assert_eq!(call["status"], 200);
        assert_eq!(call["vendor"], "openai");
        assert_eq!(call["usage"]["inputTokens"], 1000);
    }
    let refused: Vec<&Value> = rows.iter().filter(|r| r["refused"].is_string()).collect();
    assert_eq!(refused.len(), 1, "{rows:?}");
    assert_eq!(refused[0]["wouldAllow"], "127.0.0.1:1");
    let text = serde_json::to_string(&rows).unwrap();
    assert!(
        !text.contains(crate::secrets::VALUE) && !text.contains("Bearer"),
        "{text}"
    );

    let table = String::from_utf8(
        moat_in(store.parent().unwrap())
            .env("MOAT_STORE", &store)
            .args(["show", "@last", "--net"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        table.contains("REFUSED") && table.contains("--allow-net=127.0.0.1:1"),
        "{table}"
    );
    assert!(table.contains("6600 tokens in 6 model calls"), "{table}");
}

#[test]
fn a_tunnel_to_a_model_api_under_a_budget_is_refused_unless_unmetered_calls_are_allowed() {
    // As this user, as an unprivileged one, and without namespaces
    // (Landlock and seccomp): the proxy holds the same line under each.
    let settings = crate::own_network::settings();
    let mut wrappers: Vec<(String, Vec<&str>)> = settings
        .iter()
        .map(|setting| (setting.who().to_owned(), setting.wrapper()))
        .collect();
    wrappers.push((
        "no namespaces".into(),
        crate::egress::NO_NAMESPACES.to_vec(),
    ));
    for (who, wrapper) in &wrappers {
        tunnel_refused_unless_allowed(who, wrapper);
    }
}

/// The tunnel test of one setting: `moat` started through `wrapper`.
fn tunnel_refused_unless_allowed(who: &str, wrapper: &[&str]) {
    let server = stand_in();
    let grant = server.grant();
    // `-p`: curl tunnels (CONNECT) even for a plain http URL; what passes
    // through the tunnel is opaque to moat.
    let script = curl_call(&format!("{}/v1/chat/completions", server.url()), "-p");
    let run = |extra: &[&str]| {
        let mut flags = vec![
            "--allow-run=curl".to_owned(),
            format!("--allow-net={grant}"),
            format!("--meter={grant}=openai"),
            "--max-tokens=100000".into(),
        ];
        flags.extend(extra.iter().map(|f| (*f).to_owned()));
        let output = shell_command(&script, &flags, wrapper).output().unwrap();
        let seen = events(&output);
        (output, seen)
    };

    let (output, events) = run(&[]);
    assert_eq!(
        crate::egress::word(&printed(&events), "tunnel"),
        "403",
        "{who}: {output:?}"
    );
    assert!(server.requests().is_empty(), "{who}");
    let denied = error_messages(&events, "CAPABILITY_DENIED");
    assert!(
        denied.len() == 1
            && denied[0].contains("calls moat cannot read")
            && denied[0].contains("--allow-unmetered"),
        "{who}: {denied:?}"
    );
    let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
    assert_eq!(rows.len(), 1, "{who}");
    assert_eq!(rows[0]["kind"], "tunnel");
    assert_eq!(rows[0]["unmetered"], true);

    // Allowed: the call goes through the tunnel, counted as a call of
    // unknown usage.
    let (output, events) = run(&["--allow-unmetered"]);
    assert_eq!(
        crate::egress::word(&printed(&events), "call"),
        "200",
        "{who}: {output:?}"
    );
    assert_eq!(server.requests().len(), 1, "{who}");
    let usage = extensions(&events, moat_engine::USAGE_EVENT);
    assert!(
        usage
            .iter()
            .any(|u| u["source"] == "metered" && u["usageUnknown"] == true),
        "{who}: {usage:?}"
    );
}

#[test]
fn a_flood_of_requests_keeps_a_thousand_rows_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let server = stand_in();
    let grant = server.grant();
    // One Python process, requests through the proxy moat points it at.
    let output = shell_command(
        &flood_command(&server),
        &["--allow-run=python3".into(), format!("--allow-net={grant}")],
        &[],
    )
    .env("MOAT_STORE", dir.path().join("moat.db"))
    .output()
    .unwrap();
    let events = events(&output);
    assert_eq!(
        crate::egress::word(&printed(&events), "flood"),
        "done",
        "{output:?}"
    );
    let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
    let (overflow, kept): (Vec<&Value>, Vec<&Value>) =
        rows.iter().partition(|r| r.get("overflow").is_some());
    assert_eq!(kept.len(), moat_contain::traffic::MAX_EXCHANGES);
    assert_eq!(overflow.len(), 1);
    assert_eq!(
        overflow[0]["overflow"][&grant]["allowed"], 10,
        "{overflow:?}"
    );
    let table = moat_says(dir.path(), &["show", "@last", "--net"]);
    assert!(table.contains("past the 1000 rows kept"), "{table}");
}

/// Each row of a program's request names the program and its process, as
/// the host sees it: the requests of one Python process share its pid,
/// two curls have one each — as this user and as an unprivileged one.
/// Without namespaces (Landlock and seccomp), where moat does not make the
/// programs' connections, a row names no process.
#[test]
fn a_programs_rows_name_the_program_and_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("moat.db");
    let rows_of = |wrapper: &[&str]| {
        let server = stand_in();
        let grant = server.grant();
        let get = format!("curl -s -o /dev/null {}/v1/models; ", server.url());
        let python = format!(
            "/usr/bin/python3 -c 'import urllib.request; [urllib.request.urlopen(\"{}/v1/models\").read() for i in range(3)]'; ",
            server.url()
        );
        let script = format!("{get}{get}{python}echo all=done");
        let flags = [
            "--allow-run=curl".to_owned(),
            "--allow-run=python3".to_owned(),
            format!("--allow-net={grant}"),
        ];
        let mut command = shell_command(&script, &flags, wrapper);
        if wrapper.is_empty() {
            command.env("MOAT_STORE", &store);
        }
        let output = command.output().unwrap();
        let events = events(&output);
        assert_eq!(
            crate::egress::word(&printed(&events), "all"),
            "done",
            "{output:?}"
        );
        let rows = extensions(&events, moat_engine::TRAFFIC_EVENT);
        assert_eq!(rows.len(), 5, "{rows:?}");
        rows
    };
    let pids = |rows: &[Value], program: &str| -> Vec<u64> {
        rows.iter()
            .filter(|row| row["program"] == program)
            .map(|row| row["pid"].as_u64().expect("a pid"))
            .collect()
    };
    for setting in crate::own_network::settings() {
        let who = setting.who();
        let rows = rows_of(&setting.wrapper());
        let curls = pids(&rows, "curl");
        assert_eq!(curls.len(), 2, "{who}: {rows:?}");
        assert_ne!(curls[0], curls[1], "{who}: two processes");
        let python = pids(&rows, "python3");
        assert_eq!(python.len(), 3, "{who}: {rows:?}");
        assert!(
            python.iter().all(|pid| *pid == python[0]),
            "{who}: one process"
        );
        assert!(!curls.contains(&python[0]), "{who}");
        assert!(rows.iter().all(|row| row["who"] == "program"), "{who}");
    }
    let table = moat_says(dir.path(), &["show", "@last", "--net"]);
    assert!(
        table.contains("python3[") && table.contains("curl["),
        "{table}"
    );
    let rows = rows_of(&crate::egress::NO_NAMESPACES);
    assert!(
        rows.iter()
            .all(|row| row.get("pid").is_none() && row.get("program").is_none()),
        "{rows:?}"
    );
}

/// A Python loop of 1,010 requests to `server` through the proxy.
fn flood_command(server: &LlmServer) -> String {
    format!(
        "/usr/bin/python3 -c 'import urllib.request; [urllib.request.urlopen(\"{}/v1/models\").read() for i in range(1010)]; print(\"flood=done\")'; ",
        server.url()
    )
}
