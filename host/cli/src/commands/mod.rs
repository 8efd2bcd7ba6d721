//! One module per subcommand.

mod adapters;
mod compile;
mod drive;
mod inspect;
mod parallel;
mod run;

pub use adapters::adapters;
pub use compile::compile;
pub use inspect::inspect;
pub use parallel::parallel;
pub use run::run;
