//! Starts children from one long-lived thread, in their own process group,
//! with the parent-death signal set.
//!
//! Linux delivers the parent-death signal when the *thread* that forked
//! the child exits, not the process. Runs are driven on tokio worker
//! threads, which come and go (blocking-pool threads, runtimes of a test):
//! forking from them would kill children at random. A dedicated thread
//! that lives as long as the process makes the signal mean what we want:
//! if the host dies, even by `SIGKILL`, its direct children die with it.

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

use tokio::process::{Child, Command};
use tokio::runtime::Handle;

use super::isolate::Containment;

/// What the spawner thread starts.
enum Job {
    /// A program of an uncontained run.
    Command {
        command: Box<Command>,
        /// The runtime of the run, whose reaper watches the child.
        runtime: Handle,
        reply: tokio::sync::oneshot::Sender<io::Result<Child>>,
    },
    /// Work that must fork from this thread (a contained run's init,
    /// [`super::init`]), which sends its own answer.
    Work(Box<dyn FnOnce() + Send>),
}

/// Starts `command` (whose stdio the caller set up) in a new process group,
/// contained as `containment` says ([`super::isolate`]), killed when
/// dropped and when the host dies.
pub(crate) async fn spawn(mut command: Command, containment: Containment) -> io::Result<Child> {
    let host_pid = std::process::id();
    command.kill_on_drop(true).process_group(0);
    // SAFETY: the closure runs in the forked child before exec and makes
    // only system calls on memory prepared before the fork, allocating
    // nothing.
    unsafe {
        command.pre_exec(move || containment.enter(host_pid));
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = Job::Command {
        command: Box::new(command),
        runtime: Handle::current(),
        reply,
    };
    // Were this future dropped while waiting (the run stopped), the
    // spawner's reply fails and the child it started is dropped there:
    // killed.
    ask(job, answer).await
}

/// Runs `work` on the spawner thread: what it forks gets a parent-death
/// signal that means "moat died". `work` answers its caller itself.
pub(crate) fn on_spawner_thread(work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    spawner()
        .send(Job::Work(Box::new(work)))
        .map_err(|_| io::Error::other("the spawner thread is gone"))
}

/// Hands `job` to the spawner thread and waits for its `answer`.
async fn ask<T>(job: Job, answer: tokio::sync::oneshot::Receiver<io::Result<T>>) -> io::Result<T> {
    let gone = || io::Error::other("the spawner thread is gone");
    spawner().send(job).map_err(|_| gone())?;
    answer.await.map_err(|_| gone())?
}

/// Tries a few times while exec fails with "text file busy": a program
/// written a moment ago (just installed, or copied by a test) stays busy
/// while any process forked meanwhile still holds the writer's descriptor,
/// until that process execs in turn, which takes microseconds.
fn spawn_retrying_busy_text(command: &mut Command) -> io::Result<Child> {
    const TRIES: u32 = 20;
    let mut tries = 1;
    loop {
        match command.spawn() {
            Err(error) if error.raw_os_error() == Some(libc::ETXTBSY) && tries < TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            started => return started,
        }
    }
}

fn spawner() -> &'static Sender<Job> {
    static SPAWNER: OnceLock<Sender<Job>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (sender, jobs) = channel::<Job>();
        std::thread::Builder::new()
            .name("moat-spawner".into())
            .spawn(move || {
                for job in jobs {
                    match job {
                        Job::Command {
                            mut command,
                            runtime,
                            reply,
                        } => {
                            let _runtime = runtime.enter();
                            let started = spawn_retrying_busy_text(&mut command);
                            // A dropped receiver drops the child: kill_on_drop.
                            let _ = reply.send(started);
                        }
                        Job::Work(work) => work(),
                    }
                }
            })
            .expect("start the moat-spawner thread");
        sender
    })
}
