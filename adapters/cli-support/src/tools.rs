//! Tool-call bookkeeping: names by id, distinct calls.

use std::collections::HashMap;

/// The most tool calls remembered by id; later ones still count.
const MAX_TRACKED: usize = 10_000;

/// The longest tool name or id kept.
const MAX_NAME: usize = 512;

/// Remembers the tool calls of a run: which name each id had, and how many
/// distinct calls there were (the `toolUses` of `done`).
#[derive(Debug, Default)]
pub struct ToolTracker {
    names: HashMap<String, String>,
    distinct: u32,
}

impl ToolTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a call of `name` with `id`; returns `false` when the id was
    /// already recorded (the CLI repeated it).
    pub fn record(&mut self, id: &str, name: &str) -> bool {
        if self.names.contains_key(id) {
            return false;
        }
        self.distinct = self.distinct.saturating_add(1);
        if self.names.len() < MAX_TRACKED {
            self.names.insert(
                crate::clip(id, MAX_NAME).to_owned(),
                crate::clip(name, MAX_NAME).to_owned(),
            );
        }
        true
    }

    /// Whether a call with `id` was recorded.
    pub fn seen(&self, id: &str) -> bool {
        self.names.contains_key(id)
    }

    /// The name of call `id`; `"unknown"` for an id never recorded.
    pub fn name(&self, id: &str) -> &str {
        self.names.get(id).map_or("unknown", String::as_str)
    }

    /// The number of distinct calls.
    pub fn count(&self) -> u32 {
        self.distinct
    }
}
