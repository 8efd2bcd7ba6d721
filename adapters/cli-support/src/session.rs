//! The run loop shared by the CLI adapters: read a line, translate it,
//! hand out the events one at a time; end the run when the CLI ends or the
//! user aborts.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use moat_guest::{DoneStatus, Event};

use crate::{Exit, Translator};

/// How long a CLI may keep writing after its result line before the
/// session stops reading (it is then stopped when the session is dropped).
pub const AFTER_RESULT_GRACE: Duration = Duration::from_secs(2);

/// How long a CLI that closed its stdout may take to exit before it is
/// asked to stop, and then again before the run ends without its status.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Why reading the CLI's output failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The run was aborted: the host made the read return at once.
    Interrupted,
    /// Nothing arrived within the time asked for.
    TimedOut,
    /// A line longer than the host's limit (this many bytes) was skipped;
    /// the output goes on after it.
    LineTooLong(u64),
    /// Anything else, described.
    Failed(String),
}

/// A running CLI process, as the session needs it. The adapters implement
/// it over moat's process capability; tests over a scripted fake.
pub trait CliProcess {
    /// The next stdout line without its newline; `Ok(None)` at the end of
    /// stdout.
    fn read_line(&mut self) -> Result<Option<String>, ReadError>;

    /// Like [`read_line`](Self::read_line), giving up after `timeout`.
    fn read_line_timeout(&mut self, timeout: Duration) -> Result<Option<String>, ReadError>;

    /// Asks the process to stop (SIGTERM).
    fn terminate(&mut self);

    /// Waits for the process to end, once stdout has ended.
    fn wait(&mut self) -> Exit;

    /// Waits at most `timeout` for the process to end; `None` if it is
    /// still running then.
    fn wait_timeout(&mut self, timeout: Duration) -> Option<Exit>;

    /// The tail of what the process wrote on stderr so far.
    fn stderr_tail(&mut self) -> String;
}

/// One CLI run: a process and the translator of its output.
pub struct CliSession<P: CliProcess, T: Translator> {
    cli: &'static str,
    process: P,
    translator: T,
    pending: VecDeque<Event>,
    grace: Duration,
}

impl<P: CliProcess, T: Translator> CliSession<P, T> {
    /// A session over a started `process` named `cli` in messages.
    pub fn new(cli: &'static str, process: P, translator: T) -> Self {
        CliSession {
            cli,
            process,
            translator,
            pending: VecDeque::new(),
            grace: AFTER_RESULT_GRACE,
        }
    }

    /// Sets how long the CLI may go on after its result line (default
    /// [`AFTER_RESULT_GRACE`]).
    pub fn with_after_result_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Whether [`next_event`](Self::next_event) returns at once: the events
    /// of a line already read are queued.
    pub fn ready(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The next event, or `None` once `done` was handed out.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if event.is_done() {
                    self.pending.clear();
                }
                return Some(event);
            }
            if self.translator.is_done() {
                return None;
            }
            if moat_guest::interrupted() {
                return Some(self.interrupt());
            }
            match self.process.read_line() {
                Ok(Some(line)) => {
                    let events = self.translator.line(&line);
                    if self.translator.is_done() {
                        self.let_it_finish();
                    }
                    self.pending.extend(events);
                }
                Ok(None) => {
                    let exit = self.exit_status();
                    // An abort while waiting for the exit is still an abort.
                    if moat_guest::interrupted() {
                        return Some(self.interrupt());
                    }
                    let stderr = self.process.stderr_tail();
                    self.pending.extend(self.translator.finish(exit, &stderr));
                }
                Err(ReadError::Interrupted) => return Some(self.interrupt()),
                Err(ReadError::TimedOut) => continue,
                Err(ReadError::LineTooLong(bytes)) => {
                    self.pending.push_back(Event::error(
                        "OVERSIZE_LINE",
                        format!("skipped a {bytes} byte line from {}: too long", self.cli),
                        true,
                    ));
                }
                Err(ReadError::Failed(message)) => {
                    self.process.terminate();
                    let stderr = self.process.stderr_tail();
                    let mut events = vec![Event::error(
                        crate::CLI_FAILED,
                        format!("reading {}'s output failed: {message}", self.cli),
                        false,
                    )];
                    events.extend(
                        self.translator
                            .finish(Exit::default(), &stderr)
                            .into_iter()
                            .filter(|event| {
                                event.is_done()
                                    || !matches!(event.kind, moat_guest::EventKind::Error(_))
                            }),
                    );
                    if !events.iter().any(Event::is_done) {
                        events.push(Event::done(DoneStatus::Error));
                    }
                    self.pending.extend(events);
                }
            }
        }
    }

    /// The CLI's exit status once its stdout has closed. A CLI that lingers
    /// is asked to stop after [`EXIT_GRACE`]; one that still does not exit
    /// is left to the host, which kills it when the run ends, and its
    /// status is unknown.
    fn exit_status(&mut self) -> Exit {
        if let Some(exit) = self.process.wait_timeout(EXIT_GRACE) {
            return exit;
        }
        self.process.terminate();
        self.process.wait_timeout(EXIT_GRACE).unwrap_or_default()
    }

    /// Stops the CLI and ends the run as interrupted.
    fn interrupt(&mut self) -> Event {
        self.process.terminate();
        self.pending.clear();
        self.translator.interrupted()
    }

    /// After the result line: let the CLI write its last lines and exit on
    /// its own (it saves its session then), for the grace period in all.
    fn let_it_finish(&mut self) {
        let deadline = Instant::now() + self.grace;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match self.process.read_line_timeout(left) {
                Ok(Some(_)) => continue,
                Ok(None) => {
                    self.process.wait();
                    return;
                }
                Err(_) => return,
            }
        }
    }

    /// The process, for the adapter's own use.
    pub fn process_mut(&mut self) -> &mut P {
        &mut self.process
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_guest::EventKind;

    /// A scripted process: lines, then an exit; records the signals it got.
    struct Scripted {
        lines: VecDeque<Result<Option<String>, ReadError>>,
        exit: Exit,
        terminated: bool,
        waited: bool,
        /// Once the lines are used up, chatter forever instead of ending.
        endless: bool,
        /// Keeps running after closing stdout, until terminated.
        lingers: bool,
    }

    impl Scripted {
        fn new(lines: &[&str], exit: Exit) -> Self {
            Scripted {
                lines: lines.iter().map(|l| Ok(Some((*l).to_owned()))).collect(),
                exit,
                terminated: false,
                waited: false,
                endless: false,
                lingers: false,
            }
        }
    }

    impl CliProcess for Scripted {
        fn read_line(&mut self) -> Result<Option<String>, ReadError> {
            match self.lines.pop_front() {
                Some(line) => line,
                None if self.endless => Ok(Some("chatter".into())),
                None => Ok(None),
            }
        }
        fn read_line_timeout(&mut self, _: Duration) -> Result<Option<String>, ReadError> {
            self.read_line()
        }
        fn terminate(&mut self) {
            self.terminated = true;
        }
        fn wait(&mut self) -> Exit {
            self.waited = true;
            self.exit
        }
        fn wait_timeout(&mut self, _: Duration) -> Option<Exit> {
            // A lingering process exits only once terminated.
            (!self.lingers || self.terminated).then(|| self.wait())
        }
        fn stderr_tail(&mut self) -> String {
            "the tail".into()
        }
    }

    /// A translator that turns `text:X` into a text event and `end` into
    /// done.
    #[derive(Default)]
    struct Lines {
        done: bool,
    }

    impl Translator for Lines {
        fn line(&mut self, line: &str) -> Vec<Event> {
            if line == "end" {
                self.done = true;
                return vec![Event::done(DoneStatus::Success)];
            }
            line.strip_prefix("text:")
                .map(|text| vec![Event::text(text)])
                .unwrap_or_default()
        }
        fn finish(&mut self, exit: Exit, stderr: &str) -> Vec<Event> {
            self.done = true;
            crate::failure(
                "fake",
                exit,
                stderr,
                DoneStatus::Error,
                crate::CLI_FAILED,
                None,
                0,
            )
        }
        fn interrupted(&mut self) -> Event {
            self.done = true;
            crate::interrupted(Some("s"), 0)
        }
        fn is_done(&self) -> bool {
            self.done
        }
    }

    fn drain(session: &mut CliSession<Scripted, Lines>) -> Vec<Event> {
        std::iter::from_fn(|| session.next_event()).collect()
    }

    #[test]
    fn lines_become_events_until_done_and_the_cli_may_finish() {
        let process = Scripted::new(
            &["text:a", "noise", "text:b", "end", "after"],
            Exit::code(0),
        );
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        assert_eq!(
            events,
            [
                Event::text("a"),
                Event::text("b"),
                Event::done(DoneStatus::Success)
            ]
        );
        assert!(
            session.process.waited,
            "it read to the end and reaped the CLI"
        );
        assert_eq!(session.next_event(), None);
    }

    #[test]
    fn a_cli_that_keeps_talking_after_its_result_is_not_waited_for_forever() {
        // Every read answers at once: only the grace deadline ends the wait.
        let mut process = Scripted::new(&["end"], Exit::code(0));
        process.endless = true;
        let mut session = CliSession::new("fake", process, Lines::default())
            .with_after_result_grace(Duration::from_millis(50));
        assert_eq!(session.next_event(), Some(Event::done(DoneStatus::Success)));
        assert!(
            !session.process.waited,
            "it stopped listening, still running"
        );
        assert_eq!(session.next_event(), None);
    }

    #[test]
    fn stdout_ending_without_done_ends_the_run_with_the_exit() {
        let process = Scripted::new(&["text:a"], Exit::code(3));
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        assert_eq!(events.len(), 3);
        let EventKind::Error(error) = &events[1].kind else {
            panic!("error")
        };
        assert!(error.message.contains("code 3") && error.message.contains("the tail"));
        assert!(events[2].is_done());
    }

    #[test]
    fn a_cli_lingering_after_closing_stdout_is_asked_to_stop() {
        let mut process = Scripted::new(&["text:a"], Exit::code(0));
        process.lingers = true;
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        assert!(session.process.terminated);
        assert!(events.last().unwrap().is_done());
    }

    #[test]
    fn an_interrupted_read_terminates_the_cli_and_ends_interrupted() {
        let mut process = Scripted::new(&["text:a"], Exit::code(0));
        process.lines.push_back(Err(ReadError::Interrupted));
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        let EventKind::Done(done) = &events.last().unwrap().kind else {
            panic!("done")
        };
        assert_eq!(done.status, DoneStatus::Interrupted);
        assert_eq!(done.resume_token.as_deref(), Some("s"));
        assert!(session.process.terminated);
    }

    #[test]
    fn the_abort_flag_is_checked_before_blocking() {
        let process = Scripted::new(&["text:a", "text:b"], Exit::code(0));
        let mut session = CliSession::new("fake", process, Lines::default());
        assert_eq!(session.next_event(), Some(Event::text("a")));
        moat_guest::testing::set_interrupted(true);
        let last = session.next_event();
        moat_guest::testing::set_interrupted(false);
        assert!(
            matches!(last.map(|e| e.kind), Some(EventKind::Done(d)) if d.status == DoneStatus::Interrupted)
        );
        assert!(session.process.terminated);
        assert_eq!(session.next_event(), None);
    }

    #[test]
    fn an_oversize_line_is_a_recoverable_error_and_the_run_goes_on() {
        let mut process = Scripted::new(&[], Exit::code(0));
        process
            .lines
            .push_back(Err(ReadError::LineTooLong(99_000_000)));
        process.lines.push_back(Ok(Some("text:after".into())));
        process.lines.push_back(Ok(Some("end".into())));
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        assert!(
            matches!(&events[0].kind, EventKind::Error(e) if e.recoverable && e.message.contains("99000000"))
        );
        assert_eq!(
            &events[1..],
            [Event::text("after"), Event::done(DoneStatus::Success)]
        );
    }

    #[test]
    fn a_failed_read_is_one_error_then_done_error() {
        let mut process = Scripted::new(&[], Exit::code(0));
        process
            .lines
            .push_back(Err(ReadError::Failed("pipe broke".into())));
        let mut session = CliSession::new("fake", process, Lines::default());
        let events = drain(&mut session);
        let errors: Vec<_> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Error(_)))
            .collect();
        assert_eq!(errors.len(), 1);
        assert!(events.last().unwrap().is_done());
        assert!(session.process.terminated);
    }
}
