//! One JSON event per line, nothing else on stdout.
//!
//! Lines are gathered and written together while events come faster than
//! they can be written one by one, and written out as soon as the stream
//! has nothing more ready ([`Renderer::flush`]): a consumer reading the
//! pipe sees each event when the run makes it, and a flood costs one write
//! per block, not one per event.

use std::io::{self, Write};

use moat_engine::AgentEvent;

use super::Renderer;

/// How many bytes of lines are gathered before they are written anyway.
const BLOCK: usize = 64 * 1024;

pub struct Ndjson<W: Write> {
    out: W,
    lines: Vec<u8>,
}

impl<W: Write> Ndjson<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            lines: Vec::with_capacity(BLOCK),
        }
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
        serde_json::to_writer(&mut self.lines, event)?;
        self.lines.push(b'\n');
        if self.lines.len() >= BLOCK {
            self.write_lines()?;
        }
        Ok(())
    }

    fn stored(&mut self, json: &[u8]) -> io::Result<bool> {
        self.lines.extend_from_slice(json);
        self.lines.push(b'\n');
        if self.lines.len() >= BLOCK {
            self.write_lines()?;
        }
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
