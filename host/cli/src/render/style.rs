//! Words and colours shared by the human-facing renderers.

use moat_engine::{DoneStatus, ToolStatus, Usage};

/// ANSI styling, on only when writing to a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

pub fn status_word(status: DoneStatus) -> &'static str {
    match status {
        DoneStatus::Success => "success",
        DoneStatus::Error => "error",
        DoneStatus::Interrupted => "interrupted",
        DoneStatus::MaxTurns => "max turns reached",
        DoneStatus::MaxBudget => "max budget reached",
    }
}

pub fn tool_status_word(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Success => "ok",
        ToolStatus::Error => "error",
        ToolStatus::Denied => "denied",
    }
}

/// "3 tool uses · 1200 in / 350 out tokens · $0.0123 (vendor)"; absent
/// numbers are left out, never shown as zero.
pub fn usage_summary(usage: &Usage) -> String {
    let mut parts = vec![format!(
        "{} tool use{}",
        usage.tool_uses,
        if usage.tool_uses == 1 { "" } else { "s" }
    )];
    if let Some(tokens) = &usage.tokens {
        parts.push(format!(
            "{} in / {} out tokens",
            tokens.input.total, tokens.output.total
        ));
    }
    if let Some(cost) = &usage.cost {
        let source = serde_json::to_value(cost.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        parts.push(format!("${:.4} ({source})", cost.usd));
    }
    parts.join(" · ")
}

/// Cuts `text` to `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}
