//! `moat secret set|list|rm`: the secrets runs use without holding them
//! (`--secret NAME@HOST`; docs/security.md).

use std::io::Read;
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
                None => {
                    let mut value = String::new();
                    std::io::stdin()
                        .read_to_string(&mut value)
                        .context("cannot read the value from stdin")?;
                    value
                }
            };
            store.set(name, &value, header.as_deref()).map_err(usage)?;
            eprintln!("moat: secret {name} kept in {}", store.path().display());
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
