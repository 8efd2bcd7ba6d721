//! `moat completions SHELL` and `moat man`: the shell completions and man
//! pages of the command line, generated from its one clap definition, so
//! they never fall behind a flag.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};

/// The shell's registration of moat's completion: the shell asks `moat`
/// itself at each Tab, so adapter names and run ids complete too.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    crate::complete::registration(
        args.shell,
        <crate::args::Cli as clap::CommandFactory>::command(),
        &mut std::io::stdout().lock(),
    )
    .context("cannot write the completion script")?;
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: &ManArgs) -> anyhow::Result<ExitCode> {
    let command = Cli::command();
    match &args.out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            std::io::stdout().write_all(&page)?;
        }
        Some(dir) => write_pages(command, dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `moat.1` and a `moat-COMMAND.1` for every subcommand, into `dir`.
fn write_pages(command: clap::Command, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    eprintln!(
        "man pages written to {} (man -l {}/moat.1)",
        dir.display(),
        dir.display()
    );
    Ok(())
}
