//! A contained run's own network: the servers its programs start on its
//! loopback and the Unix sockets they make inside its grants are theirs to
//! reach, and nothing of another run's or outside the grants is. End to
//! end through the real `moat` binary, as root and as an unprivileged
//! user (`setpriv` to an unused uid, with a home of its own), with real
//! `python3`, `curl` and `node`; each refusal is also tried without
//! containment, where it must succeed.

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use moat_engine::DoneStatus;
use moat_testkit::single_done;

use crate::egress::{UnixSink, python, shell, shell_command, word};

/// The uid the unprivileged runs take (unused on the test machines).
const UNPRIVILEGED_UID: u32 = 64_123;

/// Whether the tests run as root.
fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A directory for one setting: a grant for the run, and (unprivileged)
/// the home and state of the user it runs as.
pub(crate) struct Setting {
    dir: tempfile::TempDir,
    /// What `moat` is started through (empty: as the tests' own user).
    wrapper: Vec<String>,
}

impl Setting {
    /// The tests' own user.
    pub(crate) fn this_user() -> Self {
        Self::made(Vec::new())
    }

    /// An unprivileged user: when root, `setpriv` to [`UNPRIVILEGED_UID`]
    /// with a home, store, cache and data of its own; when not root, the
    /// tests' own user is one already (`None`: nothing else to try).
    fn unprivileged() -> Option<Self> {
        if !root() {
            return None;
        }
        let mut setting = Self::made(Vec::new());
        let dir = setting.dir.path().to_path_buf();
        for sub in ["home", "state", "cache", "data", "config"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        own_all(&dir, UNPRIVILEGED_UID);
        let at = |sub: &str| dir.join(sub).display().to_string();
        setting.wrapper = vec![
            "setpriv".into(),
            format!("--reuid={UNPRIVILEGED_UID}"),
            format!("--regid={UNPRIVILEGED_UID}"),
            "--clear-groups".into(),
            "env".into(),
            format!("HOME={}", at("home")),
            format!("MOAT_STORE={}/moat.db", at("state")),
            format!("MOAT_CACHE_DIR={}", at("cache")),
            format!("MOAT_DATA_DIR={}", at("data")),
            format!("MOAT_SECRETS={}/no-secrets.json", at("data")),
            format!("XDG_CONFIG_HOME={}", at("config")),
        ];
        Some(setting)
    }

    fn made(wrapper: Vec<String>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Others may pass: the unprivileged user's directories are inside.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("grant")).unwrap();
        Self { dir, wrapper }
    }

    pub(crate) fn wrapper(&self) -> Vec<&str> {
        self.wrapper.iter().map(String::as_str).collect()
    }

    /// The setting's directory: the grant's parent, readable by others.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Gives `path` (and what is in it) to the setting's user, when that
    /// is not this one.
    pub(crate) fn own(&self, path: &Path) {
        if !self.wrapper.is_empty() {
            own_all(path, UNPRIVILEGED_UID);
        }
    }

    /// The directory the run may write, and runs in.
    pub(crate) fn grant(&self) -> PathBuf {
        self.dir.path().join("grant")
    }

    /// `--cwd` and `--allow-write` of the grant, and `extra`.
    pub(crate) fn flags(&self, extra: &[&str]) -> Vec<String> {
        let grant = self.grant().display().to_string();
        let mut flags = vec![format!("--cwd={grant}"), format!("--allow-write={grant}")];
        flags.extend(extra.iter().map(|flag| (*flag).to_owned()));
        flags
    }

    pub(crate) fn who(&self) -> &'static str {
        if self.wrapper.is_empty() {
            "this user"
        } else {
            "an unprivileged user"
        }
    }
}

/// Gives `dir` and what is in it to `uid`.
fn own_all(dir: &Path, uid: u32) {
    std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
    if !dir.is_dir() {
        return;
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            own_all(&path, uid);
        } else {
            std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
        }
    }
}

/// The settings to try: this user, and an unprivileged one when this is
/// root.
pub(crate) fn settings() -> Vec<Setting> {
    let mut all = vec![Setting::this_user()];
    all.extend(Setting::unprivileged());
    all
}

/// What the run's programs do with their own network: a web server one
/// program starts answers `curl` and `node` in others; a server on `::1`,
/// UDP, a Unix socket in the private directory (served by one program,
/// reached by another), one in the write grant, both from a thread, an
/// abstract one.
fn own_network_script(grant: &Path) -> String {
    // In the grant: the relative socket path below is resolved from it.
    let mut script = format!("cd {}; ", grant.display());
    script += "/usr/bin/python3 -m http.server --bind 127.0.0.1 8765 >/dev/null 2>&1 & server=$!; \
               for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.05; done; \
               echo tcp=$(curl -s -m5 -o /dev/null -w '%{http_code}' http://127.0.0.1:8765/); \
               node -e 'require(\"http\").get(\"http://localhost:8765/\", r => console.log(\"node=\" + r.statusCode)).on(\"error\", e => console.log(\"node=\" + e.code))'; ";
    script += &python(
        "ipv6",
        "s=socket.socket(socket.AF_INET6); s.bind((\"::1\", 0)); s.listen(); c=socket.create_connection(s.getsockname()[:2], 3)",
    );
    script += &python(
        "udp",
        "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((\"127.0.0.1\", 0)); c=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.sendto(b\"x\", s.getsockname()); s.settimeout(3); s.recv(9)",
    );
    // A server in one program, its client in another.
    script += "/usr/bin/python3 -c 'import os, socket; s=socket.socket(socket.AF_UNIX); s.bind(os.environ[\"TMPDIR\"] + \"/db.sock\"); s.listen(); c, _ = s.accept(); c.sendall(b\"pong\")' & db=$!; \
               for i in $(seq 100); do [ -S \"$TMPDIR/db.sock\" ] && break; sleep 0.05; done; ";
    script += &python(
        "private",
        "c=socket.socket(socket.AF_UNIX); c.connect(os.environ[\"TMPDIR\"] + \"/db.sock\"); c.settimeout(3); assert c.recv(9) == b\"pong\"",
    );
    script += &python(
        "granted",
        "s=socket.socket(socket.AF_UNIX); s.bind(\"granted.sock\"); s.listen(); c=socket.socket(socket.AF_UNIX); c.connect(\"granted.sock\")",
    );
    // From a thread other than the process's first, as a runtime's
    // network thread connects (Bun's, in Claude Code).
    script += &python(
        "thread",
        "s=socket.socket(socket.AF_UNIX); s.bind(\"thread.sock\"); s.listen(); t=socket.socket(); t.bind((\"127.0.0.1\", 0)); t.listen(); import concurrent.futures as f; x=f.ThreadPoolExecutor(1); x.submit(lambda: socket.socket(socket.AF_UNIX).connect(\"thread.sock\")).result(); x.submit(lambda: socket.create_connection(t.getsockname(), 3)).result()",
    );
    script += &python(
        "abstract",
        "s=socket.socket(socket.AF_UNIX); s.bind(\"\\0moat-own-\" + str(os.getpid())); s.listen(); c=socket.socket(socket.AF_UNIX); c.connect(s.getsockname())",
    );
    script += "kill $server $db 2>/dev/null; wait; ";
    script
}

#[test]
fn a_runs_programs_serve_and_reach_each_other_on_its_own_loopback_and_sockets() {
    for setting in settings() {
        let (output, events, printed) = shell(
            &own_network_script(&setting.grant()),
            &setting.flags(&[]),
            &setting.wrapper(),
        );
        let said = format!(
            "{}: printed: {printed}\nstderr: {}",
            setting.who(),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
        assert_eq!(word(&printed, "tcp"), "200", "{said}");
        assert_eq!(word(&printed, "node"), "200", "{said}");
        for probe in ["ipv6", "udp", "private", "granted", "thread", "abstract"] {
            assert_eq!(word(&printed, probe), "reached", "{probe}: {said}");
        }
    }
}

/// A free port on the host's loopback (for a server an uncontained run
/// starts there).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn another_runs_server_and_sockets_outside_the_grants_are_out_of_reach() {
    for setting in settings() {
        // A socket outside the grants (any user may connect to it), and a
        // link to it inside the grant.
        let outside_dir = setting.dir.path().join("outside");
        std::fs::create_dir(&outside_dir).unwrap();
        let outside = outside_dir.join("agent.sock");
        let sink = UnixSink::named(&outside);
        std::os::unix::fs::symlink(&outside, setting.grant().join("link.sock")).unwrap();

        for contained in [true, false] {
            let port = free_port();
            let no_contain: &[&str] = if contained { &[] } else { &["--no-contain"] };
            // The other run: a web server on its loopback (the host's, when
            // not contained) for as long as the test needs it.
            let mut other = shell_command(
                &format!(
                    "/usr/bin/python3 -m http.server --bind 127.0.0.1 {port} >/dev/null 2>&1 & sleep 20; kill $!"
                ),
                &setting.flags(no_contain),
                &setting.wrapper(),
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
            if !contained {
                // Up on the host's loopback before it is tried.
                let start = Instant::now();
                while TcpStream::connect(("127.0.0.1", port)).is_err() {
                    assert!(start.elapsed() < Duration::from_secs(20), "no server");
                    std::thread::sleep(Duration::from_millis(50));
                }
            } else {
                // Its server is in its own namespace: given time to start.
                std::thread::sleep(Duration::from_secs(2));
            }
            let before = sink.accepted.load(Ordering::SeqCst);
            // In the grant: the link's relative path is resolved from it.
            let mut script = format!("cd {}; ", setting.grant().display());
            script += &python(
                "other-run",
                &format!("socket.create_connection((\"127.0.0.1\", {port}), 3)"),
            );
            script += &python(
                "outside",
                &format!(
                    "socket.socket(socket.AF_UNIX).connect(\"{}\")",
                    outside.display()
                ),
            );
            script += &python(
                "link",
                "socket.socket(socket.AF_UNIX).connect(\"link.sock\")",
            );
            let (output, events, printed) =
                shell(&script, &setting.flags(no_contain), &setting.wrapper());
            let _ = other.kill();
            let _ = other.wait();
            let said = format!(
                "{}, contained: {contained}: printed: {printed}\nstderr: {}",
                setting.who(),
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
            let arrived = sink.accepted.load(Ordering::SeqCst) - before;
            if contained {
                assert_eq!(
                    word(&printed, "other-run"),
                    "refused:ECONNREFUSED",
                    "{said}"
                );
                assert_eq!(word(&printed, "outside"), "refused:EACCES", "{said}");
                assert_eq!(word(&printed, "link"), "refused:EACCES", "{said}");
                assert_eq!(arrived, 0, "{said}");
                // Refused visibly: one report each, naming the socket (the
                // link's, where it leads) and the flag that grants it.
                let denied = moat_testkit::error_messages(&events, "CAPABILITY_DENIED");
                let fix = format!("run with --allow-unix-socket={}", outside.display());
                assert_eq!(denied.len(), 2, "{denied:?}");
                assert!(denied.iter().all(|m| m.contains(&fix)), "{denied:?}");
            } else {
                for probe in ["other-run", "outside", "link"] {
                    assert_eq!(word(&printed, probe), "reached", "{probe}: {said}");
                }
                assert_eq!(arrived, 2, "{said}");
                assert!(
                    !moat_testkit::error_codes(&events).contains(&"CAPABILITY_DENIED".to_owned()),
                    "{said}"
                );
            }
        }
    }
}

/// Without a network namespace (Landlock and seccomp hold the line) the
/// host's loopback is shared: a program may not serve on it, as this
/// user or an unprivileged one; without containment it may.
#[test]
fn without_namespaces_a_program_may_not_serve_on_the_shared_loopback() {
    let serve = python(
        "serve",
        "s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()",
    );
    for setting in settings() {
        let mut wrapper = setting.wrapper();
        wrapper.extend(crate::egress::NO_NAMESPACES);
        let (output, events, printed) = shell(&serve, &setting.flags(&[]), &wrapper);
        let said = format!(
            "{}: {printed}\nstderr: {}",
            setting.who(),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(word(&printed, "serve"), "refused:EACCES", "{said}");
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");

        let (_, _, printed) = shell(&serve, &setting.flags(&["--no-contain"]), &wrapper);
        assert_eq!(
            word(&printed, "serve"),
            "reached",
            "{}: {printed}",
            setting.who()
        );
    }
}

/// How a run's programs are contained, said where a user looks: the
/// `init` event's `containment` (`namespaces`, `landlock+seccomp` where no
/// namespace may be made, `off` with `--no-contain`) and `moat doctor`
/// (that programs may bind no port where the loopback is shared), as this
/// user and an unprivileged one.
#[test]
fn the_init_event_and_doctor_say_how_the_programs_are_contained() {
    let containment_of = |wrapper: &[&str], extra: &[&str]| -> String {
        let output = crate::egress::moat_through(wrapper)
            .args(["run", "echo", "hi", "--allow-run=sh", "--output", "ndjson"])
            .args(extra)
            .output()
            .unwrap();
        let events = crate::cli::common::events(&output);
        let init = events
            .iter()
            .find(|event| matches!(event.payload, moat_engine::EventPayload::Init(_)))
            .unwrap_or_else(|| panic!("no init: {output:?}"));
        serde_json::to_value(init).unwrap()["metadata"]["containment"]
            .as_str()
            .unwrap_or_else(|| panic!("no containment in {init:?}"))
            .to_owned()
    };
    let doctor = |wrapper: &[&str]| -> String {
        let output = crate::egress::moat_through(wrapper)
            .arg("doctor")
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    for setting in settings() {
        let own = setting.wrapper();
        let mut shared = setting.wrapper();
        shared.extend(crate::egress::NO_NAMESPACES);
        let who = setting.who();
        assert_eq!(containment_of(&own, &[]), "namespaces", "{who}");
        assert_eq!(containment_of(&shared, &[]), "landlock+seccomp", "{who}");
        assert_eq!(containment_of(&own, &["--no-contain"]), "off", "{who}");
        let bind = "programs may bind no port (the host's loopback is shared)";
        assert!(doctor(&shared).contains(bind), "{who}: {}", doctor(&shared));
        assert!(!doctor(&own).contains(bind), "{who}: {}", doctor(&own));
    }
}

/// `--allow-unix-socket` grants one socket outside the grants: that one
/// is reached, its neighbour is not; and `moat show` records it.
#[test]
fn a_socket_granted_by_path_is_reached_and_no_other() {
    for setting in settings() {
        let outside_dir = setting.dir.path().join("outside");
        std::fs::create_dir(&outside_dir).unwrap();
        let granted = outside_dir.join("db.sock");
        let other = outside_dir.join("other.sock");
        let granted_sink = UnixSink::named(&granted);
        let other_sink = UnixSink::named(&other);
        let mut script = python(
            "granted",
            &format!(
                "socket.socket(socket.AF_UNIX).connect(\"{}\")",
                granted.display()
            ),
        );
        script += &python(
            "other",
            &format!(
                "socket.socket(socket.AF_UNIX).connect(\"{}\")",
                other.display()
            ),
        );
        let grant = format!("--allow-unix-socket={}", granted.display());
        let (output, events, printed) =
            shell(&script, &setting.flags(&[&grant]), &setting.wrapper());
        let said = format!(
            "{}: printed: {printed}\nstderr: {}",
            setting.who(),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
        assert_eq!(word(&printed, "granted"), "reached", "{said}");
        assert_eq!(word(&printed, "other"), "refused:EACCES", "{said}");
        assert_eq!(granted_sink.accepted.load(Ordering::SeqCst), 1, "{said}");
        assert_eq!(other_sink.accepted.load(Ordering::SeqCst), 0, "{said}");
        // The grant is recorded with the run.
        if setting.wrapper.is_empty() {
            let run = String::from_utf8_lossy(&output.stdout)
                .lines()
                .find_map(|line| {
                    let event: serde_json::Value = serde_json::from_str(line).ok()?;
                    event["metadata"]["runId"].as_str().map(str::to_owned)
                })
                .expect("a run id");
            let shown = crate::cli::common::moat()
                .args(["show", &run])
                .output()
                .unwrap();
            let shown = String::from_utf8_lossy(&shown.stdout);
            assert!(
                shown.contains(&format!("unix socket {}", granted.display())),
                "{shown}"
            );
        }
    }
}

/// A socket grant that cannot be one is refused before the run, in one
/// line naming the flag.
#[test]
fn a_socket_grant_of_a_file_or_a_missing_directory_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "").unwrap();
    for (path, reason) in [
        (file.clone(), "not a Unix socket"),
        (dir.path().join("no/such.sock"), "no such directory"),
    ] {
        let output = crate::cli::common::moat()
            .args(["run", "echo", "hi"])
            .arg(format!("--allow-unix-socket={}", path.display()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--allow-unix-socket") && stderr.contains(reason),
            "{stderr}"
        );
    }
}
