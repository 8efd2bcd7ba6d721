//! `moat doctor`: what moat needs and finds on this machine, a line each —
//! `ok`, `missing` (something optional: what it is for and how to get it)
//! or `failed` (moat itself cannot work so: the fix). Exit 1 when a check
//! failed.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use moat_builtins as builtin;
use moat_contain::NetworkContainment;

use crate::config::{self, Config};
use crate::{Globals, wiring};

/// How long reaching a configured cluster may take.
const NATS_TIMEOUT: Duration = Duration::from_secs(5);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Missing,
    Failed,
}

struct Report {
    failed: bool,
}

impl Report {
    fn line(&mut self, verdict: Verdict, what: &str, said: impl AsRef<str>) {
        let word = match verdict {
            Verdict::Ok => "ok",
            Verdict::Missing => "missing",
            Verdict::Failed => {
                self.failed = true;
                "failed"
            }
        };
        println!("{word:<8} {what:<22} {}", said.as_ref());
    }
}

pub async fn doctor(globals: &Globals, config: Option<&Config>) -> anyhow::Result<ExitCode> {
    let mut report = Report { failed: false };
    println!("moat {}", env!("CARGO_PKG_VERSION"));
    check_config(&mut report, config);
    check_store(&mut report, globals);
    check_cache(&mut report, globals);
    check_containment(&mut report);
    check_agent_clis(&mut report);
    check_git(&mut report);
    check_authoring(&mut report);
    if globals.cluster.nats.is_some() {
        check_cluster(&mut report, globals).await;
    }
    Ok(match report.failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

fn check_config(report: &mut Report, config: Option<&Config>) {
    match config {
        Some(config) => {
            let file = &config.file;
            let mut set: Vec<String> = [
                ("store", file.store.is_some()),
                ("cache-dir", file.cache_dir.is_some()),
                ("secrets", file.secrets.is_some()),
                ("output", file.output.is_some()),
                ("policy", file.policy.is_some()),
            ]
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| key.to_owned())
            .collect();
            for (adapter, defaults) in &file.adapters {
                if let Some(model) = &defaults.model {
                    set.push(format!("{adapter}: model {model}"));
                }
            }
            let said = match set.is_empty() {
                true => "nothing set".to_owned(),
                false => set.join(", "),
            };
            report.line(
                Verdict::Ok,
                "config",
                format!("{} ({said}; flags win)", config.path.display()),
            );
        }
        None => {
            let place = config::path().map_or_else(
                || "no home directory".to_owned(),
                |(path, _)| path.display().to_string(),
            );
            report.line(
                Verdict::Ok,
                "config",
                format!("none at {place} (optional: defaults for flags, docs/cli.md)"),
            );
        }
    }
}

fn check_store(report: &mut Report, globals: &Globals) {
    match wiring::store(globals.store.as_deref()) {
        Ok(store) => report.line(Verdict::Ok, "run store", store.path().display().to_string()),
        Err(error) => report.line(Verdict::Failed, "run store", format!("{error:#}")),
    }
}

fn check_cache(report: &mut Report, globals: &Globals) {
    let Some(dir) = globals
        .cache_dir
        .clone()
        .or_else(moat_sandbox::default_cache_dir)
    else {
        report.line(
            Verdict::Missing,
            "component cache",
            "no home directory: every run compiles its component; pass --cache-dir DIR",
        );
        return;
    };
    let writable = std::fs::create_dir_all(&dir).and_then(|()| tempfile::tempfile_in(&dir));
    match writable {
        Ok(_) => report.line(Verdict::Ok, "component cache", dir.display().to_string()),
        Err(error) => report.line(
            Verdict::Failed,
            "component cache",
            format!(
                "{} is not writable ({error}); pass --cache-dir DIR or --no-cache",
                dir.display()
            ),
        ),
    }
}

fn check_containment(report: &mut Report) {
    if moat_contain::landlock_available() {
        report.line(
            Verdict::Ok,
            "containment",
            "Landlock: programs a run starts see only its grants",
        );
    } else {
        report.line(
            Verdict::Missing,
            "containment",
            "this kernel has no Landlock: programs a run starts (--allow-run) are not held to its grants; use Linux 5.13+ with Landlock enabled",
        );
    }
    let network = NetworkContainment::detect();
    report.line(Verdict::Ok, "network containment", network.describe());
    crate::wiring::containment();
    let cgroup = moat_contain::program_limits_here();
    let here = moat_contain::program_limits_for(&moat_grants::Confinement::default());
    let processes = if cgroup.processes {
        "processes (--max-processes)"
    } else {
        "processes (--max-processes: RLIMIT_NPROC in each run's own user namespace; a refused fork is not reported)"
    };
    let held: Vec<&str> = [
        (here.memory, "memory (--max-memory)"),
        (here.processes, processes),
        (here.cpus, "CPUs (--cpus)"),
    ]
    .into_iter()
    .filter_map(|(held, what)| held.then_some(what))
    .collect();
    if held.len() == 3 && cgroup.processes {
        report.line(
            Verdict::Ok,
            "program limits",
            "a cgroup of each run's own holds its programs' memory (--max-memory), processes (--max-processes) and CPUs (--cpus)",
        );
    } else {
        report.line(
            Verdict::Missing,
            "program limits",
            format!(
                "held here: {}; a run that asks for another is refused. For a cgroup moat may limit, run it under `systemd-run --user --scope -p Delegate=yes moat …`",
                if held.is_empty() { "none".to_owned() } else { held.join(", ") }
            ),
        );
    }
}

fn check_agent_clis(report: &mut Report) {
    let path = std::env::var_os("PATH");
    for program in builtin::agent_programs() {
        let found = moat_grants::programs::locate(program, path.as_deref()).is_some();
        let said = super::adapters::availability(program, path.as_deref());
        let said = said.strip_prefix(&format!("{program}: ")).unwrap_or(&said);
        let verdict = if found { Verdict::Ok } else { Verdict::Missing };
        report.line(verdict, &format!("agent CLI {program}"), said);
    }
}

fn check_git(report: &mut Report) {
    match output("git", &["--version"]) {
        Some(version) => report.line(Verdict::Ok, "workspaces", version.trim()),
        None => report.line(
            Verdict::Missing,
            "workspaces",
            "git (for --workspace, moat diff and apply): apt-get install git",
        ),
    }
}

fn check_authoring(report: &mut Report) {
    let rustup = moat_grants::programs::locate("rustup", std::env::var_os("PATH").as_deref());
    let targets = rustup
        .as_deref()
        .map(|rustup| run(rustup, &["target", "list", "--installed"]));
    match targets {
        Some(Some(targets)) if targets.lines().any(|l| l.trim() == "wasm32-wasip2") => {
            report.line(Verdict::Ok, "Rust adapters", "the wasm32-wasip2 target")
        }
        Some(Some(_)) => report.line(
            Verdict::Missing,
            "Rust adapters",
            "the wasm32-wasip2 target (to build Rust adapters): rustup target add wasm32-wasip2",
        ),
        // rustup is there, and answers nothing: no toolchain for this
        // user (a fresh HOME, another RUSTUP_HOME), not no Rust at all.
        Some(None) => report.line(
            Verdict::Missing,
            "Rust adapters",
            format!(
                "a Rust toolchain: rustup is installed ({}), but has none in {} (to build Rust adapters): rustup default stable && rustup target add wasm32-wasip2",
                rustup.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(),
                rustup_home()
            ),
        ),
        None => report.line(
            Verdict::Missing,
            "Rust adapters",
            "rustup (to build Rust adapters): https://rustup.rs",
        ),
    }
    let node = output("node", &["--version"]);
    let major = node.as_deref().and_then(|v| {
        v.trim()
            .trim_start_matches('v')
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
    });
    match (node.as_deref(), major) {
        (Some(version), Some(major)) if major >= 20 && found("npm") => report.line(
            Verdict::Ok,
            "TypeScript adapters",
            format!("node {} and npm", version.trim()),
        ),
        (Some(version), _) => report.line(
            Verdict::Missing,
            "TypeScript adapters",
            format!(
                "node 20+ with npm (to build TypeScript adapters; this is {}): https://nodejs.org",
                version.trim()
            ),
        ),
        (None, _) => report.line(
            Verdict::Missing,
            "TypeScript adapters",
            "node 20+ with npm (to build TypeScript adapters): https://nodejs.org",
        ),
    }
    let venv = output(
        "python3",
        &["-c", "import venv, sys; print(sys.version.split()[0])"],
    );
    match venv {
        Some(version) => report.line(
            Verdict::Ok,
            "Python adapters",
            format!("python {} with venv", version.trim()),
        ),
        None => report.line(
            Verdict::Missing,
            "Python adapters",
            "python3 with venv (to build Python adapters): apt-get install python3-venv",
        ),
    }
}

async fn check_cluster(report: &mut Report, globals: &Globals) {
    let urls = globals.cluster.nats.clone().unwrap_or_default();
    let reached = tokio::time::timeout(
        NATS_TIMEOUT,
        wiring::cluster(&globals.cluster, "moat doctor", None),
    )
    .await;
    match reached {
        Ok(Ok(_)) => report.line(Verdict::Ok, "cluster", urls),
        Ok(Err(error)) => report.line(Verdict::Failed, "cluster", format!("{urls}: {error:#}")),
        Err(_) => report.line(
            Verdict::Failed,
            "cluster",
            format!(
                "{urls}: no answer within {}s; is nats-server running there?",
                NATS_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// Whether `program` is on PATH.
fn found(program: &str) -> bool {
    moat_grants::programs::locate(program, std::env::var_os("PATH").as_deref()).is_some()
}

/// What `program args` prints, when it runs and succeeds.
/// Where rustup keeps its toolchains: `RUSTUP_HOME`, else `~/.rustup`.
fn rustup_home() -> String {
    match std::env::var_os("RUSTUP_HOME") {
        Some(home) => Path::new(&home).display().to_string(),
        None => std::env::var_os("HOME").map_or_else(
            || "~/.rustup".to_owned(),
            |home| Path::new(&home).join(".rustup").display().to_string(),
        ),
    }
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let program = moat_grants::programs::locate(program, std::env::var_os("PATH").as_deref())?;
    run(&program, args)
}

fn run(program: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}
