//! What an answer says it used, and how the values read from its
//! documents add up to that.

use serde_json::Value;

use crate::Vendor;

/// What one call used, as far as its answer said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The tokens the model read: the prompt, cached parts included.
    pub input_tokens: u64,
    /// The tokens the model wrote, reasoning included.
    pub output_tokens: u64,
}

impl Usage {
    /// Input and output together (saturating: a number no answer can
    /// overflow into a small one).
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// What one answer said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// The model the answer names (bounded to 200 chars, control chars
    /// dropped); None when it named none.
    pub model: Option<String>,
    /// Its usage; None when the answer carried none that could be read (a
    /// stream without usage, an error page, a compressed body, garbage).
    pub usage: Option<Usage>,
}

/// The longest model name kept, in characters.
const MODEL_CHARS: usize = 200;

/// The longest raw model value remembered to skip re-reading a repeated
/// name (a chat stream names its model in every chunk).
const MODEL_RAW_KEPT: usize = 1024;

/// A count the vendor reports, by the names it may go by (the first
/// present wins).
type Field = &'static [&'static str];

/// How a vendor spells its usage: the counts that add up to the input,
/// then those that add up to the output.
struct Spelling {
    input: &'static [Field],
    output: &'static [Field],
}

const OPENAI: Spelling = Spelling {
    // Chat and legacy completions say prompt/completion; the Responses
    // API says input/output. Cached and reasoning tokens are subsets.
    input: &[&["prompt_tokens", "input_tokens"]],
    output: &[&["completion_tokens", "output_tokens"]],
};

const ANTHROPIC: Spelling = Spelling {
    // Anthropic's input_tokens leaves out what the cache wrote and read;
    // both are billed input.
    input: &[
        &["input_tokens"],
        &["cache_creation_input_tokens"],
        &["cache_read_input_tokens"],
    ],
    output: &[&["output_tokens"]],
};

const GEMINI: Spelling = Spelling {
    // promptTokenCount holds the cached part; the prompt a tool's result
    // added and the model's thoughts are counted apart, and billed.
    input: &[&["promptTokenCount"], &["toolUsePromptTokenCount"]],
    output: &[&["candidatesTokenCount"], &["thoughtsTokenCount"]],
};

/// The most counts a spelling has.
const PARTS: usize = 4;

fn spelling(vendor: Vendor) -> &'static Spelling {
    match vendor {
        Vendor::OpenAi => &OPENAI,
        Vendor::Anthropic => &ANTHROPIC,
        Vendor::Gemini => &GEMINI,
    }
}

/// Which value a capture holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A usage object.
    Usage,
    /// A model's name.
    Model,
}

/// The usage and model read so far from one answer's documents.
#[derive(Debug)]
pub(crate) struct Tally {
    vendor: Vendor,
    /// Each count of the vendor's spelling (inputs, then outputs): the
    /// largest seen, since streams repeat counts cumulatively.
    parts: [Option<u64>; PARTS],
    model: Option<String>,
    /// The last model value as it came, to skip reading it again.
    model_raw: Vec<u8>,
}

impl Tally {
    pub(crate) fn new(vendor: Vendor) -> Self {
        Tally {
            vendor,
            parts: [None; PARTS],
            model: None,
            model_raw: Vec::new(),
        }
    }

    /// Takes one captured value (its raw JSON bytes).
    pub(crate) fn take(&mut self, kind: Kind, raw: &[u8]) {
        match kind {
            Kind::Usage => self.take_usage(raw),
            Kind::Model => self.take_model(raw),
        }
    }

    fn take_usage(&mut self, raw: &[u8]) {
        if raw.first() != Some(&b'{') {
            // `"usage": null` before the stream ends, and the like.
            return;
        }
        let Ok(Value::Object(usage)) = serde_json::from_slice::<Value>(raw) else {
            return;
        };
        let spelling = spelling(self.vendor);
        let fields = spelling.input.iter().chain(spelling.output);
        for (part, names) in self.parts.iter_mut().zip(fields) {
            let count = names
                .iter()
                .find_map(|name| usage.get(*name).and_then(Value::as_u64));
            if let Some(count) = count {
                *part = Some(part.map_or(count, |seen| seen.max(count)));
            }
        }
    }

    fn take_model(&mut self, raw: &[u8]) {
        if raw.first() != Some(&b'"') || raw == self.model_raw.as_slice() {
            return;
        }
        let Ok(name) = serde_json::from_slice::<String>(raw) else {
            return;
        };
        let name: String = name
            .chars()
            .filter(|c| !c.is_control())
            .take(MODEL_CHARS)
            .collect();
        if name.is_empty() {
            return;
        }
        self.model = Some(name);
        self.model_raw.clear();
        if raw.len() <= MODEL_RAW_KEPT {
            self.model_raw.extend_from_slice(raw);
        }
    }

    /// What has been read so far.
    pub(crate) fn reading(&self) -> Reading {
        let spelling = spelling(self.vendor);
        let (input, output) = self.parts.split_at(spelling.input.len());
        let output = &output[..spelling.output.len()];
        let sum = |parts: &[Option<u64>]| {
            parts
                .iter()
                .flatten()
                .fold(0u64, |sum, count| sum.saturating_add(*count))
        };
        let usage = self.parts.iter().any(Option::is_some).then(|| Usage {
            input_tokens: sum(input),
            output_tokens: sum(output),
        });
        Reading {
            model: self.model.clone(),
            usage,
        }
    }

    /// The bytes it holds on the heap.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.model_raw.capacity() + self.model.as_ref().map_or(0, String::capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vendor: Vendor, takes: &[(Kind, &str)]) -> Reading {
        let mut tally = Tally::new(vendor);
        for (kind, raw) in takes {
            tally.take(*kind, raw.as_bytes());
        }
        tally.reading()
    }

    fn usage(input_tokens: u64, output_tokens: u64) -> Option<Usage> {
        Some(Usage {
            input_tokens,
            output_tokens,
        })
    }

    #[test]
    fn spellings_fit() {
        for vendor in Vendor::ALL {
            let spelling = spelling(vendor);
            assert!(spelling.input.len() + spelling.output.len() <= PARTS);
        }
    }

    #[test]
    fn openai_both_spellings() {
        let chat = r#"{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}"#;
        let responses =
            r#"{"input_tokens":7,"output_tokens":2,"input_tokens_details":{"cached_tokens":4}}"#;
        assert_eq!(
            read(Vendor::OpenAi, &[(Kind::Usage, chat)]).usage,
            usage(10, 3)
        );
        assert_eq!(
            read(Vendor::OpenAi, &[(Kind::Usage, responses)]).usage,
            usage(7, 2)
        );
    }

    #[test]
    fn anthropic_merges_each_count() {
        let start = r#"{"input_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":20,"output_tokens":1}"#;
        let delta = r#"{"output_tokens":42}"#;
        assert_eq!(
            read(
                Vendor::Anthropic,
                &[(Kind::Usage, start), (Kind::Usage, delta)]
            )
            .usage,
            usage(125, 42)
        );
    }

    #[test]
    fn gemini_adds_thoughts() {
        let chunk = r#"{"promptTokenCount":8,"candidatesTokenCount":4,"thoughtsTokenCount":30,"totalTokenCount":42}"#;
        assert_eq!(
            read(Vendor::Gemini, &[(Kind::Usage, chunk)]).usage,
            usage(8, 34)
        );
    }

    #[test]
    fn unreadable_counts_are_no_usage() {
        for raw in [
            "null",
            "{}",
            r#"{"total_tokens":5}"#,
            r#"{"prompt_tokens":-1,"completion_tokens":2.5}"#,
            r#"{"prompt_tokens":"10"}"#,
            r#"{"prompt_tokens":1"#,
            "[1,2]",
        ] {
            assert_eq!(
                read(Vendor::OpenAi, &[(Kind::Usage, raw)]).usage,
                None,
                "{raw}"
            );
        }
        // Another vendor's spelling is not this one's.
        let gemini = r#"{"promptTokenCount":8}"#;
        assert_eq!(read(Vendor::OpenAi, &[(Kind::Usage, gemini)]).usage, None);
    }

    #[test]
    fn totals_saturate() {
        let huge = format!(
            r#"{{"prompt_tokens":{m},"completion_tokens":{m}}}"#,
            m = u64::MAX
        );
        let got = read(Vendor::OpenAi, &[(Kind::Usage, &huge)]).usage;
        assert_eq!(got.map(|u| u.total()), Some(u64::MAX));
        let anthropic = format!(
            r#"{{"input_tokens":{m},"cache_read_input_tokens":{m}}}"#,
            m = u64::MAX
        );
        let got = read(Vendor::Anthropic, &[(Kind::Usage, &anthropic)]).usage;
        assert_eq!(got, usage(u64::MAX, 0));
    }

    #[test]
    fn model_names_are_cleaned_and_last_wins() {
        let got = read(
            Vendor::OpenAi,
            &[
                (Kind::Model, r#""gpt-4o""#),
                (Kind::Model, "null"),
                (Kind::Model, r#""""#),
                (Kind::Model, r#""gpt-\u001b[31m4o-mini\n""#),
                (Kind::Model, r#""bad \q escape""#),
            ],
        );
        assert_eq!(got.model.as_deref(), Some("gpt-[31m4o-mini"));
        let long = format!("\"{}\"", "é".repeat(500));
        let got = read(Vendor::OpenAi, &[(Kind::Model, &long)]);
        assert_eq!(got.model.map(|m| m.chars().count()), Some(200));
    }
}
