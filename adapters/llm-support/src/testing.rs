//! Helpers for the LLM adapters' unit tests (native builds only): run
//! options, a fake environment, and a translator fed a recorded stream in
//! chunks of every size that matters.

use moat_guest::json::Value;
use moat_guest::sse::SseParser;
use moat_guest::{DoneEvent, ErrorInfo, Event, EventKind, Options};

use crate::stream::Translate;

/// An environment holding exactly `pairs`, as `Config::new` reads one.
pub fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

/// Run options with `model` and `extra` (as its JSON text), the rest
/// default.
pub fn options(model: Option<&str>, extra: Option<Value>) -> Options {
    Options {
        model: model.map(str::to_owned),
        extra: extra.map(|e| e.to_string()),
        ..Options::default()
    }
}

/// The events of `body` fed to `translator` through the SDK's SSE parser in
/// chunks of `size` bytes, then the end of the body.
pub fn translate_in(mut translator: impl Translate, body: &[u8], size: usize) -> Vec<Event> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for chunk in body.chunks(size) {
        for item in parser.feed(chunk) {
            events.extend(translator.on_event(&item.expect("events are small")));
        }
    }
    if let Some(last) = parser.finish() {
        events.extend(translator.on_event(&last));
    }
    events.extend(translator.end_of_body());
    events
}

/// The events of `body` for a fresh translator from `new`, checked to be
/// the same whole and in chunks of each of `sizes`: the events must not
/// depend on where the network split the stream.
pub fn translate<T: Translate>(new: impl Fn() -> T, body: &[u8], sizes: &[usize]) -> Vec<Event> {
    let whole = translate_in(new(), body, body.len().max(1));
    for &size in sizes {
        assert_eq!(
            translate_in(new(), body, size),
            whole,
            "chunks of {size} bytes"
        );
    }
    whole
}

/// The run's `done`: the last event, and the only `done`.
pub fn done(events: &[Event]) -> &DoneEvent {
    let dones = events.iter().filter(|e| e.is_done()).count();
    assert_eq!(dones, 1, "one done in {events:?}");
    match &events.last().expect("events").kind {
        EventKind::Done(done) => done,
        other => panic!("the last event is {other:?}"),
    }
}

/// The error events' contents, in order.
pub fn errors(events: &[Event]) -> Vec<&ErrorInfo> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Error(error) => Some(error),
            _ => None,
        })
        .collect()
}

/// The `done` event's metadata as JSON (`null` when absent).
pub fn metadata(done: &DoneEvent) -> Value {
    moat_guest::serde_json::from_str(done.metadata.as_deref().unwrap_or("null"))
        .expect("metadata is JSON")
}

/// The text of every `text_delta` event, joined.
pub fn deltas(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta(d) => Some(d.as_str()),
            _ => None,
        })
        .collect()
}

/// A made-up vendor, for tests of the shared code.
pub const VENDOR: crate::Vendor = crate::Vendor {
    adapter: "acme",
    api: "the Acme API",
    key_var: "ACME_API_KEY",
    base_url_var: "ACME_BASE_URL",
    default_base_url: "https://api.acme.test/v1",
    path: "/complete",
    base_url_example: "e.g. http://localhost:8080/v1",
    model_examples: "acme-1",
};

/// The endpoint of [`VENDOR`] at `base` (from its variable), with `key`.
pub fn endpoint(base: &str, key: Option<&str>) -> crate::Endpoint {
    let (base, key) = (base.to_owned(), key.map(str::to_owned));
    crate::Endpoint::resolve(VENDOR, None, move |name| match name {
        "ACME_BASE_URL" => Some(base.clone()),
        "ACME_API_KEY" => key.clone(),
        _ => None,
    })
    .expect("a valid base URL")
}

/// The messages of HTTP 401, 403 and 404 answers (empty bodies) to the
/// request of `config`: the ones that name the vendor's variables.
pub fn status_messages(config: &crate::Config) -> [String; 3] {
    [401, 403, 404].map(|status| {
        crate::status_failure(&config.endpoint, &config.model, status, &[], b"")
            .error
            .message
    })
}

/// The messages of the refusals of a run with a resume token, one with a
/// budget and one without a model, by `configure` (a run's options to its
/// config): the ones that name the vendor's API and adapter.
pub fn refusal_messages(
    configure: impl Fn(&Options) -> Result<crate::Config, ErrorInfo>,
) -> [String; 3] {
    let resume = Options {
        resume: Some("r".into()),
        ..options(Some("m"), None)
    };
    let budget = Options {
        max_budget_usd: Some(1.0),
        ..options(Some("m"), None)
    };
    [resume, budget, options(None, None)].map(|run| match configure(&run) {
        Ok(config) => panic!("{run:?} was accepted: {config:?}"),
        Err(error) => error.message,
    })
}
