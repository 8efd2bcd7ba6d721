//! Child processes: the process capability, how an adapter drives a
//! coding-agent CLI.
//!
//! The host starts only programs the run was granted (`--allow-run`), gives
//! each child only the run's granted environment variables plus those set
//! here, runs it in a directory inside the run's granted directories, and
//! kills it (with its process group) when the run ends, whatever the
//! reason. A refused spawn fails with [`ProcessError::Denied`], whose
//! message says what was refused; the user sees the refusal as a
//! `CAPABILITY_DENIED` event too, with how to grant it.
//!
//! ```no_run
//! use moat_guest::process::{Command, ProcessError};
//!
//! let child = Command::new("claude")
//!     .args(["-p", "hello", "--output-format", "stream-json"])
//!     .env("DISABLE_AUTOUPDATER", "1")
//!     .spawn()?;
//! while let Some(line) = child.read_line()? {
//!     // translate the line into events
//! #   let _ = line;
//! }
//! let status = child.wait()?;
//! # Ok::<(), ProcessError>(())
//! ```
//!
//! When the user aborts the run, the host sends the children `SIGTERM` and
//! every pending [`Child::read_line`] or [`Child::wait`] returns
//! [`ProcessError::Interrupted`] at once: end the run with a `done` of
//! status interrupted.
//!
//! On native targets (unit tests of an adapter) there is no host: the
//! program is started directly with `std::process`, with no grants checked,
//! so adapter logic can be tested against a fake CLI with a plain
//! `cargo test`.

use std::fmt;
use std::time::Duration;

pub use moat_process_model::{ExitStatus, ProcessError, Signal, Stdin};

/// A program to start: a builder, [`Command::spawn`] starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    stdin: Stdin,
}

impl Command {
    /// A granted program, by the name it was granted with (`claude`) or
    /// its absolute path.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: Stdin::Null,
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable for the child, on top of the run's granted ones.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The working directory: inside a granted directory. Without one the
    /// child runs in an empty directory of the run's own.
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// What the child reads on stdin ([`Stdin::Null`] by default).
    pub fn stdin(mut self, stdin: Stdin) -> Self {
        self.stdin = stdin;
        self
    }

    /// The program as given.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The arguments as given.
    pub fn get_args(&self) -> &[String] {
        &self.args
    }

    /// Starts it.
    pub fn spawn(&self) -> Result<Child, ProcessError> {
        imp::spawn(self)
    }
}

/// A started child. Dropping it kills it (and its process group).
pub struct Child {
    inner: imp::Child,
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child").field("id", &self.id()).finish()
    }
}

impl Child {
    /// Its process id on the host.
    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// The next line of stdout without its line ending; `None` once stdout
    /// is closed. Returns [`ProcessError::Interrupted`] at once when the
    /// run is aborted.
    pub fn read_line(&self) -> Result<Option<String>, ProcessError> {
        self.inner.read_line(None)
    }

    /// Like [`read_line`](Self::read_line), waiting at most `timeout`
    /// ([`ProcessError::TimedOut`] then).
    pub fn read_line_timeout(&self, timeout: Duration) -> Result<Option<String>, ProcessError> {
        self.inner.read_line(Some(millis(timeout)))
    }

    /// The last bytes the child wrote to stderr so far (bounded), without
    /// waiting.
    pub fn stderr_tail(&self) -> String {
        self.inner.stderr_tail()
    }

    /// Writes to stdin (spawned with [`Stdin::Piped`]).
    pub fn write_stdin(&self, data: &[u8]) -> Result<(), ProcessError> {
        self.inner.write_stdin(data)
    }

    /// Closes stdin, so the child sees end of input.
    pub fn close_stdin(&self) {
        self.inner.close_stdin();
    }

    /// Sends `signal` to the child's process group.
    pub fn signal(&self, signal: Signal) -> Result<(), ProcessError> {
        self.inner.signal(signal)
    }

    /// Waits for the child to exit. Returns [`ProcessError::Interrupted`]
    /// at once when the run is aborted.
    pub fn wait(&self) -> Result<ExitStatus, ProcessError> {
        self.inner.wait(None)
    }

    /// Waits at most `timeout`; `None` if it is still running then.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<ExitStatus>, ProcessError> {
        match self.inner.wait(Some(millis(timeout))) {
            Ok(status) => Ok(Some(status)),
            Err(ProcessError::TimedOut) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The exit status if the child has exited, without waiting.
    pub fn try_wait(&self) -> Result<Option<ExitStatus>, ProcessError> {
        self.wait_timeout(Duration::ZERO)
    }
}

fn millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{Command, ExitStatus, ProcessError, Signal, Stdin};
    use crate::bindings::moat::adapter::process as wit;

    pub(super) struct Child(wit::Child);

    pub(super) fn spawn(command: &Command) -> Result<super::Child, ProcessError> {
        let request = wit::SpawnRequest {
            program: command.program.clone(),
            args: command.args.clone(),
            env: command.env.clone(),
            cwd: command.cwd.clone(),
            stdin: match command.stdin {
                Stdin::Null => wit::StdinMode::Closed,
                Stdin::Piped => wit::StdinMode::Piped,
            },
        };
        wit::spawn(&request)
            .map(|child| super::Child {
                inner: Child(child),
            })
            .map_err(error)
    }

    fn error(error: wit::ProcessError) -> ProcessError {
        match error {
            wit::ProcessError::Denied(m) => ProcessError::Denied(m),
            wit::ProcessError::NotFound(m) => ProcessError::NotFound(m),
            wit::ProcessError::LimitReached(m) => ProcessError::LimitReached(m),
            wit::ProcessError::Interrupted => ProcessError::Interrupted,
            wit::ProcessError::TimedOut => ProcessError::TimedOut,
            wit::ProcessError::LineTooLong(n) => ProcessError::LineTooLong(n),
            wit::ProcessError::StdinClosed => ProcessError::StdinClosed,
            wit::ProcessError::Io(m) => ProcessError::Io(m),
        }
    }

    impl Child {
        pub(super) fn id(&self) -> u32 {
            self.0.id()
        }

        pub(super) fn read_line(
            &self,
            timeout: Option<u32>,
        ) -> Result<Option<String>, ProcessError> {
            self.0.read_line(timeout).map_err(error)
        }

        pub(super) fn stderr_tail(&self) -> String {
            self.0.stderr_tail()
        }

        pub(super) fn write_stdin(&self, data: &[u8]) -> Result<(), ProcessError> {
            self.0.write_stdin(data).map_err(error)
        }

        pub(super) fn close_stdin(&self) {
            self.0.close_stdin();
        }

        pub(super) fn signal(&self, signal: Signal) -> Result<(), ProcessError> {
            self.0
                .send_signal(match signal {
                    Signal::Interrupt => wit::Signal::Interrupt,
                    Signal::Terminate => wit::Signal::Terminate,
                    Signal::Kill => wit::Signal::Kill,
                })
                .map_err(error)
        }

        pub(super) fn wait(&self, timeout: Option<u32>) -> Result<ExitStatus, ProcessError> {
            self.0
                .wait(timeout)
                .map(|status| ExitStatus {
                    code: status.code,
                    signal: status.signal,
                })
                .map_err(error)
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    //! The native stand-in: `std::process`, no grants, for unit tests.

    //!
    //! What the adapter observes (line framing, the overlong-line skip, the
    //! stderr tail, how long `wait` lets stderr drain) comes from
    //! `moat-process-model`, the same rules the host's process capability
    //! follows.

    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use moat_process_model::{Line, LineSplitter, MAX_LINE_BYTES, STDERR_SETTLE, StderrTail};

    use super::{Command, ExitStatus, ProcessError, Signal, Stdin};

    pub(super) struct Child {
        process: Mutex<std::process::Child>,
        lines: Mutex<Receiver<Line>>,
        stderr: Arc<Mutex<StderrTail>>,
        /// Set once stderr has ended, so `wait` can let it drain.
        stderr_ended: Arc<AtomicBool>,
        stdin: Mutex<Option<std::process::ChildStdin>>,
    }

    /// Reads `stdout` line by line into `lines`, cut as the host cuts
    /// them. (Unlike the host, it reads ahead of the adapter: a unit test
    /// may wait for a chatty child before reading it.)
    fn read_lines(stdout: impl Read, lines: Sender<Line>) {
        let mut reader = BufReader::new(stdout);
        let mut splitter = LineSplitter::new(MAX_LINE_BYTES);
        loop {
            let line = match reader.fill_buf() {
                Ok([]) | Err(_) => splitter.finish(),
                Ok(buffer) => {
                    let (used, line) = splitter.feed(buffer);
                    reader.consume(used);
                    match line {
                        Some(line) => line,
                        None => continue,
                    }
                }
            };
            let end = line == Line::End;
            if lines.send(line).is_err() || end {
                return;
            }
        }
    }

    pub(super) fn spawn(command: &Command) -> Result<super::Child, ProcessError> {
        let mut std_command = std::process::Command::new(&command.program);
        std_command
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdin(match command.stdin {
                Stdin::Null => std::process::Stdio::null(),
                Stdin::Piped => std::process::Stdio::piped(),
            });
        if let Some(cwd) = &command.cwd {
            std_command.current_dir(cwd);
        }
        let mut process = std_command.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ProcessError::NotFound(command.program.clone()),
            _ => ProcessError::Io(e.to_string()),
        })?;
        let (sender, lines) = channel();
        let stdout = process.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || read_lines(stdout, sender));
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let stderr_ended = Arc::new(AtomicBool::new(false));
        let tail = stderr.clone();
        let ended = stderr_ended.clone();
        let mut stderr_pipe = process.stderr.take().expect("stderr is piped");
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = stderr_pipe.read(&mut buffer) {
                tail.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(&buffer[..n]);
            }
            ended.store(true, Ordering::Release);
        });
        let stdin = process.stdin.take();
        Ok(super::Child {
            inner: Child {
                process: Mutex::new(process),
                lines: Mutex::new(lines),
                stderr,
                stderr_ended,
                stdin: Mutex::new(stdin),
            },
        })
    }

    impl Child {
        pub(super) fn id(&self) -> u32 {
            self.process
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .id()
        }

        pub(super) fn read_line(
            &self,
            timeout: Option<u32>,
        ) -> Result<Option<String>, ProcessError> {
            let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
            let line = match timeout {
                None => lines.recv().unwrap_or(Line::End),
                Some(ms) => match lines.recv_timeout(Duration::from_millis(ms.into())) {
                    Ok(line) => line,
                    Err(RecvTimeoutError::Disconnected) => Line::End,
                    Err(RecvTimeoutError::Timeout) => return Err(ProcessError::TimedOut),
                },
            };
            match line {
                Line::Text(text) => Ok(Some(text)),
                Line::TooLong(bytes) => Err(ProcessError::LineTooLong(bytes)),
                Line::End => Ok(None),
            }
        }

        pub(super) fn stderr_tail(&self) -> String {
            self.stderr
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .text()
        }

        pub(super) fn write_stdin(&self, data: &[u8]) -> Result<(), ProcessError> {
            let mut stdin = self.stdin.lock().unwrap_or_else(PoisonError::into_inner);
            let pipe = stdin.as_mut().ok_or(ProcessError::StdinClosed)?;
            pipe.write_all(data)
                .map_err(|e| ProcessError::Io(e.to_string()))
        }

        pub(super) fn close_stdin(&self) {
            self.stdin
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        }

        pub(super) fn signal(&self, signal: Signal) -> Result<(), ProcessError> {
            let name = match signal {
                Signal::Interrupt => "-INT",
                Signal::Terminate => "-TERM",
                Signal::Kill => "-KILL",
            };
            let status = std::process::Command::new("kill")
                .args([name, &self.id().to_string()])
                .status()
                .map_err(|e| ProcessError::Io(e.to_string()))?;
            if status.success() {
                Ok(())
            } else {
                Err(ProcessError::Io(format!("kill {name} failed: {status}")))
            }
        }

        pub(super) fn wait(&self, timeout: Option<u32>) -> Result<ExitStatus, ProcessError> {
            let until = timeout.map(|ms| Instant::now() + Duration::from_millis(ms.into()));
            loop {
                let status = self
                    .process
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .try_wait()
                    .map_err(|e| ProcessError::Io(e.to_string()))?;
                if let Some(status) = status {
                    let settle_until = Instant::now() + STDERR_SETTLE;
                    while !self.stderr_ended.load(Ordering::Acquire)
                        && Instant::now() < settle_until
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    return Ok(ExitStatus {
                        code: status.code(),
                        signal: status.signal(),
                    });
                }
                if until.is_some_and(|until| Instant::now() >= until) {
                    return Err(ProcessError::TimedOut);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            let process = self
                .process
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn the_native_stand_in_reads_lines_stderr_and_the_exit_status() {
        let child = Command::new("sh")
            .args(["-c", "printf 'one\\r\\ntwo\\nthree'; echo oops >&2; exit 3"])
            .spawn()
            .unwrap();
        assert_eq!(child.read_line().unwrap().as_deref(), Some("one"));
        assert_eq!(child.read_line().unwrap().as_deref(), Some("two"));
        assert_eq!(child.read_line().unwrap().as_deref(), Some("three"));
        assert_eq!(child.read_line().unwrap(), None);
        let status = child.wait().unwrap();
        assert_eq!(status.code, Some(3));
        assert!(!status.success());
        assert!(child.stderr_tail().contains("oops"));
    }

    #[test]
    fn the_native_stand_in_times_out_pipes_stdin_and_signals() {
        let child = Command::new("cat").stdin(Stdin::Piped).spawn().unwrap();
        assert_eq!(
            child.read_line_timeout(Duration::from_millis(20)),
            Err(ProcessError::TimedOut)
        );
        child.write_stdin(b"echoed\n").unwrap();
        assert_eq!(child.read_line().unwrap().as_deref(), Some("echoed"));
        assert_eq!(child.try_wait().unwrap(), None);
        child.signal(Signal::Terminate).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal, Some(15));
        child.close_stdin();
        assert_eq!(child.write_stdin(b"x"), Err(ProcessError::StdinClosed));
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let error = Command::new("/nonexistent/moat-test-program")
            .spawn()
            .unwrap_err();
        assert!(matches!(error, ProcessError::NotFound(_)), "{error:?}");
    }
}
