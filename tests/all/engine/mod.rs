//! The engine rules (docs/engine-rules.md) against native doubles: one
//! test per rule for single runs (`run`) and parallel runs (`parallel`),
//! the conformance scenarios through both (`conformance`), and property
//! tests over arbitrary adapter behaviour (`properties`). The same rules
//! are tested end to end with real components in the other modules.

mod conformance;
mod parallel;
mod properties;
mod run;
