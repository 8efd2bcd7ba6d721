//! The real `moat` binary, run as a user runs it: output formats, exit
//! codes, limits, Ctrl-C, inspect and compile, every bad input (`run`),
//! and the built-in CLI adapters with a stand-in CLI (`adapters`).

mod adapters;
mod common;
mod run;
mod stopping;
mod terminal;
