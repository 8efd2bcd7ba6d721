//! Helpers the tests that run the real `moat` binary share.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use moat_engine::{AgentEvent, EventPayload, PermissionRequestPayload};

/// `moat` with the tests' shared cache, their shared run store and data
/// directory (never the user's) and quiet logs.
pub fn moat() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moat"));
    command
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env(
            "MOAT_STORE",
            moat_testkit::repo_root().join("target/e2e-store/moat.db"),
        )
        // Installed adapters: the tests', never the user's.
        .env(
            "MOAT_DATA_DIR",
            moat_testkit::repo_root().join("target/e2e-data"),
        )
        // Secrets: none kept unless a test keeps its own; never the user's.
        .env(
            "MOAT_SECRETS",
            moat_testkit::repo_root().join("target/e2e-data/no-secrets.json"),
        )
        // Defaults for flags: none of the user's config file.
        .env(
            "XDG_CONFIG_HOME",
            moat_testkit::repo_root().join("target/e2e-data/no-config"),
        )
        .env_remove("MOAT_CONFIG")
        .env_remove("MOAT_LOG")
        .stdin(Stdio::null());
    command
}

/// `moat` with a run store of its own in `store`, so `@last` is the run
/// just started.
pub fn moat_in(store: &Path) -> Command {
    let mut command = moat();
    command.env("MOAT_STORE", store.join("moat.db"));
    command
}

/// Runs `moat ARGS` with the store in `store`; its stdout, asserting it
/// succeeded.
pub fn ok_in(store: &Path, args: &[&str]) -> String {
    let output = moat_in(store).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "moat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A run started in the background (`--output ndjson`), its events read
/// as they come.
pub struct Started {
    child: Child,
    events: mpsc::Receiver<AgentEvent>,
}

impl Started {
    /// Starts `command`.
    pub fn new(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let event = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not an event ({e}): {line}"));
                if sender.send(event).is_err() {
                    return;
                }
            }
        });
        Self { child, events }
    }

    /// The next event, within 60 s (a large component may wait its turn
    /// to load).
    pub fn next(&self) -> AgentEvent {
        self.events
            .recv_timeout(Duration::from_secs(60))
            .expect("an event within 60 s")
    }

    /// The process id of its `moat`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next event if one has come.
    pub fn try_next(&self) -> Option<AgentEvent> {
        self.events.try_recv().ok()
    }

    /// The next `permission_request`; the events before it go to `seen`.
    pub fn next_request(&self, seen: &mut Vec<AgentEvent>) -> PermissionRequestPayload {
        loop {
            let event = self.next();
            match event.payload {
                EventPayload::PermissionRequest(request) => return *request,
                EventPayload::Done(_) => {
                    panic!("the run ended without asking: {seen:?} {event:?}")
                }
                _ => seen.push(event),
            }
        }
    }

    /// The rest of the events, to the end of the run, and its exit code.
    pub fn finish(mut self) -> (Vec<AgentEvent>, Option<i32>) {
        let status = self.child.wait().unwrap();
        (self.events.iter().collect(), status.code())
    }
}

/// The events of an ndjson run.
pub fn events(output: &Output) -> Vec<AgentEvent> {
    String::from_utf8(output.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not an event ({e}): {line}"))
        })
        .collect()
}

/// A pseudo-terminal: what moat writes to the secondary end, read from the
/// primary as a person's terminal shows it, each piece with when it came.
pub(crate) struct Pty {
    primary: std::fs::File,
    secondary: std::os::fd::OwnedFd,
}

impl Pty {
    pub(crate) fn open() -> Pty {
        use std::os::fd::FromRawFd;
        let (mut primary, mut secondary) = (-1, -1);
        // SAFETY: openpty writes two new descriptors into the integers it
        // is given; the null name, termios and size ask for its defaults.
        let status = unsafe {
            libc::openpty(
                &mut primary,
                &mut secondary,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors are new and owned by nothing else.
        unsafe {
            Pty {
                primary: std::fs::File::from_raw_fd(primary),
                secondary: std::os::fd::OwnedFd::from_raw_fd(secondary),
            }
        }
    }

    /// Runs `command` with its stdout and stderr on the terminal; returns
    /// everything shown, piece by piece with the time it arrived, and how
    /// the command ended.
    pub(crate) fn run(
        self,
        command: std::process::Command,
    ) -> (Vec<(std::time::Instant, String)>, std::process::ExitStatus) {
        self.run_answering(command, None)
    }

    /// [`run`](Self::run), its stdin the terminal too: once the terminal
    /// shows `answer`'s first part, its second is typed.
    pub(crate) fn run_answering(
        self,
        mut command: std::process::Command,
        mut answer: Option<(&str, &str)>,
    ) -> (Vec<(std::time::Instant, String)>, std::process::ExitStatus) {
        use std::io::{Read, Write};
        let Pty {
            mut primary,
            secondary,
        } = self;
        if answer.is_some() {
            command.stdin(secondary.try_clone().unwrap());
        }
        let mut child = command
            .stdout(secondary.try_clone().unwrap())
            .stderr(secondary)
            .spawn()
            .expect("moat starts");
        // The command's copies are its own now: the reader sees the end
        // (EIO) once the command and its children close theirs.
        drop(command);
        let mut pieces = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(n) = primary.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
            pieces.push((std::time::Instant::now(), text));
            if let Some((shown, typed)) = answer {
                let seen: String = pieces.iter().map(|(_, text)| text.as_str()).collect();
                if seen.contains(shown) {
                    primary.write_all(typed.as_bytes()).unwrap();
                    answer = None;
                }
            }
        }
        (pieces, child.wait().unwrap())
    }
}

/// When `needle` first showed on the terminal.
pub(crate) fn shown_at(
    pieces: &[(std::time::Instant, String)],
    needle: &str,
) -> Option<std::time::Instant> {
    let mut seen = String::new();
    pieces.iter().find_map(|(at, text)| {
        seen.push_str(text);
        seen.contains(needle).then_some(*at)
    })
}

/// What a person types at a terminal, and when.
pub(crate) struct Typed<'a> {
    /// Typed once the terminal shows this.
    pub(crate) after: &'a str,
    /// What is typed.
    pub(crate) keys: &'a [u8],
    /// Typed only once the terminal no longer echoes (as a person would
    /// see that the prompt hides what they type): a program turns echo
    /// off after it shows its prompt.
    pub(crate) unechoed: bool,
}

/// A person at a terminal of `columns` columns: `command` runs on a
/// pseudo-terminal that is its controlling terminal (stdin, stdout,
/// stderr; Ctrl-C typed there interrupts it, `/dev/tty` is it), and each
/// step is typed in turn. Returns everything shown and how the command
/// ended.
pub(crate) fn at_a_terminal(
    mut command: Command,
    columns: u16,
    steps: &[Typed<'_>],
) -> (String, std::process::ExitStatus) {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::process::CommandExt;
    let (mut primary, mut secondary) = (-1, -1);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the integers; the
    // size is read, the name and termios left to their defaults.
    let status = unsafe {
        libc::openpty(
            &mut primary,
            &mut secondary,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(status, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    let (mut primary, secondary) = unsafe {
        (
            std::fs::File::from_raw_fd(primary),
            std::os::fd::OwnedFd::from_raw_fd(secondary),
        )
    };
    command
        .stdin(secondary.try_clone().unwrap())
        .stdout(secondary.try_clone().unwrap())
        .stderr(secondary.try_clone().unwrap());
    // SAFETY: only async-signal-safe calls between fork and exec: a
    // session of its own, whose controlling terminal is its stdin.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("the command starts");
    drop(command);
    drop(secondary);
    let fd = primary.as_raw_fd();
    let mut shown = Vec::new();
    let mut steps = steps.iter();
    let mut next = steps.next();
    let mut buffer = [0u8; 4096];
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, 60_000) };
        assert!(
            ready > 0,
            "the terminal showed nothing for 60 s: {}",
            String::from_utf8_lossy(&shown)
        );
        match primary.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => shown.extend_from_slice(&buffer[..n]),
        }
        if let Some(step) = next
            && String::from_utf8_lossy(&shown).contains(step.after)
        {
            if step.unechoed {
                wait_for_echo_off(&primary);
            }
            primary.write_all(step.keys).unwrap();
            next = steps.next();
        }
    }
    (
        String::from_utf8_lossy(&shown).into_owned(),
        child.wait().unwrap(),
    )
}

/// Waits (at most 10 s) until the terminal `primary` is the primary of no
/// longer echoes what is typed: its line discipline's settings are the
/// same from either end.
fn wait_for_echo_off(primary: &std::fs::File) {
    use std::os::fd::AsRawFd;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        // SAFETY: a zeroed termios, filled by tcgetattr on a valid fd.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        let read = unsafe { libc::tcgetattr(primary.as_raw_fd(), &mut termios) };
        if read == 0 && termios.c_lflag & libc::ECHO == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the terminal still echoes after 10 s");
}

/// What a terminal of `columns` columns shows after `output`: its lines,
/// as a VT100 draws them (automatic margins with the deferred wrap,
/// carriage return, line feed, erase in line, cursor up and down; colours
/// and other sequences ignored).
pub(crate) fn screen(output: &str, columns: usize) -> Vec<String> {
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut column) = (0usize, 0usize);
    let mut wrap_pending = false;
    let mut chars = output.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                column = 0;
                wrap_pending = false;
            }
            '\n' => {
                row += 1;
                wrap_pending = false;
            }
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut argument = String::new();
                let mut command = ' ';
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        command = c;
                        break;
                    }
                    argument.push(c);
                }
                let n: usize = argument.parse().unwrap_or(0);
                match command {
                    'K' => {
                        let line = &mut lines[row];
                        match n {
                            2 => line.clear(),
                            1 => line.iter_mut().take(column + 1).for_each(|c| *c = ' '),
                            _ => line.truncate(column),
                        }
                    }
                    'A' => row = row.saturating_sub(n.max(1)),
                    'B' => row += n.max(1),
                    'G' => column = n.max(1) - 1,
                    _ => {}
                }
                wrap_pending = false;
            }
            c if c.is_control() => {}
            c => {
                if wrap_pending {
                    row += 1;
                    column = 0;
                    wrap_pending = false;
                }
                while lines.len() <= row {
                    lines.push(Vec::new());
                }
                let line = &mut lines[row];
                while line.len() < column {
                    line.push(' ');
                }
                if column < line.len() {
                    line[column] = c;
                } else {
                    line.push(c);
                }
                if column + 1 == columns {
                    wrap_pending = true;
                } else {
                    column += 1;
                }
            }
        }
        while lines.len() <= row {
            lines.push(Vec::new());
        }
    }
    lines
        .into_iter()
        .map(|line| line.into_iter().collect::<String>().trim_end().to_owned())
        .collect()
}

/// Runs `command` with `input` on its stdin (then closed), its stdout
/// and stderr captured.
pub(crate) fn fed(command: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    // A command that exits without reading all of it closes the pipe:
    // what it did is in its output.
    let _ = child.stdin.take().expect("piped").write_all(input);
    child.wait_with_output().expect("the command ends")
}
