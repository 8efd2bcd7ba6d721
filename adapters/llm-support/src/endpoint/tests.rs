use moat_guest::json::json;

use super::*;
use crate::testing::{VENDOR, endpoint, env_of, options};

#[test]
fn the_base_url_comes_from_options_then_env_then_the_default() {
    let env = env_of(&[
        ("ACME_BASE_URL", "http://localhost:11434/v1/"),
        ("ACME_API_KEY", "sk-1"),
    ]);
    let from_env = Endpoint::resolve(VENDOR, None, &env).unwrap();
    assert_eq!(from_env.url, "http://localhost:11434/v1/complete");
    assert_eq!(from_env.grant, "localhost:11434");
    assert_eq!(from_env.base_source, BaseSource::Env);
    assert_eq!(from_env.source(), "ACME_BASE_URL");
    assert_eq!(from_env.api_key.as_deref(), Some("sk-1"));

    let from_options =
        Endpoint::resolve(VENDOR, Some(" http://127.0.0.1:9/v1 ".into()), &env).unwrap();
    assert_eq!(from_options.url, "http://127.0.0.1:9/v1/complete");
    assert_eq!(from_options.base_source, BaseSource::Options);

    let blank = env_of(&[("ACME_BASE_URL", "  "), ("ACME_API_KEY", " ")]);
    let default = Endpoint::resolve(VENDOR, None, blank).unwrap();
    assert_eq!(default.url, "https://api.acme.test/v1/complete");
    assert_eq!(default.grant, "api.acme.test:443");
    assert_eq!(default.base_source, BaseSource::Default);
    assert_eq!(default.api_key, None, "a blank key is no key");
}

#[test]
fn a_base_url_that_is_not_http_is_refused_naming_its_source() {
    let error =
        Endpoint::resolve(VENDOR, None, env_of(&[("ACME_BASE_URL", "localhost:1")])).unwrap_err();
    assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
    assert!(error.message.contains("ACME_BASE_URL"), "{}", error.message);
}

#[test]
fn a_key_over_plain_http_beyond_loopback_is_flagged() {
    assert!(endpoint("http://gpu-box.lan:8000/v1", Some("k")).key_in_clear());
    assert!(!endpoint("http://gpu-box.lan:8000/v1", None).key_in_clear());
    assert!(!endpoint("https://gpu-box.lan/v1", Some("k")).key_in_clear());
    for local in [
        "http://localhost:11434/v1",
        "http://127.0.0.1:8080/v1",
        "http://[::1]:1/v1",
    ] {
        assert!(!endpoint(local, Some("k")).key_in_clear(), "{local}");
    }
}

#[test]
fn grants_name_host_and_port_as_allow_net_takes_them() {
    assert_eq!(
        grant_of("https://API.example.com/v1").as_deref(),
        Some("api.example.com:443")
    );
    assert_eq!(grant_of("http://h:8080").as_deref(), Some("h:8080"));
    assert_eq!(grant_of("http://[::1]/v1").as_deref(), Some("[::1]:80"));
    assert_eq!(grant_of("http://[::1]:5/v1").as_deref(), Some("[::1]:5"));
    assert_eq!(grant_of("http://u:p@h:1/").as_deref(), Some("h:1"));
    assert_eq!(grant_of("ftp://h"), None);
    assert_eq!(grant_of("localhost:11434"), None);
}

#[test]
fn resume_budget_and_a_missing_model_are_refused_in_the_vendors_words() {
    let resume = Options {
        resume: Some("r".into()),
        ..options(Some("m"), None)
    };
    let error = refuse_unsupported(&VENDOR, &resume).unwrap_err();
    assert_eq!(error.code.as_deref(), Some(UNSUPPORTED_OPTION));
    assert!(error.message.starts_with("the Acme API keeps no session"));
    let budget = Options {
        max_budget_usd: Some(1.0),
        ..options(Some("m"), None)
    };
    let error = refuse_unsupported(&VENDOR, &budget).unwrap_err();
    assert!(
        error.message.contains("the acme adapter"),
        "{}",
        error.message
    );
    assert!(refuse_unsupported(&VENDOR, &options(None, None)).is_ok());
    let with_mcp = Options {
        mcp_servers: Some("{}".into()),
        ..options(Some("m"), None)
    };
    assert!(
        refuse_unsupported(&VENDOR, &with_mcp).is_ok(),
        "MCP servers are the tool loop's"
    );
    for (beyond, words) in [
        (
            Options {
                directories: vec!["/w".into()],
                ..options(Some("m"), None)
            },
            "no files",
        ),
        (
            Options {
                agents: Some("{}".into()),
                ..options(Some("m"), None)
            },
            "no sub-agents",
        ),
    ] {
        let error = refuse_unsupported(&VENDOR, &beyond).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(UNSUPPORTED_OPTION));
        assert!(error.message.contains(words), "{}", error.message);
    }

    let model = require_model(&VENDOR, &options(Some(" m "), None));
    assert_eq!(model.unwrap(), "m");
    for missing in [None, Some("  ")] {
        let error = require_model(&VENDOR, &options(missing, None)).unwrap_err();
        assert_eq!(error.code.as_deref(), Some(INVALID_OPTIONS));
        assert_eq!(
            error.message,
            "the acme adapter needs a model: pass --model (e.g. acme-1)"
        );
    }
}

#[test]
fn base_url_is_taken_out_of_extra_and_reserved_keys_are_refused() {
    let mut extra = Map::new();
    extra.insert("base_url".into(), json!("http://h"));
    extra.insert("temperature".into(), json!(0.5));
    assert_eq!(
        take_base_url(&mut extra).unwrap().as_deref(),
        Some("http://h")
    );
    assert!(!extra.contains_key("base_url"), "not sent to the server");
    assert_eq!(take_base_url(&mut extra).unwrap(), None);
    extra.insert("base_url".into(), json!(1));
    assert!(take_base_url(&mut extra).is_err());

    let reserved = [("system", "use --system")];
    assert!(check_reserved(&extra, &reserved).is_ok());
    extra.insert("system".into(), json!("x"));
    let error = check_reserved(&extra, &reserved).unwrap_err();
    assert_eq!(
        error.message,
        "options.extra.system cannot be set: use --system"
    );
    extra.insert("model".into(), json!("x"));
    let error = check_reserved(&extra, &reserved).unwrap_err();
    assert_eq!(
        error.message,
        "options.extra.model cannot be set: pass the model with --model (options.model)",
        "the shared keys first"
    );
}

#[test]
fn tools_are_kept_by_the_allowed_and_disallowed_lists_and_their_keys_go_with_them() {
    let schema = ToolSchema {
        name_of: |tool| tool.get("name").and_then(Value::as_str),
        nameless: "each tool needs a name",
        with_tools: &["tool_choice"],
    };
    let tools =
        |names: &[&str]| json!(names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>());
    let extra = |names: &[&str]| {
        let mut extra = Map::new();
        extra.insert("tools".into(), tools(names));
        extra.insert("tool_choice".into(), json!("auto"));
        extra
    };
    let run = Options {
        allowed_tools: Some(vec!["read".into(), "bash".into()]),
        disallowed_tools: vec!["bash".into()],
        ..options(Some("m"), None)
    };
    let mut some = extra(&["read", "write", "bash"]);
    assert_eq!(filter_tools(&mut some, &run, &schema).unwrap(), ["read"]);
    assert_eq!(some["tools"], tools(&["read"]));
    assert_eq!(some["tool_choice"], "auto");

    let mut none = extra(&["write"]);
    assert!(filter_tools(&mut none, &run, &schema).unwrap().is_empty());
    assert!(none.is_empty(), "no tools, no tool_choice: {none:?}");

    let mut nameless = Map::new();
    nameless.insert("tools".into(), json!([{"type": "function"}]));
    let error = filter_tools(&mut nameless, &run, &schema).unwrap_err();
    assert_eq!(error.message, "each tool needs a name");
    let mut not_array = Map::new();
    not_array.insert("tools".into(), json!({}));
    assert!(filter_tools(&mut not_array, &run, &schema).is_err());
}
