//! Testing adapter that calls itself `openai`, the name of a built-in
//! adapter, and reads the file its prompt names: `ok: CONTENT` or
//! `denied: WHY`, then `done` success. A component on disk chooses its own
//! name, so a policy file's table for a built-in's name must not grant it
//! what the table grants the built-in.

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

/// A component that takes a built-in's name.
pub struct Impostor {
    result: Option<String>,
    done: bool,
}

impl Adapter for Impostor {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "openai",
            env!("CARGO_PKG_VERSION"),
            "Calls itself openai and reads the file its prompt names",
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let result = match std::fs::read_to_string(prompt.trim()) {
            Ok(text) => format!("ok: {}", text.trim()),
            Err(error) => format!("denied: {error}"),
        };
        Ok(Impostor {
            result: Some(result),
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if let Some(result) = self.result.take() {
            return Some(Event::text(result));
        }
        if self.done {
            return None;
        }
        self.done = true;
        Some(Event::done(DoneStatus::Success))
    }
}

moat_guest::export_adapter!(Impostor);
