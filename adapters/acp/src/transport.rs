//! The agent process: starting it through moat's process capability with
//! a piped stdin, and the line transport the session speaks over
//! ([`Transport`], so the session is tested natively over a script).

use std::time::Duration;

use moat_cli_support::{CLI_FAILED, Exit, ReadError};
use moat_guest::ErrorInfo;
use moat_guest::process::{Child, Command, ProcessError, Signal, Stdin};

use crate::config::AgentCommand;

/// How long the agent may take to exit once its stdin is closed, before
/// it is asked to stop.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A line-oriented connection to the agent.
pub trait Transport {
    /// The next line the agent wrote, waiting at most `timeout` when given;
    /// `Ok(None)` once its stdout is closed.
    fn read_line(&mut self, timeout: Option<Duration>) -> Result<Option<String>, ReadError>;
    /// Writes one line (ending in `\n`) to the agent's stdin.
    fn write_line(&mut self, line: &str) -> Result<(), String>;
    /// Ends the connection: stdin closed, a moment to exit, then SIGTERM.
    fn close(&mut self);
    /// Asks the agent to stop at once (SIGTERM).
    fn terminate(&mut self);
    /// Its exit status once its stdout has closed (waiting a little).
    fn exit(&mut self) -> Exit;
    /// The tail of what it wrote on stderr.
    fn stderr_tail(&mut self) -> String;
}

/// The agent, started through the process capability.
pub struct AgentProcess {
    child: Child,
}

impl AgentProcess {
    /// Starts `agent` in `cwd` with a piped stdin. A refusal says what to
    /// grant.
    pub fn spawn(agent: &AgentCommand, cwd: Option<&str>) -> Result<Self, ErrorInfo> {
        let mut command = Command::new(agent.command.as_str())
            .args(agent.args.iter().map(String::as_str))
            .stdin(Stdin::Piped);
        for (name, value) in &agent.env {
            command = command.env(name.as_str(), value.as_str());
        }
        if let Some(cwd) = cwd {
            command = command.cwd(cwd);
        }
        let program = &agent.command;
        command
            .spawn()
            .map(|child| AgentProcess { child })
            .map_err(|error| match error {
                ProcessError::Denied(detail) => ErrorInfo::new(
                    "CAPABILITY_DENIED",
                    // The host's message names the grant that is missing
                    // (the program, or a variable of extra.env).
                    format!("starting the ACP agent `{program}` was refused: {detail}"),
                    false,
                ),
                ProcessError::NotFound(detail) => ErrorInfo::new(
                    moat_cli_support::CLI_NOT_FOUND,
                    format!(
                        "the ACP agent: {detail}; install it, or give its absolute path as extra.program and grant that path"
                    ),
                    false,
                ),
                other => ErrorInfo::new(
                    CLI_FAILED,
                    format!("could not start the ACP agent `{program}`: {other}"),
                    false,
                ),
            })
    }
}

fn exit(status: moat_guest::process::ExitStatus) -> Exit {
    Exit {
        code: status.code,
        signal: status.signal,
    }
}

impl Transport for AgentProcess {
    fn read_line(&mut self, timeout: Option<Duration>) -> Result<Option<String>, ReadError> {
        match timeout {
            Some(timeout) => self.child.read_line_timeout(timeout),
            None => self.child.read_line(),
        }
        .map_err(ReadError::from)
    }

    fn write_line(&mut self, line: &str) -> Result<(), String> {
        self.child
            .write_stdin(line.as_bytes())
            .map_err(|error| error.to_string())
    }

    fn close(&mut self) {
        self.child.close_stdin();
        if !matches!(self.child.wait_timeout(EXIT_GRACE), Ok(Some(_))) {
            self.terminate();
        }
    }

    fn terminate(&mut self) {
        // Already gone, or the run is ending: the host kills it then.
        let _ = self.child.signal(Signal::Terminate);
    }

    fn exit(&mut self) -> Exit {
        match self.child.wait_timeout(EXIT_GRACE) {
            Ok(Some(status)) => exit(status),
            Ok(None) => {
                self.terminate();
                match self.child.wait_timeout(EXIT_GRACE) {
                    Ok(Some(status)) => exit(status),
                    _ => Exit::default(),
                }
            }
            Err(_) => Exit::default(),
        }
    }

    fn stderr_tail(&mut self) -> String {
        self.child.stderr_tail()
    }
}
