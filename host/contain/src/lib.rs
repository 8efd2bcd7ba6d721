//! moat's containment of the programs a run starts, and of the programs
//! that are not runs (a workflow's hooks): everything that holds a process
//! of a run to its grants, without wasmtime.
//!
//! A run that may start programs gets, at its first, an init of its own
//! ([`process`]): in network, PID and mount namespaces of the run's own
//! and its cgroup (with the run's limits), without capabilities, under a
//! socket filter; each program is one fork of it, in a Landlock domain
//! built from the run's grants. The programs reach the network only
//! through the run's proxy ([`egress`]), which applies the run's network
//! grants with the checks of a component's requests ([`destination`]) and
//! adds the run's secrets on the way out ([`secrets`]). What a request's
//! grants do not cover is refused ([`denials`]) or, for a run that asks,
//! put to whoever answers ([`approvals`]). What passes, allowed or
//! refused, is recorded with the usage of its model calls ([`traffic`]).
//!
//! The sandbox (`moat-sandbox`) gives a component's `process` import this
//! crate's [`process::ProcessTable`]; a program that is not a run is
//! started with [`run_contained`]. What a run's confinement is, as data,
//! lives with the grants ([`moat_grants::Confinement`]).

pub mod approvals;
pub mod denials;
pub mod destination;
pub mod egress;
mod fd_message;
pub mod interrupt;
pub mod process;
mod program;
pub mod secrets;
pub mod tls;
pub mod traffic;

pub use approvals::{Approver, Asking, Question, Verdict};
pub use egress::{NetworkContainment, PROXY_VARIABLES};
pub use process::landlock::available as landlock_available;
pub use process::{
    Containment, LimitsHere, clean_up_after_gone_moats, program_limits_for, program_limits_here,
};
pub use program::{Ended, Program, run_contained};
pub use secrets::{PLACEHOLDER as SECRET_PLACEHOLDER, Secret, Secrets};
