//! Run options → Gemini CLI's command line
//! (`gemini --prompt=… --output-format=stream-json …`).
//!
//! | option | switch |
//! |---|---|
//! | model | `--model=M` (given, Gemini makes no routing call) |
//! | resume | `--resume=SESSION_ID` |
//! | cwd | the process's working directory |
//! | directories | `--include-directories=D` each |
//! | `extra.program` | the CLI's absolute path, granted by that path (default: `gemini` on PATH) |
//! | max turns | refused: only a settings-file entry (`model.maxSessionTurns`) sets it |
//! | max budget, effort, system prompt | refused: no command-line switch |
//! | sub-agents | refused: Gemini CLI has none |
//! | MCP servers | refused: Gemini CLI reads them only from a settings file (see below) |
//! | allowed / disallowed tools | refused: `--allowed-tools` only skips confirmation, it does not restrict |
//!
//! Trust levels (Gemini's approval modes; headless, a tool that would need
//! approval is not offered at all):
//!
//! - `sandbox`: refused. Even its most restrictive mode offers the model
//!   file-reading and web-search tools, and no switch turns them off.
//! - `controlled`: `--approval-mode=auto_edit`: file and web tools, no
//!   shell (recorded: `run_shell_command` is not offered).
//! - `unrestricted`: `--approval-mode=yolo`: every tool, shell included.
//!
//! Values go in `--flag=value` form, the prompt included, so a value
//! starting with `-` cannot be read as another switch.
//!
//! MCP servers: Gemini CLI 0.61 has no switch for them. It reads them from
//! the user's `~/.gemini/settings.json`, the project's
//! `.gemini/settings.json`, or a system settings file
//! (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`) that it skips unless the file and
//! every directory above it are owned by root and writable by no one else
//! (so never a file of the run's own under `/tmp`). moat writes neither the
//! user's nor the project's configuration, so it refuses rather than hand
//! the servers over. (`GEMINI_CLI_HOME` would move all of Gemini's state,
//! the user's login included, and is not used either.)

use moat_cli_support::{Invocation, unsupported};
use moat_guest::{ErrorInfo, Options, TrustLevel};

/// The program run.
pub const PROGRAM: &str = "gemini";

/// The command line for one run, or the refusal of an option Gemini CLI
/// cannot honour.
pub fn invocation(prompt: &str, options: &Options) -> Result<Invocation, ErrorInfo> {
    let program = moat_cli_support::program("gemini", PROGRAM, options)?;
    let refuse = |option: &str, hint: &str| Err(unsupported("gemini", option, hint));
    if options.max_turns.is_some() {
        return refuse(
            "--max-turns",
            "only its settings file (model.maxSessionTurns) sets a turn limit",
        );
    }
    if options.max_budget_usd.is_some() {
        return refuse("--max-budget-usd", "it has no spending limit");
    }
    if options.agents.is_some() {
        return refuse("--agents", "Gemini CLI has no sub-agents");
    }
    if options.mcp_servers.is_some() {
        return refuse(
            "MCP servers",
            "Gemini CLI reads MCP servers only from the user's or the project's settings file, which moat does not write; add them to ~/.gemini/settings.json yourself, or use claude-code or codex",
        );
    }
    if options.effort.is_some() {
        return refuse("--effort", "it has no reasoning-effort switch");
    }
    if options.system_prompt.is_some() {
        return refuse(
            "--system-prompt",
            "only a file named by GEMINI_SYSTEM_MD replaces its system prompt",
        );
    }
    if options.allowed_tools.is_some() || !options.disallowed_tools.is_empty() {
        return refuse(
            "--allowed-tools / --disallowed-tools",
            "its command line cannot restrict tools by name; choose what it may do with --trust",
        );
    }
    let mode = match options.trust {
        TrustLevel::Sandbox => {
            return refuse(
                "--trust sandbox",
                "its file-reading and web-search tools cannot be switched off; \
                 run with --trust controlled (files and web, no shell) or unrestricted",
            );
        }
        TrustLevel::Controlled => "auto_edit",
        TrustLevel::Unrestricted => "yolo",
    };
    let mut args = vec![
        format!("--prompt={prompt}"),
        "--output-format=stream-json".to_owned(),
        format!("--approval-mode={mode}"),
    ];
    if let Some(model) = &options.model {
        args.push(format!("--model={model}"));
    }
    if let Some(session) = &options.resume {
        args.push(format!("--resume={session}"));
    }
    for dir in &options.directories {
        args.push(format!("--include-directories={dir}"));
    }
    Ok(Invocation::new(program, args, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controlled() -> Options {
        Options {
            trust: TrustLevel::Controlled,
            ..Options::default()
        }
    }

    #[test]
    fn the_prompt_and_every_value_are_attached_to_their_switch() {
        let call = invocation(
            "-rf everything",
            &Options {
                model: Some("gemini-2.5-flash".into()),
                resume: Some("86775bff-e3b1-46d0-b654-ace8e4eb2459".into()),
                cwd: Some("/repo".into()),
                ..controlled()
            },
        )
        .unwrap();
        assert_eq!(call.program, "gemini");
        assert_eq!(
            call.args,
            [
                "--prompt=-rf everything",
                "--output-format=stream-json",
                "--approval-mode=auto_edit",
                "--model=gemini-2.5-flash",
                "--resume=86775bff-e3b1-46d0-b654-ace8e4eb2459",
            ]
        );
        assert_eq!(call.cwd.as_deref(), Some("/repo"));
    }

    #[test]
    fn unrestricted_trust_is_yolo() {
        let call = invocation(
            "x",
            &Options {
                trust: TrustLevel::Unrestricted,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(call.has("--approval-mode=yolo"));
    }

    #[test]
    fn what_gemini_cannot_enforce_is_refused_before_it_starts() {
        let refused = [
            Options::default(),
            Options {
                max_turns: Some(3),
                ..controlled()
            },
            Options {
                max_budget_usd: Some(1.0),
                ..controlled()
            },
            Options {
                effort: Some("high".into()),
                ..controlled()
            },
            Options {
                system_prompt: Some("be brief".into()),
                ..controlled()
            },
            Options {
                allowed_tools: Some(vec!["read_file".into()]),
                ..controlled()
            },
            Options {
                disallowed_tools: vec!["run_shell_command".into()],
                ..controlled()
            },
        ];
        moat_cli_support::testing::assert_refused(invocation, &refused);
    }
    #[test]
    fn directories_reach_their_switch_and_sub_agents_and_mcp_servers_are_refused() {
        let call = invocation(
            "x",
            &Options {
                directories: vec!["/data".into()],
                ..controlled()
            },
        )
        .unwrap();
        assert!(call.has("--include-directories=/data"), "{:?}", call.args);
        for refused in [
            Options {
                agents: Some("{}".into()),
                ..controlled()
            },
            Options {
                mcp_servers: Some("{}".into()),
                ..controlled()
            },
        ] {
            let error = invocation("x", &refused).unwrap_err();
            assert_eq!(
                error.code.as_deref(),
                Some("UNSUPPORTED_OPTION"),
                "{}",
                error.message
            );
        }
    }
}
