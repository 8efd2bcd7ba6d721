//! `moat compile`: fill the cache ahead of time.

use std::process::ExitCode;

use moat_sandbox::{CacheOutcome, Sandbox};

use crate::UsageError;
use crate::args::CompileArgs;

pub async fn compile(sandbox: &Sandbox, args: CompileArgs) -> anyhow::Result<ExitCode> {
    let report = sandbox
        .compile_file(&args.file)
        .await
        .map_err(|e| UsageError(format!("cannot compile {}: {e}", args.file.display())))?;
    let what = match &report.cache {
        CacheOutcome::Hit => "already compiled".to_string(),
        CacheOutcome::Miss => format!("compiled in {:.0?}", report.load_time),
        CacheOutcome::Replaced(reason) => format!(
            "recompiled in {:.0?} (old entry {reason})",
            report.load_time
        ),
        CacheOutcome::Uncached(reason) => format!("compiled, not cached: {reason}"),
    };
    let location = report
        .cache_path
        .map(|p| format!(" → {}", p.display()))
        .unwrap_or_default();
    println!(
        "{} (moat:adapter@{}): {what}{location}",
        args.file.display(),
        report.contract
    );
    Ok(ExitCode::SUCCESS)
}
