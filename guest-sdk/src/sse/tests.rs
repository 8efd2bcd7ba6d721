use proptest::prelude::*;

use super::*;

/// Everything a parser makes of `chunks`: the items of every `feed`, then
/// what `finish` returns.
fn run(
    mut parser: SseParser,
    chunks: &[&[u8]],
) -> (Vec<Result<SseEvent, SseError>>, Option<SseEvent>) {
    let mut items = Vec::new();
    for chunk in chunks {
        items.extend(parser.feed(chunk));
    }
    (items, parser.finish())
}

/// The events of a whole stream, fed at once; panics on an error item.
fn events(stream: &str) -> Vec<SseEvent> {
    let (items, last) = run(SseParser::new(), &[stream.as_bytes()]);
    let mut events: Vec<SseEvent> = items.into_iter().map(Result::unwrap).collect();
    events.extend(last);
    events
}

fn event(name: Option<&str>, data: &str) -> SseEvent {
    SseEvent {
        event: name.map(str::to_owned),
        data: data.to_owned(),
        id: None,
    }
}

/// Asserts `stream` parses the same fed whole, byte by byte and split at
/// every single position, and returns what it parses to.
fn same_however_split(stream: &[u8]) -> (Vec<Result<SseEvent, SseError>>, Option<SseEvent>) {
    let whole = run(SseParser::new(), &[stream]);
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(run(SseParser::new(), &bytes), whole, "byte by byte");
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        assert_eq!(run(SseParser::new(), &[a, b]), whole, "split at {at}");
    }
    for size in [2, 3, 5, 7, 64] {
        let chunks: Vec<&[u8]> = stream.chunks(size).collect();
        assert_eq!(run(SseParser::new(), &chunks), whole, "chunks of {size}");
    }
    whole
}

#[test]
fn fields_name_and_data_an_event() {
    assert_eq!(
        events("event: delta\ndata: hello\n\n"),
        [event(Some("delta"), "hello")]
    );
    assert_eq!(events("data: x\n\n"), [event(None, "x")]);
    // An empty name is the default name.
    assert_eq!(events("event:\ndata: x\n\n"), [event(None, "x")]);
}

#[test]
fn one_space_after_the_colon_is_stripped() {
    assert_eq!(
        events("data:x\n\ndata: x\n\ndata:  x\n\ndata:\tx\n\n"),
        [
            event(None, "x"),
            event(None, "x"),
            event(None, " x"),
            event(None, "\tx"),
        ]
    );
    // Only the first colon separates: the value may hold more.
    assert_eq!(events("data: a: b\n\n"), [event(None, "a: b")]);
}

#[test]
fn data_lines_are_joined_with_newlines() {
    assert_eq!(
        events("data: one\ndata:\ndata: three\n\n"),
        [event(None, "one\n\nthree")]
    );
    // A `data` line without a colon, or with nothing after it, is empty data.
    assert_eq!(events("data\n\n"), [event(None, "")]);
    assert_eq!(events("data:\n\n"), [event(None, "")]);
    assert_eq!(events("data\ndata\n\n"), [event(None, "\n")]);
}

#[test]
fn comments_are_ignored() {
    assert_eq!(
        events(": keep-alive\ndata: a\n:another\ndata: b\n\n:\n\n"),
        [event(None, "a\nb")]
    );
    // A comment is not a blank line: it does not dispatch.
    assert_eq!(events("data: a\n: x\ndata: b\n\n"), [event(None, "a\nb")]);
}

#[test]
fn crlf_lf_and_lone_cr_end_lines() {
    let expected = [event(Some("e"), "a\nb"), event(None, "c")];
    for ending in ["\n", "\r\n", "\r"] {
        let stream = ["event: e", "data: a", "data: b", "", "data: c", "", ""].join(ending);
        assert_eq!(events(&stream), expected, "{ending:?}");
    }
    // Mixed in one stream.
    assert_eq!(
        events("event: e\rdata: a\r\ndata: b\n\r\ndata: c\r\r"),
        expected
    );
}

#[test]
fn a_crlf_split_between_reads_is_one_line_ending() {
    let (items, last) = run(
        SseParser::new(),
        &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"],
    );
    assert_eq!(items, [Ok(event(None, "a\nb"))]);
    assert_eq!(last, None);
    // A `\r` then a blank `\r`: two line endings, so the event dispatches.
    let (items, _) = run(SseParser::new(), &[b"data: a\r", b"\r"]);
    assert_eq!(items, [Ok(event(None, "a"))]);
}

#[test]
fn utf8_split_between_reads_is_decoded_whole() {
    let stream = "data: héllo — 日本 🦀\n\n".as_bytes();
    let (items, _) = same_however_split(stream);
    assert_eq!(items, [Ok(event(None, "héllo — 日本 🦀"))]);
    // Invalid UTF-8 becomes U+FFFD rather than an error.
    assert_eq!(
        run(SseParser::new(), &[b"data: \xFFok\n\n"]).0,
        [Ok(event(None, "\u{FFFD}ok"))]
    );
}

#[test]
fn a_blank_line_dispatches_and_resets_the_event() {
    let (items, _) = run(SseParser::new(), &[b"event: a\ndata: 1\n"]);
    assert!(items.is_empty(), "not dispatched before the blank line");
    assert_eq!(
        events("event: a\ndata: 1\n\ndata: 2\n\n"),
        [event(Some("a"), "1"), event(None, "2")]
    );
}

#[test]
fn an_event_without_data_is_not_dispatched() {
    // Nor does its name leak into the next event.
    assert_eq!(
        events("event: ping\n\nevent: other\nid: 1\n\n\n\ndata: x\n\n"),
        [SseEvent {
            event: None,
            data: "x".into(),
            id: Some("1".into()),
        }]
    );
}

#[test]
fn unknown_fields_are_ignored() {
    assert_eq!(
        events("foo: bar\ndata: x\nDATA: no\nEvent: no\nbaz\n data: no\n\n"),
        [event(None, "x")]
    );
}

#[test]
fn a_leading_byte_order_mark_is_ignored_once() {
    let stream = b"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\ndata: z\n\n";
    let (items, _) = same_however_split(stream);
    // The second mark is part of a field name, an unknown one.
    assert_eq!(items, [Ok(event(None, "x")), Ok(event(None, "z"))]);
    assert_eq!(events("\u{FEFF}: comment\ndata: x\n\n"), [event(None, "x")]);
    // A mark alone on the first line leaves a blank line.
    assert_eq!(events("\u{FEFF}\ndata: x\n\n"), [event(None, "x")]);
}

#[test]
fn the_last_event_id_persists_until_changed() {
    let ids: Vec<Option<String>> = events(
        "id: 1\ndata: a\n\ndata: b\n\nid: 2\u{0}x\ndata: c\n\nid\ndata: d\n\nid: 3\ndata: e\n\n",
    )
    .into_iter()
    .map(|event| event.id)
    .collect();
    // An ID with a NUL is ignored; an empty one clears it.
    let expected = [Some("1"), Some("1"), Some("1"), None, Some("3")];
    assert_eq!(ids, expected.map(|id| id.map(str::to_owned)));
}

#[test]
fn retry_takes_only_digits() {
    let mut parser = SseParser::new();
    assert_eq!(parser.retry(), None);
    parser.feed(b"retry: 1500\n\n");
    assert_eq!(parser.retry(), Some(1500));
    parser.feed(b"retry: 2s\nretry:\nretry: -1\nretry: 99999999999999999999999\n\n");
    assert_eq!(parser.retry(), Some(1500));
}

#[test]
fn finish_returns_an_event_without_a_trailing_blank_line() {
    for stream in [
        "data: a\n\ndata: b",
        "data: a\n\ndata: b\n",
        "data: a\r\n\r\ndata: b\r\n",
    ] {
        let (items, last) = run(SseParser::new(), &[stream.as_bytes()]);
        assert_eq!(items, [Ok(event(None, "a"))], "{stream:?}");
        assert_eq!(last, Some(event(None, "b")), "{stream:?}");
    }
    let (_, last) = run(SseParser::new(), &[b"event: e\ndata: x\ndata: y"]);
    assert_eq!(last, Some(event(Some("e"), "x\ny")));
    for nothing in [
        "",
        "data: a\n\n",
        "event: e\n",
        ": comment",
        "data: a\n\nevent: e",
    ] {
        assert_eq!(
            run(SseParser::new(), &[nothing.as_bytes()]).1,
            None,
            "{nothing:?}"
        );
    }
}

#[test]
fn an_oversize_event_is_an_error_item_and_parsing_goes_on() {
    let mut parser = SseParser::with_max_event_size(16);
    assert_eq!(parser.max_event_size(), 16);
    let items =
        parser.feed(b"data: small\n\ndata: 0123456789abcdef\ndata: more\n\ndata: after\n\n");
    assert_eq!(
        items,
        [
            Ok(event(None, "small")),
            Err(SseError::TooLarge(16)),
            Ok(event(None, "after")),
        ]
    );
    assert_eq!(parser.finish(), None);

    // Many data lines, each small, add up.
    let (items, _) = run(
        SseParser::with_max_event_size(16),
        &[b"data: 12345\ndata: 12345\ndata: 12345\n\ndata: ok\n\n"],
    );
    assert_eq!(items, [Err(SseError::TooLarge(16)), Ok(event(None, "ok"))]);

    // A line that never ends is refused as it grows, not at its end, and
    // the event it belongs to is not returned by `finish`.
    let mut parser = SseParser::with_max_event_size(16);
    let mut errors = 0;
    for _ in 0..1000 {
        errors += parser.feed(b"data: xxxxxxxxxx").len();
        assert!(parser.line.len() <= 16);
    }
    assert_eq!(errors, 1, "one error per event");
    assert_eq!(parser.finish(), None);

    // An event just within the bound is accepted.
    let (items, _) = run(
        SseParser::with_max_event_size(16),
        &[b"data: 0123456789\n\n"],
    );
    assert_eq!(items, [Ok(event(None, "0123456789"))]);
}

#[test]
fn comments_are_not_buffered_so_do_not_count_against_the_bound() {
    let mut stream = b"data: a\n: ".to_vec();
    stream.extend(std::iter::repeat_n(b'x', 1000));
    stream.extend(b"\ndata: b\n\n");
    let (items, _) = run(SseParser::with_max_event_size(32), &[&stream]);
    assert_eq!(items, [Ok(event(None, "a\nb"))]);
}

/// An OpenAI Chat Completions stream with `include_usage`, framed as the
/// API sends it.
const OPENAI: &str = concat!(
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}]}\n\n",
    ": OPENROUTER PROCESSING\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}\n\n",
    "data: [DONE]\n\n",
);

/// An Anthropic Messages stream, framed as the API sends it.
const ANTHROPIC: &str = concat!(
    "event: message_start\r\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}}}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n",
    "event: ping\r\n",
    "data: {\"type\": \"ping\"}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"日本語 🦀\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n",
    "event: message_delta\r\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\r\n\r\n",
    "event: message_stop\r\n",
    "data: {\"type\":\"message_stop\"}\r\n\r\n",
);

#[test]
fn an_openai_stream_parses_the_same_however_split() {
    let (items, last) = same_however_split(OPENAI.as_bytes());
    assert_eq!(last, None);
    let events: Vec<SseEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(events.len(), 6);
    assert!(events.iter().all(|event| event.event.is_none()));
    assert_eq!(events[5].data, "[DONE]");
    let chunk: serde_json::Value = serde_json::from_str(&events[1].data).unwrap();
    assert_eq!(chunk["choices"][0]["delta"]["content"], "Héllo");
    let usage: serde_json::Value = serde_json::from_str(&events[4].data).unwrap();
    assert_eq!(usage["usage"]["total_tokens"], 21);
}

#[test]
fn an_anthropic_stream_parses_the_same_however_split() {
    let (items, last) = same_however_split(ANTHROPIC.as_bytes());
    assert_eq!(last, None);
    let events: Vec<SseEvent> = items.into_iter().map(Result::unwrap).collect();
    let names: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    for event in &events {
        // The data repeats the name as `type`.
        let data: serde_json::Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(data["type"], event.event.as_deref().unwrap());
    }
    let delta: serde_json::Value = serde_json::from_str(&events[3].data).unwrap();
    assert_eq!(delta["delta"]["text"], "日本語 🦀");
}

#[test]
fn the_last_event_of_a_stream_cut_short_comes_from_finish() {
    let cut = OPENAI.strip_suffix("\n\n").unwrap();
    let (items, last) = same_however_split(cut.as_bytes());
    assert_eq!(items.len(), 5);
    assert_eq!(last, Some(event(None, "[DONE]")));
}

#[test]
fn a_reader_returns_the_events_of_its_chunks() {
    let mut chunks = vec![
        b"data: a\n\nda".to_vec(),
        b"ta: b\n".to_vec(),
        b"\ndata: 0123456789abcdef\n\ndata: c".to_vec(),
    ]
    .into_iter();
    let reader = SseReader::new(
        SseParser::with_max_event_size(16),
        move || Ok(chunks.next()),
    );
    let items: Vec<_> = reader.collect();
    assert_eq!(
        items,
        [
            Ok(event(None, "a")),
            Ok(event(None, "b")),
            Err(ReadError::Sse(SseError::TooLarge(16))),
            Ok(event(None, "c")),
        ]
    );
}

#[test]
fn a_reader_stops_after_a_body_error() {
    let mut calls = 0;
    let mut reader = SseReader::new(SseParser::new(), move || {
        calls += 1;
        match calls {
            1 => Ok(Some(b"data: a\n\ndata: partial".to_vec())),
            _ => Err(crate::http::Error::Io("reset".into())),
        }
    });
    assert_eq!(reader.next(), Some(Ok(event(None, "a"))));
    assert_eq!(
        reader.next(),
        Some(Err(ReadError::Http(crate::http::Error::Io("reset".into()))))
    );
    assert_eq!(reader.next(), None);
}

/// Splits `stream` at the given points (taken modulo its length).
fn split<'a>(stream: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = points
        .iter()
        .map(|p| {
            if stream.is_empty() {
                0
            } else {
                p % (stream.len() + 1)
            }
        })
        .collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for point in points {
        chunks.push(&stream[start..point]);
        start = point;
    }
    chunks.push(&stream[start..]);
    chunks
}

/// Streams made of the pieces SSE is built from, so random ones exercise
/// every rule: fields, comments, each line ending, multi-byte UTF-8, a BOM.
fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data".to_vec()),
        Just(b"event".to_vec()),
        Just(b"id".to_vec()),
        Just(b"retry".to_vec()),
        Just(b":".to_vec()),
        Just(b": ".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just("é🦀".as_bytes().to_vec()),
        Just(b"\xFF".to_vec()),
        "[a-z0-9{}\"]{0,12}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn any_chunking_gives_the_same_events(
        stream in stream_strategy(),
        points in prop::collection::vec(any::<usize>(), 0..12),
        max in prop_oneof![Just(DEFAULT_MAX_EVENT_SIZE), 8usize..64],
    ) {
        let whole = run(SseParser::with_max_event_size(max), &[&stream]);
        let chunks = split(&stream, &points);
        prop_assert_eq!(&run(SseParser::with_max_event_size(max), &chunks), &whole);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(&run(SseParser::with_max_event_size(max), &bytes), &whole);
    }

    #[test]
    fn any_chunking_of_a_vendor_stream_gives_the_same_events(
        anthropic in any::<bool>(),
        points in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let stream = if anthropic { ANTHROPIC } else { OPENAI }.as_bytes();
        let whole = run(SseParser::new(), &[stream]);
        prop_assert_eq!(run(SseParser::new(), &split(stream, &points)), whole);
    }
}
