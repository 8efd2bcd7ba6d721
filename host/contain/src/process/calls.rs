//! The process capability's calls, as every contract version answers them:
//! each waits only as long as the run is not aborted and the adapter's own
//! timeout allows.

use std::os::unix::process::ExitStatusExt;

use moat_process_model::{Line, STDERR_SETTLE};

use super::child::{RunningChild, StdinError};
use super::{ExitStatus, ProcessError, ProcessTable, Signal, SpawnRequest};
use crate::interrupt::{Cut, Interrupt};

impl From<Cut> for ProcessError {
    fn from(cut: Cut) -> Self {
        match cut {
            Cut::Interrupted => ProcessError::Interrupted,
            Cut::TimedOut => ProcessError::TimedOut,
        }
    }
}

impl ProcessTable {
    /// `spawn`: starts what `request` asks for, if the run was granted it.
    pub async fn spawn_guarded(
        &mut self,
        interrupt: &Interrupt,
        request: SpawnRequest,
    ) -> Result<RunningChild, ProcessError> {
        interrupt.guard(None, self.spawn(request)).await?
    }
}

impl RunningChild {
    /// `read-line`: the next stdout line, `None` once stdout is closed.
    pub async fn read_line(
        &mut self,
        interrupt: &Interrupt,
        timeout_ms: Option<u32>,
    ) -> Result<Option<String>, ProcessError> {
        match interrupt.guard(timeout_ms, self.stdout.next_line()).await? {
            Ok(Line::Text(text)) => Ok(Some(text)),
            Ok(Line::End) => Ok(None),
            Ok(Line::TooLong(bytes)) => Err(ProcessError::LineTooLong(bytes)),
            Err(error) => Err(ProcessError::Io(format!("reading stdout: {error}"))),
        }
    }

    /// `stderr-tail`: the last bytes of stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    /// `write-stdin`.
    pub async fn write_stdin_guarded(
        &mut self,
        interrupt: &Interrupt,
        data: &[u8],
    ) -> Result<(), ProcessError> {
        interrupt
            .guard(None, self.write_stdin(data))
            .await?
            .map_err(|error| match error {
                StdinError::Closed => ProcessError::StdinClosed,
                StdinError::Io(error) => ProcessError::Io(format!("writing stdin: {error}")),
            })
    }

    /// `close-stdin`.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// `send-signal`: to the child's process group.
    pub fn send_signal(&self, signal: Signal) -> Result<(), ProcessError> {
        self.groups
            .signal(self.pid, signal)
            .map_err(|error| ProcessError::Io(format!("cannot signal the child: {error}")))
    }

    /// `wait`: the exit status, with stderr given [`STDERR_SETTLE`] to
    /// drain so `stderr-tail` after `wait` holds the child's last words.
    pub async fn wait(
        &mut self,
        interrupt: &Interrupt,
        timeout_ms: Option<u32>,
    ) -> Result<ExitStatus, ProcessError> {
        let status = interrupt.guard(timeout_ms, self.process.wait()).await?;
        let status =
            status.map_err(|error| ProcessError::Io(format!("waiting for the child: {error}")))?;
        self.stderr.settle(STDERR_SETTLE).await;
        Ok(ExitStatus {
            code: status.code(),
            signal: status.signal(),
        })
    }
}
