//! Run options → Codex's command line (`codex exec --json …`).
//!
//! | option | switch |
//! |---|---|
//! | model | `--model=M` |
//! | cwd | `--cd=DIR`, and the process's working directory |
//! | directories | `--add-dir=D` each (writable beside the workspace) |
//! | `extra.program` | the CLI's absolute path, granted by that path (default: `codex` on PATH) |
//! | resume | `codex exec … resume ID -- PROMPT` |
//! | effort | `-c model_reasoning_effort=E` |
//! | system prompt | `-c developer_instructions="…"` |
//! | max turns, max budget | refused: Codex has no such switch |
//! | sub-agents | refused: Codex has none |
//! | MCP servers | `-c mcp_servers.NAME.command="…"`, `.args=[…]`, `.env.VAR="…"`, or `.url="…"` and `.http_headers.H="…"` |
//! | `OPENAI_BASE_URL` in the adapter's environment | a provider of its own: `-c model_provider="moat"`, `model_providers.moat.base_url="…"`, Responses API, key from `OPENAI_API_KEY` |
//! | allowed / disallowed tools | refused: Codex cannot restrict its built-in tools by name |
//!
//! Trust levels (Codex's sandbox modes and tool switches):
//!
//! - `sandbox`: `--sandbox=read-only`, shell tool off
//!   (`features.shell_tool=false`), web search off, image viewer off.
//! - `controlled`: `--sandbox=workspace-write`, shell tool off; web search
//!   as configured. Codex reads files through its shell, so without it the
//!   agent can only change files with its patch tool.
//! - `unrestricted`: `--sandbox=danger-full-access`, every tool.
//!
//! Always: `--skip-git-repo-check` (moat's grants decide where it runs),
//! analytics and plugins off. Stdin must be closed (Codex reads a piped
//! stdin as more prompt). The prompt comes after `--`.

use moat_cli_support::{Invocation, unsupported};
use moat_guest::json::{Map, Value};
use moat_guest::{ErrorInfo, Options, TrustLevel};

/// The program run.
pub const PROGRAM: &str = "codex";

/// The longest resume token accepted.
const MAX_THREAD_ID: usize = 128;

/// The command line for one run, or the refusal of an option Codex cannot
/// honour. `endpoint` is the OpenAI base URL the adapter was given
/// (`OPENAI_BASE_URL`): Codex ignores that variable, so the adapter makes
/// it the base URL of a provider of its own; with a secret it is the
/// secret's route through moat, where the key is added.
pub fn invocation(
    prompt: &str,
    options: &Options,
    endpoint: Option<&str>,
) -> Result<Invocation, ErrorInfo> {
    let program = moat_cli_support::program("codex", PROGRAM, options)?;
    if options.agents.is_some() {
        return Err(unsupported("codex", "--agents", "Codex has no sub-agents"));
    }

    if options.max_turns.is_some() {
        return Err(unsupported(
            "codex",
            "--max-turns",
            "it has no turn limit; run without it",
        ));
    }
    if options.max_budget_usd.is_some() {
        return Err(unsupported(
            "codex",
            "--max-budget-usd",
            "it has no spending limit; run without it",
        ));
    }
    if options.allowed_tools.is_some() || !options.disallowed_tools.is_empty() {
        return Err(unsupported(
            "codex",
            "--allowed-tools / --disallowed-tools",
            "it cannot restrict its built-in tools by name; choose what it may do with --trust",
        ));
    }
    let mut args: Vec<String> = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-c",
        "analytics.enabled=false",
        "-c",
        "features.plugins=false",
    ]
    .map(str::to_owned)
    .to_vec();
    let config = |args: &mut Vec<String>, setting: &str| {
        args.push("-c".to_owned());
        args.push(setting.to_owned());
    };
    match options.trust {
        TrustLevel::Sandbox => {
            args.push("--sandbox=read-only".to_owned());
            config(&mut args, "features.shell_tool=false");
            config(&mut args, "web_search=\"disabled\"");
            config(&mut args, "features.view_image=false");
        }
        TrustLevel::Controlled => {
            args.push("--sandbox=workspace-write".to_owned());
            config(&mut args, "features.shell_tool=false");
        }
        TrustLevel::Unrestricted => args.push("--sandbox=danger-full-access".to_owned()),
    }
    if let Some(endpoint) = endpoint.filter(|url| !url.is_empty()) {
        for setting in provider_settings(endpoint)? {
            config(&mut args, &setting);
        }
    }
    if let Some(model) = &options.model {
        args.push(format!("--model={model}"));
    }
    if let Some(cwd) = &options.cwd {
        args.push(format!("--cd={cwd}"));
    }
    for dir in &options.directories {
        args.push(format!("--add-dir={dir}"));
    }
    if let Some(servers) = &options.mcp_servers {
        for setting in mcp_settings(servers)? {
            config(&mut args, &setting);
        }
    }
    if let Some(effort) = &options.effort {
        if effort.is_empty() || !effort.chars().all(|c| c.is_ascii_lowercase()) {
            return Err(unsupported(
                "codex",
                "--effort",
                "the effort must be a word such as low, medium or high",
            ));
        }
        config(&mut args, &format!("model_reasoning_effort=\"{effort}\""));
    }
    if let Some(system) = &options.system_prompt {
        // A JSON string is a valid TOML basic string: `-c` parses the value
        // as TOML, so the text arrives unchanged whatever it contains.
        let quoted = moat_guest::serde_json::to_string(system)
            .map_err(|error| unsupported("codex", "--system-prompt", &error.to_string()))?;
        config(&mut args, &format!("developer_instructions={quoted}"));
    }
    if let Some(thread) = &options.resume {
        let valid = !thread.is_empty()
            && thread.len() <= MAX_THREAD_ID
            && !thread.starts_with('-')
            && thread
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(unsupported(
                "codex",
                "--resume",
                "the resume token must be a Codex thread id",
            ));
        }
        args.push("resume".to_owned());
        args.push(thread.clone());
    }
    args.push("--".to_owned());
    args.push(prompt.to_owned());
    Ok(Invocation::new(program, args, options))
}

/// The `-c` settings of a provider whose base URL is `endpoint`: the
/// Responses API (the only one Codex speaks), its key from
/// `OPENAI_API_KEY` (the placeholder, with a secret).
fn provider_settings(endpoint: &str) -> Result<Vec<String>, ErrorInfo> {
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(unsupported(
            "codex",
            "OPENAI_BASE_URL",
            "the base URL must start with http:// or https://",
        ));
    }
    // A JSON string is a valid TOML basic string (see the system prompt).
    let quoted = moat_guest::serde_json::to_string(endpoint)
        .map_err(|error| unsupported("codex", "OPENAI_BASE_URL", &error.to_string()))?;
    Ok(vec![
        "model_provider=\"moat\"".to_owned(),
        "model_providers.moat.name=\"OpenAI through moat\"".to_owned(),
        format!("model_providers.moat.base_url={quoted}"),
        "model_providers.moat.wire_api=\"responses\"".to_owned(),
        "model_providers.moat.env_key=\"OPENAI_API_KEY\"".to_owned(),
    ])
}

/// The `-c` settings that give Codex the MCP servers `servers` (the
/// host's `{"NAME": {"command", "args", "env"} | {"url", "headers"}}`), as
/// TOML values (a JSON string or array of strings is one).
fn mcp_settings(servers: &str) -> Result<Vec<String>, ErrorInfo> {
    let servers: Map<String, Value> = moat_guest::json::parse("options.mcp-servers", servers)?;
    let toml_key = |key: &str| {
        if !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            key.to_owned()
        } else {
            Value::from(key).to_string()
        }
    };
    let mut settings = Vec::new();
    for (name, server) in &servers {
        let at = format!("mcp_servers.{}", toml_key(name));
        let strings = |field: &str| -> Vec<(String, String)> {
            server[field]
                .as_object()
                .map(|map| {
                    map.iter()
                        .filter_map(|(k, v)| {
                            Some((toml_key(k), Value::from(v.as_str()?).to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        if let Some(command) = server["command"].as_str() {
            settings.push(format!("{at}.command={}", Value::from(command)));
            let args: Vec<Value> = server["args"]
                .as_array()
                .map(|args| args.iter().filter(|a| a.is_string()).cloned().collect())
                .unwrap_or_default();
            if !args.is_empty() {
                settings.push(format!("{at}.args={}", Value::from(args)));
            }
            for (var, value) in strings("env") {
                settings.push(format!("{at}.env.{var}={value}"));
            }
        } else if let Some(url) = server["url"].as_str() {
            settings.push(format!("{at}.url={}", Value::from(url)));
            for (header, value) in strings("headers") {
                settings.push(format!("{at}.http_headers.{header}={value}"));
            }
        } else {
            return Err(unsupported(
                "codex",
                &format!("MCP server {name}"),
                "a server needs a command or a url",
            ));
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(options: &Options) -> Invocation {
        invocation("fix it", options, None).expect("accepted")
    }

    #[test]
    fn an_openai_base_url_becomes_a_provider_of_its_own_and_a_bad_one_is_refused() {
        let route = "http://127.0.0.1:4000/moat-secret/OPENAI_API_KEY/v1";
        let call = invocation("hi", &Options::default(), Some(route)).expect("accepted");
        for setting in [
            "model_provider=\"moat\"".to_owned(),
            format!("model_providers.moat.base_url=\"{route}\""),
            "model_providers.moat.wire_api=\"responses\"".to_owned(),
            "model_providers.moat.env_key=\"OPENAI_API_KEY\"".to_owned(),
        ] {
            assert!(call.has(&setting), "{setting} in {:?}", call.args);
        }
        let n = call.args.len();
        assert_eq!(&call.args[n - 2..], ["--", "hi"]);
        assert!(
            !run(&Options::default())
                .args
                .iter()
                .any(|a| a.contains("model_provider"))
        );
        let refused = invocation("hi", &Options::default(), Some("file:///etc/passwd"));
        assert!(refused.unwrap_err().message.contains("OPENAI_BASE_URL"));
    }

    #[test]
    fn the_base_command_is_exec_json_with_the_prompt_after_a_separator() {
        let call = run(&Options::default());
        assert_eq!(call.program, "codex");
        assert_eq!(&call.args[..3], ["exec", "--json", "--skip-git-repo-check"]);
        let n = call.args.len();
        assert_eq!(&call.args[n - 2..], ["--", "fix it"]);
        assert!(!call.has("resume"));
    }

    #[test]
    fn trust_levels_map_to_sandbox_modes_and_tool_switches() {
        let sandbox = run(&Options::default());
        assert!(sandbox.has("--sandbox=read-only"));
        assert!(sandbox.has("features.shell_tool=false"));
        assert!(sandbox.has("web_search=\"disabled\""));
        assert!(sandbox.has("features.view_image=false"));
        let controlled = run(&Options {
            trust: TrustLevel::Controlled,
            ..Options::default()
        });
        assert!(controlled.has("--sandbox=workspace-write"));
        assert!(controlled.has("features.shell_tool=false"));
        assert!(!controlled.has("web_search=\"disabled\""));
        let unrestricted = run(&Options {
            trust: TrustLevel::Unrestricted,
            ..Options::default()
        });
        assert!(unrestricted.has("--sandbox=danger-full-access"));
        assert!(!unrestricted.has("features.shell_tool=false"));
    }

    #[test]
    fn options_map_to_switches_and_resume_goes_before_the_prompt() {
        let call = run(&Options {
            model: Some("gpt-5-codex".into()),
            cwd: Some("/repo".into()),
            effort: Some("high".into()),
            system_prompt: Some("Say \"hi\"\nthen stop".into()),
            resume: Some("01a20148-67c3-7e60-88a7-a9584e1f7f1d".into()),
            ..Options::default()
        });
        assert!(call.has("--model=gpt-5-codex"));
        assert!(call.has("--cd=/repo"));
        assert_eq!(call.cwd.as_deref(), Some("/repo"));
        assert!(call.has("model_reasoning_effort=\"high\""));
        assert!(call.has(r#"developer_instructions="Say \"hi\"\nthen stop""#));
        let n = call.args.len();
        assert_eq!(
            &call.args[n - 4..],
            [
                "resume",
                "01a20148-67c3-7e60-88a7-a9584e1f7f1d",
                "--",
                "fix it"
            ]
        );
    }

    #[test]
    fn what_codex_cannot_enforce_is_refused_before_it_starts() {
        let refused = [
            Options {
                max_turns: Some(2),
                ..Options::default()
            },
            Options {
                max_budget_usd: Some(1.0),
                ..Options::default()
            },
            Options {
                allowed_tools: Some(vec!["shell".into()]),
                ..Options::default()
            },
            Options {
                allowed_tools: Some(Vec::new()),
                ..Options::default()
            },
            Options {
                disallowed_tools: vec!["web_search".into()],
                ..Options::default()
            },
            Options {
                resume: Some("--last".into()),
                ..Options::default()
            },
            Options {
                effort: Some("high\nmodel=\"x\"".into()),
                ..Options::default()
            },
            Options {
                extra: Some(r#"{"a":1}"#.into()),
                ..Options::default()
            },
        ];
        moat_cli_support::testing::assert_refused(|p, o| invocation(p, o, None), &refused);
    }

    #[test]
    fn directories_reach_their_switch_and_sub_agents_are_refused() {
        let call = run(&Options {
            directories: vec!["/data".into()],
            ..Options::default()
        });
        assert!(call.has("--add-dir=/data"), "{:?}", call.args);
        let refused = Options {
            agents: Some("{}".into()),
            ..Options::default()
        };
        let error = invocation("x", &refused, None).unwrap_err();
        assert_eq!(
            error.code.as_deref(),
            Some("UNSUPPORTED_OPTION"),
            "{}",
            error.message
        );
    }

    #[test]
    fn mcp_servers_become_config_settings_in_toml() {
        let call = run(&Options {
            mcp_servers: Some(
                r#"{"files":{"command":"npx","args":["-y","fs \"q\""],"env":{"A":"1"}},
                    "docs":{"url":"https://m.example/mcp","headers":{"Authorization":"Bearer t"}}}"#
                    .into(),
            ),
            ..Options::default()
        });
        for setting in [
            r#"mcp_servers.files.command="npx""#,
            r#"mcp_servers.files.args=["-y","fs \"q\""]"#,
            r#"mcp_servers.files.env.A="1""#,
            r#"mcp_servers.docs.url="https://m.example/mcp""#,
            r#"mcp_servers.docs.http_headers.Authorization="Bearer t""#,
        ] {
            let at = call.args.iter().position(|a| a == setting);
            assert!(
                at.is_some_and(|i| call.args[i - 1] == "-c"),
                "{setting} in {:?}",
                call.args
            );
        }
    }
}
