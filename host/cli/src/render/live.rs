//! The live line a person watches while a run goes on: the spinner (on
//! stderr), or an unfinished line of streamed answer (on stdout). Both
//! share the terminal with moat's log lines (tracing, on stderr), which go
//! through [`LogWriter`]: a log line is printed above the spinner, which is
//! drawn again below it, and after an unfinished line, never into it.

use std::io::{self, IsTerminal, Write};
use std::sync::{Mutex, MutexGuard};

use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use moat_sandbox::{CompileWatcher, Compiling};
use tracing_subscriber::fmt::MakeWriter;

/// What is live on the terminal now.
struct Live {
    spinner: Option<ProgressBar>,
    /// Streamed text left its line unfinished.
    line_open: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    spinner: None,
    line_open: false,
});

fn live() -> MutexGuard<'static, Live> {
    // A panic while holding it leaves nothing half-done worth refusing.
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The spinner now shown, or none.
pub fn set_spinner(spinner: Option<ProgressBar>) {
    live().spinner = spinner;
}

/// Whether streamed text has left its line unfinished.
pub fn set_line_open(open: bool) {
    live().line_open = open;
}

/// Whether the unfinished line is still unfinished (a log line ends it).
pub fn line_open() -> bool {
    live().line_open
}

/// Where log lines go: stderr, around the live line.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut live = live();
        if let Some(spinner) = &live.spinner {
            return spinner.suspend(|| io::stderr().write_all(buf).map(|()| buf.len()));
        }
        let mut stderr = io::stderr().lock();
        if live.line_open {
            // Streamed text goes to stdout; what it printed must show
            // before the log line, which starts a line of its own.
            io::stdout().flush()?;
            stderr.write_all(b"\n")?;
            live.line_open = false;
        }
        stderr.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// On a terminal, a spinner while a component compiles: "compiling
/// adapter.wasm (12.3 MiB), once: later runs start at once (8s)". `None`
/// when stderr is no terminal (the log says it at info).
pub fn compile_watcher() -> Option<CompileWatcher> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let shown: Arc<Mutex<Option<ProgressBar>>> = Arc::default();
    Some(CompileWatcher(Arc::new(move |compiling| {
        let mut shown = shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match compiling {
            Compiling::Started { origin, size_bytes } => {
                // A file by its name; a built-in as "built-in NAME".
                let name = match origin.contains('/') {
                    true => std::path::Path::new(origin)
                        .file_name()
                        .map_or_else(|| origin.to_owned(), |n| n.to_string_lossy().into_owned()),
                    false => origin.to_owned(),
                };
                let spinner = spinner(
                    "{spinner} {msg} ({elapsed})",
                    format!(
                        "compiling {} ({}), once: later runs of it start at once",
                        super::safe::text(&name),
                        bytesize::ByteSize::b(size_bytes).display().iec()
                    ),
                );
                set_spinner(Some(spinner.clone()));
                *shown = Some(spinner);
            }
            Compiling::Ended => {
                if let Some(spinner) = shown.take() {
                    set_spinner(None);
                    spinner.finish_and_clear();
                }
            }
        }
    })))
}

/// A spinner on stderr, ticking, drawn with `template` and saying
/// `message`.
pub fn spinner(template: &str, message: String) -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(
        None,
        indicatif::ProgressDrawTarget::term_like(Box::new(Margined(console::Term::stderr()))),
    );
    if let Ok(style) = ProgressStyle::with_template(template) {
        spinner.set_style(style);
    }
    spinner.set_message(message);
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// Columns left free at the end of a spinner's line.
const MARGIN: u16 = 4;

/// stderr as indicatif draws on it, a few columns narrower than it is:
/// indicatif fills its line to the terminal's last column, so the `^C` a
/// terminal echoes when Ctrl-C is typed would wrap onto a line of its own,
/// and clearing the spinner (one line) would leave the spinner's line on
/// the screen above it.
#[derive(Debug)]
struct Margined(console::Term);

impl indicatif::TermLike for Margined {
    fn width(&self) -> u16 {
        self.0.size().1.saturating_sub(MARGIN).max(1)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
}
