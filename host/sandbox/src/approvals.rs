//! Asking instead of refusing: a run started to ask (`--ask`) carries an
//! [`Approver`], and a request of its component that its grants do not
//! cover (a host it may not reach, a program it may not start) is put to
//! it before it is refused. The guest's call waits for the answer — the
//! run is `waiting`, no CPU spent — and then goes on as if granted, or is
//! refused as it would have been, with the answer's reason.
//!
//! The sandbox only asks: who answers, how the request is recorded and
//! shown, how far an answer may reach (never past the ceiling of whoever
//! started the run) and how long it is waited for belong to the layer
//! that launched the run.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use moat_engine::Denial;

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Granted, for this request.
    Approved,
    /// Refused, and why (who refused and their reason, in words).
    Denied(String),
}

/// Who answers a run's requests.
pub trait Approver: Send + Sync {
    /// Asks for what `denial` would refuse (its remedy names the grant
    /// wanted). Dropping the future before it resolves (the run stopped)
    /// abandons the request: the implementation closes it.
    fn ask(&self, denial: Denial) -> BoxFuture<'static, Verdict>;
}

/// A run's [`Approver`], as its scope carries it.
#[derive(Clone)]
pub struct Asking(pub Arc<dyn Approver>);

impl fmt::Debug for Asking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Asking")
    }
}

/// The same approver, not an equal one.
impl PartialEq for Asking {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Asking {
    /// Asks for what `denial` refuses: `Ok` when approved, else the
    /// denial to record, its reason the answer's.
    pub(crate) async fn ask(&self, denial: Denial) -> Result<(), Denial> {
        let _waiting = crate::control::Waiting::begin();
        match self.0.ask(denial.clone()).await {
            Verdict::Approved => Ok(()),
            Verdict::Denied(reason) => Err(Denial { reason, ..denial }),
        }
    }
}
