//! Assistant text as it streams: deltas are printed as they come, and the
//! full `text` that follows them (which repeats them) only ends the line.

use std::io::{self, Write};

/// Where the streamed text stands on the current line.
#[derive(Debug, Default)]
pub struct TextFlow {
    /// Deltas were printed since the last full text.
    streamed: bool,
    /// The last text written did not end with a newline.
    line_open: bool,
}

impl TextFlow {
    /// Prints a delta as it arrives.
    pub fn delta(&mut self, out: &mut impl Write, delta: &str) -> io::Result<()> {
        out.write_all(delta.as_bytes())?;
        self.streamed = true;
        self.line_open = !delta.ends_with('\n');
        Ok(())
    }

    /// Prints a full text unless its deltas were already printed, and ends
    /// the line.
    pub fn text(&mut self, out: &mut impl Write, content: &str) -> io::Result<()> {
        if !self.streamed {
            self.end_line(out)?;
            out.write_all(content.as_bytes())?;
            self.line_open = !content.ends_with('\n');
        }
        self.streamed = false;
        self.end_line(out)
    }

    /// Whether the last text written left its line unfinished.
    pub fn line_open(&self) -> bool {
        self.line_open
    }

    /// Someone else ended the unfinished line (a log line did).
    pub fn line_closed(&mut self) {
        self.line_open = false;
    }

    /// Ends an unfinished line, so what follows starts on its own.
    pub fn end_line(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.line_open {
            out.write_all(b"\n")?;
            self.line_open = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(steps: &[(&str, &str)]) -> String {
        let mut out = Vec::new();
        let mut flow = TextFlow::default();
        for (kind, text) in steps {
            match *kind {
                "delta" => flow.delta(&mut out, text).unwrap(),
                _ => flow.text(&mut out, text).unwrap(),
            }
        }
        flow.end_line(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_text_after_its_deltas_is_not_printed_twice() {
        assert_eq!(
            render(&[("delta", "hel"), ("delta", "lo"), ("text", "hello")]),
            "hello\n"
        );
    }

    #[test]
    fn a_text_without_deltas_is_printed_on_its_own_line() {
        assert_eq!(render(&[("text", "one"), ("text", "two\n")]), "one\ntwo\n");
    }

    #[test]
    fn unfinished_deltas_get_their_line_ended() {
        assert_eq!(render(&[("delta", "partial")]), "partial\n");
    }
}
