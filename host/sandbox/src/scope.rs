//! What a sandboxed run may reach, and how far its backend may go.

use moat_grants::{Grants, OpenDirs, TrustLevel};

use moat_grants::Confinement;

/// The scope of one sandboxed run, carried by the engine from the
/// [`RunRequest`](moat_engine::RunRequest) to the component: its grants,
/// which the sandbox enforces, and its trust level, which the adapter is
/// told so it can set its backend's own switches.
#[derive(Debug, Clone, Default)]
pub struct RunScope {
    /// What the run may reach; nothing by default.
    pub grants: Grants,
    /// How far the run's backend may go on its own; `sandbox` by default.
    pub trust: TrustLevel,
    /// How the programs the run starts are contained; to the run's grants
    /// by default.
    pub confinement: Confinement,
    /// Who starts the run's child runs (the contract's `runs` import);
    /// `None`: every child is refused.
    pub children: Option<crate::children::ChildRunner>,
    /// The granted directories, opened when the run was admitted: the run
    /// reaches them through these handles. A granted directory without one
    /// is opened when the run starts, the same way (no symlink followed).
    pub dirs: OpenDirs,
    /// The values of its secret grants, resolved by whoever admitted it;
    /// a secret granted without a value here is refused at the run's
    /// start.
    pub secrets: moat_contain::Secrets,
    /// Who is asked for what its grants do not cover (see
    /// [`moat_contain::approvals`]); `None`: it is refused at once.
    pub asking: Option<moat_contain::Asking>,
    /// Where its traffic is recorded, and which destinations are model
    /// APIs whose answers are read ([`moat_contain::traffic`]).
    pub traffic: moat_contain::traffic::Traffic,
}

impl RunScope {
    /// Nothing granted, the lowest trust.
    pub fn none() -> Self {
        Self::default()
    }

    /// A scope with `grants` and the lowest trust.
    pub fn granted(grants: Grants) -> Self {
        Self {
            grants,
            ..Self::default()
        }
    }
}
