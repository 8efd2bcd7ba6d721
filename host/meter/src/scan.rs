//! A byte-level incremental JSON scanner: it follows a stream of JSON
//! documents as their bytes pass, in chunks cut anywhere, and hands the
//! raw bytes of the few values the meter reads (a usage object, a model's
//! name) to a [`Tally`]. Everything else passes by without being held: a
//! string is skipped with `memchr`, nesting past [`MAX_DEPTH`] is only
//! counted, a captured value past [`MAX_CAPTURE`] is dropped. Its memory
//! is bounded whatever comes, and it never recurses.

use memchr::memchr2;

use crate::usage::{Kind, Tally};

/// The deepest nesting whose structure is followed; deeper levels are
/// counted, not followed (nothing the meter reads sits that deep).
pub(crate) const MAX_DEPTH: usize = 64;

/// The largest value captured; a larger one is dropped (no usage object
/// or model name is anywhere near it).
pub(crate) const MAX_CAPTURE: usize = 64 * 1024;

/// The longest key compared with the keys the meter reads; a longer one
/// is none of them.
const KEY_LEN: usize = 16;

/// Where an object sits, as far as the meter cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A document's root object (arrays around it are transparent: a
    /// Gemini stream read whole is an array of answers).
    Root,
    /// The root's `response` (the Responses API's stream events).
    Response,
    /// The root's `message` (Anthropic's `message_start`).
    Message,
    /// Anywhere else: nothing in it is read.
    Elsewhere,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

/// One open object or array.
#[derive(Debug, Clone, Copy)]
struct Frame {
    container: Container,
    place: Place,
}

/// What the value about to start is to the meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Nothing: pass it by.
    Skip,
    /// A value to capture.
    Capture(Kind),
    /// An object to look inside, at this place.
    Enter(Place),
}

/// Where in the grammar the scanner stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected (at the root: a document starts).
    Value,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    InKey,
    KeyEscape,
    Colon,
    InString,
    StringEscape,
    /// In a number, `true`, `false` or `null`.
    Scalar,
    /// After a value in a container: `,` or its end.
    After,
    /// Inside nesting past [`MAX_DEPTH`]: brackets are counted.
    Deep,
    DeepString,
    DeepEscape,
    /// Not JSON: nothing more is read until the scanner is reset.
    Broken,
}

/// How the key being read is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyMode {
    /// Not at all: its object is read no further.
    Ignored,
    /// Byte by byte, as it comes.
    Collecting,
    /// It cannot be one of ours (too long, or escaped).
    NoMatch,
}

/// The value being captured.
#[derive(Debug, Clone, Copy)]
struct Capture {
    kind: Kind,
    /// The number of open frames around it: it ends when they are back
    /// to this many.
    depth: usize,
}

/// The scanner of one answer's documents.
#[derive(Debug)]
pub(crate) struct Scanner {
    state: State,
    frames: Vec<Frame>,
    /// Levels open past [`MAX_DEPTH`].
    deep: u64,
    next: Next,
    key: [u8; KEY_LEN],
    key_len: usize,
    key_mode: KeyMode,
    capture: Option<Capture>,
    /// Where, in the chunk being fed, the capture's bytes not yet copied
    /// begin.
    capture_from: usize,
    captured: Vec<u8>,
    /// The capture grew past [`MAX_CAPTURE`] and was dropped.
    overflowed: bool,
}

impl Scanner {
    pub(crate) fn new() -> Self {
        Scanner {
            state: State::Value,
            frames: Vec::new(),
            deep: 0,
            next: Next::Skip,
            key: [0; KEY_LEN],
            key_len: 0,
            key_mode: KeyMode::Ignored,
            capture: None,
            capture_from: 0,
            captured: Vec::new(),
            overflowed: false,
        }
    }

    /// Starts a fresh document, forgetting any unfinished one.
    pub(crate) fn reset(&mut self) {
        self.state = State::Value;
        self.frames.clear();
        self.deep = 0;
        self.next = Next::Skip;
        self.drop_capture();
    }

    /// Reads the next bytes of the stream, handing each value captured
    /// whole to `tally`.
    pub(crate) fn feed(&mut self, bytes: &[u8], tally: &mut Tally) {
        self.capture_from = 0;
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::InString => match memchr2(b'"', b'\\', &bytes[i..]) {
                    None => i = bytes.len(),
                    Some(found) => {
                        let at = i + found;
                        i = at + 1;
                        if bytes[at] == b'"' {
                            self.value_done(bytes, i, tally);
                        } else {
                            self.state = State::StringEscape;
                        }
                    }
                },
                State::StringEscape => {
                    // The escaped byte (of `\"` or `\\`, or the first of
                    // any other escape, which holds neither).
                    i += 1;
                    self.state = State::InString;
                }
                State::InKey => i = self.key_bytes(bytes, i),
                State::KeyEscape => {
                    i += 1;
                    self.state = State::InKey;
                }
                State::Scalar => {
                    while i < bytes.len() && is_scalar(bytes[i]) {
                        i += 1;
                    }
                    if i < bytes.len() {
                        // The byte that ends it is read as what follows.
                        self.value_done(bytes, i, tally);
                    }
                }
                State::Deep | State::DeepString | State::DeepEscape => {
                    i = self.deep_bytes(bytes, i, tally);
                }
                State::Broken => i = bytes.len(),
                _ => {
                    self.structural(bytes, i, tally);
                    i += 1;
                }
            }
        }
        if self.capture.is_some() {
            self.keep(&bytes[self.capture_from..]);
        }
    }

    /// Reads one byte between tokens.
    fn structural(&mut self, bytes: &[u8], at: usize, tally: &mut Tally) {
        let byte = bytes[at];
        if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            return;
        }
        match (self.state, byte) {
            (State::Value | State::ValueOrEnd, b'{') => {
                self.begin(at);
                self.open(Container::Object);
            }
            (State::Value | State::ValueOrEnd, b'[') => {
                self.begin(at);
                self.open(Container::Array);
            }
            (State::Value | State::ValueOrEnd, b'"') => {
                self.begin(at);
                self.state = State::InString;
            }
            (State::Value | State::ValueOrEnd, b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                self.begin(at);
                self.state = State::Scalar;
            }
            (State::ValueOrEnd, b']') => self.close(Container::Array, bytes, at + 1, tally),
            (State::KeyOrEnd | State::Key, b'"') => self.begin_key(),
            (State::KeyOrEnd, b'}') => self.close(Container::Object, bytes, at + 1, tally),
            (State::Colon, b':') => {
                self.next = self.classify();
                self.state = State::Value;
            }
            (State::After, b',') => {
                self.state = match self.frames.last() {
                    Some(Frame {
                        container: Container::Object,
                        ..
                    }) => State::Key,
                    _ => State::Value,
                };
            }
            (State::After, b'}') => self.close(Container::Object, bytes, at + 1, tally),
            (State::After, b']') => self.close(Container::Array, bytes, at + 1, tally),
            _ => self.broken(),
        }
    }

    /// A value starts at `at`: captured when the key before it is ours.
    fn begin(&mut self, at: usize) {
        if let Next::Capture(kind) = self.next
            && self.capture.is_none()
        {
            self.capture = Some(Capture {
                kind,
                depth: self.frames.len(),
            });
            self.capture_from = at;
            self.captured.clear();
            self.overflowed = false;
        }
    }

    fn open(&mut self, container: Container) {
        if self.frames.len() == MAX_DEPTH {
            self.deep = 1;
            self.state = State::Deep;
            return;
        }
        let place = if self.capture.is_some() {
            // Its bytes are captured whole; nothing in it is read apart.
            Place::Elsewhere
        } else {
            match self.frames.last() {
                None => Place::Root,
                Some(Frame {
                    container: Container::Array,
                    place,
                }) => {
                    if *place == Place::Root {
                        Place::Root
                    } else {
                        Place::Elsewhere
                    }
                }
                Some(Frame {
                    container: Container::Object,
                    ..
                }) => match (self.next, container) {
                    (Next::Enter(place), Container::Object) => place,
                    _ => Place::Elsewhere,
                },
            }
        };
        self.frames.push(Frame { container, place });
        self.next = Next::Skip;
        self.state = match container {
            Container::Object => State::KeyOrEnd,
            Container::Array => State::ValueOrEnd,
        };
    }

    /// `container` ends with the byte before `end`.
    fn close(&mut self, container: Container, bytes: &[u8], end: usize, tally: &mut Tally) {
        match self.frames.last() {
            Some(frame) if frame.container == container => {
                self.frames.pop();
                self.value_done(bytes, end, tally);
            }
            _ => self.broken(),
        }
    }

    /// A value ended with the byte before `end`.
    fn value_done(&mut self, bytes: &[u8], end: usize, tally: &mut Tally) {
        if let Some(capture) = self.capture
            && capture.depth == self.frames.len()
        {
            self.keep(&bytes[self.capture_from..end]);
            if !self.overflowed {
                tally.take(capture.kind, &self.captured);
            }
            self.drop_capture();
        }
        self.next = Next::Skip;
        // Back at the root a document ended; another may follow.
        self.state = if self.frames.is_empty() {
            State::Value
        } else {
            State::After
        };
    }

    fn begin_key(&mut self) {
        let followed = matches!(self.frames.last(), Some(frame) if frame.place != Place::Elsewhere);
        self.key_mode = if followed {
            KeyMode::Collecting
        } else {
            KeyMode::Ignored
        };
        self.key_len = 0;
        self.state = State::InKey;
    }

    /// Reads a key's bytes from `i`; returns where reading goes on.
    fn key_bytes(&mut self, bytes: &[u8], i: usize) -> usize {
        let rest = &bytes[i..];
        let found = memchr2(b'"', b'\\', rest);
        if self.key_mode == KeyMode::Collecting {
            let part = &rest[..found.unwrap_or(rest.len())];
            match self.key.get_mut(self.key_len..self.key_len + part.len()) {
                Some(room) => {
                    room.copy_from_slice(part);
                    self.key_len += part.len();
                }
                None => self.key_mode = KeyMode::NoMatch,
            }
        }
        let Some(found) = found else {
            return bytes.len();
        };
        if rest[found] == b'"' {
            self.state = State::Colon;
        } else {
            // None of ours is spelled with an escape; vendors never do.
            if self.key_mode == KeyMode::Collecting {
                self.key_mode = KeyMode::NoMatch;
            }
            self.state = State::KeyEscape;
        }
        i + found + 1
    }

    /// What the value after the key just read is to the meter.
    fn classify(&self) -> Next {
        let Some(frame) = self.frames.last() else {
            return Next::Skip;
        };
        if self.key_mode != KeyMode::Collecting {
            return Next::Skip;
        }
        match (frame.place, &self.key[..self.key_len]) {
            (Place::Root, b"usage" | b"usageMetadata") => Next::Capture(Kind::Usage),
            (Place::Root, b"model" | b"modelVersion") => Next::Capture(Kind::Model),
            (Place::Root, b"response") => Next::Enter(Place::Response),
            (Place::Root, b"message") => Next::Enter(Place::Message),
            (Place::Response | Place::Message, b"usage") => Next::Capture(Kind::Usage),
            (Place::Response | Place::Message, b"model") => Next::Capture(Kind::Model),
            _ => Next::Skip,
        }
    }

    /// Reads bytes nested past [`MAX_DEPTH`] from `i`, counting brackets
    /// outside strings; returns where reading goes on.
    fn deep_bytes(&mut self, bytes: &[u8], mut i: usize, tally: &mut Tally) -> usize {
        while i < bytes.len() {
            match self.state {
                State::DeepString => match memchr2(b'"', b'\\', &bytes[i..]) {
                    None => return bytes.len(),
                    Some(found) => {
                        let at = i + found;
                        self.state = if bytes[at] == b'"' {
                            State::Deep
                        } else {
                            State::DeepEscape
                        };
                        i = at + 1;
                    }
                },
                State::DeepEscape => {
                    self.state = State::DeepString;
                    i += 1;
                }
                _ => {
                    let byte = bytes[i];
                    i += 1;
                    match byte {
                        b'"' => self.state = State::DeepString,
                        b'{' | b'[' => self.deep = self.deep.saturating_add(1),
                        b'}' | b']' => {
                            self.deep -= 1;
                            if self.deep == 0 {
                                // The container that went too deep ended.
                                self.value_done(bytes, i, tally);
                                return i;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        i
    }

    /// Copies bytes of the capture, dropping it once it outgrows
    /// [`MAX_CAPTURE`].
    fn keep(&mut self, part: &[u8]) {
        if self.overflowed {
            return;
        }
        let needed = self.captured.len() + part.len();
        if needed > MAX_CAPTURE {
            self.overflowed = true;
            self.captured.clear();
            return;
        }
        if needed > self.captured.capacity() {
            // Grown by hand so that the buffer never exceeds the bound.
            let target = needed
                .max(self.captured.capacity() * 2)
                .clamp(64, MAX_CAPTURE);
            self.captured.reserve_exact(target - self.captured.len());
        }
        self.captured.extend_from_slice(part);
    }

    fn drop_capture(&mut self) {
        self.capture = None;
        self.captured.clear();
        self.overflowed = false;
    }

    fn broken(&mut self) {
        self.state = State::Broken;
        self.drop_capture();
    }

    /// The bytes it holds on the heap.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.captured.capacity() + self.frames.capacity() * size_of::<Frame>()
    }
}

/// A byte of a number or of `true`, `false`, `null` (loosely: serde_json
/// judges the values captured).
fn is_scalar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reading, Usage, Vendor};

    fn scan(json: &[u8]) -> Reading {
        let mut tally = Tally::new(Vendor::OpenAi);
        let mut scanner = Scanner::new();
        scanner.feed(json, &mut tally);
        let whole = tally.reading();
        // Byte by byte, the same.
        let mut tally = Tally::new(Vendor::OpenAi);
        let mut scanner = Scanner::new();
        for byte in json.chunks(1) {
            scanner.feed(byte, &mut tally);
        }
        assert_eq!(tally.reading(), whole, "{}", String::from_utf8_lossy(json));
        whole
    }

    fn usage(json: &str) -> Option<(u64, u64)> {
        scan(json.as_bytes()).usage.map(
            |Usage {
                 input_tokens,
                 output_tokens,
             }| (input_tokens, output_tokens),
        )
    }

    #[test]
    fn reads_the_paths() {
        let cases = [
            (
                r#"{"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
                Some((1, 2)),
            ),
            (
                r#"{"response":{"usage":{"input_tokens":3,"output_tokens":4}}}"#,
                Some((3, 4)),
            ),
            (
                r#"{"message":{"usage":{"input_tokens":5,"output_tokens":6}}}"#,
                Some((5, 6)),
            ),
            (
                r#"[{"usage":{"input_tokens":1}},{"usage":{"input_tokens":7}}]"#,
                Some((7, 0)),
            ),
            (r#"[[{"usage":{"output_tokens":2}}]]"#, Some((0, 2))),
            (r#" { "usage" : { "prompt_tokens" : 9 } } "#, Some((9, 0))),
            (
                r#"{"usage":{"prompt_tokens":1}}{"usage":{"prompt_tokens":2}}"#,
                Some((2, 0)),
            ),
            (
                "{\"usage\":{\"prompt_tokens\":3}}\n{\"usage\":{\"completion_tokens\":4}}\n",
                Some((3, 4)),
            ),
        ];
        for (json, want) in cases {
            assert_eq!(usage(json), want, "{json}");
        }
    }

    #[test]
    fn passes_decoys_by() {
        for json in [
            r#"{"choices":[{"message":{"usage":{"prompt_tokens":9}}}]}"#,
            r#"{"metadata":{"usage":{"prompt_tokens":9}}}"#,
            r#"{"response":{"output":[{"usage":{"input_tokens":9}}]}}"#,
            r#"{"response":{"response":{"usage":{"input_tokens":9}}}}"#,
            r#"{"message":[{"usage":{"input_tokens":9}}]}"#,
            r#"{"text":"{\"usage\":{\"prompt_tokens\":9}}"}"#,
            r#"{"a\"":"usage","b":{"usage":{"prompt_tokens":9}}}"#,
            r#"{"us\u0061ge":{"prompt_tokens":9}}"#,
            r#"{"usageX":{"prompt_tokens":9},"xusage":{"prompt_tokens":9}}"#,
            r#"{"a_key_much_longer_than_sixteen_bytes_usage":{"prompt_tokens":9}}"#,
            r#"["usage",{"x":{"usage":{"prompt_tokens":9}}}]"#,
            r#"{"usage":{"prompt_tokens":9"#,
            r#"{"usage":{"prompt_tokens":9]}"#,
            r#"{"usage" {"prompt_tokens":9}}"#,
            r#"{"x":1 "usage":{"prompt_tokens":9}}"#,
        ] {
            assert_eq!(usage(json), None, "{json}");
        }
    }

    #[test]
    fn a_value_after_a_decoy_is_read() {
        let json = r#"{"id":"x","choices":[{"delta":{"content":"\"usage\":{\\\"a\":1}"}}],"extra":{"usage":{"prompt_tokens":9}},"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        assert_eq!(usage(json), Some((1, 2)));
    }

    #[test]
    fn deep_nesting_is_counted() {
        let mut json = String::from(r#"{"x":"#);
        json.push_str(&"[".repeat(200));
        json.push_str(r#"{"usage":{"prompt_tokens":9}},"]}[\"" "#);
        json.push_str(&"]".repeat(200));
        json.push_str(r#","usage":{"prompt_tokens":4}}"#);
        assert_eq!(usage(&json), Some((4, 0)));
    }

    #[test]
    fn a_capture_may_go_deep_and_too_deep() {
        // Captured past MAX_DEPTH: serde_json judges it (and refuses
        // nothing here).
        let mut json = String::from(r#"{"usage":{"prompt_tokens":4,"x":"#);
        json.push_str(&"[".repeat(100));
        json.push_str(&"]".repeat(100));
        json.push_str("}}");
        assert_eq!(usage(&json), Some((4, 0)));
        // Past serde_json's own limit: refused, not a stack overflow.
        let mut json = String::from(r#"{"usage":{"prompt_tokens":4,"x":"#);
        json.push_str(&"[".repeat(5000));
        json.push_str(&"]".repeat(5000));
        json.push_str("}}");
        assert_eq!(usage(&json), None);
    }

    #[test]
    fn a_capture_too_large_is_dropped() {
        let big = "a".repeat(MAX_CAPTURE);
        let json = format!(r#"{{"usage":{{"prompt_tokens":4,"x":"{big}"}}}}"#);
        assert_eq!(usage(&json), None);
        let json = format!(r#"{{"usage":{{"prompt_tokens":4,"x":"{big}"}},"model":"m"}}"#);
        assert_eq!(scan(json.as_bytes()).model.as_deref(), Some("m"));
    }

    #[test]
    fn reads_models() {
        let json =
            br#"{"model":"a","response":{"model":"b"},"message":{"model":"c"},"modelVersion":"d"}"#;
        assert_eq!(scan(json).model.as_deref(), Some("d"));
        let json = br#"{"model":"a\"b","model2":"x","x":{"model":"y"}}"#;
        assert_eq!(scan(json).model.as_deref(), Some("a\"b"));
    }

    #[test]
    fn garbage_is_not_read() {
        for bytes in [
            &b"<html><body>502 Bad Gateway</body></html>"[..],
            b"\x00\xff\xfe{\"usage\":{\"prompt_tokens\":1}}",
            b"}}}]]]",
            b"{{{{",
            b"\"\\",
            b"nul",
            b"-",
        ] {
            assert_eq!(scan(bytes), Reading::default());
        }
        // What was whole before the garbage stays read.
        let json = br#"{"usage":{"prompt_tokens":3}} <html>{"usage":{"prompt_tokens":9}}"#;
        assert_eq!(scan(json).usage.map(|u| u.input_tokens), Some(3));
    }
}
