//! Environment variable names and program names in grants.

use std::path::Path;

use super::error::GrantError;

/// Longest environment variable name accepted.
const MAX_ENV_NAME: usize = 256;
/// Longest program name or path accepted.
const MAX_PROGRAM: usize = 4096;

/// Checks an environment variable name: a letter or `_`, then letters,
/// digits or `_` (the portable POSIX form). Exact names only: a grant
/// names each variable it lets through.
pub fn env_name(name: &str) -> Result<String, GrantError> {
    let problem = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_ENV_NAME {
        Some("too long")
    } else if name.contains('*') {
        Some("wildcards are not supported; name each variable")
    } else if name.starts_with(|c: char| c.is_ascii_digit())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        Some("a name is letters, digits and `_`, not starting with a digit")
    } else {
        None
    };
    match problem {
        Some(reason) => Err(GrantError::EnvName {
            name: name.to_string(),
            reason: reason.into(),
        }),
        None => Ok(name.to_string()),
    }
}

/// Checks a tool's name (`ask-tools`): one exact name, as a backend calls
/// it (`Bash`, `mcp__files__read_file`): no separators, no patterns.
pub fn tool(name: &str) -> Result<String, GrantError> {
    let refuse = |reason: &str| GrantError::Tool {
        name: name.to_string(),
        reason: reason.into(),
    };
    if name.is_empty() {
        return Err(refuse("empty"));
    }
    if name.len() > 256 {
        return Err(refuse("too long"));
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || matches!(c, ',' | '(' | ')' | '*'))
    {
        return Err(refuse("one exact name: no spaces, commas or patterns"));
    }
    Ok(name.to_string())
}

/// Checks a program grant: a bare name (looked up on PATH by the process
/// capability) or an absolute path.
pub fn program(name: &str) -> Result<String, GrantError> {
    let refuse = |reason: &str| GrantError::Program {
        name: name.to_string(),
        reason: reason.into(),
    };
    if name.is_empty() {
        return Err(refuse("empty"));
    }
    if name.len() > MAX_PROGRAM {
        return Err(refuse("too long"));
    }
    if name.chars().any(char::is_control) {
        return Err(refuse("contains control characters"));
    }
    if name.contains('/') {
        let path = Path::new(name);
        if !path.is_absolute() {
            return Err(refuse(
                "a program is a bare name found on PATH or an absolute path",
            ));
        }
        if path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(refuse("a program path may not contain `..`"));
        }
        return Ok(name.to_string());
    }
    if name.starts_with(['-', '.']) || name.chars().any(char::is_whitespace) {
        return Err(refuse(
            "a program name may not start with `-` or `.` or contain whitespace",
        ));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_are_portable_identifiers() {
        assert_eq!(env_name("OPENAI_API_KEY").unwrap(), "OPENAI_API_KEY");
        assert!(env_name("http_proxy").is_ok());
        for bad in ["", "A=B", "1ABC", "A B", "A\0", "AWS_*"] {
            assert!(env_name(bad).is_err(), "{bad:?}");
        }
        assert!(
            env_name("AWS_*")
                .unwrap_err()
                .to_string()
                .contains("wildcards")
        );
    }

    #[test]
    fn programs_are_bare_names_or_absolute_paths() {
        assert!(program("claude").is_ok());
        assert!(program("/usr/bin/git").is_ok());
        for bad in [
            "",
            "./run.sh",
            "bin/x",
            "-rf",
            ".hidden",
            "a b",
            "/usr/../bin/sh",
        ] {
            assert!(program(bad).is_err(), "{bad:?}");
        }
    }
}
