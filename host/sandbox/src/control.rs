//! The interrupt and kill switches of one run, reachable from any thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use moat_engine::SessionControl;
use wasmtime::Engine;

use moat_contain::interrupt::Interrupt;
use moat_contain::process::{ChildGroups, Signal};

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

/// Every live run of the process, to stop them all at once.
static LIVE: Mutex<Vec<Weak<RunControl>>> = Mutex::new(Vec::new());

/// Blocks while every live run of the process waits for an answer (and
/// at least one does): the epoch ticker then has nothing to interrupt,
/// and a process whose runs all wait spends no CPU. Returns at once
/// otherwise; after at most `longest` in any case.
pub(crate) fn idle_while_all_wait(longest: std::time::Duration) {
    moat_contain::approvals::idle_while_all_wait(
        || {
            LIVE.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|run| run.strong_count() > 0)
                .count()
        },
        longest,
    );
}

/// Stops every run of this process now, as [`SessionControl::kill`] does
/// one: each adapter is stopped and everything its run started is killed
/// (each run still ends with its own `done`, from the engine). For a host
/// going away: the second Ctrl-C, or after its last run.
pub fn stop_all_runs() {
    let live: Vec<Arc<RunControl>> = LIVE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for control in live {
        control.kill();
    }
}

impl RunControl {
    /// A run's switches, registered among the process's live runs; its
    /// children are contained as `containment` says.
    pub(crate) fn new(engine: Engine, containment: moat_contain::Containment) -> Arc<Self> {
        let control = Arc::new(Self {
            engine,
            interrupt: Interrupt::default(),
            killed: AtomicBool::new(false),
            children: ChildGroups::new(containment),
        });
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|run| run.strong_count() > 0);
        live.push(Arc::downgrade(&control));
        control
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
