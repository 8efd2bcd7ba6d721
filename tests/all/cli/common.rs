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
