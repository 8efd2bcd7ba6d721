//! The option → switch mapping, and the refusals.

use super::*;

fn options() -> Options {
    Options::default()
}

fn run(options: &Options) -> Invocation {
    invocation("do it", options, None).expect("accepted")
}

#[test]
fn the_base_command_streams_json_with_partial_messages_and_ends_with_the_prompt() {
    let call = run(&options());
    assert_eq!(call.program, "claude");
    assert_eq!(
        &call.args[..4],
        [
            "-p",
            "--output-format=stream-json",
            "--verbose",
            "--include-partial-messages"
        ]
    );
    let n = call.args.len();
    assert_eq!(&call.args[n - 2..], ["--", "do it"]);
    assert_eq!(
        call.env_var("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"),
        Some("1")
    );
}

#[test]
fn a_prompt_that_looks_like_a_switch_stays_the_prompt() {
    let call = invocation("--dangerously-skip-permissions", &options(), None).unwrap();
    let n = call.args.len();
    assert_eq!(
        &call.args[n - 2..],
        ["--", "--dangerously-skip-permissions"]
    );
}

#[test]
fn run_options_map_to_their_switches() {
    let options = Options {
        model: Some("claude-opus-4".into()),
        resume: Some("abc-123".into()),
        max_turns: Some(3),
        max_budget_usd: Some(0.5),
        effort: Some("high".into()),
        system_prompt: Some("-be brief".into()),
        cwd: Some("/work/project".into()),
        ..Options::default()
    };
    let call = run(&options);
    for arg in [
        "--model=claude-opus-4",
        "--resume=abc-123",
        "--max-turns=3",
        "--max-budget-usd=0.5",
        "--effort=high",
        "--system-prompt=-be brief",
    ] {
        assert!(call.has(arg), "{arg} in {:?}", call.args);
    }
    assert_eq!(call.cwd.as_deref(), Some("/work/project"));
}

#[test]
fn sandbox_trust_offers_no_built_in_tools_and_asks_nothing() {
    let call = run(&options());
    assert!(call.has("--tools="));
    assert!(call.has("--strict-mcp-config"));
    assert!(call.has("--permission-mode=dontAsk"));
    let disallowed = call
        .args
        .iter()
        .find(|a| a.starts_with("--disallowedTools="))
        .unwrap();
    for tool in ["Bash", "Read", "Write", "WebFetch"] {
        assert!(disallowed.contains(tool), "{disallowed}");
    }
}

#[test]
fn controlled_trust_accepts_edits_approves_web_and_disallows_the_shell() {
    let call = run(&Options {
        trust: TrustLevel::Controlled,
        ..options()
    });
    assert!(call.has("--permission-mode=acceptEdits"));
    assert!(call.has("--allowedTools=WebFetch,WebSearch"));
    assert!(call.has(&format!("--disallowedTools={}", SHELL_TOOLS.join(","))));
    assert!(!call.args.iter().any(|a| a.starts_with("--tools=")));
}

#[test]
fn unrestricted_trust_approves_shell_and_web_without_bypassing_permissions() {
    let call = run(&Options {
        trust: TrustLevel::Unrestricted,
        ..options()
    });
    assert!(call.has("--permission-mode=acceptEdits"));
    let allowed = call
        .args
        .iter()
        .find(|a| a.starts_with("--allowedTools="))
        .unwrap();
    assert!(allowed.contains("Bash") && allowed.contains("WebFetch"));
    assert!(
        !call
            .args
            .iter()
            .any(|a| a.contains("bypassPermissions") || a.contains("dangerously"))
    );
    assert!(
        !call
            .args
            .iter()
            .any(|a| a.starts_with("--disallowedTools="))
    );
}

#[test]
fn allowed_tools_are_the_only_tools_and_run_without_asking() {
    let call = run(&Options {
        trust: TrustLevel::Unrestricted,
        allowed_tools: Some(vec!["Bash".into(), "Read".into()]),
        disallowed_tools: vec!["WebFetch".into()],
        ..options()
    });
    assert!(call.has("--tools=Bash,Read"));
    assert!(call.has("--allowedTools=Bash,Read"));
    assert!(call.has("--disallowedTools=WebFetch"));
    assert!(call.has("--strict-mcp-config"));
}

#[test]
fn an_empty_allowed_list_means_no_tools_at_all() {
    let call = run(&Options {
        trust: TrustLevel::Unrestricted,
        allowed_tools: Some(Vec::new()),
        ..options()
    });
    assert!(call.has("--tools="));
    assert!(!call.args.iter().any(|a| a.starts_with("--allowedTools=")));
}

#[test]
fn a_tool_the_trust_level_rules_out_is_refused_not_dropped() {
    let error = invocation(
        "x",
        &Options {
            trust: TrustLevel::Controlled,
            allowed_tools: Some(vec!["Bash".into()]),
            ..options()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(error.code.as_deref(), Some("UNSUPPORTED_OPTION"));
    assert!(error.message.contains("Bash") && error.message.contains("controlled"));
}

#[test]
fn patterns_mcp_tools_bad_budgets_and_extra_options_are_refused() {
    let refused = [
        Options {
            allowed_tools: Some(vec!["Bash(git *)".into()]),
            trust: TrustLevel::Unrestricted,
            ..options()
        },
        Options {
            disallowed_tools: vec!["a,b".into()],
            ..options()
        },
        Options {
            allowed_tools: Some(vec!["mcp__github__create_issue".into()]),
            ..options()
        },
        Options {
            max_budget_usd: Some(f64::NAN),
            ..options()
        },
        Options {
            extra: Some(r#"{"verbose": true}"#.into()),
            ..options()
        },
    ];
    moat_cli_support::testing::assert_refused(|p, o| invocation(p, o, None), &refused);
}

#[test]
fn directories_sub_agents_and_mcp_servers_reach_their_switches() {
    let call = run(&Options {
        directories: vec!["/data".into(), "/docs".into()],
        agents: Some(r#"{"reviewer":{"description":"d","prompt":"p"}}"#.into()),
        ..options()
    });
    assert!(
        call.has("--add-dir=/data") && call.has("--add-dir=/docs"),
        "{:?}",
        call.args
    );
    assert!(call.has(r#"--agents={"reviewer":{"description":"d","prompt":"p"}}"#));
    assert!(!call.args.iter().any(|a| a.starts_with("--mcp-config")));

    // At every trust level: the run's own config only, its tools approved.
    for trust in [TrustLevel::Sandbox, TrustLevel::Unrestricted] {
        let call = run(&Options {
            mcp_servers: Some(r#"{"files":{"command":"npx","args":["-y","fs"]}}"#.into()),
            trust,
            ..options()
        });
        assert!(
            call.has(
                r#"--mcp-config={"mcpServers":{"files":{"args":["-y","fs"],"command":"npx"}}}"#
            ),
            "{:?}",
            call.args
        );
        assert_eq!(
            call.args
                .iter()
                .filter(|a| *a == "--strict-mcp-config")
                .count(),
            1
        );
        let approved = call
            .args
            .iter()
            .find_map(|a| a.strip_prefix("--allowedTools="))
            .unwrap_or_else(|| panic!("{:?}", call.args));
        assert!(approved.split(',').any(|t| t == "mcp__files"), "{approved}");
    }
    let bad = invocation(
        "x",
        &Options {
            mcp_servers: Some("[1]".into()),
            ..options()
        },
        None,
    );
    assert!(bad.unwrap_err().message.contains("mcp-servers"));
}

#[test]
fn a_run_that_asks_sends_claude_codes_permission_prompts_to_moat() {
    let approvals = moat_guest::approvals::Approvals {
        url: "http://127.0.0.1:9/moat-approvals/t/mcp".into(),
        tools: vec!["Bash".into()],
    };
    let call = invocation(
        "x",
        &Options {
            trust: TrustLevel::Unrestricted,
            ..options()
        },
        Some(&approvals),
    )
    .unwrap();
    let arg = |name: &str| {
        call.args
            .iter()
            .find_map(|a| a.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {:?}", call.args))
            .to_owned()
    };
    assert_eq!(arg("--permission-prompt-tool="), "mcp__moat__approve");
    let config: moat_guest::json::Value =
        moat_guest::serde_json::from_str(&arg("--mcp-config=")).unwrap();
    assert_eq!(config["mcpServers"]["moat"]["url"], approvals.url);
    assert_eq!(config["mcpServers"]["moat"]["type"], "http");
    // Bash is asked about, not approved beforehand; its other shell tools
    // still are, and moat's own server's tool is never approved.
    let approved = arg("--allowedTools=");
    assert!(!approved.split(',').any(|t| t == "Bash"), "{approved}");
    assert!(approved.split(',').any(|t| t == "KillShell"), "{approved}");
    assert!(!approved.contains("mcp__moat"), "{approved}");
    assert!(call.env.iter().any(|(name, _)| name == "MCP_TOOL_TIMEOUT"));
    let settings: moat_guest::json::Value =
        moat_guest::serde_json::from_str(&arg("--settings=")).unwrap();
    assert_eq!(settings["permissions"]["ask"][0], "Bash");

    // Asking turns the trust level's refusals into questions: at
    // `controlled` the shell tools are asked about, not disallowed; at
    // `sandbox` every built-in tool exists and is asked about.
    for (trust, mode, asked_too) in [
        (TrustLevel::Controlled, "acceptEdits", "KillShell"),
        (TrustLevel::Sandbox, "default", "Read"),
    ] {
        let call = invocation("x", &Options { trust, ..options() }, Some(&approvals)).unwrap();
        let arg = |name: &str| call.args.iter().find_map(|a| a.strip_prefix(name));
        let settings: moat_guest::json::Value =
            moat_guest::serde_json::from_str(arg("--settings=").unwrap()).unwrap();
        let asked: Vec<&str> = settings["permissions"]["ask"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        assert!(
            asked.contains(&"Bash") && asked.contains(&asked_too),
            "{asked:?}"
        );
        assert!(
            arg("--disallowedTools=").is_none_or(|d| !d.contains("Bash")),
            "{:?}",
            call.args
        );
        assert_eq!(arg("--permission-mode="), Some(mode));
        assert_eq!(arg("--tools="), None, "{:?}", call.args);
    }
    // A server of the user's named like moat's own is refused.
    let taken = invocation(
        "x",
        &Options {
            mcp_servers: Some(r#"{"moat": {"command": "x"}}"#.into()),
            ..options()
        },
        Some(&approvals),
    )
    .unwrap_err();
    assert!(taken.message.contains("moat's own"), "{}", taken.message);
}
