//! Each run's spans ([`moat_telemetry::RunTracer`]), made from its events
//! as they pass: after metering, so a budget's `error` and `done` are seen
//! as the run's consumer sees them.

use futures::StreamExt;
use futures::stream::BoxStream;
use moat_engine::TaskEvent;
use moat_telemetry::RunTracer;

/// `engine`'s events, each run of `tracers` (by task) traced; a run's
/// tracer ends with its `done`, or when the events are dropped.
pub(crate) fn traced(
    engine: BoxStream<'static, TaskEvent>,
    tracers: Vec<(usize, RunTracer)>,
) -> BoxStream<'static, TaskEvent> {
    if tracers.is_empty() {
        return engine;
    }
    // By task: a run's events are looked up by index, not hashed.
    let size = tracers.iter().map(|(task, _)| task + 1).max().unwrap_or(0);
    let mut by_task: Vec<Option<RunTracer>> = std::iter::repeat_with(|| None).take(size).collect();
    for (task, tracer) in tracers {
        by_task[task] = Some(tracer);
    }
    engine
        .map(move |passed| {
            if let Some(slot) = by_task.get_mut(passed.task)
                && let Some(tracer) = slot
            {
                tracer.observe(&passed.event);
                if passed.event.is_done() {
                    *slot = None;
                }
            }
            passed
        })
        .boxed()
}
