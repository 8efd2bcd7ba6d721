//! `moat-guest`: the SDK for writing moat adapters.
//!
//! A moat adapter is a WebAssembly component (`wasm32-wasip2`) that turns
//! one agent backend into the Unified Event Stream. The host runs it as
//! untrusted code, pulls its events one at a time and validates every one of
//! them. This crate hides the component plumbing: an adapter author
//! implements the [`Adapter`] trait and writes one [`export_adapter!`] line.
//!
//! ```
//! use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};
//!
//! struct Hello { sent: bool }
//!
//! impl Adapter for Hello {
//!     fn info() -> AdapterInfo {
//!         AdapterInfo::new("hello", env!("CARGO_PKG_VERSION"), "Says hello")
//!     }
//!     fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
//!         Ok(Hello { sent: false })
//!     }
//!     fn next(&mut self) -> Option<Event> {
//!         if self.sent { return None; }
//!         self.sent = true;
//!         Some(Event::text("hello"))
//!     }
//! }
//!
//! moat_guest::export_adapter!(Hello);
//! ```
//!
//! The WIT contract lives in the workspace's `wit/` directory, one folder
//! per version (package `moat:adapter`, world `adapter-world`); this SDK
//! builds against the newest, [`CONTRACT_VERSION`]. The generated types
//! are re-exported at the crate root.

mod adapter;
pub mod approvals;
mod events;
mod host;
pub mod http;
pub mod json;
pub mod log;
pub mod process;
pub mod runs;
pub mod sse;
mod types;

/// Bindings generated from the WIT contract.
///
/// Authors normally use the re-exports at the crate root; the module is
/// public because [`export_adapter!`] expands to code that refers to it.
// The items are generated from the WIT, whose comments document them.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "adapter-world",
        path: "../wit/v0.4.0",
        // The export macro is used from the adapter crates, so it must be
        // `#[macro_export]`ed and name its paths from outside this crate.
        pub_export_macro: true,
        export_macro_name: "__export_adapter_world",
        default_bindings_module: "$crate::bindings",
        additional_derives: [PartialEq],
    });
}

pub use adapter::{Adapter, Export};
pub use bindings::moat::adapter::host::LogLevel;
pub use bindings::moat::adapter::types::{
    AdapterInfo, Cost, CostSource, DoneEvent, DoneStatus, ErrorInfo, Event, EventKind,
    ExtensionEvent, InitEvent, InputTokens, Needs, Options, OutputTokens, PermissionRequestEvent,
    TokenCoverage, TokenReport, ToolResultEvent, ToolStatus, ToolUseEvent, TrustLevel, Usage,
};
pub use events::{SESSION_NOT_FOUND, TURNS_METADATA_KEY};
pub use host::interrupted;
#[cfg(not(target_arch = "wasm32"))]
pub use host::testing;
pub use serde_json;

/// The WIT package (and version) this SDK was built against, read from the
/// package line of the WIT it is generated from.
pub const CONTRACT_VERSION: &str = wit_package(include_str!("../../wit/v0.4.0/adapter.wit"));

/// The `moat:adapter@x.y.z` of the `package …;` line of a WIT source, at
/// compile time: the version is written only in the WIT.
const fn wit_package(wit: &str) -> &str {
    const PREFIX: &[u8] = b"\npackage ";
    let bytes = wit.as_bytes();
    let mut start = 0;
    while start + PREFIX.len() <= bytes.len() {
        let (_, rest) = bytes.split_at(start);
        let (head, tail) = rest.split_at(PREFIX.len());
        if eq(head, PREFIX) {
            let mut end = 0;
            while end < tail.len() && tail[end] != b';' {
                end += 1;
            }
            let (package, _) = tail.split_at(end);
            return match std::str::from_utf8(package) {
                Ok(package) => package,
                Err(_) => panic!("the WIT package line is not UTF-8"),
            };
        }
        start += 1;
    }
    panic!("the WIT has no package line")
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Exports an [`Adapter`] implementation as the component's
/// `moat:adapter/adapter` interface.
///
/// Write it once, at the root of the adapter crate:
///
/// ```
/// # use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};
/// # struct MyAdapter;
/// # impl Adapter for MyAdapter {
/// #     fn info() -> AdapterInfo { AdapterInfo::new("my", "0.1.0", "mine") }
/// #     fn start(_: String, _: Options) -> Result<Self, ErrorInfo> { Ok(MyAdapter) }
/// #     fn next(&mut self) -> Option<Event> { None }
/// # }
/// moat_guest::export_adapter!(MyAdapter);
/// ```
///
/// The crate must be built as a `cdylib` for `wasm32-wasip2`. On other
/// targets the macro only checks that the type implements [`Adapter`], so
/// the adapter's logic can be unit-tested natively.
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        // Native builds (unit tests) export nothing: the export names
        // (`moat:adapter/adapter@0.2.0#run`) are not valid native symbol
        // names, and there is no host to call them.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            // The generated export macro takes a plain identifier, so the
            // generic wrapper gets a name first.
            type MoatAdapterExport = $crate::Export<$adapter>;
            $crate::bindings::__export_adapter_world!(
                MoatAdapterExport with_types_in $crate::bindings
            );
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = $crate::assert_adapter::<$adapter>();
    };
}

/// Compiles only when `A` implements [`Adapter`]; lets [`export_adapter!`]
/// check its argument on native builds, where it exports nothing.
#[doc(hidden)]
pub const fn assert_adapter<A: Adapter>() {}

#[cfg(test)]
mod tests {
    #[test]
    fn contract_version_matches_the_wit_package() {
        assert!(super::CONTRACT_VERSION.starts_with("moat:adapter@"));
        let wit = include_str!("../../wit/v0.4.0/adapter.wit");
        let package = format!("package {};", super::CONTRACT_VERSION);
        assert!(wit.lines().any(|line| line.trim() == package), "{package}");
    }
}
