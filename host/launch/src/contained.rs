//! Programs that are not runs, contained as a run's programs are: a
//! workflow's hooks and loop checks, whose scripts an agent may have
//! written. They get exactly the grants given here — directories, hosts,
//! variables, programs — under the same Landlock domain, network
//! containment and cgroup as a run's programs.

use moat_grants::Grants;
use moat_sandbox::{Confinement, RunScope};

pub use moat_sandbox::{Ended, ExitStatus, ProcessError, Program};

/// Runs `program` (named `name` in logs) contained to `grants`: it may
/// start `program.argv[0]` only if `grants.run` names it.
pub async fn run_contained(
    name: &str,
    grants: Grants,
    program: Program,
) -> Result<Ended, ProcessError> {
    // Its directories are opened as it starts (`RunScope::dirs` empty).
    let scope = RunScope {
        grants,
        confinement: Confinement::default(),
        ..RunScope::none()
    };
    moat_sandbox::run_contained(name, &scope, program).await
}
