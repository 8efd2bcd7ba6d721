//! Workflows: the engine through the mock runner (`engine`: order,
//! parallelism, failure, hooks, context, retries, loops, state, resume,
//! cancel), and the real `moat workflow` commands on the echo adapter
//! (`cli`: the example, validation, graphs, status, kill -9 then resume).

mod cli;
mod engine;
