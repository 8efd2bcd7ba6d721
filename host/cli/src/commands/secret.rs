//! `moat secret set|list|rm`: the secrets runs use without holding them
//! (`--secret NAME@HOST`; docs/security.md).

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::Context;
use moat_launch::SecretError;

use crate::args::SecretCommand;
use crate::{Globals, UsageError, wiring};

pub fn secret(globals: &Globals, command: &SecretCommand) -> anyhow::Result<ExitCode> {
    let store = wiring::secret_store(globals).context(
        "no place for the secrets file: set HOME, XDG_STATE_HOME or MOAT_SECRETS, or pass --secrets",
    )?;
    let usage = |error: SecretError| UsageError(error.to_string());
    match command {
        SecretCommand::Set {
            name,
            from_file,
            header,
        } => {
            // Never an argument: it would be in the shell's history and in
            // every process listing.
            let value = match from_file {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?,
                // Typed: asked for, not echoed, one line.
                None if std::io::stdin().is_terminal() => {
                    rpassword::prompt_password(format!("Value of {name} (typing is not shown): "))
                        .context("cannot read the value from the terminal")?
                }
                None => {
                    let mut value = String::new();
                    std::io::stdin()
                        .read_to_string(&mut value)
                        .context("cannot read the value from stdin")?;
                    value
                }
            };
            let header = store.set(name, &value, header.as_deref()).map_err(usage)?;
            eprintln!(
                "{}",
                kept(name, header.as_deref(), &store.path().display().to_string())
            );
        }
        SecretCommand::List => {
            for (name, header) in store.list().map_err(usage)? {
                match header {
                    Some(header) => println!("{name}\t{header}"),
                    None => println!("{name}\tauthorization: bearer"),
                }
            }
        }
        SecretCommand::Rm { name } => {
            if !store.remove(name).map_err(usage)? {
                return Err(UsageError(format!(
                    "no secret {name} is kept; `moat secret list` shows those that are"
                ))
                .into());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `moat secret set` says it kept: where, in which header, and where
/// it may go — the hosts the built-in adapters that use it send it to,
/// and any other only where a run is granted it.
fn kept(name: &str, header: Option<&str>, file: &str) -> String {
    let header = match header {
        Some(header) => format!("{header}: <value>"),
        None => "authorization: Bearer <value>".to_owned(),
    };
    // Each host it goes to by default, with the built-ins that send it.
    let mut hosts: Vec<(&str, Vec<&str>)> = Vec::new();
    for builtin in moat_builtins::names() {
        let Some(profile) = moat_builtins::profile(builtin) else {
            continue;
        };
        for grant in profile.secrets {
            if let Some((secret, host)) = grant.split_once('@')
                && secret == name
            {
                match hosts.iter_mut().find(|(known, _)| *known == host) {
                    Some((_, adapters)) => adapters.push(builtin),
                    None => hosts.push((host, vec![builtin])),
                }
            }
        }
    }
    let goes: Vec<String> = hosts
        .iter()
        .map(|(host, adapters)| format!("the built-in {} send it to {host}", adapters.join(", ")))
        .collect();
    let others = match goes.is_empty() {
        true => "runs send it".to_owned(),
        false => format!("{}; other runs", goes.join("; ")),
    };
    format!(
        "moat: kept {name} in {file}, sent as `{header}`; {others} only where granted (--secret {name}@HOST)"
    )
}
