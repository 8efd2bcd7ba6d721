//! Shell completion of values, not only flags: adapters by name (built-in
//! and installed, or a `.wasm` file) and runs by id (the newest first,
//! each with its adapter, status and prompt), through clap's own dynamic
//! completion (the shell asks `moat` itself at each Tab: `moat
//! completions SHELL` prints the registration that does it).

use std::ffi::OsStr;

use clap_complete::engine::{
    ArgValueCompleter, CompletionCandidate, PathCompleter, ValueCompleter,
};
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};
use moat_runs::RunFilter;

/// The variable the registration sets to ask `moat` for completions.
const VARIABLE: &str = "MOAT_COMPLETE";

/// How many runs are offered: the newest.
const RUNS_OFFERED: usize = 50;

/// Longest prompt shown beside a run.
const PROMPT_SHOWN: usize = 40;

/// When the shell asks for completions (`MOAT_COMPLETE` set): answers
/// from the command `moat` makes and exits; otherwise returns at once.
pub fn answer_if_asked(moat: fn() -> clap::Command) {
    clap_complete::CompleteEnv::with_factory(moat)
        .var(VARIABLE)
        .complete();
}

/// The script that registers the completion of `moat` (the command) in
/// `shell`.
pub fn registration(
    shell: clap_complete::Shell,
    mut moat: clap::Command,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let completer: &dyn EnvCompleter = match shell {
        clap_complete::Shell::Bash => &Bash,
        clap_complete::Shell::Zsh => &Zsh,
        clap_complete::Shell::Fish => &Fish,
        clap_complete::Shell::Elvish => &Elvish,
        clap_complete::Shell::PowerShell => &Powershell,
        // A shell clap adds later: its static script.
        other => {
            clap_complete::generate(other, &mut moat, "moat", out);
            return Ok(());
        }
    };
    completer.write_registration(VARIABLE, "moat", "moat", "moat", out)
}

/// Completes an adapter: a built-in or installed name, or a component's
/// path.
pub fn adapters() -> ArgValueCompleter {
    ArgValueCompleter::new(adapter_candidates)
}

/// Completes a run: its id (`@last` for the newest).
pub fn runs() -> ArgValueCompleter {
    ArgValueCompleter::new(run_candidates)
}

fn adapter_candidates(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    // A path is being typed: files, as the shell would give them.
    if typed.contains('/') || typed.starts_with('.') {
        return PathCompleter::file().complete(current);
    }
    let mut candidates: Vec<CompletionCandidate> = moat_builtins::names()
        .map(|name| CompletionCandidate::new(name).help(Some("built-in".into())))
        .collect();
    if let Ok(installed) = moat_launch::catalog().map(|catalog| catalog.list())
        && let Ok(installed) = installed
    {
        candidates.extend(installed.into_iter().map(|manifest| {
            CompletionCandidate::new(manifest.name).help(Some("installed".into()))
        }));
    }
    candidates
        .into_iter()
        .filter(|c| c.get_value().to_string_lossy().starts_with(typed.as_ref()))
        .collect()
}

fn run_candidates(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Some(path) = moat_store::Store::default_path() else {
        return Vec::new();
    };
    // Only a store that exists: completing never makes one.
    if !path.exists() {
        return Vec::new();
    }
    let Ok(store) = moat_store::Store::open(&path) else {
        return Vec::new();
    };
    let filter = RunFilter {
        limit: Some(RUNS_OFFERED),
        ..RunFilter::default()
    };
    let Ok(runs) = store.list(&filter) else {
        return Vec::new();
    };
    let mut candidates =
        vec![CompletionCandidate::new("@last").help(Some("the newest run".into()))];
    candidates.extend(runs.iter().map(|run| {
        let prompt: String = run
            .run
            .prompt
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(PROMPT_SHOWN)
            .collect();
        let help = format!(
            "{} {} {}",
            run.run.adapter,
            run.status,
            crate::render::safe::text(&prompt)
        );
        CompletionCandidate::new(run.id.as_str()).help(Some(help.into()))
    }));
    candidates
        .into_iter()
        .filter(|c| {
            let value = c.get_value().to_string_lossy();
            // A run may be typed without its `r_`.
            value.starts_with(typed.as_ref())
                || value
                    .strip_prefix("r_")
                    .is_some_and(|bare| bare.starts_with(typed.as_ref()))
        })
        .collect()
}
