//! A program run outside any run, under the containment of a run's
//! programs: a workflow's hooks and loop checks, whose scripts an agent
//! may have written. It gets exactly what its grants give — the
//! same admission of programs, working directory and environment, the same
//! Landlock domain, network (through the run's proxy, refused unless
//! granted), namespaces and cgroup — and everything it starts is killed
//! when it ends.

use std::sync::Arc;
use std::time::Duration;

use std::os::unix::process::ExitStatusExt;

use moat_grants::{Grants, OpenDirs};
use moat_process_model::{ExitStatus, Line, ProcessError, STDERR_SETTLE, Stdin};

use crate::denials::DenialLog;
use crate::process::{ChildGroups, ProcessTable, SpawnRequest};

/// The most connections a contained program may have open at once.
const MAX_CONNECTIONS: usize = 16;

/// What to run.
#[derive(Debug, Clone)]
pub struct Program {
    /// The program (granted in the scope's `run` grants, by that name or
    /// its absolute path) and its arguments.
    pub argv: Vec<String>,
    /// Where it runs: inside a granted directory.
    pub cwd: String,
    /// Variables the scope grants, with their values (`grants.env` must
    /// name them).
    pub env: Vec<(String, String)>,
    /// What it reads on stdin.
    pub stdin: Vec<u8>,
    /// The most it may take; it is killed after.
    pub timeout: Duration,
}

/// How a contained program ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// Its exit status.
    pub status: ExitStatus,
    /// The end of what it wrote to stderr.
    pub stderr: String,
    /// What it was refused (a program, a directory, a host), one line
    /// each.
    pub refused: Vec<String>,
}

/// Runs `program` under `scope`'s containment, as one of a run's programs
/// would run (`name` says whose, in logs). Refused, or past its timeout,
/// it is an error; everything it started is killed when it ends.
pub async fn run_contained(
    name: &str,
    grants: &Grants,
    program: Program,
) -> Result<Ended, ProcessError> {
    // Its directories are opened as it starts, without following a link.
    let dirs = OpenDirs::default()
        .granted(grants)
        .map_err(|e| ProcessError::Denied(e.to_string()))?;
    let denials = DenialLog::default();
    let policy = crate::egress::Policy {
        rules: grants.net.as_slice().into(),
        denials: denials.clone(),
        deadline: Some(tokio::time::Instant::now() + program.timeout),
        connections: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        secrets: crate::Secrets::default(),
        token: None,
        asking: None,
        own_network: Default::default(),
        // Not a run's: nobody collects it (bounded all the same).
        traffic: Default::default(),
    };
    let groups = ChildGroups::new(crate::Containment::default());
    let mut table = ProcessTable::new(
        Arc::from(name),
        grants,
        &moat_grants::Confinement::default(),
        &dirs,
        program.env.clone(),
        groups,
        policy,
    );
    let Some((first, args)) = program.argv.split_first() else {
        return Err(ProcessError::Io("no program to run".into()));
    };
    let refused = || {
        denials
            .take()
            .into_iter()
            .map(|denial| denial.to_string())
            .collect::<Vec<_>>()
    };
    let mut child = table
        .spawn(SpawnRequest {
            program: first.clone(),
            args: args.to_vec(),
            env: Vec::new(),
            cwd: Some(program.cwd.clone()),
            stdin: Stdin::Piped,
        })
        .await?;
    let ran = tokio::time::timeout(program.timeout, async {
        // A program that does not read its stdin closes it early: that is
        // not its failure.
        let _ = child.write_stdin(&program.stdin).await;
        child.stdin = None;
        // Its stdout is not wanted, but must not fill its pipe.
        while let Ok(Line::Text(_) | Line::TooLong(_)) = child.stdout.next_line().await {}
        child.process.wait().await
    })
    .await;
    let status = match ran {
        Err(_) => return Err(ProcessError::TimedOut),
        Ok(status) => status.map_err(|e| ProcessError::Io(format!("waiting for it: {e}")))?,
    };
    child.stderr.settle(STDERR_SETTLE).await;
    Ok(Ended {
        status: ExitStatus {
            code: status.code(),
            signal: status.signal(),
        },
        stderr: child.stderr.text(),
        refused: refused(),
    })
}
