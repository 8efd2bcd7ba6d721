//! A run's traffic as its events recorded it: the `moat:traffic` rows
//! (every request and connection it made through moat), and its model
//! calls' usage as moat's meter read it beside what the adapter reported
//! (`moat:usage` events by `source`, and the `done`'s totals).

use moat_engine::{EventPayload, METERED_SOURCE, TRAFFIC_EVENT, USAGE_EVENT};
use serde::Serialize;
use serde_json::Value;

use crate::{RunId, Runs, RunsError};

/// What one source says a run's model calls used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageCount {
    /// Model calls.
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Calls whose usage it could not say (a tunnel, an answer without
    /// usage).
    #[serde(skip_serializing_if = "is_zero")]
    pub usage_unknown: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageCount {
    /// Input and output tokens.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    fn add(&mut self, payload: &Value) {
        self.calls += 1;
        self.input_tokens = self
            .input_tokens
            .saturating_add(payload["inputTokens"].as_u64().unwrap_or(0));
        self.output_tokens = self
            .output_tokens
            .saturating_add(payload["outputTokens"].as_u64().unwrap_or(0));
        if payload["usageUnknown"] == true {
            self.usage_unknown += 1;
        }
    }
}

/// A run's traffic and how its usage was counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTraffic {
    /// Its rows, oldest first (`moat:traffic` payloads).
    pub rows: Vec<Value>,
    /// What it did past the rows kept, per destination, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Value>,
    /// Its model calls as moat's meter read them.
    pub metered: UsageCount,
    /// Its model calls as its adapter reported them (per call, or only in
    /// its `done`).
    pub reported: UsageCount,
}

/// Run `id`'s traffic, from its stored events.
pub async fn traffic(runs: &dyn Runs, id: &RunId) -> Result<RunTraffic, RunsError> {
    let mut traffic = RunTraffic::default();
    crate::result::each_stored(runs, id, |stored| {
        // Only the events that count are parsed.
        let wanted =
            stored.done || stored.json.contains(TRAFFIC_EVENT) || stored.json.contains(USAGE_EVENT);
        if let Some(event) = wanted.then(|| stored.event()).flatten() {
            traffic.observe(&event.payload);
        }
    })
    .await?;
    Ok(traffic)
}

impl RunTraffic {
    fn observe(&mut self, payload: &EventPayload) {
        match payload {
            EventPayload::Extension(extension) if extension.name == TRAFFIC_EVENT => {
                if extension.payload.get("overflow").is_some() {
                    self.overflow = Some(extension.payload["overflow"].clone());
                } else {
                    self.rows.push(extension.payload.clone());
                }
            }
            EventPayload::Extension(extension) if extension.name == USAGE_EVENT => {
                if extension.payload["source"] == METERED_SOURCE {
                    self.metered.add(&extension.payload);
                } else {
                    self.reported.add(&extension.payload);
                }
            }
            // A backend that reports its usage only at its end.
            EventPayload::Done(done) => {
                if let Some(tokens) = &done.usage.tokens {
                    let reported = &mut self.reported;
                    reported.input_tokens = reported.input_tokens.max(tokens.input.total);
                    reported.output_tokens = reported.output_tokens.max(tokens.output.total);
                }
            }
            _ => {}
        }
    }
}
