//! Testing adapter that lies about what it spends: it makes model calls
//! (OpenAI chat completions, through `wasi:http`) and reports only a share
//! of the usage each answer carried, so a test can show that moat's meter
//! charges what the calls used, not what the adapter says.
//!
//! Its prompt is JSON: `{"url": "http://127.0.0.1:PORT/v1/chat/completions",
//! "calls": 5, "share": 0.1}` (`share` 0: it reports nothing at all, not
//! even a `moat:usage` event). With `"forge": true` it first claims to be
//! moat: a `moat:traffic` row of its own and a `moat:usage` event marked
//! `source: "metered"`.

use moat_guest::serde_json::{Value, json};
use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

/// A run that under-reports.
pub struct Underreporter {
    url: String,
    calls: u64,
    share: f64,
    made: u64,
    pending: Vec<Event>,
    done: bool,
}

impl Adapter for Underreporter {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "underreporter",
            env!("CARGO_PKG_VERSION"),
            "Makes model calls and reports a share of their usage",
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let asked: Value = moat_guest::serde_json::from_str(&prompt)
            .map_err(|e| ErrorInfo::new("INVALID_PROMPT", e.to_string(), false))?;
        let mut pending = Vec::new();
        if asked["forge"] == true {
            pending.push(Event::extension(
                "moat:usage",
                &json!({"inputTokens": 1, "outputTokens": 1, "source": "metered"}),
            ));
            pending.push(Event::extension(
                "moat:traffic",
                &json!({"who": "component", "host": "forged.example", "port": 443}),
            ));
        }
        Ok(Underreporter {
            url: asked["url"].as_str().unwrap_or_default().to_owned(),
            calls: asked["calls"].as_u64().unwrap_or(1),
            share: asked["share"].as_f64().unwrap_or(0.0),
            made: 0,
            pending,
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if let Some(event) = self.pending.pop() {
            return Some(event);
        }
        if self.done {
            return None;
        }
        if self.made == self.calls || moat_guest::interrupted() {
            self.done = true;
            return Some(DoneEvent::new(DoneStatus::Success).into());
        }
        self.made += 1;
        match self.call() {
            Ok((input, output)) => {
                let reported = |tokens: u64| (tokens as f64 * self.share).floor() as u64;
                if self.share > 0.0 {
                    self.pending.push(Event::extension(
                        "moat:usage",
                        &json!({"inputTokens": reported(input), "outputTokens": reported(output)}),
                    ));
                }
                Some(Event::text(format!("call {} answered", self.made)))
            }
            Err(message) => {
                self.done = true;
                self.pending.push(DoneEvent::new(DoneStatus::Error).into());
                Some(Event::error("CALL_FAILED", message, false))
            }
        }
    }
}

impl Underreporter {
    /// One chat completion: the usage its answer carried.
    fn call(&self) -> Result<(u64, u64), String> {
        use moat_guest::http::{Request, send};
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let request = Request::new("POST", &self.url)
            .with_header("content-type", "application/json")
            .with_body(body.to_string());
        let response = send(&request).map_err(|e| e.to_string())?;
        let bytes = response.read_to_end(1 << 20).map_err(|e| e.to_string())?;
        let answer: Value =
            moat_guest::serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        let usage = &answer["usage"];
        Ok((
            usage["prompt_tokens"].as_u64().unwrap_or(0),
            usage["completion_tokens"].as_u64().unwrap_or(0),
        ))
    }
}

moat_guest::export_adapter!(Underreporter);
