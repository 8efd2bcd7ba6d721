//! Validation of what a component says about itself in `info()`.

use moat_engine::AdapterInfo;
use moat_grants::{Grants, Needs};

const MAX_NAME: usize = 64;
const MAX_VERSION: usize = 64;
const MAX_DESCRIPTION: usize = 4096;
const MAX_NEEDS: usize = 256;
const MAX_NEED: usize = 256;

/// Checks the values an untrusted component returned from `info()`: they
/// are shown to the user and used as registry keys and grant requests.
pub(crate) fn validate(info: &AdapterInfo, needs: &Needs) -> Result<(), String> {
    let name = &info.name;
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(format!(
            "name {name:?} must be 1-{MAX_NAME} characters of a-z, 0-9, '-', '_' or '.'"
        ));
    }
    check_text("version", &info.version, MAX_VERSION)?;
    check_text("description", &info.description, MAX_DESCRIPTION)?;
    for (field, list) in [
        ("needs.hosts", &needs.hosts),
        ("needs.env", &needs.env),
        ("needs.programs", &needs.programs),
    ] {
        if list.len() > MAX_NEEDS {
            return Err(format!(
                "{field} lists {} entries, over {MAX_NEEDS}",
                list.len()
            ));
        }
        for entry in list {
            if entry.is_empty() {
                return Err(format!("{field} has an empty entry"));
            }
            check_text(field, entry, MAX_NEED)?;
        }
    }
    // Declared needs become grants when the user allows them: each must be
    // a valid grant now, not a surprise then.
    Grants::from_needs(needs).map_err(|e| format!("declared needs: {e}"))?;
    Ok(())
}

fn check_text(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!("{field} is {} bytes, over {max}", text.len()));
    }
    if text.chars().any(|c| c.is_control() && c != '\n') {
        return Err(format!("{field} contains control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> AdapterInfo {
        AdapterInfo {
            name: name.into(),
            version: "1.0.0".into(),
            ..AdapterInfo::default()
        }
    }

    fn named(name: &str) -> Result<(), String> {
        validate(&info(name), &Needs::default())
    }

    #[test]
    fn names_must_be_short_lowercase_identifiers() {
        assert!(named("claude-code").is_ok());
        assert!(named("").is_err());
        assert!(named("Echo").is_err());
        assert!(named("../etc").is_err());
        assert!(named(&"a".repeat(65)).is_err());
    }

    #[test]
    fn declared_needs_must_be_valid_grants() {
        let x = info("x");
        let wide = Needs {
            hosts: vec!["*".into()],
            ..Needs::default()
        };
        assert!(validate(&x, &wide).unwrap_err().contains("every host"));
        let env = Needs {
            env: vec!["A=B".into()],
            ..Needs::default()
        };
        assert!(validate(&x, &env).is_err());
        let fine = Needs {
            hosts: vec!["api.example.com:443".into()],
            programs: vec!["claude".into()],
            ..Needs::default()
        };
        assert!(validate(&x, &fine).is_ok());
    }

    #[test]
    fn control_characters_are_refused() {
        let mut bad = info("x");
        bad.description = "hi\x1b[2J".into();
        assert!(validate(&bad, &Needs::default()).is_err());
    }
}
