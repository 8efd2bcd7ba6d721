//! Which environment variables a spawned program may get, and from whom.
//!
//! A granted program (a coding-agent CLI, say) runs natively, outside the
//! sandbox. Some variables make a program run code of whoever set them:
//! the dynamic loader's (`LD_PRELOAD`), an interpreter's start-up hooks
//! (`NODE_OPTIONS=--require …`, `PYTHONSTARTUP`, `BASH_ENV`), git's
//! configuration and helpers, a Java agent; others redirect its trust or
//! its traffic (a CA bundle, a proxy) or where it finds its tools
//! (`PATH`). An adapter can never set any of them for a program it
//! spawns: that would be native code execution chosen by untrusted code.
//! The user can still pass the host's own value of one by naming it
//! exactly (`--allow-env=NODE_OPTIONS`, or in a policy file); an
//! adapter's declared needs never grant one.

/// Variables an adapter may never set, by exact name.
const DENIED_NAMES: &[&str] = &[
    // Shells and their start-up files.
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
    "PROMPT_COMMAND",
    "PS4",
    "IFS",
    "SHELLOPTS",
    "BASHOPTS",
    // Node.js (the agent CLIs are Node programs) and Electron.
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "NODE_EXTRA_CA_CERTS",
    "ELECTRON_RUN_AS_NODE",
    // Java.
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    // The C library.
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCPATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    // Programs other programs start on their own.
    "EDITOR",
    "VISUAL",
    "PAGER",
    "BROWSER",
    "SSH_ASKPASS",
    // Whose certificates are trusted, and where traffic goes.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    // Where programs are found: the host's own, never the adapter's.
    "PATH",
];

/// Variables an adapter may never set, by prefix.
const DENIED_PREFIXES: &[&str] = &[
    // The dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …; and
    // macOS's.
    "LD_",
    "DYLD_",
    // Interpreters' hooks and module paths.
    "PYTHON",
    "PERL5",
    "PERLLIB",
    "RUBY",
    // git: its configuration (which can name programs to run) and helpers.
    "GIT_CONFIG",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_ASKPASS",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    // npm's configuration (script shells, node options).
    "npm_config_",
    "NPM_CONFIG_",
];

/// Whether `name` is a variable an adapter may never set for a program it
/// spawns, and that only the user's own grant naming it exactly passes on.
pub fn is_denied_to_adapters(name: &str) -> bool {
    DENIED_NAMES.contains(&name) || DENIED_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_interpreter_and_tool_hooks_are_denied() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "NODE_OPTIONS",
            "NODE_PATH",
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "PERL5OPT",
            "RUBYOPT",
            "BASH_ENV",
            "ENV",
            "JAVA_TOOL_OPTIONS",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_SSH_COMMAND",
            "npm_config_script_shell",
            "PATH",
            "https_proxy",
        ] {
            assert!(is_denied_to_adapters(name), "{name}");
        }
        for name in [
            "HOME",
            "ANTHROPIC_API_KEY",
            "DISABLE_AUTOUPDATER",
            "TMPDIR",
            "LANG",
        ] {
            assert!(!is_denied_to_adapters(name), "{name}");
        }
    }
}
