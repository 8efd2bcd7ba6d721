//! `moat new`: the project it writes builds, passes its own test and runs
//! in moat with no edits.

use std::process::Command;

use super::common::moat;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `moat new NAME --lang LANG` in a fresh directory: the directory and the
/// project, whose `files` must all be there.
fn create(name: &str, lang: &str, files: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let created = moat()
        .args(["new", name, "--lang", lang])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(created.status.code(), Some(0), "{}", text(&created.stderr));
    let project = dir.path().join(name);
    for file in files {
        assert!(project.join(file).is_file(), "{file}");
    }
    (dir, project)
}

/// Runs the project's own `test.sh` with the tests' moat (its cache and
/// store): it builds the component and checks moat's answer.
fn passes_its_own_test(project: &std::path::Path, name: &str) {
    let command = moat();
    let tested = Command::new("./test.sh")
        .current_dir(project)
        .env("MOAT", command.get_program())
        .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .unwrap();
    assert_eq!(
        tested.status.code(),
        Some(0),
        "{}{}",
        text(&tested.stdout),
        text(&tested.stderr)
    );
    assert!(text(&tested.stdout).contains(&format!("ok: {name} answers")));
}

#[test]
fn a_new_rust_adapter_builds_tests_and_runs_with_no_edits() {
    let (dir, project) = create(
        "hello-agent",
        "rust",
        &[
            "Cargo.toml",
            "src/lib.rs",
            "build.sh",
            "README.md",
            ".gitignore",
        ],
    );
    // Its build script, as a user runs it; the components' target
    // directory is shared with moat's own build so the SDK's dependencies
    // are not compiled again.
    let target = moat_testkit::repo_root().join("target");
    let built = Command::new("./build.sh")
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target.join("wasm-components"))
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let ran = moat()
        .args(["run", "./hello-agent.wasm", "hi", "--output", "text"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran.stderr));
    assert_eq!(
        text(&ran.stdout).trim(),
        "Hello from hello-agent! You said: hi"
    );
    // Its own test, natively.
    let tested = Command::new("cargo")
        .args(["test", "--quiet"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target.join("moat-new"))
        .output()
        .unwrap();
    assert_eq!(tested.status.code(), Some(0), "{}", text(&tested.stderr));
    assert!(
        text(&tested.stdout).contains("1 passed"),
        "{}",
        text(&tested.stdout)
    );

    // Again in the same place: refused, nothing overwritten.
    let again = moat()
        .args(["new", "hello-agent"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("not empty"));
    let bad = moat()
        .args(["new", "Hello_Agent"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_new_python_adapter_builds_and_passes_its_test_through_moat() {
    let (_dir, project) = create(
        "hello-py",
        "python",
        &[
            "hello_py.py",
            "build.sh",
            "test.sh",
            "README.md",
            ".gitignore",
        ],
    );
    // The SDK's build environment (componentize-py from PyPI) first: where
    // it cannot be installed, the Python SDK's own tests say so
    // (tests/all/sdk_python.rs); here it is required.
    let setup = Command::new("bash")
        .arg(moat_testkit::repo_root().join("guest-sdk/python/setup-venv.sh"))
        .output()
        .unwrap();
    if !setup.status.success() {
        assert!(
            std::env::var("MOAT_REQUIRE_SDKS").as_deref() != Ok("1"),
            "MOAT_REQUIRE_SDKS=1 but the Python SDK's tools cannot be installed: {}",
            text(&setup.stderr)
        );
        eprintln!("skipped: the Python SDK's tools cannot be installed here");
        return;
    }
    passes_its_own_test(&project, "hello-py");
}

#[test]
fn a_new_typescript_adapter_builds_and_passes_its_test_through_moat() {
    if Command::new("npm").arg("--version").output().is_err() {
        assert!(
            std::env::var("MOAT_REQUIRE_SDKS").as_deref() != Ok("1"),
            "MOAT_REQUIRE_SDKS=1 but npm cannot be run: install Node.js 20 and npm"
        );
        eprintln!("skipped: npm cannot be run here; install Node.js 20 and npm");
        return;
    }
    let (_dir, project) = create(
        "hello-ts",
        "typescript",
        &[
            "package.json",
            "tsconfig.json",
            "src/adapter.ts",
            "build.sh",
            "test.sh",
            "README.md",
            ".gitignore",
        ],
    );
    // Its own test: npm install, the build, and moat's answer.
    passes_its_own_test(&project, "hello-ts");
}
