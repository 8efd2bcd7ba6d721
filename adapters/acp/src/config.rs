//! Which ACP agent to run, from the run's options, and the options an ACP
//! agent cannot be given (refused before anything starts).
//!
//! The agent is named in `options.extra` in the shape editors (Zed's
//! `agent_servers`) and the common `mcpServers` entries use:
//! `{"command": "gemini", "args": ["--acp"], "env": {"NAME": "value"}}`.

use moat_cli_support::unsupported;
use moat_guest::json::{Map, Value};
use moat_guest::{ErrorInfo, Options};

/// The adapter's name, in refusals.
const ADAPTER: &str = "acp";

/// The most arguments and variables taken (an agent's command line is a
/// handful).
const MAX_ITEMS: usize = 256;

/// How to start the ACP agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    /// The program: a bare name found on PATH or an absolute path, granted
    /// by `--allow-run` under the same spelling.
    pub command: String,
    /// Its arguments (e.g. `--acp`).
    pub args: Vec<String>,
    /// Variables set for it on top of the run's granted ones (each must be
    /// granted too, `--allow-env`: the host refuses any other).
    pub env: Vec<(String, String)>,
}

/// The agent to run, from `options.extra`, refusing what the adapter cannot
/// honour.
pub fn agent_command(options: &Options) -> Result<AgentCommand, ErrorInfo> {
    refuse_unsupported(options)?;
    let extra = options.extra_object()?;
    if let Some(key) = extra
        .keys()
        .find(|key| !matches!(key.as_str(), "command" | "args" | "env"))
    {
        return Err(unsupported(
            ADAPTER,
            &format!("options.extra.{}", moat_cli_support::clip(key, 100)),
            "the acp adapter takes `command`, `args` and `env` (the ACP agent to run)",
        ));
    }
    let command = match extra.get("command") {
        Some(Value::String(command)) if valid_program(command) => command.clone(),
        Some(_) => {
            return Err(invalid(
                "extra.command must be the agent's program: a name on PATH or an absolute path",
            ));
        }
        None => {
            return Err(invalid(
                "name the ACP agent to run: --extra '{\"command\":\"gemini\",\"args\":[\"--acp\"]}' \
                 and grant it with --allow-run=gemini",
            ));
        }
    };
    Ok(AgentCommand {
        command,
        args: strings(extra.get("args"))?,
        env: variables(extra.get("env"))?,
    })
}

/// A program as `--allow-run` grants one: a bare name, or an absolute path.
fn valid_program(command: &str) -> bool {
    !command.is_empty()
        && command.len() <= 4096
        && !command.contains('\0')
        && (command.starts_with('/') || !command.contains('/'))
}

fn strings(value: Option<&Value>) -> Result<Vec<String>, ErrorInfo> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let items = value
        .as_array()
        .filter(|items| items.len() <= MAX_ITEMS)
        .ok_or_else(|| invalid("extra.args must be an array of strings"))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .filter(|arg| !arg.contains('\0'))
                .map(str::to_owned)
                .ok_or_else(|| invalid("extra.args must be an array of strings"))
        })
        .collect()
}

fn variables(value: Option<&Value>) -> Result<Vec<(String, String)>, ErrorInfo> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let bad = || invalid("extra.env must be an object of variable names to string values");
    let object: &Map<String, Value> = value
        .as_object()
        .filter(|object| object.len() <= MAX_ITEMS)
        .ok_or_else(bad)?;
    object
        .iter()
        .map(|(name, value)| {
            let valid_name = !name.is_empty()
                && !name.contains(['=', '\0'])
                && !name.starts_with(|c: char| c.is_ascii_digit());
            match value.as_str() {
                Some(value) if valid_name && !value.contains('\0') => {
                    Ok((name.clone(), value.to_owned()))
                }
                _ => Err(bad()),
            }
        })
        .collect()
}

fn invalid(message: &str) -> ErrorInfo {
    ErrorInfo::new(moat_guest::json::INVALID_OPTIONS, message, false)
}

/// Refuses the run options ACP (protocol version 1) has no place for:
/// silently dropping them would run the agent otherwise than asked.
fn refuse_unsupported(options: &Options) -> Result<(), ErrorInfo> {
    let refuse = |option: &str, hint: &str| Err(unsupported(ADAPTER, option, hint));
    let own_flag = "ACP has no such setting; pass the agent's own flag in extra.args";
    if options.model.is_some() {
        return refuse("--model", own_flag);
    }
    if options.system_prompt.is_some() {
        return refuse("--system", own_flag);
    }
    if options.effort.is_some() {
        return refuse("--effort", own_flag);
    }
    if options.max_turns.is_some() {
        return refuse("--max-turns", own_flag);
    }
    if options.max_budget_usd.is_some() {
        return refuse("--max-budget-usd", "ACP agents keep no spending limit");
    }
    if options.agents.is_some() {
        return refuse("--agents", "ACP has no sub-agents");
    }
    if options.mcp_servers.is_some() {
        return refuse(
            "--mcp-config",
            "the acp adapter does not pass MCP servers to the agent yet; configure them in the agent",
        );
    }
    if !options.directories.is_empty() {
        return refuse(
            "--add-dir",
            "ACP protocol version 1 sessions have one working directory",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_extra(extra: &str) -> Options {
        Options {
            extra: Some(extra.to_owned()),
            ..Options::default()
        }
    }

    #[test]
    fn the_agent_is_named_like_an_editor_names_an_agent_server() {
        let command = agent_command(&with_extra(
            r#"{"command":"gemini","args":["--acp"],"env":{"A":"1"}}"#,
        ))
        .unwrap();
        assert_eq!(
            command,
            AgentCommand {
                command: "gemini".into(),
                args: vec!["--acp".into()],
                env: vec![("A".into(), "1".into())],
            }
        );
        assert_eq!(
            agent_command(&with_extra(r#"{"command":"/usr/bin/node"}"#))
                .unwrap()
                .args,
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_missing_or_malformed_agent_is_refused_saying_how_to_name_it() {
        let missing = agent_command(&Options::default()).unwrap_err();
        assert!(
            missing.message.contains("--allow-run"),
            "{}",
            missing.message
        );
        for bad in [
            r#"{"command":"bin/agent"}"#,
            r#"{"command":""}"#,
            r#"{"command":"a","args":"--acp"}"#,
            r#"{"command":"a","args":[1]}"#,
            r#"{"command":"a","env":{"A=B":"1"}}"#,
            r#"{"command":"a","env":{"A":1}}"#,
            r#"{"command":"a","program":"b"}"#,
        ] {
            assert!(agent_command(&with_extra(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_acp_cannot_carry_are_refused() {
        let options = Options {
            model: Some("m".into()),
            ..with_extra(r#"{"command":"a"}"#)
        };
        let error = agent_command(&options).unwrap_err();
        assert!(error.message.contains("--model"), "{}", error.message);
    }
}
