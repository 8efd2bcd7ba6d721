//! A run's usage over its model calls: the `done` of a run that made
//! several reports the sum, never one call's figures.

use moat_guest::json::{Map, Value, json};
use moat_guest::{
    DoneEvent, InputTokens, OutputTokens, TURNS_METADATA_KEY, TokenCoverage, TokenReport,
};

/// The usage of the model calls so far.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    /// Model calls answered (each a turn).
    pub turns: u32,
    /// Tool calls the model made.
    pub tool_uses: u32,
    /// The tokens of the calls that reported them.
    tokens: Option<TokenReport>,
    /// Some call reported no tokens, or only part of them.
    incomplete: bool,
}

impl Tally {
    /// Counts one model call, whose answer (or failure) ended with `done`.
    pub fn add(&mut self, done: &DoneEvent) {
        self.turns += 1;
        self.tool_uses = self.tool_uses.saturating_add(done.usage.tool_uses);
        match &done.usage.tokens {
            None => self.incomplete = true,
            Some(report) => {
                if report.coverage == TokenCoverage::Partial {
                    self.incomplete = true;
                }
                self.tokens = Some(match &self.tokens {
                    None => *report,
                    Some(sum) => add_reports(sum, report),
                });
            }
        }
    }

    /// Counts a model call that got no answer (the run was interrupted
    /// while it was under way): its tool calls so far, and tokens that are
    /// now unknown.
    pub fn unanswered(&mut self, done: &DoneEvent) {
        self.tool_uses = self.tool_uses.saturating_add(done.usage.tool_uses);
        self.incomplete = true;
    }

    /// `done` (the last call's) rewritten to report the whole run: the
    /// tool calls and tokens of every call, the tokens marked partial when
    /// some call reported none, and the answered calls as turns in its
    /// metadata. Before any answer, `done` is left as it is.
    pub fn apply(&self, mut done: DoneEvent) -> DoneEvent {
        if self.turns == 0 {
            return done;
        }
        done.usage.tool_uses = self.tool_uses;
        done.usage.tokens = self.tokens.map(|mut report| {
            if self.incomplete {
                report.coverage = TokenCoverage::Partial;
            }
            report
        });
        let mut metadata: Map<String, Value> = done
            .metadata
            .as_deref()
            .and_then(|text| moat_guest::serde_json::from_str(text).ok())
            .unwrap_or_default();
        metadata.insert(TURNS_METADATA_KEY.into(), json!(self.turns));
        done.with_metadata(&Value::Object(metadata))
    }
}

/// The sum of two reports; a detail is kept only when both have it (an
/// unknown part makes the sum unknown).
fn add_reports(a: &TokenReport, b: &TokenReport) -> TokenReport {
    let both = |x: Option<u64>, y: Option<u64>| Some(x?.saturating_add(y?));
    let input = InputTokens {
        total: a.input.total.saturating_add(b.input.total),
        cache_read: both(a.input.cache_read, b.input.cache_read),
        cache_write: both(a.input.cache_write, b.input.cache_write),
    };
    let output = OutputTokens {
        total: a.output.total.saturating_add(b.output.total),
        reasoning: both(a.output.reasoning, b.output.reasoning),
    };
    let coverage = if a.coverage == TokenCoverage::Complete && b.coverage == TokenCoverage::Complete
    {
        TokenCoverage::Complete
    } else {
        TokenCoverage::Partial
    };
    TokenReport {
        coverage,
        input,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_guest::{DoneStatus, Usage};

    fn done_with(tokens: Option<TokenReport>, tool_uses: u32) -> DoneEvent {
        let mut usage = Usage::new(tool_uses);
        if let Some(tokens) = tokens {
            usage = usage.with_tokens(tokens);
        }
        DoneEvent::new(DoneStatus::Success).with_usage(usage)
    }

    fn report(input: u64, cache_read: Option<u64>, output: u64) -> TokenReport {
        let mut input = InputTokens::new(input);
        if let Some(n) = cache_read {
            input = input.with_cache_read(n);
        }
        TokenReport::new(TokenCoverage::Complete, input, OutputTokens::new(output))
    }

    #[test]
    fn one_call_is_reported_as_it_was() {
        let mut tally = Tally::default();
        let done = done_with(Some(report(10, Some(2), 5)), 1)
            .with_metadata(&json!({"turns": 1, "finishReason": "stop"}));
        tally.add(&done);
        assert_eq!(tally.apply(done.clone()), done);
    }

    #[test]
    fn several_calls_are_summed_and_counted_as_turns() {
        let mut tally = Tally::default();
        tally.add(&done_with(Some(report(10, Some(2), 5)), 2));
        let last = done_with(Some(report(30, Some(20), 7)), 0)
            .with_metadata(&json!({"turns": 1, "finishReason": "stop"}));
        tally.add(&last);
        let done = tally.apply(last);
        assert_eq!(done.usage.tool_uses, 2);
        let tokens = done.usage.tokens.unwrap();
        assert_eq!(tokens.coverage, TokenCoverage::Complete);
        assert_eq!((tokens.input.total, tokens.output.total), (40, 12));
        assert_eq!(tokens.input.cache_read, Some(22));
        assert_eq!(tokens.input.cache_write, None, "never reported: unknown");
        let metadata: Value = serde_json_of(&done);
        assert_eq!(metadata["turns"], 2);
        assert_eq!(metadata["finishReason"], "stop", "the rest kept");
    }

    #[test]
    fn a_call_without_tokens_makes_the_sum_partial_and_a_detail_missing_once_unknown() {
        let mut tally = Tally::default();
        tally.add(&done_with(Some(report(10, Some(2), 5)), 1));
        tally.add(&done_with(Some(report(10, None, 5)), 1));
        tally.add(&done_with(None, 0));
        let done = tally.apply(done_with(None, 0));
        let tokens = done.usage.tokens.unwrap();
        assert_eq!(tokens.coverage, TokenCoverage::Partial);
        assert_eq!(tokens.input.total, 20);
        assert_eq!(tokens.input.cache_read, None);

        let mut none = Tally::default();
        none.add(&done_with(None, 1));
        none.add(&done_with(None, 0));
        assert_eq!(none.apply(done_with(None, 0)).usage.tokens, None);
    }

    fn serde_json_of(done: &DoneEvent) -> Value {
        moat_guest::serde_json::from_str(done.metadata.as_deref().unwrap()).unwrap()
    }
}
