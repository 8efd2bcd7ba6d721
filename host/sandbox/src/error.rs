//! Errors of loading and compiling components.

use std::path::PathBuf;

use crate::contract::version::ContractVersion;

/// Why a component could not be loaded. Every message names the problem and,
/// where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The file is empty.
    #[error("the file is empty; expected a WebAssembly component built for wasm32-wasip2")]
    Empty,
    /// The bytes are not WebAssembly.
    #[error(
        "not a WebAssembly component (no wasm header); expected a .wasm built for wasm32-wasip2"
    )]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "this is a core WebAssembly module, not a component; build the adapter with \
         `cargo build --target wasm32-wasip2` against moat-guest"
    )]
    CoreModule,
    /// The component is larger than the sandbox accepts.
    #[error("the component is {size} bytes, over the {limit}-byte limit for adapters")]
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// One of its functions is larger than the sandbox compiles: the
    /// compiler's memory grows with it.
    #[error(
        "function {index} of the component is {size} bytes, over the {limit}-byte limit \
         for one function (compiling it could take gigabytes); refusing it"
    )]
    FunctionTooLarge {
        /// The function's index among the component's function bodies.
        index: usize,
        /// Its body's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The compiler refused it (the compiler's message).
    #[error("the component does not compile: {0}")]
    Compile(String),
    /// Compiling it took longer than the sandbox allows.
    #[error("compiling the component took longer than {seconds} s; refusing it")]
    CompileTimeout {
        /// The limit, in seconds.
        seconds: u64,
    },
    /// The component does not export the adapter interface.
    #[error(
        "not a moat adapter: the component does not export `moat:adapter/adapter`; \
         build it against the moat-guest SDK"
    )]
    NotAnAdapter,
    /// The component exports something besides the adapter interface.
    #[error(
        "not a moat adapter: it exports `{name}`, but an adapter exports only \
         `moat:adapter/adapter`"
    )]
    UnexpectedExport {
        /// The export's name.
        name: String,
    },
    /// The adapter interface's version does not parse.
    #[error("the component exports moat:adapter with an unreadable version `{version}`")]
    BadVersion {
        /// The version as the component gives it.
        version: String,
    },
    /// The component was built against a contract version this host
    /// does not run (docs/contract-versions.md).
    #[error(
        "the adapter was built against contract moat:adapter@{component}, but this moat \
         runs {}; rebuild the adapter against a matching moat-guest",
        versions(.supported)
    )]
    IncompatibleContract {
        /// The version the component was built against.
        component: ContractVersion,
        /// The versions this host runs.
        supported: Vec<ContractVersion>,
    },
    /// The exports have the contract's names but not its types.
    #[error("the component's exports do not match the moat:adapter contract: {0}")]
    ContractMismatch(String),
    /// The component imports something the host does not offer.
    #[error("the component needs imports this host does not provide: {0}")]
    UnsupportedImports(String),
    /// `info()` trapped, ran out of its budget or took too long.
    #[error("the adapter failed while describing itself: {message}")]
    Info {
        /// What happened.
        message: String,
        /// The limit it reached, when that is what stopped it: raising it
        /// (for `info()`: the memory cap of the run) may let it load.
        limit: Option<moat_engine::Setting>,
    },
    /// `info()` returned values the host refuses (a bad name, invalid
    /// needs, control characters).
    #[error("the adapter's info() is invalid: {0}")]
    InvalidInfo(String),
}

fn versions(supported: &[ContractVersion]) -> String {
    let list: Vec<String> = supported.iter().map(ToString::to_string).collect();
    match list.as_slice() {
        [one] => one.clone(),
        _ => format!("{} (one of those)", list.join(", ")),
    }
}

/// Why the sandbox itself could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// wasmtime refused the configuration.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
}
