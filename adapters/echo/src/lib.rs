//! The `echo` adapter: streams the prompt back.
//!
//! Built into the `moat` binary (`moat run echo "hi"`), and the example of
//! the adapter authoring guide (docs/adapter-authoring.md). It has no
//! backend: it needs nothing from the host and reports no tokens.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options, Usage};

/// One echo run: the events still to send, prepared up front.
pub struct Echo {
    pending: VecDeque<Event>,
    done: bool,
}

impl Adapter for Echo {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "echo",
            env!("CARGO_PKG_VERSION"),
            "Streams the prompt back; needs nothing",
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let mut pending = VecDeque::new();
        pending.push_back(Event::init(
            Some("echo"),
            options.cwd.as_deref(),
            Vec::new(),
        ));
        pending.extend(words(&prompt).map(Event::text_delta));
        pending.push_back(Event::text(prompt.as_str()));
        // Honest usage: no tool calls, and no tokens to report.
        let done = DoneEvent::new(DoneStatus::Success)
            .with_result(prompt)
            .with_usage(Usage::new(0));
        pending.push_back(done.into());
        Ok(Echo {
            pending,
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if self.done {
            return None;
        }
        if moat_guest::interrupted() {
            self.done = true;
            return Some(Event::done(DoneStatus::Interrupted));
        }
        let event = self.pending.pop_front()?;
        self.done = event.is_done();
        Some(event)
    }

    /// The events are prepared up front: the host takes them together.
    fn ready(&self) -> bool {
        !self.done && !self.pending.is_empty()
    }
}

moat_guest::export_adapter!(Echo);

/// Splits `text` into words, each keeping the whitespace that follows it,
/// so the pieces concatenate back to `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let space_end = rest[word_end..]
            .find(|c: char| !c.is_whitespace())
            .map_or(rest.len(), |offset| word_end + offset);
        let (word, tail) = rest.split_at(space_end);
        rest = tail;
        Some(word)
    })
}

#[cfg(test)]
mod tests;
