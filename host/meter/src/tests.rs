//! The reader end to end: the vendors' answers as they come over the
//! wire, in every chunking, and answers built to exhaust it.

use proptest::prelude::*;

use crate::fixtures::*;
use crate::scan::MAX_CAPTURE;
use crate::{Reading, Usage, UsageReader, Vendor};

/// A reader's heap never grows past this, whatever it is fed.
const HELD_BOUND: usize = MAX_CAPTURE + 8 * 1024;

/// A small deterministic generator (xorshift), for chunk sizes.
struct Splitter(u64);

impl Splitter {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % below as u64).unwrap_or(0)
    }
}

fn reader(vendor: Vendor, content_type: &str) -> UsageReader {
    UsageReader::new(vendor, Some(content_type.as_bytes()), None)
}

/// `body` read whole, byte by byte and in random splits: the same reading
/// every time, which is returned.
fn read(vendor: Vendor, content_type: &str, body: &[u8]) -> Reading {
    let mut whole = reader(vendor, content_type);
    whole.feed(body);
    let reading = whole.reading();

    let mut bytewise = reader(vendor, content_type);
    for byte in body.chunks(1) {
        bytewise.feed(byte);
    }
    assert_eq!(bytewise.reading(), reading, "byte by byte");

    for seed in 1..=20u64 {
        let mut splitter = Splitter(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut split = reader(vendor, content_type);
        let mut rest = body;
        while !rest.is_empty() {
            let size = 1 + splitter.next(rest.len().min(64));
            let (chunk, tail) = rest.split_at(size);
            split.feed(chunk);
            split.feed(&[]);
            rest = tail;
        }
        assert_eq!(split.reading(), reading, "split with seed {seed}");
    }
    reading
}

fn reading(model: &str, usage: Option<(u64, u64)>) -> Reading {
    Reading {
        model: Some(model.to_owned()),
        usage: usage.map(|(input_tokens, output_tokens)| Usage {
            input_tokens,
            output_tokens,
        }),
    }
}

#[test]
fn openai_chat() {
    assert_eq!(
        read(Vendor::OpenAi, JSON, OPENAI_CHAT),
        reading("gpt-4.1-2025-04-14", Some((82, 17)))
    );
}

#[test]
fn openai_chat_stream_with_usage() {
    assert_eq!(
        read(Vendor::OpenAi, EVENTS, OPENAI_CHAT_STREAM_USAGE),
        reading("gpt-4o-mini-2024-07-18", Some((8, 9)))
    );
}

#[test]
fn openai_chat_stream_without_usage() {
    assert_eq!(
        read(Vendor::OpenAi, EVENTS, OPENAI_CHAT_STREAM_NO_USAGE),
        reading("llama3.2", None)
    );
}

#[test]
fn openai_responses() {
    assert_eq!(
        read(Vendor::OpenAi, JSON, OPENAI_RESPONSES),
        reading("gpt-4.1-2025-04-14", Some((36, 87)))
    );
}

#[test]
fn openai_responses_stream() {
    assert_eq!(
        read(Vendor::OpenAi, EVENTS, OPENAI_RESPONSES_STREAM),
        reading("gpt-5-codex", Some((4096, 512)))
    );
}

#[test]
fn anthropic_message() {
    assert_eq!(
        read(Vendor::Anthropic, JSON, ANTHROPIC_MESSAGE),
        reading("claude-sonnet-4-5-20250929", Some((12 + 2048, 60)))
    );
}

#[test]
fn anthropic_stream() {
    assert_eq!(
        read(Vendor::Anthropic, EVENTS, ANTHROPIC_STREAM),
        reading("claude-opus-4-1-20250805", Some((25 + 2000 + 10000, 89)))
    );
}

#[test]
fn anthropic_stream_read_as_it_goes() {
    // After message_start: its input and its one output token.
    let start = ANTHROPIC_STREAM
        .windows(b"event: content_block_start".len())
        .position(|w| w == b"event: content_block_start")
        .unwrap_or_default();
    let mut reader = reader(Vendor::Anthropic, EVENTS);
    reader.feed(&ANTHROPIC_STREAM[..start]);
    assert_eq!(
        reader.reading(),
        reading("claude-opus-4-1-20250805", Some((12025, 1)))
    );
    assert_eq!(reader.reading(), reader.reading());
    reader.feed(&ANTHROPIC_STREAM[start..]);
    assert_eq!(
        reader.reading(),
        reading("claude-opus-4-1-20250805", Some((12025, 89)))
    );
}

#[test]
fn gemini_content() {
    assert_eq!(
        read(
            Vendor::Gemini,
            "application/json; charset=UTF-8",
            GEMINI_CONTENT
        ),
        reading("gemini-2.5-flash", Some((4, 12 + 30)))
    );
}

#[test]
fn gemini_stream_sse() {
    assert_eq!(
        read(Vendor::Gemini, "text/event-stream", GEMINI_STREAM_SSE),
        reading("gemini-2.5-pro", Some((9, 11 + 126)))
    );
}

#[test]
fn gemini_stream_array() {
    assert_eq!(
        read(Vendor::Gemini, JSON, GEMINI_STREAM_ARRAY),
        reading("gemini-2.0-flash", Some((7, 21)))
    );
}

#[test]
fn errors_read_as_nothing() {
    assert_eq!(read(Vendor::OpenAi, JSON, OPENAI_ERROR), Reading::default());
    assert_eq!(
        read(Vendor::Anthropic, EVENTS, ANTHROPIC_STREAM_ERROR),
        Reading::default()
    );
    for vendor in Vendor::ALL {
        for content_type in [JSON, EVENTS, "text/html"] {
            assert_eq!(read(vendor, content_type, HTML_ERROR), Reading::default());
        }
    }
}

#[test]
fn every_sample_in_every_framing() {
    // Read as they come, and under the wrong vendor, framing or no
    // Content-Type: whatever is read is read alike in every chunking.
    for (_, _, body) in sample_answers() {
        for vendor in Vendor::ALL {
            for content_type in [JSON, EVENTS, ""] {
                read(vendor, content_type, body);
            }
        }
    }
    let mut none = UsageReader::new(Vendor::OpenAi, None, None);
    none.feed(OPENAI_CHAT);
    assert_eq!(
        none.reading(),
        reading("gpt-4.1-2025-04-14", Some((82, 17)))
    );
}

#[test]
fn compressed_bodies_are_not_read() {
    for encoding in [&b"gzip"[..], b"br", b"zstd", b"deflate", b"x-gzip"] {
        for (vendor, content_type, body) in sample_answers() {
            let mut reader =
                UsageReader::new(vendor, Some(content_type.as_bytes()), Some(encoding));
            reader.feed(body);
            assert_eq!(reader.reading(), Reading::default());
        }
    }
    let mut reader = UsageReader::new(Vendor::OpenAi, Some(JSON.as_bytes()), Some(b"identity"));
    reader.feed(OPENAI_CHAT);
    assert_eq!(reader.reading().usage.map(|u| u.total()), Some(99));
}

#[test]
fn event_lines_end_every_way() {
    let line = br#"{"model":"m","usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
    for end in [&b"\n"[..], b"\r\n", b"\r"] {
        let mut body = Vec::new();
        for field in [&b"event: x"[..], b": comment", b"id: 1", b"data: [DONE]"] {
            body.extend_from_slice(field);
            body.extend_from_slice(end);
        }
        body.extend_from_slice(b"data:");
        body.extend_from_slice(line);
        body.extend_from_slice(end);
        body.extend_from_slice(end);
        assert_eq!(
            read(Vendor::OpenAi, EVENTS, &body),
            reading("m", Some((3, 4)))
        );
    }
}

#[test]
fn event_lines_are_documents_of_their_own() {
    // A broken line does not spoil the next; a line cut short is not read.
    let body = b"data: {\"usage\":{\"prompt_tokens\":1 <oops>\n\
data: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\
data: {\"x\":\"unterminated\n\
data: {\"usage\":{\"prompt_tokens\":3}}\n\
data: {\"usage\":{\"prompt_tokens\":40\n\
data:  {\"usage\":{\"completion_tokens\":5}}\n\
dat: {\"usage\":{\"prompt_tokens\":50}}\n\
\x20data: {\"usage\":{\"prompt_tokens\":60}}\n\
DATA: {\"usage\":{\"prompt_tokens\":70}}\n";
    assert_eq!(
        read(Vendor::OpenAi, EVENTS, body).usage,
        Some(Usage {
            input_tokens: 3,
            output_tokens: 5
        })
    );
}

#[test]
fn usage_without_counts_is_none() {
    let body =
        br#"{"usage":{"total_tokens":9,"prompt_tokens":-1,"completion_tokens":1.5},"model":"m"}"#;
    assert_eq!(read(Vendor::OpenAi, JSON, body), reading("m", None));
}

/// Feeds `parts` (each repeated its count of times) in chunks of `chunk`
/// bytes, checking the reader's heap after each.
fn feed_bounded(reader: &mut UsageReader, parts: &[(&[u8], usize)], chunk: usize) {
    for (part, times) in parts {
        for _ in 0..*times {
            for piece in part.chunks(chunk) {
                reader.feed(piece);
            }
            assert!(reader.held() <= HELD_BOUND, "holds {} bytes", reader.held());
        }
    }
}

#[test]
fn a_huge_body_is_not_held() {
    // 64 MiB of one string, then the usage.
    let filler = vec![b'a'; 64 * 1024];
    let mut reader = reader(Vendor::OpenAi, JSON);
    feed_bounded(
        &mut reader,
        &[
            (br#"{"model":"m","x":""#, 1),
            (&filler, 1024),
            (
                br#"","usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
                1,
            ),
        ],
        4096,
    );
    assert_eq!(reader.reading(), reading("m", Some((1, 2))));
}

#[test]
fn a_huge_event_line_is_not_held() {
    // One data line of 10 MiB.
    let filler = vec![b'x'; 64 * 1024];
    let mut reader = reader(Vendor::OpenAi, EVENTS);
    feed_bounded(
        &mut reader,
        &[
            (br#"data: {"model":"m","choices":[{"delta":{"content":""#, 1),
            (&filler, 160),
            (
                b"\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}\n\n",
                1,
            ),
        ],
        1500,
    );
    assert_eq!(reader.reading(), reading("m", Some((5, 6))));
}

#[test]
fn deep_nesting_is_not_held_nor_recursed() {
    let opens = vec![b'['; 1_000_000];
    let closes = vec![b']'; 1_000_000];
    for content_type in [JSON, EVENTS] {
        let mut reader = reader(Vendor::OpenAi, content_type);
        let prefix: &[u8] = if content_type == EVENTS {
            b"data: "
        } else {
            b""
        };
        feed_bounded(
            &mut reader,
            &[
                (prefix, 1),
                (&opens, 1),
                (&closes, 1),
                (br#"{"usage":{"prompt_tokens":7}}"#, 1),
            ],
            997,
        );
        assert_eq!(reader.reading().usage.map(|u| u.input_tokens), Some(7));
    }
    // Deep objects, and a usage object too deep for serde_json.
    let mut reader = reader(Vendor::OpenAi, JSON);
    feed_bounded(
        &mut reader,
        &[
            (br#"{"usage":{"prompt_tokens":7,"x":"#, 1),
            (br#"{"a":"#, 10_000),
            (b"1", 1),
            (b"}", 10_000),
            (b"}}", 1),
            (br#"{"a":"#, 1_000_000),
        ],
        1000,
    );
    assert_eq!(reader.reading(), Reading::default());
}

#[test]
fn a_huge_string_is_not_held() {
    // 50 MiB as the usage (dropped past its bound), then as a key.
    let filler = vec![b'z'; 50 * 1024];
    let mut reader = reader(Vendor::OpenAi, JSON);
    feed_bounded(
        &mut reader,
        &[
            (br#"{"usage":""#, 1),
            (&filler, 1024),
            (br#""}{""#, 1),
            (&filler, 1024),
            (br#"":1,"usage":{"prompt_tokens":8},"model":""#, 1),
            (&filler, 1024),
            (br#""}"#, 1),
        ],
        65536,
    );
    assert_eq!(
        reader.reading(),
        Reading {
            model: None,
            usage: Some(Usage {
                input_tokens: 8,
                output_tokens: 0
            })
        }
    );
}

#[test]
fn garbage_is_read_as_nothing() {
    let mut splitter = Splitter(7);
    let garbage: Vec<u8> = (0..1 << 20).map(|_| splitter.next(256) as u8).collect();
    for vendor in Vendor::ALL {
        for content_type in [JSON, EVENTS] {
            let mut reader = reader(vendor, content_type);
            feed_bounded(&mut reader, &[(&garbage, 4)], 333);
            assert_eq!(reader.reading().usage, None);
        }
    }
}

/// Bytes that look enough like answers to reach deep into the reader:
/// pieces of the samples and of JSON, shuffled.
fn answerish() -> impl Strategy<Value = Vec<u8>> {
    let pieces: Vec<&'static [u8]> = vec![
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b"\\",
        b":",
        b",",
        b" ",
        b"\n",
        b"\r",
        b"data: ",
        b"\"usage\":",
        b"\"model\":",
        b"\"response\":",
        b"\"message\":",
        b"\"usageMetadata\":",
        b"\"prompt_tokens\":",
        b"\"input_tokens\":",
        b"\"output_tokens\":",
        b"12",
        b"-1",
        b"1.5",
        b"null",
        b"\"m\"",
        b"\"promptTokenCount\":",
    ];
    let samples: Vec<&'static [u8]> = sample_answers()
        .into_iter()
        .map(|(_, _, body)| body)
        .collect();
    (
        prop::collection::vec(prop::sample::select(pieces), 0..200),
        prop::sample::select(samples),
        any::<usize>(),
        any::<usize>(),
    )
        .prop_map(|(pieces, sample, from, len)| {
            let from = from % sample.len().max(1);
            let to = from + len % (sample.len() - from + 1);
            let mut bytes = sample[from..to].to_vec();
            for (n, piece) in pieces.iter().enumerate() {
                let at = (n * 7919 + from) % (bytes.len() + 1);
                bytes.splice(at..at, piece.iter().copied());
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever comes, in whatever chunks, the reading is the same.
    #[test]
    fn chunking_never_matters(
        bytes in prop_oneof![answerish(), prop::collection::vec(any::<u8>(), 0..2000)],
        sizes in prop::collection::vec(1usize..40, 1..20),
        vendor in prop::sample::select(Vendor::ALL.to_vec()),
        events in any::<bool>(),
    ) {
        let content_type = if events { EVENTS } else { JSON };
        let mut whole = reader(vendor, content_type);
        whole.feed(&bytes);
        let mut split = reader(vendor, content_type);
        let mut rest = &bytes[..];
        for size in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, tail) = rest.split_at((*size).min(rest.len()));
            split.feed(chunk);
            rest = tail;
        }
        prop_assert_eq!(split.reading(), whole.reading());
    }
}
