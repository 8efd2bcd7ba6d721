//! One JSON event per line, nothing else on stdout.
//!
//! Lines are gathered and written together while events come faster than
//! they can be written one by one, and written out as soon as the stream
//! has nothing more ready ([`Renderer::flush`]): a consumer reading the
//! pipe sees each event when the run makes it, and a flood costs one write
//! per block, not one per event.

use std::io::{self, Write};

use moat_engine::AgentEvent;
use serde_json::value::RawValue;

use super::Renderer;

/// How many bytes of lines are gathered before they are written anyway.
const BLOCK: usize = 64 * 1024;

/// An event's line as moat writes it, its fields in their order and all
/// but `metadata` untouched; a line with any other field is left as it is.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(rename = "type")]
    kind: Box<RawValue>,
    agent: Box<RawValue>,
    timestamp: Box<RawValue>,
    #[serde(rename = "sessionId")]
    session_id: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    role: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    payload: Box<RawValue>,
}

pub struct Ndjson<W: Write> {
    out: W,
    lines: Vec<u8>,
    /// The run's id, until the first event is written: a consumer finds it
    /// in the first line's `metadata.runId`, whatever that event is (an
    /// adapter that refuses its run sends no `init`).
    run_id: Option<String>,
}

impl<W: Write> Ndjson<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            lines: Vec::with_capacity(BLOCK),
            run_id: None,
        }
    }

    /// The same, for the events of run `id`.
    pub fn of_run(out: W, id: &str) -> Self {
        Self {
            run_id: Some(id.to_owned()),
            ..Self::new(out)
        }
    }

    /// `json` (the first event), with the run's id in its `metadata`
    /// unless it carries it already (an `init` does); `None`: as it is.
    fn with_run_id(json: &[u8], id: &str) -> Option<Vec<u8>> {
        let mut line: Line = serde_json::from_slice(json).ok()?;
        let metadata = line.metadata.get_or_insert_with(serde_json::Map::new);
        if metadata.get("runId").and_then(serde_json::Value::as_str) == Some(id) {
            return None;
        }
        metadata.insert("runId".into(), id.into());
        serde_json::to_vec(&line).ok()
    }

    /// Adds the line `json` of one event.
    fn line(&mut self, json: &[u8]) -> io::Result<()> {
        match self.run_id.take() {
            Some(id) => match Self::with_run_id(json, &id) {
                Some(marked) => self.lines.extend_from_slice(&marked),
                None => self.lines.extend_from_slice(json),
            },
            None => self.lines.extend_from_slice(json),
        }
        self.lines.push(b'\n');
        if self.lines.len() >= BLOCK {
            self.write_lines()?;
        }
        Ok(())
    }

    fn write_lines(&mut self) -> io::Result<()> {
        if !self.lines.is_empty() {
            self.out.write_all(&self.lines)?;
            self.lines.clear();
        }
        Ok(())
    }
}

impl<W: Write> Renderer for Ndjson<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        if self.run_id.is_some() {
            let json = serde_json::to_vec(event)?;
            return self.line(&json);
        }
        serde_json::to_writer(&mut self.lines, event)?;
        self.lines.push(b'\n');
        if self.lines.len() >= BLOCK {
            self.write_lines()?;
        }
        Ok(())
    }

    fn stored(&mut self, json: &[u8]) -> io::Result<bool> {
        self.line(json)?;
        Ok(true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_lines()?;
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes that reach it.
    #[derive(Default)]
    struct Writes {
        bytes: Vec<u8>,
        writes: usize,
    }

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn delta(text: &str) -> AgentEvent {
        AgentEvent {
            agent: "a".into(),
            timestamp: 1,
            session_id: "s".into(),
            role: None,
            payload: moat_engine::EventPayload::text_delta(text),
        }
    }

    #[test]
    fn the_first_line_names_the_run_whatever_its_event() {
        let mut ndjson = Ndjson::of_run(Writes::default(), "r_1");
        ndjson.event(&delta("x")).unwrap();
        ndjson.event(&delta("y")).unwrap();
        ndjson.flush().unwrap();
        let text = String::from_utf8(ndjson.out.bytes.clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines[0]["metadata"]["runId"], "r_1");
        assert!(
            text.starts_with(r#"{"type":"text_delta","agent":"a","#),
            "{text}"
        );
        assert_eq!(lines[0]["payload"]["delta"], "x");
        assert!(lines[1].get("metadata").is_none(), "only the first");
    }

    #[test]
    fn lines_are_written_together_and_all_out_on_flush() {
        let mut ndjson = Ndjson::new(Writes::default());
        for _ in 0..100 {
            ndjson.event(&delta("x")).unwrap();
        }
        assert_eq!(ndjson.out.writes, 0, "gathered while events keep coming");
        ndjson.flush().unwrap();
        assert_eq!(ndjson.out.writes, 1, "one write for the block");
        let text = String::from_utf8(ndjson.out.bytes.clone()).unwrap();
        assert_eq!(text.lines().count(), 100);
        assert!(
            text.lines()
                .all(|line| serde_json::from_str::<AgentEvent>(line).is_ok())
        );
        // A block is written once it is full, flush or not.
        for _ in 0..2000 {
            ndjson.event(&delta(&"y".repeat(100))).unwrap();
        }
        assert!(ndjson.out.writes > 1);
        ndjson.finish().unwrap();
        let text = String::from_utf8(ndjson.out.bytes).unwrap();
        assert_eq!(text.lines().count(), 2100);
    }
}
