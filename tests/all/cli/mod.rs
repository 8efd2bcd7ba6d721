//! The real `moat` binary, run as a user runs it: output formats, exit
//! codes, limits, Ctrl-C, inspect and compile, every bad input (`run`),
//! the built-in CLI adapters with a stand-in CLI (`adapters`), and the run
//! store: records, logs, cancel from elsewhere, crashes (`store`), and a
//! run's result as one JSON object (`result`).

mod adapters;
mod approvals;
mod budgets;
mod cligent;
pub(crate) mod common;
mod discovery;
mod everyday;
mod installed;
mod new;
mod newcomer;
mod privacy;
mod requests;
mod result;
mod run;
mod stopping;
pub(crate) mod store;
mod terminal;
mod usage;
mod workspaces;
