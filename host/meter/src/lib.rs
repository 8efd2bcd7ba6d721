//! moat's usage meter: the tokens a run's model calls used, read from the
//! traffic moat carries for the run (a component's `wasi:http` answers, a
//! program's requests through the run's proxy and its secret routes), so
//! that a budget does not depend on what an untrusted adapter reports.
//!
//! A [`UsageReader`] reads one answer as its body passes, chunk by chunk,
//! without holding it: a byte-level JSON scanner follows the documents
//! (one JSON body, several concatenated, or the `data:` lines of
//! server-sent events) and captures only the few values that tell usage
//! and model, at the paths the vendors put them:
//! `usage`, `model`, `response.usage`, `response.model`, `message.usage`,
//! `message.model`, `usageMetadata`, `modelVersion` (arrays at a
//! document's root are transparent). A usage spelled anywhere else, in a
//! string the model wrote or deeper in the answer, is not read. Its memory
//! is bounded by a small constant whatever the answer, and it never
//! recurses; garbage, errors and compressed bodies read as no usage.
//!
//! - [`Vendor`]: the APIs read, their hosts, which calls are billed.
//! - [`UsageReader`]: one answer's bytes in, a [`Reading`] out.
//! - [`Usage`], [`Reading`]: what an answer said it used.
//!
//! This crate depends on no other moat crate.

#[doc(hidden)]
pub mod fixtures;
mod reader;
mod scan;
mod usage;
mod vendor;

#[cfg(test)]
mod tests;

pub use reader::UsageReader;
pub use usage::{Reading, Usage};
pub use vendor::Vendor;

#[doc(hidden)]
pub use fixtures::sample_answers;
