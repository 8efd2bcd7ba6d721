//! The adapters embedded in moat, so `moat run echo "hi"` needs nothing
//! else on disk. The build script compiles them from `adapters/`: every
//! workspace package whose manifest names it a built-in
//! (`[package.metadata.moat] builtin = "echo"`).

mod profile;

pub use profile::{Profile, profile};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/builtin_adapters.rs"));
}

/// The component bytes of the built-in adapter `name`.
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

/// How to install the programs the built-in CLI adapters run (shown when
/// one is not on PATH).
const INSTALL_HINTS: &[(&str, &str)] = &[
    ("claude", "npm install -g @anthropic-ai/claude-code"),
    ("codex", "npm install -g @openai/codex"),
    ("gemini", "npm install -g @google/gemini-cli"),
];

/// The agent CLIs the built-in CLI adapters run.
pub fn agent_programs() -> impl Iterator<Item = &'static str> {
    INSTALL_HINTS.iter().map(|(program, _)| *program)
}

/// How to install `program`, when it is one a built-in adapter runs.
pub fn install_hint(program: &str) -> Option<&'static str> {
    INSTALL_HINTS
        .iter()
        .find(|(name, _)| *name == program)
        .map(|(_, hint)| *hint)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_built_in_is_embedded_as_a_component() {
        let names: Vec<&str> = super::names().collect();
        assert_eq!(
            names,
            [
                "echo",
                "fanout",
                "openai",
                "anthropic",
                "claude-code",
                "codex",
                "gemini",
                "acp"
            ]
        );
        for name in names {
            let bytes = super::component(name).unwrap();
            assert_eq!(&bytes[..4], b"\0asm", "{name}");
        }
        assert!(super::component("nope").is_none());
    }
}
