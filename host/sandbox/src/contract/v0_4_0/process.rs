//! The `moat:adapter/process` import of contract 0.4.0, and of 0.3.0 and
//! 0.2.0 (the same interface): the guest's calls, converted and answered by the
//! version-neutral process capability ([`moat_contain::process`]).

use wasmtime::component::Resource;

use super::moat::adapter::process::{
    ExitStatus, Host, HostChild, ProcessError, Signal, SpawnRequest, StdinMode,
};
use crate::state::RunState;
use moat_contain::process::{self as neutral, RunningChild};

impl Host for RunState {
    async fn spawn(
        &mut self,
        request: SpawnRequest,
    ) -> wasmtime::Result<Result<Resource<RunningChild>, ProcessError>> {
        let request = neutral::SpawnRequest {
            program: request.program,
            args: request.args,
            env: request.env,
            cwd: request.cwd,
            stdin: match request.stdin {
                StdinMode::Closed => neutral::Stdin::Null,
                StdinMode::Piped => neutral::Stdin::Piped,
            },
        };
        let control = self.control.clone();
        match self
            .processes
            .spawn_guarded(&control.interrupt, request)
            .await
        {
            Ok(child) => Ok(Ok(self.table.push(child)?)),
            Err(error) => Ok(Err(process_error(error))),
        }
    }
}

impl HostChild for RunState {
    async fn id(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<u32> {
        Ok(self.table.get(&child)?.pid())
    }

    async fn read_line(
        &mut self,
        child: Resource<RunningChild>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<Option<String>, ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let line = child.read_line(&control.interrupt, timeout_ms).await;
        Ok(line.map_err(process_error))
    }

    async fn stderr_tail(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<String> {
        Ok(self.table.get(&child)?.stderr_tail())
    }

    async fn write_stdin(
        &mut self,
        child: Resource<RunningChild>,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<(), ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let written = child.write_stdin_guarded(&control.interrupt, &data).await;
        Ok(written.map_err(process_error))
    }

    async fn close_stdin(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<()> {
        self.table.get_mut(&child)?.close_stdin();
        Ok(())
    }

    async fn send_signal(
        &mut self,
        child: Resource<RunningChild>,
        signal: Signal,
    ) -> wasmtime::Result<Result<(), ProcessError>> {
        let signal = match signal {
            Signal::Interrupt => neutral::Signal::Interrupt,
            Signal::Terminate => neutral::Signal::Terminate,
            Signal::Kill => neutral::Signal::Kill,
        };
        let sent = self.table.get(&child)?.send_signal(signal);
        Ok(sent.map_err(process_error))
    }

    async fn wait(
        &mut self,
        child: Resource<RunningChild>,
        timeout_ms: Option<u32>,
    ) -> wasmtime::Result<Result<ExitStatus, ProcessError>> {
        let control = self.control.clone();
        let child = self.table.get_mut(&child)?;
        let status = child.wait(&control.interrupt, timeout_ms).await;
        Ok(status
            .map(|status| ExitStatus {
                code: status.code,
                signal: status.signal,
            })
            .map_err(process_error))
    }

    async fn drop(&mut self, child: Resource<RunningChild>) -> wasmtime::Result<()> {
        // Dropping the child kills its process group.
        self.table.delete(child)?;
        Ok(())
    }
}

fn process_error(error: neutral::ProcessError) -> ProcessError {
    use neutral::ProcessError as E;
    match error {
        E::Denied(message) => ProcessError::Denied(message),
        E::NotFound(message) => ProcessError::NotFound(message),
        E::LimitReached(message) => ProcessError::LimitReached(message),
        E::Interrupted => ProcessError::Interrupted,
        E::TimedOut => ProcessError::TimedOut,
        E::LineTooLong(bytes) => ProcessError::LineTooLong(bytes),
        E::StdinClosed => ProcessError::StdinClosed,
        E::Io(message) => ProcessError::Io(message),
    }
}
