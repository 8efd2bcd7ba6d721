//! What a session said so far, for adapters that keep no session of their
//! own. An agent CLI continues a session by its resume token; an LLM API
//! adapter (openai, anthropic) or echo ends without one, so the session's
//! next prompt carries the conversation before it, as text.

/// The most of the conversation carried into a prompt: the oldest turns
/// go first once it is longer.
const MOST_CARRIED_BYTES: usize = 256 * 1024;

/// A session's turns: each prompt with the answer it got.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    turns: Vec<(String, String)>,
}

impl Transcript {
    /// Adds a finished turn.
    pub fn push(&mut self, prompt: &str, answer: &str) {
        self.turns.push((prompt.to_owned(), answer.to_owned()));
        while self.turns.len() > 1 && self.bytes() > MOST_CARRIED_BYTES {
            self.turns.remove(0);
        }
    }

    /// `prompt` with the conversation before it; `prompt` alone at the
    /// session's first turn.
    pub fn prompt_with(&self, prompt: &str) -> String {
        if self.turns.is_empty() {
            return prompt.to_owned();
        }
        let mut carried = String::from("The conversation so far:\n");
        for (asked, answered) in &self.turns {
            carried.push_str(&format!("\nUser: {asked}\nAssistant: {answered}\n"));
        }
        carried.push_str(&format!("\nUser: {prompt}"));
        carried
    }

    fn bytes(&self) -> usize {
        self.turns.iter().map(|(a, b)| a.len() + b.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_prompt_goes_alone_and_later_ones_carry_the_turns_before_them() {
        let mut transcript = Transcript::default();
        assert_eq!(transcript.prompt_with("one"), "one");
        transcript.push("one", "first answer");
        let second = transcript.prompt_with("two");
        assert!(second.contains("User: one\nAssistant: first answer"));
        assert!(second.ends_with("User: two"));
    }

    #[test]
    fn the_oldest_turns_go_first_when_it_grows_too_long() {
        let mut transcript = Transcript::default();
        let long = "x".repeat(MOST_CARRIED_BYTES / 2);
        transcript.push("old", &long);
        transcript.push("middle", &long);
        transcript.push("new", &long);
        let carried = transcript.prompt_with("now");
        assert!(!carried.contains("User: old"));
        assert!(carried.contains("User: new"));
    }
}
