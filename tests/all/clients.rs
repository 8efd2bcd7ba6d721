//! The TypeScript and Python clients of `moat serve` (clients/), each with
//! its own suite (node:test, pytest), run against the `moat` binary these
//! tests built, with the testing components they use.
//!
//! `scripts/test` (the README's test command) installs their tools and
//! sets `MOAT_REQUIRE_CLIENTS=1` and `MOAT_PYTHON` (its venv's python). A
//! plain `cargo test` without the tools skips a suite, saying how to
//! install them; with `MOAT_REQUIRE_CLIENTS=1` it fails instead.

use std::path::Path;
use std::process::Command;

use moat_testkit::components::{COOPERATIVE, ESCAPE, FLOOD, UNDERREPORTER};

/// Runs `command` (a client suite) with the binary and components, and
/// fails with its output unless it passes.
fn run_suite(name: &str, mut command: Command) {
    let output = command
        .env("MOAT_BIN", env!("CARGO_BIN_EXE_moat"))
        .env("MOAT_TEST_COOPERATIVE", COOPERATIVE)
        .env("MOAT_TEST_FLOOD", FLOOD)
        .env("MOAT_TEST_ESCAPE", ESCAPE)
        .env("MOAT_TEST_UNDERREPORTER", UNDERREPORTER)
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env_remove("MOAT_LOG")
        .env_remove("MOAT_STORE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the {name} suite: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the {name} suite failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    eprintln!("{name}: {last}");
}

/// Whether a missing suite may be skipped; says how to install it.
fn skip(name: &str, install: &str) -> bool {
    let required = std::env::var("MOAT_REQUIRE_CLIENTS").as_deref() == Ok("1");
    assert!(
        !required,
        "the {name} suite's tools are not installed: {install}"
    );
    eprintln!("skipped: the {name} suite's tools are not installed ({install})");
    true
}

#[test]
fn the_typescript_client_suite_passes_against_the_real_server() {
    let dir = moat_testkit::repo_root().join("clients/typescript");
    if !dir.join("node_modules/.bin/tsc").exists()
        && skip(
            "TypeScript client",
            "scripts/test installs them; or npm ci --prefix clients/typescript",
        )
    {
        return;
    }
    let mut npm = Command::new("npm");
    npm.arg("test").current_dir(&dir);
    run_suite("TypeScript client", npm);
    // The suite builds dist/ from src/; the committed dist/ (what `npm
    // install ./clients/typescript` installs without a compiler) must be
    // that build.
    let status = Command::new("git")
        .args(["status", "--porcelain", "--", "dist"])
        .current_dir(&dir)
        .output();
    if let Some(status) = status.ok().filter(|s| s.status.success()) {
        let changed = String::from_utf8_lossy(&status.stdout);
        assert!(
            changed.trim().is_empty(),
            "clients/typescript/dist is not the build of src/: commit the rebuilt dist/\n{changed}"
        );
    }
}

#[test]
fn the_python_client_suite_passes_against_the_real_server() {
    let dir = moat_testkit::repo_root().join("clients/python");
    let python = std::env::var("MOAT_PYTHON").unwrap_or_else(|_| "python3".into());
    let installed = Command::new(&python)
        .args(["-c", "import moat_client, pytest, pytest_asyncio"])
        .current_dir(Path::new("/"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed
        && skip(
            "Python client",
            "scripts/test installs them; or python3 -m pip install -e 'clients/python[test]'",
        )
    {
        return;
    }
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(&dir);
    run_suite("Python client", pytest);
}

/// `npm install ./clients/typescript`, as its README says, from a fresh
/// clone (only the files git tracks: no node_modules, no compiler): the
/// package installs and its entry point loads.
#[test]
fn the_typescript_client_installs_from_a_fresh_clone_without_a_compiler() {
    let root = moat_testkit::repo_root();
    let tracked = Command::new("git")
        .args(["ls-files", "clients/typescript"])
        .current_dir(&root)
        .output();
    let Some(tracked) = tracked.ok().filter(|o| o.status.success()) else {
        eprintln!("skipped: not a git checkout");
        return;
    };
    let has_npm = Command::new("npm").arg("--version").output().is_ok();
    if !has_npm && skip("TypeScript client", "Node.js 20+ with npm") {
        return;
    }
    let clone = tempfile::tempdir().unwrap();
    for file in String::from_utf8_lossy(&tracked.stdout).lines() {
        let to = clone.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(file), &to).unwrap();
    }
    let user = tempfile::tempdir().unwrap();
    std::fs::write(
        user.path().join("package.json"),
        r#"{"name":"user","private":true,"type":"module"}"#,
    )
    .unwrap();
    let installed = Command::new("npm")
        .args(["install", "--offline", "--no-audit", "--no-fund"])
        .arg(clone.path().join("clients/typescript"))
        .current_dir(user.path())
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "npm install failed:\n{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let loaded = Command::new("node")
        .args([
            "-e",
            "import('@moat/client').then(m => console.log(typeof m.MoatClient, typeof m.runParallel, typeof m.isAgentEvent))",
        ])
        .current_dir(user.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&loaded.stdout).trim(),
        "function function function",
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
}
