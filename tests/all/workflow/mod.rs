//! Workflows: the engine through the mock runner (`engine`: order,
//! parallelism, failure, hooks, context, retries, loops, state, resume,
//! cancel), and the real `moat workflow` commands on the echo adapter
//! (`cli`: the example, validation, graphs, status, kill -9 then resume),
//! and on a NATS cluster with real workers (`cluster`: kill -9 of the
//! submitter, then a resume that re-attaches to the runs still there).

mod cli;
mod cluster;
mod engine;
