//! A run request's flags, made from the request's one table of fields
//! (`moat_launch::request`): each field the command takes becomes its
//! flag — name, help, value — and what was given is read back as the
//! request's flags dialect, checked by the request's one reader. A field
//! added to the request is a flag of every command that takes its group.

use std::marker::PhantomData;

use clap::{Arg, ArgAction, ArgMatches, Command};
use moat_launch::request::{Dialect, Field, Group, Raw, RequestError, RunRequest, Shape};
use serde_json::{Map, Value};

/// Which fields a command takes as flags.
pub trait FieldSet: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// Whether the command takes `field`.
    fn takes(field: Field) -> bool;
}

/// A run's own flags: `moat run`, `parallel` (shared by every task) and
/// `acp` (every prompt's run). The adapter and prompt are positionals.
#[derive(Debug, Clone)]
pub struct RunFields;

impl FieldSet for RunFields {
    fn takes(field: Field) -> bool {
        !matches!(field, Field::Adapter | Field::Prompt | Field::Role)
    }
}

/// A ceiling's flags: the most a run started here may have (`moat serve`,
/// `moat worker`): grants, trust, limits, the policy.
#[derive(Debug, Clone)]
pub struct CeilingFields;

impl FieldSet for CeilingFields {
    fn takes(field: Field) -> bool {
        matches!(field.group(), Group::Grants | Group::Limits)
            || matches!(
                field,
                Field::Trust | Field::Policy | Field::GrantDeclared | Field::NoContain
            )
    }
}

/// A workflow's flags: its ceiling, and how its tasks ask.
#[derive(Debug, Clone)]
pub struct WorkflowFields;

impl FieldSet for WorkflowFields {
    fn takes(field: Field) -> bool {
        CeilingFields::takes(field) || field.group() == Group::Ask
    }
}

/// The grants an adapter is installed with.
#[derive(Debug, Clone)]
pub struct GrantFields;

impl FieldSet for GrantFields {
    fn takes(field: Field) -> bool {
        field.group() == Group::Grants || field == Field::GrantDeclared
    }
}

/// What `moat inspect` shows the effect of: grants, and the trust and
/// directories their presets apply to.
#[derive(Debug, Clone)]
pub struct InspectFields;

impl FieldSet for InspectFields {
    fn takes(field: Field) -> bool {
        field.group() == Group::Grants
            || matches!(
                field,
                Field::Trust
                    | Field::Cwd
                    | Field::Directories
                    | Field::Policy
                    | Field::GrantDeclared
                    | Field::NoContain
            )
    }
}

/// The request fields a command was given, as flags.
#[derive(Debug, Clone)]
pub struct RequestFlags<S> {
    /// What was given, by flag (`--timeout` → `30s`).
    given: Map<String, Value>,
    set: PhantomData<S>,
}

impl<S> Default for RequestFlags<S> {
    fn default() -> Self {
        Self {
            given: Map::new(),
            set: PhantomData,
        }
    }
}

impl<S: FieldSet> RequestFlags<S> {
    /// The fields the command takes as flags, in the order help shows
    /// them: by heading, then as the request lists them.
    fn fields() -> impl Iterator<Item = Field> {
        let mut fields: Vec<Field> = Field::all()
            .filter(|field| S::takes(*field) && !Dialect::Flags.spellings(*field).is_empty())
            .collect();
        fields.sort_by_key(|field| HEADINGS.iter().position(|h| *h == heading(*field)));
        fields.into_iter()
    }

    /// What was given, as the request reads it.
    pub fn raw(&self) -> Result<Raw, RequestError> {
        Raw::read(&self.given, Dialect::Flags, None, &[])
    }

    /// The request these flags make.
    pub fn request(&self) -> Result<RunRequest, RequestError> {
        RunRequest::from_raw(&self.raw()?)
    }

    /// Whether `field` was given.
    pub fn has(&self, field: Field) -> bool {
        self.given.contains_key(&Dialect::Flags.name_of(field))
    }

    /// Gives `field` `value` unless it was given: a default from the
    /// config file.
    pub fn default_to(&mut self, field: Field, value: &str) {
        self.given
            .entry(Dialect::Flags.name_of(field))
            .or_insert_with(|| Value::String(value.to_owned()));
    }
}

/// The flag of `field`.
fn arg_of(field: Field) -> Arg {
    let long = id_of(field);
    let arg = Arg::new(long.clone())
        .long(long)
        .help(field.doc())
        .help_heading(heading(field));
    let arg = match field.shape() {
        Shape::Switch => arg.action(ArgAction::SetTrue),
        Shape::One => arg.value_name(field.value_name()).action(ArgAction::Set),
        Shape::List => arg
            .value_name(field.value_name())
            .action(ArgAction::Append)
            .value_delimiter(','),
    };
    match field {
        Field::Parent => arg.add(crate::complete::runs()),
        Field::Cwd | Field::Directories | Field::Read | Field::Write => {
            arg.value_hint(clap::ValueHint::DirPath)
        }
        Field::Policy
        | Field::PriceTable
        | Field::Agents
        | Field::McpServers
        | Field::UnixSocket
        | Field::WriteProtected => arg.value_hint(clap::ValueHint::FilePath),
        _ => arg,
    }
}

/// The id of `field`'s flag: its long name (unique, where canonical
/// names are unique within a group only).
fn id_of(field: Field) -> String {
    Dialect::Flags
        .name_of(field)
        .trim_start_matches("--")
        .to_owned()
}

/// The headings of `moat run --help`, in order.
const HEADINGS: &[&str] = &[
    "Agent",
    "Session",
    "Grants",
    "Limits",
    "Workspace",
    "Output",
];

/// Where `moat run --help` lists a field.
fn heading(field: Field) -> &'static str {
    match field {
        Field::Resume | Field::NoResumeFallback | Field::Parent | Field::RetryOnWorkerLoss => {
            "Session"
        }
        Field::PriceTable => "Output",
        Field::Drain => "Limits",
        _ => match field.group() {
            Group::Options => "Agent",
            Group::Limits => "Limits",
            Group::Workspace => "Workspace",
            Group::Grants | Group::Ask | Group::Run => "Grants",
        },
    }
}

impl<S: FieldSet> clap::Args for RequestFlags<S> {
    fn augment_args(command: Command) -> Command {
        Self::fields().fold(command, |command, field| command.arg(arg_of(field)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl<S: FieldSet> clap::FromArgMatches for RequestFlags<S> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for field in Self::fields() {
            let id = id_of(field);
            let id = id.as_str();
            let value = match field.shape() {
                Shape::Switch => matches.get_flag(id).then_some(Value::Bool(true)),
                Shape::One => matches
                    .get_one::<String>(id)
                    .map(|value| Value::String(value.clone())),
                Shape::List => matches.get_many::<String>(id).map(|values| {
                    Value::Array(values.map(|value| Value::String(value.clone())).collect())
                }),
            };
            if let Some(value) = value {
                self.given.insert(Dialect::Flags.name_of(field), value);
            }
        }
        Ok(())
    }
}
