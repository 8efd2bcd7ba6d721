use moat_guest::json::INVALID_OPTIONS;
use moat_llm_support::BaseSource;
use moat_llm_support::testing::{env_of, options, refusal_messages, status_messages};

use super::*;

fn tools_json(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| json!({"name": n, "input_schema": {"type": "object"}}))
            .collect(),
    )
}

#[test]
fn the_default_is_the_public_api_streaming_with_a_max_tokens() {
    let env = env_of(&[(KEY_VAR, "sk-ant-1")]);
    let config = configure("hi", &options(Some("claude-x"), None), env).unwrap();
    assert_eq!(config.endpoint.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(config.endpoint.grant, DEFAULT_HOST);
    assert_eq!(
        config.body,
        json!({
            "model": "claude-x",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": true,
        })
    );
    let request = request(&config);
    assert!(
        request
            .headers
            .contains(&("x-api-key".into(), b"sk-ant-1".to_vec()))
    );
    assert!(
        request
            .headers
            .contains(&("anthropic-version".into(), API_VERSION.as_bytes().to_vec()))
    );
}

#[test]
fn the_base_url_comes_from_options_then_env_then_the_default() {
    let env = env_of(&[(BASE_URL_VAR, "http://127.0.0.1:4000/")]);
    let config = configure("hi", &options(Some("m"), None), &env).unwrap();
    assert_eq!(config.endpoint.url, "http://127.0.0.1:4000/v1/messages");
    assert_eq!(config.endpoint.grant, "127.0.0.1:4000");
    assert_eq!(config.endpoint.base_source, BaseSource::Env);
    assert!(
        !request(&config)
            .headers
            .iter()
            .any(|(n, _)| n == "x-api-key"),
        "no key, no header"
    );
    let extra = json!({"base_url": "http://localhost:9"});
    let config = configure("hi", &options(Some("m"), Some(extra)), &env).unwrap();
    assert_eq!(config.endpoint.url, "http://localhost:9/v1/messages");
    assert_eq!(config.endpoint.base_source, BaseSource::Options);
}

#[test]
fn system_prompt_and_extra_fields_reach_the_body_and_extra_wins_for_max_tokens() {
    let run = Options {
        system_prompt: Some("be brief".into()),
        ..options(
            Some("m"),
            Some(json!({"max_tokens": 100, "thinking": {"type": "enabled", "budget_tokens": 50}})),
        )
    };
    let config = configure("hi", &run, env_of(&[])).unwrap();
    assert_eq!(config.body["system"], "be brief");
    assert_eq!(config.body["max_tokens"], 100);
    assert_eq!(config.body["thinking"]["budget_tokens"], 50);
}

#[test]
fn what_the_messages_api_cannot_honour_is_refused() {
    assert!(configure("hi", &options(None, None), env_of(&[])).is_err());
    let effort = Options {
        effort: Some("high".into()),
        ..options(Some("m"), None)
    };
    let error = configure("hi", &effort, env_of(&[])).unwrap_err();
    assert_eq!(error.code.as_deref(), Some(UNSUPPORTED_OPTION));
    let resume = Options {
        resume: Some("r".into()),
        ..options(Some("m"), None)
    };
    assert!(configure("hi", &resume, env_of(&[])).is_err());
    for extra in [
        json!({"system": "x"}),
        json!({"stream": false}),
        json!({"messages": []}),
    ] {
        let error = configure("hi", &options(Some("m"), Some(extra)), env_of(&[])).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
    }
}

#[test]
fn tools_are_filtered_by_the_allowed_and_disallowed_lists() {
    let extra =
        json!({"tools": tools_json(&["read", "write", "bash"]), "tool_choice": {"type": "auto"}});
    let run = Options {
        allowed_tools: Some(vec!["read".into(), "bash".into()]),
        disallowed_tools: vec!["bash".into()],
        ..options(Some("m"), Some(extra.clone()))
    };
    let config = configure("hi", &run, env_of(&[])).unwrap();
    assert_eq!(config.tools, ["read"]);
    assert_eq!(config.body["tools"], tools_json(&["read"]));
    let none = Options {
        allowed_tools: Some(Vec::new()),
        ..options(Some("m"), Some(extra))
    };
    let config = configure("hi", &none, env_of(&[])).unwrap();
    assert!(config.body.get("tools").is_none() && config.body.get("tool_choice").is_none());
}

#[test]
fn http_failures_name_anthropics_variables_and_an_api_root_without_v1() {
    let granted = [(BASE_URL_VAR, "http://127.0.0.1:8080"), (KEY_VAR, "sk-ant")];
    let run = configure("hi", &options(Some("claude-x"), None), env_of(&granted)).unwrap();
    let [unauthorized, forbidden, not_found] = status_messages(&run);
    assert!(
        unauthorized.ends_with("; check the key in ANTHROPIC_API_KEY"),
        "{unauthorized}"
    );
    assert!(
        forbidden.ends_with("the key in ANTHROPIC_API_KEY may lack access to model `claude-x`"),
        "{forbidden}"
    );
    assert!(
        not_found.ends_with(
            "(from ANTHROPIC_BASE_URL) is the API root, without /v1, e.g. https://api.anthropic.com"
        ),
        "{not_found}"
    );
}

#[test]
fn refusals_name_the_messages_api_and_the_anthropic_adapter() {
    let [resume, budget, model] = refusal_messages(|run| configure("hi", run, env_of(&[])));
    assert!(
        resume.starts_with("the Messages API keeps no session"),
        "{resume}"
    );
    assert!(budget.contains("the anthropic adapter"), "{budget}");
    assert!(model.contains("claude-sonnet-4-5"), "{model}");
}
