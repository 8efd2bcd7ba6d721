//! Adapters embedded in the moat binary, so `moat run echo "hi"` needs
//! nothing else on disk. The build script compiles them from `adapters/`.

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/builtin_adapters.rs"));
}

/// The component bytes of a built-in adapter.
pub fn component(name: &str) -> Option<&'static [u8]> {
    embedded::BUILTIN_ADAPTERS
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, bytes)| *bytes)
}

/// Names of the built-in adapters, in a stable order.
pub fn names() -> impl Iterator<Item = &'static str> {
    embedded::BUILTIN_ADAPTERS.iter().map(|(name, _)| *name)
}
