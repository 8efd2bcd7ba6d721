//! [`CliProcess`] over moat's process capability, and starting a CLI from
//! an [`Invocation`].

use std::time::Duration;

use moat_guest::ErrorInfo;
use moat_guest::process::{Child, Command, ProcessError, Signal, Stdin};

use crate::{CliProcess, Exit, Invocation, ReadError};

/// Error code: the CLI is not installed.
pub const CLI_NOT_FOUND: &str = "CLI_NOT_FOUND";

/// A CLI started through the process capability.
#[derive(Debug)]
pub struct ChildProcess {
    child: Child,
}

impl ChildProcess {
    /// The process id on the host.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

/// Starts `invocation` with stdin closed. A refusal names what to do:
/// the grant that would allow it, or how to install a missing CLI
/// (`install`, e.g. `npm install -g @openai/codex`).
pub fn spawn(invocation: &Invocation, install: &str) -> Result<ChildProcess, ErrorInfo> {
    let mut command = Command::new(invocation.program.as_str())
        .args(invocation.args.iter().map(String::as_str))
        .stdin(Stdin::Null);
    for (name, value) in &invocation.env {
        command = command.env(name.as_str(), value.as_str());
    }
    if let Some(cwd) = &invocation.cwd {
        command = command.cwd(cwd.as_str());
    }
    let program = &invocation.program;
    command
        .spawn()
        .map(|child| ChildProcess { child })
        .map_err(|error| match error {
            ProcessError::NotFound(detail) => ErrorInfo::new(
                CLI_NOT_FOUND,
                // The host's words say where it looked; the remedy is
                // this adapter's, which knows how its program is installed.
                format!(
                    "{detail}: install it with `{install}`, \
                     or give its absolute path as extra.program and grant that path"
                ),
                false,
            ),
            ProcessError::Denied(detail) => ErrorInfo::new(
                "CAPABILITY_DENIED",
                format!("starting `{program}` was refused: {detail}"),
                false,
            ),
            other => ErrorInfo::new(
                crate::CLI_FAILED,
                format!("could not start `{program}`: {other}"),
                false,
            ),
        })
}

/// A failed read of a child's output, as a session sees it.
impl From<ProcessError> for ReadError {
    fn from(error: ProcessError) -> Self {
        match error {
            ProcessError::Interrupted => ReadError::Interrupted,
            ProcessError::TimedOut => ReadError::TimedOut,
            ProcessError::LineTooLong(bytes) => ReadError::LineTooLong(bytes),
            other => ReadError::Failed(other.to_string()),
        }
    }
}

impl CliProcess for ChildProcess {
    fn read_line(&mut self) -> Result<Option<String>, ReadError> {
        self.child.read_line().map_err(ReadError::from)
    }

    fn read_line_timeout(&mut self, timeout: Duration) -> Result<Option<String>, ReadError> {
        self.child
            .read_line_timeout(timeout)
            .map_err(ReadError::from)
    }

    fn terminate(&mut self) {
        // Already gone, or the run is ending: the host kills it then.
        let _ = self.child.signal(Signal::Terminate);
    }

    fn wait(&mut self) -> Exit {
        match self.child.wait() {
            Ok(status) => Exit {
                code: status.code,
                signal: status.signal,
            },
            Err(_) => Exit::default(),
        }
    }

    fn wait_timeout(&mut self, timeout: Duration) -> Option<Exit> {
        match self.child.wait_timeout(timeout) {
            Ok(Some(status)) => Some(Exit {
                code: status.code,
                signal: status.signal,
            }),
            Ok(None) => None,
            // Interrupted or failed: no status will come.
            Err(_) => Some(Exit::default()),
        }
    }

    fn stderr_tail(&mut self) -> String {
        self.child.stderr_tail()
    }
}

#[cfg(test)]
mod tests {
    //! Natively, the SDK starts programs with `std::process` (no grants).

    use super::*;

    fn sh(script: &str) -> Invocation {
        Invocation {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("MOAT_TEST_VALUE".into(), "from-env".into())],
            cwd: None,
        }
    }

    #[test]
    fn lines_exit_and_stderr_come_through() {
        let mut child = spawn(
            &sh("printf 'one\\n%s\\n' \"$MOAT_TEST_VALUE\"; echo oops >&2; exit 3"),
            "install sh",
        )
        .unwrap();
        assert_eq!(child.read_line(), Ok(Some("one".into())));
        assert_eq!(child.read_line(), Ok(Some("from-env".into())));
        assert_eq!(child.read_line(), Ok(None));
        assert_eq!(child.wait(), Exit::code(3));
        // The native stand-in collects stderr on a thread of its own.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !child.stderr_tail().contains("oops") {
            assert!(std::time::Instant::now() < deadline, "stderr arrives");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn terminate_ends_a_hanging_child() {
        let mut child = spawn(&sh("echo started; exec sleep 600"), "install sh").unwrap();
        assert_eq!(child.read_line(), Ok(Some("started".into())));
        child.terminate();
        assert_eq!(child.read_line(), Ok(None));
        assert_eq!(child.wait().signal, Some(15));
    }

    #[test]
    fn a_missing_program_says_how_to_install_it() {
        let invocation = Invocation {
            program: "moat-no-such-cli".into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        };
        let error = spawn(&invocation, "npm install -g moat-no-such-cli").unwrap_err();
        assert_eq!(error.code.as_deref(), Some(CLI_NOT_FOUND));
        assert!(error.message.contains("npm install -g moat-no-such-cli"));
    }
}
