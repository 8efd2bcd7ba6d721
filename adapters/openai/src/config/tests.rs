use moat_guest::json::INVALID_OPTIONS;
use moat_llm_support::BaseSource;
use moat_llm_support::testing::{env_of, options, refusal_messages, status_messages};

use super::*;

fn tools_json(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| json!({"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}))
            .collect(),
    )
}

#[test]
fn the_default_is_the_public_api_with_streaming_and_usage() {
    let config = configure("hi", &options(Some("gpt-4o-mini"), None), env_of(&[])).unwrap();
    assert_eq!(
        config.endpoint.url,
        "https://api.openai.com/v1/chat/completions"
    );
    assert_eq!(config.endpoint.grant, DEFAULT_HOST);
    assert_eq!(config.endpoint.base_source, BaseSource::Default);
    assert_eq!(config.endpoint.api_key, None);
    assert_eq!(
        config.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    let request = request(&config);
    assert!(
        !request.headers.iter().any(|(n, _)| n == "authorization"),
        "no key, no header (local servers)"
    );
}

#[test]
fn the_base_url_comes_from_options_then_env_then_the_default() {
    let env = env_of(&[
        (BASE_URL_VAR, "http://localhost:11434/v1/"),
        (KEY_VAR, "sk-1"),
    ]);
    let config = configure("hi", &options(Some("llama3.2"), None), &env).unwrap();
    assert_eq!(
        config.endpoint.url,
        "http://localhost:11434/v1/chat/completions"
    );
    assert_eq!(config.endpoint.grant, "localhost:11434");
    assert_eq!(config.endpoint.base_source, BaseSource::Env);
    let request = request(&config);
    assert!(
        request
            .headers
            .contains(&("authorization".into(), b"Bearer sk-1".to_vec()))
    );

    let extra = json!({"base_url": "http://127.0.0.1:9/v1"});
    let config = configure("hi", &options(Some("m"), Some(extra)), &env).unwrap();
    assert_eq!(
        config.endpoint.url,
        "http://127.0.0.1:9/v1/chat/completions"
    );
    assert_eq!(config.endpoint.base_source, BaseSource::Options);
    assert!(
        config.body.get("base_url").is_none(),
        "not sent to the server"
    );
}

#[test]
fn a_run_without_a_model_or_with_what_chat_completions_cannot_do_is_refused() {
    let error = configure("hi", &options(None, None), env_of(&[])).unwrap_err();
    assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
    assert!(error.message.contains("--model"), "{}", error.message);
    let [resume, budget, _] = refusal_messages(|run| configure("hi", run, env_of(&[])));
    assert!(
        resume.starts_with("Chat Completions keeps no session"),
        "{resume}"
    );
    assert!(
        budget.starts_with("the openai adapter has no price table"),
        "{budget}"
    );
    for extra in [
        json!({"stream": false}),
        json!({"stream_options": {}}),
        json!({"model": "x"}),
        json!({"base_url": 1}),
    ] {
        let error = configure("hi", &options(Some("m"), Some(extra)), env_of(&[])).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
    }
    let bad_base = env_of(&[(BASE_URL_VAR, "localhost:11434")]);
    let error = configure("hi", &options(Some("m"), None), bad_base).unwrap_err();
    assert!(error.message.contains(BASE_URL_VAR), "{}", error.message);
}

#[test]
fn system_prompt_effort_and_extra_fields_reach_the_body() {
    let run = Options {
        system_prompt: Some("be brief".into()),
        effort: Some("low".into()),
        ..options(
            Some("o3"),
            Some(json!({"temperature": 0.2, "max_tokens": 50})),
        )
    };
    let config = configure("hi", &run, env_of(&[])).unwrap();
    assert_eq!(
        config.body["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(config.body["reasoning_effort"], "low");
    assert_eq!(config.body["temperature"], 0.2);
    assert_eq!(config.body["max_tokens"], 50);
}

#[test]
fn tools_are_filtered_by_the_allowed_and_disallowed_lists() {
    let extra = json!({"tools": tools_json(&["read", "write", "shell"]), "tool_choice": "auto"});
    let all = configure("hi", &options(Some("m"), Some(extra.clone())), env_of(&[])).unwrap();
    assert_eq!(all.tools, ["read", "write", "shell"]);
    assert_eq!(all.body["tools"], tools_json(&["read", "write", "shell"]));

    let run = Options {
        allowed_tools: Some(vec!["read".into(), "shell".into()]),
        disallowed_tools: vec!["shell".into()],
        ..options(Some("m"), Some(extra.clone()))
    };
    let some = configure("hi", &run, env_of(&[])).unwrap();
    assert_eq!(some.tools, ["read"]);
    assert_eq!(some.body["tools"], tools_json(&["read"]));
    assert_eq!(some.body["tool_choice"], "auto");

    let none = Options {
        allowed_tools: Some(Vec::new()),
        ..options(
            Some("m"),
            Some(json!({"tools": tools_json(&["read"]), "parallel_tool_calls": false})),
        )
    };
    let none = configure("hi", &none, env_of(&[])).unwrap();
    assert!(none.tools.is_empty());
    assert!(none.body.get("tools").is_none() && none.body.get("parallel_tool_calls").is_none());

    let nameless = json!({"tools": [{"type": "function"}]});
    let error = configure("hi", &options(Some("m"), Some(nameless)), env_of(&[])).unwrap_err();
    assert!(error.message.contains("function.name"), "{}", error.message);
}

#[test]
fn http_failures_name_openais_variables_and_a_local_servers_api_root() {
    let env = env_of(&[(BASE_URL_VAR, "http://127.0.0.1:8080/v1")]);
    let run = configure("hi", &options(Some("gpt-x"), None), env).unwrap();
    let [unauthorized, _, not_found] = status_messages(&run);
    assert!(
        unauthorized.ends_with("OPENAI_API_KEY is not set (or not granted: --allow-env=OPENAI_API_KEY); set it to a valid key"),
        "{unauthorized}"
    );
    assert!(
        not_found.ends_with("check --model `gpt-x`, and that the base URL (from OPENAI_BASE_URL) is the API root, e.g. http://localhost:11434/v1"),
        "{not_found}"
    );
}
