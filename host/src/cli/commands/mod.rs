//! One module per subcommand.

mod adapters;
mod compile;
mod inspect;
mod run;

pub use adapters::adapters;
pub use compile::compile;
pub use inspect::inspect;
pub use run::run;
