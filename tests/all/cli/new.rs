//! `moat new`: the project it writes builds, passes its own test and runs
//! in moat with no edits.

use std::process::Command;

use super::common::moat;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_new_rust_adapter_builds_tests_and_runs_with_no_edits() {
    let dir = tempfile::tempdir().unwrap();
    let created = moat()
        .args(["new", "hello-agent", "--lang", "rust"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(created.status.code(), Some(0), "{}", text(&created.stderr));
    let project = dir.path().join("hello-agent");
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "build.sh",
        "README.md",
        ".gitignore",
    ] {
        assert!(project.join(file).is_file(), "{file}");
    }
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
