//! `moat ui` in real Chromium: the browser suite
//! (host/ui/web/test/browser.test.mjs, node:test driving Debian's
//! chromium with playwright-core) against the real `moat ui` and `moat
//! run` / `moat workflow run` processes: the runs page live, a flood's
//! events on a run's page, cancel from the page, the example pipeline's
//! DAG, the token and origin checks, and the runs of a cluster (one
//! nats-server, one worker); and a run's Network tab
//! (host/ui/web/test/traffic.mjs) after real model calls through a
//! loopback stand-in, one refused. Their screenshots go to
//! target/ui-screenshots/, and with `MOAT_UPDATE_SCREENSHOTS=1` to
//! docs/images/ui-*.png (docs/observability.md): a test run leaves the
//! checkout as it was.
//!
//! `scripts/test` installs the suite's npm packages (npm ci --prefix
//! host/ui/web) and sets `MOAT_REQUIRE_CLIENTS=1`: then a missing
//! chromium or package fails the test instead of skipping it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use moat_testkit::components::{ESCAPE, FLOOD, SLEEPY, TOOL_USER, UNDERREPORTER};
use moat_testkit::llm_server::{LlmServer, Reply};
use serde_json::Value;

use crate::cli::common::{moat, moat_in, ok_in};

/// The browser to drive, when it and the suite's packages are installed;
/// `None` (the test skipped) when they are not, unless
/// `MOAT_REQUIRE_CLIENTS=1` (then the test fails).
fn chromium(web: &Path) -> Option<String> {
    let chromium =
        std::env::var("MOAT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let missing = if !web.join("node_modules/playwright-core").exists() {
        Some("npm ci --prefix host/ui/web (scripts/test does it)")
    } else if !Path::new(&chromium).exists() {
        Some("apt-get install chromium (.ci/run does it)")
    } else {
        None
    };
    if let Some(install) = missing {
        assert!(
            std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() != Ok("1"),
            "the browser suite's tools are not installed: {install}"
        );
        eprintln!("skipped: the browser suite's tools are not installed ({install})");
        return None;
    }
    Some(chromium)
}

/// Where screenshots go: docs/images with `MOAT_UPDATE_SCREENSHOTS=1`,
/// else target/ui-screenshots (a test run leaves the checkout as it was).
fn screenshots(root: &Path) -> PathBuf {
    let shots = if std::env::var("MOAT_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        root.join("docs/images")
    } else {
        root.join("target/ui-screenshots")
    };
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// `node`, with the environment of `template` (a moat of the tests), so
/// every moat it starts has it too.
fn node_like(template: &Command) -> Command {
    let mut node = Command::new("node");
    for (key, value) in template.get_envs() {
        match value {
            Some(value) => node.env(key, value),
            None => node.env_remove(key),
        };
    }
    node
}

#[test]
fn the_pages_work_in_chromium_against_the_real_binary() {
    let root = moat_testkit::repo_root();
    let web = root.join("host/ui/web");
    let Some(chromium) = chromium(&web) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let shots = screenshots(&root);
    // The cluster's part: one nats-server and one worker, when there is
    // a nats-server (the cluster's tests require it under
    // MOAT_REQUIRE_NATS).
    let setup = Instant::now();
    let cluster = crate::cluster::server_and_worker();
    eprintln!(
        "nats-server and worker: {:.1} s",
        setup.elapsed().as_secs_f64()
    );
    // Every moat the suite starts has the environment of the tests' moat,
    // with a store of its own.
    let mut node = node_like(&moat());
    node.args([
        "--test",
        "--test-reporter=spec",
        "test/browser.test.mjs",
        "test/fold.test.mjs",
    ])
    .current_dir(&web)
    .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
    .env("MOAT_STORE", store.path().join("moat.db"))
    .env("MOAT_WORKSPACE_DIR", store.path().join("workspaces"))
    .env("MOAT_TEST_FLOOD", FLOOD)
    .env("MOAT_TEST_SLEEPY", SLEEPY)
    .env("MOAT_TEST_ESCAPE", ESCAPE)
    .env("MOAT_TEST_TOOL_USER", TOOL_USER)
    .env("MOAT_UI_EXAMPLE", root.join("examples/workflows/pipeline"))
    .env("MOAT_UI_SCREENSHOTS", &shots)
    .env("CHROMIUM", &chromium)
    .env_remove("MOAT_NATS");
    if let Some((_, url, _)) = &cluster {
        node.env("MOAT_UI_NATS", url);
    }
    let started = Instant::now();
    let output = node.output().expect("node runs the browser suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the browser suite failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    for line in stdout.lines().filter(|l| {
        let l = l.trim_start();
        l.starts_with('✔') || l.starts_with('﹣') || l.starts_with('#')
    }) {
        eprintln!("{line}");
    }
    // Every test ran (the cluster's only with a nats-server).
    let passed = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("ℹ pass "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(0);
    // The browser suite's, the cluster's with a nats-server, and the
    // fold's of a run's events.
    let expected = 3 + if cluster.is_some() { 12 } else { 11 };
    assert_eq!(passed, expected, "{stdout}");
    eprintln!(
        "browser suite: {passed} passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The committed assets are the build of the page's source.
    let built = tempfile::tempdir().unwrap();
    let bundled = Command::new("npm")
        .args(["run", "--silent", "bundle"])
        .env("OUT", built.path())
        .current_dir(&web)
        .output()
        .expect("npm runs esbuild");
    assert!(
        bundled.status.success(),
        "{}",
        String::from_utf8_lossy(&bundled.stderr)
    );
    for name in ["app.js", "app.css"] {
        assert!(
            std::fs::read(built.path().join(name)).unwrap()
                == std::fs::read(root.join("host/ui/assets").join(name)).unwrap(),
            "host/ui/assets/{name} is not the build of host/ui/web/src: npm run build --prefix host/ui/web"
        );
    }
    assert_eq!(
        std::fs::read_to_string(web.join("index.html")).unwrap(),
        std::fs::read_to_string(root.join("host/ui/assets/index.html")).unwrap(),
        "host/ui/assets/index.html is not host/ui/web/index.html: npm run build --prefix host/ui/web"
    );
    for name in [
        "ui-runs.png",
        "ui-run.png",
        "ui-workflow.png",
        "ui-approval.png",
    ] {
        let size = std::fs::metadata(shots.join(name)).map_or(0, |m| m.len());
        assert!(size > 10_000, "{name}: {size} bytes");
    }
}

/// What the stand-in answers every model call with: 1,000 tokens in, 100
/// out.
const ANSWER: &str = r#"{"id":"x","model":"gpt-test","choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1000,"completion_tokens":100}}"#;

#[test]
fn a_runs_network_tab_shows_its_requests_metered_and_refused() {
    let root = moat_testkit::repo_root();
    let web = root.join("host/ui/web");
    let Some(chromium) = chromium(&web) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let server = LlmServer::start(Reply::json(ANSWER));
    let grant = server.grant();
    let meter = format!("{grant}=openai");
    // The underreporter makes two calls and reports a tenth of their
    // usage; only the stand-in is granted and metered.
    let run = |url: &str| {
        let prompt = format!(r#"{{"url":"{url}","calls":2,"share":0.1}}"#);
        moat_in(store.path())
            .args(["run", UNDERREPORTER, &prompt, "--allow-net", &grant])
            .args(["--meter", &meter])
            .output()
            .unwrap()
    };
    let called = format!("{}/v1/chat/completions", server.url());
    let output = run(&called);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answered = ok_in(store.path(), &["ps", "--all", "-q"])
        .trim()
        .to_owned();
    assert_eq!(server.requests().len(), 2, "two model calls");
    // A host it was not granted: refused, its call failed, the run too.
    let output = run("http://127.0.0.1:1/v1/chat/completions");
    assert!(!output.status.success(), "the refused call fails the run");
    let listed = ok_in(store.path(), &["ps", "--all", "-q"]);
    let refused = listed
        .split_whitespace()
        .find(|id| *id != answered)
        .expect("the second run is listed")
        .to_owned();
    assert_eq!(
        server.requests().len(),
        2,
        "nothing more reached the stand-in"
    );

    let shots = screenshots(&root);
    let output = node_like(&moat_in(store.path()))
        .arg("test/traffic.mjs")
        .current_dir(&web)
        .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_UI_RUNS", format!("{answered},{refused}"))
        .env("MOAT_UI_SCREENSHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .env_remove("MOAT_NATS")
        .output()
        .expect("node runs the page");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let shown: Value = serde_json::from_slice(&output.stdout).expect("the page's figures");

    // The model calls: each row as made, metered; the run's line.
    let page = &shown[answered.as_str()];
    assert_eq!(page["hash"], format!("#/run/{answered}/network"), "{page}");
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{page}");
    for row in rows {
        assert_eq!(row["refused"], "false", "{row}");
        assert_eq!(row["who"], "component", "{row}");
        assert_eq!(row["what"], format!("POST {called}"), "{row}");
        assert_eq!(row["outcome"], "200", "{row}");
        assert_eq!(row["model"], "openai gpt-test", "{row}");
        assert_eq!(row["tokens"], "1000 → 100", "{row}");
        assert_eq!(row["allowedBy"], grant.as_str(), "{row}");
    }
    assert_eq!(
        page["metered"], "metered 2200 tokens in 2 model calls; the adapter reported 220 tokens",
        "{page}"
    );
    // The refused request, with the flag that would allow it; no model
    // call metered, no line.
    let page = &shown[refused.as_str()];
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{page}");
    let row = &rows[0];
    assert_eq!(row["refused"], "true", "{row}");
    assert_eq!(
        row["what"], "POST http://127.0.0.1:1/v1/chat/completions",
        "{row}"
    );
    let outcome = row["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with("REFUSED") && outcome.contains("allow with --allow-net=127.0.0.1:1"),
        "{row}"
    );
    assert_eq!(page["metered"], Value::Null, "{page}");
    // The endpoint: guarded as the others are, its answer the rows.
    for (id, count) in [(&answered, 2), (&refused, 1)] {
        let api = &shown[id.as_str()]["api"];
        assert_eq!(api["withToken"], 200, "{api}");
        assert_eq!(api["rows"], count, "{api}");
        assert_eq!(api["withoutToken"], 403, "{api}");
        assert_eq!(api["otherOrigin"], 403, "{api}");
    }
    assert_eq!(shown["missing"], 404, "no such run");
    assert_eq!(shown["badId"], 400, "not a run id");
    let size = std::fs::metadata(shots.join("ui-network.png")).map_or(0, |m| m.len());
    assert!(size > 10_000, "ui-network.png: {size} bytes");
}
