//! `cargo bench -p moat-benches --bench protected`: what keeping the files
//! that run code later costs a run (docs/performance.md, "Files that run
//! code later"). The same run of the built-in echo, through the launch
//! layer as every command starts one, with write grants of a git
//! repository (its hooks, config, `.envrc`, `.vscode`) and of a Claude Code
//! state directory (settings, hooks): with the protections on (its
//! protected paths kept when it is prepared and compared, put back, at its
//! `done`), beside the same grants with every protected path let be
//! written (`--allow-write-protected` of both, so nothing is kept). The
//! two alternate, so a drift of the machine touches both; each figure is
//! the median from `prepare` to the `done` handed on.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs a few of
//! each and writes no summary.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use common::{bench_dir, load_average};
use futures::StreamExt;
use moat_grants::Grants;
use moat_launch::protected::Guard;
use moat_launch::{AdapterRef, Ceiling, LaunchSpec, Launcher, Resolver};
use moat_sandbox::{Sandbox, SandboxConfig};

fn main() {
    let full = common::full_run();
    let samples = if full { 400 } else { 5 };
    let load = load_average();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = std::fs::canonicalize(dir.path()).expect("its path");
    let (project, state) = (root.join("project"), root.join("home/.claude"));
    setup(&project, &root.join("home"));
    // SAFETY: no other thread runs yet; the guard reads the home here.
    unsafe { std::env::set_var("HOME", root.join("home")) };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(bench_dir().join("cache")),
        ..SandboxConfig::default()
    })
    .expect("the sandbox starts");
    let launcher = Launcher::new(Resolver::new(sandbox), None);
    let writable = vec![project.clone(), state.clone()];
    let ceiling = |protections: bool| {
        Arc::new(Ceiling {
            grants: Grants {
                write: writable.clone(),
                write_protected: if protections {
                    Vec::new()
                } else {
                    writable.clone()
                },
                ..Grants::none()
            },
            ..Ceiling::new("the bench")
        })
    };
    let (on, off) = (ceiling(true), ceiling(false));
    // Warm: the component compiled and cached, the files in the page cache.
    let _ = runtime.block_on(run(&launcher, &on));
    let _ = runtime.block_on(run(&launcher, &off));
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        with.push(runtime.block_on(run(&launcher, &on)));
        without.push(runtime.block_on(run(&launcher, &off)));
    }
    let starts = |runs: &mut Vec<(f64, f64)>| {
        let mut start: Vec<f64> = runs.iter().map(|(start, _)| *start).collect();
        let mut whole: Vec<f64> = runs.iter().map(|(_, whole)| *whole).collect();
        (median(&mut start), median(&mut whole))
    };
    let ((start_with, with), (start_without, without)) = (starts(&mut with), starts(&mut without));
    // The guard alone, as a workflow's hook uses it: kept, then compared.
    let grants = Grants {
        write: writable.clone(),
        ..Grants::none()
    };
    let names: Arc<dyn moat_engine::SettingNames> = Arc::new(moat_engine::FieldNames);
    let (mut keep, mut put_back) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let started = Instant::now();
        let guard = Guard::keep_for_program(&grants, names.clone()).expect("paths to keep");
        keep.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        assert!(guard.put_back().is_none(), "nothing changed");
        put_back.push(started.elapsed().as_secs_f64());
    }
    let (keep, put_back) = (median(&mut keep), median(&mut put_back));
    // The whole moat process of a contained run whose program starts
    // (its init makes the read-only mounts), alternating.
    let store = root.join("store.db");
    let shell = |protections: bool| {
        let mut command = common::moat(&store);
        command
            .args([
                "run",
                moat_testkit::components::ESCAPE,
                "--allow-run=sh",
                "--no-store",
            ])
            .arg(format!("--allow-write={}", project.display()))
            .args((!protections).then(|| format!("--allow-write-protected={}", project.display())))
            .args(["--output", "ndjson", "shell true"])
            .stdout(std::process::Stdio::null());
        command
    };
    let processes = if full { 40 } else { 1 };
    let (mut program_on, mut program_off) = (Vec::new(), Vec::new());
    for _ in 0..processes {
        program_on.push(common::median_process_seconds(1, || shell(true)));
        program_off.push(common::median_process_seconds(1, || shell(false)));
    }
    let (program_on, program_off) = (median(&mut program_on), median(&mut program_off));
    let table = format!(
        "## Files that run code later (load {load})\n\n\
         An echo run through the launch layer, a git repository and Claude Code's state directory \
         writable; median of {samples} each, alternating.\n\n\
         | what | protections on | every path let be written | difference | ratio |\n|---|---|---|---|---|\n\
         | run start: prepare → first event | {:.0} µs | {:.0} µs | {:+.0} µs | {:.2}× |\n\
         | whole run: prepare → done | {:.0} µs | {:.0} µs | {:+.0} µs | {:.2}× |\n\
         | `moat run` of a contained `sh -c true` (the repository's hooks and config mounted read-only; median of {processes} processes) | {:.1} ms | {:.1} ms | {:+.1} ms | {:.2}× |\n\n\
         The guard alone: keeping the paths {:.0} µs (at the start), comparing them {:.0} µs (at the `done`).\n",
        start_with * 1e6,
        start_without * 1e6,
        (start_with - start_without) * 1e6,
        start_with / start_without,
        with * 1e6,
        without * 1e6,
        (with - without) * 1e6,
        with / without,
        program_on * 1e3,
        program_off * 1e3,
        (program_on - program_off) * 1e3,
        program_on / program_off,
        keep * 1e6,
        put_back * 1e6,
    );
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("protected.md"), &table).expect("the summary is written");
    }
}

/// One echo run under `ceiling`, prepared, started and read to its
/// `done`: seconds to its first event, and to its `done`.
async fn run(launcher: &Launcher, ceiling: &Arc<Ceiling>) -> (f64, f64) {
    let started = Instant::now();
    let spec = LaunchSpec::new(AdapterRef::Named("echo".into()), "hello", ceiling.clone());
    let prepared = launcher.prepare(spec).await.expect("the run is admitted");
    let mut events = launcher.start(prepared);
    let mut first = None;
    let mut done = false;
    while let Some(event) = events.next().await {
        first.get_or_insert_with(|| started.elapsed().as_secs_f64());
        done |= event.is_done();
    }
    assert!(done, "the run ended");
    (first.unwrap_or_default(), started.elapsed().as_secs_f64())
}

/// A repository as `git init` makes it (its sample hooks), with a tool's
/// settings and direnv's file; a home with Claude Code's settings, a hook
/// script and its state file.
fn setup(project: &Path, home: &Path) {
    std::fs::create_dir_all(project.join(".vscode")).expect("the project");
    let status = Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(project)
        .status()
        .expect("git runs");
    assert!(status.success());
    std::fs::write(project.join(".vscode/settings.json"), "{}\n").expect("a file");
    std::fs::write(project.join(".envrc"), "export A=1\n").expect("a file");
    let claude: PathBuf = home.join(".claude");
    std::fs::create_dir_all(claude.join("hooks")).expect("the home");
    std::fs::write(claude.join("settings.json"), "{\"hooks\":{}}\n").expect("a file");
    std::fs::write(claude.join("hooks/format.sh"), "#!/bin/sh\n").expect("a file");
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
