//! `moat-fuzz`: runs moat's parsers of untrusted input on mutated seeds
//! for a while and reports executions and crashes. Stable Rust: no
//! coverage guidance (cargo-fuzz and libFuzzer need a nightly compiler
//! these machines do not have); instead structure-aware mutations of the
//! tests' fixtures, at volume. A crash (a panic) is saved under
//! `--crashes DIR` as the input that caused it, to replay with `--replay`
//! and keep as a regression test.
//!
//! ```sh
//! cargo run --release -p moat-fuzz -- --minutes 10            # every target
//! cargo run --release -p moat-fuzz -- --target sse --seconds 30
//! cargo run -p moat-fuzz -- --replay target/fuzz/crashes/sse-…  # one input
//! ```

mod mutate;
mod targets;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;

use mutate::{Rng, mutate};
use targets::{ALL, Target};

/// The largest input tried.
const MAX_INPUT: usize = 64 * 1024;

#[derive(Parser)]
#[command(about = "Fuzzes moat's parsers of untrusted input")]
struct Args {
    /// One target (else every one, one after another): see --list.
    #[arg(long)]
    target: Option<String>,
    /// How long each target runs, in seconds.
    #[arg(long, conflicts_with = "minutes", default_value_t = 10)]
    seconds: u64,
    /// How long each target runs, in minutes.
    #[arg(long)]
    minutes: Option<u64>,
    /// The random seed (the same seed, the same inputs).
    #[arg(long, default_value_t = 0x6d6f_6174)]
    seed: u64,
    /// Where crashing inputs are saved.
    #[arg(long, default_value = "target/fuzz/crashes")]
    crashes: PathBuf,
    /// Lists the targets.
    #[arg(long)]
    list: bool,
    /// Runs one saved input through --target and says whether it crashes.
    #[arg(long, value_name = "FILE", requires = "target")]
    replay: Option<PathBuf>,
}

/// What one target's run found.
struct Outcome {
    executions: u64,
    elapsed: Duration,
    crashes: Vec<(PathBuf, String)>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("moat-fuzz: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<bool> {
    if args.list {
        for target in ALL {
            println!("{:<14}  {}", target.name, target.what);
        }
        return Ok(true);
    }
    let chosen: Vec<&Target> = match &args.target {
        Some(name) => vec![
            ALL.iter()
                .find(|t| t.name == name)
                .with_context(|| format!("no target {name}; --list names them"))?,
        ],
        None => ALL.iter().collect(),
    };
    let repo = repo_root();
    let scratch = tempfile::tempdir().context("a scratch directory")?;
    let panicked = quiet_panics();
    if let Some(file) = &args.replay {
        let input = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        return Ok(
            match attempt(chosen[0], &input, scratch.path(), &panicked) {
                None => {
                    println!("{}: no crash", file.display());
                    true
                }
                Some(message) => {
                    println!("{}: crashes: {message}", file.display());
                    false
                }
            },
        );
    }
    let per_target = Duration::from_secs(args.minutes.map_or(args.seconds, |m| m * 60));
    let mut clean = true;
    for target in chosen {
        let outcome = fuzz(target, &repo, scratch.path(), per_target, &args, &panicked)?;
        let rate = outcome.executions as f64 / outcome.elapsed.as_secs_f64().max(1e-9);
        println!(
            "{:<14}  {:>10} executions in {:>5.0} s  ({:>8.0}/s)  {} crashes",
            target.name,
            outcome.executions,
            outcome.elapsed.as_secs_f64(),
            rate,
            outcome.crashes.len()
        );
        for (path, message) in &outcome.crashes {
            println!("  {}: {message}", path.display());
        }
        clean &= outcome.crashes.is_empty();
    }
    Ok(clean)
}

/// Runs `target` on mutants of its seeds for `duration`.
fn fuzz(
    target: &Target,
    repo: &Path,
    scratch: &Path,
    duration: Duration,
    args: &Args,
    panicked: &Arc<Mutex<Option<String>>>,
) -> anyhow::Result<Outcome> {
    let seeds = (target.seeds)(repo);
    if seeds.is_empty() {
        bail!("{}: no seeds found under {}", target.name, repo.display());
    }
    let mut rng = Rng::new(args.seed ^ hash(target.name.as_bytes()));
    let mut outcome = Outcome {
        executions: 0,
        elapsed: Duration::ZERO,
        crashes: Vec::new(),
    };
    let started = Instant::now();
    // Every seed as it is first: the fixtures must pass.
    let mut queue: Vec<Vec<u8>> = seeds.clone();
    loop {
        let input = match queue.pop() {
            Some(input) => input,
            None => {
                let mut input = seeds[rng.below(seeds.len())].clone();
                let other = &seeds[rng.below(seeds.len())];
                mutate(&mut rng, &mut input, other, MAX_INPUT);
                // Sometimes a mutant of a mutant: further from the seeds.
                if rng.below(4) == 0 {
                    mutate(&mut rng, &mut input, other, MAX_INPUT);
                }
                input
            }
        };
        outcome.executions += 1;
        if let Some(message) = attempt(target, &input, scratch, panicked) {
            let path = save(&args.crashes, target.name, &input)?;
            if !outcome.crashes.iter().any(|(_, m)| *m == message) {
                outcome.crashes.push((path, message));
            }
        }
        if outcome.executions.is_multiple_of(64) && started.elapsed() >= duration {
            break;
        }
    }
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}

/// Feeds `input` to `target`: `None` when it returned, else the panic's
/// message.
fn attempt(
    target: &Target,
    input: &[u8],
    scratch: &Path,
    panicked: &Arc<Mutex<Option<String>>>,
) -> Option<String> {
    let returned = std::panic::catch_unwind(|| (target.run)(input, scratch));
    match returned {
        Ok(()) => None,
        Err(_) => Some(
            panicked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_else(|| "a panic".into()),
        ),
    }
}

/// Panics print nothing (a fuzzer makes many); their message and place are
/// kept for the report.
fn quiet_panics() -> Arc<Mutex<Option<String>>> {
    let kept: Arc<Mutex<Option<String>>> = Arc::default();
    let into = kept.clone();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        *into.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(format!("{message} at {place}"));
    }));
    kept
}

/// Saves a crashing input: `DIR/TARGET-HASH`.
fn save(dir: &Path, target: &str, input: &[u8]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{target}-{:016x}", hash(input)));
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
    file.write_all(input)?;
    Ok(path)
}

/// FNV-1a: a name for an input.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The repository this crate is in: where the seeds are.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smoke run CI makes: every target passes its seeds and a second
    /// of mutants without a crash (the long runs are `scripts/fuzz`).
    #[test]
    fn every_target_passes_its_seeds_and_a_second_of_mutants() {
        let args = Args::parse_from(["moat-fuzz", "--seconds", "1"]);
        let scratch = tempfile::tempdir().unwrap();
        let panicked = quiet_panics();
        let crashes = tempfile::tempdir().unwrap();
        let args = Args {
            crashes: crashes.path().to_path_buf(),
            ..args
        };
        for target in ALL {
            let outcome = fuzz(
                target,
                &repo_root(),
                scratch.path(),
                Duration::from_secs(1),
                &args,
                &panicked,
            )
            .unwrap();
            assert!(outcome.executions > 0, "{}", target.name);
            assert!(
                outcome.crashes.is_empty(),
                "{}: {:?}",
                target.name,
                outcome.crashes
            );
        }
    }
}
