//! A contained run's init: one small process per run, started with the
//! run's first program, which starts all of the run's programs.
//!
//! Why one per run: a program forked from moat costs a copy of moat's page
//! tables, and the flush of the other cores' views of them, per fork; a
//! contained program used to need three such forks (a stand-in, an init of
//! its own PID namespace, the program) and made its namespaces, cgroup
//! move and socket filter anew. The run's init does all of that once: it
//! is in the run's network, PID and mount namespaces and cgroup, holds no
//! capability and the socket filter already; a program is one fork of it
//! (single-threaded: no flush of other cores), which enters the program's
//! Landlock domain and execs.
//!
//! The host asks over a socket pair ([`wire`]): a request's strings in a
//! memory file, its stdio and Landlock ruleset as descriptors; the init
//! answers with the program's pidfd (whence its pid in moat's namespace),
//! or the errno of what failed, and later with its wait status. Closing
//! the host's end ends the init, and in a PID namespace everything in it.

mod inside;
mod wire;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::oneshot;

pub(crate) use inside::InitSetup;
use inside::become_init;
use wire::{MAX_FDS, report, request};

/// How often a spawn is tried while exec fails with "text file busy" (a
/// program written a moment ago, whose writer's descriptor a process
/// forked meanwhile still holds until it execs in turn).
const BUSY_TRIES: u32 = 20;

/// A run's init, seen from the host. Dropping it ends the init.
pub(crate) struct RunInit {
    socket: Arc<AsyncFd<OwnedFd>>,
    /// The init's stand-in in moat's namespaces, moat's child: dropped
    /// with the rest (ending the init) once `drop` has stopped the reader.
    _stand_in: StandIn,
    /// Where the programs' connections are read from, when moat makes
    /// them ([`crate::process::connector`]), until taken.
    connect_listener: Option<OwnedFd>,
    reports: Arc<Mutex<Reports>>,
    /// One request at a time: the init answers them in order.
    requesting: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

/// Who waits for which report.
#[derive(Default)]
struct Reports {
    /// The request in flight, and where its answer goes.
    started: Option<(u64, oneshot::Sender<Started>)>,
    /// The programs' ends, by request id.
    exits: HashMap<u64, oneshot::Sender<i32>>,
    /// The programs' process ids in moat's namespace, by request id, from
    /// their hellos.
    pids: HashMap<u64, u32>,
}

/// The answer to a request: the program's pidfd, or why it did not start.
struct Started(Result<OwnedFd, i32>);

/// A program the init started.
pub(crate) struct InitChild {
    /// Its process id in moat's namespace (its process group's too).
    pub(crate) pid: u32,
    exit: oneshot::Receiver<i32>,
    status: Option<std::process::ExitStatus>,
    /// Held so the id is not reused while the child is in hand.
    _pidfd: OwnedFd,
}

/// A program the init started, and the host's ends of its pipes.
pub(crate) struct StartedProgram {
    pub(crate) child: InitChild,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// One program to start.
pub(crate) struct ProgramCall<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [String],
    pub(crate) env: &'a [(String, String)],
    pub(crate) cwd: &'a Path,
    /// Whether stdin is a pipe from the host (else `/dev/null`).
    pub(crate) piped_stdin: bool,
    /// The program's Landlock ruleset, when the kernel has Landlock.
    pub(crate) ruleset: Option<&'a OwnedFd>,
}

impl RunInit {
    /// Starts the init of a run as `setup` says (its socket is made here).
    pub(crate) async fn start(make_setup: impl FnOnce(OwnedFd) -> InitSetup) -> io::Result<Self> {
        let (host_end, init_end) = socket_pair()?;
        let setup = make_setup(init_end);
        let (reply, answer) = oneshot::channel();
        super::spawner::on_spawner_thread(move || {
            let forked = super::groups::start_helper(|| fork(&setup)).map(StandIn);
            // The host's copy of the init's end closes here.
            drop(setup);
            // Nobody waiting (the run stopped): the stand-in dropped ends it.
            let _ = reply.send(forked);
        })?;
        let stand_in = answer
            .await
            .map_err(|_| io::Error::other("the spawner thread is gone"))??;
        // SAFETY: an OwnedFd, open and the same until the AsyncFd drops it.
        let socket = Arc::new(unsafe { AsyncFd::register(host_end) }.map_err(io::Error::from)?);
        let mut words = [0u64; 3];
        let mut fds = [-1; MAX_FDS];
        let ready = receive(&socket, &mut words, &mut fds).await;
        // SAFETY: descriptors the kernel just gave this process, owned
        // from here on (closed if unused).
        let given: Vec<OwnedFd> = match &ready {
            Ok(got) => fds[..got.fds]
                .iter()
                .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
                .collect(),
            Err(_) => Vec::new(),
        };
        let failed = match ready {
            Ok(got) if got.words == 3 && words[0] == report::READY => {
                (words[2] != 0).then(|| io::Error::from_raw_os_error(words[2] as i32))
            }
            Ok(_) => Some(io::Error::other("the run's init ended as it started")),
            Err(error) => Some(error),
        };
        if let Some(error) = failed {
            return Err(error);
        }
        let connect_listener = given.into_iter().next();
        let reports = Arc::new(Mutex::new(Reports::default()));
        let reader = tokio::spawn(read_reports(socket.clone(), reports.clone()));
        Ok(Self {
            socket,
            _stand_in: stand_in,
            connect_listener,
            reports,
            requesting: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(0),
            reader,
        })
    }

    /// The listener of the programs' connections, once.
    pub(crate) fn take_connect_listener(&mut self) -> Option<OwnedFd> {
        self.connect_listener.take()
    }

    /// Starts `call`'s program.
    pub(crate) async fn spawn(&self, call: ProgramCall<'_>) -> io::Result<StartedProgram> {
        let request = request_file(&call)?;
        let (stdin_read, stdin_write) = if call.piped_stdin {
            let (read, write) = pipe()?;
            (read, Some(write))
        } else {
            (OwnedFd::from(std::fs::File::open("/dev/null")?), None)
        };
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        let mut fds = vec![
            request.as_raw_fd(),
            stdin_read.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ];
        let mut flags = 0;
        if let Some(ruleset) = call.ruleset {
            fds.push(ruleset.as_raw_fd());
            flags |= request::HAS_RULESET;
        }
        // moat's ends, made ready before anything starts: a failure here
        // leaves no program behind.
        let stdin = stdin_write
            .map(|fd| ChildStdin::from_std(std::process::ChildStdin::from(fd)))
            .transpose()?;
        let stdout = ChildStdout::from_std(std::process::ChildStdout::from(stdout_read))?;
        let stderr = ChildStderr::from_std(std::process::ChildStderr::from(stderr_read))?;
        let mut tries = 1;
        let (id, pidfd, exit) = loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            // Waited for before the request: a program may end at once.
            let (sender, exit) = oneshot::channel();
            lock(&self.reports).exits.insert(id, sender);
            let error = match self.request(id, flags, &fds).await {
                Ok(Started(Ok(pidfd))) => break (id, pidfd, exit),
                Ok(Started(Err(errno))) => io::Error::from_raw_os_error(errno),
                Err(error) => error,
            };
            {
                let mut reports = lock(&self.reports);
                reports.exits.remove(&id);
                reports.pids.remove(&id);
            }
            if error.raw_os_error() != Some(libc::ETXTBSY) || tries == BUSY_TRIES {
                return Err(error);
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let Some(pid) = lock(&self.reports).pids.remove(&id) else {
            // Unfollowable (it died before its hello, or the init did):
            // nothing of it may go on unseen.
            kill_abandoned(&pidfd);
            return Err(io::Error::other("the program did not say its process id"));
        };
        Ok(StartedProgram {
            child: InitChild {
                pid,
                exit,
                status: None,
                _pidfd: pidfd,
            },
            stdin,
            stdout,
            stderr,
        })
    }

    /// A non-blocking TCP socket of `family` made in the run's network,
    /// to connect to what its programs serve there.
    pub(crate) async fn socket(&self, family: i32) -> io::Result<OwnedFd> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let flags = request::SOCKET | ((family as u64) << request::FAMILY_SHIFT);
        match self.request(id, flags, &[]).await? {
            Started(Ok(socket)) => Ok(socket),
            Started(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// Sends request `id` and waits for its answer. A request abandoned
    /// half-way (the run stopped) leaves its program, if it starts, to be
    /// killed by the reader: nobody holds it.
    async fn request(&self, id: u64, flags: u64, fds: &[i32]) -> io::Result<Started> {
        let _one = self.requesting.lock().await;
        let (sender, answer) = oneshot::channel();
        lock(&self.reports).started = Some((id, sender));
        loop {
            let mut ready = self.socket.writable().await?;
            match ready.try_io(|socket| wire::send(socket.as_raw_fd(), &[id, flags], fds)) {
                Ok(sent) => break sent?,
                Err(_would_block) => continue,
            }
        }
        answer
            .await
            .map_err(|_| io::Error::other("the run's init is gone"))
    }
}

impl Drop for RunInit {
    fn drop(&mut self) {
        // The stand-in, a field, ends the init when it drops after this.
        self.reader.abort();
    }
}

/// The init's stand-in, moat's child; dropping it ends the init.
struct StandIn(libc::pid_t);

impl Drop for StandIn {
    fn drop(&mut self) {
        end(self.0);
    }
}

/// Forks the init from the spawner thread. In the child, only system
/// calls on `setup`, made before the fork.
fn fork(setup: &InitSetup) -> io::Result<libc::pid_t> {
    // SAFETY: the child runs `become_init`, which allocates nothing and
    // never returns.
    unsafe {
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => become_init(setup),
            pid => Ok(pid),
        }
    }
}

impl InitChild {
    /// Waits for the program's end.
    pub(crate) async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        // The init gone before the program's end: it was killed with it.
        let raw = (&mut self.exit).await.unwrap_or(libc::SIGKILL);
        let status = std::process::ExitStatus::from_raw(raw);
        self.status = Some(status);
        Ok(status)
    }
}

/// Reads the init's reports until it ends, handing each to who waits.
async fn read_reports(socket: Arc<AsyncFd<OwnedFd>>, reports: Arc<Mutex<Reports>>) {
    loop {
        let mut words = [0u64; 3];
        let mut fds = [-1; MAX_FDS];
        let got = match receive(&socket, &mut words, &mut fds).await {
            Ok(got) if got.words > 0 => got,
            _ => break,
        };
        // SAFETY: descriptors the kernel just gave this process.
        let mut fds = fds[..got.fds]
            .iter()
            .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) });
        if got.words != 3 {
            continue;
        }
        let [kind, id, value] = words;
        let mut reports = lock(&reports);
        match kind {
            report::HELLO => {
                if let Some(pid) = got.sender.filter(|&pid| pid > 0) {
                    reports.pids.insert(id, pid as u32);
                }
            }
            report::STARTED => {
                let answer = match (value, fds.next()) {
                    (0, Some(pidfd)) => Started(Ok(pidfd)),
                    (0, None) => Started(Err(libc::EIO)),
                    (errno, _) => Started(Err(errno as i32)),
                };
                match reports.started.take() {
                    Some((waiting, sender)) if waiting == id => {
                        if let Err(Started(Ok(pidfd))) = sender.send(answer) {
                            kill_abandoned(&pidfd);
                        }
                    }
                    other => {
                        reports.started = other;
                        reports.pids.remove(&id);
                        if let Started(Ok(pidfd)) = answer {
                            kill_abandoned(&pidfd);
                        }
                    }
                }
            }
            report::EXITED => {
                if let Some(sender) = reports.exits.remove(&id) {
                    let _ = sender.send(value as u32 as i32);
                }
            }
            _ => {}
        }
    }
    // The init is gone: whoever waits learns it.
    let mut reports = lock(&reports);
    reports.started = None;
    reports.exits.clear();
    reports.pids.clear();
}

/// Kills a program whose request nobody waits for any more.
fn kill_abandoned(pidfd: &OwnedFd) {
    // SAFETY: a signal through a pidfd this process holds.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

/// Receives one message, waiting for it.
async fn receive(
    socket: &AsyncFd<OwnedFd>,
    words: &mut [u64],
    fds: &mut [i32; MAX_FDS],
) -> io::Result<wire::Received> {
    loop {
        let mut ready = socket.readable().await?;
        match ready.try_io(|socket| wire::receive(socket.as_raw_fd(), words, fds)) {
            Ok(got) => return got,
            Err(_would_block) => continue,
        }
    }
}

/// Ends the init: its stand-in killed, the init dies with it (its
/// parent-death signal), and with the init everything in its namespace.
fn end(stand_in: libc::pid_t) {
    // SAFETY: kill and waitpid of this process's own child.
    unsafe {
        libc::kill(stand_in, libc::SIGKILL);
        let mut status = 0;
        while libc::waitpid(stand_in, &mut status, 0) == -1
            && *libc::__errno_location() == libc::EINTR
        {}
    }
    super::groups::end_helper(stand_in);
}

/// The request's strings in a memory file, as the init reads them
/// ([`inside`]'s `Call::map`).
fn request_file(call: &ProgramCall<'_>) -> io::Result<std::fs::File> {
    let nul = |bytes: &[u8]| -> io::Result<()> {
        if bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a program's argument, variable or path holds a NUL byte",
            ));
        }
        Ok(())
    };
    let mut bytes: Vec<u8> = Vec::new();
    let argc = 1 + call.args.len();
    bytes.extend_from_slice(&(argc as u32).to_ne_bytes());
    bytes.extend_from_slice(&(call.env.len() as u32).to_ne_bytes());
    let mut string = |text: &[u8]| -> io::Result<()> {
        nul(text)?;
        bytes.extend_from_slice(text);
        bytes.push(0);
        Ok(())
    };
    let program = call.program.as_os_str().as_bytes();
    string(program)?;
    string(call.cwd.as_os_str().as_bytes())?;
    string(program)?;
    for arg in call.args {
        string(OsStr::new(arg).as_bytes())?;
    }
    for (name, value) in call.env {
        string(format!("{name}={value}").as_bytes())?;
    }
    // SAFETY: memfd_create with a static name.
    let fd = unsafe { libc::memfd_create(c"moat-spawn".as_ptr(), libc::MFD_CLOEXEC) };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just made, owned by no one else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(&bytes)?;
    Ok(file)
}

/// A `SOCK_SEQPACKET` pair: the host's end (non-blocking) and the init's.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [-1; 2];
    // SAFETY: socketpair into a local array.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            ends.as_mut_ptr(),
        )
    };
    if made == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: descriptors just made.
    let (host, init) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    // SAFETY: fcntl and setsockopt on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(host.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(host.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        // The programs' hellos carry their process ids (translated into
        // moat's PID namespace by the kernel).
        let on: libc::c_int = 1;
        if libc::setsockopt(
            host.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == -1
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((host, init))
}

/// A pipe, close-on-exec: its read and write ends.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [-1; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: descriptors just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

fn lock(reports: &Mutex<Reports>) -> std::sync::MutexGuard<'_, Reports> {
    reports.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn init() -> RunInit {
        let seccomp = crate::process::socket_filter(crate::process::seccomp::Network::Hosts)
            .expect("the socket filter");
        RunInit::start(|socket| InitSetup {
            socket,
            namespaces: None,
            cgroup: None,
            max_processes: None,
            seccomp,
            connect_filter: None,
            proc_access: 0,
            startup_text: None,
            read_only: Vec::new(),
            host_pid: std::process::id(),
        })
        .await
        .expect("the init starts")
    }

    fn call<'a>(program: &'a Path, args: &'a [String]) -> ProgramCall<'a> {
        ProgramCall {
            program,
            args,
            env: &[],
            cwd: Path::new("/"),
            piped_stdin: false,
            ruleset: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_init_starts_programs_reports_their_ends_and_what_failed() {
        let init = init().await;
        let script = ["-c".to_owned(), "echo hi; echo oops >&2; exit 3".to_owned()];
        let mut started = init
            .spawn(call(Path::new("/bin/sh"), &script))
            .await
            .unwrap();
        let mut out = String::new();
        started.stdout.read_to_string(&mut out).await.unwrap();
        let mut err = String::new();
        started.stderr.read_to_string(&mut err).await.unwrap();
        let status = started.child.wait().await.unwrap();
        assert_eq!(
            (out.as_str(), err.as_str(), status.code()),
            ("hi\n", "oops\n", Some(3))
        );
        assert!(started.child.pid > 1);

        // Programs that cannot be run: the errno of the exec.
        let missing = init.spawn(call(Path::new("/no/such/program"), &[])).await;
        assert_eq!(
            missing.err().and_then(|e| e.raw_os_error()),
            Some(libc::ENOENT)
        );
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a program").unwrap();
        let not_a_program = init.spawn(call(&text, &[])).await;
        assert_eq!(
            not_a_program.err().and_then(|e| e.raw_os_error()),
            Some(libc::EACCES)
        );

        // A signal ends a program as a signal.
        let sleep = ["-c".to_owned(), "kill -TERM $$; sleep 5".to_owned()];
        let mut killed = init
            .spawn(call(Path::new("/bin/sh"), &sleep))
            .await
            .unwrap();
        let status = killed.child.wait().await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_program_outlives_neither_its_init_nor_a_request_with_a_nul() {
        let init = init().await;
        let sleep = ["60".to_owned()];
        let mut started = init
            .spawn(call(Path::new("/bin/sleep"), &sleep))
            .await
            .unwrap();
        let pid = started.child.pid as libc::pid_t;
        drop(init);
        let status = started.child.wait().await.unwrap();
        assert!(!status.success());
        // Gone, or a zombie left to whoever adopts it.
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit_once(')')
                .is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'))
        });
        assert!(gone, "the program ended with its init");

        let init = super::tests::init().await;
        let bad = ["a\0b".to_owned()];
        let refused = init.spawn(call(Path::new("/bin/echo"), &bad)).await;
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
    }
}
