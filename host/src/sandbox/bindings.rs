//! Host-side bindings generated from the WIT contract in `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "adapter-world",
    exports: { default: async },
});

pub use self::moat::adapter::host as host_api;
pub use self::moat::adapter::types as wit;
