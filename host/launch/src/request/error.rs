//! Why a request cannot be read: typed by its field, and naming it as the
//! caller wrote it (`--timeout`, `timeout`, `limits.timeoutMs`).

use std::fmt;

use super::field::Field;

/// A field of a request that cannot be taken as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// The field; `None` for a key that names no field.
    pub field: Option<Field>,
    /// How the caller wrote it.
    pub spelled: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// No field is spelled so; the nearest that is, if any.
    Unknown(Option<String>),
    /// Its value cannot be one of the field's: why, in the same words in
    /// every dialect.
    Invalid(String),
    /// It was given twice: the other spelling it was given as.
    Conflict(String),
}

impl RequestError {
    pub(crate) fn new(field: Field, spelled: &str, problem: Problem) -> Self {
        Self {
            field: Some(field),
            spelled: spelled.to_owned(),
            problem,
        }
    }

    pub(crate) fn unknown(spelled: &str, suggestion: Option<String>) -> Self {
        Self {
            field: None,
            spelled: spelled.to_owned(),
            problem: Problem::Unknown(suggestion),
        }
    }

    /// The problem alone, without the field's name (the same text in
    /// every dialect for the same value).
    pub fn problem(&self) -> String {
        match &self.problem {
            Problem::Unknown(_) => "not a field of a run".into(),
            Problem::Invalid(why) => why.clone(),
            Problem::Conflict(other) => format!("given twice, also as `{other}`"),
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.spelled;
        match &self.problem {
            Problem::Unknown(Some(nearest)) => {
                write!(
                    f,
                    "`{name}` is not a field of a run; did you mean `{nearest}`?"
                )
            }
            Problem::Unknown(None) => write!(f, "`{name}` is not a field of a run"),
            Problem::Invalid(why) => write!(f, "{name}: {why}"),
            Problem::Conflict(other) => {
                write!(f, "`{name}` and `{other}` are the same field: give one")
            }
        }
    }
}

impl std::error::Error for RequestError {}
