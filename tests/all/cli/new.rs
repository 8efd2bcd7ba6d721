//! `moat new`: the project it writes builds, passes its own test and runs
//! in moat with no edits — and it is a project of its own: moved to another
//! directory (the original removed) it still does, and nothing in it names
//! moat's repository, unless `--sdk` asked for a local SDK.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::common::moat;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// moat's repository, as `moat new` would write it into a project.
fn checkout() -> PathBuf {
    moat_testkit::repo_root().canonicalize().unwrap()
}

/// Whether the SDKs' tools are required (CI): then a test that cannot
/// install them fails instead of skipping.
fn sdks_required() -> bool {
    std::env::var("MOAT_REQUIRE_SDKS").as_deref() == Ok("1")
}

/// `moat new NAME --lang LANG ARGS…` in a fresh directory: the directory and
/// the project, whose `files` must all be there.
fn create(name: &str, lang: &str, args: &[&str], files: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let created = moat()
        .args(["new", name, "--lang", lang])
        .args(args)
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

/// The project moved into another fresh directory, deeper than it was (a
/// path relative to it leads elsewhere), and where it was removed: what it
/// needs from its first place, it no longer finds.
fn moved(dir: tempfile::TempDir, project: &Path) -> (tempfile::TempDir, PathBuf) {
    let to = tempfile::tempdir().unwrap();
    let there = to
        .path()
        .join("moved/here")
        .join(project.file_name().unwrap());
    std::fs::create_dir_all(there.parent().unwrap()).unwrap();
    std::fs::rename(project, &there).unwrap();
    let first = dir.path().to_owned();
    drop(dir);
    assert!(!first.exists() && !project.exists());
    (to, there)
}

/// The files in the project (but in the folders `skip`, where the build
/// installs or compiles, and built components) that name moat's
/// repository, inside an npm tarball too, and the links (to anywhere).
fn naming_the_checkout(project: &Path, skip: &[&str]) -> Vec<PathBuf> {
    let needle = checkout().to_str().unwrap().as_bytes().to_vec();
    let mut folders = vec![project.to_owned()];
    let mut found = Vec::new();
    let mut files = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if skip.contains(&name.as_str()) || name.ends_with(".wasm") {
                continue;
            }
            if kind.is_symlink() {
                found.push(path);
                continue;
            }
            if kind.is_dir() {
                folders.push(path);
                continue;
            }
            let bytes = if name.ends_with(".tgz") {
                let listed = Command::new("tar")
                    .arg("-xzOf")
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(listed.status.success(), "{}", text(&listed.stderr));
                listed.stdout
            } else {
                std::fs::read(&path).unwrap()
            };
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path);
            }
            files += 1;
        }
    }
    assert!(files > 3, "only {files} files in {}", project.display());
    found.sort();
    found
}

/// Nothing in the project names moat's repository (see above).
fn assert_names_no_checkout(project: &Path, skip: &[&str]) {
    let found = naming_the_checkout(project, skip);
    assert!(
        found.is_empty(),
        "these name moat's repository ({}) or are links: {found:?}",
        checkout().display()
    );
}

/// The tests' moat (its cache and store) for a project's own scripts.
fn with_moat(mut command: Command) -> Command {
    let moat = moat();
    command
        .env("MOAT", moat.get_program())
        .envs(moat.get_envs().filter_map(|(k, v)| Some((k, v?))));
    command
}

/// Runs the project's own `test.sh`: it builds the component and checks
/// moat's answer.
fn own_test(project: &Path) -> Output {
    with_moat(Command::new("./test.sh"))
        .current_dir(project)
        .output()
        .unwrap()
}

fn passes(tested: &Output, name: &str) {
    assert_eq!(
        tested.status.code(),
        Some(0),
        "{}{}",
        text(&tested.stdout),
        text(&tested.stderr)
    );
    assert!(text(&tested.stdout).contains(&format!("ok: {name} answers")));
}

/// `moat run ./NAME.wasm PROMPT` in the project answers with its greeting.
fn runs(project: &Path, name: &str, prompt: &str) {
    let ran = moat()
        .args(["run", &format!("./{name}.wasm"), prompt, "--output", "text"])
        .current_dir(project)
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran.stderr));
    assert_eq!(
        text(&ran.stdout).trim(),
        format!("Hello from {name}! You said: {prompt}")
    );
}

/// The project's built component, `moat inspect`ed: built against the
/// contract the SDKs build against, 0.4.0.
fn built_against_0_4(project: &Path, name: &str) {
    let inspected = moat()
        .args(["inspect", &format!("./{name}.wasm")])
        .current_dir(project)
        .output()
        .unwrap();
    assert_eq!(
        inspected.status.code(),
        Some(0),
        "{}",
        text(&inspected.stderr)
    );
    let shown = text(&inspected.stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.split_whitespace().eq(["contract", "moat:adapter@0.4.0"])),
        "{shown}"
    );
}

/// The Rust project's build script, as a user runs it; the components'
/// target directory is shared with moat's own build so the SDK's
/// dependencies are not compiled again.
fn rust_builds(project: &Path) {
    let target = moat_testkit::repo_root().join("target");
    let built = Command::new("./build.sh")
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target.join("wasm-components"))
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
}

#[test]
fn a_new_rust_adapter_moved_elsewhere_builds_tests_and_runs_with_no_edits() {
    let (dir, project) = create(
        "hello-agent",
        "rust",
        &[],
        &[
            "Cargo.toml",
            "Cargo.lock",
            "src/lib.rs",
            "build.sh",
            "README.md",
            ".gitignore",
            "vendor/README.md",
            "vendor/guest-sdk/Cargo.toml",
            "vendor/guest-sdk/src/lib.rs",
            "vendor/wit/v0.4.0/adapter.wit",
        ],
    );
    // The SDK by version, from the project's own copy.
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        manifest.contains(&format!("moat-guest = \"{version}\"")),
        "{manifest}"
    );
    assert!(
        manifest.contains("[patch.crates-io]\nmoat-guest = { path = \"vendor/guest-sdk\" }"),
        "{manifest}"
    );
    assert_names_no_checkout(&project, &[]);

    let (_to, project) = moved(dir, &project);
    rust_builds(&project);
    runs(&project, "hello-agent", "x");
    built_against_0_4(&project, "hello-agent");
    // Its own test, natively.
    let tested = Command::new("cargo")
        .args(["test", "--quiet"])
        .current_dir(&project)
        .env(
            "CARGO_TARGET_DIR",
            moat_testkit::repo_root().join("target/moat-new"),
        )
        .output()
        .unwrap();
    assert_eq!(tested.status.code(), Some(0), "{}", text(&tested.stderr));
    assert!(
        text(&tested.stdout).contains("1 passed"),
        "{}",
        text(&tested.stdout)
    );
    // Built, its lock names no path either.
    assert_names_no_checkout(&project, &["target"]);

    // Again in the same place: refused, nothing overwritten.
    let again = moat()
        .args(["new", "hello-agent"])
        .current_dir(project.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("not empty"));
    let bad = moat()
        .args(["new", "Hello_Agent"])
        .current_dir(project.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_rust_adapter_on_a_local_sdk_names_it_and_builds() {
    let sdk = checkout().join("guest-sdk");
    let (_dir, project) = create(
        "local-agent",
        "rust",
        &["--sdk", checkout().to_str().unwrap()],
        &["Cargo.toml", "src/lib.rs", "build.sh", "README.md"],
    );
    // Asked for: the checkout's SDK where it is, nothing copied.
    assert!(!project.join("vendor").exists());
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "[patch.crates-io]\nmoat-guest = {{ path = \"{}\" }}",
            sdk.display()
        )),
        "{manifest}"
    );
    // What the other tests check finds it: in the manifest and the README
    // (which says where the SDK is), nowhere else.
    assert_eq!(
        naming_the_checkout(&project, &[]),
        [project.join("Cargo.toml"), project.join("README.md")]
    );
    rust_builds(&project);
    runs(&project, "local-agent", "hi");
}

#[test]
fn a_local_sdk_is_named_where_it_is_and_a_wrong_one_refused() {
    if Command::new("npm").arg("--version").output().is_err() {
        assert!(
            !sdks_required(),
            "MOAT_REQUIRE_SDKS=1 but npm cannot be run"
        );
        eprintln!("skipped: npm cannot be run here; install Node.js 20 and npm");
        return;
    }
    let (_ts_dir, ts) = create(
        "local-ts",
        "typescript",
        &[
            "--sdk",
            checkout().join("guest-sdk/typescript").to_str().unwrap(),
        ],
        &["package.json", "build.sh", "test.sh"],
    );
    let package = std::fs::read_to_string(ts.join("package.json")).unwrap();
    assert!(
        package.contains(&format!(
            "\"@moat/adapter\": \"file:{}\"",
            checkout().join("guest-sdk/typescript").display()
        )),
        "{package}"
    );
    let (_py_dir, py) = create(
        "local-py",
        "python",
        &["--sdk", checkout().to_str().unwrap()],
        &["src/local_py.py", "build.sh", "requirements.txt"],
    );
    let build = std::fs::read_to_string(py.join("build.sh")).unwrap();
    assert!(
        build.contains(&format!(
            "sdk='{}'",
            checkout().join("guest-sdk/python").display()
        )),
        "{build}"
    );
    for (project, file) in [(&ts, "package.json"), (&py, "build.sh")] {
        assert!(!project.join("vendor").exists());
        assert_eq!(
            naming_the_checkout(project, &[]),
            [project.join("README.md"), project.join(file)]
        );
    }

    // Not an SDK: refused, and no project left behind.
    let dir = tempfile::tempdir().unwrap();
    let refused = moat()
        .args(["new", "nope", "--lang", "python", "--sdk"])
        .arg(dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("moat-adapter"));
    assert!(!dir.path().join("nope").exists());
}

#[test]
fn a_new_python_adapter_builds_in_its_own_venv_there_and_again_once_moved() {
    let (dir, project) = create(
        "hello-py",
        "python",
        &[],
        &[
            "src/hello_py.py",
            "requirements.txt",
            "build.sh",
            "test.sh",
            "README.md",
            ".gitignore",
            "vendor/README.md",
            "vendor/guest-sdk/python/src/moat_adapter/__init__.py",
            "vendor/wit/v0.4.0/adapter.wit",
        ],
    );
    assert_names_no_checkout(&project, &[]);
    let ignored = std::fs::read_to_string(project.join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "/.venv"), "{ignored}");

    // Built where it was made: its venv is its own, inside it.
    let tested = own_test(&project);
    if !tested.status.success() && !project.join(".venv/.moat-build").exists() {
        // The venv's tools (componentize-py, from PyPI) could not be
        // installed: the Python SDK's own tests say so too.
        assert!(
            !sdks_required(),
            "MOAT_REQUIRE_SDKS=1 but the project's venv cannot be set up: {}",
            text(&tested.stderr)
        );
        eprintln!("skipped: componentize-py cannot be installed here");
        return;
    }
    passes(&tested, "hello-py");
    assert!(project.join(".venv/bin/componentize-py").is_file());

    // Moved (its venv with it, which names its first place): it builds and
    // passes again, and the SDK it reads is the one beside it.
    let (_dir, project) = moved(dir, &project);
    passes(&own_test(&project), "hello-py");
    runs(&project, "hello-py", "x");
    built_against_0_4(&project, "hello-py");
    let pth = std::fs::read_dir(project.join(".venv/lib"))
        .unwrap()
        .map(|python| {
            python
                .unwrap()
                .path()
                .join("site-packages/moat_adapter.pth")
        })
        .find(|pth| pth.is_file())
        .expect("the venv's path to the SDK");
    assert_eq!(
        std::fs::read_to_string(pth).unwrap().trim(),
        project
            .join("vendor/guest-sdk/python/src")
            .to_str()
            .unwrap()
    );
    assert_names_no_checkout(&project, &[".venv", ".build"]);
}

#[test]
fn a_new_typescript_adapter_moved_elsewhere_installs_builds_and_passes_its_test() {
    if Command::new("npm").arg("--version").output().is_err() {
        assert!(
            !sdks_required(),
            "MOAT_REQUIRE_SDKS=1 but npm cannot be run: install Node.js 20 and npm"
        );
        eprintln!("skipped: npm cannot be run here; install Node.js 20 and npm");
        return;
    }
    let sdk: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(checkout().join("guest-sdk/typescript/package.json")).unwrap(),
    )
    .unwrap();
    let tarball = format!(
        "vendor/moat-adapter-{}.tgz",
        sdk["version"].as_str().unwrap()
    );
    let (dir, project) = create(
        "hello-ts",
        "typescript",
        &[],
        &[
            "package.json",
            "tsconfig.json",
            "src/adapter.ts",
            "build.sh",
            "test.sh",
            "README.md",
            ".gitignore",
            "vendor/README.md",
            &tarball,
        ],
    );
    let package = std::fs::read_to_string(project.join("package.json")).unwrap();
    assert!(
        package.contains(&format!("\"@moat/adapter\": \"file:{tarball}\"")),
        "{package}"
    );
    // The package holds the contract's WIT itself, not a link to it: the
    // version its SDK builds against.
    let listed = Command::new("tar")
        .arg("-tzf")
        .arg(project.join(&tarball))
        .output()
        .unwrap();
    assert!(
        text(&listed.stdout)
            .lines()
            .any(|l| l == "package/wit/deps/moat-adapter/adapter.wit"),
        "{}",
        text(&listed.stdout)
    );
    let contract = Command::new("tar")
        .arg("-xzOf")
        .arg(project.join(&tarball))
        .arg("package/wit/deps/moat-adapter/adapter.wit")
        .output()
        .unwrap();
    assert!(
        text(&contract.stdout)
            .lines()
            .any(|l| l.trim() == "package moat:adapter@0.4.0;"),
        "{}",
        text(&contract.stdout)
    );
    assert_names_no_checkout(&project, &[]);

    // Moved before its first install: npm install, the build, moat's answer.
    let (_dir, project) = moved(dir, &project);
    passes(&own_test(&project), "hello-ts");
    runs(&project, "hello-ts", "x");
    built_against_0_4(&project, "hello-ts");
    // Its lock names the tarball inside the project.
    assert_names_no_checkout(&project, &["node_modules"]);
}
