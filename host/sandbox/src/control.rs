//! The interrupt and kill switches of one run, reachable from any thread.

use std::sync::atomic::{AtomicBool, Ordering};

use moat_engine::SessionControl;
use wasmtime::Engine;

use crate::interrupt::Interrupt;
use crate::process::{ChildGroups, Signal};

/// What the engine's [`SessionControl`] reaches in a running run: the
/// cooperative abort flag, the kill switch and the run's children.
#[derive(Debug)]
pub(crate) struct RunControl {
    engine: Engine,
    /// Raised at abort; wakes host calls that wait for a child.
    pub(crate) interrupt: Interrupt,
    killed: AtomicBool,
    /// The run's children, signalled at interrupt and killed at kill.
    pub(crate) children: ChildGroups,
}

impl RunControl {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            interrupt: Interrupt::default(),
            killed: AtomicBool::new(false),
            children: ChildGroups::default(),
        }
    }

    pub(crate) fn is_interrupted(&self) -> bool {
        self.interrupt.is_raised()
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

impl SessionControl for RunControl {
    fn interrupt(&self) {
        self.interrupt.raise();
        // Children are asked to stop now (ENG-005); the drain gives the
        // adapter time to report, and the end of the run kills them.
        self.children.signal_all(Signal::Terminate);
        // A guest computing right now reaches its epoch check at once and
        // yields, so the task driving it can start the drain.
        self.engine.increment_epoch();
    }

    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.children.kill_all();
        self.engine.increment_epoch();
    }
}
