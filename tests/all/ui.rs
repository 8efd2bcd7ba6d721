//! `moat ui` in real Chromium: the browser suite
//! (host/ui/web/test/browser.test.mjs, node:test driving Debian's
//! chromium with playwright-core) against the real `moat ui` and `moat
//! run` / `moat workflow run` processes: the runs page live, a flood's
//! events on a run's page, cancel from the page, the example pipeline's
//! DAG, the token and origin checks, and the runs of a cluster (one
//! nats-server, one worker). Its screenshots go to
//! target/ui-screenshots/, and with `MOAT_UPDATE_SCREENSHOTS=1` to
//! docs/images/ui-*.png (docs/observability.md): a test run leaves the
//! checkout as it was.
//!
//! `scripts/test` installs the suite's npm packages (npm ci --prefix
//! host/ui/web) and sets `MOAT_REQUIRE_CLIENTS=1`: then a missing
//! chromium or package fails the test instead of skipping it.

use std::process::Command;
use std::time::Instant;

use moat_testkit::components::{ESCAPE, FLOOD, SLEEPY, TOOL_USER};

use crate::cli::common::moat;

#[test]
fn the_pages_work_in_chromium_against_the_real_binary() {
    let root = moat_testkit::repo_root();
    let web = root.join("host/ui/web");
    let chromium =
        std::env::var("MOAT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let missing = if !web.join("node_modules/playwright-core").exists() {
        Some("npm ci --prefix host/ui/web (scripts/test does it)")
    } else if !std::path::Path::new(&chromium).exists() {
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
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let shots = if std::env::var("MOAT_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        root.join("docs/images")
    } else {
        root.join("target/ui-screenshots")
    };
    std::fs::create_dir_all(&shots).unwrap();
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
    let template = moat();
    let mut node = Command::new("node");
    for (key, value) in template.get_envs() {
        match value {
            Some(value) => node.env(key, value),
            None => node.env_remove(key),
        };
    }
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
