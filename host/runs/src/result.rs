//! What every reader of runs asks the same way, on top of [`Runs`]: an
//! ended run's result, and whether a follower may start from an event.

use moat_engine::{EngineResult, ResultFold};

use crate::id::RunId;
use crate::runs::{Runs, RunsError, StoredEvent};

/// How many stored events are read at a time when a result is folded.
const PAGE: usize = 4096;

/// The engine contract's result of run `id`, folded from its stored
/// events (as `moat run --output json` folds them live).
pub async fn result(runs: &dyn Runs, id: &RunId) -> Result<EngineResult, RunsError> {
    let mut fold = ResultFold::new();
    each_stored(runs, id, |stored| {
        if let Some(event) = stored.event() {
            fold.observe(&event, &mut ());
        }
    })
    .await?;
    Ok(fold.finish())
}

/// Hands each stored event of run `id` to `seen`, in order, a page at a
/// time (a long run's replay holds one page).
pub(crate) async fn each_stored(
    runs: &dyn Runs,
    id: &RunId,
    mut seen: impl FnMut(&StoredEvent),
) -> Result<(), RunsError> {
    let mut from = 0;
    loop {
        let page = runs.stored(id, from, PAGE).await?;
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
        page.iter().for_each(&mut seen);
    }
    Ok(())
}

/// Refuses to follow run `id` from event `from` when the run has ended
/// before it: such a follower would wait for events that never come.
pub async fn check_from(runs: &dyn Runs, id: &RunId, from: u64) -> Result<(), RunsError> {
    if from == 0 {
        return Ok(());
    }
    let ended = runs
        .get(id)
        .await?
        .is_some_and(|record| record.is_terminal());
    if ended && runs.stored(id, from, 1).await?.is_empty() {
        return Err(RunsError::Invalid(format!(
            "run {id} has ended before event {from}: fromSeq is past its end"
        )));
    }
    Ok(())
}
