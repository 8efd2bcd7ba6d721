//! Host-side bindings generated from the WIT contract in `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "adapter-world",
    imports: {
        // Waiting for a child is async on the host; to the guest it blocks.
        "moat:adapter/process": async | trappable,
    },
    exports: { default: async },
    with: {
        "moat:adapter/process.child": crate::sandbox::process::RunningChild,
    },
});

pub use self::moat::adapter::host as host_api;
pub use self::moat::adapter::process as process_api;
pub use self::moat::adapter::types as wit;
