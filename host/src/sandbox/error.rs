//! Errors of loading and compiling components.

use std::path::PathBuf;

use super::contract::ContractVersion;

/// Why a component could not be loaded. Every message names the problem and,
/// where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the file is empty; expected a WebAssembly component built for wasm32-wasip2")]
    Empty,
    #[error(
        "not a WebAssembly component (no wasm header); expected a .wasm built for wasm32-wasip2"
    )]
    NotWasm,
    #[error(
        "this is a core WebAssembly module, not a component; build the adapter with \
         `cargo build --target wasm32-wasip2` against moat-guest"
    )]
    CoreModule,
    #[error("the component is {size} bytes, over the {limit}-byte limit for adapters")]
    TooLarge { size: u64, limit: u64 },
    #[error("the component does not compile: {0}")]
    Compile(String),
    #[error("compiling the component took longer than {seconds} s; refusing it")]
    CompileTimeout { seconds: u64 },
    #[error(
        "not a moat adapter: the component does not export `moat:adapter/adapter`; \
         build it against the moat-guest SDK"
    )]
    NotAnAdapter,
    #[error(
        "not a moat adapter: it exports `{name}`, but an adapter exports only \
         `moat:adapter/adapter`"
    )]
    UnexpectedExport { name: String },
    #[error("the component exports moat:adapter with an unreadable version `{version}`")]
    BadVersion { version: String },
    #[error(
        "the adapter was built against contract moat:adapter@{component}, but this moat \
         implements {host}; rebuild the adapter against a matching moat-guest"
    )]
    IncompatibleContract {
        component: ContractVersion,
        host: ContractVersion,
    },
    #[error("the component's exports do not match the moat:adapter contract: {0}")]
    ContractMismatch(String),
    #[error("the component needs imports this host does not provide: {0}")]
    UnsupportedImports(String),
    #[error("the adapter failed while describing itself: {0}")]
    Info(String),
    #[error("the adapter's info() is invalid: {0}")]
    InvalidInfo(String),
}

/// Why the sandbox itself could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
}
