//! The five ways a run request is written, each with its spelling
//! convention: the command line's flags, a policy file's per-adapter
//! entries, a `moat parallel` tasks file, a workflow file's tasks, and the
//! protocol's `run`. A request in any of them is read here into one
//! [`Raw`] by the one table of fields ([`super::field`]): a key no field
//! is spelled as is refused, naming the nearest one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::error::{Problem, RequestError};
use super::field::{Dialects, FIELDS, Field, Group};

/// A way of writing a run request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `moat run`'s flags: `--allow-net`, `--max-memory`.
    Flags,
    /// A policy file's entries (TOML): `allow-net`, `max-memory`.
    Policy,
    /// A `moat parallel` tasks file (JSON or TOML): `allowNet`, `maxMemory`.
    Tasks,
    /// A workflow file's task (TOML or JSON): `grants.net`,
    /// `limits.max_memory`, `options.model`.
    Workflow,
    /// The protocol's `run` (JSON): `grants.net`, `limits.maxMemory`,
    /// `options.model`.
    Protocol,
}

/// Spellings kept from before the names were one, each a field's name in
/// one dialect in place of the derived one (a field may have several: all
/// are read, the first is the one messages use).
pub(crate) const RENAMES: &[(Field, Dialect, &str)] = &[
    (Field::Adapter, Dialect::Flags, "ADAPTER"),
    (Field::Prompt, Dialect::Flags, "PROMPT"),
    (Field::Role, Dialect::Flags, "ROLE"),
    (Field::Directories, Dialect::Flags, "--add-dir"),
    (Field::McpServers, Dialect::Flags, "--mcp-config"),
    (Field::Secrets, Dialect::Flags, "--secret"),
    (Field::Secrets, Dialect::Policy, "secret"),
    (Field::Secrets, Dialect::Tasks, "secret"),
    (Field::Meter, Dialect::Flags, "--meter"),
    (Field::Meter, Dialect::Policy, "meter"),
    (Field::Meter, Dialect::Tasks, "meter"),
    (Field::Ask, Dialect::Flags, "--ask"),
    (Field::Ask, Dialect::Tasks, "ask"),
    (Field::Ask, Dialect::Protocol, "ask"),
    (Field::AskTools, Dialect::Flags, "--ask-tools"),
    (Field::AskTools, Dialect::Policy, "ask-tools"),
    (Field::AskTools, Dialect::Tasks, "askTools"),
    (Field::ApprovalTimeout, Dialect::Flags, "--approval-timeout"),
    (Field::ApprovalTimeout, Dialect::Tasks, "approvalTimeout"),
    (Field::ApprovalTimeout, Dialect::Protocol, "ask.timeoutMs"),
    (Field::ApprovalTimeout, Dialect::Protocol, "ask.noTimeout"),
    (Field::Workspace, Dialect::Flags, "--workspace"),
    (Field::Workspace, Dialect::Tasks, "workspace"),
    (Field::Workspace, Dialect::Workflow, "workspace"),
    (Field::Base, Dialect::Flags, "--base"),
    (Field::Base, Dialect::Tasks, "base"),
    (Field::IncludeDirty, Dialect::Flags, "--include-dirty"),
    (Field::IncludeDirty, Dialect::Tasks, "includeDirty"),
    (Field::System, Dialect::Protocol, "options.systemPrompt"),
    (Field::Timeout, Dialect::Workflow, "timeout"),
    (Field::Timeout, Dialect::Protocol, "limits.timeoutMs"),
    (Field::MaxMemory, Dialect::Protocol, "limits.maxMemoryBytes"),
    (
        Field::MaxEventSize,
        Dialect::Protocol,
        "limits.maxEventBytes",
    ),
    (
        Field::MaxBudgetUsd,
        Dialect::Protocol,
        "limits.maxBudgetUsd",
    ),
    (
        Field::MaxBudgetUsd,
        Dialect::Protocol,
        "options.maxBudgetUsd",
    ),
];

impl Dialects {
    /// Whether `dialect` is one of them.
    pub(crate) fn has(self, dialect: Dialect) -> bool {
        self.has_bit(match dialect {
            Dialect::Flags => Self::FLAGS,
            Dialect::Policy => Self::POLICY,
            Dialect::Tasks => Self::TASKS,
            Dialect::Workflow => Self::WORKFLOW,
            Dialect::Protocol => Self::PROTOCOL,
        })
    }
}

impl Dialect {
    /// Every spelling of `field` here, the one messages use first; none
    /// when this dialect does not take it.
    pub fn spellings(self, field: Field) -> Vec<String> {
        let spec = field.spec();
        if !spec.dialects.has(self) {
            return Vec::new();
        }
        let renamed: Vec<String> = RENAMES
            .iter()
            .filter(|(f, d, _)| *f == field && *d == self)
            .map(|(_, _, spelled)| (*spelled).to_owned())
            .collect();
        if !renamed.is_empty() {
            return renamed;
        }
        let name = spec.name;
        let flat = match spec.group {
            Group::Grants => format!("allow_{name}"),
            _ => name.to_owned(),
        };
        let nested = |word: String| match spec.group.key() {
            Some(group) => format!("{group}.{word}"),
            None => word,
        };
        vec![match self {
            Dialect::Flags => format!("--{}", kebab(&flat)),
            Dialect::Policy => kebab(&flat),
            Dialect::Tasks => camel(&flat),
            Dialect::Workflow => nested(name.to_owned()),
            Dialect::Protocol => nested(camel(name)),
        }]
    }

    /// Whether a relative path written here is relative to a place (a
    /// file's directory, the working directory), not refused.
    pub fn takes_relative_paths(self) -> bool {
        self != Dialect::Protocol
    }

    /// How `field` is written here, for messages.
    pub fn name_of(self, field: Field) -> String {
        self.spellings(field)
            .into_iter()
            .next()
            .unwrap_or_else(|| field.name().to_owned())
    }

    /// Whether keys nest by group (`grants.net`) rather than sit flat.
    fn nests(self) -> bool {
        matches!(self, Dialect::Workflow | Dialect::Protocol)
    }

    /// Every spelling this dialect reads, with its field.
    fn table(self) -> Vec<(String, Field)> {
        FIELDS
            .iter()
            .flat_map(|spec| {
                self.spellings(spec.field)
                    .into_iter()
                    .map(move |spelled| (spelled, spec.field))
            })
            .collect()
    }
}

/// `snake_case` as `kebab-case`.
fn kebab(snake: &str) -> String {
    snake.replace('_', "-")
}

/// `snake_case` as `camelCase`.
fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// One field as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// Its value, as written (a flag's: a string, or a list of them).
    pub value: Value,
    /// How it was spelled.
    pub spelled: String,
    /// What a relative path in it is relative to.
    pub base: Option<PathBuf>,
    /// The dialect it was written in.
    pub dialect: Dialect,
}

/// A request as read, before its values are: each field given, once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raw {
    pub(crate) fields: BTreeMap<Field, Given>,
    /// Whether its grants were given as a group, maybe empty (`grants =
    /// {}` asks for no grant at all, where leaving it out asks for all
    /// that is allowed).
    pub(crate) grants_named: bool,
}

impl Raw {
    /// Reads `request` (an object) written in `dialect`; relative paths in
    /// it are relative to `base` (the file's directory; the working
    /// directory when `None`). Keys in `own` belong to whoever reads the
    /// rest (a workflow task's `id`): they are passed over here, and
    /// offered as suggestions for a mistyped key.
    pub fn read(
        request: &Map<String, Value>,
        dialect: Dialect,
        base: Option<&Path>,
        own: &[&str],
    ) -> Result<Raw, RequestError> {
        let table = dialect.table();
        let mut raw = Raw::default();
        let mut take = |spelled: String, value: &Value| -> Result<(), RequestError> {
            let Some((_, field)) = table.iter().find(|(name, _)| *name == spelled) else {
                return Err(unknown(&spelled, &table, own));
            };
            if let Some(earlier) = raw.fields.get(field) {
                return Err(RequestError::new(
                    *field,
                    &spelled,
                    Problem::Conflict(earlier.spelled.clone()),
                ));
            }
            raw.fields.insert(
                *field,
                Given {
                    value: value.clone(),
                    spelled,
                    base: base.map(Path::to_path_buf),
                    dialect,
                },
            );
            Ok(())
        };
        for (key, value) in request {
            if own.contains(&key.as_str()) {
                continue;
            }
            let group = dialect.nests().then(|| group_of(key)).flatten();
            match (group, value) {
                // A group's object: each key in it is a field of the group
                // (`ask` is also the field Ask: asking, with these).
                (Some(group), Value::Object(inner)) => {
                    raw.grants_named |= group == Group::Grants;
                    if table.iter().any(|(name, _)| name == key) {
                        take(key.clone(), &Value::Bool(true))?;
                    }
                    for (name, value) in inner {
                        take(
                            format!("{}.{name}", group.key().expect("a nested group")),
                            value,
                        )?;
                    }
                }
                _ => take(key.clone(), value)?,
            }
        }
        Ok(raw)
    }

    /// These fields, and those of `under` that these leave out: a task's
    /// own fields over the shared flags.
    pub fn over(mut self, under: &Raw) -> Raw {
        for (field, given) in &under.fields {
            self.fields.entry(*field).or_insert_with(|| given.clone());
        }
        self.grants_named |= under.grants_named;
        self
    }

    /// Whether `field` was given.
    pub fn has(&self, field: Field) -> bool {
        self.fields.contains_key(&field)
    }

    /// Gives `field` as written in `dialect` (a request a program makes:
    /// a parallel task's adapter and prompt from `--task`).
    pub fn set(&mut self, field: Field, value: Value, dialect: Dialect) {
        self.fields.insert(
            field,
            Given {
                value,
                spelled: dialect.name_of(field),
                base: None,
                dialect,
            },
        );
    }
}

/// The group whose key `key` is.
fn group_of(key: &str) -> Option<Group> {
    [
        Group::Options,
        Group::Grants,
        Group::Limits,
        Group::Ask,
        Group::Workspace,
    ]
    .into_iter()
    .find(|group| group.key() == Some(key))
}

/// A key no field is spelled as, with the nearest spelling that is.
fn unknown(spelled: &str, table: &[(String, Field)], own: &[&str]) -> RequestError {
    let suggestion = table
        .iter()
        .map(|(name, _)| name.as_str())
        .chain(own.iter().copied())
        .map(|name| (strsim::jaro_winkler(spelled, name), name))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name.to_owned());
    RequestError::unknown(spelled, suggestion)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rename_is_of_a_dialect_that_takes_its_field() {
        for (field, dialect, spelled) in RENAMES {
            assert!(
                field.spec().dialects.has(*dialect),
                "{field:?} is renamed {spelled} in {dialect:?}, which does not take it"
            );
        }
    }

    #[test]
    fn each_dialect_spells_a_field_by_its_convention() {
        let cases = [
            (
                Field::Net,
                [
                    "--allow-net",
                    "allow-net",
                    "allowNet",
                    "grants.net",
                    "grants.net",
                ],
            ),
            (
                Field::MaxMemory,
                [
                    "--max-memory",
                    "max-memory",
                    "maxMemory",
                    "limits.max_memory",
                    "limits.maxMemoryBytes",
                ],
            ),
            (
                Field::Model,
                ["--model", "", "model", "options.model", "options.model"],
            ),
            (
                Field::Timeout,
                [
                    "--timeout",
                    "timeout",
                    "timeout",
                    "timeout",
                    "limits.timeoutMs",
                ],
            ),
        ];
        let dialects = [
            Dialect::Flags,
            Dialect::Policy,
            Dialect::Tasks,
            Dialect::Workflow,
            Dialect::Protocol,
        ];
        for (field, names) in cases {
            for (dialect, name) in dialects.iter().zip(names) {
                let spelled = dialect.spellings(field);
                assert_eq!(
                    spelled.first().map(String::as_str).unwrap_or(""),
                    name,
                    "{field:?} {dialect:?}"
                );
            }
        }
    }

    #[test]
    fn nested_groups_are_read_and_a_mistyped_key_names_the_nearest() {
        let request: Map<String, Value> = serde_json::from_str(
            r#"{"adapter": "echo", "grants": {"net": ["a.example"]}, "ask": {"tools": ["Bash"]}}"#,
        )
        .unwrap();
        let raw = Raw::read(&request, Dialect::Protocol, None, &[]).unwrap();
        assert!(raw.has(Field::Net) && raw.has(Field::AskTools) && raw.has(Field::Ask));
        let typo: Map<String, Value> = serde_json::from_str(r#"{"grants": {"nett": []}}"#).unwrap();
        let error = Raw::read(&typo, Dialect::Protocol, None, &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`grants.nett` is not a field of a run; did you mean `grants.net`?"
        );
        let twice: Map<String, Value> =
            serde_json::from_str(r#"{"ask": {"timeoutMs": 5, "noTimeout": true}}"#).unwrap();
        let error = Raw::read(&twice, Dialect::Protocol, None, &[]).unwrap_err();
        assert_eq!(error.field, Some(Field::ApprovalTimeout));
    }
}
