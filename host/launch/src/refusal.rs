//! Why a run is not admitted: typed, the same on every path that starts
//! runs, and worded in the caller's words ([`SettingNames`]: flags on the
//! command line, fields in the protocol) only when shown.

use std::fmt;

use moat_engine::{FieldNames, Setting, SettingNames};
use moat_grants::{Excess, GrantError, TrustLevel};
use moat_runs::RunId;

/// Whose limit a refused request passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// The ceiling of whoever started the run (a server's, a worker's, a
    /// workflow's flags), held by `0` ("this server").
    Ceiling(String),
    /// The run's parent.
    Parent(RunId),
}

/// Why a run was refused before it started. Every refusal is a boundary
/// violation: the run asked for something whoever starts it may not give.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Grants beyond the bound.
    Grants {
        /// What it asked for beyond the bound, each once.
        excess: Vec<Excess>,
        /// Whose.
        bound: Bound,
    },
    /// A trust level above the bound.
    Trust {
        /// What it asked for.
        asked: TrustLevel,
        /// The most it may have.
        most: TrustLevel,
        /// Whose.
        bound: Bound,
    },
    /// A limit beyond the bound.
    Limit {
        /// Which limit.
        setting: Setting,
        /// What it asked for, as a value the caller would write.
        asked: String,
        /// The most it may have.
        most: String,
        /// Whose.
        bound: Bound,
    },
    /// A stdio MCP server whose program the run may not start.
    McpProgram {
        /// The server's name.
        server: String,
        /// Its program.
        program: String,
    },
    /// A granted directory that cannot be opened as it was granted (gone,
    /// or swapped for a symlink since).
    Dir(GrantError),
    /// The adapter's declared needs, or its policy entry, are not grants.
    Needs(String),
    /// Runs may not nest here, or not this deep, or not this many at once.
    Nesting(String),
    /// The run asks to ask for what it lacks where nobody could answer.
    Asking(String),
    /// A limit of the run's programs asked for explicitly that this
    /// machine cannot hold (no cgroup moat may limit).
    Unheld {
        /// Which limit.
        setting: Setting,
    },
}

impl Refusal {
    /// The refusal in `names`' words, with what to do.
    pub fn message(&self, names: &dyn SettingNames) -> String {
        let beyond = |bound: &Bound| match bound {
            Bound::Ceiling(holder) => format!("more than {holder} allows"),
            Bound::Parent(id) => format!("more than its parent {id} holds"),
        };
        let remedy = |bound: &Bound, what: &str| match bound {
            Bound::Ceiling(holder) => format!("ask for less, or give {holder} {what}"),
            Bound::Parent(_) => "ask for less".to_owned(),
        };
        match self {
            Refusal::Grants { excess, bound } => {
                let items: Vec<String> = excess.iter().map(|e| excess_words(e, names)).collect();
                format!(
                    "the run asks for {}: {}; {}",
                    beyond(bound),
                    items.join(", "),
                    remedy(bound, "those grants")
                )
            }
            Refusal::Trust { asked, most, bound } => format!(
                "the run asks for {}, {} ({}); {}",
                names.assignment(Setting::Trust, asked.as_str()),
                beyond(bound),
                most,
                remedy(bound, &names.assignment(Setting::Trust, asked.as_str()))
            ),
            Refusal::Limit {
                setting,
                asked,
                most,
                bound,
            } => format!(
                "the run asks for {}, {} ({most}); {}",
                names.assignment(*setting, asked),
                beyond(bound),
                remedy(bound, &names.assignment(*setting, asked))
            ),
            Refusal::Asking(why) => why.clone(),
            Refusal::McpProgram { server, program } => format!(
                "the MCP server {server} runs {program}, which this run may not start: add {}",
                names.assignment(Setting::AllowRun, program)
            ),
            Refusal::Dir(error) => format!("{error}; grant it again as it is now"),
            Refusal::Needs(problem) => problem.clone(),
            Refusal::Nesting(problem) => problem.clone(),
            Refusal::Unheld { setting } => format!(
                "{} cannot be held here: moat may make no cgroup that limits the run's programs (run moat in a delegated cgroup, e.g. `systemd-run --user --scope -p Delegate=yes moat …`), or leave it out",
                names.setting(*setting)
            ),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&FieldNames))
    }
}

impl std::error::Error for Refusal {}

/// One grant beyond a bound, as the caller gives it.
fn excess_words(excess: &Excess, names: &dyn SettingNames) -> String {
    match excess {
        Excess::Net(rule) => names.assignment(Setting::AllowNet, &rule.to_string()),
        Excess::Read(dir) => names.assignment(Setting::AllowRead, &dir.to_string_lossy()),
        Excess::Write(dir) => names.assignment(Setting::AllowWrite, &dir.to_string_lossy()),
        Excess::Env(name) => names.assignment(Setting::AllowEnv, name),
        Excess::Run(program) => names.assignment(Setting::AllowRun, program),
        Excess::Secret(grant) => names.assignment(Setting::Secret, &grant.to_string()),
        Excess::UnixSocket(path) => {
            names.assignment(Setting::AllowUnixSocket, &path.to_string_lossy())
        }
        Excess::WriteProtected(path) => {
            names.assignment(Setting::AllowWriteProtected, &path.to_string_lossy())
        }
        Excess::Unmetered => names.setting(Setting::AllowUnmetered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_what_passed_whose_bound_and_the_fix_in_the_callers_words() {
        let refusal = Refusal::Grants {
            excess: vec![Excess::Env("KEY".into())],
            bound: Bound::Ceiling("this server".into()),
        };
        assert_eq!(
            refusal.message(&FieldNames),
            "the run asks for more than this server allows: `grants.env` KEY; ask for less, or give this server those grants"
        );
        let id = RunId::new();
        let limit = Refusal::Limit {
            setting: Setting::Fuel,
            asked: "10".into(),
            most: "5".into(),
            bound: Bound::Parent(id.clone()),
        };
        assert_eq!(
            limit.message(&FieldNames),
            format!(
                "the run asks for `limits.fuel` 10, more than its parent {id} holds (5); ask for less"
            )
        );
    }
}
