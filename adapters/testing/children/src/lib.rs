//! Test adapter for the lifecycle of children: starts `sh`, which starts a
//! `sleep` in the background and then sleeps itself, so the run has a
//! child and a grandchild. The first event is `text` `pids CHILD
//! GRANDCHILD`; then the prompt decides how the run ends:
//!
//! - `done`: a `done` success at once, the children still running;
//! - `trap`: a panic in `next` (a trap);
//! - `block`: waits for a stdout line that never comes; when the run is
//!   aborted the wait returns `interrupted` and the adapter ends with its
//!   own `done` interrupted, resume token `children-resume`;
//! - `spin`: computes forever, never looking at the abort flag;
//! - `daemons`: the child also starts a daemon (a double fork and
//!   `setsid`: re-parented at once, in a session of its own, out of the
//!   child's process group) that starts a process of its own; the text is
//!   `pids CHILD GRANDCHILD DAEMON-CHILD DAEMON`, then `done` success at
//!   once, everything still running.
//!
//! A test checks from the OS process table that neither pid outlives the
//! run, whichever way it ended.

use moat_guest::process::{Child, Command, ProcessError};
use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

/// The shell script: a grandchild in the background, its pid on stdout
/// (`PID@NAMESPACE`: moat starts contained programs in a PID namespace of
/// their own, the inode of which tells a test where the pid means
/// something), then a long sleep in the child itself.
const SCRIPT: &str = "ns=$(stat -Lc %i /proc/self/ns/pid); sleep 300 & echo $!@$ns; exec sleep 301";

/// The same, and a daemon: the subshell exits at once, so the `setsid`
/// shell is re-parented; it prints its child's pid and its own.
const DAEMONS: &str = "ns=$(stat -Lc %i /proc/self/ns/pid); sleep 300 & echo $!@$ns; \
    ( setsid sh -c 'sleep 303 & echo $!@$0; echo $$@$0; exec sleep 304' $ns & ); \
    exec sleep 301";

/// Lines of pids each script prints.
const fn pid_lines(daemons: bool) -> usize {
    if daemons { 3 } else { 1 }
}

#[derive(PartialEq)]
enum Mode {
    Done,
    Trap,
    Block,
    Spin,
    Daemons,
}

/// A run with its child.
pub struct Children {
    mode: Mode,
    child: Child,
    reported: bool,
}

impl Adapter for Children {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "children",
            env!("CARGO_PKG_VERSION"),
            "Starts a child and a grandchild, then ends as the prompt asks",
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let mode = match prompt.trim() {
            "done" => Mode::Done,
            "trap" => Mode::Trap,
            "block" => Mode::Block,
            "spin" => Mode::Spin,
            "daemons" => Mode::Daemons,
            other => {
                return Err(ErrorInfo::new(
                    "INVALID_PROMPT",
                    format!("unknown mode {other:?}; use done, trap, block, spin or daemons"),
                    false,
                ));
            }
        };
        let script = if mode == Mode::Daemons {
            DAEMONS
        } else {
            SCRIPT
        };
        let child = Command::new("sh")
            .args(["-c", script])
            .spawn()
            .map_err(|e| ErrorInfo::new("SPAWN_FAILED", e.to_string(), false))?;
        Ok(Children {
            mode,
            child,
            reported: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if !self.reported {
            self.reported = true;
            let mut pids = vec![self.child.id().to_string()];
            for _ in 0..pid_lines(self.mode == Mode::Daemons) {
                pids.push(match self.child.read_line() {
                    Ok(Some(pid)) => pid,
                    other => format!("unknown ({other:?})"),
                });
            }
            return Some(Event::text(format!("pids {}", pids.join(" ")).as_str()));
        }
        match self.mode {
            Mode::Done | Mode::Daemons => Some(DoneEvent::new(DoneStatus::Success).into()),
            Mode::Trap => panic!("trapping with children running"),
            Mode::Block => match self.child.read_line() {
                Err(ProcessError::Interrupted) => Some(
                    DoneEvent::new(DoneStatus::Interrupted)
                        .with_resume_token("children-resume")
                        .into(),
                ),
                other => Some(Event::text(format!("unexpected: {other:?}").as_str())),
            },
            Mode::Spin => {
                let mut counter = 0u64;
                loop {
                    counter = std::hint::black_box(counter.wrapping_add(1));
                }
            }
        }
    }
}

moat_guest::export_adapter!(Children);
