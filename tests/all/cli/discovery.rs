//! Finding one's way: `run --help` grouped under headings, completions that
//! load in bash, man pages, `moat doctor`, and the config file of defaults
//! that flags override.

use std::process::{Command, Output};

use moat_testkit::components::ESCAPE;

use super::common::moat;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_help_groups_its_flags_under_headings() {
    let help = text(&moat().args(["run", "--help"]).output().unwrap().stdout);
    // Each flag's heading: the last unindented `Name:` line above it.
    let mut headings = Vec::new();
    let mut under = std::collections::HashMap::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            headings.push(line.trim_end_matches(':').to_owned());
        } else if let Some(flag) = line
            .trim_start()
            .split([' ', ','])
            .find(|w| w.starts_with("--"))
        {
            let heading = headings.last().cloned().unwrap_or_default();
            under
                .entry(flag.trim_end_matches('.').to_owned())
                .or_insert(heading);
        }
    }
    let expected = [
        "Agent", "Session", "Grants", "Limits", "Output", "Store", "Cluster",
    ];
    let order: Vec<&str> = headings
        .iter()
        .map(String::as_str)
        .filter(|h| expected.contains(h))
        .collect();
    assert_eq!(order, expected, "{help}");
    for (flag, heading) in [
        ("--model", "Agent"),
        ("--add-dir", "Agent"),
        ("--resume", "Session"),
        ("--continue", "Session"),
        ("--allow-net", "Grants"),
        ("--trust", "Grants"),
        ("--timeout", "Limits"),
        ("--output", "Output"),
        ("--verbose", "Output"),
        ("--store", "Store"),
        ("--cache-dir", "Store"),
        ("--nats", "Cluster"),
    ] {
        assert_eq!(
            under.get(flag).map(String::as_str),
            Some(heading),
            "{flag}: {help}"
        );
    }
}

#[test]
fn completions_load_in_bash_and_the_man_page_renders() {
    let script = moat().args(["completions", "bash"]).output().unwrap();
    assert!(script.status.success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("moat.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let loaded = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p moat", file.display()))
        .output()
        .unwrap();
    assert!(loaded.status.success(), "{}", text(&loaded.stderr));
    assert!(
        text(&loaded.stdout).contains("moat"),
        "{}",
        text(&loaded.stdout)
    );

    let page = text(&moat().arg("man").output().unwrap().stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH moat"),
        "{page}"
    );
    assert!(
        page.contains("doctor") && page.contains("workflow"),
        "{page}"
    );
    let pages = moat()
        .args(["man", "--out"])
        .arg(dir.path().join("man"))
        .output()
        .unwrap();
    assert!(pages.status.success(), "{}", text(&pages.stderr));
    for page in ["moat.1", "moat-run.1", "moat-ps.1", "moat-doctor.1"] {
        assert!(dir.path().join("man").join(page).is_file(), "{page}");
    }
}

#[test]
fn doctor_says_what_is_there_and_how_to_get_what_is_not() {
    let here = moat().arg("doctor").output().unwrap();
    assert_eq!(here.status.code(), Some(0), "{}", text(&here.stdout));
    let said = text(&here.stdout);
    for check in [
        "run store",
        "component cache",
        "containment",
        "agent CLI claude",
        "Rust adapters",
    ] {
        let line = said
            .lines()
            .find(|l| l.contains(check))
            .unwrap_or_else(|| panic!("{check}: {said}"));
        assert!(
            line.starts_with("ok ") || line.starts_with("missing "),
            "{line}"
        );
    }
    assert!(
        said.lines()
            .any(|l| l.starts_with("ok") && l.contains("run store")),
        "{said}"
    );

    // Without node, python or rustup on PATH: each missing, with its fix;
    // still exit 0 (only for building adapters).
    let empty = tempfile::tempdir().unwrap();
    let bare = moat()
        .arg("doctor")
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(0), "{}", text(&bare.stdout));
    let said = text(&bare.stdout);
    let typescript = said
        .lines()
        .find(|l| l.contains("TypeScript adapters"))
        .unwrap();
    assert!(
        typescript.starts_with("missing") && typescript.contains("nodejs.org"),
        "{said}"
    );
    let git = said.lines().find(|l| l.contains("workspaces")).unwrap();
    assert!(
        git.starts_with("missing") && git.contains("install git"),
        "{said}"
    );
    let claude = said
        .lines()
        .find(|l| l.contains("agent CLI claude"))
        .unwrap();
    assert!(
        claude.starts_with("missing") && claude.contains("npm install -g"),
        "{said}"
    );

    // A store moat cannot open: failed, with the fix, exit 1.
    let broken = moat()
        .arg("doctor")
        .env("MOAT_STORE", "/proc/moat-cannot-write-here/moat.db")
        .output()
        .unwrap();
    assert_eq!(broken.status.code(), Some(1), "{}", text(&broken.stdout));
    let line = text(&broken.stdout);
    let line = line
        .lines()
        .find(|l| l.contains("run store"))
        .unwrap()
        .to_owned();
    assert!(
        line.starts_with("failed") && line.contains("--store"),
        "{line}"
    );
}

/// A config file in a directory of its own, and `moat` reading it (with
/// no store named by the environment, so the file's is used).
struct Configured {
    dir: tempfile::TempDir,
}

impl Configured {
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        Configured { dir }
    }

    fn moat(&self) -> Command {
        let mut command = moat();
        command
            .env("MOAT_CONFIG", self.dir.path().join("config.toml"))
            .env_remove("MOAT_STORE");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.moat().args(args).output().unwrap()
    }
}

#[test]
fn the_config_file_gives_defaults_that_flags_override() {
    let configured = Configured::new(
        "store = \"runs.db\"\noutput = \"text\"\npolicy = \"policy.toml\"\n\n\
         [adapters.echo]\nmodel = \"configured-model\"\n",
    );
    std::fs::write(
        configured.dir.path().join("policy.toml"),
        "[adapters.escape]\nallow-env = [\"MOAT_CONFIGURED\"]\n",
    )
    .unwrap();
    let ran = configured.run(&["run", "echo", "hello"]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert_eq!(text(&ran.stdout), "hello\n", "output = text");
    assert!(
        configured.dir.path().join("runs.db").is_file(),
        "store = runs.db, beside it"
    );
    let shown = text(&configured.run(&["show", "@last", "--json"]).stdout);
    assert!(shown.contains("configured-model"), "{shown}");

    // Flags win: the output and the model asked for.
    let ran = configured.run(&["run", "echo", "hello", "-o", "ndjson", "--model", "flagged"]);
    assert!(
        text(&ran.stdout).starts_with("{\"type\":\"init\""),
        "{}",
        text(&ran.stdout)
    );
    let shown = text(&configured.run(&["show", "@last", "--json"]).stdout);
    assert!(
        shown.contains("flagged") && !shown.contains("configured-model"),
        "{shown}"
    );

    // The policy's grants reach the runs of the adapter it names.
    let granted = configured
        .moat()
        .env("MOAT_CONFIGURED", "yes")
        .args(["run", ESCAPE, "env MOAT_CONFIGURED"])
        .output()
        .unwrap();
    assert!(
        text(&granted.stdout).contains("ok: yes"),
        "{}",
        text(&granted.stdout)
    );

    // And doctor shows the file.
    let doctor = text(&configured.run(&["doctor"]).stdout);
    let line = doctor.lines().find(|l| l.contains("config")).unwrap();
    assert!(
        line.contains("config.toml") && line.contains("echo: model configured-model"),
        "{line}"
    );
}

#[test]
fn a_bad_config_file_is_one_line_naming_it_and_the_problem() {
    let configured = Configured::new("outptu = \"text\"\n");
    let output = configured.run(&["run", "echo", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    let said = text(&output.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("config.toml") && said.contains("outptu"),
        "{said}"
    );
    let missing = moat()
        .env("MOAT_CONFIG", "/nonexistent/config.toml")
        .args(["run", "echo", "hi"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("MOAT_CONFIG"),
        "{}",
        text(&missing.stderr)
    );
}
