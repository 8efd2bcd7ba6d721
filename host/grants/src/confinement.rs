//! How the programs a run starts are contained, as data: part of a run's
//! scope, decided by whoever admits the run (the CLI's `--no-contain`, an
//! adapter's state directories) and enforced by `moat-contain`.

use std::path::PathBuf;

/// How a run's programs are contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Contained to the run's grants, plus the places the programs keep
    /// their own configuration and state, readable and writable (for the
    /// built-in CLI adapters, e.g. `~/.claude`).
    Contained {
        /// Directories of their state (absolute), made when missing.
        state_dirs: Vec<PathBuf>,
        /// Files of their state (absolute), granted when they exist.
        state_files: Vec<PathBuf>,
        /// Files that run code later ([`crate::protected`]) there when
        /// the run starts, under its write grants: read-only to its
        /// programs where they run in a mount namespace of their own
        /// (whatever holds them, the launch layer puts them back).
        read_only: Vec<PathBuf>,
    },
    /// The programs run with all of the user's rights (`--no-contain`).
    Off,
}

impl Default for Confinement {
    fn default() -> Self {
        Self::Contained {
            state_dirs: Vec::new(),
            state_files: Vec::new(),
            read_only: Vec::new(),
        }
    }
}
