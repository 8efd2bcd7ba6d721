//! The `moat:adapter/process` import: the guest's calls, answered from the
//! run's [`ProcessTable`](super::ProcessTable) and its children.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use wasmtime::component::Resource;

use super::child::{Line, RunningChild, StdinError};
use super::groups::GroupSignal;
use crate::sandbox::bindings::process_api::{self, ExitStatus, ProcessError, Signal, SpawnRequest};
use crate::sandbox::state::{RunControl, RunState};

/// How long `wait` lets a child's stderr drain after it exited.
const STDERR_SETTLE: Duration = Duration::from_millis(200);

impl process_api::Host for RunState {
    async fn spawn(
        &mut self,
        request: SpawnRequest,
    ) -> wasmtime::Result<Result<Resource<RunningChild>, ProcessError>> {
        let control = self.control.clone();
        let spawned = interruptible(&control, None, self.processes.spawn(request)).await;
        match spawned.and_then(|result| result) {
            Ok(child) => Ok(Ok(self.table.push(child)?)),
            Err(error) => Ok(Err(error)),
        }
    }
}

impl process_api::HostChild for RunState {
    async fn id(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<u32> {
        Ok(self.table.get(&child)?.pid)
    }

    async fn read_line(
        &mut self,
        child: Resource<RunningChild>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<Option<String>, ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let read = interruptible(&control, timeout_ms, child.stdout.next_line()).await;
        Ok(read.and_then(|line| match line {
            Ok(Line::Text(text)) => Ok(Some(text)),
            Ok(Line::End) => Ok(None),
            Ok(Line::TooLong(bytes)) => Err(ProcessError::LineTooLong(bytes)),
            Err(error) => Err(ProcessError::Io(format!("reading stdout: {error}"))),
        }))
    }

    async fn stderr_tail(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<String> {
        Ok(self.table.get(&child)?.stderr.text())
    }

    async fn write_stdin(
        &mut self,
        child: Resource<RunningChild>,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<(), ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let written = interruptible(&control, None, child.write_stdin(&data)).await;
        Ok(written.and_then(|result| {
            result.map_err(|error| match error {
                StdinError::Closed => ProcessError::StdinClosed,
                StdinError::Io(error) => ProcessError::Io(format!("writing stdin: {error}")),
            })
        }))
    }

    async fn close_stdin(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<()> {
        self.table.get_mut(&child)?.stdin = None;
        Ok(())
    }

    async fn send_signal(
        &mut self,
        child: Resource<RunningChild>,
        signal: Signal,
    ) -> wasmtime::Result<Result<(), ProcessError>> {
        let child = self.table.get(&child)?;
        let signal = match signal {
            Signal::Interrupt => GroupSignal::Interrupt,
            Signal::Terminate => GroupSignal::Terminate,
            Signal::Kill => GroupSignal::Kill,
        };
        Ok(child
            .groups
            .signal(child.pid, signal)
            .map_err(|error| ProcessError::Io(format!("cannot signal the child: {error}"))))
    }

    async fn wait(
        &mut self,
        child: Resource<RunningChild>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<ExitStatus, ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let waited = interruptible(&control, timeout_ms, child.process.wait()).await;
        if matches!(waited, Ok(Ok(_))) {
            // So `stderr-tail` after `wait` has the child's last words; a
            // grandchild holding stderr open must not hold up the guest.
            child.stderr.settle(STDERR_SETTLE).await;
        }
        Ok(waited.and_then(|status| match status {
            Ok(status) => Ok(ExitStatus {
                code: status.code(),
                signal: status.signal(),
            }),
            Err(error) => Err(ProcessError::Io(format!("waiting for the child: {error}"))),
        }))
    }

    async fn drop(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<()> {
        // Dropping the child kills its process group.
        self.table.delete(child)?;
        Ok(())
    }
}

/// Runs `work` unless the run is interrupted first (then at once
/// `interrupted`) or `timeout_ms` passes (`timed-out`). `work` must be
/// cancel-safe: it is dropped half way in both cases.
async fn interruptible<T>(
    control: &RunControl,
    timeout_ms: Option<u32>,
    work: impl Future<Output = T>,
) -> Result<T, ProcessError> {
    let interrupted = control.interrupt_notified();
    tokio::pin!(interrupted);
    interrupted.as_mut().enable();
    if control.is_interrupted() {
        return Err(ProcessError::Interrupted);
    }
    let timeout = async {
        match timeout_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms.into())).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = &mut interrupted => Err(ProcessError::Interrupted),
        value = work => Ok(value),
        () = timeout => Err(ProcessError::TimedOut),
    }
}
