//! The launch layer end to end: every path that starts runs (`moat run`,
//! `moat parallel`, `moat serve`, workflow tasks, cluster workers) admits
//! them the same way — refusals, records finished once, nested runs — and
//! what an attacker tries against admission does not get through.

mod attacks;
mod embedding;
mod entry_points;
